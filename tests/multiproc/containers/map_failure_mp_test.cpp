// containers::map with a failed owner: 3 processes x 1 thread; after a barrier rank 1 kills
// itself ("dead") or stops itself with SIGSTOP ("stalled"). Dead: ranks 0 and 2 see every
// operation on a key rank 1 owned end with an outcome (an update returns peer_failed, a packed
// array add too, a find's future fails not_executed or may_have_executed), the operations on
// live owners complete (the survivors meet through marker files before leaving), and the
// barrier throws naming rank 1. Stalled: a find on its key given a deadline ends
// deadline_exceeded (not_executed when it could not be sent) and a barrier with a deadline
// throws deadline_error; rank 0 then kills the stopped rank. Run by map_failure_test.sh under
// seriema-run --on-failure wait.
#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <seriema/base/error.hpp>
#include <signal.h>
#include <unistd.h>
#include <seriema/containers/containers.hpp>
#include <seriema/fabric/runtime.hpp>
#include <string>
#include <thread>

#include "support/broken_job.hpp"
#include "support/report_failure.hpp"

using namespace seriema;
using fabric::outcome;
using fabric::thread_context;
using invoke::call_status;
using test::fail;
using test::failures;

namespace {

using counts = containers::map<std::uint64_t, std::uint64_t>;

std::uint64_t key_owned_by(const counts& m, fabric::thread_id owner) {
  std::uint64_t key = 0;
  while (m.owner(key) != owner) ++key;
  return key;
}

// Tells the other survivor that this one is done with the live owners, and waits (bounded) for
// it to say the same: the barrier below fails at once (rank 1 is dead), so without this a
// survivor could leave and destroy its map while the other's operations on it are in flight.
// Whether `path` exists by 30 s from now (polled every millisecond).
bool file_appears(const std::string& path) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!std::ifstream(path) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return static_cast<bool>(std::ifstream(path));
}

void survivors_meet(thread_context& me, const std::string& marker) {
  const int other = me.id() == 0 ? 2 : 0;
  std::ofstream(fmt::format("{}.rank{}-live-done", marker, me.id())) << "done\n";
  if (!file_appears(fmt::format("{}.rank{}-live-done", marker, other))) {
    fail("rank {}: rank {} never finished its live operations", me.id(), other);
  }
}

// Rank 1 leaves (dies or stops) only once both survivors are out of the first barrier: a rank
// leaves a barrier when it has seen everyone arrive, and one that goes at once could leave
// another still in its last round, whose barrier would then fail (seen under ASan over tcp).
void past_the_barrier(thread_context& me, const std::string& marker) {
  if (me.id() != 1) {
    std::ofstream(fmt::format("{}.rank{}-past-barrier", marker, me.id())) << "past\n";
    return;
  }
  for (int survivor : {0, 2}) {
    if (!file_appears(fmt::format("{}.rank{}-past-barrier", marker, survivor))) {
      fail("rank 1: rank {} never left the first barrier", survivor);
    }
  }
}

using cells = containers::array<std::uint64_t>;

void survivor_body(thread_context& me, counts& m, cells& c, const std::string& marker) {
  const auto until = fabric::deadline_clock::now() + std::chrono::seconds(20);
  (void)me.wait_until([&] { return me.rt().peer_failed(1); }, until);
  if (!me.rt().peer_failed(1)) return fail("rank {}: rank 1's death was not noticed", me.id());
  const auto plus = [](std::uint64_t a, std::uint64_t b) { return a + b; };
  const std::uint64_t dead_key = key_owned_by(m, 1);
  const call_status update = m.reduce(dead_key, 1, plus);
  if (update != call_status::peer_failed) {
    fail("rank {}: an update to the dead owner returned '{}'", me.id(), fabric::to_string(update));
  }
  // A packed array update to the dead owner is refused as well, not kept in its batch.
  if (const call_status packed = c.add(1, 1); packed != call_status::peer_failed) {
    fail("rank {}: a packed add to the dead owner returned '{}'", me.id(),
         fabric::to_string(packed));
  }
  const outcome found = m.find(dead_key).try_get().result();
  if (found != outcome::not_executed && found != outcome::may_have_executed) {
    fail("rank {}: a find on the dead owner ended {}", me.id(), fabric::to_string(found));
  }
  // A live owner (the other survivor) still answers, in this sender's order.
  const std::uint64_t live_key = key_owned_by(m, me.id() == 0 ? 2 : 0);
  if (m.reduce(live_key, 5, plus) != call_status::ok) fail("rank {}: live update", me.id());
  const auto live = m.find(live_key).get();
  if (!live || *live < 5) fail("rank {}: the live owner's value is wrong", me.id());
  survivors_meet(me, marker);
  std::string barrier = "returned";
  try {
    m.barrier(std::chrono::seconds(10));
  } catch (const std::exception& e) {
    barrier = e.what();
  }
  if (barrier.find("rank 1") == std::string::npos) {
    fail("rank {}: the barrier did not fail naming rank 1: {}", me.id(), barrier);
  }
  fmt::print("rank {}: dead owner: update {}, find {}; barrier threw: {}\n", me.id(),
             fabric::to_string(update), fabric::to_string(found), barrier);
}

// Rank 1 stopped (SIGSTOP) after writing its pid to `pid_file`: nothing fails, deadlines end
// the waits. Rank 0 kills it at the end (after rank 2 is done with it).
void stalled_body(thread_context& me, counts& m, const std::string& pid_file) {
  const std::uint64_t stalled_key = key_owned_by(m, 1);
  // Every wait of the find, its send included (the first call to rank 1 asks it for chunks),
  // ends by the scope's deadline: the future ends deadline_exceeded, or not_executed when the
  // call could not even be sent.
  outcome found = outcome::pending;
  {
    thread_context::deadline_scope bounded(me, std::chrono::milliseconds(500));
    found = m.find(stalled_key).try_get().result();
  }
  if (found != outcome::deadline_exceeded && found != outcome::not_executed) {
    fail("rank {}: a find on the stalled owner ended {}", me.id(), fabric::to_string(found));
  }
  std::string barrier = "returned";
  try {
    m.barrier(std::chrono::seconds(2));
  } catch (const deadline_error& e) {
    barrier = e.what();
  } catch (const std::exception& e) {
    fail("rank {}: the barrier threw something else than deadline_error: {}", me.id(), e.what());
  }
  if (barrier == "returned") fail("rank {}: the barrier returned with a stalled worker", me.id());
  fmt::print("rank {}: stalled owner: find {}; barrier threw: {}\n", me.id(),
             fabric::to_string(found), barrier);
  // Rank 1 goes once both survivors are done with it: rank 2 says so, rank 0 kills it.
  test::kill_stalled_rank1(static_cast<int>(me.id()), pid_file + ".rank2-checked", pid_file);
}

void body(thread_context& me, bool stalled, const std::string& marker) {
  const std::string pid_file = marker + ".rank1-pid";
  counts m(me, fabric::deadline_clock::now() + std::chrono::seconds(30));
  cells c(me, 3, containers::distribution::cyclic,
          fabric::deadline_clock::now() + std::chrono::seconds(30));  // cell r: rank r's
  m.barrier(std::chrono::seconds(30));
  past_the_barrier(me, marker);
  if (me.id() == 1 && stalled) {
    std::ofstream(pid_file) << ::getpid() << "\n";
    std::raise(SIGSTOP);
    return;  // continued only by a SIGCONT nobody sends: rank 0 kills it
  }
  if (me.id() == 1) std::raise(SIGKILL);
  if (stalled) return stalled_body(me, m, pid_file);
  survivor_body(me, m, c, marker);
}

}  // namespace

int main(int argc, char** argv) {
  return test::three_rank_failure_main(argc, argv, "containers_map_failure_mp_test", body);
}

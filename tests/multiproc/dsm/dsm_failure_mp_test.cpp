// A shared space whose process dies or stalls: 3 processes x 1 thread. Rank 1 writes a block
// (so its public copy becomes the block's only master), stores atomic 1, takes mutex 0 and tells
// the others by a call; then it kills itself ("dead") or stops ("stalled").
// Dead: each survivor's lock of mutex 0 ends with seriema::error naming rank 1 as the dead
// holder; the read of the block throws block_lost naming rank 1 (nothing stale is returned);
// load_acquire of atomic 1 throws its value lost with rank 1; the barrier throws naming rank 1.
// Stalled: the lock and the barrier end by their deadlines with deadline_error; rank 0 then
// kills rank 1. The objects used are managed by ranks 0 and 2 (mutex 0: rank 0, block 3: rank 0,
// atomic 1: rank 2), so each error is about the dead or stalled holder, not a manager; the
// survivors keep their spaces until both are done. Run by dsm_failure_test.sh under seriema-run
// --on-failure wait.
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <fstream>
#include <seriema/base/error.hpp>
#include <seriema/dsm/space.hpp>
#include <seriema/fabric/runtime.hpp>
#include <string>
#include <thread>
#include <unistd.h>

#include "support/broken_job.hpp"
#include "support/report_failure.hpp"

using namespace seriema;
using fabric::deadline_clock;
using fabric::thread_context;
using test::fail;

namespace {

constexpr std::size_t words = 512;
constexpr std::uint64_t the_block = 3;
constexpr std::size_t the_mutex = 0;
constexpr std::size_t the_atomic = 1;

std::atomic<bool> rank1_ready{false};

deadline_clock::time_point in(std::chrono::milliseconds d) { return deadline_clock::now() + d; }

dsm::space_options small() {
  dsm::space_options o;
  o.bytes = std::size_t{1} << 20;
  o.block_bytes = 4096;
  return o;
}

// Runs `what`, which must throw E whose message names rank 1; prints how it ended.
template <class E, class F>
void expect_refusal(thread_context& me, const std::string& label, F what) {
  const auto start = deadline_clock::now();
  try {
    what();
    fail("rank {}: {}: returned instead of throwing", me.id(), label);
  } catch (const E& e) {
    const std::string message = e.what();
    if (message.find("rank 1") == std::string::npos) {
      fail("rank {}: {}: the error does not name rank 1: {}", me.id(), label, message);
    }
    fmt::print("rank {}: {}: refused after {:.2f} s: {}\n", me.id(), label,
               std::chrono::duration<double>(deadline_clock::now() - start).count(), message);
  } catch (const std::exception& e) {
    fail("rank {}: {}: threw the wrong error: {}", me.id(), label, e.what());
  }
}

void rank1(thread_context& me, dsm::space& sp, bool stalled, const std::string& marker) {
  sp.lock(me, the_mutex, in(std::chrono::seconds(30)));
  test::tell_survivors_then_leave(me, [] { rank1_ready = true; }, stalled, marker);
}

void survivor_dead(thread_context& me, dsm::space& sp, std::uint64_t* block) {
  const auto soon = [] { return in(std::chrono::seconds(30)); };
  expect_refusal<error>(me, "dead lock", [&] { sp.lock(me, the_mutex, soon()); });
  expect_refusal<dsm::block_lost>(me, "dead home", [&] {
    try {
      (void)sp.read(me, block, words, soon());
    } catch (const dsm::block_lost& e) {
      if (e.rank() != 1 || e.block() != the_block) {
        fail("rank {}: block_lost of block {} rank {}", me.id(), e.block(), e.rank());
      }
      throw;
    }
  });
  expect_refusal<error>(me, "dead atomic",
                        [&] { (void)sp.load_acquire(me, the_atomic, soon()); });
  expect_refusal<error>(me, "dead barrier", [&] { sp.barrier(me, soon()); });
}

// Each survivor keeps its space until the other is done with it too: a peer's atomic or
// publication into a region already unmapped would crash it (over tcp UCX applies atomics in
// software into the memory the key names). Files, since no collective works in a broken job.
void wait_for_other_survivor(thread_context& me, const std::string& marker) {
  const fabric::thread_id other = me.id() == 0 ? 2 : 0;
  std::ofstream(fmt::format("{}.rank{}-space-done", marker, me.id())) << "done\n";
  const std::string theirs = fmt::format("{}.rank{}-space-done", marker, other);
  const auto until = deadline_clock::now() + std::chrono::seconds(30);
  while (!std::ifstream(theirs) && deadline_clock::now() < until) {
    (void)me.poll();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!std::ifstream(theirs)) {
    fail("rank {}: rank {} never finished with the space", me.id(), other);
  }
}

void survivor_stalled(thread_context& me, dsm::space& sp, const std::string& marker) {
  const auto soon = [] { return in(std::chrono::milliseconds(500)); };
  expect_refusal<deadline_error>(me, "stalled lock", [&] { sp.lock(me, the_mutex, soon()); });
  try {
    sp.barrier(me, soon());
    fail("rank {}: the barrier with a stalled rank passed", me.id());
  } catch (const deadline_error& e) {
    fmt::print("rank {}: stalled barrier: refused: {}\n", me.id(), e.what());
  }
  wait_for_other_survivor(me, marker);
  test::kill_stalled_rank1(static_cast<int>(me.id()), marker + ".rank2-checked",
                           marker + ".rank1-pid");
}

void body(thread_context& me, bool stalled, const std::string& marker) {
  dsm::space sp(me.rt(), small(), in(std::chrono::seconds(30)));
  auto* block = reinterpret_cast<std::uint64_t*>(sp.base() + the_block * sp.block_bytes());
  if (me.id() == 1) {
    const std::span<std::uint64_t> w = sp.write(me, block, words);
    for (std::size_t i = 0; i < words; ++i) w[i] = i + 1;
    sp.store_release(me, the_atomic, 77, in(std::chrono::seconds(30)));
  }
  sp.barrier(me, in(std::chrono::seconds(30)));
  if (me.id() == 1) return rank1(me, sp, stalled, marker);
  if (!me.wait_until([] { return rank1_ready.load(); }, in(std::chrono::seconds(30)))) {
    return fail("rank {}: rank 1 never said it held the mutex", me.id());
  }
  if (stalled) return survivor_stalled(me, sp, marker);
  survivor_dead(me, sp, block);
  wait_for_other_survivor(me, marker);
}

}  // namespace

int main(int argc, char** argv) {
  return test::three_rank_failure_main(argc, argv, "dsm_failure_mp_test", body);
}

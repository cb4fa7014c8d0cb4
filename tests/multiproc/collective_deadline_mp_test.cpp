// Collectives end by their deadline (docs/failures.md, "Collectives"): with rank 1 stalled
// (SIGSTOP from rank 0), rank 0's barrier() ends by SERIEMA_TIMEOUT + 1 s with a deadline_error
// naming rank 1 as missing, a third rank's barrier with an explicit deadline ends by it + 1 s
// saying rank 0 did not release it, and rank 1, resumed, ends its own barrier at its deadline.
// Afterwards every collective (and finalize()) is refused at once on every rank, repeating the
// cause, and the runtime's destruction does not hang. Needs SERIEMA_TIMEOUT=3s and 2 or 3
// processes; a watchdog turns a hang into a message with every thread's stack.
#include <fmt/format.h>
#include <unistd.h>

#include <csignal>

#include <atomic>
#include <chrono>
#include <memory>
#include <seriema/base/error.hpp>
#include <seriema/fabric/runtime.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/mp_main.hpp"
#include "support/process_control.hpp"
#include "support/report_failure.hpp"

using namespace seriema;
using test::process_state;
using test::stop_process;
using test::fail;

namespace {

using seconds_f = std::chrono::duration<double>;
std::atomic<bool> continued{false};

extern "C" void on_continue(int) { continued.store(true); }

// Runs `collective`, which must throw deadline_error whose text holds `expected`, no later than
// `limit` after it began.
template <class F>
void expect_deadline(fabric::runtime& rt, const char* what, F collective, const std::string& expected,
                     seconds_f limit) {
  const auto start = std::chrono::steady_clock::now();
  try {
    collective();
    fail("rank {}: {} returned; a deadline_error was expected", rt.rank(), what);
    return;
  } catch (const deadline_error& e) {
    const seconds_f took = std::chrono::steady_clock::now() - start;
    fmt::print("rank {}: {} ended after {:.2f} s: {}\n", rt.rank(), what, took.count(), e.what());
    if (std::string(e.what()).find(expected) == std::string::npos) {
      fail("rank {}: {}: the error does not say \"{}\"", rt.rank(), what, expected);
    }
    if (took > limit) fail("rank {}: {} ended {:.2f} s after it began", rt.rank(), what, took.count());
  } catch (const std::exception& e) {
    fail("rank {}: {} threw something else than a deadline_error: {}", rt.rank(), what, e.what());
  }
}

// Returns every rank's pid.
std::vector<int> stall_and_time_out(fabric::runtime& rt) {
  const std::vector<int> pids = test::allgather_value<int>(static_cast<int>(getpid()));
  const auto timeout = rt.options().timeout;
  if (timeout != std::chrono::seconds(3)) fail("run with SERIEMA_TIMEOUT=3s");
  // Collectives work while everybody takes part.
  if (rt.allreduce_sum(static_cast<std::uint64_t>(rt.rank()) + 1) !=
      static_cast<std::uint64_t>(rt.size() * (rt.size() + 1) / 2)) {
    fail("rank {}: allreduce_sum gave a wrong sum", rt.rank());
  }
  rt.barrier(fabric::deadline_clock::now() + std::chrono::seconds(30));
  if (rt.rank() == 0) {
    if (!stop_process(pids[1])) fail("rank 1 (pid {}) did not stop", pids[1]);
    expect_deadline(rt, "barrier() with rank 1 stalled", [&] { rt.barrier(); },
                    "rank(s) 1 not arrived", timeout + std::chrono::seconds(1));
    if (rt.peer_failed(1)) fail("the stalled rank 1 was declared dead");
    if (::kill(pids[1], SIGCONT) != 0) fail("cannot resume rank 1");
  } else if (rt.rank() == 1) {
    // Enters the barrier only once resumed, so that rank 0 finds it missing.
    for (int i = 0; i < 3000 && !continued.load(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!continued.load()) fail("rank 1 was never stopped and resumed");
    expect_deadline(rt, "barrier(2 s) after the stall",
                    [&] { rt.barrier(fabric::deadline_clock::now() + std::chrono::seconds(2)); },
                    "without rank 0 releasing it", seconds_f(3));
  } else {
    expect_deadline(rt, "barrier(4 s) with rank 1 stalled",
                    [&] { rt.barrier(fabric::deadline_clock::now() + std::chrono::seconds(4)); },
                    "without rank 0 releasing it", seconds_f(5));
  }
  // Broken from now on: refused at once, repeating the cause.
  expect_deadline(rt, "a later allreduce_sum", [&] { (void)rt.allreduce_sum(1); },
                  "an earlier collective of this job passed its deadline", seconds_f(0.5));
  expect_deadline(rt, "finalize()", [&] { rt.finalize(); }, "passed its deadline", seconds_f(1));
  return pids;
}

// Rank 0 outlives the others (they still wait in their barriers when it is done; its exit would
// end theirs as a peer failure instead of a deadline): waits until their processes ended.
void wait_for_the_others(const std::vector<int>& pids) {
  for (std::size_t r = 1; r < pids.size(); ++r) {
    for (int i = 0; i < 2000; ++i) {
      const char state = process_state(pids[r]);
      if (state == '?' || state == 'Z' || state == 'X') break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

}  // namespace

int main() {
  std::signal(SIGCONT, on_continue);
  try {
    auto rt = std::make_unique<fabric::runtime>();
    if (rt->size() < 2 || rt->size() > 3) {
      fmt::print(stderr, "collective deadline test: needs 2 or 3 processes\n");
      return 2;
    }
    test::the_runtime() = rt.get();  // for test::allgather_value
    test::hang_watchdog watchdog(rt->rank(), std::chrono::seconds(60));
    watchdog.enter("collective deadlines");
    const std::vector<int> pids = stall_and_time_out(*rt);
    const int rank = rt->rank();
    if (rank == 0) wait_for_the_others(pids);
    const auto start = std::chrono::steady_clock::now();
    test::the_runtime() = nullptr;
    rt.reset();
    const seconds_f took = std::chrono::steady_clock::now() - start;
    if (took > seconds_f(5)) fail("rank {}: the runtime's destruction took {:.2f} s", rank, took.count());
    watchdog.leave();
    fmt::print("rank {}: exiting with status {}\n", rank, test::failures.load() == 0 ? 0 : 1);
    return test::failures.load() == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "FAILED: collective deadline test: {}\n", e.what());
    return 1;
  }
}

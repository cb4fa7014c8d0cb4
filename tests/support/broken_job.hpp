// The end of a 3-rank test program whose rank 1 died or stalled (no collective shutdown is
// possible): rank 2 says it is done, rank 0 waits for that (an exit of rank 0 before would be a
// second death for rank 2), and each survivor prints its exit status and leaves at once; and the
// main() such a program shares (three_rank_failure_main).
#pragma once

#include <fmt/format.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <seriema/fabric/runtime.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <string>
#include <thread>
#include <unistd.h>

#include "support/report_failure.hpp"

namespace seriema::test {

// The end of a stalled-rank-1 scenario, once each survivor is done with rank 1: rank 2 says so,
// rank 0 waits for that (bounded) and kills the stopped rank 1 (its pid in `pid_file`), so that
// run()'s end fails at once instead of waiting for a stopped rank. `checked_file`: a path both
// survivors can see.
inline void kill_stalled_rank1(int rank, const std::string& checked_file,
                               const std::string& pid_file) {
  std::fflush(stdout);
  if (rank == 2) {
    std::ofstream(checked_file) << "done\n";
    return;
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!std::ifstream(checked_file) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  pid_t stopped = 0;
  if (!(std::ifstream(pid_file) >> stopped) || stopped <= 0) return fail("rank 1's pid unknown");
  ::kill(stopped, SIGKILL);
}

// Rank 1's end in a 3-rank failure scenario: sends `tell` (a closure: the survivors' flag) to
// threads 0 and 2, flushes, then stops itself ("stalled": its pid goes to `marker`.rank1-pid
// for kill_stalled_rank1) or kills itself.
template <class F>
void tell_survivors_then_leave(fabric::thread_context& me, F tell, bool stalled,
                               const std::string& marker) {
  for (fabric::thread_id peer : {0u, 2u}) {
    if (me.call(peer, tell) != fabric::call_status::ok) {
      fail("rank 1: the call to rank {} was refused", peer);
    }
  }
  me.flush_endpoints();
  if (stalled) {
    std::ofstream(marker + ".rank1-pid") << ::getpid() << "\n";
    ::raise(SIGSTOP);
  }
  ::raise(SIGKILL);
}

// `marker`: a path both survivors can see (rank 2 creates `marker`.rank2-done).
[[noreturn]] inline void leave_broken_job(fabric::runtime& rt, const std::string& marker) {
  const std::string rank2_done = marker + ".rank2-done";
  if (rt.rank() == 2) std::ofstream(rank2_done) << "done\n";
  if (rt.rank() == 0) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!std::ifstream(rank2_done) && std::chrono::steady_clock::now() < until) {
      rt.progress_shared();  // rank 2's last messages to us need our progress (tcp)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  const int status = failures.load() == 0 ? 0 : 1;
  fmt::print("rank {}: exiting with status {}\n", rt.rank(), status);
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(status);
}

// The main() of a program run by tests/support/three_rank_failure.sh: `argv` is "dead|stalled
// <marker file>"; runs body(thread, stalled, marker) on 3 processes x 1 thread, prints how run()
// ended, and leaves the broken job. `name` is the program's, for messages.
inline int three_rank_failure_main(
    int argc, char** argv, const char* name,
    const std::function<void(fabric::thread_context&, bool, const std::string&)>& body) {
  if (argc != 3 || (std::string(argv[1]) != "dead" && std::string(argv[1]) != "stalled")) {
    fmt::print(stderr, "usage: {} dead|stalled <marker file>\n", name);
    return 2;
  }
  const bool stalled = std::string(argv[1]) == "stalled";
  const std::string marker = argv[2];
  try {
    fabric::runtime rt;
    if (rt.size() != 3 || rt.options().threads_per_process != 1) {
      fmt::print(stderr, "{}: needs 3 processes x 1 thread\n", name);
      return 2;
    }
    std::string ended = "returned normally";
    try {
      rt.run([&](fabric::thread_context& me) { body(me, stalled, marker); });
    } catch (const std::exception& e) {
      ended = e.what();
    }
    fmt::print("rank {}: run ended: {}\n", rt.rank(), ended);
    leave_broken_job(rt, marker);
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: {}\n", name, e.what());
    return 1;
  }
}

}  // namespace seriema::test

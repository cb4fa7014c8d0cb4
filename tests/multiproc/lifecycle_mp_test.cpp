// A rank that leaves the job before finalize, and the end of run() with a deadline (driven by
// lifecycle_test.sh and lifecycle_mpirun_test.sh). Scenarios (argv[1]), rank 1 being the one
// that leaves or stalls, the others checking what they see:
//   normal                  every rank runs and finalizes: the job succeeds.
//   exit-in-body            rank 1 calls std::exit(0) in its body while the others wait in run():
//                           their run() throws seriema::error naming rank 1.
//   return-before-run       rank 1 returns from main (its runtime leaked, never finalized) while
//                           the others wait in run(): the same.
//   return-before-finalize  rank 1 runs, then returns from main without finalize while the
//                           others wait in finalize(): their finalize() throws naming rank 1.
//   kill-before-traffic     rank 1 is killed (SIGKILL) before any call or collective went to it
//                           (UCX has no endpoint that could see it die): run() throws naming it.
//   stall                   rank 0 stops rank 1 (SIGSTOP) in its body; every rank calls
//                           run(body, deadline): rank 0's ends by it with a deadline_error naming
//                           rank 1, the others' too (rank 0 did not release them).
//   hang                    rank 0 stops rank 1 and waits in run() (for seriema-run --time-limit).
// argv[2] is a file where rank 1 writes when it left, so the others can say how long after they
// noticed. Every rank prints "rank R: exiting with status S"; checks print "FAILED: ...". A
// watchdog turns a hang into a message with every thread's stack.
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
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
using test::fail;

namespace {

using seconds_f = std::chrono::duration<double>;
constexpr int leaver = 1;
// Generous: the promise is the keepalive (1 s) plus a second; this only says "did not hang".
constexpr seconds_f noticed_within{10};
constexpr auto run_deadline = std::chrono::seconds(4);

std::string marker_path;
std::atomic<bool> continued{false};
std::atomic<int> calls_ran{0};  // "normal": calls run in this process
std::atomic<bool> leaver_in_body{false};  // "stall", "hang": rank 0 heard from rank 1's body

extern "C" void on_continue(int) { continued.store(true); }

std::int64_t realtime_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Rank 1, just before it leaves: when, for the others (written whole, then renamed).
void mark_leaving(const char* how) {
  fmt::print("rank {}: leaving the job: {}\n", leaver, how);
  std::fflush(stdout);
  const std::string temporary = marker_path + ".tmp";
  {
    std::ofstream out(temporary);
    out << realtime_ns() << "\n";
  }
  std::rename(temporary.c_str(), marker_path.c_str());
}

// How long ago rank 1 left (negative when it has not written yet).
double seconds_since_leaving() {
  std::ifstream in(marker_path);
  std::int64_t when = 0;
  if (!(in >> when)) return -1;
  return static_cast<double>(realtime_ns() - when) / 1e9;
}

// Runs `step`, which must throw seriema::error (not a deadline_error) naming rank 1, within
// noticed_within of rank 1 leaving. The error says how rank 1 left as the first report had it:
// the launcher ("seriema-run: exited with status 0 before finalize"), another survivor
// ("reported failed by rank 2"), or UCX when this rank had an endpoint to it ("Endpoint
// timeout", "Connection reset by remote peer").
template <class Step>
void expect_failure_naming_the_leaver(int rank, const char* what, Step step) {
  try {
    step();
    fail("rank {}: {} returned; it must fail naming rank {}", rank, what, leaver);
  } catch (const deadline_error& e) {
    fail("rank {}: {} passed a deadline instead of naming rank {}: {}", rank, what, leaver,
         e.what());
  } catch (const error& e) {
    const double after = seconds_since_leaving();
    const std::string text = e.what();
    fmt::print("rank {}: {} failed {:.3f} s after rank {} left: {}\n", rank, what, after, leaver,
               text);
    if (text.find(fmt::format("rank {} (", leaver)) == std::string::npos) {
      fail("rank {}: {}: the error does not name rank {}", rank, what, leaver);
    }
    if (after < 0) fail("rank {}: {} failed before rank {} left", rank, what, leaver);
    if (after > noticed_within.count()) {
      fail("rank {}: {} failed only {:.2f} s after rank {} left", rank, what, after, leaver);
    }
  }
}

// Runs `step`, which must throw deadline_error holding `expected`, by `deadline` + 5 s (rank 1
// gets there only once rank 0 resumed it after its own deadline).
template <class Step>
void expect_deadline(int rank, const char* what, Step step, const std::string& expected,
                     fabric::deadline_clock::time_point deadline) {
  try {
    step();
    fail("rank {}: {} returned; a deadline_error was expected", rank, what);
  } catch (const deadline_error& e) {
    const double late = seconds_f(fabric::deadline_clock::now() - deadline).count();
    fmt::print("rank {}: {} ended {:.3f} s after its deadline: {}\n", rank, what, late, e.what());
    if (std::string(e.what()).find(expected) == std::string::npos) {
      fail("rank {}: {}: the error does not say \"{}\"", rank, what, expected);
    }
    if (late > 5.0) fail("rank {}: {} ended {:.2f} s after its deadline", rank, what, late);
  } catch (const std::exception& e) {
    fail("rank {}: {} threw something else than a deadline_error: {}", rank, what, e.what());
  }
}

// A survivor that exits at once could be seen dying by another before that one heard of rank 1
// (over tcp a reset is seen at once): then its error would name the wrong rank. So every rank
// says when it is past the step under test (a file next to the marker), and waits, within
// 20 s, until every rank in `ranks` is.
void reached(const char* step, int rank) {
  std::ofstream(fmt::format("{}.{}.{}", marker_path, step, rank)) << "\n";
}
void wait_until_all_reached(const char* step, const std::vector<int>& ranks) {
  for (int r : ranks) {
    const std::string path = fmt::format("{}.{}.{}", marker_path, step, r);
    bool there = false;
    for (int i = 0; i < 2000 && !(there = std::ifstream(path).good()); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!there) fail("rank {} never got past {}", r, step);
  }
}

// Rank 0 outlives the others (its exit could end their waits as a peer failure instead of the
// way the test expects): waits until their processes ended.
void wait_for_the_others(const std::vector<int>& pids) {
  for (std::size_t r = 1; r < pids.size(); ++r) {
    for (int i = 0; i < 3000; ++i) {
      const char state = test::process_state(pids[r]);
      if (state == '?' || state == 'Z' || state == 'X') break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

int exit_status(int rank) {
  const int status = test::failures.load() == 0 ? 0 : 1;
  fmt::print("rank {}: exiting with status {}\n", rank, status);
  std::fflush(stdout);
  return status;
}

// Rank 1's body in "exit-in-body" and "kill-before-traffic": lets the others reach the end of
// run() first, then leaves.
void leave_from_body(const std::string& scenario) {
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  if (scenario == "exit-in-body") {
    mark_leaving("std::exit(0) in its body");
    std::exit(0);
  }
  mark_leaving("SIGKILL");
  std::raise(SIGKILL);
}

// Rank 1's runtime in the return-* scenarios: it returns from main with it never finalized nor
// destroyed. Kept reachable from here so that LeakSanitizer (the ASan pass) does not count it.
fabric::runtime* never_finalized = nullptr;

int leave_scenarios(const std::string& scenario) {
  auto* rt = new fabric::runtime();
  never_finalized = rt;
  const int rank = rt->rank();
  test::hang_watchdog watchdog(rank, std::chrono::seconds(60));
  watchdog.enter(scenario);
  if (scenario == "return-before-run" && rank == leaver) {
    mark_leaving("returned from main without finalize, before run()");
    return 0;
  }
  auto body = [&](fabric::thread_context& ctx) {
    if (ctx.rt().rank() == leaver && ctx.id() == ctx.rt().placement().global_id(leaver, 0)) {
      if (scenario == "exit-in-body" || scenario == "kill-before-traffic") {
        leave_from_body(scenario);
      }
    }
  };
  std::vector<int> survivors;
  for (int r = 0; r < rt->size(); ++r) {
    if (r != leaver) survivors.push_back(r);
  }
  if (rank == leaver || scenario == "return-before-finalize") {
    rt->run(body);
  } else {
    expect_failure_naming_the_leaver(rank, "run()", [&] { rt->run(body); });
    reached("reported", rank);
    wait_until_all_reached("reported", survivors);
  }
  if (scenario == "return-before-finalize" && rank == leaver) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the others are in finalize
    mark_leaving("returned from main without finalize, after run()");
    return 0;
  }
  if (scenario == "return-before-finalize") {
    expect_failure_naming_the_leaver(rank, "finalize()", [&] { rt->finalize(); });
    reached("reported", rank);
    wait_until_all_reached("reported", survivors);
  }
  never_finalized = nullptr;
  delete rt;
  watchdog.leave();
  return exit_status(rank);
}

int normal_scenario() {
  fabric::runtime rt;
  test::hang_watchdog watchdog(rt.rank(), std::chrono::seconds(60));
  watchdog.enter("normal");
  rt.run([&](fabric::thread_context& ctx) {
    const int next = (ctx.rt().rank() + 1) % ctx.rt().size();
    (void)ctx.call(ctx.rt().placement().global_id(next, 0),
                   [](fabric::thread_context&) { calls_ran.fetch_add(1); });
  });
  rt.run([](fabric::thread_context&) {}, std::chrono::seconds(30));  // ends well before it
  if (calls_ran.load() != rt.options().threads_per_process) {
    fail("rank {}: {} calls ran here, {} expected", rt.rank(), calls_ran.load(),
         rt.options().threads_per_process);
  }
  rt.finalize();
  watchdog.leave();
  return exit_status(rt.rank());
}

// "stall" and "hang": rank 0 stops rank 1 in its body.
int stall_scenario(const std::string& scenario) {
  fabric::runtime rt;
  const int rank = rt.rank();
  test::the_runtime() = &rt;  // for test::allgather_value
  test::hang_watchdog watchdog(rank, std::chrono::seconds(60));
  watchdog.enter(scenario);
  const std::vector<int> pids = test::allgather_value<int>(static_cast<int>(::getpid()));
  auto body = [&](fabric::thread_context& ctx) {
    if (ctx.id() != ctx.rt().placement().global_id(ctx.rt().rank(), 0)) return;
    if (rank == 0) {
      // Stops rank 1 inside its body (not still on its way into run()).
      if (!ctx.wait_until([] { return leaver_in_body.load(); },
                          fabric::deadline_clock::now() + std::chrono::seconds(30))) {
        fail("rank {}'s body never called rank 0", leaver);
      }
      if (!test::stop_process(pids[leaver])) fail("rank {} (pid {}) did not stop", leaver, pids[1]);
      fmt::print("rank 0: stopped rank {} (pid {})\n", leaver, pids[leaver]);
      std::fflush(stdout);
    } else if (rank == leaver) {
      if (ctx.call(ctx.rt().placement().global_id(0, 0), [](fabric::thread_context&) {
            leaver_in_body.store(true);
          }) != fabric::call_status::ok) {
        fail("rank {} could not call rank 0", leaver);
      }
      // Resumed by rank 0 once its run() ended (stall); killed by the launcher (hang).
      for (int i = 0; i < 6000 && !continued.load(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      if (!continued.load()) fail("rank {} was never stopped and resumed", leaver);
    }
  };
  if (scenario == "hang") {
    rt.run(body);  // until seriema-run's --time-limit stops the job
    fail("rank {}: run() returned with rank {} stopped", rank, leaver);
    return exit_status(rank);
  }
  const auto deadline = fabric::deadline_clock::now() + run_deadline;
  const std::string expected =
      rank == 0 ? fmt::format("rank(s) {} not arrived", leaver) : std::string("deadline passed");
  expect_deadline(rank, "run(body, deadline)", [&] { rt.run(body, deadline); }, expected,
                  deadline);
  if (rank == 0) {
    if (rt.peer_failed(leaver)) fail("the stalled rank {} was declared dead", leaver);
    if (::kill(pids[leaver], SIGCONT) != 0) fail("cannot resume rank {}", leaver);
  }
  // The ranks' deadlines differ a little (each took now + 4 s): none leaves before every run()
  // ended its own way.
  std::vector<int> everyone(pids.size());
  for (std::size_t r = 0; r < pids.size(); ++r) everyone[r] = static_cast<int>(r);
  reached("ended", rank);
  wait_until_all_reached("ended", everyone);
  if (rank == 0) wait_for_the_others(pids);
  // The collectives are broken now: finalize() is refused at once, naming the first cause.
  try {
    rt.finalize();
    fail("rank {}: finalize() after run()'s deadline returned", rank);
  } catch (const deadline_error& e) {
    fmt::print("rank {}: finalize() refused: {}\n", rank, e.what());
  }
  test::the_runtime() = nullptr;
  watchdog.leave();
  return exit_status(rank);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  if (argc != 3 || !(scenario == "normal" || scenario == "exit-in-body" ||
                     scenario == "return-before-run" || scenario == "return-before-finalize" ||
                     scenario == "kill-before-traffic" || scenario == "stall" ||
                     scenario == "hang")) {
    fmt::print(stderr,
               "usage: lifecycle_mp_test normal|exit-in-body|return-before-run|"
               "return-before-finalize|kill-before-traffic|stall|hang <marker file>\n");
    return 2;
  }
  marker_path = argv[2];
  std::signal(SIGCONT, on_continue);
  try {
    if (scenario == "normal") return normal_scenario();
    if (scenario == "stall" || scenario == "hang") return stall_scenario(scenario);
    return leave_scenarios(scenario);
  } catch (const std::exception& e) {
    fmt::print(stderr, "FAILED: lifecycle test ({}): {}\n", scenario, e.what());
    return 1;
  }
}

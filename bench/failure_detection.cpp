// Failure detection and deadline overshoot, measured (bench/run-failure-detection.sh runs it):
//   detect <marker>: 2 ranks x 1 thread; rank 0 puts 10 000 call_returns in flight to rank 1,
//     which kills itself inside call #100 after writing the time to <marker>; rank 0 prints one
//     JSON line: seconds from the death to the last slot ended, and how the slots ended.
//   overshoot: 2 ranks x 1 thread; rank 0 waits on call_returns that rank 1 (busy, not polling)
//     cannot answer, with a deadline of --deadline-ms, --waits times, and the same number of
//     std::this_thread::sleep_until to the same deadline (the baseline: what the OS alone
//     overshoots); prints one JSON line with p50/p99 of both.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <fstream>
#include <memory>
#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/invoke.hpp>
#include <string>
#include <thread>
#include <vector>

#include "json_report.hpp"

using namespace seriema;
using fabric::outcome;
using fabric::thread_context;

namespace {

constexpr std::uint64_t in_flight = 10000;
constexpr std::uint64_t dies_in = 99;
std::string marker;

std::int64_t realtime_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::uint64_t run_or_die(std::uint64_t index) {
  if (index == dies_in) {
    std::ofstream(marker) << realtime_ns() << "\n";
    std::raise(SIGKILL);
  }
  return index;
}

void detect(thread_context& ctx, const std::string& channel) {
  if (ctx.id() == 1) {
    (void)ctx.wait_until([] { return false; },
                         fabric::deadline_clock::now() + std::chrono::seconds(60));
    return;
  }
  auto slots = std::make_unique<fabric::return_slot<std::uint64_t>[]>(in_flight);
  for (std::uint64_t i = 0; i < in_flight; ++i) {
    auto f = [i](thread_context&) { return run_or_die(i); };
    if (channel == "send") {
      (void)ctx.call_return(1, f, slots[i]);
    } else {
      (void)invoke::call_return<invoke::channel::write, invoke::policy::retry_async>(ctx, 1, f,
                                                                                    slots[i]);
    }
  }
  std::uint64_t count[7] = {};
  for (std::uint64_t i = 0; i < in_flight; ++i) {
    ++count[static_cast<int>(ctx.wait_for(slots[i], std::chrono::seconds(60)))];
  }
  const std::int64_t ended = realtime_ns();
  std::int64_t death = 0;
  std::ifstream(marker) >> death;
  const seriema::bench::report_json line = {
      {"channel", channel},
      {"seconds", seriema::bench::rounded(static_cast<double>(ended - death) / 1e9, 4)},
      {"keepalive_ms", ctx.rt().options().ucx.keepalive_ms},
      {"done", count[1]},
      {"may_have_executed", count[4]},
      {"not_executed", count[3]},
      {"other", in_flight - count[1] - count[4] - count[3]}};
  fmt::print("{}\n", line.dump());  // one line: the runner keeps the lines that start with {
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

std::atomic<bool> stop_busy{false};

void overshoot(thread_context& ctx, int waits, int deadline_ms) {
  if (ctx.id() == 1) {
    // Busy without polling, so that (almost) no reply comes before a deadline; stopped by rank
    // 0's last call (polled once every 500 ms; waits answered by a poll are not counted).
    while (!stop_busy.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      (void)ctx.poll();
    }
    return;
  }
  const auto deadline = std::chrono::milliseconds(deadline_ms);
  std::vector<double> waited, slept;
  std::vector<std::unique_ptr<fabric::return_slot<int>>> slots;
  for (int i = 0; i < waits; ++i) {
    slots.push_back(std::make_unique<fabric::return_slot<int>>());
    (void)ctx.call_return(1, [](thread_context&) { return 1; }, *slots.back());
    auto until = fabric::deadline_clock::now() + deadline;
    if (ctx.wait_for(*slots.back(), until) != outcome::deadline_exceeded) continue;
    waited.push_back(std::chrono::duration<double, std::micro>(fabric::deadline_clock::now() -
                                                               until).count());
    until = fabric::deadline_clock::now() + deadline;
    std::this_thread::sleep_until(until);
    slept.push_back(std::chrono::duration<double, std::micro>(fabric::deadline_clock::now() -
                                                              until).count());
  }
  (void)ctx.call(1, [](thread_context&) { stop_busy = true; });
  auto p50_p99 = [](const std::vector<double>& v) {
    return seriema::bench::report_json{{"p50", seriema::bench::rounded(percentile(v, 0.5), 1)},
                                       {"p99", seriema::bench::rounded(percentile(v, 0.99), 1)}};
  };
  const seriema::bench::report_json line = {{"waits", waited.size()},
                                            {"deadline_ms", deadline_ms},
                                            {"wait_overshoot_us", p50_p99(waited)},
                                            {"sleep_overshoot_us", p50_p99(slept)}};
  fmt::print("{}\n", line.dump());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"failure detection and deadline overshoot (bench/run-failure-detection.sh)"};
  std::string what, channel = "send";
  int waits = 200, deadline_ms = 10;
  app.add_option("what", what, "detect | overshoot")->required();
  app.add_option("--marker", marker, "detect: file the callee writes its death time to");
  app.add_option("--channel", channel, "detect: send | write");
  app.add_option("--waits", waits, "overshoot: waits");
  app.add_option("--deadline-ms", deadline_ms, "overshoot: each wait's deadline");
  CLI11_PARSE(app, argc, argv);
  fabric::runtime rt;
  if (rt.size() != 2 || rt.options().threads_per_process != 1) {
    fmt::print(stderr, "failure_detection: needs 2 processes x 1 thread\n");
    return 2;
  }
  if (what == "detect") {
    try {
      rt.run([&](thread_context& ctx) { detect(ctx, channel); });
    } catch (const std::exception&) {
      // run() ends naming the dead rank: expected.
    }
    std::fflush(stdout);
    std::_Exit(0);
  }
  rt.run([&](thread_context& ctx) { overshoot(ctx, waits, deadline_ms); });
  return 0;
}

// invoke_bursts: a bursty load in every batching mode (trad, ovfl, adaptive; write for reference)
// from one thread of rank 0 to one thread of rank 1. A burst is n calls of 8 bytes (n drawn
// log-uniformly from 1..10 000 with a fixed seed, the same bursts in every mode) whose function
// does --work-ns of work at the receiver, followed by one call_return (FIFO behind them) whose
// future the sender waits for after computing for --pause-us without polling (a burst of
// requests whose results are needed after some local work). The time of the
// whole load, per mode, medians of repetitions with the modes alternating; reported against the
// best fixed mode (issue 41: adaptive in <= 0.8 x its time).
//   SERIEMA_THREADS=1 seriema-run -n 2 -- invoke_bursts --json out.json
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/invoke.hpp>
#include <string>
#include <vector>

#include "bench_support.hpp"
#include "json_report.hpp"

using namespace seriema;
using namespace seriema::bench;
using fabric::thread_context;
using invoke::call_status;
using invoke::channel;

namespace {

// Written and read by the receiving thread only (rank 1).
std::uint64_t calls_run = 0;
std::uint64_t work_sink = 0;
bool stop_receiving = false;
std::uint64_t work_iterations = 0;  // per call, set before the runtime starts

struct options {
  int bursts = 400;
  double work_ns = 20;
  double pause_us = 20;
  int reps = 5;
  std::string transport;
  std::string json;
};

// One call's work at the receiver: a dependent chain of multiplications.
struct burst_call {
  std::uint64_t sequence;
  void operator()() const {
    std::uint64_t x = sequence | 1;
    for (std::uint64_t i = 0; i < work_iterations; ++i) x = x * 0x9e3779b97f4a7c15ULL + i;
    work_sink += x;
    ++calls_run;
  }
};

// Iterations of burst_call's loop that take about `ns` here.
std::uint64_t calibrate(double ns) {
  constexpr std::uint64_t probe = 1 << 22;
  const std::uint64_t saved = work_iterations;
  work_iterations = probe;
  const auto start = clock_type::now();
  burst_call{1}();
  const double per_iteration =
      std::chrono::duration<double, std::nano>(clock_type::now() - start).count() / probe;
  work_iterations = saved;
  return static_cast<std::uint64_t>(ns / per_iteration);
}

void compute_for(double us) {
  const auto until = clock_type::now() + std::chrono::duration<double, std::micro>(us);
  while (clock_type::now() < until) {
  }
}

// Every burst in mode C, each waited for; the seconds of the whole load.
template <channel C>
double load(thread_context& ctx, const std::vector<std::uint32_t>& bursts, double pause_us) {
  const fabric::thread_id dest = 1;
  std::uint64_t sequence = 0, last_count = 0;
  const auto start = clock_type::now();
  for (std::uint32_t n : bursts) {
    for (std::uint32_t i = 0; i < n; ++i) {
      const call_status st =
          invoke::call<C, invoke::policy::retry>(ctx, dest, burst_call{sequence++});
      if (st != call_status::ok) {
        throw error(fmt::format("{}: {}", invoke::to_string(C), fabric::to_string(st)));
      }
    }
    auto done = invoke::call_return<C, invoke::policy::retry>(ctx, dest, [] { return calls_run; });
    compute_for(pause_us);  // the burst's results are needed after this computation
    // The receiver's count: every call of the burst ran before the reply (FIFO).
    const std::uint64_t count = done.get();
    if (sequence != n && count - last_count != n) {
      throw error(fmt::format("{}: the receiver ran {} calls of a burst of {}",
                              invoke::to_string(C), count - last_count, n));
    }
    last_count = count;
  }
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

double load_in(thread_context& ctx, channel c, const std::vector<std::uint32_t>& bursts,
               double pause_us) {
  switch (c) {
    case channel::write:
      return load<channel::write>(ctx, bursts, pause_us);
    case channel::trad:
      return load<channel::trad>(ctx, bursts, pause_us);
    case channel::ovfl:
      return load<channel::ovfl>(ctx, bursts, pause_us);
    default:
      return load<channel::adaptive>(ctx, bursts, pause_us);
  }
}

}  // namespace

int main(int argc, char** argv) try {
  options opt;
  CLI::App app{"invoke_bursts: a bursty load (1..10 000 calls, waited for, then a pause) in the "
               "batching modes"};
  app.add_option("--bursts", opt.bursts, "bursts per load")->check(CLI::Range(1, 1000000));
  app.add_option("--work-ns", opt.work_ns, "work per call at the receiver (ns)")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--pause-us", opt.pause_us, "sender's computation after each burst (us)")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--reps", opt.reps, "repetitions (median reported)")->check(CLI::Range(1, 100));
  app.add_option("--transport", opt.transport, "label for the output (shm, tcp)");
  app.add_option("--json", opt.json, "write results here (rank 0)");
  CLI11_PARSE(app, argc, argv);

  work_iterations = calibrate(opt.work_ns);
  fabric::runtime rt;
  if (rt.size() != 2 || rt.options().threads_per_process != 1) {
    fmt::print(stderr, "invoke_bursts: needs 2 processes x 1 thread: SERIEMA_THREADS=1 "
                       "seriema-run -n 2 -- invoke_bursts\n");
    return 2;
  }
  std::mt19937_64 random(41);
  std::vector<std::uint32_t> bursts;
  std::uint64_t calls = 0;
  for (int b = 0; b < opt.bursts; ++b) {
    const double u = std::uniform_real_distribution<double>(0, 4)(random);  // log10 of the size
    bursts.push_back(static_cast<std::uint32_t>(std::pow(10.0, u)));
    calls += bursts.back();
  }
  const std::vector<channel> modes = {channel::write, channel::trad, channel::ovfl,
                                      channel::adaptive};
  std::vector<std::vector<double>> seconds(modes.size());
  for (int rep = -1; rep < opt.reps; ++rep) {  // rep -1: warm-up (rings, records)
    for (std::size_t m = 0; m < modes.size(); ++m) {
      rt.run([&](thread_context& ctx) {
        if (ctx.id() == 1) {
          stop_receiving = false;
          while (!stop_receiving) (void)ctx.poll();
          return;
        }
        const double s = load_in(ctx, modes[m], bursts, opt.pause_us);
        if (rep >= 0) seconds[m].push_back(s);
        (void)ctx.call(1, [] { stop_receiving = true; });
      });
    }
  }
  if (rt.rank() != 0) return 0;
  std::vector<double> medians;
  for (const auto& s : seconds) medians.push_back(median(s));
  double best_fixed = medians[0];
  for (std::size_t m = 1; m + 1 < modes.size(); ++m) best_fixed = std::min(best_fixed, medians[m]);
  const machine_info machine = machine_info::here();
  fmt::print("# invoke_bursts [{}]: {} bursts of 1..10 000 calls ({} calls), {} ns of work per "
             "call at the receiver, {} us of computation before each burst's completion is waited for\n",
             opt.transport, opt.bursts, calls, opt.work_ns, opt.pause_us);
  fmt::print("{}\n", machine.line());
  fmt::print("# medians of {} repetitions, the modes alternating\n\n", opt.reps);
  fmt::print("{:>9} | {:>10} | {:>14}\n", "mode", "seconds", "/ best fixed");
  for (std::size_t m = 0; m < modes.size(); ++m) {
    fmt::print("{:>9} | {:>10.4f} | {:>14.2f}\n", invoke::to_string(modes[m]), medians[m],
               medians[m] / best_fixed);
  }
  const double ratio = medians.back() / best_fixed;
  fmt::print("\ntargets [{}]:\n  {:<55} {:>8.2f}  {}\n", opt.transport,
             "adaptive bursty load <= 0.8 x the best fixed mode", ratio,
             ratio <= 0.8 ? "met" : "MISSED");
  if (!opt.json.empty()) {
    report_json rows = report_json::array();
    for (std::size_t m = 0; m < modes.size(); ++m) {
      rows.push_back({{"mode", invoke::to_string(modes[m])},
                      {"seconds", rounded_array(seconds[m], 6)},
                      {"median_s", rounded(medians[m], 6)}});
    }
    write_report(opt.json, {{"benchmark", "invoke_bursts"},
                            {"transport", opt.transport},
                            {"machine", machine.json()},
                            {"date", utc_now()},
                            {"bursts", opt.bursts},
                            {"calls", calls},
                            {"work_ns", opt.work_ns},
                            {"pause_us", opt.pause_us},
                            {"modes", rows},
                            {"adaptive_to_best_fixed", rounded(ratio, 3)}});
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "invoke_bursts: {}\n", e.what());
  return 1;
}

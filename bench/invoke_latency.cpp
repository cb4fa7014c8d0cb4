// invoke_latency: round trip of call_return (rank 0's thread asks rank 1's thread for a value and
// waits for it with wait_for) over the send-based path and the one-sided Messenger, against
// ucx_perftest ucp_am_lat measured in the same run (its one-way latency x 2). Median and 99th
// percentile of many single round trips.
//   SERIEMA_THREADS=1 seriema-run -n 2 -- invoke_latency --json bench/results/invoke_latency-shm.json
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <optional>
#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/invoke.hpp>
#include <string>
#include <vector>

#include "bench_support.hpp"

using namespace seriema;
using namespace seriema::bench;
using fabric::thread_context;
using invoke::call_status;
using invoke::channel;

namespace {

bool stop_receiving = false;  // rank 1's thread only

struct options {
  std::string transport;
  int reps = 3;
  std::uint64_t round_trips = 20000;
  perftest_options perftest;
  std::string json;
};

constexpr std::uint64_t round_trip_block = 500;

// Round trips of call_return in mode C; each is timed alone (nanoseconds).
template <channel C>
void round_trips(thread_context& ctx, std::uint64_t n, std::vector<double>& out) {
  for (std::uint64_t i = 0; i < n; ++i) {
    fabric::return_slot<std::uint64_t> slot;
    const auto start = clock_type::now();
    call_status st = invoke::call_return<C, invoke::policy::retry>(
        ctx, 1, [i] { return i + 1; }, slot);
    if (st != call_status::ok) throw error(fmt::format("call_return: {}", fabric::to_string(st)));
    ctx.wait_for(slot);
    const auto end = clock_type::now();
    if (!slot.ready() || slot.value() != i + 1) throw error("call_return: wrong or failed reply");
    out.push_back(std::chrono::duration<double, std::nano>(end - start).count());
  }
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto index = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(index, v.size() - 1)];
}

}  // namespace

int main(int argc, char** argv) try {
  const launch_state launch = launch_state::capture();

  options opt;
  CLI::App app{"invoke_latency: call_return round trip (send-based and one-sided) vs ucx_perftest "
               "ucp_am_lat x 2 in the same run"};
  app.add_option("--transport", opt.transport, "label for the output (shm, tcp); default: guessed");
  app.add_option("--reps", opt.reps, "repetitions (each: round trips per mode, then perftest)")
      ->check(CLI::Range(1, 100));
  app.add_option("--round-trips", opt.round_trips, "timed round trips per mode and repetition");
  opt.perftest.add_to(app);
  app.add_option("--json", opt.json, "write results here (rank 0)");
  CLI11_PARSE(app, argc, argv);

  fabric::runtime rt;
  if (rt.size() != 2 || rt.options().threads_per_process != 1) {
    fmt::print(stderr, "invoke_latency: needs 2 processes x 1 thread: SERIEMA_THREADS=1 "
                       "seriema-run -n 2 -- invoke_latency\n");
    return 2;
  }
  pair_setup pair(rt, launch, opt.perftest, opt.transport, "invoke_latency");
  const std::string& perftest_tls = pair.perftest_tls;
  std::optional<perftest_runner>& perftest = pair.perftest;

  std::vector<double> send_ns, write_ns, raw_rtt_us;
  for (int rep = -1; rep < opt.reps; ++rep) {  // rep -1: warm-up (endpoints, chunks)
    rt.run([&](thread_context& ctx) {
      if (ctx.id() == 1) {
        stop_receiving = false;
        while (!stop_receiving) (void)ctx.poll();
        return;
      }
      std::vector<double> scratch;
      const std::uint64_t n = rep < 0 ? 1000 : opt.round_trips;
      // The modes alternate in blocks, so that a spell of the VM (or of the TCP connection)
      // falls on both instead of on whichever ran first.
      for (std::uint64_t done = 0; done < n; done += round_trip_block) {
        const std::uint64_t block = std::min(round_trip_block, n - done);
        round_trips<channel::send>(ctx, block, rep < 0 ? scratch : send_ns);
        round_trips<channel::write>(ctx, block, rep < 0 ? scratch : write_ns);
      }
      (void)ctx.call(1, [] { stop_receiving = true; });
    });
    if (rep >= 0) {
      if (rt.rank() == 0 && perftest) {
        perftest_result r = perftest->run(8, opt.round_trips, 1000, "ucp_am_lat");
        if (r.ok) {
          raw_rtt_us.push_back(2 * r.latency_typical_us);
        } else {
          fmt::print(stderr, "invoke_latency: ucx_perftest ucp_am_lat: {}\n", r.error);
        }
      }
      rt.allgather({});
    }
  }
  // Which way the send-based replies went: written straight into the caller's reply cell (same
  // machine, shared memory maps) or as reply messages. The callee counts the direct ones (also
  // those of the runtime's own small call_returns, e.g. free_remote: the count is an upper bound).
  const std::uint64_t send_round_trips = 1000 + std::uint64_t(opt.reps) * opt.round_trips;
  const std::uint64_t replies_direct = rt.allreduce_sum(rt.counters().replies_direct.load());
  rt.barrier();
  if (rt.rank() != 0) return 0;

  const machine_info machine = machine_info::here();
  const double raw_us = median(raw_rtt_us);
  struct row {
    const char* mode;
    double median_us, p99_us;
  };
  const std::vector<row> rows = {
      {"send", percentile(send_ns, 0.5) / 1000, percentile(send_ns, 0.99) / 1000},
      {"write", percentile(write_ns, 0.5) / 1000, percentile(write_ns, 0.99) / 1000}};
  fmt::print("# invoke_latency [{}]: call_return round trip, rank 0 -> rank 1 -> rank 0\n",
             opt.transport);
  fmt::print("{}\n", machine.line());
  fmt::print("# {} round trips x {} repetitions per mode; raw: 2 x ucx_perftest ucp_am_lat 8 B "
             "(typical, median of repetitions), UCX_TLS={}\n\n",
             opt.round_trips, opt.reps, perftest_tls.empty() ? "(unset)" : perftest_tls);
  fmt::print("{:>6} | {:>10} {:>10} | {:>10} | {:>12}\n", "mode", "median us", "p99 us",
             "raw RTT us", "median / raw");
  for (const auto& r : rows) {
    fmt::print("{:>6} | {:>10.2f} {:>10.2f} | {:>10} | {:>12}\n", r.mode, r.median_us, r.p99_us,
               raw_rtt_us.empty() ? "-" : fmt::format("{:.2f}", raw_us),
               raw_rtt_us.empty() ? "-" : fmt::format("{:.2f}", r.median_us / raw_us));
  }
  fmt::print("\nreplies written straight into a caller's reply cell during the run: {} (send "
             "round trips: {}; replies not written so travelled as messages)\n",
             replies_direct, send_round_trips);
  fmt::print("\ntargets [{}]:\n", opt.transport);
  for (const auto& r : rows) {
    const bool measured = !raw_rtt_us.empty();
    fmt::print("  {:<55} {:>8}  {}\n",
               fmt::format("call_return ({}) round trip <= 1.3 x raw AM round trip", r.mode),
               measured ? fmt::format("{:.2f}", r.median_us / raw_us) : "-",
               !measured ? "not measured" : r.median_us <= 1.3 * raw_us ? "met" : "MISSED");
  }
  if (!opt.json.empty()) {
    // What depends on the raw round trip: null when it was not measured.
    auto if_measured = [&](double value) {
      return raw_rtt_us.empty() ? report_json(nullptr) : report_json(rounded(value, 3));
    };
    report_json modes = report_json::array();
    for (const auto& r : rows) {
      modes.push_back({{"mode", r.mode},
                       {"median_us", rounded(r.median_us, 3)},
                       {"p99_us", rounded(r.p99_us, 3)},
                       {"ratio_to_raw", if_measured(r.median_us / raw_us)}});
    }
    write_report(opt.json, {{"benchmark", "invoke_latency"},
                            {"transport", opt.transport},
                            {"machine", machine.json()},
                            {"date", utc_now()},
                            {"round_trips", opt.round_trips},
                            {"repetitions", opt.reps},
                            {"send_replies_direct", replies_direct},
                            {"send_round_trips", send_round_trips},
                            {"raw_rtt_us", if_measured(raw_us)},
                            {"modes", modes}});
    fmt::print("\nwrote {}\n", opt.json);
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "invoke_latency: {}\n", e.what());
  return 1;
}

// invoke_latency: round trip of call_return (rank 0's thread asks rank 1's thread for a value and
// waits for it) over the send-based path and the one-sided Messenger, against ucx_perftest
// ucp_am_lat measured in the same run (its one-way latency x 2), and the future forms against the
// return_slot form in the same run: a future waited with get(), a coroutine's co_await, a 1 KiB
// std::string result against a 1 KiB trivially copyable one, a call whose function throws, and
// 64 calls in flight through when_all against 64 hand-polled slots. Median and 99th percentile
// of many single round trips; the modes alternate in blocks.
//   SERIEMA_THREADS=1 seriema-run -n 2 -- invoke_latency --json bench/results/invoke_latency-shm.json
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <array>
#include <optional>
#include <seriema/fabric/runtime.hpp>
#include <stdexcept>
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

double elapsed_ns(clock_type::time_point start) {
  return std::chrono::duration<double, std::nano>(clock_type::now() - start).count();
}

// The same through the future form, waited with get().
template <channel C>
void future_round_trips(thread_context& ctx, std::uint64_t n, std::vector<double>& out) {
  for (std::uint64_t i = 0; i < n; ++i) {
    const auto start = clock_type::now();
    const std::uint64_t got =
        invoke::call_return<C, invoke::policy::retry>(ctx, 1, [i] { return i + 1; }).get();
    out.push_back(elapsed_ns(start));
    if (got != i + 1) throw error("call_return: wrong reply");
  }
}

// The same awaited by a coroutine (spawned on the thread, which polls until it ended).
template <channel C>
seriema::task<> awaited_round_trips(thread_context& ctx, std::uint64_t n,
                                    std::vector<double>& out) {
  for (std::uint64_t i = 0; i < n; ++i) {
    const auto start = clock_type::now();
    const std::uint64_t got =
        co_await invoke::call_return<C, invoke::policy::retry>(ctx, 1, [i] { return i + 1; });
    out.push_back(elapsed_ns(start));
    if (got != i + 1) throw error("call_return: wrong reply");
  }
}
template <channel C>
void co_await_round_trips(thread_context& ctx, std::uint64_t n, std::vector<double>& out) {
  invoke::spawn(ctx, awaited_round_trips<C>(ctx, n, out)).get();
}

// A 1 KiB result: a std::string (serialized) and a trivially copyable array (its bytes).
using kib_array = std::array<char, 1024>;
void string_round_trips(thread_context& ctx, std::uint64_t n, std::vector<double>& out) {
  for (std::uint64_t i = 0; i < n; ++i) {
    const auto start = clock_type::now();
    const std::string got = invoke::call_return<channel::send>(ctx, 1, [i] {
                              return std::string(1024, static_cast<char>('a' + i % 26));
                            }).get();
    out.push_back(elapsed_ns(start));
    if (got.size() != 1024) throw error("call_return: wrong reply");
  }
}
void array_round_trips(thread_context& ctx, std::uint64_t n, std::vector<double>& out) {
  for (std::uint64_t i = 0; i < n; ++i) {
    const auto start = clock_type::now();
    const kib_array got = invoke::call_return<channel::send>(ctx, 1, [i] {
                            kib_array a;
                            a.fill(static_cast<char>('a' + i % 26));
                            return a;
                          }).get();
    out.push_back(elapsed_ns(start));
    if (got[1023] != static_cast<char>('a' + i % 26)) throw error("call_return: wrong reply");
  }
}

// A call whose function throws: the caller catches the callee's exception from get().
void throwing_round_trips(thread_context& ctx, std::uint64_t n, std::vector<double>& out) {
  for (std::uint64_t i = 0; i < n; ++i) {
    const auto start = clock_type::now();
    bool caught = false;
    try {
      (void)invoke::call_return<channel::send>(ctx, 1, [i]() -> std::uint64_t {
              throw std::runtime_error("call " + std::to_string(i));
            }).get();
    } catch (const std::runtime_error&) {
      caught = true;
    }
    out.push_back(elapsed_ns(start));
    if (!caught) throw error("call_return: the callee's exception did not come back");
  }
}

// The floor of a throwing call: one exception thrown and caught in this thread (a call that
// throws costs the callee's throw and get()'s), with a message like the callee's.
[[gnu::noinline]] void throw_runtime_error(std::uint64_t i) {
  throw std::runtime_error("call " + std::to_string(i));
}
void local_throws(std::uint64_t n, std::vector<double>& out) {
  for (std::uint64_t i = 0; i < n; ++i) {
    const auto start = clock_type::now();
    try {
      throw_runtime_error(i);
    } catch (const std::runtime_error&) {
      out.push_back(elapsed_ns(start));
    }
  }
}

// 64 calls in flight (one-sided write), then all waited for: by hand over 64 slots, or through
// when_all over 64 futures. Nanoseconds per batch.
constexpr std::uint64_t batch_calls = 64;
void slot_batches(thread_context& ctx, std::uint64_t n, std::vector<double>& out) {
  std::array<fabric::return_slot<std::uint64_t>, batch_calls> slots;
  for (std::uint64_t b = 0; b < n; ++b) {
    const auto start = clock_type::now();
    for (std::uint64_t i = 0; i < batch_calls; ++i) {
      (void)invoke::call_return<channel::write, invoke::policy::retry>(
          ctx, 1, [i] { return i + 1; }, slots[i]);
    }
    std::uint64_t sum = 0;
    for (auto& slot : slots) {
      ctx.wait_for(slot);
      sum += slot.value();
    }
    out.push_back(elapsed_ns(start));
    if (sum != batch_calls * (batch_calls + 1) / 2) throw error("slots: wrong replies");
  }
}
void when_all_batches(thread_context& ctx, std::uint64_t n, std::vector<double>& out) {
  std::vector<invoke::future<std::uint64_t>> futures;
  for (std::uint64_t b = 0; b < n; ++b) {
    const auto start = clock_type::now();
    futures.clear();  // when_all took the last batch's buffer: room for this one, as a user would
    futures.reserve(batch_calls);
    for (std::uint64_t i = 0; i < batch_calls; ++i) {
      futures.push_back(invoke::call_return<channel::write, invoke::policy::retry>(
          ctx, 1, [i] { return i + 1; }));
    }
    const std::vector<std::uint64_t> values = invoke::when_all(ctx, std::move(futures)).get();
    out.push_back(elapsed_ns(start));
    std::uint64_t sum = 0;
    for (std::uint64_t v : values) sum += v;
    if (sum != batch_calls * (batch_calls + 1) / 2) throw error("when_all: wrong replies");
  }
}

// Every mode's samples (nanoseconds), by name, in the order they are reported.
struct samples {
  std::vector<double> send, write, future_send, future_write, await_send, await_write,
      string_kib, array_kib, throwing, local_throw, slot_batch, when_all_batch, trad, adaptive;
};

// One block of every mode, alternating (a spell of the VM falls on all of them alike).
void run_block(thread_context& ctx, std::uint64_t block, samples& s) {
  round_trips<channel::send>(ctx, block, s.send);
  future_round_trips<channel::send>(ctx, block, s.future_send);
  co_await_round_trips<channel::send>(ctx, block, s.await_send);
  round_trips<channel::write>(ctx, block, s.write);
  round_trips<channel::trad>(ctx, block, s.trad);
  round_trips<channel::adaptive>(ctx, block, s.adaptive);
  future_round_trips<channel::write>(ctx, block, s.future_write);
  co_await_round_trips<channel::write>(ctx, block, s.await_write);
  array_round_trips(ctx, block, s.array_kib);
  string_round_trips(ctx, block, s.string_kib);
  throwing_round_trips(ctx, std::max<std::uint64_t>(block / 10, 1), s.throwing);
  local_throws(std::max<std::uint64_t>(block / 10, 1), s.local_throw);
  slot_batches(ctx, std::max<std::uint64_t>(block / 32, 1), s.slot_batch);
  when_all_batches(ctx, std::max<std::uint64_t>(block / 32, 1), s.when_all_batch);
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

  samples all;
  samples warmup;
  std::vector<double> raw_rtt_us;
  for (int rep = -1; rep < opt.reps; ++rep) {  // rep -1: warm-up (endpoints, chunks, records)
    rt.run([&](thread_context& ctx) {
      if (ctx.id() == 1) {
        stop_receiving = false;
        while (!stop_receiving) (void)ctx.poll();
        return;
      }
      const std::uint64_t n = rep < 0 ? 1000 : opt.round_trips;
      for (std::uint64_t done = 0; done < n; done += round_trip_block) {
        run_block(ctx, std::min(round_trip_block, n - done), rep < 0 ? warmup : all);
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
  auto row_of = [](const char* mode, const std::vector<double>& ns) {
    return row{mode, percentile(ns, 0.5) / 1000, percentile(ns, 0.99) / 1000};
  };
  const std::vector<row> rows = {row_of("send", all.send), row_of("write", all.write)};
  const std::vector<row> future_rows = {
      row_of("future send", all.future_send),   row_of("future write", all.future_write),
      row_of("co_await send", all.await_send),  row_of("co_await write", all.await_write),
      row_of("1 KiB array", all.array_kib),     row_of("1 KiB string", all.string_kib),
      row_of("throwing send", all.throwing),    row_of("64 slots", all.slot_batch),
      row_of("when_all 64", all.when_all_batch), row_of("local throw", all.local_throw)};
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
  fmt::print("\n{:>14} | {:>10} {:>10}   (64 slots / when_all 64: a batch of 64 calls in flight; "
             "throwing: a tenth as many; local throw: one exception thrown and caught here)\n",
             "future forms", "median us", "p99 us");
  for (const auto& r : future_rows) {
    fmt::print("{:>14} | {:>10.2f} {:>10.2f}\n", r.mode, r.median_us, r.p99_us);
  }
  const std::vector<row> batching_rows = {row_of("trad", all.trad),
                                          row_of("adaptive", all.adaptive)};
  fmt::print("\n{:>14} | {:>10} {:>10}   (slot form, the batching channels: the destination idle)\n",
             "batching", "median us", "p99 us");
  for (const auto& r : batching_rows) {
    fmt::print("{:>14} | {:>10.2f} {:>10.2f}\n", r.mode, r.median_us, r.p99_us);
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
  // The future forms against the slot form, all of the same run.
  struct target {
    std::string name;
    double ratio;
    double limit;
  };
  const std::vector<target> targets = {
      {"future (send) <= 1.05 x slot (send)", future_rows[0].median_us / rows[0].median_us, 1.05},
      {"future (write) <= 1.05 x slot (write)", future_rows[1].median_us / rows[1].median_us,
       1.05},
      {"co_await (send) <= 1.10 x slot (send)", future_rows[2].median_us / rows[0].median_us,
       1.10},
      {"co_await (write) <= 1.10 x slot (write)", future_rows[3].median_us / rows[1].median_us,
       1.10},
      {"1 KiB string <= 1.3 x 1 KiB array", future_rows[5].median_us / future_rows[4].median_us,
       1.3},
      {"throwing <= 3 x future (send)", future_rows[6].median_us / future_rows[0].median_us, 3.0},
      // Throughput: when_all's batch time at most 1 / 0.95 of the slots'.
      {"when_all 64 calls/s >= 0.95 x 64 slots", future_rows[7].median_us / future_rows[8].median_us,
       -0.95},
      // channel::adaptive publishes a call to an idle destination at once (issue 41).
      {"adaptive round trip <= 1.1 x write", percentile(all.adaptive, 0.5) / 1000 /
                                                 rows[1].median_us,
       1.1}};
  for (const target& t : targets) {
    const bool met = t.limit > 0 ? t.ratio <= t.limit : t.ratio >= -t.limit;
    fmt::print("  {:<55} {:>8.2f}  {}\n", t.name, t.ratio, met ? "met" : "MISSED");
  }
  // What a throwing call costs beyond the plain one, in local throws: its floor is two (the
  // callee's own throw and get()'s).
  fmt::print("  {:<55} {:>8.2f}  (floor: 2)\n", "(throwing - future (send)) / local throw",
             (future_rows[6].median_us - future_rows[0].median_us) / future_rows[9].median_us);
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
    report_json future_modes = report_json::array();
    for (const auto& r : future_rows) {
      future_modes.push_back({{"mode", r.mode},
                              {"median_us", rounded(r.median_us, 3)},
                              {"p99_us", rounded(r.p99_us, 3)}});
    }
    for (const auto& r : batching_rows) {
      future_modes.push_back({{"mode", r.mode},
                              {"median_us", rounded(r.median_us, 3)},
                              {"p99_us", rounded(r.p99_us, 3)}});
    }
    report_json ratios = report_json::array();
    for (const target& t : targets) {
      ratios.push_back({{"target", t.name}, {"ratio", rounded(t.ratio, 3)}});
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
                            {"modes", modes},
                            {"future_modes", future_modes},
                            {"future_targets", ratios}});
    fmt::print("\nwrote {}\n", opt.json);
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "invoke_latency: {}\n", e.what());
  return 1;
}

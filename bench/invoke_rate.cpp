// invoke_rate (paper §5.1, Fig. 2 / Table 2): calls/s of empty-bodied remote functions whose
// closures carry 8, 64 or 256 bytes, from one thread of rank 0 to one thread of rank 1, in each
// mode: send (send-based), write (one-sided Messenger), trad (aggregator, SERIEMA_FLUSH_SIZE
// flush), ovfl (aggregator, overflow mode) and adaptive (--modes adaptive: self-clocked), through an aggregator made for the
// destination (invoke::aggregator_to; --free-calls: invoke::call<mode> on each call); against
// ucx_perftest measured in the same run (ucp_am_bw for send, ucp_put_bw for the one-sided modes,
// at the same sizes and at 4 KiB).
//   SERIEMA_THREADS=1 seriema-run -n 2 -- invoke_rate --json bench/results/invoke_rate-shm.json
// (bench/run-paper.sh runs it over shm and tcp, with the MPI baseline, and draws the plots.)
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <array>
#include <atomic>
#include <map>
#include <optional>
#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/invoke.hpp>
#include <seriema/transfer/arena.hpp>
#include <seriema/transfer/ucx.hpp>
#include <string>
#include <vector>

#include "bench_support.hpp"

using namespace seriema;
using namespace seriema::bench;
using fabric::thread_context;
using invoke::call_status;
using invoke::channel;

namespace {

constexpr std::array<channel, 5> all_modes = {channel::send, channel::write, channel::trad,
                                              channel::ovfl, channel::adaptive};

// Written by the receiving thread only (rank 1); read by calls it runs.
std::uint64_t calls_run = 0;
bool stop_receiving = false;
// --free-calls: trad and ovfl call invoke::call<C>(ctx, dest, f) instead of through an
// aggregator_to (set before the runtime starts).
bool free_calls = false;

// An empty-bodied function whose closure is `Bytes` bytes: the body only counts (so neither the
// call nor the capture can be elided, and the end of a timed phase can be checked).
template <std::size_t Bytes>
struct empty_call {
  std::array<std::byte, Bytes - sizeof(std::uint64_t)> payload;
  std::uint64_t sequence;
  void operator()() const { ++calls_run; }
};
// The sequence alone: a std::array<std::byte, 0> member would still take a byte, and 8 with
// padding, making the 8-byte closure 16.
template <>
struct empty_call<8> {
  std::uint64_t sequence;
  void operator()() const { ++calls_run; }
};
static_assert(sizeof(empty_call<8>) == 8 && sizeof(empty_call<64>) == 64 &&
              sizeof(empty_call<256>) == 256);

struct options {
  std::string transport;
  std::vector<std::size_t> sizes{8, 64, 256};
  std::vector<std::string> modes{"send", "write", "trad", "ovfl"};
  int reps = 3;
  double seconds = 0.25;
  std::uint64_t max_calls = 20'000'000;
  std::uint64_t calls = 0;  // fixed N (0: calibrate)
  perftest_options perftest;
  std::string json;
};

channel mode_of(const std::string& name) {
  for (channel c : all_modes) {
    if (name == invoke::to_string(c)) return c;
  }
  throw error(
      fmt::format("--modes: unknown mode '{}' (send, write, trad, ovfl, adaptive)", name));
}

// Out of line and by value: fmt::format takes its arguments by reference, and a loop counter
// whose address escapes lives on the stack, a load and a store per call that ring_floor's loop
// does not pay.
[[noreturn, gnu::noinline]] void throw_failed(channel c, std::uint64_t call, call_status st) {
  throw error(
      fmt::format("{} call {} failed: {}", invoke::to_string(c), call, fabric::to_string(st)));
}

// Sends `n` calls of `Bytes` in mode C, then one call_return that comes back once all ran (FIFO);
// returns the seconds from the first call to the reply, and the receiver's count.
// Through: the aggregator made for the destination (trad and ovfl), else invoke::call<C>.
// Out of line: each mode's loop is compiled alone (inlined into timed()'s switch, the 8-byte
// trad loop ran at 0.6-0.75 x once the switch had a fifth mode to inline).
template <channel C, std::size_t Bytes, bool Through>
[[gnu::noinline]] std::pair<double, std::uint64_t> timed_calls(thread_context& ctx,
                                                               std::uint64_t n) {
  const fabric::thread_id dest = 1;
  empty_call<Bytes> f{};
  std::optional<invoke::aggregator_to<Through ? C : channel::trad>> to;
  if constexpr (Through) to.emplace(ctx, dest);
  const auto start = clock_type::now();
  for (std::uint64_t i = 0; i < n; ++i) {
    f.sequence = i;
    call_status st;
    if constexpr (Through) {
      st = to->template call<invoke::policy::retry>(f);
    } else {
      st = invoke::call<C, invoke::policy::retry>(ctx, dest, f);
    }
    if (st != call_status::ok) throw_failed(C, i, st);
  }
  fabric::return_slot<std::uint64_t> count;
  call_status st = invoke::call_return<C, invoke::policy::retry>(
      ctx, dest, [] { return calls_run; }, count);
  if (st != call_status::ok) throw error(fmt::format("final call_return: {}", fabric::to_string(st)));
  ctx.wait_for(count);
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  if (!count.ready()) throw error("final call_return failed");
  return {seconds, count.value()};
}

template <std::size_t Bytes>
std::pair<double, std::uint64_t> timed(thread_context& ctx, channel c, std::uint64_t n) {
  switch (c) {
    case channel::send:
      return timed_calls<channel::send, Bytes, false>(ctx, n);
    case channel::write:
      return timed_calls<channel::write, Bytes, false>(ctx, n);
    case channel::trad:
      return free_calls ? timed_calls<channel::trad, Bytes, false>(ctx, n)
                        : timed_calls<channel::trad, Bytes, true>(ctx, n);
    case channel::adaptive:
      return free_calls ? timed_calls<channel::adaptive, Bytes, false>(ctx, n)
                        : timed_calls<channel::adaptive, Bytes, true>(ctx, n);
    default:
      return free_calls ? timed_calls<channel::ovfl, Bytes, false>(ctx, n)
                        : timed_calls<channel::ovfl, Bytes, true>(ctx, n);
  }
}

std::pair<double, std::uint64_t> timed_at(thread_context& ctx, std::size_t size, channel c,
                                          std::uint64_t n) {
  switch (size) {
    case 8:
      return timed<8>(ctx, c, n);
    case 64:
      return timed<64>(ctx, c, n);
    case 256:
      return timed<256>(ctx, c, n);
    case 1024:
      return timed<1024>(ctx, c, n);
    default:
      throw error(fmt::format("--sizes: {} B is not built in (8, 64, 256, 1024)", size));
  }
}

// One (size, mode) point: calls per repetition and the seconds of each repetition.
struct point {
  std::size_t size = 0;
  channel mode = channel::write;
  std::uint64_t calls = 0;
  std::vector<double> seconds;
  std::vector<report_json> counters;  // sender messenger counters of each repetition
  [[nodiscard]] double rate() const {
    std::vector<double> rates;
    for (double s : seconds) rates.push_back(static_cast<double>(calls) / s);
    return median(rates);
  }
};

std::string rate_text(double per_s) {
  if (per_s >= 1e6) return fmt::format("{:.2f}M", per_s / 1e6);
  return fmt::format("{:.1f}k", per_s / 1e3);
}

struct perftest_point {
  std::string test;
  std::size_t size;
  std::vector<perftest_result> runs;
  [[nodiscard]] std::optional<double> rate() const {
    std::vector<double> r;
    for (const auto& p : runs) {
      if (p.ok) r.push_back(p.msgs_per_s);
    }
    if (r.empty()) return std::nullopt;
    return median(r);
  }
};

using raw_points = std::map<std::pair<std::string, std::size_t>, perftest_point>;

// The report's "points": one object per (size, mode), with each repetition's seconds and counters.
report_json points_json(const std::vector<point>& points) {
  report_json out = report_json::array();
  for (const auto& p : points) {
    out.push_back({{"mode", invoke::to_string(p.mode)},
                   {"size", p.size},
                   {"calls", p.calls},
                   {"calls_per_s", rounded(p.rate(), 1)},
                   {"seconds", rounded_array(p.seconds, 6)},
                   {"counters", p.counters}});
  }
  return out;
}

// The report's "raw": ucx_perftest's median messages/s per (test, size), null if no run worked.
report_json raw_json(const raw_points& raw) {
  report_json out = report_json::array();
  for (const auto& [key, p] : raw) {
    out.push_back(
        {{"test", p.test}, {"size", p.size}, {"msgs_per_s", rounded_or_null(p.rate(), 1)}});
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) try {
  const launch_state launch = launch_state::capture();

  options opt;
  CLI::App app{
      "invoke_rate: calls/s of empty-bodied remote functions (8/64/256 B closures) in the modes "
      "send, write, trad and ovfl, with ucx_perftest ucp_am_bw / ucp_put_bw in the same run"};
  app.add_option("--transport", opt.transport, "label for the output (shm, tcp); default: guessed");
  app.add_option("--sizes", opt.sizes, "closure sizes in bytes (8, 64, 256, 1024)")->delimiter(',');
  app.add_option("--modes", opt.modes, "modes to measure (send, write, trad, ovfl, adaptive)")
      ->delimiter(',');
  app.add_option("--reps", opt.reps, "timed repetitions per point (median reported)")
      ->check(CLI::Range(1, 100));
  app.add_option("--seconds", opt.seconds, "target duration of one repetition (calibrates N)");
  app.add_option("--calls", opt.calls, "fixed N calls per repetition (0: calibrate)");
  app.add_option("--max-calls", opt.max_calls, "cap on the calibrated N");
  app.add_flag("--free-calls", free_calls,
               "trad and ovfl: call invoke::call<mode>(ctx, dest, f) on each call instead of "
               "through an aggregator made for the destination (invoke::aggregator_to)");
  opt.perftest.add_to(app);
  app.add_option("--json", opt.json, "write results here (rank 0)");
  CLI11_PARSE(app, argc, argv);
  std::vector<channel> modes;
  for (const auto& m : opt.modes) modes.push_back(mode_of(m));

  fabric::runtime rt;
  if (rt.size() != 2 || rt.options().threads_per_process != 1) {
    fmt::print(stderr, "invoke_rate: needs 2 processes x 1 thread: SERIEMA_THREADS=1 seriema-run "
                       "-n 2 -- invoke_rate\n");
    return 2;
  }
  pair_setup pair(rt, launch, opt.perftest, opt.transport, "invoke_rate");
  const bool same_machine = pair.same_machine;
  const std::string& perftest_tls = pair.perftest_tls;
  std::optional<perftest_runner>& perftest = pair.perftest;

  std::vector<point> points;
  raw_points raw;
  auto run_perftest = [&](const std::string& test, std::size_t size, std::uint64_t iters) {
    // Rank 1 waits in the bootstrap (off the CPUs) while rank 0 runs the pair.
    if (rt.rank() == 0 && perftest) {
      auto& p = raw[{test, size}];
      p.test = test;
      p.size = size;
      p.runs.push_back(perftest->run(size, iters, std::max<std::uint64_t>(iters / 10, 1000), test));
      if (!p.runs.back().ok) {
        fmt::print(stderr, "invoke_rate: ucx_perftest {} {} B: {}\n", test, size,
                   p.runs.back().error);
      }
    }
    rt.allgather({});
  };

  std::string lanes;
  // Every repetition runs every size (and its raw baselines) in turn: the VM's slow and fast
  // spells then fall on all points alike instead of on the sizes measured while they lasted.
  std::vector<std::vector<std::uint64_t>> calls_at(
      opt.sizes.size(), std::vector<std::uint64_t>(modes.size(), opt.calls));
  std::vector<std::vector<point>> points_at(opt.sizes.size(), std::vector<point>(modes.size()));
  for (int rep = -1; rep < opt.reps; ++rep) {  // rep -1: calibration and warm-up
    for (std::size_t s = 0; s < opt.sizes.size(); ++s) {
      const std::size_t size = opt.sizes[s];
      // Calibrate N per mode: double a pilot until it takes 20 ms.
      std::vector<std::uint64_t>& calls = calls_at[s];
      std::vector<point>& at_size = points_at[s];
      rt.run([&](thread_context& ctx) {
        if (ctx.id() == 1) {
          // The receiver polls without backing off until the sender is done.
          stop_receiving = false;
          while (!stop_receiving) (void)ctx.poll();
          return;
        }
        for (std::size_t m = 0; m < modes.size(); ++m) {
          const channel c = modes[m];
          if (rep < 0) {
            std::uint64_t pilot = 1024;
            double t = timed_at(ctx, size, c, pilot).first;
            while (calls[m] == 0 && t < 0.02 && pilot < opt.max_calls) {
              pilot *= 2;
              t = timed_at(ctx, size, c, pilot).first;
            }
            if (calls[m] == 0) {
              calls[m] = std::clamp<std::uint64_t>(
                  static_cast<std::uint64_t>(opt.seconds * static_cast<double>(pilot) / t), 10000,
                  opt.max_calls);
            }
            continue;
          }
          const invoke::messenger* m_before = invoke::channels_of(ctx).existing(1);
          const invoke::messenger_counters before =
              m_before ? m_before->counters() : invoke::messenger_counters{};
          fabric::return_slot<std::uint64_t> base;
          (void)invoke::call_return<channel::send>(ctx, 1, [] { return calls_run; }, base);
          ctx.wait_for(base);
          auto [seconds, count] = timed_at(ctx, size, c, calls[m]);
          if (count != base.value() + calls[m]) {
            throw error(fmt::format("{} at {} B: the receiver ran {} calls, expected {}",
                                    invoke::to_string(c), size, count - base.value(), calls[m]));
          }
          at_size[m].size = size;
          at_size[m].mode = c;
          at_size[m].calls = calls[m];
          at_size[m].seconds.push_back(seconds);
          const invoke::messenger* after_m = invoke::channels_of(ctx).existing(1);
          const invoke::messenger_counters delta =
              (after_m ? after_m->counters() : before).since(before);
          at_size[m].counters.push_back(report_json::parse(delta.to_json()));
          if (lanes.empty()) lanes = ctx.endpoint_to(1).describe_transports();
        }
        (void)ctx.call(1, [] { stop_receiving = true; });
      });
      if (rep >= 0) {
        // The raw baselines at this size (and at 4 KiB for the bandwidth target).
        const std::uint64_t iters = std::max<std::uint64_t>(calls.front(), 100000);
        bool any_send = false, any_one_sided = false;
        for (channel c : modes) (c == channel::send ? any_send : any_one_sided) = true;
        if (any_send) run_perftest("ucp_am_bw", size, iters);
        if (any_one_sided) run_perftest("ucp_put_bw", size, iters);
        if (any_one_sided && size == opt.sizes.back()) run_perftest("ucp_put_bw", 4096, iters / 8);
      }
    }
  }
  for (std::size_t s = 0; s < opt.sizes.size(); ++s) {
    for (auto& p : points_at[s]) points.push_back(std::move(p));
    if (rt.rank() == 0) {
      std::string line;
      for (std::size_t m = 0; m < modes.size(); ++m) {
        line += fmt::format(" {} {}", invoke::to_string(modes[m]),
                            rate_text(points[points.size() - modes.size() + m].rate()));
      }
      fmt::print(stderr, "[{}] {:>4} B:{}\n", opt.transport, opt.sizes[s], line);
    }
  }
  rt.barrier();
  if (rt.rank() != 0) return 0;

  // ---- table ----
  auto raw_rate = [&](const char* test, std::size_t size) -> std::optional<double> {
    auto it = raw.find({test, size});
    return it == raw.end() ? std::nullopt : it->second.rate();
  };
  auto rate_of = [&](channel c, std::size_t size) -> std::optional<double> {
    for (const auto& p : points) {
      if (p.mode == c && p.size == size) return p.rate();
    }
    return std::nullopt;
  };
  const machine_info machine = machine_info::here();
  fmt::print("# invoke_rate [{}]: rank 0 -> rank 1 ({}), lanes: {}\n", opt.transport,
             same_machine ? "same machine" : "another emulated machine", lanes);
  fmt::print("{}\n", machine.line());
  fmt::print("# medians of {} repetitions; raw: ucx_perftest (UCX_TLS={}) ucp_am_bw for send, "
             "ucp_put_bw for the one-sided modes; trad and ovfl calls through {}\n\n",
             opt.reps, perftest_tls.empty() ? "(unset)" : perftest_tls,
             free_calls ? "invoke::call<mode>(ctx, dest, f)" : "an aggregator_to (per destination)");
  fmt::print("{:>5} | {:>9} {:>9} {:>9} {:>9} | {:>9} {:>9} | {:>8} {:>9}\n", "size", "send/s",
             "write/s", "trad/s", "ovfl/s", "raw am/s", "raw put/s", "write/put", "trad/write");
  auto opt_text = [](std::optional<double> v) { return v ? rate_text(*v) : std::string("-"); };
  auto ratio = [](std::optional<double> a, std::optional<double> b) -> std::optional<double> {
    if (!a || !b || *b == 0) return std::nullopt;
    return *a / *b;
  };
  auto ratio_text = [](std::optional<double> r) {
    return r ? fmt::format("{:.2f}", *r) : std::string("-");
  };
  for (std::size_t size : opt.sizes) {
    fmt::print("{:>5} | {:>9} {:>9} {:>9} {:>9} | {:>9} {:>9} | {:>8} {:>9}\n", size,
               opt_text(rate_of(channel::send, size)), opt_text(rate_of(channel::write, size)),
               opt_text(rate_of(channel::trad, size)), opt_text(rate_of(channel::ovfl, size)),
               opt_text(raw_rate("ucp_am_bw", size)), opt_text(raw_rate("ucp_put_bw", size)),
               ratio_text(ratio(rate_of(channel::write, size), raw_rate("ucp_put_bw", size))),
               ratio_text(ratio(rate_of(channel::trad, size), rate_of(channel::write, size))));
  }
  if (auto r4k = raw_rate("ucp_put_bw", 4096)) {
    fmt::print("{:>5} | {:>9} {:>9} {:>9} {:>9} | {:>9} {:>9} |\n", 4096, "", "", "", "", "",
               rate_text(*r4k));
  }

  const bool adaptive_measured =
      std::find(modes.begin(), modes.end(), channel::adaptive) != modes.end();
  // The better fixed batching mode at `size` (trad or ovfl, whichever was measured).
  auto best_fixed = [&](std::size_t size) -> std::optional<double> {
    std::optional<double> t = rate_of(channel::trad, size), o = rate_of(channel::ovfl, size);
    if (!t) return o;
    if (!o) return t;
    return std::max(*t, *o);
  };
  if (adaptive_measured) {
    fmt::print("\n{:>5} | {:>10} {:>12} {:>9}\n", "size", "adaptive/s", "best fixed/s", "ratio");
    for (std::size_t size : opt.sizes) {
      fmt::print("{:>5} | {:>10} {:>12} {:>9}\n", size, opt_text(rate_of(channel::adaptive, size)),
                 opt_text(best_fixed(size)),
                 ratio_text(ratio(rate_of(channel::adaptive, size), best_fixed(size))));
    }
  }

  // ---- targets (reported, never asserted) ----
  struct target {
    std::string name;
    std::optional<double> value;  // the measured ratio
    double goal;
    bool at_most = false;
  };
  std::vector<target> targets;
  if (opt.transport == "shm") {
    for (std::size_t size : opt.sizes) {
      targets.push_back({fmt::format("write {} B >= 0.8 x raw put {} B", size, size),
                         ratio(rate_of(channel::write, size), raw_rate("ucp_put_bw", size)), 0.8});
      targets.push_back({fmt::format("trad {} B >= write {} B", size, size),
                         ratio(rate_of(channel::trad, size), rate_of(channel::write, size)), 1.0});
    }
  } else {
    targets.push_back({"trad 8 B >= 30 x write 8 B",
                       ratio(rate_of(channel::trad, 8), rate_of(channel::write, 8)), 30});
    std::optional<double> trad256_bytes, put4k_bytes;
    if (auto r = rate_of(channel::trad, 256)) trad256_bytes = *r * 256;
    if (auto r = raw_rate("ucp_put_bw", 4096)) put4k_bytes = *r * 4096;
    targets.push_back({"trad 256 B bytes/s >= 0.9 x raw put bytes/s at 4 KiB",
                       ratio(trad256_bytes, put4k_bytes), 0.9});
    for (std::size_t size : opt.sizes) {
      targets.push_back({fmt::format("ovfl {} B >= 0.9 x write {} B", size, size),
                         ratio(rate_of(channel::ovfl, size), rate_of(channel::write, size)), 0.9});
    }
  }
  if (adaptive_measured) {
    for (std::size_t size : opt.sizes) {
      targets.push_back(
          {fmt::format("adaptive {} B >= 0.9 x the better of trad and ovfl", size),
           ratio(rate_of(channel::adaptive, size), best_fixed(size)), 0.9});
    }
  }
  fmt::print("\ntargets [{}]:\n", opt.transport);
  for (const auto& t : targets) {
    const bool met = t.value && *t.value >= t.goal;
    fmt::print("  {:<55} {:>8}  {}\n", t.name, ratio_text(t.value),
               !t.value ? "not measured" : met ? "met" : "MISSED");
  }

  // ---- JSON ----
  if (!opt.json.empty()) {
    report_json json_targets = report_json::array();
    for (const auto& t : targets) {
      json_targets.push_back({{"name", t.name},
                              {"ratio", rounded_or_null(t.value, 3)},
                              {"goal", t.goal},
                              {"met", t.value && *t.value >= t.goal}});
    }
    write_report(opt.json,
                 {{"benchmark", "invoke_rate"},
                  {"figure", "paper Fig. 2 / Table 2"},
                  {"transport", opt.transport},
                  {"machine", machine.json()},
                  {"date", utc_now()},
                  {"lanes", lanes},
                  {"perftest_tls", perftest_tls},
                  {"aggregated_calls", free_calls ? "invoke::call" : "invoke::aggregator_to"},
                  {"repetitions", opt.reps},
                  {"points", points_json(points)},
                  {"raw", raw_json(raw)},
                  {"targets", json_targets}});
    fmt::print("\nwrote {}\n", opt.json);
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "invoke_rate: {}\n", e.what());
  return 1;
}

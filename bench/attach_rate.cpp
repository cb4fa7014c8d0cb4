// attach_rate: send-based calls/s (8-byte closures) and call_return round trips/s from a thread
// attached with runtime::attach, against the same calls from a worker thread of runtime::run
// (the baseline), alternating the two within each repetition, rank 0 -> rank 1's worker.
//   SERIEMA_THREADS=1 seriema-run -n 2 -- attach_rate --json bench/results/attach_rate-shm.json
// (bench/run-attach-rate.sh runs it over shm and tcp.)
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <array>
#include <exception>
#include <seriema/fabric/runtime.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "json_report.hpp"

using namespace seriema;
using namespace seriema::bench;
using fabric::call_status;
using fabric::thread_context;

namespace {

std::uint64_t calls_run = 0;  // rank 1's worker only (calls run on it)
bool stop_receiving = false;  // rank 1's worker only

struct counted_call {
  std::uint64_t sequence;
  void operator()() const { ++calls_run; }
};

// n one-way calls, then one call_return that reports how many ran (so the time covers them all).
double timed_calls(thread_context& ctx, std::uint64_t n) {
  const auto start = clock_type::now();
  counted_call f{0};
  for (std::uint64_t i = 0; i < n; ++i) {
    f.sequence = i;
    if (const call_status st = ctx.call(1, f); st != call_status::ok) {
      throw error(fmt::format("call {}: {}", i, fabric::to_string(st)));
    }
  }
  fabric::return_slot<std::uint64_t> count;
  if (ctx.call_return(1, [] { return calls_run; }, count) != call_status::ok ||
      ctx.wait_for(count) != fabric::outcome::done) {
    throw error("the final call_return failed");
  }
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

// n call_return round trips, one at a time.
double timed_round_trips(thread_context& ctx, std::uint64_t n) {
  const auto start = clock_type::now();
  for (std::uint64_t i = 0; i < n; ++i) {
    fabric::return_slot<std::uint64_t> slot;
    if (ctx.call_return(1, [i] { return i; }, slot) != call_status::ok ||
        ctx.wait_for(slot) != fabric::outcome::done || slot.value() != i) {
      throw error(fmt::format("round trip {} failed", i));
    }
  }
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

// Runs `measure` on a new std::thread attached to the runtime, pinned where the worker that
// started it is (which waits in join, off the CPU): the two differ by their contexts, not by
// where the scheduler puts them.
template <class Measure>
double on_attached_thread(fabric::runtime& rt, Measure measure) {
  double seconds = 0;
  std::exception_ptr failed;
  std::thread caller([&] {
    try {
      rt.placement().pin_thread(rt.placement().global_id(rt.rank(), 0));
      auto attached = rt.attach();
      seconds = measure(attached.context());
    } catch (...) {
      failed = std::current_exception();
    }
  });
  caller.join();
  if (failed) std::rethrow_exception(failed);
  return seconds;
}

struct series {
  std::string name;
  std::uint64_t operations = 0;
  std::vector<double> seconds;
  [[nodiscard]] double rate() const {
    std::vector<double> rates;
    for (double s : seconds) rates.push_back(static_cast<double>(operations) / s);
    return median(rates);
  }
};

// Prints the table (rank 0) and writes the JSON: attached against worker, calls then round trips.
void report(const std::array<series, 4>& all, int reps, const std::string& transport,
            const std::string& json_path) {

  const machine_info machine = machine_info::here();
  fmt::print("# attach_rate [{}]: rank 0 -> rank 1's worker, send-based, 8-byte closures\n",
             transport.empty() ? "?" : transport);
  fmt::print("{}\n# medians of {} repetitions, attached and worker alternating; the attached "
             "thread is pinned to the worker's PU\n\n",
             machine.line(), reps);
  report_json points = report_json::array();
  auto row = [&](const series& attached, const series& worker) {
    const double ratio = attached.rate() / worker.rate();
    fmt::print("{:<22} {:>12.0f}/s   {:<20} {:>12.0f}/s   ratio {:.2f}  (goal >= 0.9: {})\n",
               attached.name, attached.rate(), worker.name, worker.rate(), ratio,
               ratio >= 0.9 ? "met" : "MISSED");
    for (const series* s : {&attached, &worker}) {
      points.push_back({{"series", s->name}, {"operations", s->operations},
                        {"per_s", rounded(s->rate(), 1)}, {"seconds", rounded_array(s->seconds, 6)}});
    }
    return ratio;
  };
  const double call_ratio = row(all[0], all[1]);
  const double trip_ratio = row(all[2], all[3]);
  if (!json_path.empty()) {
    write_report(json_path, {{"benchmark", "attach_rate"},
                                  {"transport", transport},
                                  {"machine", machine.json()},
                                  {"repetitions", reps},
                                  {"points", points},
                                  {"ratios", {{"calls", rounded(call_ratio, 3)},
                                              {"round_trips", rounded(trip_ratio, 3)}}}});
  }
}

}  // namespace

int main(int argc, char** argv) try {
  std::uint64_t calls = 200000, round_trips = 20000;
  int reps = 5;
  std::string transport, json_path;
  CLI::App app{"attach_rate: send-based calls/s and call_return round trips/s from an attached "
               "thread against a worker thread, alternating in one run"};
  app.add_option("--calls", calls, "one-way calls per repetition");
  app.add_option("--round-trips", round_trips, "call_return round trips per repetition");
  app.add_option("--reps", reps, "repetitions (medians reported)")->check(CLI::Range(1, 100));
  app.add_option("--transport", transport, "label for the output (shm, tcp)");
  app.add_option("--json", json_path, "write results here (rank 0)");
  CLI11_PARSE(app, argc, argv);

  fabric::runtime rt;
  if (rt.size() != 2 || rt.options().threads_per_process != 1) {
    fmt::print(stderr, "attach_rate: needs 2 processes x 1 thread: SERIEMA_THREADS=1 "
                       "seriema-run -n 2 -- attach_rate\n");
    return 2;
  }
  series worker_calls{"worker calls", calls, {}}, attached_calls{"attached calls", calls, {}};
  series worker_trips{"worker round trips", round_trips, {}};
  series attached_trips{"attached round trips", round_trips, {}};
  for (int rep = -1; rep < reps; ++rep) {  // rep -1: warm-up (wireup, first attach)
    rt.run([&](thread_context& ctx) {
      if (ctx.id() == 1) {
        stop_receiving = false;
        while (!stop_receiving) (void)ctx.poll();  // no back-off, as in invoke_rate
        return;
      }
      // Alternate which goes first, so drift in the machine's speed falls on both alike.
      const bool attached_first = rep % 2 != 0;
      for (int turn = 0; turn < 2; ++turn) {
        const bool attached = (turn == 0) == attached_first;
        const double c = attached ? on_attached_thread(rt, [&](thread_context& a) {
          return timed_calls(a, calls);
        }) : timed_calls(ctx, calls);
        const double t = attached ? on_attached_thread(rt, [&](thread_context& a) {
          return timed_round_trips(a, round_trips);
        }) : timed_round_trips(ctx, round_trips);
        if (rep < 0) continue;
        (attached ? attached_calls : worker_calls).seconds.push_back(c);
        (attached ? attached_trips : worker_trips).seconds.push_back(t);
      }
      (void)ctx.call(1, [] { stop_receiving = true; });
    });
  }
  rt.barrier();
  if (rt.rank() == 0) {
    report({attached_calls, worker_calls, attached_trips, worker_trips}, reps, transport,
           json_path);
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "attach_rate: {}\n", e.what());
  return 1;
}

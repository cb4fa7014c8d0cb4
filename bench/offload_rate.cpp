// offload_rate: the seed's figures for offloaded communication (003, Endo & Taura) on this
// machine. Rank 0's plain threads (none attached) read 8-byte words of rank 1's memory through
// an offload::engine with each method, alternating methods within each repetition:
//  * latency: one requester, one get at a time (median);
//  * message rate against requester threads (1..64): each keeps `window` gets in flight for
//    `seconds`; completed gets per second, and each requester's injection cost (the time its
//    submission took, mean);
//  * idle executor CPU: the executor threads' CPU time over a 2 s window with nothing to do
//    (spin: ~1 core each; sleep: asleep);
//  * endpoints per process: the engine's (lanes x processes reached), against one context per
//    requester thread (threads x processes).
// With --pattern calls, requesters make fire-and-forget calls to rank 1's worker instead of gets
// (the rate counts calls handed to the transport; rank 1 checks that every one ran) and the
// latency is a call_return's round trip; a method named "sleep:unbundled" is sleep with
// engine_options::bundle_bytes = 0 (a message per call), the A/B of bundling in one run.
// Direct injection (requesters post under the lane's lock, one completion each) is the seed's
// baseline; every other method's numbers are reported as ratios to it.
//   SERIEMA_THREADS=1 seriema-run -n 2 -- offload_rate --json out.json
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <seriema/base/error.hpp>
#include <seriema/fabric/runtime.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/offload/engine.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "json_report.hpp"

namespace {

using namespace seriema;
using namespace seriema::bench;
using fabric::thread_context;
using clock_type = std::chrono::steady_clock;

struct options {
  std::string methods = "direct,spin,sleep,delegate";
  std::string threads = "1,2,4,8,16,32,64";
  double seconds = 0.3;
  std::size_t window = 64;
  int latency_ops = 2000;
  int reps = 3;
  double idle_seconds = 2.0;
  unsigned executors = 1;
  std::size_t flush_size = 64;
  std::string pattern = "contiguous";
  std::string channel = "send";
  std::string transport = "unlabelled";
  std::string json;
};

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

constexpr std::size_t words = 4096;  // rank 1's array

// What rank 1's word i holds: every get's word is checked against it.
std::uint64_t expected_word(std::uint64_t i) { return i * 0x9E3779B97F4A7C15ull + 1; }

// A get that ended without the word it read: the measurement would be of a broken engine.
[[noreturn]] void wrong(const char* what) {
  fmt::print(stderr, "offload_rate: {}\n", what);
  std::abort();
}

struct rate_point {
  double per_second = 0.0;
  double inject_ns = 0.0;
};

// One requester's loop: keeps `window` gets in flight until `stop`.
bool scattered = false;  // --pattern
bool calls = false;      // --pattern calls
invoke::channel call_channel = invoke::channel::send;  // --channel
fabric::thread_id call_target = 0;       // rank 1's worker
std::atomic<std::uint64_t> calls_run{0};  // at rank 1: calls that ran there
std::atomic<std::uint64_t> calls_done{0};  // at rank 0: calls whose futures ended done

// The next request of a requester's window: a get of `offset` into `into`, or a call.
offload::future<void> issue(offload::engine& e, offload::region target, std::uint64_t* into,
                            std::uint64_t offset) {
  if (calls) {
    auto ran = [] { calls_run.fetch_add(1, std::memory_order_relaxed); };
    switch (call_channel) {
      case invoke::channel::write:
        return e.call<invoke::channel::write>(call_target, ran);
      case invoke::channel::trad:
        return e.call<invoke::channel::trad>(call_target, ran);
      case invoke::channel::ovfl:
        return e.call<invoke::channel::ovfl>(call_target, ran);
      default:
        return e.call(call_target, ran);
    }
  }
  return e.get(std::as_writable_bytes(std::span(into, 1)), target, offset);
}

// Waits for a request: done, and a get's word (read after the wait) is the one expected.
void check_done(offload::future<void>& f, const std::uint64_t& got, std::uint64_t offset) {
  if (f.wait(fabric::deadline_clock::now() + std::chrono::seconds(60)) != fabric::outcome::done) {
    wrong(calls ? "a call failed" : "a get failed");
  }
  if (!calls && got != expected_word(offset / 8)) wrong("a get read a wrong word");
}

// The word a requester's get reads: its window's slot (contiguous), or a pseudo-random one.
std::uint64_t word_offset(int index, std::size_t window, std::size_t slot, std::uint64_t n) {
  std::uint64_t word = std::uint64_t(index) * window + slot;
  if (scattered) word = (word * 0x9E3779B97F4A7C15ull + n * 0xBF58476D1CE4E5B9ull) >> 20;
  return (word % words) * 8;
}

void requester(offload::engine& e, offload::region target, std::size_t window, int index,
               const std::atomic<bool>& stop, std::atomic<std::uint64_t>& completed,
               std::atomic<std::uint64_t>& inject_ns, std::atomic<std::uint64_t>& submits) {
  std::vector<std::uint64_t> into(window);
  std::vector<std::uint64_t> offsets(window);
  std::vector<offload::future<void>> ring(window);
  std::vector<bool> live(window, false);
  std::uint64_t done = 0, spent = 0, issued = 0;
  for (std::size_t slot = 0; !stop.load(std::memory_order_relaxed);
       slot = (slot + 1) % window) {
    if (live[slot]) {
      check_done(ring[slot], into[slot], offsets[slot]);
      ++done;
    }
    const std::uint64_t offset = word_offset(index, window, slot, issued);
    offsets[slot] = offset;
    const auto t0 = clock_type::now();
    ring[slot] = issue(e, target, &into[slot], offset);
    spent += static_cast<std::uint64_t>((clock_type::now() - t0).count());
    ++issued;
    live[slot] = ring[slot].status() == offload::request_status::ok;
  }
  for (std::size_t slot = 0; slot < window; ++slot) {
    if (!live[slot]) continue;
    check_done(ring[slot], into[slot], offsets[slot]);
    ++done;
  }
  completed += done;
  if (calls) calls_done += done;
  inject_ns += spent;
  submits += issued;
}

rate_point measure_rate(offload::engine& e, offload::region target, int threads,
                        const options& opt) {
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> completed{0}, inject_ns{0}, submits{0};
  std::vector<std::thread> pool;
  const auto start = clock_type::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back(requester, std::ref(e), target, opt.window, t, std::cref(stop),
                      std::ref(completed), std::ref(inject_ns), std::ref(submits));
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(opt.seconds));
  stop = true;
  for (auto& thread : pool) thread.join();
  const double elapsed = std::chrono::duration<double>(clock_type::now() - start).count();
  return {static_cast<double>(completed.load()) / elapsed,
          static_cast<double>(inject_ns.load()) / static_cast<double>(std::max<std::uint64_t>(
                                                      submits.load(), 1))};
}

double measure_latency_us(offload::engine& e, offload::region target, int ops) {
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(ops));
  std::thread single([&] {
    std::uint64_t into = 0;
    for (int i = 0; i < ops; ++i) {
      const auto t0 = clock_type::now();
      if (calls) {
        auto answer = call_channel == invoke::channel::send
                          ? e.call_return(call_target, [] { return 7; })
                          : e.call_return<invoke::channel::write>(call_target, [] { return 7; });
        if (answer.wait(std::chrono::seconds(60)) != fabric::outcome::done || answer.get() != 7) {
          wrong("a call_return failed");
        }
      } else {
        auto got = e.get(std::as_writable_bytes(std::span(&into, 1)), target, 0);
        if (got.wait(std::chrono::seconds(60)) != fabric::outcome::done) wrong("a get failed");
        if (into != expected_word(0)) wrong("a get read a wrong word");
      }
      samples.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
    }
  });
  single.join();
  return median(samples);
}

double measure_idle_cpu(offload::engine& e, double seconds) {
  const auto before = e.executor_cpu_seconds();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const auto after = e.executor_cpu_seconds();
  double used = 0.0;
  for (std::size_t i = 0; i < before.size(); ++i) used += after[i] - before[i];
  return used / seconds / static_cast<double>(std::max<std::size_t>(before.size(), 1));
}

struct method_result {
  std::vector<double> latency_us;
  std::map<int, std::vector<double>> rate, inject_ns;
  std::vector<double> idle_cpu;
  std::uint64_t endpoints = 0;
  std::uint64_t coalesced = 0;
  std::uint64_t bundles = 0, bundled = 0;
};

// "sleep:unbundled": the method, and whether calls may share messages.
offload::engine_options engine_options_for(const std::string& name) {
  offload::engine_options eo;
  const auto colon = name.find(':');
  eo.mode = offload::parse_method(name.substr(0, colon));
  if (colon != std::string::npos) {
    if (name.substr(colon + 1) != "unbundled") {
      throw config_error("offload_rate: a method's only suffix is :unbundled");
    }
    eo.bundle_bytes = 0;
  }
  return eo;
}

std::atomic<bool> target_may_leave{false};

}  // namespace

int main(int argc, char** argv) {
  options opt;
  CLI::App app{"offload_rate: offloaded communication against direct injection (seed 003)"};
  app.add_option("--methods", opt.methods, "methods, comma-separated (direct first: baseline)");
  app.add_option("--threads", opt.threads, "requester thread counts, comma-separated");
  app.add_option("--seconds", opt.seconds, "seconds per rate point");
  app.add_option("--window", opt.window, "gets each requester keeps in flight");
  app.add_option("--latency-ops", opt.latency_ops, "gets of the latency test");
  app.add_option("--reps", opt.reps, "repetitions (methods alternate)")->check(CLI::Range(1, 100));
  app.add_option("--idle-seconds", opt.idle_seconds, "idle window of the CPU measurement");
  app.add_option("--executors", opt.executors, "executor lanes per engine");
  app.add_option("--flush-size", opt.flush_size, "engine_options::flush_size");
  app.add_option("--pattern", opt.pattern,
                 "contiguous: a requester's window reads adjacent words (the executors may "
                 "coalesce them); scattered: each get reads a pseudo-random word; calls: "
                 "fire-and-forget calls to rank 1 (latency: call_return)")
      ->check(CLI::IsMember({"contiguous", "scattered", "calls"}));
  app.add_option("--channel", opt.channel,
                 "calls pattern: the channel the calls go on (send; write, trad, ovfl: "
                 "one-sided, written by the executors; latency: write for all three)")
      ->check(CLI::IsMember({"send", "write", "trad", "ovfl"}));
  app.add_option("--transport", opt.transport, "label for the output (shm, tcp)");
  app.add_option("--json", opt.json, "write results here (rank 0)");
  CLI11_PARSE(app, argc, argv);

  scattered = opt.pattern == "scattered";
  calls = opt.pattern == "calls";
  for (auto c : {invoke::channel::write, invoke::channel::trad, invoke::channel::ovfl}) {
    if (opt.channel == invoke::to_string(c)) call_channel = c;
  }
  fabric::runtime rt;
  call_target = rt.placement().global_id(1 % rt.size(), 0);
  if (rt.size() != 2) {
    fmt::print(stderr, "offload_rate: run it as 2 processes\n");
    return 2;
  }
  const auto methods = split(opt.methods);
  std::vector<int> thread_counts;
  for (const auto& t : split(opt.threads)) thread_counts.push_back(std::stoi(t));

  transfer::remote_memory_locator array;
  if (rt.rank() == 1) {
    auto attached = rt.attach();
    array = attached.context().allocate_remote(attached.id(), words * 8);
    auto* mine = reinterpret_cast<std::uint64_t*>(array.address);  // this process's memory
    for (std::size_t i = 0; i < words; ++i) mine[i] = expected_word(i);
  }
  {
    auto all = rt.allgather(std::as_bytes(std::span(&array, 1)));
    std::memcpy(&array, all[1].data(), sizeof(array));
  }

  std::map<std::string, method_result> results;
  for (int rep = 0; rep < opt.reps; ++rep) {
    for (const auto& name : methods) {
      offload::engine_options eo = engine_options_for(name);
      eo.executors = opt.executors;
      // Room for every requester's window (64 x 64), and a requester that finds none waits.
      eo.queue_entries = 4096;
      eo.flush_size = opt.flush_size;
      eo.wait_when_full = std::chrono::seconds(10);
      std::optional<offload::engine> e;
      if (rt.rank() == 0) e.emplace(rt, eo);
      target_may_leave = false;
      rt.barrier();
      rt.run([&](thread_context& ctx) {
        if (rt.rank() == 1) {  // the target: serves (over tcp its process must progress)
          if (std::getenv("TARGET_SPINS") != nullptr) {
            while (!target_may_leave.load()) ctx.poll();
            return;
          }
          ctx.wait_until([] { return target_may_leave.load(); },
                         fabric::deadline_clock::now() + std::chrono::minutes(10));
          return;
        }
        const auto target = e->add_region(array);
        method_result& r = results[name];
        std::atomic<bool> measured{false};
        std::thread measuring([&] {
          r.latency_us.push_back(measure_latency_us(*e, target, opt.latency_ops));
          for (int t : thread_counts) {
            const rate_point p = measure_rate(*e, target, t, opt);
            r.rate[t].push_back(p.per_second);
            r.inject_ns[t].push_back(p.inject_ns);
          }
          r.idle_cpu.push_back(measure_idle_cpu(*e, opt.idle_seconds));
          r.endpoints = e->counters().endpoints;
          r.coalesced = e->counters().coalesced;
          r.bundles = e->counters().bundles;
          r.bundled = e->counters().bundled;
          measured = true;
        });
        ctx.wait_until([&] { return measured.load(); },
                       fabric::deadline_clock::now() + std::chrono::minutes(10));
        measuring.join();
        (void)ctx.call(rt.placement().global_id(1, 0), [] { target_may_leave = true; });
      });
    }
  }
  // Every call handed to the transport ran at rank 1 (run() ended only once they all had).
  const std::uint64_t here = rt.rank() == 0 ? calls_done.load() : calls_run.load();
  const auto counts = rt.allgather(std::as_bytes(std::span(&here, 1)));
  std::uint64_t sent = 0, ran = 0;
  std::memcpy(&sent, counts[0].data(), sizeof sent);
  std::memcpy(&ran, counts[1].data(), sizeof ran);
  if (sent != ran) {
    fmt::print(stderr, "offload_rate: {} calls were sent, {} ran\n", sent, ran);
    std::abort();
  }
  if (rt.rank() != 0) {
    rt.finalize();
    return 0;
  }

  const machine_info machine = machine_info::here();
  fmt::print("{}\n# offload_rate: {} | 2 processes | {} executor(s) | window {} | pattern {} | "
             "channel {} | {} reps\n",
             machine.line(), opt.transport, opt.executors, opt.window, opt.pattern, opt.channel,
             opt.reps);
  const method_result& direct = results[methods.front()];
  const double direct_latency = median(direct.latency_us);
  report_json report = {{"benchmark", "offload_rate"}, {"machine", machine.json()},
                        {"transport", opt.transport}, {"executors", opt.executors},
                        {"window", opt.window},       {"reps", opt.reps},
                        {"pattern", opt.pattern},     {"channel", opt.channel},
                        {"baseline", methods.front()}};
  fmt::print("{:<15} {:>10} {:>8} {:>9} {:>10}", "method", "latency", "x base", "idle CPU",
             "endpoints");
  for (int t : thread_counts) fmt::print(" {:>12}", fmt::format("rate@{}", t));
  fmt::print("\n");
  for (const auto& name : methods) {
    const method_result& r = results[name];
    const double latency = median(r.latency_us);
    fmt::print("{:<15} {:>8.2f}us {:>8.2f} {:>8.1f}% {:>10}", name, latency,
               latency / direct_latency, median(r.idle_cpu) * 100.0, r.endpoints);
    report_json rates = report_json::array();
    for (int t : thread_counts) {
      const double rate = median(r.rate.at(t));
      const double base = median(direct.rate.at(t));
      fmt::print(" {:>7.0f}k/{:.2f}", rate / 1e3, rate / base);
      report_json point;
      point["threads"] = t;
      point["per_second"] = rounded(rate, 0);
      point["ratio_to_baseline"] = rounded(rate / base, 3);
      point["inject_ns"] = rounded(median(r.inject_ns.at(t)), 1);
      point["samples"] = rounded_array(r.rate.at(t), 0);
      rates.push_back(point);
    }
    fmt::print("\n");
    report_json& m = report["methods"][name];
    m["latency_us"] = rounded(latency, 3);
    m["latency_ratio_to_baseline"] = rounded(latency / direct_latency, 3);
    m["latency_samples_us"] = rounded_array(r.latency_us, 3);
    m["rate"] = rates;
    m["idle_executor_cpu_fraction"] = rounded(median(r.idle_cpu), 4);
    m["endpoints"] = r.endpoints;
    m["coalesced_requests"] = r.coalesced;
    m["bundles"] = r.bundles;
    m["bundled_calls"] = r.bundled;
    m["endpoints_one_context_per_thread"] = thread_counts.back() * 2;
  }
  fmt::print("injection cost (ns, mean per submission) by requester threads:\n");
  for (const auto& name : methods) {
    fmt::print("{:<15}", name);
    for (int t : thread_counts) fmt::print(" {:>8.0f}", median(results[name].inject_ns.at(t)));
    fmt::print("\n");
  }
  if (!opt.json.empty()) write_report(opt.json, report);
  rt.finalize();
  return 0;
}

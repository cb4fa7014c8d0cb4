// group_rate: ordered multicast against its own unordered mode and against a sequencer-based total
// order written with seriema calls, in one run. k ranks x 1 thread (SERIEMA_THREADS=1 seriema-run
// -n 3), all members of one group:
//  * throughput, every member sending `messages` messages of each size: delivered MB/s at rank 0
//    (every member's messages), ordered and unordered (the cost of order and stability);
//  * the sequencer: every member calls the leader (rank 0) with its message, the leader stamps it
//    and calls every member with it (the classic fixed-sequencer total order, one hop more and
//    every message through one thread);
//  * latency, rank 0 alone sending 64 B: send -> delivered at rank 0 (stable: every member has
//    it), median µs, against a call_return round trip rank 0 -> rank 1 of an empty function;
//  * large messages (above the slot size, down the chain of puts), rank 0 alone sending: the
//    bytes each receiver gets per second (send of the first -> delivery at rank 0 of the last,
//    which is stable: every member has it) against ucx_perftest ucp_put_bw of the same size
//    between two processes (the raw put bandwidth one receiver could get).
// Medians over repetitions; rank 0 prints a table and writes JSON.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <array>
#include <cstring>
#include <deque>
#include <seriema/fabric/runtime.hpp>
#include <seriema/group/group.hpp>
#include <seriema/invoke/invoke.hpp>
#include <string>
#include <vector>

#include "bench_support.hpp"

using namespace seriema;
using namespace seriema::bench;
using fabric::thread_context;

namespace {

struct options {
  std::string transport = "shm";
  int reps = 5;
  std::vector<std::size_t> sizes = {64, 10240};
  std::uint64_t messages = 2000;  // per sender and size
  std::uint64_t latency_samples = 500;
  std::uint32_t window = 64;
  std::vector<std::size_t> large_sizes = {1 << 20};
  std::uint64_t large_messages = 200;  // per size and repetition
  std::uint32_t large_window = 4;
  perftest_options perftest;
  std::string json;
};

struct samples {
  // [size][rep] MB/s at rank 0
  std::vector<std::vector<double>> ordered, unordered, sequencer;
  std::vector<double> latency_us, call_return_us;
  // [large size][rep] MB/s per receiver, and ucx_perftest ucp_put_bw MB/s
  std::vector<std::vector<double>> large, put_bw;
  std::string paths;
};

fabric::deadline_clock::time_point soon() {
  return fabric::deadline_clock::now() + std::chrono::seconds(120);
}

std::vector<fabric::thread_id> everyone(const thread_context& me) {
  std::vector<fabric::thread_id> all(me.thread_count());
  for (fabric::thread_id t = 0; t < all.size(); ++t) all[t] = t;
  return all;
}

void check(group::group_status st, const char* what) {
  if (st != group::group_status::ok) {
    throw error(fmt::format("group_rate: {}: {}", what, group::to_string(st)));
  }
}

// MB/s at this member: every member sends `messages` of `size` bytes, timed from a barrier until
// this member delivered them all.
double group_throughput(thread_context& me, const options& opt, std::size_t size,
                        group::delivery mode, std::string* paths) {
  group::group_options go;
  go.max_message = static_cast<std::uint32_t>(std::max<std::size_t>(size, 64));
  // The window, as far as k regions of it fit one allocation each (2 MiB).
  const std::uint64_t slot = (16 + go.max_message + 63) / 64 * 64;
  const std::uint64_t fits = (transfer::block_size / me.thread_count() - 4096) / slot;
  go.window = static_cast<std::uint32_t>(std::min<std::uint64_t>(opt.window, fits));
  go.mode = mode;
  std::uint64_t delivered = 0;
  group::group g = group::group::create(me, everyone(me), go, soon(),
                                        [&](const group::message&) { ++delivered; });
  if (paths != nullptr) {
    for (std::uint32_t m = 0; m < g.members().size(); ++m) {
      if (m != g.rank()) *paths += fmt::format("{}0->{}: {}", paths->empty() ? "" : "; ", m,
                                               g.path_to(m));
    }
  }
  const std::uint64_t total = opt.messages * me.thread_count();
  me.quiesce(std::chrono::seconds(120));
  const auto start = clock_type::now();
  auto until = soon();  // a clock read per 4096 sends: the sequencer's loop makes none
  for (std::uint64_t i = 0; i < opt.messages; ++i) {
    if (i % 4096 == 4095) until = soon();
    check(g.send(size, [i](std::span<std::byte> room) { std::memset(room.data(), int(i), room.size()); },
                 until),
          "send");
  }
  if (!me.wait_until([&] { return delivered == total; }, soon())) {
    throw error(fmt::format("group_rate: delivered {} of {}", delivered, total));
  }
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  me.quiesce(std::chrono::seconds(120));
  return double(total * size) / seconds / 1e6;
}

// The sequencer baseline's state on each thread: the leader's next stamp and its stamped
// messages not forwarded yet; at each member, the next stamp expected and the messages that came
// with another one (none may: the leader's calls to one member are run in the order it made
// them, docs/messenger.md).
thread_local std::uint64_t stamped = 0;
thread_local bool forwarding = false;
thread_local std::uint64_t in_order = 0;
thread_local std::uint64_t out_of_order = 0;

template <std::size_t N>
struct sequenced {
  std::uint64_t stamp;
  std::array<std::byte, N> bytes;
  void operator()(thread_context&) const {
    if (stamp != in_order) ++out_of_order;
    ++in_order;
  }
};

// (A function's thread_local: a thread_local variable template is not initialized by GCC 12.)
template <std::size_t N>
std::deque<sequenced<N>>& to_forward() {
  thread_local std::deque<sequenced<N>> messages;
  return messages;
}

template <std::size_t N>
struct to_leader {
  std::array<std::byte, N> bytes;
  void operator()(thread_context& leader) const {
    to_forward<N>().push_back(sequenced<N>{stamped++, bytes});
    // A forward may wait (the first call to a member sets its ring up, a full ring may grow),
    // and the wait polls: to_leader calls run there, nested in this one. They only stamp and
    // queue their message; the outermost one forwards every message, all of a stamp's calls
    // before the next stamp's, so each member gets the leader's calls in stamp order. (When each
    // forwarded its own, one waiting in its call to member 1 had its call to member 2 made after
    // those of every message stamped meanwhile: 4000 of 6000 out of order at rank 2.)
    if (forwarding) return;
    forwarding = true;
    while (!to_forward<N>().empty()) {
      const sequenced<N> out = to_forward<N>().front();
      to_forward<N>().pop_front();
      for (fabric::thread_id t = 0; t < leader.thread_count(); ++t) {
        const fabric::call_status st =
            invoke::call<invoke::channel::write, invoke::policy::retry_async>(leader, t, out);
        if (st != fabric::call_status::ok) {
          forwarding = false;
          throw error("group_rate: the leader's forward failed");
        }
      }
    }
    forwarding = false;
  }
};

template <std::size_t N>
double sequencer_throughput(thread_context& me, const options& opt) {
  stamped = 0;
  forwarding = false;
  to_forward<N>().clear();
  in_order = 0;
  out_of_order = 0;
  const std::uint64_t total = opt.messages * me.thread_count();
  me.quiesce(std::chrono::seconds(120));
  const auto start = clock_type::now();
  for (std::uint64_t i = 0; i < opt.messages; ++i) {
    to_leader<N> call{};
    call.bytes.fill(std::byte(i));
    fabric::call_status st;
    while ((st = invoke::call(me, 0, call)) == fabric::call_status::full) me.poll();
    if (st != fabric::call_status::ok) throw error("group_rate: a call to the leader failed");
  }
  if (!me.wait_until([&] { return in_order == total; }, soon())) {
    throw error(fmt::format("group_rate: the sequencer delivered {} of {}", in_order, total));
  }
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  if (out_of_order != 0) {
    throw error(fmt::format("group_rate: rank {}: {} sequenced calls out of stamp order", me.id(),
                            out_of_order));
  }
  me.quiesce(std::chrono::seconds(120));
  return double(total * N) / seconds / 1e6;
}

// Rank 0 sends 64 B alone; each sample is send -> its own delivery (stable everywhere).
void latency(thread_context& me, const options& opt, bool keep, samples& out) {
  group::group_options go;
  go.max_message = 64;
  go.window = opt.window;
  std::uint64_t mine = 0;
  group::group g = group::group::create(me, everyone(me), go, soon(),
                                        [&](const group::message&) { ++mine; });
  me.quiesce(std::chrono::seconds(120));
  std::vector<double> us;
  if (me.id() == 0) {
    for (std::uint64_t i = 0; i < opt.latency_samples; ++i) {
      const auto t0 = clock_type::now();
      check(g.send(64, [](std::span<std::byte> room) { std::memset(room.data(), 1, 64); }, soon()),
            "send");
      if (!me.wait_until([&] { return mine == i + 1; }, soon())) throw error("group_rate: lost");
      us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
    }
    std::vector<double> rtt;
    for (std::uint64_t i = 0; i < opt.latency_samples; ++i) {
      const auto t0 = clock_type::now();
      auto f = invoke::call_return(me, 1, [] { return 1; });
      if (f.wait(soon()) != fabric::outcome::done) throw error("group_rate: call_return failed");
      rtt.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
    }
    if (keep) {
      out.latency_us.push_back(median(us));
      out.call_return_us.push_back(median(rtt));
    }
  } else if (!me.wait_until([&] { return mine == opt.latency_samples; }, soon())) {
    throw error("group_rate: a member missed messages");
  }
  me.quiesce(std::chrono::seconds(120));
}

// Rank 0 sends `large_messages` of `size` bytes alone: MB/s each receiver gets.
double large_throughput(thread_context& me, const options& opt, std::size_t size) {
  group::group_options go;
  go.max_message = 1024;
  go.window = opt.window;
  go.max_large_message = static_cast<std::uint32_t>(size);
  go.large_window = opt.large_window;
  std::uint64_t delivered = 0;
  group::group g = group::group::create(me, everyone(me), go, soon(),
                                        [&](const group::message&) { ++delivered; });
  me.quiesce(std::chrono::seconds(120));
  const auto start = clock_type::now();
  for (std::uint64_t i = 0; me.id() == 0 && i < opt.large_messages; ++i) {
    check(g.send(size, [i](std::span<std::byte> room) { std::memset(room.data(), int(i), 64); },
                 soon()),
          "large send");
  }
  if (!me.wait_until([&] { return delivered == opt.large_messages; }, soon())) {
    throw error(fmt::format("group_rate: delivered {} of {} large", delivered, opt.large_messages));
  }
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  me.quiesce(std::chrono::seconds(120));
  return double(opt.large_messages * size) / seconds / 1e6;
}

void one_repetition(thread_context& me, const options& opt, bool keep, samples& out) {
  for (std::size_t s = 0; s < opt.sizes.size(); ++s) {
    const std::size_t size = opt.sizes[s];
    std::string* paths = keep && me.id() == 0 && out.paths.empty() ? &out.paths : nullptr;
    const double ordered = group_throughput(me, opt, size, group::delivery::ordered, paths);
    const double unordered = group_throughput(me, opt, size, group::delivery::unordered, nullptr);
    const double sequencer = size == 64 ? sequencer_throughput<64>(me, opt) : 0.0;
    if (keep && me.id() == 0) {
      out.ordered[s].push_back(ordered);
      out.unordered[s].push_back(unordered);
      out.sequencer[s].push_back(sequencer);
    }
  }
  latency(me, opt, keep, out);
  for (std::size_t s = 0; s < opt.large_sizes.size(); ++s) {
    const double bw = large_throughput(me, opt, opt.large_sizes[s]);
    if (keep && me.id() == 0) out.large[s].push_back(bw);
  }
}

// ucx_perftest ucp_put_bw of each large size (rank 0, between the repetitions).
void run_perftest(perftest_runner& perftest, const options& opt, samples& out) {
  for (std::size_t s = 0; s < opt.large_sizes.size(); ++s) {
    const std::size_t size = opt.large_sizes[s];
    const std::uint64_t iters = std::max<std::uint64_t>(100, (std::uint64_t{2} << 30) / size);
    const perftest_result r = perftest.run(size, iters, 20, "ucp_put_bw");
    if (r.ok) {
      out.put_bw[s].push_back(r.mib_per_s * 1048576.0 / 1e6);
    } else {
      fmt::print(stderr, "group_rate: ucx_perftest ucp_put_bw {} B: {}\n", size, r.error);
    }
  }
}

report_json large_report(const options& opt, const samples& all, const std::string& tls) {
  fmt::print("1 sender, large messages (chain of puts), per receiver; ucx_perftest ucp_put_bw "
             "with UCX_TLS={}\n{:>9} {:>12} {:>12} {:>10}\n",
             tls.empty() ? "(default)" : tls, "bytes", "group MB/s", "put_bw MB/s", "ratio");
  report_json sizes = report_json::array();
  for (std::size_t s = 0; s < opt.large_sizes.size(); ++s) {
    const double g = median(all.large[s]);
    const double p = all.put_bw[s].empty() ? 0.0 : median(all.put_bw[s]);
    fmt::print("{:>9} {:>12.1f} {:>12} {:>10}\n", opt.large_sizes[s], g,
               p > 0 ? fmt::format("{:.1f}", p) : std::string("-"),
               p > 0 ? fmt::format("{:.2f}", g / p) : std::string("-"));
    sizes.push_back({{"bytes", opt.large_sizes[s]},
                     {"group_mb_s_per_receiver", rounded(g, 2)},
                     {"put_bw_mb_s", p > 0 ? report_json(rounded(p, 2)) : report_json(nullptr)},
                     {"group_over_put_bw", p > 0 ? report_json(rounded(g / p, 3))
                                                 : report_json(nullptr)}});
  }
  return {{"sender", 0},
          {"messages", opt.large_messages},
          {"large_window", opt.large_window},
          {"perftest_tls", tls},
          {"sizes", sizes}};
}

report_json report(const options& opt, const samples& all, std::size_t members,
                   const std::string& perftest_tls) {
  const machine_info machine = machine_info::here();
  fmt::print("{}\n# group_rate over {}: {} members, all sending, window {}; pushes {}\n",
             machine.line(), opt.transport, members, opt.window, all.paths);
  fmt::print("{:>7} {:>12} {:>12} {:>12} {:>10} {:>10}\n", "bytes", "ordered MB/s",
             "unordered", "sequencer", "ord/unord", "ord/seq");
  report_json sizes = report_json::array();
  for (std::size_t s = 0; s < opt.sizes.size(); ++s) {
    const double o = median(all.ordered[s]), u = median(all.unordered[s]);
    const double q = opt.sizes[s] == 64 ? median(all.sequencer[s]) : 0.0;
    fmt::print("{:>7} {:>12.1f} {:>12.1f} {:>12.1f} {:>10.2f} {:>10}\n", opt.sizes[s], o, u, q,
               o / u, q > 0 ? fmt::format("{:.2f}", o / q) : std::string("-"));
    sizes.push_back({{"bytes", opt.sizes[s]},
                     {"ordered_mb_s", rounded(o, 2)},
                     {"unordered_mb_s", rounded(u, 2)},
                     {"sequencer_mb_s", q > 0 ? report_json(rounded(q, 2)) : report_json(nullptr)},
                     {"ordered_over_unordered", rounded(o / u, 3)},
                     {"ordered_over_sequencer",
                      q > 0 ? report_json(rounded(o / q, 3)) : report_json(nullptr)}});
  }
  const double lat = median(all.latency_us), rtt = median(all.call_return_us);
  fmt::print("1 sender, 64 B: delivery {:.2f} us, call_return round trip {:.2f} us, ratio {:.2f}\n",
             lat, rtt, lat / rtt);
  return {{"benchmark", "group_rate"},
          {"transport", opt.transport},
          {"pushes", all.paths},
          {"machine", machine.json()},
          {"members", members},
          {"window", opt.window},
          {"messages_per_sender", opt.messages},
          {"repetitions", opt.reps},
          {"throughput", sizes},
          {"latency",
           {{"bytes", 64},
            {"delivery_us", rounded(lat, 3)},
            {"call_return_round_trip_us", rounded(rtt, 3)},
            {"delivery_over_round_trip", rounded(lat / rtt, 3)}}},
          {"large", large_report(opt, all, perftest_tls)}};
}

}  // namespace

int main(int argc, char** argv) try {
  options opt;
  CLI::App app{"group_rate: ordered multicast against unordered and a sequencer"};
  app.add_option("--transport", opt.transport, "label for the output (shm, tcp, ...)");
  app.add_option("--reps", opt.reps, "repetitions")->check(CLI::Range(1, 100));
  app.add_option("--sizes", opt.sizes, "message sizes (bytes; 64 also runs the sequencer)")
      ->delimiter(',');
  app.add_option("--messages", opt.messages, "messages per sender, size and repetition");
  app.add_option("--latency-samples", opt.latency_samples, "timed sends of the latency test");
  app.add_option("--window", opt.window, "the groups' window")->check(CLI::Range(1, 4096));
  app.add_option("--large-sizes", opt.large_sizes, "large message sizes (bytes, above 1024)")
      ->delimiter(',');
  app.add_option("--large-messages", opt.large_messages, "large messages per size and repetition");
  app.add_option("--large-window", opt.large_window, "the large groups' large_window")
      ->check(CLI::Range(1, 16));
  opt.perftest.add_to(app);
  app.add_option("--json", opt.json, "write results here (rank 0)");
  CLI11_PARSE(app, argc, argv);
  for (std::size_t s : opt.large_sizes) {
    if (s <= 1024 || s > (std::size_t{1} << 30)) {
      throw error(fmt::format("group_rate: large size {} not in 1025 .. 1 GiB", s));
    }
  }
  const launch_state launch = launch_state::capture();
  fabric::runtime rt;
  if (rt.size() < 2 || rt.options().threads_per_process != 1) {
    fmt::print(stderr, "group_rate: needs 2 or more processes x 1 thread: SERIEMA_THREADS=1 "
                       "seriema-run -n 3 -- group_rate\n");
    return 2;
  }
  std::string transport = opt.transport;
  pair_setup pair(rt, launch, opt.perftest, transport, "group_rate");
  samples all;
  all.large.resize(opt.large_sizes.size());
  all.put_bw.resize(opt.large_sizes.size());
  all.ordered.resize(opt.sizes.size());
  all.unordered.resize(opt.sizes.size());
  all.sequencer.resize(opt.sizes.size());
  for (int rep = -1; rep < opt.reps; ++rep) {  // -1: warm-up
    rt.run([&](thread_context& ctx) { one_repetition(ctx, opt, rep >= 0, all); });
    if (rep >= 0 && rt.rank() == 0 && pair.perftest) run_perftest(*pair.perftest, opt, all);
    rt.allgather({});
  }
  rt.barrier();
  if (rt.rank() != 0) return 0;
  const report_json out =
      report(opt, all, static_cast<std::size_t>(rt.size()), pair.perftest_tls);
  if (!opt.json.empty()) write_report(opt.json, out);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "group_rate: {}\n", e.what());
  return 1;
}

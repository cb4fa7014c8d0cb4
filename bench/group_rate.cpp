// group_rate: ordered multicast against its own unordered mode and against a sequencer-based total
// order written with seriema calls, in one run. k ranks x 1 thread (SERIEMA_THREADS=1 seriema-run
// -n 3), all members of one group:
//  * throughput, every member sending `messages` messages of each size: delivered MB/s at rank 0
//    (every member's messages), ordered and unordered (the cost of order and stability);
//  * the sequencer: every member calls the leader (rank 0) with its message, the leader stamps it
//    and calls every member with it (the classic fixed-sequencer total order, one hop more and
//    every message through one thread);
//  * latency, rank 0 alone sending 64 B: send -> delivered at rank 0 (stable: every member has
//    it), median µs, against a call_return round trip rank 0 -> rank 1 of an empty function.
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
  std::string json;
};

struct samples {
  // [size][rep] MB/s at rank 0
  std::vector<std::vector<double>> ordered, unordered, sequencer;
  std::vector<double> latency_us, call_return_us;
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
  for (std::uint64_t i = 0; i < opt.messages; ++i) {
    check(g.send(size, [i](std::span<std::byte> room) { std::memset(room.data(), int(i), room.size()); },
                 soon()),
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
}

report_json report(const options& opt, const samples& all, std::size_t members) {
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
            {"delivery_over_round_trip", rounded(lat / rtt, 3)}}}};
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
  app.add_option("--json", opt.json, "write results here (rank 0)");
  CLI11_PARSE(app, argc, argv);
  fabric::runtime rt;
  if (rt.size() < 2 || rt.options().threads_per_process != 1) {
    fmt::print(stderr, "group_rate: needs 2 or more processes x 1 thread: SERIEMA_THREADS=1 "
                       "seriema-run -n 3 -- group_rate\n");
    return 2;
  }
  samples all;
  all.ordered.resize(opt.sizes.size());
  all.unordered.resize(opt.sizes.size());
  all.sequencer.resize(opt.sizes.size());
  for (int rep = -1; rep < opt.reps; ++rep) {  // -1: warm-up
    rt.run([&](thread_context& ctx) { one_repetition(ctx, opt, rep >= 0, all); });
  }
  rt.barrier();
  if (rt.rank() != 0) return 0;
  const report_json out = report(opt, all, static_cast<std::size_t>(rt.size()));
  if (!opt.json.empty()) write_report(opt.json, out);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "group_rate: {}\n", e.what());
  return 1;
}

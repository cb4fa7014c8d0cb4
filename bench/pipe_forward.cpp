// pipe_forward: a relay through a middle thread, forwarded with rforward against the same relay
// written by hand (rmalloc in the next pipe, copy out of the buffer read, rwrite, rfree) and
// against no relay at all, in one run. Three ranks x 1 thread (SERIEMA_THREADS=1 seriema-run -n
// 3): rank 0 writes to rank 1, which passes every buffer on to rank 2; rank 2 answers rank 0
// directly. Measured per mode (rforward, copy, direct = rank 0 writes to rank 2 itself):
//  * streaming: 64 KiB buffers, rank 0 -> 1 -> 2, MiB/s until rank 2 acknowledges the last;
//  * latency: round trips of `size` bytes out through the relay and 8 bytes straight back
//    (median µs), at 8 B .. 64 KiB.
// With fewer than 3 CPUs the spins yield (the three ranks take turns): numbers then show the
// work per buffer more than the latency a machine with a core per rank would see.
// On one machine rforward passes a 16-byte record instead of the payload (the next hop reads the
// buffer where rank 0 wrote it); across machines it copies once, as the hand-written relay does.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstring>
#include <seriema/fabric/runtime.hpp>
#include <seriema/pipe/pipe.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"

using namespace seriema;
using namespace seriema::bench;
using fabric::thread_context;
using pipe::pipe_status;

namespace {

enum class relay : int { rforward, copy, direct };
constexpr const char* relay_names[] = {"rforward", "copy", "direct"};
constexpr std::size_t stream_size = 64 * 1024;

struct options {
  std::string transport = "shm";
  int reps = 5;
  std::vector<std::size_t> sizes = {8, 256, 4096, 65536};
  std::uint64_t round_trips = 1000;
  std::uint64_t stream_buffers = 2000;
  std::string json;
};

// Three spinning ranks on fewer than three CPUs: a spin that finds nothing yields its CPU (else
// every hop waits for the scheduler's time slice, milliseconds).
const bool oversubscribed = std::thread::hardware_concurrency() < 3;
void spun() {
  if (oversubscribed) std::this_thread::yield();
}

void check(pipe_status st, const char* what) {
  if (st != pipe_status::ok) throw error(fmt::format("pipe_forward: {}: {}", what, to_string(st)));
}

pipe::read_result next_buffer(pipe::reader& in) {
  for (;;) {
    pipe::read_result r = in.rread();
    if (r) return r;
    check(r.status == pipe_status::empty ? pipe_status::ok : r.status, "rread");
    spun();
  }
}

void send(pipe::writer& out, std::span<const std::byte> payload) {
  pipe::reservation r;
  while (!(r = out.rmalloc(payload.size()))) {
    check(r.status == pipe_status::exhausted ? pipe_status::ok : r.status, "rmalloc");
    spun();
  }
  std::memcpy(out.rmem(r.buffer).data(), payload.data(), payload.size());
  check(out.rwrite(r.buffer), "rwrite");
}

// The middle rank's step: the buffer it read goes on to the next pipe.
void pass_on(relay mode, pipe::reader& in, pipe::writer& out, const pipe::rbuffer& b) {
  if (mode == relay::rforward) {
    pipe_status st;
    while ((st = out.rforward(in, b)) == pipe_status::exhausted) spun();
    return check(st, "rforward");
  }
  send(out, in.rmem(b));
  check(in.rfree(b), "rfree");
}

// The pipes of one mode: rank 0 -> (1 ->) 2 forward, rank 2 -> 0 back.
struct relay_pipes {
  std::optional<pipe::writer> out;
  std::optional<pipe::reader> in;
  std::optional<pipe::writer> back_out;
  std::optional<pipe::reader> back_in;
};

relay_pipes open_pipes(thread_context& ctx, relay mode) {
  const auto deadline = fabric::deadline_clock::now() + std::chrono::seconds(30);
  pipe::pipe_options o;
  o.heap_bytes = 1 << 20;
  relay_pipes p;
  const fabric::thread_id first_hop = mode == relay::direct ? 2 : 1;
  if (ctx.id() == 0) {
    p.out = pipe::writer::open(ctx, first_hop, o, deadline);
    p.back_in = pipe::reader::open(ctx, 2, o, deadline);
  } else if (ctx.id() == 1 && mode != relay::direct) {
    p.in = pipe::reader::open(ctx, 0, o, deadline);
    p.out = pipe::writer::open(ctx, 2, o, deadline);
  } else if (ctx.id() == 2) {
    p.in = pipe::reader::open(ctx, first_hop == 2 ? 0 : 1, o, deadline);
    p.back_out = pipe::writer::open(ctx, 0, o, deadline);
  }
  return p;
}

// The middle rank relays `n` buffers; rank 2 frees them and (every `answer_every`) answers.
void relay_and_sink(thread_context& ctx, relay mode, relay_pipes& p, std::uint64_t n,
                    std::uint64_t answer_every) {
  const std::byte ack[8] = {};
  for (std::uint64_t i = 0; i < n; ++i) {
    const pipe::read_result got = next_buffer(*p.in);
    if (ctx.id() == 1) {
      pass_on(mode, *p.in, *p.out, got.buffer);
      continue;
    }
    check(p.in->rfree(got.buffer), "rfree");
    if ((i + 1) % answer_every == 0) send(*p.back_out, ack);
  }
}

double since_us(clock_type::time_point start) {
  return std::chrono::duration<double, std::micro>(clock_type::now() - start).count();
}

// Rank 0's MiB/s streaming `n` 64 KiB buffers through the relay until rank 2's acknowledgement.
double stream(thread_context& ctx, relay mode, std::uint64_t n) {
  relay_pipes p = open_pipes(ctx, mode);
  if (ctx.id() != 0) {
    if (p.in) relay_and_sink(ctx, mode, p, n, n);
    return 0;
  }
  const std::vector<std::byte> payload(stream_size, std::byte{7});
  const auto start = clock_type::now();
  for (std::uint64_t i = 0; i < n; ++i) send(*p.out, payload);
  check(p.back_in->rfree(next_buffer(*p.back_in).buffer), "rfree");
  return double(n * stream_size) / since_us(start) * 1e6 / (1 << 20);
}

// Rank 0's median round trip (µs) of `size` bytes out through the relay, 8 bytes back.
double round_trip(thread_context& ctx, relay mode, std::size_t size, std::uint64_t n) {
  relay_pipes p = open_pipes(ctx, mode);
  const std::uint64_t warmup = std::min<std::uint64_t>(n, 100);
  if (ctx.id() != 0) {
    if (p.in) relay_and_sink(ctx, mode, p, warmup + n, 1);
    return 0;
  }
  const std::vector<std::byte> payload(size, std::byte{3});
  std::vector<double> us;
  for (std::uint64_t i = 0; i < warmup + n; ++i) {
    const auto start = clock_type::now();
    send(*p.out, payload);
    const pipe::read_result back = next_buffer(*p.back_in);
    if (i >= warmup) us.push_back(since_us(start));
    check(p.back_in->rfree(back.buffer), "rfree");
  }
  return median(us);
}

struct samples {
  std::vector<double> stream_mib[3];
  std::vector<std::vector<double>> rtt_us[3];
};

void one_repetition(thread_context& ctx, const options& opt, bool warm, samples& all) {
  for (int m = 0; m < 3; ++m) {
    const auto mode = static_cast<relay>(m);
    const double mib = stream(ctx, mode, warm ? 100 : opt.stream_buffers);
    if (ctx.id() == 0 && !warm) all.stream_mib[m].push_back(mib);
    ctx.quiesce(std::chrono::seconds(60));
    for (std::size_t s = 0; s < opt.sizes.size(); ++s) {
      const double us = round_trip(ctx, mode, opt.sizes[s], warm ? 50 : opt.round_trips);
      if (ctx.id() == 0 && !warm) all.rtt_us[m][s].push_back(us);
      ctx.quiesce(std::chrono::seconds(60));
    }
  }
}

report_json report(const options& opt, const samples& all) {
  const machine_info machine = machine_info::here();
  fmt::print("# pipe_forward [{}]: rank 0 -> rank 1 -> rank 2 (relay), rank 2 -> rank 0 (answer)\n",
             opt.transport);
  fmt::print("{}\n# {} repetitions; medians\n\n", machine.line(), opt.reps);
  const double mib[3] = {median(all.stream_mib[0]), median(all.stream_mib[1]),
                         median(all.stream_mib[2])};
  fmt::print("streaming 64 KiB (MiB/s): rforward {:.0f}  copy {:.0f}  direct (no relay) {:.0f}  "
             "rforward/copy {:.2f}\n\n",
             mib[0], mib[1], mib[2], mib[0] / mib[1]);
  fmt::print("{:>8} {:>13} {:>13} {:>13} {:>14}\n", "bytes", "rforward us", "copy us",
             "direct us", "rforward/copy");
  report_json latency = report_json::array();
  for (std::size_t s = 0; s < opt.sizes.size(); ++s) {
    const double us[3] = {median(all.rtt_us[0][s]), median(all.rtt_us[1][s]),
                          median(all.rtt_us[2][s])};
    fmt::print("{:>8} {:>13.3f} {:>13.3f} {:>13.3f} {:>14.2f}\n", opt.sizes[s], us[0], us[1], us[2],
               us[0] / us[1]);
    latency.push_back({{"bytes", opt.sizes[s]},
                       {"rforward_round_trip_us", rounded(us[0], 4)},
                       {"copy_round_trip_us", rounded(us[1], 4)},
                       {"direct_round_trip_us", rounded(us[2], 4)},
                       {"rforward_over_copy", rounded(us[0] / us[1], 3)}});
  }
  return {{"benchmark", "pipe_forward"},
          {"transport", opt.transport},
          {"machine", machine.json()},
          {"repetitions", opt.reps},
          {"streaming",
           {{"bytes", stream_size},
            {"rforward_mib_s", rounded(mib[0], 1)},
            {"copy_mib_s", rounded(mib[1], 1)},
            {"direct_mib_s", rounded(mib[2], 1)},
            {"rforward_over_copy", rounded(mib[0] / mib[1], 3)}}},
          {"round_trip", latency}};
}

}  // namespace

int main(int argc, char** argv) try {
  options opt;
  CLI::App app{"pipe_forward: rforward against a hand-written relay and no relay"};
  app.add_option("--transport", opt.transport, "label for the output (shm, tcp)");
  app.add_option("--reps", opt.reps, "repetitions")->check(CLI::Range(1, 100));
  app.add_option("--sizes", opt.sizes, "round-trip sizes (bytes, 8 .. 65536)")->delimiter(',');
  app.add_option("--round-trips", opt.round_trips, "timed round trips per size and repetition");
  app.add_option("--stream-buffers", opt.stream_buffers, "64 KiB buffers per repetition");
  app.add_option("--json", opt.json, "write results here (rank 0)");
  CLI11_PARSE(app, argc, argv);
  for (std::size_t s : opt.sizes) {
    if (s < 8 || s > stream_size) throw error(fmt::format("pipe_forward: size {} not in 8..65536", s));
  }
  fabric::runtime rt;
  if (rt.size() != 3 || rt.options().threads_per_process != 1) {
    fmt::print(stderr, "pipe_forward: needs 3 processes x 1 thread: SERIEMA_THREADS=1 "
                       "seriema-run -n 3 -- pipe_forward\n");
    return 2;
  }
  samples all;
  for (auto& r : all.rtt_us) r.resize(opt.sizes.size());
  for (int rep = -1; rep < opt.reps; ++rep) {  // -1: warm-up
    rt.run([&](thread_context& ctx) { one_repetition(ctx, opt, rep < 0, all); });
  }
  rt.barrier();
  if (rt.rank() != 0) return 0;
  const report_json out = report(opt, all);
  if (!opt.json.empty()) write_report(opt.json, out);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "pipe_forward: {}\n", e.what());
  return 1;
}

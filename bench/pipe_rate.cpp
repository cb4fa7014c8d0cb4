// pipe_rate: remote pipes (seed 001) against their baselines in the same run. Rank 0's thread
// writes, rank 1's reads (SERIEMA_THREADS=1 seriema-run -n 2):
//  * latency: rwrite -> rread ping-pong over a duplex, one-way = half the round trip (median), at
//    8 B .. 64 KiB, for each write protocol (one_operation = the seed's PUT_W_SYNC,
//    data_then_flag = its 2PUT), against ucx_perftest ucp_put_lat (one-way, typical);
//  * streaming: 64 KiB rwrites (the writer copies each payload in, the reader frees it) against
//    the raw transmitter putting the same bytes into a ring of the same size in the reader's
//    memory, and ucx_perftest ucp_put_bw;
//  * an irregular trace (sizes 8 B .. 64 KiB log-uniform): time per buffer and the heap's peak for
//    next, best, worst and first fit, and for a fixed-slot ring (every buffer takes a 64 KiB slot:
//    rmalloc(64 KiB), rwrite of the bytes used).
//  * the pull direction (the seed's rread): rpost -> rget ping-pong, one-way, at the same sizes.
// MPI-3 RMA (the seed's baseline) is bench/mpi_rma_pipe, run beside it by bench/run-pipes.sh.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <seriema/fabric/runtime.hpp>
#include <seriema/pipe/pipe.hpp>
#include <seriema/transfer/transmitter.hpp>
#include <seriema/transfer/ucx.hpp>
#include <string>
#include <vector>

#include "bench_support.hpp"

using namespace seriema;
using namespace seriema::bench;
using fabric::thread_context;
using pipe::pipe_status;

namespace {

struct options {
  std::string transport;
  int reps = 5;
  std::vector<std::size_t> sizes = {8, 64, 256, 1024, 4096, 16384, 65536};
  std::uint64_t round_trips = 2000;
  std::uint64_t stream_buffers = 2000;
  std::uint64_t trace_buffers = 2000;
  perftest_options perftest;
  std::string json;
};

constexpr std::size_t stream_size = 64 * 1024;
constexpr std::size_t heap = 1 << 20;
const std::vector<pipe::write_protocol> protocols = {pipe::write_protocol::one_operation,
                                                     pipe::write_protocol::data_then_flag};

double since_us(clock_type::time_point start) {
  return std::chrono::duration<double, std::micro>(clock_type::now() - start).count();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * double(v.size() - 1))];
}

std::vector<std::byte> source_bytes(std::size_t n) {
  std::vector<std::byte> bytes(n);
  for (std::size_t i = 0; i < n; ++i) bytes[i] = static_cast<std::byte>(i * 7 + 1);
  return bytes;
}

// The next buffer of the pipe, spinning (rread polls when it finds nothing). Throws on anything
// but ok and empty.
pipe::read_result next_buffer(pipe::reader& in) {
  for (;;) {
    pipe::read_result r = in.rread();
    if (r) return r;
    if (r.status != pipe_status::empty) {
      throw error(fmt::format("pipe_rate: rread: {}", pipe::to_string(r.status)));
    }
  }
}

// Allocates `n` bytes (spinning while the heap is full), copies `payload` in, writes `used`.
void send(pipe::writer& out, std::size_t n, std::span<const std::byte> payload) {
  pipe::reservation r;
  while (!(r = out.rmalloc(n))) {
    if (r.status != pipe_status::exhausted) {
      throw error(fmt::format("pipe_rate: rmalloc({}): {}", n, pipe::to_string(r.status)));
    }
  }
  std::memcpy(out.rmem(r.buffer).data(), payload.data(), payload.size());
  const pipe_status st = out.rwrite(r.buffer, payload.size());
  if (st != pipe_status::ok) throw error(fmt::format("pipe_rate: rwrite: {}", pipe::to_string(st)));
}

void release(pipe::reader& in, const pipe::rbuffer& b) {
  const pipe_status st = in.rfree(b);
  if (st != pipe_status::ok) throw error(fmt::format("pipe_rate: rfree: {}", pipe::to_string(st)));
}

pipe::duplex open_pair(thread_context& ctx, const pipe::pipe_options& o) {
  return pipe::duplex::open(ctx, 1 - ctx.id(), o,
                            fabric::deadline_clock::now() + std::chrono::seconds(30));
}

// One-way latency samples (µs) of `n` ping-pongs of `size` bytes; rank 1 echoes.
std::vector<double> ping_pong(thread_context& ctx, std::size_t size, pipe::write_protocol p,
                              std::uint64_t n) {
  pipe::pipe_options o;
  o.heap_bytes = heap;
  o.protocol = p;
  pipe::duplex ends = open_pair(ctx, o);
  const std::vector<std::byte> payload = source_bytes(size);
  std::vector<double> one_way;
  const std::uint64_t warmup = std::min<std::uint64_t>(n, 200);
  for (std::uint64_t i = 0; i < warmup + n; ++i) {
    if (ctx.id() == 0) {
      const auto start = clock_type::now();
      send(ends.out, size, payload);
      const pipe::read_result back = next_buffer(ends.in);
      if (i >= warmup) one_way.push_back(since_us(start) / 2);
      release(ends.in, back.buffer);
    } else {
      const pipe::read_result got = next_buffer(ends.in);
      send(ends.out, size, ends.in.rmem(got.buffer));
      release(ends.in, got.buffer);
    }
  }
  return one_way;
}

// The pull direction: one-way µs of `n` ping-pongs of `size` bytes, each a staged buffer posted
// (rstage, rpost) and pulled by the other side (rget into its own memory); rank 1 posts back what
// it pulled.
std::vector<double> pull_ping_pong(thread_context& ctx, std::size_t size, std::uint64_t n) {
  pipe::pipe_options o;
  o.heap_bytes = 4096;
  o.pull_heap_bytes = 256 * 1024;
  pipe::duplex ends = open_pair(ctx, o);
  const std::vector<std::byte> payload = source_bytes(size);
  std::vector<std::byte> into(size);
  auto post = [&](std::span<const std::byte> bytes) {
    pipe::reservation r;
    while (!(r = ends.out.rstage(size))) {
      if (r.status != pipe_status::exhausted) throw error("pipe_rate: rstage refused");
    }
    std::memcpy(ends.out.rmem(r.buffer).data(), bytes.data(), size);
    if (ends.out.rpost(r.buffer) != pipe_status::ok) throw error("pipe_rate: rpost refused");
  };
  auto pull = [&] {
    for (;;) {
      const pipe::get_result got = ends.in.rget(into);
      if (got) return;
      if (got.status != pipe_status::empty) throw error("pipe_rate: rget refused");
    }
  };
  std::vector<double> one_way;
  const std::uint64_t warmup = std::min<std::uint64_t>(n, 200);
  for (std::uint64_t i = 0; i < warmup + n; ++i) {
    if (ctx.id() == 0) {
      const auto start = clock_type::now();
      post(payload);
      pull();
      if (i >= warmup) one_way.push_back(since_us(start) / 2);
    } else {
      pull();
      post(into);
    }
  }
  return one_way;
}

// Streams `n` buffers of `sizes` (payload copied in by the writer, freed unread by the reader);
// returns the writer's microseconds until the reader's acknowledgement came back.
struct stream_result {
  double us = 0;
  std::uint64_t peak_heap = 0;
  std::uint64_t bytes = 0;
};
stream_result stream(thread_context& ctx, const pipe::pipe_options& o,
                     const std::vector<std::size_t>& sizes, bool fixed_slots) {
  pipe::duplex ends = open_pair(ctx, o);
  const std::vector<std::byte> payload = source_bytes(stream_size);
  stream_result result;
  if (ctx.id() == 0) {
    const auto start = clock_type::now();
    for (std::size_t s : sizes) {
      send(ends.out, fixed_slots ? stream_size : s, std::span(payload).first(s));
      result.bytes += s;
    }
    release(ends.in, next_buffer(ends.in).buffer);  // the reader has them all
    result.us = since_us(start);
    result.peak_heap = ends.out.counters().peak_heap_bytes;
  } else {
    for (std::size_t i = 0; i < sizes.size(); ++i) release(ends.in, next_buffer(ends.in).buffer);
    send(ends.out, 8, std::span(payload).first(8));
  }
  return result;
}

// The raw baseline of streaming: transmitter puts of 64 KiB into a ring in rank 1's memory as
// large as the pipe's heap, each slot reused once the put that last filled it completed; rank 1
// progresses (over tcp the puts land through it) until rank 0 is done. Returns rank 0's µs.
bool raw_done = false;  // rank 1's thread only
double raw_puts(thread_context& ctx, std::uint64_t n) {
  if (ctx.id() != 0) {
    raw_done = false;
    ctx.wait_until([] { return raw_done; },
                   fabric::deadline_clock::now() + std::chrono::seconds(300));
    return 0;
  }
  const transfer::remote_memory_locator region = ctx.allocate_remote(1, heap);
  transfer::ucx_endpoint& endpoint = ctx.endpoint_to(region.process);
  transfer::transmitter tx(endpoint, transfer::transmitter_options::from_environment());
  const transfer::remote_memory memory(endpoint, region, /*allow_direct=*/false);
  const std::vector<std::byte> payload = source_bytes(stream_size);
  std::vector<transfer::completion_tag> slots(heap / stream_size);
  const auto start = clock_type::now();
  for (std::uint64_t i = 0; i < n; ++i) {
    transfer::completion_tag& slot = slots[i % slots.size()];
    if (!slot.is_complete() && tx.wait(slot) != transfer::op_status::ok) {
      throw error("pipe_rate: raw put: the peer failed");
    }
    if (tx.put(payload, memory, (i % slots.size()) * stream_size) != transfer::op_status::ok) {
      throw error("pipe_rate: raw put refused");
    }
    slot = tx.current_tag();
  }
  if (tx.flush() != transfer::op_status::ok) throw error("pipe_rate: raw put: flush failed");
  const double us = since_us(start);
  (void)ctx.call(1, [] { raw_done = true; });
  ctx.free_remote(region);
  return us;
}

struct trace_variant {
  const char* name;
  transfer::fit_policy fit;
  bool fixed_slots;
};
const std::vector<trace_variant> trace_variants = {
    {"next fit", transfer::fit_policy::next_fit, false},
    {"best fit", transfer::fit_policy::best_fit, false},
    {"worst fit", transfer::fit_policy::worst_fit, false},
    {"first fit", transfer::fit_policy::first_fit, false},
    {"fixed-slot ring", transfer::fit_policy::next_fit, true}};

std::vector<std::size_t> irregular_sizes(std::uint64_t n) {
  std::mt19937_64 random(2018);  // the same trace in every run
  std::uniform_real_distribution<double> lg(std::log(8.0), std::log(double(stream_size)));
  std::vector<std::size_t> sizes(n);
  for (auto& s : sizes) s = std::clamp<std::size_t>(std::size_t(std::exp(lg(random))), 8, stream_size);
  return sizes;
}

struct samples {
  // [protocol][size] one-way µs (every repetition's round trips)
  std::vector<std::vector<std::vector<double>>> latency;
  std::vector<std::vector<double>> pull_latency;  // [size] one-way µs of rpost -> rget
  std::vector<std::vector<double>> stream_mib;  // [protocol] MiB/s per repetition
  std::vector<double> raw_put_mib;
  std::vector<std::vector<double>> trace_us;  // [variant] µs per buffer per repetition
  std::vector<std::uint64_t> trace_peak;      // [variant] peak heap bytes
  std::vector<std::vector<double>> put_lat_us;  // [size] ucx_perftest ucp_put_lat per repetition
  std::vector<double> put_bw_mib;               // ucx_perftest ucp_put_bw 64 KiB per repetition
};

double mib_per_s(std::uint64_t bytes, double us) { return double(bytes) / us * 1e6 / (1 << 20); }

// One repetition of every measurement (rank 0 keeps the numbers; `warm`: fewer, not kept).
void one_repetition(thread_context& ctx, const options& opt, bool warm, samples& out) {
  const std::uint64_t trips = warm ? 200 : opt.round_trips;
  for (std::size_t p = 0; p < protocols.size(); ++p) {
    for (std::size_t s = 0; s < opt.sizes.size(); ++s) {
      std::vector<double> v = ping_pong(ctx, opt.sizes[s], protocols[p], trips);
      if (!warm && ctx.id() == 0) {
        out.latency[p][s].insert(out.latency[p][s].end(), v.begin(), v.end());
      }
    }
  }
  for (std::size_t s = 0; s < opt.sizes.size(); ++s) {
    std::vector<double> v = pull_ping_pong(ctx, opt.sizes[s], trips);
    if (!warm && ctx.id() == 0) {
      out.pull_latency[s].insert(out.pull_latency[s].end(), v.begin(), v.end());
    }
  }
  const std::uint64_t buffers = warm ? 100 : opt.stream_buffers;
  const std::vector<std::size_t> full(buffers, stream_size);
  for (std::size_t p = 0; p < protocols.size(); ++p) {
    pipe::pipe_options o;
    o.heap_bytes = heap;
    o.width = 16;
    o.protocol = protocols[p];
    const stream_result r = stream(ctx, o, full, false);
    if (!warm && ctx.id() == 0) out.stream_mib[p].push_back(mib_per_s(r.bytes, r.us));
  }
  const double raw_us = raw_puts(ctx, buffers);
  if (!warm && ctx.id() == 0) out.raw_put_mib.push_back(mib_per_s(buffers * stream_size, raw_us));
  const std::vector<std::size_t> trace = irregular_sizes(warm ? 100 : opt.trace_buffers);
  for (std::size_t v = 0; v < trace_variants.size(); ++v) {
    pipe::pipe_options o;
    o.heap_bytes = heap;
    o.fit = trace_variants[v].fit;
    const stream_result r = stream(ctx, o, trace, trace_variants[v].fixed_slots);
    if (!warm && ctx.id() == 0) {
      out.trace_us[v].push_back(r.us / double(trace.size()));
      out.trace_peak[v] = std::max(out.trace_peak[v], r.peak_heap);
    }
  }
}

void run_perftest(perftest_runner& perftest, const options& opt, samples& out) {
  for (std::size_t s = 0; s < opt.sizes.size(); ++s) {
    const perftest_result r = perftest.run(opt.sizes[s], opt.round_trips, 200, "ucp_put_lat");
    if (r.ok) {
      out.put_lat_us[s].push_back(r.latency_typical_us);
    } else {
      fmt::print(stderr, "pipe_rate: ucx_perftest ucp_put_lat {} B: {}\n", opt.sizes[s], r.error);
    }
  }
  const perftest_result bw = perftest.run(stream_size, opt.stream_buffers, 100, "ucp_put_bw");
  if (bw.ok) {
    out.put_bw_mib.push_back(bw.mib_per_s);
  } else {
    fmt::print(stderr, "pipe_rate: ucx_perftest ucp_put_bw: {}\n", bw.error);
  }
}

std::optional<double> median_or_none(const std::vector<double>& v) {
  if (v.empty()) return std::nullopt;
  return median(v);
}

std::string cell(std::optional<double> x, int decimals) {
  return x ? fmt::format("{:.{}f}", *x, decimals) : std::string("-");
}

std::optional<double> ratio(std::optional<double> a, std::optional<double> b) {
  if (!a || !b || *b == 0) return std::nullopt;
  return *a / *b;
}

report_json report(const options& opt, const samples& all, const std::string& perftest_tls,
                   const std::string& publish_path) {
  const machine_info machine = machine_info::here();
  fmt::print("# pipe_rate [{}]: rank 0 writes, rank 1 reads; publication: {}\n", opt.transport,
             publish_path);
  fmt::print("{}\n", machine.line());
  fmt::print("# {} repetitions; medians; ucx_perftest with UCX_TLS={}\n\n", opt.reps,
             perftest_tls.empty() ? "(default)" : perftest_tls);
  report_json latency = report_json::array();
  fmt::print("{:>8} {:>14} {:>14} {:>14} {:>10} {:>10} {:>10}\n", "bytes", "one_op us", "2put us",
             "put_lat us", "one_op/raw", "2put/raw", "pull us");
  for (std::size_t s = 0; s < opt.sizes.size(); ++s) {
    const auto one = median_or_none(all.latency[0][s]);
    const auto two = median_or_none(all.latency[1][s]);
    const auto raw = median_or_none(all.put_lat_us[s]);
    const auto pulled = median_or_none(all.pull_latency[s]);
    fmt::print("{:>8} {:>14} {:>14} {:>14} {:>10} {:>10} {:>10}\n", opt.sizes[s], cell(one, 3),
               cell(two, 3), cell(raw, 3), cell(ratio(one, raw), 2), cell(ratio(two, raw), 2),
               cell(pulled, 3));
    latency.push_back({{"bytes", opt.sizes[s]},
                       {"one_operation_us", rounded_or_null(one, 4)},
                       {"one_operation_p99_us", rounded(percentile(all.latency[0][s], 0.99), 4)},
                       {"data_then_flag_us", rounded_or_null(two, 4)},
                       {"pull_us", rounded_or_null(pulled, 4)},
                       {"ucp_put_lat_us", rounded_or_null(raw, 4)},
                       {"one_operation_over_put_lat", rounded_or_null(ratio(one, raw), 3)},
                       {"data_then_flag_over_put_lat", rounded_or_null(ratio(two, raw), 3)}});
  }
  const auto s_one = median_or_none(all.stream_mib[0]);
  const auto s_two = median_or_none(all.stream_mib[1]);
  const auto s_raw = median_or_none(all.raw_put_mib);
  const auto s_bw = median_or_none(all.put_bw_mib);
  fmt::print("\nstreaming 64 KiB (MiB/s): one_op {}  2put {}  raw transmitter put {}  "
             "ucp_put_bw {}\n",
             cell(s_one, 0), cell(s_two, 0), cell(s_raw, 0), cell(s_bw, 0));
  fmt::print("  one_op / raw put {}   one_op / ucp_put_bw {}   2put / raw put {}\n",
             cell(ratio(s_one, s_raw), 2), cell(ratio(s_one, s_bw), 2),
             cell(ratio(s_two, s_raw), 2));
  report_json trace = report_json::array();
  const auto next_us = median_or_none(all.trace_us[0]);
  const double next_peak = double(all.trace_peak[0]);
  fmt::print("\nirregular trace ({} buffers, 8 B .. 64 KiB log-uniform, heap {} KiB):\n",
             opt.trace_buffers, heap / 1024);
  fmt::print("{:>16} {:>12} {:>10} {:>14} {:>10}\n", "allocator", "us/buffer", "/next",
             "peak heap KiB", "/next");
  for (std::size_t v = 0; v < trace_variants.size(); ++v) {
    const auto us = median_or_none(all.trace_us[v]);
    const double peak = double(all.trace_peak[v]);
    fmt::print("{:>16} {:>12} {:>10} {:>14.0f} {:>10.2f}\n", trace_variants[v].name, cell(us, 3),
               cell(ratio(us, next_us), 2), peak / 1024, peak / next_peak);
    trace.push_back({{"allocator", trace_variants[v].name},
                     {"us_per_buffer", rounded_or_null(us, 4)},
                     {"over_next_fit", rounded_or_null(ratio(us, next_us), 3)},
                     {"peak_heap_bytes", all.trace_peak[v]},
                     {"peak_over_next_fit", rounded(peak / next_peak, 3)}});
  }
  return {{"benchmark", "pipe_rate"},
          {"transport", opt.transport},
          {"publication", publish_path},
          {"machine", machine.json()},
          {"repetitions", opt.reps},
          {"perftest_tls", perftest_tls},
          {"latency", latency},
          {"streaming",
           {{"bytes", stream_size},
            {"one_operation_mib_s", rounded_or_null(s_one, 1)},
            {"data_then_flag_mib_s", rounded_or_null(s_two, 1)},
            {"raw_put_mib_s", rounded_or_null(s_raw, 1)},
            {"ucp_put_bw_mib_s", rounded_or_null(s_bw, 1)},
            {"one_operation_over_raw_put", rounded_or_null(ratio(s_one, s_raw), 3)},
            {"one_operation_over_put_bw", rounded_or_null(ratio(s_one, s_bw), 3)},
            {"data_then_flag_over_raw_put", rounded_or_null(ratio(s_two, s_raw), 3)}}},
          {"trace", trace}};
}

}  // namespace

int main(int argc, char** argv) try {
  const launch_state launch = launch_state::capture();
  options opt;
  CLI::App app{"pipe_rate: remote pipes against ucx_perftest and the raw transmitter"};
  app.add_option("--transport", opt.transport, "label for the output (shm, tcp); default: guessed");
  app.add_option("--reps", opt.reps, "repetitions")->check(CLI::Range(1, 100));
  app.add_option("--sizes", opt.sizes, "latency sizes (bytes, 8 .. 65536)")->delimiter(',');
  app.add_option("--round-trips", opt.round_trips, "timed ping-pongs per size and repetition");
  app.add_option("--stream-buffers", opt.stream_buffers, "64 KiB buffers streamed per repetition");
  app.add_option("--trace-buffers", opt.trace_buffers, "buffers of the irregular trace");
  opt.perftest.add_to(app);
  app.add_option("--json", opt.json, "write results here (rank 0)");
  CLI11_PARSE(app, argc, argv);
  for (std::size_t s : opt.sizes) {
    if (s < 8 || s > stream_size) throw error(fmt::format("pipe_rate: size {} not in 8..65536", s));
  }

  fabric::runtime rt;
  if (rt.size() != 2 || rt.options().threads_per_process != 1) {
    fmt::print(stderr, "pipe_rate: needs 2 processes x 1 thread: SERIEMA_THREADS=1 seriema-run "
                       "-n 2 -- pipe_rate\n");
    return 2;
  }
  pair_setup pair(rt, launch, opt.perftest, opt.transport, "pipe_rate");
  samples all;
  all.latency.assign(protocols.size(), std::vector<std::vector<double>>(opt.sizes.size()));
  all.pull_latency.resize(opt.sizes.size());
  all.stream_mib.resize(protocols.size());
  all.trace_us.resize(trace_variants.size());
  all.trace_peak.assign(trace_variants.size(), 0);
  all.put_lat_us.resize(opt.sizes.size());
  std::string publish_path;
  for (int rep = -1; rep < opt.reps; ++rep) {  // -1: warm-up (endpoints, regions, pages)
    rt.run([&](thread_context& ctx) {
      one_repetition(ctx, opt, rep < 0, all);
      if (ctx.id() == 0 && publish_path.empty()) {
        pipe::duplex probe = open_pair(ctx, {});
        publish_path = probe.out.direct() ? "direct stores"
                       : probe.out.protocol() == pipe::write_protocol::one_operation
                           ? "write message"
                           : "put, fence, put";
      } else if (ctx.id() == 1 && publish_path.empty()) {
        pipe::duplex probe = open_pair(ctx, {});
        publish_path = "-";
      }
    });
    if (rep >= 0 && rt.rank() == 0 && pair.perftest) run_perftest(*pair.perftest, opt, all);
    rt.allgather({});
  }
  rt.barrier();
  if (rt.rank() != 0) return 0;
  const report_json out = report(opt, all, pair.perftest_tls, publish_path);
  if (!opt.json.empty()) write_report(opt.json, out);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "pipe_rate: {}\n", e.what());
  return 1;
}

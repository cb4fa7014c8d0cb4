// dsm_diff: the seed's diff-merge microbenchmark (MENPS, mecom2's bench_diff): a 32 KiB block
// with half of its bytes changed (scattered, as a shuffled index set picks them) reaches the
// block's master copy in another process by
//  * floating: seriema's release (block lock, one get of the master from its home, three-way
//    merge, the home moves to the writer), the writers alternating so that every release
//    migrates the home; `floating-local` is the same with one writer (the home stays: no get);
//  * packdiff: the diff packed into runs (offset, length, bytes), sent in one call that the home
//    unpacks into its copy, the writer waiting until it ran (HLRC's home-based merge);
//  * scattered: one put per changed run into the home's registered copy, then a flush (Argo's
//    discontiguous RDMA writes);
//  * contiguous: one put of the whole block and a flush (the seed's lower bound, no merge).
// Two processes x 1 thread (SERIEMA_THREADS=1 seriema-run -n 2). Each method is timed on the
// writer from the first byte of its merge work to the master holding the block (median µs over
// the iterations of each repetition, median over repetitions); the master is checked after every
// iteration of every method, so a fast wrong answer fails the run.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <random>
#include <seriema/dsm/detail/merge.hpp>
#include <seriema/dsm/space.hpp>
#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/invoke.hpp>
#include <seriema/invoke/synchronizer.hpp>
#include <seriema/transfer/transmitter.hpp>
#include <string>
#include <vector>

#include "bench_support.hpp"
#include "json_report.hpp"

using namespace seriema;
using namespace seriema::bench;
using fabric::thread_context;

namespace {

constexpr std::size_t block = 32 * 1024;
constexpr const char* method_names[] = {"floating", "floating-local", "packdiff", "scattered",
                                        "contiguous"};
constexpr int methods = 5;

struct options {
  std::string transport = "shm";
  int reps = 5;
  int iterations = 200;
  double changed = 0.5;
  std::string json;
};

using clock_type = std::chrono::steady_clock;
double micros(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

/// Which bytes change (the same half in every iteration, as the seed's shuffled index set) and
/// iteration i's value of each: never equal to the value before, so every chosen byte differs.
struct dirty_pattern {
  std::vector<std::uint32_t> indices;
  explicit dirty_pattern(double fraction) {
    std::vector<std::uint32_t> all(block);
    std::iota(all.begin(), all.end(), 0u);
    std::shuffle(all.begin(), all.end(), std::mt19937(42));
    all.resize(static_cast<std::size_t>(fraction * block));
    std::sort(all.begin(), all.end());
    indices = std::move(all);
  }
  static std::byte value(int iteration, std::uint32_t i) {
    return static_cast<std::byte>((iteration * 7 + i * 13) % 251 + 1);
  }
  /// The block after iteration `it` (0 .. it written): chosen bytes hold it's value, others 0.
  void apply(std::byte* b, int it) const {
    for (std::uint32_t i : indices) b[i] = value(it, i);
  }
};

/// The home's copy for packdiff (rank 0's process; written only by calls run on its thread).
std::vector<std::byte> packdiff_master(block);

/// Calls run(offset, length) for each maximal run of bytes where `mine` differs from `twin`.
template <class Run>
void for_each_changed_run(const std::byte* mine, const std::byte* twin, Run run) {
  std::size_t i = 0;
  while (i < block) {
    if (mine[i] == twin[i]) {
      ++i;
      continue;
    }
    std::size_t end = i + 1;
    while (end < block && mine[end] != twin[end]) ++end;
    run(i, end - i);
    i = end;
  }
}

/// Runs of bytes that differ between `mine` and `twin`: [u16 offset][u16 length][bytes]...
std::size_t pack_diff(const std::byte* mine, const std::byte* twin, std::byte* out) {
  std::size_t at = 0;
  for_each_changed_run(mine, twin, [&](std::size_t i, std::size_t n) {
    const auto offset = static_cast<std::uint16_t>(i);
    const auto length = static_cast<std::uint16_t>(n);
    std::memcpy(out + at, &offset, 2);
    std::memcpy(out + at + 2, &length, 2);
    std::memcpy(out + at + 4, mine + i, n);
    at += 4 + n;
  });
  return at;
}

void unpack_diff(std::span<const std::byte> diff, std::byte* into) {
  std::size_t at = 0;
  while (at + 4 <= diff.size()) {
    std::uint16_t offset;
    std::uint16_t length;
    std::memcpy(&offset, diff.data() + at, 2);
    std::memcpy(&length, diff.data() + at + 2, 2);
    std::memcpy(into + offset, diff.data() + at + 4, length);
    at += 4 + length;
  }
}

void expect_block(const std::byte* got, const dirty_pattern& p, int it, const char* method) {
  std::vector<std::byte> want(block);
  p.apply(want.data(), it);
  if (std::memcmp(got, want.data(), block) != 0) {
    throw error(fmt::format("dsm_diff: {}: the master copy is wrong after iteration {}", method,
                            it));
  }
}

/// floating (writers alternate: every release migrates) or floating-local (rank 1 writes).
std::vector<double> run_floating(thread_context& ctx, dsm::space& sp, const dirty_pattern& p,
                                 const options& opt, bool alternate, int first_iteration) {
  std::vector<double> us;
  auto* shared = sp.base() + 2 * block;  // a block nothing else touched (home: none yet)
  for (int k = 0; k < opt.iterations; ++k) {
    const int it = first_iteration + k;
    const int writer = alternate ? it % 2 : 1;
    if (ctx.process() == writer) {
      const std::span<std::byte> b = sp.write(ctx, shared, block);  // fetch and twin: untimed
      p.apply(b.data(), it);
      const auto t0 = clock_type::now();
      sp.release(ctx);
      us.push_back(micros(t0, clock_type::now()));
    }
    sp.barrier(ctx);
    expect_block(sp.read(ctx, shared, block).data(), p, it, method_names[alternate ? 0 : 1]);
    sp.barrier(ctx);
  }
  return us;
}

std::vector<double> run_packdiff(thread_context& ctx, const dirty_pattern& p, const options& opt,
                                 int first_iteration) {
  std::vector<double> us;
  std::vector<std::byte> mine(block);
  std::vector<std::byte> twin(block);
  std::vector<std::byte> packed(block * 3);
  for (int k = 0; k < opt.iterations; ++k) {
    const int it = first_iteration + k;
    if (ctx.process() == 1) {
      twin = mine;
      p.apply(mine.data(), it);
      const auto t0 = clock_type::now();
      const std::size_t n = pack_diff(mine.data(), twin.data(), packed.data());
      invoke::synchronizer applied(ctx, 1);
      const auto sent = invoke::call_buffer(
          ctx, 0,
          [](thread_context&, std::span<const std::byte> diff) {
            unpack_diff(diff, packdiff_master.data());
          },
          std::span<const std::byte>(packed.data(), n), applied);
      if (sent != fabric::call_status::ok || !applied.wait()) {
        throw error(fmt::format("dsm_diff: packdiff call: {}", fabric::to_string(sent)));
      }
      us.push_back(micros(t0, clock_type::now()));
    }
    ctx.quiesce();
    if (ctx.process() == 0) expect_block(packdiff_master.data(), p, it, "packdiff");
  }
  return us;
}

/// scattered (one put per changed run) or contiguous (one put of the block).
std::vector<double> run_puts(thread_context& ctx, const dirty_pattern& p, const options& opt,
                             bool scattered, const transfer::remote_memory_locator& home,
                             const std::byte* home_copy, int first_iteration) {
  std::vector<double> us;
  if (ctx.process() == 1) {
    transfer::remote_memory target(ctx.endpoint_to(0), home, false);
    transfer::transmitter tx(target.endpoint(), {1u << 20, false});
    std::vector<std::byte> mine(block);
    std::vector<std::byte> twin(block);
    for (int k = 0; k < opt.iterations; ++k) {
      twin = mine;
      p.apply(mine.data(), first_iteration + k);
      const auto t0 = clock_type::now();
      if (scattered) {
        for_each_changed_run(mine.data(), twin.data(), [&](std::size_t i, std::size_t n) {
          if (tx.put({mine.data() + i, n}, target, i) != transfer::op_status::ok) {
            throw error("dsm_diff: scattered put refused");
          }
        });
      }
      if (!scattered && tx.put({mine.data(), block}, target, 0) != transfer::op_status::ok) {
        throw error("dsm_diff: contiguous put refused");
      }
      if (tx.flush() != transfer::op_status::ok) throw error("dsm_diff: flush failed");
      us.push_back(micros(t0, clock_type::now()));
    }
  }
  ctx.quiesce();
  if (ctx.process() == 0) {
    expect_block(home_copy, p, first_iteration + opt.iterations - 1,
                 scattered ? "scattered" : "contiguous");
  }
  return us;
}

}  // namespace

int main(int argc, char** argv) try {
  options opt;
  CLI::App app{"dsm_diff: a 32 KiB block, half its bytes changed, merged into a remote master"};
  app.add_option("--transport", opt.transport, "label for the output (shm, tcp)");
  app.add_option("--reps", opt.reps, "repetitions")->check(CLI::Range(1, 100));
  app.add_option("--iterations", opt.iterations, "merges per method and repetition")
      ->check(CLI::Range(2, 100000));
  app.add_option("--changed", opt.changed, "fraction of the block's bytes changed")
      ->check(CLI::Range(0.01, 1.0));
  app.add_option("--json", opt.json, "write results here (rank 0)");
  CLI11_PARSE(app, argc, argv);
  fabric::runtime rt;
  if (rt.size() != 2 || rt.options().threads_per_process != 1) {
    fmt::print(stderr, "dsm_diff: needs 2 processes x 1 thread: SERIEMA_THREADS=1 seriema-run "
                       "-n 2 -- dsm_diff\n");
    return 2;
  }
  const dirty_pattern pattern(opt.changed);
  dsm::space_options so;
  so.bytes = 4 * block;
  so.block_bytes = block;
  std::vector<std::vector<double>> per_rep(methods);
  int next_iteration = 1;  // the value of iteration 0 would be the untouched block's
  for (int rep = -1; rep < opt.reps; ++rep) {  // -1: warm-up
    dsm::space sp(rt, so);
    rt.run([&](thread_context& ctx) {
      // The home's registered copy for the put methods (rank 0's memory, reached by put only).
      transfer::remote_memory_locator home;
      if (ctx.process() == 1) home = ctx.allocate_remote(0, block);
      std::vector<std::vector<double>> us(methods);
      us[0] = run_floating(ctx, sp, pattern, opt, true, next_iteration);
      us[1] = run_floating(ctx, sp, pattern, opt, false, next_iteration + opt.iterations);
      us[2] = run_packdiff(ctx, pattern, opt, next_iteration);
      // The put methods need the home's copy address on rank 0: it travels in a call.
      static std::byte* home_copy = nullptr;
      if (ctx.process() == 1) {
        const std::uint64_t address = home.address;
        const auto sent = invoke::call(ctx, 0, [address](thread_context&) {
          home_copy = reinterpret_cast<std::byte*>(address);
          std::memset(home_copy, 0, block);  // the scattered puts write only the changed bytes
        });
        if (sent != fabric::call_status::ok) throw error("dsm_diff: the home's address not sent");
      }
      ctx.quiesce();
      us[3] = run_puts(ctx, pattern, opt, true, home, home_copy, next_iteration);
      us[4] = run_puts(ctx, pattern, opt, false, home, home_copy, next_iteration);
      if (ctx.process() == 1) ctx.free_remote(home);
      ctx.quiesce();  // rank 0 serves the free before it leaves run()
      if (rep < 0) return;
      for (int m = 0; m < methods; ++m) {
        if (!us[m].empty()) per_rep[m].push_back(median(us[m]));
      }
    });
    next_iteration += 2 * opt.iterations;
  }
  // Rank 1 wrote in every method; rank 0 only in half of the floating iterations: report
  // rank 1's medians, which cover every method.
  std::vector<double> mine(methods);
  for (int m = 0; m < methods; ++m) mine[m] = per_rep[m].empty() ? 0.0 : median(per_rep[m]);
  const auto all = rt.allgather(std::as_bytes(std::span(mine)));
  rt.barrier();
  if (rt.rank() != 0) return 0;
  std::vector<double> r1(methods);
  std::memcpy(r1.data(), all[1].data(), sizeof(double) * methods);
  report_json out;
  out["benchmark"] = "dsm_diff";
  out["transport"] = opt.transport;
  out["block_bytes"] = block;
  out["changed_fraction"] = opt.changed;
  out["changed_runs"] = [&] {
    std::size_t runs = 0;
    for (std::size_t k = 0; k < pattern.indices.size(); ++k) {
      if (k == 0 || pattern.indices[k] != pattern.indices[k - 1] + 1) ++runs;
    }
    return runs;
  }();
  out["reps"] = opt.reps;
  out["iterations"] = opt.iterations;
  const machine_info machine = machine_info::here();
  out["machine"] = machine.json();
  fmt::print("{}\n", machine.line());
  fmt::print("dsm_diff over {}: 32 KiB block, {:.0f} % of bytes changed ({} runs), median µs\n",
             opt.transport, opt.changed * 100, out["changed_runs"].get<std::size_t>());
  for (int m = 0; m < methods; ++m) {
    out["median_us"][method_names[m]] = rounded(r1[m], 2);
    fmt::print("  {:<15} {:>10.2f} µs\n", method_names[m], r1[m]);
  }
  out["ratio"]["floating_over_packdiff"] = rounded(r1[0] / r1[2], 3);
  out["ratio"]["floating_over_scattered"] = rounded(r1[0] / r1[3], 3);
  fmt::print("  floating / packdiff  {:.3f} (goal <= 0.5)\n  floating / scattered {:.3f} (goal "
             "<= 0.1)\n",
             r1[0] / r1[2], r1[0] / r1[3]);
  if (!opt.json.empty()) write_report(opt.json, out);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "dsm_diff: {}\n", e.what());
  return 1;
}

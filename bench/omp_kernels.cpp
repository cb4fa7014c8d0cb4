// omp_kernels: NAS EP in one process with OpenMP (the ceiling of bench/run-dsm.sh's kernel
// comparison: threads sharing memory with no protocol at all); with --threads 1 the sequential
// kernel the speedups are measured against. Same batches, timing and verification as
// bench/dsm_kernels.cpp.
//   OMP_NUM_THREADS=2 omp_kernels --class S --reps 5 --json out.json
#include <fmt/format.h>
#include <omp.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "json_report.hpp"
#include "nas_ep.hpp"

namespace {

using namespace seriema::bench;

nas::ep_sums run_ep(const nas::ep_class& c) {
  nas::ep_sums total;
#pragma omp parallel
  {
    nas::ep_sums mine;
    const auto [first, last] = nas::ep_slice(nas::ep_batches(c), omp_get_thread_num(),
                                             omp_get_num_threads());
    for (std::uint64_t k = first; k < last; ++k) nas::ep_batch(k, mine);
#pragma omp critical
    total.add(mine);
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) try {
  std::string class_name = "S";
  int reps = 5;
  int threads = 0;
  std::string json;
  CLI::App app{"omp_kernels: NAS EP with OpenMP threads in one process"};
  app.add_option("--class", class_name, "NAS class: S, W or A");
  app.add_option("--reps", reps, "repetitions")->check(CLI::Range(1, 100));
  app.add_option("--threads", threads, "OpenMP threads (default: OMP_NUM_THREADS)");
  app.add_option("--json", json, "write results here");
  CLI11_PARSE(app, argc, argv);
  const nas::ep_class c = nas::ep_class_named(class_name);
  if (threads > 0) omp_set_num_threads(threads);
  const int used = omp_get_max_threads();
  std::vector<double> seconds;
  nas::ep_sums sums;
  bool verified = true;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    sums = run_ep(c);
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    verified = verified && nas::ep_verified(c, sums);
  }
  const double median = nas::median_seconds(seconds);
  fmt::print("omp EP class {} x {} threads: median {:.4f} s, {:.1f} Mop/s, sx {:.15e} sy {:.15e} "
             "pairs {:.0f}: {}\n",
             c.name, used, median, nas::ep_mops(c, median), sums.sx, sums.sy, sums.pairs(),
             verified ? "VERIFIED" : "NOT VERIFIED");
  if (!json.empty()) write_report(json, nas::ep_report("openmp", c, 1, used, seconds, verified));
  return verified ? 0 : 1;
} catch (const std::exception& e) {
  fmt::print(stderr, "omp_kernels: {}\n", e.what());
  return 1;
}

// omp_kernels: NAS EP and CG in one process with OpenMP (the ceiling of bench/run-dsm.sh's kernel
// comparison: threads sharing memory with no protocol at all); with --threads 1 the sequential
// kernels the speedups are measured against. Same work, timing and verification as
// bench/dsm_kernels.cpp.
//   OMP_NUM_THREADS=2 omp_kernels --kernel cg --class S --reps 5 --json out.json
#include <fmt/format.h>
#include <omp.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "json_report.hpp"
#include "nas_cg.hpp"
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

/// CG's vector operations for the threads of one parallel region: every thread sees every
/// vector; a sum goes through one slot per thread and a barrier.
class omp_cg_ops {
 public:
  omp_cg_ops(std::vector<double>* partials, int thread) : partials_(partials), thread_(thread) {}
  double* writable(double* v) { return v; }
  const double* mine(double* v) { return v; }
  const double* whole(double* v) { return v; }
  void sum(std::span<double> s, double* /*gathered*/) {
    // Two slot arrays by turn: a thread writes one only after every thread passed the barrier
    // that ends the reads of its previous turn.
    std::vector<double>& slots = partials_[turn_++ % 2];
    for (std::size_t i = 0; i < s.size(); ++i) slots[slot(thread_, i)] = s[i];
#pragma omp barrier
    nas::cg_sum_slots(slots, s);
  }
  void gather(double* /*v*/) {
#pragma omp barrier
  }

  static constexpr std::size_t slot_width = nas::cg_slot_width;
  static std::size_t slot(int thread, std::size_t i) {
    return static_cast<std::size_t>(thread) * slot_width + i;
  }

 private:
  std::vector<double>* partials_;
  int thread_;
  unsigned turn_ = 0;
};

/// One timed run of CG's steps from x = 1; zeta of the last step.
double run_cg(const nas::cg_class& c, const nas::cg_matrix& a) {
  const auto n = static_cast<std::size_t>(c.na);
  std::vector<double> x(n), z(n), p(n), q(n), r(n);
  const int threads = omp_get_max_threads();
  std::vector<double> partials[2] = {
      std::vector<double>(omp_cg_ops::slot_width * static_cast<std::size_t>(threads)),
      std::vector<double>(omp_cg_ops::slot_width * static_cast<std::size_t>(threads))};
  double zeta = 0.0;
#pragma omp parallel num_threads(threads)
  {
    // The team may be smaller than asked: the slices and the sums follow the team.
    if (omp_get_num_threads() != threads) {
#pragma omp single
      fmt::print(stderr, "omp_kernels: {} threads asked, {} given\n", threads,
                 omp_get_num_threads());
    }
    const auto [first, last] = nas::cg_slice(c.na, omp_get_thread_num(), omp_get_num_threads());
    const nas::cg_share share{c.na, first, last, a.rowstr.data(), a.colidx.data(), a.a.data()};
    omp_cg_ops ops(partials, omp_get_thread_num());
    nas::cg_start(ops, share, x.data());
#pragma omp barrier
    double mine = 0.0;
    for (int it = 0; it < c.niter; ++it) {
      mine = nas::cg_step(ops, c, share, x.data(), z.data(), p.data(), q.data(), r.data());
    }
    if (omp_get_thread_num() == 0) zeta = mine;
  }
  return zeta;
}

struct options {
  std::string kernel = "ep";
  std::string class_name = "S";
  int reps = 5;
  std::string json;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int main_ep(const options& opt, int threads) {
  const nas::ep_class c = nas::ep_class_named(opt.class_name);
  std::vector<double> seconds;
  nas::ep_sums sums;
  bool verified = true;
  for (int r = 0; r < opt.reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    sums = run_ep(c);
    seconds.push_back(seconds_since(start));
    verified = verified && nas::ep_verified(c, sums);
  }
  const double median = nas::median_seconds(seconds);
  fmt::print("omp EP class {} x {} threads: median {:.4f} s, {:.1f} Mop/s, sx {:.15e} sy {:.15e} "
             "pairs {:.0f}: {}\n",
             c.name, threads, median, nas::ep_mops(c, median), sums.sx, sums.sy, sums.pairs(),
             verified ? "VERIFIED" : "NOT VERIFIED");
  if (!opt.json.empty()) {
    write_report(opt.json, nas::ep_report("openmp", c, 1, threads, seconds, verified));
  }
  return verified ? 0 : 1;
}

int main_cg(const options& opt, int threads) {
  const nas::cg_class c = nas::cg_class_named(opt.class_name);
  const nas::cg_matrix a = nas::cg_make(c);
  std::vector<double> seconds;
  double zeta = 0.0;
  bool verified = true;
  for (int r = 0; r < opt.reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    zeta = run_cg(c, a);
    seconds.push_back(seconds_since(start));
    verified = verified && nas::cg_verified(c, zeta);
  }
  const double median = nas::median_seconds(seconds);
  fmt::print("omp CG class {} x {} threads: median {:.4f} s, {:.1f} Mop/s, zeta {:.13f}: {}\n",
             c.name, threads, median, nas::cg_mops(c, median), zeta,
             verified ? "VERIFIED" : "NOT VERIFIED");
  if (!opt.json.empty()) {
    write_report(opt.json, nas::cg_report("openmp", c, 1, threads, seconds, zeta, verified));
  }
  return verified ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) try {
  options opt;
  int threads = 0;
  CLI::App app{"omp_kernels: NAS EP and CG with OpenMP threads in one process"};
  app.add_option("--kernel", opt.kernel, "ep or cg")->check(CLI::IsMember({"ep", "cg"}));
  app.add_option("--class", opt.class_name, "NAS class: S, W or A");
  app.add_option("--reps", opt.reps, "repetitions")->check(CLI::Range(1, 100));
  app.add_option("--threads", threads, "OpenMP threads (default: OMP_NUM_THREADS)");
  app.add_option("--json", opt.json, "write results here");
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) omp_set_num_threads(threads);
  const int used = omp_get_max_threads();
  return opt.kernel == "ep" ? main_ep(opt, used) : main_cg(opt, used);
} catch (const std::exception& e) {
  fmt::print(stderr, "omp_kernels: {}\n", e.what());
  return 1;
}

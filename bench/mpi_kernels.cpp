// mpi_kernels: NAS EP and CG written directly on MPI. EP as NAS's own MPI version: each rank adds
// up its contiguous slice of the batches, then one MPI_Allreduce of the sums. CG by rows: each
// rank keeps every vector whole and computes its contiguous slice of rows; dot products are one
// MPI_Allreduce, and the vectors a matrix product reads (p, and z for the residual) are made
// whole by one MPI_Allgatherv. The baseline of bench/run-dsm.sh's kernel comparison; the same
// work, timing and verification as bench/dsm_kernels.cpp.
//   mpirun -np 2 mpi_kernels --kernel cg --class S --reps 5 --json out.json
#include <fmt/format.h>
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "json_report.hpp"
#include "mpi_cli.hpp"
#include "nas_cg.hpp"
#include "nas_ep.hpp"

namespace {

using namespace seriema::bench;

nas::ep_sums run_ep(const nas::ep_class& c, int rank, int ranks) {
  nas::ep_sums mine;
  const auto [first, last] = nas::ep_slice(nas::ep_batches(c), rank, ranks);
  for (std::uint64_t k = first; k < last; ++k) nas::ep_batch(k, mine);
  nas::ep_sums total;
  MPI_Allreduce(&mine, &total, sizeof(nas::ep_sums) / sizeof(double), MPI_DOUBLE, MPI_SUM,
                MPI_COMM_WORLD);
  return total;
}

/// CG's vector operations on MPI: every rank keeps every vector whole.
class mpi_cg_ops {
 public:
  mpi_cg_ops(int n, int ranks) : counts_(static_cast<std::size_t>(ranks)), starts_(counts_) {
    for (int q = 0; q < ranks; ++q) {
      const auto [first, last] = nas::cg_slice(n, q, ranks);
      starts_[static_cast<std::size_t>(q)] = first;
      counts_[static_cast<std::size_t>(q)] = last - first;
    }
  }
  double* writable(double* v) { return v; }
  const double* mine(double* v) { return v; }
  const double* whole(double* v) { return v; }
  void sum(std::span<double> s, double* gathered) {
    MPI_Allreduce(MPI_IN_PLACE, s.data(), static_cast<int>(s.size()), MPI_DOUBLE, MPI_SUM,
                  MPI_COMM_WORLD);
    if (gathered != nullptr) gather(gathered);
  }
  void gather(double* v) {
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, v, counts_.data(), starts_.data(),
                   MPI_DOUBLE, MPI_COMM_WORLD);
  }

 private:
  std::vector<int> counts_;
  std::vector<int> starts_;
};

/// One timed run of CG's steps from x = 1; zeta of the last step.
double run_cg(const nas::cg_class& c, const nas::cg_matrix& a, int rank, int ranks) {
  const auto n = static_cast<std::size_t>(c.na);
  std::vector<double> x(n), z(n), p(n), q(n), r(n);
  const auto [first, last] = nas::cg_slice(c.na, rank, ranks);
  const nas::cg_share share{c.na, first, last, a.rowstr.data(), a.colidx.data(), a.a.data()};
  mpi_cg_ops ops(c.na, ranks);
  nas::cg_start(ops, share, x.data());
  double zeta = 0.0;
  for (int it = 0; it < c.niter; ++it) {
    zeta = nas::cg_step(ops, c, share, x.data(), z.data(), p.data(), q.data(), r.data());
  }
  return zeta;
}

struct options {
  std::string kernel = "ep";
  std::string class_name = "S";
  int reps = 5;
  std::string json;
};

/// Runs `once` (returning the result) `reps` times between barriers; the times.
template <class F>
std::vector<double> timed(int reps, F&& once) {
  std::vector<double> seconds;
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    once();
    seconds.push_back(MPI_Wtime() - start);
  }
  return seconds;
}

bool main_ep(const options& opt, int rank, int ranks) {
  const nas::ep_class c = nas::ep_class_named(opt.class_name);
  nas::ep_sums sums;
  bool verified = true;
  const auto seconds = timed(opt.reps, [&] {
    sums = run_ep(c, rank, ranks);
    verified = verified && nas::ep_verified(c, sums);
  });
  if (rank != 0) return verified;
  const double median = nas::median_seconds(seconds);
  fmt::print("mpi EP class {} x {} ranks: median {:.4f} s, {:.1f} Mop/s, sx {:.15e} sy "
             "{:.15e}: {}\n",
             c.name, ranks, median, nas::ep_mops(c, median), sums.sx, sums.sy,
             verified ? "VERIFIED" : "NOT VERIFIED");
  if (!opt.json.empty()) {
    write_report(opt.json, nas::ep_report("mpi", c, ranks, 1, seconds, verified));
  }
  return verified;
}

bool main_cg(const options& opt, int rank, int ranks) {
  const nas::cg_class c = nas::cg_class_named(opt.class_name);
  const nas::cg_matrix a = nas::cg_make(c);
  double zeta = 0.0;
  bool verified = true;
  const auto seconds = timed(opt.reps, [&] {
    zeta = run_cg(c, a, rank, ranks);
    verified = verified && nas::cg_verified(c, zeta);
  });
  if (rank != 0) return verified;
  const double median = nas::median_seconds(seconds);
  fmt::print("mpi CG class {} x {} ranks: median {:.4f} s, {:.1f} Mop/s, zeta {:.13f}: {}\n",
             c.name, ranks, median, nas::cg_mops(c, median), zeta,
             verified ? "VERIFIED" : "NOT VERIFIED");
  if (!opt.json.empty()) {
    write_report(opt.json, nas::cg_report("mpi", c, ranks, 1, seconds, zeta, verified));
  }
  return verified;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  int ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  options opt;
  CLI::App app{"mpi_kernels: NAS EP and CG on MPI"};
  app.add_option("--kernel", opt.kernel, "ep or cg")->check(CLI::IsMember({"ep", "cg"}));
  app.add_option("--class", opt.class_name, "NAS class: S, W or A");
  app.add_option("--reps", opt.reps, "repetitions")->check(CLI::Range(1, 100));
  app.add_option("--json", opt.json, "write results here (rank 0)");
  if (const auto code = seriema::bench::parse_or_finalize(app, argc, argv)) return *code;
  const bool verified =
      opt.kernel == "ep" ? main_ep(opt, rank, ranks) : main_cg(opt, rank, ranks);
  MPI_Finalize();
  return verified ? 0 : 1;
}

// mpi_kernels: NAS EP written directly on MPI, as NAS's own MPI version does it: each rank adds
// up its contiguous slice of the batches, then one MPI_Allreduce of the sums. The baseline of
// bench/run-dsm.sh's kernel comparison; the same batches, timing and verification as
// bench/dsm_kernels.cpp.
//   mpirun -np 2 mpi_kernels --class S --reps 5 --json out.json
#include <fmt/format.h>
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "json_report.hpp"
#include "mpi_cli.hpp"
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

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  int ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  std::string class_name = "S";
  int reps = 5;
  std::string json;
  CLI::App app{"mpi_kernels: NAS EP on MPI"};
  app.add_option("--class", class_name, "NAS class: S, W or A");
  app.add_option("--reps", reps, "repetitions")->check(CLI::Range(1, 100));
  app.add_option("--json", json, "write results here (rank 0)");
  if (const auto code = seriema::bench::parse_or_finalize(app, argc, argv)) return *code;
  const nas::ep_class c = nas::ep_class_named(class_name);
  std::vector<double> seconds;
  nas::ep_sums sums;
  bool verified = true;
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    sums = run_ep(c, rank, ranks);
    seconds.push_back(MPI_Wtime() - start);
    verified = verified && nas::ep_verified(c, sums);
  }
  if (rank == 0) {
    const double median = nas::median_seconds(seconds);
    fmt::print("mpi EP class {} x {} ranks: median {:.4f} s, {:.1f} Mop/s, sx {:.15e} sy "
               "{:.15e}: {}\n",
               c.name, ranks, median, nas::ep_mops(c, median), sums.sx, sums.sy,
               verified ? "VERIFIED" : "NOT VERIFIED");
    if (!json.empty()) write_report(json, nas::ep_report("mpi", c, ranks, 1, seconds, verified));
  }
  MPI_Finalize();
  return verified ? 0 : 1;
}

// dsm_kernels: NAS EP on seriema's shared space, ported as an OpenMP program is: the batch loop
// is a space::parallel_for over every worker of the job, and the reduction writes each worker's
// sums into its slot of the space, a barrier, and worker 0 reads them all. The seriema side of
// bench/run-dsm.sh's kernel comparison (bench/mpi_kernels.cpp the MPI baseline,
// bench/omp_kernels.cpp the one-process ceiling); the same batches and NAS verification.
//   SERIEMA_THREADS=1 seriema-run -n 2 -- dsm_kernels --class S --reps 5 --json out.json
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <seriema/dsm/space.hpp>
#include <seriema/fabric/runtime.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <string>
#include <vector>

#include "json_report.hpp"
#include "nas_ep.hpp"

namespace {

using namespace seriema;
using namespace seriema::bench;
using fabric::thread_context;

struct options {
  std::string class_name = "S";
  int reps = 5;
  std::string transport;
  std::string json;
};

struct outcome {
  std::vector<double> seconds;
  nas::ep_sums sums;
  bool verified = true;
};

// One repetition on every worker: the result and time on worker 0.
void run_ep(thread_context& me, dsm::space& sp, const nas::ep_class& c, outcome& out) {
  auto* slots = reinterpret_cast<nas::ep_sums*>(sp.base());
  sp.barrier(me);
  const auto start = std::chrono::steady_clock::now();
  nas::ep_sums mine;
  sp.parallel_for(me, 0, nas::ep_batches(c), [&](std::uint64_t k) { nas::ep_batch(k, mine); });
  sp.write(me, slots + me.id(), 1)[0] = mine;
  sp.barrier(me);
  if (me.id() != 0) return;
  nas::ep_sums total;
  for (const nas::ep_sums& s : sp.read(me, slots, me.thread_count())) total.add(s);
  out.seconds.push_back(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  out.sums = total;
  out.verified = out.verified && nas::ep_verified(c, total);
}

void report(const fabric::runtime& rt, const options& opt, const nas::ep_class& c,
            const outcome& out, const dsm::space_counters& counters) {
  const double median = nas::median_seconds(out.seconds);
  const int threads = rt.options().threads_per_process;
  fmt::print("dsm EP class {} x {} processes x {} threads ({}): median {:.4f} s, {:.1f} Mop/s, "
             "sx {:.15e} sy {:.15e}: {}\n",
             c.name, rt.size(), threads, opt.transport, median, nas::ep_mops(c, median),
             out.sums.sx, out.sums.sy, out.verified ? "VERIFIED" : "NOT VERIFIED");
  if (opt.json.empty()) return;
  report_json j = nas::ep_report("seriema-dsm", c, rt.size(), threads, out.seconds, out.verified);
  j["transport"] = opt.transport;
  j["rank0_counters"] = {{"barriers", counters.barriers},
                         {"releases", counters.releases},
                         {"fetches", counters.fetches},
                         {"fast_reads", counters.fast_reads},
                         {"invalidations", counters.invalidations}};
  write_report(opt.json, j);
}

}  // namespace

int main(int argc, char** argv) try {
  options opt;
  CLI::App app{"dsm_kernels: NAS EP on a seriema shared space"};
  app.add_option("--class", opt.class_name, "NAS class: S, W or A");
  app.add_option("--reps", opt.reps, "repetitions")->check(CLI::Range(1, 100));
  app.add_option("--transport", opt.transport, "label for the output (shm, tcp)");
  app.add_option("--json", opt.json, "write results here (rank 0)");
  CLI11_PARSE(app, argc, argv);
  const nas::ep_class c = nas::ep_class_named(opt.class_name);
  fabric::runtime rt;
  dsm::space_options so;
  so.bytes = std::size_t{1} << 20;
  so.block_bytes = 4096;
  dsm::space sp(rt, so);
  outcome out;
  rt.run([&](thread_context& me) {
    for (int r = 0; r < opt.reps; ++r) run_ep(me, sp, c, out);
    sp.barrier(me);
  });
  const bool verified = rt.allreduce_sum(out.verified ? 0 : 1) == 0;
  if (rt.rank() == 0) report(rt, opt, c, out, sp.counters());
  rt.barrier();
  return verified ? 0 : 1;
} catch (const std::exception& e) {
  fmt::print(stderr, "dsm_kernels: {}\n", e.what());
  return 1;
}

// dsm_kernels: NAS EP and CG on seriema's shared space, ported as OpenMP programs are. EP: the
// batch loop is a space::parallel_for over every worker of the job, and the reduction writes each
// worker's sums into its slot of the space, a barrier, and worker 0 reads them all. CG: the
// matrix and the vectors live in the space (each worker writes its own rows of the matrix, as a
// first touch), every worker runs the kernel on its slice of rows, reads the vectors a matrix
// product needs whole (only the blocks others changed are fetched), and a dot product is a slot
// per worker and a barrier. The seriema side of bench/run-dsm.sh's kernel comparison
// (bench/mpi_kernels.cpp the MPI baseline, bench/omp_kernels.cpp the one-process ceiling); the
// same work and NAS verification.
//   SERIEMA_THREADS=1 seriema-run -n 2 -- dsm_kernels --kernel cg --class S --json out.json
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <seriema/dsm/space.hpp>
#include <seriema/fabric/runtime.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <string>
#include <vector>

#include "json_report.hpp"
#include "nas_cg.hpp"
#include "nas_ep.hpp"

namespace {

using namespace seriema;
using namespace seriema::bench;
using fabric::thread_context;

struct options {
  std::string kernel = "ep";
  std::string class_name = "S";
  std::size_t block_bytes = 4096;
  std::string protocol = "floating";
  int reps = 5;
  std::string transport = "unlabelled";
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

dsm::coherence_protocol protocol_named(const std::string& name) {
  return name == "fixed" ? dsm::coherence_protocol::fixed_home
                         : dsm::coherence_protocol::floating_home;
}

report_json counters_json(const dsm::space_counters& counters) {
  return {{"barriers", counters.barriers},         {"releases", counters.releases},
          {"migrations", counters.migrations},     {"local_merges", counters.local_merges},
          {"fetches", counters.fetches},           {"fast_reads", counters.fast_reads},
          {"home_reads", counters.home_reads},     {"invalidations", counters.invalidations},
          {"lock_retries", counters.lock_retries}, {"home_writes", counters.home_writes},
          {"directory_updates", counters.directory_updates}};
}

void report_ep(const fabric::runtime& rt, const options& opt, const nas::ep_class& c,
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
  j["rank0_counters"] = counters_json(counters);
  write_report(opt.json, j);
}

bool main_ep(fabric::runtime& rt, const options& opt) {
  const nas::ep_class c = nas::ep_class_named(opt.class_name);
  dsm::space_options so;
  so.bytes = std::size_t{1} << 20;
  so.block_bytes = opt.block_bytes;
  so.protocol = protocol_named(opt.protocol);
  dsm::space sp(rt, so);
  outcome out;
  rt.run([&](thread_context& me) {
    for (int r = 0; r < opt.reps; ++r) run_ep(me, sp, c, out);
    sp.barrier(me);
  });
  const bool verified = rt.allreduce_sum(out.verified ? 0 : 1) == 0;
  if (rt.rank() == 0) report_ep(rt, opt, c, out, sp.counters());
  return verified;
}

/// CG's vector operations on the space: a worker twins its slice before writing it, reads
/// through spans, and sums through one slot per worker and a barrier (which also publishes every
/// vector written before it).
class dsm_cg_ops {
 public:
  static constexpr std::size_t slot_width = nas::cg_slot_width;

  dsm_cg_ops(thread_context& me, dsm::space& sp, const nas::cg_share& m, double* const slots[2])
      : me_(me), sp_(sp), n_(static_cast<std::size_t>(m.n)),
        first_(static_cast<std::size_t>(m.first)),
        count_(static_cast<std::size_t>(m.last - m.first)),
        slots_{slots[0], slots[1]} {}
  double* writable(double* v) {
    (void)sp_.write(me_, v + first_, count_);
    return v;
  }
  const double* mine(double* v) {
    (void)sp_.read(me_, v + first_, count_);
    return v;
  }
  const double* whole(double* v) { return sp_.read(me_, v, n_).data(); }
  void sum(std::span<double> s, double* /*gathered: the barrier publishes it*/) {
    // Two slot arrays by turn: a worker writes one only after every worker passed the barrier
    // that ends the reads of its previous turn.
    double* slots = slots_[turn_++ % 2];
    const auto workers = me_.thread_count();
    const std::span<double> mine = sp_.write(me_, slots + slot_width * me_.id(), s.size());
    std::copy(s.begin(), s.end(), mine.begin());
    sp_.barrier(me_);
    nas::cg_sum_slots(sp_.read(me_, slots, slot_width * workers), s);
  }
  void gather(double* /*v*/) { sp_.barrier(me_); }

 private:
  thread_context& me_;
  dsm::space& sp_;
  std::size_t n_;
  std::size_t first_;
  std::size_t count_;
  double* slots_[2];
  unsigned turn_ = 0;
};

/// Where CG's arrays live in the space, each starting on a block.
struct cg_arrays {
  std::int32_t* rowstr;
  std::int32_t* colidx;
  double* a;
  double* vectors[5];  // x z p q r
  double* slots[2];
};

/// Bytes of `count` T rounded up to whole blocks.
template <class T>
std::size_t block_rounded(std::size_t count, std::size_t block) {
  return (count * sizeof(T) + block - 1) / block * block;
}

/// The space CG needs for matrix `a` and `workers` workers, and where each array goes in it.
std::size_t cg_space_bytes(const nas::cg_matrix& a, std::size_t workers, std::size_t block) {
  const auto n = static_cast<std::size_t>(a.n);
  return block_rounded<std::int32_t>(n + 1, block) +
         block_rounded<std::int32_t>(a.colidx.size(), block) +
         block_rounded<double>(a.a.size(), block) + 5 * block_rounded<double>(n, block) +
         2 * block_rounded<double>(dsm_cg_ops::slot_width * workers, block);
}
/// `count` T at `at`, which moves on by whole blocks.
template <class T>
T* take(std::byte*& at, std::size_t count, std::size_t block) {
  T* p = reinterpret_cast<T*>(at);
  at += block_rounded<T>(count, block);
  return p;
}

cg_arrays cg_place(std::byte* base, const nas::cg_matrix& a, std::size_t workers,
                   std::size_t block) {
  const auto n = static_cast<std::size_t>(a.n);
  std::byte* at = base;
  cg_arrays out{};
  out.rowstr = take<std::int32_t>(at, n + 1, block);
  out.colidx = take<std::int32_t>(at, a.colidx.size(), block);
  out.a = take<double>(at, a.a.size(), block);
  for (double*& v : out.vectors) v = take<double>(at, n, block);
  for (double*& s : out.slots) s = take<double>(at, dsm_cg_ops::slot_width * workers, block);
  return out;
}

/// Worker me writes its rows of the matrix into the space; the barrier publishes them.
void cg_store_rows(thread_context& me, dsm::space& sp, const nas::cg_matrix& a,
                   const cg_arrays& at) {
  const auto [first, last] =
      nas::cg_slice(a.n, static_cast<int>(me.id()), static_cast<int>(me.thread_count()));
  const auto rows = static_cast<std::size_t>(last - first);
  const auto from = static_cast<std::size_t>(a.rowstr[first]);
  const auto entries = static_cast<std::size_t>(a.rowstr[last]) - from;
  std::copy_n(a.rowstr.begin() + first, rows + 1,
              sp.write(me, at.rowstr + first, rows + 1).begin());
  std::copy_n(a.colidx.begin() + from, entries, sp.write(me, at.colidx + from, entries).begin());
  std::copy_n(a.a.begin() + from, entries, sp.write(me, at.a + from, entries).begin());
  sp.barrier(me);
}

/// One timed run of CG's steps from x = 1 on every worker; zeta and the time on worker 0.
void run_cg(thread_context& me, dsm::space& sp, const nas::cg_class& c, const cg_arrays& at,
            outcome& out, double& zeta) {
  const auto [first, last] =
      nas::cg_slice(c.na, static_cast<int>(me.id()), static_cast<int>(me.thread_count()));
  // The matrix spans are kept across the run's barriers: a read span outlives an acquire when its
  // bytes did not change (space.hpp), and nobody writes the matrix after cg_store_rows.
  const std::int32_t* rowstr =
      sp.read(me, at.rowstr + first, static_cast<std::size_t>(last - first) + 1).data() - first;
  const auto from = static_cast<std::size_t>(rowstr[first]);
  const auto entries = static_cast<std::size_t>(rowstr[last]) - from;
  const nas::cg_share share{c.na, first, last, rowstr,
                            sp.read(me, at.colidx + from, entries).data() - from,
                            sp.read(me, at.a + from, entries).data() - from};
  dsm_cg_ops ops(me, sp, share, at.slots);
  double* const* v = at.vectors;
  nas::cg_start(ops, share, v[0]);
  sp.barrier(me);
  const auto start = std::chrono::steady_clock::now();
  double mine = 0.0;
  for (int it = 0; it < c.niter; ++it) {
    mine = nas::cg_step(ops, c, share, v[0], v[1], v[2], v[3], v[4]);
  }
  sp.barrier(me);
  if (me.id() != 0) return;
  out.seconds.push_back(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  zeta = mine;
  out.verified = out.verified && nas::cg_verified(c, mine);
}

bool main_cg(fabric::runtime& rt, const options& opt) {
  const nas::cg_class c = nas::cg_class_named(opt.class_name);
  const nas::cg_matrix a = nas::cg_make(c);  // every process: the sizes (worker rows: the data)
  const auto workers = static_cast<std::size_t>(rt.placement().thread_count());
  dsm::space_options so;
  so.block_bytes = opt.block_bytes;
  so.protocol = protocol_named(opt.protocol);
  so.bytes = cg_space_bytes(a, workers, opt.block_bytes);
  dsm::space sp(rt, so);
  const cg_arrays at = cg_place(sp.base(), a, workers, opt.block_bytes);
  outcome out;
  double zeta = 0.0;
  rt.run([&](thread_context& me) {
    cg_store_rows(me, sp, a, at);
    for (int r = 0; r < opt.reps; ++r) run_cg(me, sp, c, at, out, zeta);
    sp.barrier(me);
  });
  const bool verified = rt.allreduce_sum(out.verified ? 0 : 1) == 0;
  if (rt.rank() != 0) return verified;
  const double median = nas::median_seconds(out.seconds);
  const int threads = rt.options().threads_per_process;
  fmt::print("dsm CG class {} x {} processes x {} threads ({}, {} home, blocks of {}): median "
             "{:.4f} s, {:.1f} Mop/s, zeta {:.13f}: {}\n",
             c.name, rt.size(), threads, opt.transport, opt.protocol, opt.block_bytes, median,
             nas::cg_mops(c, median), zeta, out.verified ? "VERIFIED" : "NOT VERIFIED");
  if (!opt.json.empty()) {
    report_json j =
        nas::cg_report("seriema-dsm", c, rt.size(), threads, out.seconds, zeta, out.verified);
    j["transport"] = opt.transport;
    j["block_bytes"] = opt.block_bytes;
    j["protocol"] = opt.protocol;
    j["rank0_counters"] = counters_json(sp.counters());
    write_report(opt.json, j);
  }
  return verified;
}

}  // namespace

int main(int argc, char** argv) try {
  options opt;
  CLI::App app{"dsm_kernels: NAS EP and CG on a seriema shared space"};
  app.add_option("--kernel", opt.kernel, "ep or cg")->check(CLI::IsMember({"ep", "cg"}));
  app.add_option("--class", opt.class_name, "NAS class: S, W or A");
  app.add_option("--reps", opt.reps, "repetitions")->check(CLI::Range(1, 100));
  app.add_option("--block-bytes", opt.block_bytes, "the space's block size")
      ->check(CLI::Range(4096, 1 << 20));
  app.add_option("--protocol", opt.protocol, "the space's coherence protocol: floating or fixed")
      ->check(CLI::IsMember({"floating", "fixed"}));
  app.add_option("--transport", opt.transport, "label for the output (shm, tcp)");
  app.add_option("--json", opt.json, "write results here (rank 0)");
  CLI11_PARSE(app, argc, argv);
  fabric::runtime rt;
  const bool verified = opt.kernel == "ep" ? main_ep(rt, opt) : main_cg(rt, opt);
  rt.barrier();
  return verified ? 0 : 1;
} catch (const std::exception& e) {
  fmt::print(stderr, "dsm_kernels: {}\n", e.what());
  return 1;
}

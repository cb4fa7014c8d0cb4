// dsm_leases: what logical leases buy when hand-overs cannot carry every write notice. The
// workers of the job take turns (worker s % W does section s, handed on by store_release and
// load_acquire of one atomic): each section writes `writes` state blocks and reads a read-only
// table of `table` blocks whole. With `handover_notices` below the blocks a section writes, every
// hand-over overflows:
//  * leases (space_options::lease, 10 as the seed's, or --lease): the record keeps its newest
//    notices and a floor; the table's copies stay valid while their leases reach the floor and
//    are renewed at their managers (no get) every few sections;
//  * everything (lease 0, the baseline: the space before leases): the record says "everything",
//    and every acquire drops every copy, so every section fetches the whole table again.
// Sections per second (median over repetitions) of each, the ratio, and the counters that say
// why. Every section checks the table's checksum and the state blocks' values, so a stale copy
// fails the run.
//   SERIEMA_THREADS=1 seriema-run -n 2 -- dsm_leases --json out.json
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <seriema/dsm/space.hpp>
#include <seriema/fabric/runtime.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <string>
#include <vector>

#include "json_report.hpp"

namespace {

using namespace seriema;
using namespace seriema::bench;
using fabric::thread_context;

struct options {
  std::size_t table = 64;         // blocks read each section
  std::size_t writes = 4;         // state blocks written each section
  std::size_t notices = 2;        // space_options::handover_notices
  std::size_t block_bytes = 4096;
  std::uint32_t lease = 10;       // space_options::lease of the leases method
  int sections = 400;
  int reps = 5;
  std::string transport = "unlabelled";
  std::string json;
};

constexpr const char* method_names[] = {"leases", "everything"};

struct run_result {
  double seconds = 0.0;
  bool correct = true;
  dsm::space_counters counters;  // the whole job's, summed
};

std::uint64_t table_value(std::size_t i) { return i * 2654435761u + 7; }

/// The space's words: the table, then the state blocks (one word each, at each block's start).
struct layout {
  std::uint64_t* table;
  std::size_t table_words;
  std::uint64_t* state;
  std::size_t words_per_block;
};

/// One section by its worker: every state block to `section + 1`, the table read and checked.
bool run_section(thread_context& me, dsm::space& sp, const layout& at, std::size_t writes,
                 std::uint64_t section) {
  bool ok = true;
  for (std::size_t k = 0; k < writes; ++k) {
    std::uint64_t& word = sp.write(me, at.state + k * at.words_per_block, 1)[0];
    ok = ok && word == section;  // the previous section's value
    word = section + 1;
  }
  std::uint64_t sum = 0;
  std::uint64_t expected = 0;
  const std::span<const std::uint64_t> table = sp.read(me, at.table, at.table_words);
  for (std::size_t i = 0; i < at.table_words; ++i) {
    sum += table[i];
    expected += table_value(i);
  }
  return ok && sum == expected;
}

/// One repetition of one method: a fresh space, the table written by worker 0, then the
/// sections in turns; the time from the first section to the last, on worker 0.
run_result run_method(fabric::runtime& rt, const options& opt, std::uint32_t lease) {
  dsm::space_options so;
  so.block_bytes = opt.block_bytes;
  so.bytes = (opt.table + opt.writes + 1) * opt.block_bytes;
  so.handover_notices = opt.notices;
  so.lease = lease;
  dsm::space sp(rt, so);
  const std::size_t words_per_block = opt.block_bytes / 8;
  const layout at{reinterpret_cast<std::uint64_t*>(sp.base()), opt.table * words_per_block,
                  reinterpret_cast<std::uint64_t*>(sp.base()) + opt.table * words_per_block,
                  words_per_block};
  run_result out;
  std::atomic<bool> correct{true};  // any worker of the process may find a wrong value
  rt.run([&](thread_context& me) {
    if (me.id() == 0) {
      const std::span<std::uint64_t> table = sp.write(me, at.table, at.table_words);
      for (std::size_t i = 0; i < at.table_words; ++i) table[i] = table_value(i);
    }
    sp.barrier(me);
    const auto start = std::chrono::steady_clock::now();
    const auto workers = static_cast<std::uint64_t>(me.thread_count());
    const auto sections = static_cast<std::uint64_t>(opt.sections);
    for (auto s = static_cast<std::uint64_t>(me.id()); s < sections; s += workers) {
      while (sp.load_acquire(me, 0) != s) (void)me.poll();
      if (!run_section(me, sp, at, opt.writes, s)) correct = false;
      sp.store_release(me, 0, s + 1);
    }
    while (sp.load_acquire(me, 0) != sections) (void)me.poll();
    if (me.id() == 0) {
      out.seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    sp.barrier(me);
  });
  out.correct = rt.allreduce_sum(std::uint64_t{correct.load() ? 0u : 1u}) == 0;
  const dsm::space_counters c = sp.counters();
  const auto sum = [&](std::uint64_t value) { return rt.allreduce_sum(value); };
  out.counters.fetches = sum(c.fetches);
  out.counters.lease_renewals = sum(c.lease_renewals);
  out.counters.leases_held = sum(c.leases_held);
  out.counters.lease_expiries = sum(c.lease_expiries);
  out.counters.handover_overflows = sum(c.handover_overflows);
  out.counters.invalidations = sum(c.invalidations);
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

report_json counters_json(const dsm::space_counters& c) {
  return {{"fetches", c.fetches},
          {"lease_renewals", c.lease_renewals},
          {"leases_held", c.leases_held},
          {"lease_expiries", c.lease_expiries},
          {"handover_overflows", c.handover_overflows},
          {"invalidations", c.invalidations}};
}

}  // namespace

int main(int argc, char** argv) try {
  options opt;
  CLI::App app{"dsm_leases: hand-overs that overflow, with logical leases and without"};
  app.add_option("--table", opt.table, "read-only blocks read by every section")
      ->check(CLI::Range(1, 4096));
  app.add_option("--writes", opt.writes, "blocks written by every section")
      ->check(CLI::Range(1, 1024));
  app.add_option("--notices", opt.notices, "space_options::handover_notices")
      ->check(CLI::Range(1, 1024));
  app.add_option("--block-bytes", opt.block_bytes, "the space's block size")
      ->check(CLI::Range(4096, 1 << 20));
  app.add_option("--lease", opt.lease, "space_options::lease of the leases method (ticks)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--sections", opt.sections, "sections per repetition")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--reps", opt.reps, "repetitions (methods alternate)")->check(CLI::Range(1, 100));
  app.add_option("--transport", opt.transport, "label for the output (shm, tcp)");
  app.add_option("--json", opt.json, "write results here (rank 0)");
  CLI11_PARSE(app, argc, argv);
  fabric::runtime rt;
  std::vector<double> seconds[2];
  run_result last[2];
  bool correct = true;
  for (int r = 0; r < opt.reps; ++r) {
    for (int m = 0; m < 2; ++m) {  // alternating: the machine's drift touches both alike
      last[m] = run_method(rt, opt, m == 0 ? opt.lease : 0);
      correct = correct && last[m].correct;
      seconds[m].push_back(last[m].seconds);
    }
  }
  if (rt.rank() == 0) {
    const double rate[2] = {opt.sections / median(seconds[0]), opt.sections / median(seconds[1])};
    for (int m = 0; m < 2; ++m) {
      const dsm::space_counters& c = last[m].counters;
      fmt::print("{:>10}: {:9.0f} sections/s (median of {}); fetches {}, renewals {}, held {}, "
                 "expiries {}, overflows {} (job, last repetition)\n",
                 method_names[m], rate[m], opt.reps, c.fetches, c.lease_renewals, c.leases_held,
                 c.lease_expiries, c.handover_overflows);
    }
    fmt::print("leases / everything: {:.2f}x ({} x {} threads, {}, table of {} blocks of {} B, "
               "{} written, {} notices per hand-over, lease {}){}\n",
               rate[0] / rate[1], rt.size(), rt.options().threads_per_process, opt.transport,
               opt.table, opt.block_bytes, opt.writes, opt.notices, opt.lease,
               correct ? "" : ": WRONG VALUES READ");
    if (!opt.json.empty()) {
      report_json j = {{"benchmark", "dsm_leases"},
                       {"processes", rt.size()},
                       {"threads", rt.options().threads_per_process},
                       {"transport", opt.transport},
                       {"table_blocks", opt.table},
                       {"written_blocks", opt.writes},
                       {"handover_notices", opt.notices},
                       {"block_bytes", opt.block_bytes},
                       {"lease", opt.lease},
                       {"sections", opt.sections},
                       {"correct", correct}};
      for (int m = 0; m < 2; ++m) {
        j["methods"][method_names[m]] = {{"sections_per_second", rounded(rate[m], 1)},
                                         {"seconds", rounded_array(seconds[m], 6)},
                                         {"counters", counters_json(last[m].counters)}};
      }
      j["leases_over_everything"] = rounded(rate[0] / rate[1], 3);
      write_report(opt.json, j);
    }
  }
  rt.barrier();
  return correct ? 0 : 1;
} catch (const std::exception& e) {
  fmt::print(stderr, "dsm_leases: {}\n", e.what());
  return 1;
}

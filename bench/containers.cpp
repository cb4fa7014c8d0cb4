// containers: updates per second of three irregular kernels written on seriema's distributed
// containers, against the same kernels written directly on MPI (bench/mpi_containers.cpp, run by
// bench/run-containers.sh in the same run). histogram: every worker adds 1 to `updates` random
// buckets of an array (cyclic); random_access: HPCC RandomAccess, every worker's share of the
// 4 x 2^n updates T[r mod 2^n] ^= r sent to the word's owner; components: the connected
// components of an R-MAT graph (16 x 2^scale edges, each worker uniting the ends of its share)
// in a disjoint_set, compressed and counted (an update is an edge). Each repetition is timed
// from the first update to the barrier after the last (every update applied), and checked (the
// histogram sums to the updates made; the table's xor to the updates' xor; the components'
// count to a sequential union-find's); word_count: every worker counts its share of a Zipf corpus
// (--words per worker over a --vocabulary of words, generated before the clock starts) into a
// counting_set (an update is a word; checked by words, distinct words and a signature against a
// sequential count).
//   SERIEMA_THREADS=1 seriema-run -n 2 -- containers --kernel histogram --json out.json
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <seriema/containers/containers.hpp>
#include <seriema/fabric/runtime.hpp>
#include <string>
#include <vector>

#include "bench_support.hpp"
#include "containers_kernels.hpp"
#include "json_report.hpp"

using namespace seriema;
using fabric::thread_context;

namespace {

struct options {
  std::string kernel = "histogram";
  std::uint64_t updates = 1 << 20;  // per worker (histogram)
  std::uint64_t buckets = 1 << 16;
  int log2_table = 20;              // random_access: 2^n words, 4 x 2^n updates in all
  int scale = 16;                   // components: R-MAT graph of 2^n vertices, 16 x 2^n edges
  std::uint64_t words = 1 << 20;    // word_count: words per worker
  std::uint64_t vocabulary = 1 << 17;
  std::size_t cache_slots = 1 << 16;  // word_count: half the vocabulary, as a user would size it
  int reps = 3;
  std::string transport;
  std::string json;
};

// kernel:histogram begin
// `expected` (computed once, at the first repetition) is what this worker's part must sum to.
void histogram(thread_context& me, const options& opt, std::uint64_t& expected, bool& ok) {
  containers::array<std::uint64_t> counts(me, opt.buckets, containers::distribution::cyclic);
  for (std::uint64_t k = 0; k < opt.updates; ++k) {
    (void)counts.add(bench::histogram_key(me.id(), k, opt.buckets), 1);
  }
  counts.barrier();
  // kernel:histogram end
  std::uint64_t sum = 0;
  for (std::uint64_t c : counts.local()) sum += c;
  if (expected == 0) {
    expected = bench::histogram_local_expectation(me.id(), me.thread_count(), opt.updates,
                                                   opt.buckets);
  }
  ok = sum == expected;
  counts.barrier();
}

// kernel:random_access begin
void random_access(thread_context& me, const options& opt, bool& ok) {
  const std::uint64_t size = std::uint64_t{1} << opt.log2_table;
  containers::array<std::uint64_t> table(me, size);
  const auto [first, count] = bench::share_of(4 * size, me.id(), me.thread_count());
  std::uint64_t r = bench::hpcc_stream_at(first);
  for (std::uint64_t k = 0; k < count; ++k) {
    r = bench::hpcc_next(r);
    (void)table.visit(r & (size - 1), [](std::uint64_t, std::uint64_t& word,
                                         std::uint64_t& value) { word ^= value; }, r);
  }
  table.barrier();
  // kernel:random_access end
  std::uint64_t xor_of_table = 0;
  for (std::uint64_t w : table.local()) xor_of_table ^= w;
  containers::array<std::uint64_t> xors(me, me.thread_count(), containers::distribution::cyclic);
  xors.local()[0] = xor_of_table;
  xors.barrier();
  if (me.id() == 0) {
    std::uint64_t job = 0;
    for (std::uint64_t x : xors.gather()) job ^= x;
    ok = job == bench::hpcc_xor_of_updates(4 * size);
  }
  xors.barrier();
}

// kernel:components begin
void components(thread_context& me, const options& opt, std::uint64_t& found) {
  containers::disjoint_set<std::uint64_t> sets(me);
  const auto [first, count] = bench::share_of(16ULL << opt.scale, me.id(), me.thread_count());
  for (std::uint64_t e = first; e < first + count; ++e) {
    const auto [u, v] = bench::rmat_edge(opt.scale, e);
    (void)sets.unite(u, v);
  }
  sets.compress();
  if (me.id() == 0) found = sets.set_count();
  // kernel:components end
  sets.barrier();  // thread 0 asked every part
}

// Job-wide sums of every part's digest of a counting_set, at thread 0 (the others get zeros).
bench::word_count_digest job_digest(thread_context& me,
                                    const containers::counting_set<std::string>& words) {
  bench::word_count_digest mine;
  for (const auto& [word, n] : words.local()) mine.add(word, n);
  const std::uint64_t threads = me.thread_count();
  containers::array<std::uint64_t> parts(me, 3 * threads, containers::distribution::cyclic);
  parts.local()[0] = mine.words;
  parts.local()[1] = mine.distinct;
  parts.local()[2] = mine.signature;
  parts.barrier();
  bench::word_count_digest job;
  if (me.id() == 0) {
    const std::vector<std::uint64_t> all = parts.gather();
    for (std::uint64_t t = 0; t < threads; ++t) {
      job.words += all[t];
      job.distinct += all[threads + t];
      job.signature += all[2 * threads + t];
    }
  }
  parts.barrier();  // thread 0 asked every part
  return job;
}

// kernel:word_count begin
// `counted` is when the barrier returned: the check that follows is not timed.
void word_count(thread_context& me, const options& opt, const std::vector<std::string>& text,
                bench::word_count_digest& found, std::chrono::steady_clock::time_point& counted) {
  containers::counting_set<std::string> words(me, opt.cache_slots);
  for (const std::string& word : text) (void)words.insert(word);
  words.barrier();
  // kernel:word_count end
  counted = std::chrono::steady_clock::now();
  found = job_digest(me, words);
}

}  // namespace

int main(int argc, char** argv) try {
  options opt;
  CLI::App app{"containers: updates/s of irregular kernels on seriema's containers"};
  app.add_option("--kernel", opt.kernel, "histogram, random_access, components or word_count")
      ->check(CLI::IsMember({"histogram", "random_access", "components", "word_count"}));
  app.add_option("--updates", opt.updates, "histogram: updates per worker");
  app.add_option("--buckets", opt.buckets, "histogram: buckets")->check(CLI::PositiveNumber);
  app.add_option("--log2-table", opt.log2_table, "random_access: log2 of the table's words")
      ->check(CLI::Range(8, 30));
  app.add_option("--scale", opt.scale, "components: log2 of the R-MAT graph's vertices")
      ->check(CLI::Range(2, 26));
  app.add_option("--words", opt.words, "word_count: words per worker");
  app.add_option("--vocabulary", opt.vocabulary, "word_count: distinct words of the corpus")
      ->check(CLI::PositiveNumber);
  app.add_option("--cache-slots", opt.cache_slots, "word_count: the counting_set's cache");
  app.add_option("--reps", opt.reps, "timed repetitions (median reported)")
      ->check(CLI::Range(1, 100));
  app.add_option("--transport", opt.transport, "label for the output (shm, tcp)");
  app.add_option("--json", opt.json, "write results here (rank 0)");
  CLI11_PARSE(app, argc, argv);

  fabric::runtime rt;
  std::vector<double> seconds;
  bool all_ok = true;
  std::uint64_t total_updates = 0;
  const std::uint64_t expected_components =
      opt.kernel == "components" ? bench::rmat_components(opt.scale, 16ULL << opt.scale) : 0;
  const bench::zipf_corpus corpus(opt.kernel == "word_count" ? opt.vocabulary : 1);
  const std::uint64_t workers = rt.size() * rt.options().threads_per_process;
  const bench::word_count_digest expected_words =
      opt.kernel == "word_count" && rt.rank() == 0
          ? bench::word_count_sequential(corpus, workers, opt.words)
          : bench::word_count_digest{};
  std::vector<std::vector<std::string>> texts(workers);  // word_count: each worker writes its own
  std::vector<std::uint64_t> expected_sums(workers);     // histogram: each worker writes its own
  for (int rep = 0; rep < opt.reps; ++rep) {
    double elapsed = 0;
    rt.run([&](thread_context& me) {
      bool ok = true;
      std::vector<std::string>& text = texts[me.id()];
      if (opt.kernel == "word_count" && text.empty()) text = corpus.share(me.id(), opt.words);
      me.quiesce();  // every worker starts together
      const auto start = std::chrono::steady_clock::now();
      std::uint64_t found = 0;
      auto stop = std::chrono::steady_clock::time_point{};  // set by a kernel whose check follows
      if (opt.kernel == "histogram") {
        histogram(me, opt, expected_sums[me.id()], ok);
      } else if (opt.kernel == "random_access") {
        random_access(me, opt, ok);
      } else if (opt.kernel == "components") {
        components(me, opt, found);
        ok = me.id() != 0 || found == expected_components;
      } else {
        bench::word_count_digest counted;
        word_count(me, opt, text, counted, stop);
        ok = me.id() != 0 || counted == expected_words;
      }
      if (me.id() == 0) {
        if (stop == std::chrono::steady_clock::time_point{}) stop = std::chrono::steady_clock::now();
        elapsed = std::chrono::duration<double>(stop - start).count();
        total_updates = opt.kernel == "histogram"       ? opt.updates * me.thread_count()
                        : opt.kernel == "random_access" ? 4 * (std::uint64_t{1} << opt.log2_table)
                        : opt.kernel == "components"    ? 16ULL << opt.scale
                                                        : opt.words * me.thread_count();
      }
      if (!ok) {
        fmt::print(stderr, "containers: thread {}: the {} result is wrong\n", me.id(), opt.kernel);
        all_ok = false;
      }
    });
    if (rt.rank() == 0) seconds.push_back(elapsed);
  }
  if (rt.rank() == 0) {
    const double median_s = bench::median(seconds);
    const double rate = static_cast<double>(total_updates) / median_s;
    fmt::print("containers [{}] {}: {} processes x {} threads, {} updates, median {:.4f} s = "
               "{:.2f} M updates/s ({})\n",
               opt.transport, opt.kernel, rt.size(), rt.options().threads_per_process,
               total_updates, median_s, rate / 1e6, all_ok ? "checked" : "WRONG RESULT");
    if (!opt.json.empty()) {
      bench::report_json report;
      report["benchmark"] = "containers";
      report["kernel"] = opt.kernel;
      report["transport"] = opt.transport;
      report["processes"] = rt.size();
      report["threads_per_process"] = rt.options().threads_per_process;
      report["updates"] = total_updates;
      report["seconds"] = bench::rounded_array(seconds, 6);
      report["median_updates_per_s"] = bench::rounded(rate, 0);
      report["checked"] = all_ok;
      bench::write_report(opt.json, report);
    }
  }
  return all_ok ? 0 : 1;
} catch (const std::exception& e) {
  fmt::print(stderr, "containers: {}\n", e.what());
  return 1;
}

// mpi_containers: the kernels of bench/containers.cpp written directly on MPI as a user writes
// them without a library: each rank batches its updates per destination and exchanges them with
// MPI_Alltoall (counts) and MPI_Alltoallv (updates) every `batch` updates, then applies what it
// received to its part (cyclic buckets for the histogram, blocks of the table for RandomAccess).
// Word count reduces locally first (a hash map of the rank's words), then sends each distinct
// word with its count to its owner (fnv1a(word) mod ranks) in one exchange.
// The baseline of bench/run-containers.sh; the same inputs, timing and checks as containers.cpp.
//   mpirun -np 2 mpi_containers --kernel histogram --json out.json
#include <fmt/format.h>
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <unordered_map>
#include <vector>

#include "containers_kernels.hpp"
#include "json_report.hpp"
#include "mpi_cli.hpp"

namespace {

struct options {
  std::string kernel = "histogram";
  std::uint64_t updates = 1 << 20;
  std::uint64_t buckets = 1 << 16;
  int log2_table = 20;
  int scale = 16;
  std::uint64_t words = 1 << 20;
  std::uint64_t vocabulary = 1 << 17;
  int reps = 3;
  std::uint64_t batch = 1 << 16;  // updates a rank makes between two exchanges
  std::string transport;
  std::string json;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Exchanges the per-destination batches (`out[d]`) and returns what this rank received.
std::vector<std::uint64_t> exchange(std::vector<std::vector<std::uint64_t>>& out, int ranks) {
  std::vector<int> send_counts(ranks), recv_counts(ranks), send_at(ranks), recv_at(ranks);
  std::vector<std::uint64_t> flat;
  for (int d = 0; d < ranks; ++d) {
    send_at[d] = static_cast<int>(flat.size());
    send_counts[d] = static_cast<int>(out[d].size());
    flat.insert(flat.end(), out[d].begin(), out[d].end());
    out[d].clear();
  }
  MPI_Alltoall(send_counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int total = 0;
  for (int d = 0; d < ranks; ++d) {
    recv_at[d] = total;
    total += recv_counts[d];
  }
  std::vector<std::uint64_t> in(static_cast<std::size_t>(total));
  MPI_Alltoallv(flat.data(), send_counts.data(), send_at.data(), MPI_UINT64_T, in.data(),
                recv_counts.data(), recv_at.data(), MPI_UINT64_T, MPI_COMM_WORLD);
  return in;
}

// kernel:histogram begin
std::vector<std::uint64_t> histogram(const options& opt, int rank, int ranks) {
  std::vector<std::uint64_t> counts(opt.buckets / ranks + 1);
  std::vector<std::vector<std::uint64_t>> out(ranks);
  for (std::uint64_t done = 0; done < opt.updates; done += opt.batch) {
    const std::uint64_t end = std::min(opt.updates, done + opt.batch);
    for (std::uint64_t k = done; k < end; ++k) {
      const std::uint64_t bucket = seriema::bench::histogram_key(rank, k, opt.buckets);
      out[bucket % ranks].push_back(bucket);
    }
    for (std::uint64_t bucket : exchange(out, ranks)) ++counts[bucket / ranks];
  }
  return counts;
}
// kernel:histogram end

// kernel:random_access begin
std::vector<std::uint64_t> random_access(const options& opt, int rank, int ranks) {
  const std::uint64_t size = std::uint64_t{1} << opt.log2_table;
  const auto [first_word, words] = seriema::bench::share_of(size, rank, ranks);
  const std::uint64_t block = size / ranks;  // every rank but the last holds `block` words
  std::vector<std::uint64_t> table(words);
  const auto [first, count] = seriema::bench::share_of(4 * size, rank, ranks);
  std::uint64_t r = seriema::bench::hpcc_stream_at(first);
  std::vector<std::vector<std::uint64_t>> out(ranks);
  // Every rank takes part in as many exchanges as the rank with the most updates.
  const std::uint64_t rounds = (4 * size - (4 * size / ranks) * (ranks - 1) + opt.batch - 1) /
                               opt.batch;
  for (std::uint64_t round = 0, done = 0; round < rounds; ++round) {
    const std::uint64_t end = std::min(count, done + opt.batch);
    for (; done < end; ++done) {
      r = seriema::bench::hpcc_next(r);
      const std::uint64_t word = r & (size - 1);
      out[std::min<std::uint64_t>(word / block, ranks - 1)].push_back(r);
    }
    for (std::uint64_t value : exchange(out, ranks)) table[(value & (size - 1)) - first_word] ^= value;
  }
  return table;
}
// kernel:random_access end

// kernel:components begin
std::uint64_t components(const options& opt, int rank, int ranks) {
  const std::uint64_t p = static_cast<std::uint64_t>(ranks);
  const std::uint64_t mine = ((std::uint64_t{1} << opt.scale) + p - 1 - rank) / p;  // v % p == rank
  // Each edge goes to the owners of both ends, as (local end, other end) pairs.
  std::vector<std::vector<std::uint64_t>> out(ranks);
  const auto [first, count] = seriema::bench::share_of(16ULL << opt.scale, rank, ranks);
  for (std::uint64_t e = first; e < first + count; ++e) {
    const auto [u, v] = seriema::bench::rmat_edge(opt.scale, e);
    if (u == v) continue;
    out[u % p].insert(out[u % p].end(), {u, v});
    out[v % p].insert(out[v % p].end(), {v, u});
  }
  const std::vector<std::uint64_t> pairs = exchange(out, ranks);
  std::vector<std::uint64_t> start(mine + 1), neighbors(pairs.size() / 2);  // CSR
  for (std::size_t i = 0; i < pairs.size(); i += 2) ++start[pairs[i] / p + 1];
  std::partial_sum(start.begin(), start.end(), start.begin());
  std::vector<std::uint64_t> fill(start.begin(), start.end() - 1);
  for (std::size_t i = 0; i < pairs.size(); i += 2) neighbors[fill[pairs[i] / p]++] = pairs[i + 1];
  // Min-label propagation: a vertex whose label dropped sends it to its neighbors' owners.
  std::vector<std::uint64_t> label(mine);
  std::vector<char> changed(mine, 1);
  for (std::uint64_t i = 0; i < mine; ++i) label[i] = i * p + rank;
  for (;;) {
    for (std::uint64_t i = 0; i < mine; ++i) {
      if (!changed[i]) continue;
      changed[i] = 0;
      for (std::uint64_t k = start[i]; k < start[i + 1]; ++k) {
        out[neighbors[k] % p].insert(out[neighbors[k] % p].end(), {neighbors[k], label[i]});
      }
    }
    const std::vector<std::uint64_t> in = exchange(out, ranks);
    std::uint64_t dropped = 0, anywhere = 0;
    for (std::size_t i = 0; i < in.size(); i += 2) {
      std::uint64_t& l = label[in[i] / p];
      if (in[i + 1] < l) {
        l = in[i + 1];
        dropped += changed[in[i] / p] == 0 ? 1 : 0;
        changed[in[i] / p] = 1;
      }
    }
    MPI_Allreduce(&dropped, &anywhere, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (anywhere == 0) break;
  }
  std::uint64_t roots = 0, all_roots = 0;
  for (std::uint64_t i = 0; i < mine; ++i) {
    roots += start[i + 1] > start[i] && label[i] == i * p + rank ? 1 : 0;
  }
  MPI_Allreduce(&roots, &all_roots, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  return all_roots;
}
// kernel:components end

// kernel:word_count begin
std::unordered_map<std::string, std::uint64_t> word_count(const std::vector<std::string>& text,
                                                          int ranks) {
  std::unordered_map<std::string, std::uint64_t> local, part;
  for (const std::string& word : text) ++local[word];
  std::vector<std::vector<std::uint64_t>> out(ranks);  // per word: length, count, letters
  for (const auto& [word, n] : local) {
    std::vector<std::uint64_t>& to = out[seriema::bench::fnv1a(word) % ranks];
    to.insert(to.end(), {word.size(), n});
    const std::size_t at = to.size();
    to.resize(at + (word.size() + 7) / 8);
    std::memcpy(to.data() + at, word.data(), word.size());
  }
  const std::vector<std::uint64_t> in = exchange(out, ranks);
  for (std::size_t i = 0; i < in.size(); i += 2 + (in[i] + 7) / 8) {
    part[std::string(reinterpret_cast<const char*>(&in[i + 2]), in[i])] += in[i + 1];
  }
  return part;
}
// kernel:word_count end

// Whether the job's parts together hold the `expected` digest (a sequential count of every
// rank's words), at rank 0; the others return true.
bool word_count_checked(const seriema::bench::word_count_digest& expected,
                        const std::unordered_map<std::string, std::uint64_t>& part, int rank) {
  static_assert(sizeof(seriema::bench::word_count_digest) == 3 * sizeof(std::uint64_t));
  seriema::bench::word_count_digest mine, job;
  for (const auto& [word, n] : part) mine.add(word, n);
  MPI_Reduce(&mine.words, &job.words, 3, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  return rank != 0 || job == expected;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  options opt;
  CLI::App app{"mpi_containers: the containers benchmark's kernels on MPI (Alltoallv batches)"};
  app.add_option("--kernel", opt.kernel)
      ->check(CLI::IsMember({"histogram", "random_access", "components", "word_count"}));
  app.add_option("--updates", opt.updates, "histogram: updates per rank");
  app.add_option("--words", opt.words, "word_count: words per rank");
  app.add_option("--vocabulary", opt.vocabulary, "word_count: distinct words of the corpus")
      ->check(CLI::PositiveNumber);
  app.add_option("--buckets", opt.buckets, "histogram: buckets")->check(CLI::PositiveNumber);
  app.add_option("--log2-table", opt.log2_table)->check(CLI::Range(8, 30));
  app.add_option("--scale", opt.scale, "components: log2 of the R-MAT graph's vertices")
      ->check(CLI::Range(2, 26));
  app.add_option("--batch", opt.batch, "updates per rank between exchanges")
      ->check(CLI::PositiveNumber);
  app.add_option("--reps", opt.reps)->check(CLI::Range(1, 100));
  app.add_option("--transport", opt.transport);
  app.add_option("--json", opt.json);
  if (const auto code = seriema::bench::parse_or_finalize(app, argc, argv)) return *code;
  std::vector<double> seconds;
  bool ok = true;
  std::uint64_t total_updates = 0, expected_components = 0;
  const seriema::bench::zipf_corpus corpus(opt.kernel == "word_count" ? opt.vocabulary : 1);
  const std::vector<std::string> text =
      opt.kernel == "word_count" ? corpus.share(rank, opt.words) : std::vector<std::string>{};
  const seriema::bench::word_count_digest expected_words =
      opt.kernel == "word_count" && rank == 0
          ? seriema::bench::word_count_sequential(corpus, static_cast<std::uint64_t>(ranks),
                                                  opt.words)
          : seriema::bench::word_count_digest{};
  for (int rep = 0; rep < opt.reps; ++rep) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    std::vector<std::uint64_t> part;
    std::unordered_map<std::string, std::uint64_t> word_part;
    std::uint64_t found = 0;
    if (opt.kernel == "histogram") {
      part = histogram(opt, rank, ranks);
    } else if (opt.kernel == "random_access") {
      part = random_access(opt, rank, ranks);
    } else if (opt.kernel == "components") {
      found = components(opt, rank, ranks);
    } else {
      word_part = word_count(text, ranks);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    seconds.push_back(MPI_Wtime() - start);
    std::uint64_t local = 0, job = 0;
    if (opt.kernel == "word_count") {
      total_updates = opt.words * static_cast<std::uint64_t>(ranks);
      ok = word_count_checked(expected_words, word_part, rank) && ok;
    } else if (opt.kernel == "components") {
      total_updates = 16ULL << opt.scale;
      if (rank == 0 && expected_components == 0) {
        expected_components = seriema::bench::rmat_components(opt.scale, total_updates);
      }
      ok = ok && (rank != 0 || found == expected_components);
    } else if (opt.kernel == "histogram") {
      for (std::uint64_t c : part) local += c;
      ok = ok && local == seriema::bench::histogram_local_expectation(rank, ranks, opt.updates,
                                                                       opt.buckets);
      total_updates = opt.updates * ranks;
    } else {
      for (std::uint64_t w : part) local ^= w;
      MPI_Reduce(&local, &job, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
      total_updates = 4 * (std::uint64_t{1} << opt.log2_table);
      if (rank == 0) ok = ok && job == seriema::bench::hpcc_xor_of_updates(total_updates);
    }
  }
  int all_ok = ok ? 1 : 0, job_ok = 0;
  MPI_Reduce(&all_ok, &job_ok, 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    const double median_s = median(seconds);
    const double rate = static_cast<double>(total_updates) / median_s;
    fmt::print("mpi_containers [{}] {}: {} ranks, {} updates, median {:.4f} s = {:.2f} M "
               "updates/s ({})\n",
               opt.transport, opt.kernel, ranks, total_updates, median_s, rate / 1e6,
               job_ok == 1 ? "checked" : "WRONG RESULT");
    if (!opt.json.empty()) {
      seriema::bench::report_json report;
      report["benchmark"] = "mpi_containers";
      report["kernel"] = opt.kernel;
      report["transport"] = opt.transport;
      report["processes"] = ranks;
      report["updates"] = total_updates;
      report["batch"] = opt.batch;
      report["seconds"] = seriema::bench::rounded_array(seconds, 6);
      report["median_updates_per_s"] = seriema::bench::rounded(rate, 0);
      report["checked"] = job_ok == 1;
      seriema::bench::write_report(opt.json, report);
    }
  }
  MPI_Finalize();
  return job_ok == 1 || rank != 0 ? 0 : 1;
}

// What bench/containers.cpp (seriema) and bench/mpi_containers.cpp (MPI) share, so that both
// run the same kernels on the same inputs: the histogram's random keys and the check of its
// result, HPCC RandomAccess's random stream, the R-MAT edges of connected components and their
// sequential count, word count's Zipf corpus and the digest that checks it, and how updates are
// shared among workers. No seriema or MPI dependency.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace seriema::bench {

// splitmix64: key k of worker w is a pure function of (w, k).
inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The bucket of worker w's k-th histogram update.
inline std::uint64_t histogram_key(std::uint64_t w, std::uint64_t k, std::uint64_t buckets) {
  return mix64((w << 40) ^ k) % buckets;
}

// How many of all workers' updates land in buckets that worker `owner` holds (cyclic: bucket b
// belongs to worker b % workers): what its part of the histogram must sum to.
inline std::uint64_t histogram_local_expectation(std::uint64_t owner, std::uint64_t workers,
                                                 std::uint64_t updates, std::uint64_t buckets) {
  std::uint64_t n = 0;
  for (std::uint64_t w = 0; w < workers; ++w) {
    for (std::uint64_t k = 0; k < updates; ++k) {
      if (histogram_key(w, k, buckets) % workers == owner) ++n;
    }
  }
  return n;
}

// Worker w's share of `total` updates: its first index and how many (the last takes the rest).
inline std::pair<std::uint64_t, std::uint64_t> share_of(std::uint64_t total, std::uint64_t w,
                                                        std::uint64_t workers) {
  const std::uint64_t share = total / workers;
  const std::uint64_t first = share * w;
  return {first, w + 1 == workers ? total - first : share};
}

// HPCC RandomAccess's stream: a shift register over GF(2) with the primitive polynomial
// x^63 + x^2 + x + 1, period 1317624576693539401.
inline std::uint64_t hpcc_next(std::uint64_t r) {
  return (r << 1) ^ (static_cast<std::int64_t>(r) < 0 ? 0x7 : 0);
}

// The stream's n-th value (HPCC_starts): x^n modulo the polynomial, by repeated squaring.
inline std::uint64_t hpcc_stream_at(std::uint64_t n) {
  constexpr std::uint64_t period = 1317624576693539401ULL;
  n %= period;
  if (n == 0) return 1;
  std::uint64_t powers[64];  // x^(2i) modulo the polynomial
  std::uint64_t t = 1;
  for (auto& p : powers) {
    p = t;
    t = hpcc_next(hpcc_next(t));
  }
  int bit = 62;
  while (bit >= 0 && ((n >> bit) & 1) == 0) --bit;
  std::uint64_t r = 2;
  while (bit > 0) {
    std::uint64_t squared = 0;
    for (int j = 0; j < 64; ++j) {
      if (((r >> j) & 1) != 0) squared ^= powers[j];
    }
    r = squared;
    --bit;
    if (((n >> bit) & 1) != 0) r = hpcc_next(r);
  }
  return r;
}

// The xor of the first `total` update values: what a table that started at zero xors to after
// RandomAccess (each update xors its value into one word).
inline std::uint64_t hpcc_xor_of_updates(std::uint64_t total) {
  std::uint64_t r = 1, x = 0;
  for (std::uint64_t k = 0; k < total; ++k) {
    r = hpcc_next(r);
    x ^= r;
  }
  return x;
}

// Edge e of an R-MAT graph of 2^scale vertices with the Graph500 generator's parameters (A =
// 0.57, B = C = 0.19): at each level the edge falls in one quadrant of the adjacency matrix.
inline std::pair<std::uint64_t, std::uint64_t> rmat_edge(int scale, std::uint64_t e) {
  std::uint64_t u = 0, v = 0, state = mix64(e);
  for (int level = 0; level < scale; ++level) {
    state = mix64(state);
    const double p = static_cast<double>(state >> 11) * 0x1.0p-53;
    u = (u << 1) | (p >= 0.76 ? 1 : 0);                                 // C or D
    v = (v << 1) | ((p >= 0.57 && p < 0.76) || p >= 0.95 ? 1 : 0);      // B or D
  }
  return {u, v};
}

// Connected components among the vertices that a non-loop edge of the first `edges` R-MAT edges
// touches, by a sequential union-find: what both versions of the kernel must count.
inline std::uint64_t rmat_components(int scale, std::uint64_t edges) {
  std::vector<std::uint64_t> parent(std::uint64_t{1} << scale);
  std::iota(parent.begin(), parent.end(), 0);
  std::vector<bool> touched(parent.size());
  auto root = [&](std::uint64_t v) {
    while (parent[v] != v) v = parent[v] = parent[parent[v]];
    return v;
  };
  std::uint64_t vertices = 0, merges = 0;
  for (std::uint64_t e = 0; e < edges; ++e) {
    const auto [u, v] = rmat_edge(scale, e);
    if (u == v) continue;
    for (std::uint64_t end : {u, v}) {
      if (!touched[end]) ++vertices;
      touched[end] = true;
    }
    const std::uint64_t ru = root(u), rv = root(v);
    if (ru != rv) {
      parent[ru] = rv;
      ++merges;
    }
  }
  return vertices - merges;
}

// FNV-1a: a word's hash, the same in every process and program (the MPI version's owner, the
// digest's term).
inline std::uint64_t fnv1a(std::string_view word) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : word) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return h;
}

// Word count's corpus: worker w's k-th word is drawn from a vocabulary of `vocabulary` words
// with Zipf's law (exponent 1: the word of rank i is drawn with weight 1 / i), a pure function
// of (w, k). A word of the vocabulary is 2 to 10 lowercase letters, a function of its rank.
class zipf_corpus {
 public:
  explicit zipf_corpus(std::uint64_t vocabulary) : cumulative_(vocabulary), spelled_(vocabulary) {
    double sum = 0;
    for (std::uint64_t i = 0; i < vocabulary; ++i) {
      cumulative_[i] = sum += 1.0 / double(i + 1);
      spelled_[i] = spelling(i);
    }
    for (double& c : cumulative_) c /= sum;
  }
  [[nodiscard]] const std::string& word(std::uint64_t w, std::uint64_t k) const {
    const double p = static_cast<double>(mix64((w << 40) ^ k ^ 0x5a17) >> 11) * 0x1.0p-53;
    const auto at = std::upper_bound(cumulative_.begin(), cumulative_.end(), p);
    return spelled_[std::min<std::size_t>(at - cumulative_.begin(), spelled_.size() - 1)];
  }
  // Worker w's words, in order.
  [[nodiscard]] std::vector<std::string> share(std::uint64_t w, std::uint64_t words) const {
    std::vector<std::string> out;
    out.reserve(words);
    for (std::uint64_t k = 0; k < words; ++k) out.push_back(word(w, k));
    return out;
  }

 private:
  static std::string spelling(std::uint64_t rank) {
    std::uint64_t bits = mix64(rank ^ 0xc0ffee);
    std::string s(2 + bits % 9, 'a');
    bits /= 9;
    for (std::size_t i = 0; i < s.size(); ++i) {
      s[i] = static_cast<char>('a' + bits % 26);
      bits = bits / 26 != 0 ? bits / 26 : mix64(bits + i);
    }
    return s;
  }
  std::vector<double> cumulative_;
  std::vector<std::string> spelled_;  // the vocabulary: spelled_[i] is the word of rank i + 1
};

// What a word count's result is checked by, summed over the parts that hold it: the words
// counted, the distinct words, and the sum of mix64(fnv1a(word)) x count (wrapping).
struct word_count_digest {
  std::uint64_t words = 0, distinct = 0, signature = 0;
  void add(std::string_view word, std::uint64_t count) {
    words += count;
    distinct += 1;
    signature += mix64(fnv1a(word)) * count;
  }
  bool operator==(const word_count_digest&) const = default;
};

// The digest of every worker's share counted sequentially: what both versions must produce.
inline word_count_digest word_count_sequential(const zipf_corpus& corpus, std::uint64_t workers,
                                               std::uint64_t words_per_worker) {
  std::unordered_map<std::string, std::uint64_t> counts;
  for (std::uint64_t w = 0; w < workers; ++w) {
    for (std::uint64_t k = 0; k < words_per_worker; ++k) ++counts[corpus.word(w, k)];
  }
  word_count_digest digest;
  for (const auto& [word, n] : counts) digest.add(word, n);
  return digest;
}

}  // namespace seriema::bench

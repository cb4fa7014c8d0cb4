// What bench/containers.cpp (seriema) and bench/mpi_containers.cpp (MPI) share, so that both
// run the same kernels on the same inputs: the histogram's random keys and the check of its
// result, HPCC RandomAccess's random stream, and how updates are shared among workers. No
// seriema or MPI dependency.
#pragma once

#include <cstdint>
#include <utility>

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

}  // namespace seriema::bench

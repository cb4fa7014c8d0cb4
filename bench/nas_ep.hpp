// NAS EP (the embarrassingly parallel kernel of the NAS Parallel Benchmarks 3.x, ep.f): pairs of
// uniform deviates from NAS's 46-bit linear congruential generator turned into Gaussian pairs by
// the Marsaglia polar method, their sums and the counts of pairs in square annuli. Batch k of
// the 2^(M-16) batches starts its stream at seed x0 = s * a^(2^17 k) mod 2^46, so any split of
// the batches over workers gives the same sums; NAS's verification values check them. Shared by
// bench/dsm_kernels.cpp (seriema's shared space), bench/mpi_kernels.cpp and bench/omp_kernels.cpp.
// No seriema dependency.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "json_report.hpp"

namespace seriema::bench::nas {

/// A problem class of EP: M (2^(M+1) deviates) and NAS's verification sums.
struct ep_class {
  char name;
  int m;
  double sx;
  double sy;
};

inline constexpr ep_class ep_classes[] = {
    {'S', 24, -3.247834652034740e3, -6.958407078382297e3},
    {'W', 25, -2.863319731645753e3, -6.320053679109499e3},
    {'A', 28, -4.295875165629892e3, -1.580732573678431e4},
};

/// The class named `name` (S, W or A); throws std::invalid_argument for another.
inline ep_class ep_class_named(const std::string& name) {
  for (const ep_class& c : ep_classes) {
    if (name.size() == 1 && name[0] == c.name) return c;
  }
  throw std::invalid_argument("NAS EP class " + name + ": S, W or A");
}

inline constexpr int ep_mk = 16;                          ///< log2 of the pairs of a batch
inline constexpr std::uint64_t ep_pairs = 1ull << ep_mk;  ///< pairs of a batch
inline constexpr int ep_nq = 10;                          ///< annuli counted

/// The batches of class `c`.
inline std::uint64_t ep_batches(const ep_class& c) { return 1ull << (c.m - ep_mk); }

/// What a worker adds up: the sums of the Gaussian deviates and the pairs per annulus.
struct ep_sums {
  double sx = 0;
  double sy = 0;
  double q[ep_nq] = {};

  void add(const ep_sums& o) {
    sx += o.sx;
    sy += o.sy;
    for (int i = 0; i < ep_nq; ++i) q[i] += o.q[i];
  }
  [[nodiscard]] double pairs() const {
    double n = 0;
    for (double v : q) n += v;
    return n;
  }
};

/// NAS's generator: x <- a x mod 2^46 (randlc), exact in integers.
inline constexpr std::uint64_t lcg_mask = (1ull << 46) - 1;
inline constexpr std::uint64_t lcg_a = 1220703125ull;  // 5^13
inline constexpr std::uint64_t lcg_seed = 271828183ull;

/// a x mod 2^46 for a, x < 2^46, in halves of 23 bits (no product passes 2^46, as randlc).
inline std::uint64_t lcg_mul(std::uint64_t a, std::uint64_t x) {
  constexpr std::uint64_t low = (1ull << 23) - 1;
  const std::uint64_t cross = ((a >> 23) * (x & low) + (a & low) * (x >> 23)) & low;
  return ((cross << 23) + (a & low) * (x & low)) & lcg_mask;
}

inline std::uint64_t lcg_pow(std::uint64_t a, std::uint64_t e) {
  std::uint64_t r = 1;
  for (; e != 0; e >>= 1, a = lcg_mul(a, a)) {
    if (e & 1) r = lcg_mul(r, a);
  }
  return r;
}

/// Adds batch k's pairs to `sums` (ep.f's loop body for kk = k).
inline void ep_batch(std::uint64_t k, ep_sums& sums) {
  constexpr double r46 = 1.0 / static_cast<double>(1ull << 46);
  std::uint64_t x = lcg_mul(lcg_seed, lcg_pow(lcg_pow(lcg_a, 2 * ep_pairs), k));
  for (std::uint64_t i = 0; i < ep_pairs; ++i) {
    x = lcg_mul(lcg_a, x);
    const double x1 = 2.0 * static_cast<double>(x) * r46 - 1.0;
    x = lcg_mul(lcg_a, x);
    const double x2 = 2.0 * static_cast<double>(x) * r46 - 1.0;
    const double t1 = x1 * x1 + x2 * x2;
    if (t1 <= 1.0) {
      const double t2 = std::sqrt(-2.0 * std::log(t1) / t1);
      const double t3 = x1 * t2;
      const double t4 = x2 * t2;
      const auto l = static_cast<int>(std::fmax(std::fabs(t3), std::fabs(t4)));
      sums.q[l] += 1.0;
      sums.sx += t3;
      sums.sy += t4;
    }
  }
}

/// Whether `sums` match class `c`'s verification values (relative error at most 1e-8, NAS's).
inline bool ep_verified(const ep_class& c, const ep_sums& sums) {
  return std::fabs((sums.sx - c.sx) / c.sx) <= 1e-8 && std::fabs((sums.sy - c.sy) / c.sy) <= 1e-8;
}

/// [first, last) of `batches` for worker w of `workers` (contiguous slices, as parallel_for).
inline std::pair<std::uint64_t, std::uint64_t> ep_slice(std::uint64_t batches, std::uint64_t w,
                                                        std::uint64_t workers) {
  return {batches * w / workers, batches * (w + 1) / workers};
}

/// Millions of deviates per second for class `c` in `seconds`.
inline double ep_mops(const ep_class& c, double seconds) {
  return std::ldexp(1.0, c.m + 1) / seconds / 1e6;
}

/// The median of `seconds` (not empty).
inline double median_seconds(std::vector<double> seconds) {
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

/// The JSON every kernel program writes: who ran it, how, its times and whether it verified.
inline report_json kernel_report(const std::string& system, const char* kernel, char class_name,
                                 int processes, int threads, const std::vector<double>& seconds,
                                 double mops, bool verified) {
  report_json out;
  out["system"] = system;
  out["kernel"] = kernel;
  out["class"] = std::string(1, class_name);
  out["processes"] = processes;
  out["threads"] = threads;
  out["seconds"] = rounded_array(seconds, 5);
  out["median_seconds"] = rounded(median_seconds(seconds), 5);
  out["mops"] = rounded(mops, 2);
  out["verified"] = verified;
  return out;
}

/// The JSON every EP program writes.
inline report_json ep_report(const std::string& system, const ep_class& c, int processes,
                             int threads, const std::vector<double>& seconds, bool verified) {
  return kernel_report(system, "EP", c.name, processes, threads, seconds,
                       ep_mops(c, median_seconds(seconds)), verified);
}

}  // namespace seriema::bench::nas

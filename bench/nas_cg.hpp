// NAS CG (the conjugate-gradient kernel of the NAS Parallel Benchmarks 3.x, cg.f): the inverse
// power method on a random sparse symmetric matrix made by NAS's makea (outer products of sparse
// random vectors from NAS's 46-bit generator, summed, shifted), each step solving A z = x by 25
// conjugate-gradient iterations; NAS's verification value checks zeta after niter steps. This
// header makes the matrix (the same one for every program) and holds what the three ports share:
// a row's product, the step's arithmetic and the report. Used by bench/dsm_kernels.cpp (seriema's
// shared space), bench/mpi_kernels.cpp and bench/omp_kernels.cpp. No seriema dependency.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "json_report.hpp"
#include "nas_ep.hpp"

namespace seriema::bench::nas {

/// A problem class of CG: the order, nonzeros per generated vector, steps, shift, and NAS's
/// verification value of zeta.
struct cg_class {
  char name;
  int na;
  int nonzer;
  int niter;
  double shift;
  double zeta;
};

inline constexpr cg_class cg_classes[] = {
    {'S', 1400, 7, 15, 10.0, 8.5971775078648},
    {'W', 7000, 8, 15, 12.0, 10.362595087124},
    {'A', 14000, 11, 15, 20.0, 17.130235054029},
};

/// The class named `name` (S, W or A); throws std::invalid_argument for another.
inline cg_class cg_class_named(const std::string& name) {
  for (const cg_class& c : cg_classes) {
    if (name.size() == 1 && name[0] == c.name) return c;
  }
  throw std::invalid_argument("NAS CG class " + name + ": S, W or A");
}

inline constexpr int cg_iterations = 25;  ///< conjugate-gradient iterations per step (cgitmax)
inline constexpr double cg_rcond = 0.1;   ///< the bound on the smallest eigenvalue

/// The matrix in compressed rows: row j's entries are a[rowstr[j] .. rowstr[j+1]), their columns
/// in colidx, ascending.
struct cg_matrix {
  int n = 0;
  std::vector<std::int32_t> rowstr;
  std::vector<std::int32_t> colidx;
  std::vector<double> a;
};

/// Row j of the matrix (rowstr, colidx, a as in cg_matrix) times v.
inline double cg_row(const std::int32_t* rowstr, const std::int32_t* colidx, const double* a,
                     int j, const double* v) {
  double sum = 0.0;
  for (std::int32_t k = rowstr[j]; k < rowstr[j + 1]; ++k) sum += a[k] * v[colidx[k]];
  return sum;
}

/// NAS's generator as cg.f calls it (randlc): the next value in (0, 1).
class cg_random {
 public:
  double next() {
    state_ = lcg_mul(lcg_a, state_);
    return static_cast<double>(state_) / static_cast<double>(1ull << 46);
  }

 private:
  std::uint64_t state_ = 314159265ull;  // tran
};

/// @cond INTERNAL
namespace cg_detail {

/// One generated sparse vector: values and 1-based positions.
struct sparse_vector {
  std::vector<double> values;
  std::vector<int> positions;
};

/// sprnvc: `nz` distinct random positions in 1..n (drawn in [1, nn1], the others rejected), each
/// with a random value.
inline sparse_vector random_vector(cg_random& rng, int n, int nz, int nn1) {
  sparse_vector v;
  while (static_cast<int>(v.values.size()) < nz) {
    const double value = rng.next();
    const int i = static_cast<int>(nn1 * rng.next()) + 1;
    if (i > n) continue;
    bool drawn = false;
    for (int p : v.positions) drawn = drawn || p == i;
    if (drawn) continue;
    v.values.push_back(value);
    v.positions.push_back(i);
  }
  return v;
}

/// vecset: position i set to `value` (appended when absent).
inline void set_element(sparse_vector& v, int i, double value) {
  bool set = false;
  for (std::size_t k = 0; k < v.positions.size(); ++k) {
    if (v.positions[k] == i) {
      v.values[k] = value;
      set = true;
    }
  }
  if (!set) {
    v.values.push_back(value);
    v.positions.push_back(i);
  }
}

/// Row j's slots [rowstr[j], rowstr[j+1]) hold its columns ascending, -1 after the last: the slot
/// of column `col` (inserted in order when new; `duplicates[j]` counts a column seen again).
inline std::int32_t slot_of(cg_matrix& m, std::vector<int>& duplicates, int j, int col) {
  for (std::int32_t k = m.rowstr[j]; k < m.rowstr[j + 1]; ++k) {
    if (m.colidx[k] > col) {  // shift the row's larger columns up by one
      for (std::int32_t kk = m.rowstr[j + 1] - 2; kk >= k; --kk) {
        if (m.colidx[kk] > -1) {
          m.a[kk + 1] = m.a[kk];
          m.colidx[kk + 1] = m.colidx[kk];
        }
      }
      m.colidx[k] = col;
      m.a[k] = 0.0;
      return k;
    }
    if (m.colidx[k] == -1) {
      m.colidx[k] = col;
      return k;
    }
    if (m.colidx[k] == col) {
      ++duplicates[j];
      return k;
    }
  }
  throw std::logic_error("NAS CG makea: a row ran out of slots");
}

/// Drops the unused slots of every row (sparse's last loops).
inline void compact(cg_matrix& m, std::vector<int>& duplicates) {
  const int n = m.n;
  for (int j = 1; j < n; ++j) duplicates[j] += duplicates[j - 1];
  for (int j = 0; j < n; ++j) {
    const std::int32_t to_first = j > 0 ? m.rowstr[j] - duplicates[j - 1] : 0;
    const std::int32_t to_last = m.rowstr[j + 1] - duplicates[j];
    std::int32_t from = m.rowstr[j];
    for (std::int32_t k = to_first; k < to_last; ++k, ++from) {
      m.a[k] = m.a[from];
      m.colidx[k] = m.colidx[from];
    }
  }
  for (int j = 1; j < n + 1; ++j) m.rowstr[j] -= duplicates[j - 1];
  m.a.resize(static_cast<std::size_t>(m.rowstr[n]));
  m.colidx.resize(static_cast<std::size_t>(m.rowstr[n]));
}

/// sparse: the sum over rows i of size_i x v_i v_i^T (size falling geometrically to rcond), with
/// rcond - shift added to the diagonal, in compressed rows.
inline cg_matrix assemble(const cg_class& c, const std::vector<sparse_vector>& vectors) {
  const int n = c.na;
  cg_matrix m;
  m.n = n;
  m.rowstr.assign(static_cast<std::size_t>(n) + 1, 0);
  for (const sparse_vector& v : vectors) {
    for (int col : v.positions) m.rowstr[static_cast<std::size_t>(col)] += v.positions.size();
  }
  for (int j = 1; j < n + 1; ++j) m.rowstr[j] += m.rowstr[j - 1];
  m.a.assign(static_cast<std::size_t>(m.rowstr[n]), 0.0);
  m.colidx.assign(static_cast<std::size_t>(m.rowstr[n]), -1);
  std::vector<int> duplicates(static_cast<std::size_t>(n), 0);
  double size = 1.0;
  const double ratio = std::pow(cg_rcond, 1.0 / static_cast<double>(n));
  for (int i = 0; i < n; ++i) {
    const sparse_vector& v = vectors[static_cast<std::size_t>(i)];
    for (std::size_t e = 0; e < v.positions.size(); ++e) {
      const int j = v.positions[e] - 1;
      const double scale = size * v.values[e];
      for (std::size_t f = 0; f < v.positions.size(); ++f) {
        const int col = v.positions[f] - 1;
        double value = v.values[f] * scale;
        if (col == j && j == i) value += cg_rcond - c.shift;
        m.a[slot_of(m, duplicates, j, col)] += value;
      }
    }
    size *= ratio;
  }
  compact(m, duplicates);
  return m;
}

}  // namespace cg_detail
/// @endcond

/// NAS's matrix of class `c` (makea), the same in every program.
inline cg_matrix cg_make(const cg_class& c) {
  cg_random rng;
  (void)rng.next();  // cg.f draws zeta once before makea
  int nn1 = 1;
  while (nn1 < c.na) nn1 *= 2;
  std::vector<cg_detail::sparse_vector> vectors;
  vectors.reserve(static_cast<std::size_t>(c.na));
  for (int i = 0; i < c.na; ++i) {
    vectors.push_back(cg_detail::random_vector(rng, c.na, c.nonzer, nn1));
    cg_detail::set_element(vectors.back(), i + 1, 0.5);
  }
  return cg_detail::assemble(c, vectors);
}

/// Whether zeta matches class `c`'s verification value (absolute error at most 1e-10, NAS's).
inline bool cg_verified(const cg_class& c, double zeta) {
  return std::fabs(zeta - c.zeta) <= 1e-10;
}

/// NAS's operation count of class `c`'s timed steps, in millions per second for `seconds`.
inline double cg_mops(const cg_class& c, double seconds) {
  const double nz = c.nonzer * (c.nonzer + 1.0);
  return 2.0 * c.niter * c.na * (3.0 + nz + 25.0 * (5.0 + nz) + 3.0) / seconds / 1e6;
}

/// One worker's share of the kernel in SPMD form: the rows [first, last) of the matrix (rowstr,
/// colidx, a: the worker's rows readable, in global numbering) and vectors x z p q r of n
/// elements. Each port supplies how vectors are reached and combined (`Ops`):
///   double* writable(double* v)     v with elements [first, last) writable by this worker
///   const double* mine(double* v)   v with elements [first, last) readable
///   const double* whole(double* v)  v readable whole (after a gather of it)
///   void sum(std::span<double> s, double* gathered)  s summed over every worker, in place; then,
///                                   when gathered is not null, all of it readable everywhere
///   void gather(double* v)          every worker's elements of v readable everywhere
struct cg_share {
  int n;
  int first;
  int last;
  const std::int32_t* rowstr;
  const std::int32_t* colidx;
  const double* a;
};

/// One conjugate-gradient solve of A z = x (cg.f's conj_grad); returns |x - A z|.
template <class Ops>
double cg_conj_grad(Ops& ops, const cg_share& m, double* x, double* z, double* p, double* q,
                    double* r) {
  double rho = 0.0;
  {
    double* zw = ops.writable(z);
    double* rw = ops.writable(r);
    double* pw = ops.writable(p);
    double* qw = ops.writable(q);
    const double* xr = ops.mine(x);
    for (int j = m.first; j < m.last; ++j) {
      qw[j] = zw[j] = 0.0;
      rw[j] = pw[j] = xr[j];
      rho += rw[j] * rw[j];
    }
  }
  ops.sum(std::span<double>(&rho, 1), p);
  for (int it = 0; it < cg_iterations; ++it) {
    double d = 0.0;
    {
      const double* pr = ops.whole(p);
      double* qw = ops.writable(q);
      for (int j = m.first; j < m.last; ++j) {
        qw[j] = cg_row(m.rowstr, m.colidx, m.a, j, pr);
        d += pr[j] * qw[j];
      }
    }
    ops.sum(std::span<double>(&d, 1), nullptr);
    const double alpha = rho / d;
    const double rho0 = rho;
    rho = 0.0;
    {
      double* zw = ops.writable(z);
      double* rw = ops.writable(r);
      const double* pr = ops.mine(p);
      const double* qr = ops.mine(q);
      for (int j = m.first; j < m.last; ++j) {
        zw[j] += alpha * pr[j];
        rw[j] -= alpha * qr[j];
        rho += rw[j] * rw[j];
      }
    }
    ops.sum(std::span<double>(&rho, 1), nullptr);
    const double beta = rho / rho0;
    {
      double* pw = ops.writable(p);
      const double* rr = ops.mine(r);
      for (int j = m.first; j < m.last; ++j) pw[j] = rr[j] + beta * pw[j];
    }
    ops.gather(p);
  }
  ops.gather(z);
  double residual = 0.0;
  {
    const double* zr = ops.whole(z);
    const double* xr = ops.mine(x);
    for (int j = m.first; j < m.last; ++j) {
      const double e = xr[j] - cg_row(m.rowstr, m.colidx, m.a, j, zr);
      residual += e * e;
    }
  }
  ops.sum(std::span<double>(&residual, 1), nullptr);
  return std::sqrt(residual);
}

/// x set to all ones (cg.f before the timed steps).
template <class Ops>
void cg_start(Ops& ops, const cg_share& m, double* x) {
  double* xw = ops.writable(x);
  for (int j = m.first; j < m.last; ++j) xw[j] = 1.0;
}

/// One step of the inverse power method (cg.f's timed loop body): solve, zeta, x = z / |z|.
template <class Ops>
double cg_step(Ops& ops, const cg_class& c, const cg_share& m, double* x, double* z, double* p,
               double* q, double* r) {
  (void)cg_conj_grad(ops, m, x, z, p, q, r);
  double norms[2] = {0.0, 0.0};
  {
    const double* xr = ops.mine(x);
    const double* zr = ops.mine(z);
    for (int j = m.first; j < m.last; ++j) {
      norms[0] += xr[j] * zr[j];
      norms[1] += zr[j] * zr[j];
    }
  }
  ops.sum(std::span<double>(norms, 2), nullptr);
  const double scale = 1.0 / std::sqrt(norms[1]);
  {
    double* xw = ops.writable(x);
    const double* zr = ops.mine(z);
    for (int j = m.first; j < m.last; ++j) xw[j] = scale * zr[j];
  }
  return c.shift + 1.0 / norms[0];
}

/// Doubles of a worker's slot in a sum through shared slots (a cache line: at most 8 values).
inline constexpr std::size_t cg_slot_width = 8;

/// `s` set to the sums over every worker's slot in `slots` (worker w's at cg_slot_width x w), in
/// worker order, so every worker gets the same bits.
inline void cg_sum_slots(std::span<const double> slots, std::span<double> s) {
  const std::size_t workers = slots.size() / cg_slot_width;
  for (std::size_t i = 0; i < s.size(); ++i) {
    s[i] = 0.0;
    for (std::size_t w = 0; w < workers; ++w) s[i] += slots[cg_slot_width * w + i];
  }
}

/// [first, last) of `n` rows for worker w of `workers` (contiguous slices, as parallel_for).
inline std::pair<int, int> cg_slice(int n, int w, int workers) {
  return {static_cast<int>(std::int64_t{n} * w / workers),
          static_cast<int>(std::int64_t{n} * (w + 1) / workers)};
}

/// The JSON every CG program writes: kernel_report's and zeta.
inline report_json cg_report(const std::string& system, const cg_class& c, int processes,
                             int threads, const std::vector<double>& seconds, double zeta,
                             bool verified) {
  report_json out = kernel_report(system, "CG", c.name, processes, threads, seconds,
                                  cg_mops(c, median_seconds(seconds)), verified);
  out["zeta"] = zeta;
  return out;
}

}  // namespace seriema::bench::nas

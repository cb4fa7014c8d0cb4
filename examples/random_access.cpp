// HPCC RandomAccess (GUPS) on a distributed array: a table of 2^n 64-bit words spread over every
// thread of the job, 4 x 2^n updates T[r mod 2^n] ^= r from HPCC's random stream, each thread
// generating its share of the stream and sending each update to the word's owner (aggregated
// one-sided calls). Verification as HPCC's: the same updates applied again must give back the
// initial table (T[i] = i); HPCC allows 1 % of the words wrong, this program none.
//   SERIEMA_THREADS=2 seriema-run -n 2 -- ./random_access [log2 table size, default 18]
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <seriema/containers/containers.hpp>
#include <seriema/fabric/runtime.hpp>
#include <string>

using seriema::fabric::thread_context;

namespace {

// HPCC's generator: a shift register over GF(2) with the primitive polynomial x^63 + x^2 + x + 1
// (POLY), period PERIOD.
constexpr std::uint64_t poly = 0x7;
constexpr std::int64_t period = 1317624576693539401LL;

std::uint64_t next_random(std::uint64_t r) {
  return (r << 1) ^ (static_cast<std::int64_t>(r) < 0 ? poly : 0);
}

// The n-th value of the stream (HPCC_starts): r_n = x^n mod POLY, by squaring in GF(2)[x].
std::uint64_t stream_at(std::int64_t n) {
  while (n < 0) n += period;
  while (n > period) n -= period;
  if (n == 0) return 1;
  std::uint64_t powers[64];  // x^(2i) mod POLY
  std::uint64_t t = 1;
  for (auto& p : powers) {
    p = t;
    t = next_random(next_random(t));
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
    if (((n >> bit) & 1) != 0) r = next_random(r);
  }
  return r;
}

// Thread `me`'s share of the 4 x size updates, applied through `table`.
void update(thread_context& me, seriema::containers::array<std::uint64_t>& table) {
  const std::uint64_t size = table.size(), updates = 4 * size;
  const std::uint64_t share = updates / me.thread_count();
  const std::uint64_t first = share * me.id();
  const std::uint64_t count = me.id() + 1 == me.thread_count() ? updates - first : share;
  std::uint64_t r = stream_at(static_cast<std::int64_t>(first));
  for (std::uint64_t k = 0; k < count; ++k) {
    r = next_random(r);
    (void)table.visit(r & (size - 1), [](std::uint64_t, std::uint64_t& word,
                                         std::uint64_t& value) { word ^= value; }, r);
  }
}

}  // namespace

int main(int argc, char** argv) try {
  const int log2_size = argc > 1 ? std::stoi(argv[1]) : 18;
  if (log2_size < 4 || log2_size > 34) throw std::invalid_argument("log2 table size: 4..34");
  const std::uint64_t size = std::uint64_t{1} << log2_size;
  seriema::fabric::runtime rt;
  std::uint64_t wrong_total = 0;
  rt.run([&](thread_context& me) {
    seriema::containers::array<std::uint64_t> table(me, size);
    for (std::uint64_t k = 0; k < table.local().size(); ++k) {
      table.local()[k] = table.index_of(me.id(), k);
    }
    table.barrier();
    const auto start = std::chrono::steady_clock::now();
    update(me, table);
    table.barrier();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    update(me, table);  // the same updates again: each word back to its index
    table.barrier();
    // Each thread's count of wrong words, one element per thread (cyclic: its own element).
    seriema::containers::array<std::uint64_t> wrong(me, me.thread_count(),
                                                     seriema::containers::distribution::cyclic);
    for (std::uint64_t k = 0; k < table.local().size(); ++k) {
      if (table.local()[k] != table.index_of(me.id(), k)) ++wrong.local()[0];
    }
    wrong.barrier();
    if (me.id() == 0) {
      std::uint64_t job_wrong = 0;
      for (std::uint64_t n : wrong.gather()) job_wrong += n;
      wrong_total = job_wrong;
      fmt::print("random_access: table 2^{} words over {} threads, {} updates in {:.3f} s = "
                 "{:.4f} GUP/s\n",
                 log2_size, me.thread_count(), 4 * size, seconds, 4.0 * size / seconds / 1e9);
      fmt::print("random_access: verification: {} wrong words of {} (HPCC allows 1 %, this "
                 "program none): {}\n",
                 job_wrong, size, job_wrong == 0 ? "passed" : "FAILED");
    }
    wrong.barrier();  // thread 0 asked every part: nobody leaves before
  });
  return wrong_total == 0 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "random_access: %s\n", e.what());
  return 1;
}

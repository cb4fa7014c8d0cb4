// seriema::divider: quotient and remainder equal the `/` and `%` operators for every divisor
// from 1 to 5000 against numerators at every boundary (0, around each multiple near the ends of
// the range, 2^64 - 1), and for random divisors and numerators of every size.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <seriema/base/divider.hpp>
#include <vector>

namespace {

using seriema::divider;

constexpr std::uint64_t top = std::numeric_limits<std::uint64_t>::max();

// Numerators where a wrong magic number or shift shows first.
std::vector<std::uint64_t> boundaries(std::uint64_t d) {
  std::vector<std::uint64_t> out{0, 1, d - 1, d, d + 1, 2 * d - 1, 2 * d, top, top - 1};
  const std::uint64_t last_multiple = top / d * d;
  for (std::uint64_t m : {last_multiple, last_multiple - d, top / 2 / d * d}) {
    out.push_back(m);
    out.push_back(m - 1);
    out.push_back(m + 1);
  }
  for (int bit = 1; bit < 64; ++bit) {
    const std::uint64_t p = std::uint64_t{1} << bit;
    out.push_back(p - 1);
    out.push_back(p);
  }
  return out;
}

void check(const divider& by, std::uint64_t n) {
  const std::uint64_t d = by.divisor();
  ASSERT_EQ(by.quotient(n), n / d) << n << " / " << d;
  ASSERT_EQ(by.remainder(n), n % d) << n << " % " << d;
}

TEST(Divider, EverySmallDivisorAtItsBoundaries) {
  for (std::uint64_t d = 1; d <= 5000; ++d) {
    const divider by(d);
    for (std::uint64_t n : boundaries(d)) check(by, n);
  }
}

TEST(Divider, LargeDivisorsAndRandomNumerators) {
  std::mt19937_64 random(20261128);
  std::vector<std::uint64_t> divisors{top, top - 1, top / 2, top / 2 + 1, std::uint64_t{1} << 63,
                                      (std::uint64_t{1} << 63) + 1, 0xFFFF'FFFFull,
                                      0x1'0000'0001ull, 641, 6700417, 1000000007};
  for (int k = 0; k < 2000; ++k) divisors.push_back(random() >> (random() % 64));
  for (std::uint64_t d : divisors) {
    if (d == 0) continue;
    const divider by(d);
    for (std::uint64_t n : boundaries(d)) check(by, n);
    for (int k = 0; k < 200; ++k) check(by, random() >> (random() % 64));
  }
}

TEST(Divider, ZeroIsTakenAsOne) {
  const divider by(0);
  EXPECT_EQ(by.divisor(), 1u);
  EXPECT_EQ(by.quotient(12345), 12345u);
  EXPECT_EQ(by.remainder(12345), 0u);
}

}  // namespace

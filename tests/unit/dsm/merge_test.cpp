// The release's three-way merge: exactly the bytes a process changed since its twin land in the
// master copy, every other byte keeps the master's value (another writer's, under false
// sharing), at any position within a word; and the byte mask it is built on.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <seriema/dsm/detail/merge.hpp>
#include <vector>

using seriema::dsm::detail::merge_changes;
using seriema::dsm::detail::nonzero_byte_mask;

TEST(Merge, ByteMaskMarksExactlyTheNonZeroBytes) {
  EXPECT_EQ(nonzero_byte_mask(0), 0u);
  EXPECT_EQ(nonzero_byte_mask(0x80), 0xffu);
  EXPECT_EQ(nonzero_byte_mask(0x01), 0xffu);
  EXPECT_EQ(nonzero_byte_mask(0x0100000000000000ull), 0xff00000000000000ull);
  EXPECT_EQ(nonzero_byte_mask(0x8000000000000001ull), 0xff000000000000ffull);
  EXPECT_EQ(nonzero_byte_mask(0x7f00ff0001000000ull), 0xff00ff00ff000000ull);
  for (unsigned i = 0; i < 64; ++i) {
    EXPECT_EQ(nonzero_byte_mask(std::uint64_t{1} << i), std::uint64_t{0xff} << (i / 8 * 8));
  }
}

TEST(Merge, OnlyChangedBytesReachTheMaster) {
  constexpr std::size_t n = 4096;
  std::mt19937_64 rng(7);
  std::vector<std::byte> twin(n);
  std::vector<std::byte> master(n);
  for (auto& b : twin) b = static_cast<std::byte>(rng());
  for (auto& b : master) b = static_cast<std::byte>(rng());  // another writer's bytes
  std::vector<std::byte> mine = twin;
  std::vector<bool> changed(n, false);
  std::size_t expected_changes = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (rng() % 3 == 0) {
      // A change, also to 0 and to values differing in a single bit (the mask's edge cases).
      const auto delta = static_cast<std::byte>(rng() % 2 == 0 ? 0x80 : (1u << (rng() % 8)));
      mine[i] = rng() % 5 == 0 ? std::byte{0} : twin[i] ^ delta;
      if (mine[i] != twin[i]) {
        changed[i] = true;
        ++expected_changes;
      }
    }
  }
  const std::vector<std::byte> old_master = master;
  EXPECT_EQ(merge_changes(master.data(), mine.data(), twin.data(), n), expected_changes);
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(master[i], changed[i] ? mine[i] : old_master[i]) << "byte " << i;
  }
}

TEST(Merge, NothingChangedLeavesTheMasterAlone) {
  std::vector<std::byte> twin(64, std::byte{5});
  std::vector<std::byte> master(64, std::byte{9});
  EXPECT_EQ(merge_changes(master.data(), twin.data(), twin.data(), 64), 0u);
  EXPECT_EQ(master, std::vector<std::byte>(64, std::byte{9}));
}

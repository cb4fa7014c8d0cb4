// The three-way merge of a release: the bytes a process changed since its twin, laid over the
// master copy, word by word without a branch per byte (the seed's vectorised compare).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace seriema::dsm::detail {

/// A word whose byte i is 0xff where byte i of `changed` is not 0, else 0x00.
inline std::uint64_t nonzero_byte_mask(std::uint64_t changed) noexcept {
  constexpr std::uint64_t low7 = 0x7f7f7f7f7f7f7f7full;
  // Bit 7 of each byte: set when any of its bits is (the carry of low 7 bits, or bit 7 itself).
  const std::uint64_t high = (((changed & low7) + low7) | changed) & ~low7;
  return (high >> 7) * 0xff;
}

/// master[i] = mine[i] wherever mine[i] != twin[i], for i < bytes (a multiple of 8); bytes the
/// process did not change keep the master's value, so concurrent writers of other bytes of the
/// block (false sharing) survive. Returns how many bytes differed.
inline std::size_t merge_changes(std::byte* master, const std::byte* mine, const std::byte* twin,
                                 std::size_t bytes) noexcept {
  std::size_t changed_bytes = 0;
  for (std::size_t at = 0; at < bytes; at += 8) {
    std::uint64_t m;
    std::uint64_t p;
    std::uint64_t t;
    std::memcpy(&m, master + at, 8);
    std::memcpy(&p, mine + at, 8);
    std::memcpy(&t, twin + at, 8);
    const std::uint64_t diff = p ^ t;
    if (diff == 0) continue;
    const std::uint64_t mask = nonzero_byte_mask(diff);
    changed_bytes += static_cast<std::size_t>(__builtin_popcountll(mask)) / 8;
    m = (m & ~mask) | (p & mask);
    std::memcpy(master + at, &m, 8);
  }
  return changed_bytes;
}

}  // namespace seriema::dsm::detail

// Row bitboards of Hex shared by the rules (hex.cpp) and the threat finder (threats.cpp):
// bit c of row r is cell (r, c); (r, c) touches (r, c+-1), (r-1, c), (r-1, c+1), (r+1, c) and
// (r+1, c-1).
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "hex.hpp"

namespace seriema::hex {

using board_rows = std::array<std::uint32_t, hex::max_size>;

// Grows `reach` (a subset of `stones`, one row) along the row: a stone touches its two
// neighbours in the row, so the reached runs of stones fill to their ends.
inline std::uint32_t spread_in_row(std::uint32_t reach, std::uint32_t stones) noexcept {
  for (;;) {
    const std::uint32_t grown = reach | ((reach << 1 | reach >> 1) & stones);
    if (grown == reach) return reach;
    reach = grown;
  }
}

// The board mirrored in its main diagonal: (r, c) -> (c, r). The neighbour rule is symmetric
// under it ((r-1, c+1) becomes (r+1, c-1)), so a left-right chain becomes a top-bottom chain.
inline board_rows transposed(const board_rows& stones, int n) noexcept {
  board_rows t{};
  for (int r = 0; r < n; ++r) {
    for (std::uint32_t bits = stones[static_cast<std::size_t>(r)]; bits != 0; bits &= bits - 1) {
      t[static_cast<std::size_t>(std::countr_zero(bits))] |= std::uint32_t{1} << r;
    }
  }
  return t;
}

// The cells of row r that touch a cell of `set` (rows 0..n-1): from row r-1 bits c and c+1
// touch (r, c), from row r+1 bits c and c-1.
inline std::uint32_t touching(const board_rows& set, int r, int n) noexcept {
  const auto row = static_cast<std::size_t>(r);
  std::uint32_t near = set[row] << 1 | set[row] >> 1;
  if (r > 0) near |= set[row - 1] | set[row - 1] >> 1;
  if (r + 1 < n) near |= set[row + 1] | set[row + 1] << 1;
  return near;
}

}  // namespace seriema::hex

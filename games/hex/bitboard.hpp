// Row bitboards of Hex shared by the rules (hex.cpp), the threat finder (threats.cpp) and the
// inferior-cell analysis (inferior.cpp), and single cells of packed sets: bit c of row r is cell
// (r, c); (r, c) touches (r, c+-1), (r-1, c), (r-1, c+1), (r+1, c) and
// (r+1, c-1). A position keeps its cells packed (hex::cell_set); the flood fills work on rows
// unpacked from it.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "hex.hpp"

namespace seriema::hex {

using board_rows = std::array<std::uint32_t, hex::max_size>;

// Cell `index` (row * size + column) of a packed set.
inline bool contains(const hex::cell_set& cells, int index) noexcept {
  const auto i = static_cast<unsigned>(index);
  return (cells[i / 64] >> (i % 64) & 1) != 0;
}
inline void insert(hex::cell_set& cells, int index) noexcept {
  const auto i = static_cast<unsigned>(index);
  cells[i / 64] |= std::uint64_t{1} << (i % 64);
}

namespace detail {

// Row `row` of a board of N x N packed in `cells` (bit r * N + c): N bits from offset row * N,
// which run on into the next word when they pass bit 63 (N <= 19 < 64: into one word at most,
// a row that does has a next word as N * N <= 64 * cell_words, and its shift is above 0, so
// no shift count reaches 64).
template <unsigned N>
std::uint32_t packed_row(const hex::cell_set& cells, unsigned row) noexcept {
  const unsigned word = row * N / 64;
  const unsigned shift = row * N % 64;
  std::uint64_t bits = cells[word] >> shift;
  if (shift + N > 64) bits |= cells[word + 1] << (64 - shift);
  return static_cast<std::uint32_t>(bits) & ((std::uint32_t{1} << N) - 1);
}

// Every row of an N x N board, each row's word and shift known when compiled.
template <unsigned N, std::size_t... Row>
board_rows unpacked_rows(const hex::cell_set& cells, std::index_sequence<Row...>) noexcept {
  board_rows rows{};
  ((rows[Row] = packed_row<N>(cells, Row)), ...);
  return rows;
}
template <unsigned N>
board_rows unpacked_board(const hex::cell_set& cells) noexcept {
  return unpacked_rows<N>(cells, std::make_index_sequence<N>{});
}

using unpacker = board_rows (*)(const hex::cell_set&) noexcept;
template <unsigned... Size>
constexpr std::array<unpacker, sizeof...(Size)> unpackers(
    std::integer_sequence<unsigned, Size...>) noexcept {
  return {&unpacked_board<Size + hex::min_size>...};
}

}  // namespace detail

// Every row of a board of n x n packed in `cells`; rows n..max_size-1 are 0. One unrolled
// function per size: the playouts unpack a board each, and a loop's offset arithmetic cost
// them more than the packing saved.
inline board_rows unpacked(const hex::cell_set& cells, int n) noexcept {
  static constexpr auto by_size = detail::unpackers(
      std::make_integer_sequence<unsigned, hex::max_size - hex::min_size + 1>{});
  return by_size[static_cast<std::size_t>(n - hex::min_size)](cells);
}

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

// Whether `stones` (n rows) hold a chain from row 0 to row n-1. Flood fill from the whole top
// row, alternating downward and upward sweeps. From row r-1 cell (r, c) is touched by bits c
// and c+1, from row r+1 by bits c and c-1. Reached rows always form a prefix 0..depth-1 (a stone
// is reached through every row above it), so a downward sweep stops at the first unreached row.
// After the first sweep, a sweep that reaches nothing new means the fill is complete.
inline bool joins_top_bottom(const std::uint32_t* stones, int n) noexcept {
  board_rows reach{};
  reach[0] = stones[0];
  if (reach[0] == 0) return false;
  int depth = 1;
  for (bool downward = true, first = true;; downward = !downward, first = false) {
    bool grew = false;
    if (downward) {
      for (int r = 1; r < n; ++r) {
        const std::uint32_t above = reach[r - 1];
        const std::uint32_t x = spread_in_row(reach[r] | ((above | above >> 1) & stones[r]),
                                              stones[r]);
        if (x == 0) break;
        grew |= x != reach[r];
        reach[r] = x;
        if (r + 1 > depth) depth = r + 1;
      }
    } else {
      for (int r = depth - 2; r >= 0; --r) {
        const std::uint32_t below = reach[r + 1];
        const std::uint32_t x = spread_in_row(reach[r] | ((below | below << 1) & stones[r]),
                                              stones[r]);
        grew |= x != reach[r];
        reach[r] = x;
      }
    }
    if (depth == n) return true;
    if (!grew && !first) return false;
  }
}

}  // namespace seriema::hex

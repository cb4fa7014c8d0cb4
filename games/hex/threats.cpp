// hex::threats (hex.hpp): the empty cells that would join a player's two edges at once, by two
// flood fills of that player's stones (from each edge) on row bitboards.
#include <cstddef>
#include <span>

#include "bitboard.hpp"
#include "hex.hpp"

namespace seriema::hex {
namespace {

// The stones of `stones` (n rows) connected to row `edge` (0 or n-1) through stones: repeated
// downward and upward sweeps until one adds nothing.
board_rows reached_from_edge(const board_rows& stones, int n, int edge) noexcept {
  board_rows reach{};
  reach[static_cast<std::size_t>(edge)] = stones[static_cast<std::size_t>(edge)];
  for (bool grew = true; grew;) {
    grew = false;
    const auto sweep = [&](int r) {
      const auto row = static_cast<std::size_t>(r);
      const std::uint32_t x = spread_in_row(reach[row] | (touching(reach, r, n) & stones[row]),
                                            stones[row]);
      grew |= x != reach[row];
      reach[row] = x;
    };
    for (int r = 0; r < n; ++r) sweep(r);
    for (int r = n - 1; r >= 0; --r) sweep(r);
  }
  return reach;
}

// The empty cells joining row 0 to row n-1 for `stones` when played: each touches row 0 (or is
// on it) through stones, and row n-1 likewise.
board_rows top_bottom_threats(const board_rows& stones, const board_rows& empty, int n) noexcept {
  const board_rows top = reached_from_edge(stones, n, 0);
  const board_rows bottom = reached_from_edge(stones, n, n - 1);
  board_rows wins{};
  for (int r = 0; r < n; ++r) {
    const auto row = static_cast<std::size_t>(r);
    const std::uint32_t touches_top = r == 0 ? ~std::uint32_t{0} : touching(top, r, n);
    const std::uint32_t touches_bottom = r == n - 1 ? ~std::uint32_t{0} : touching(bottom, r, n);
    wins[row] = empty[row] & touches_top & touches_bottom;
  }
  return wins;
}

}  // namespace

std::size_t hex::threats(const state& s, player who, std::span<move> out) const noexcept {
  if (swap_available(s)) return 0;
  // The rows once, for the winner (as winner(s)) and the threats: player 2's left-right
  // question is player 1's top-bottom question on the mirrored board.
  const board_rows black = unpacked(s.stones[0], size_);
  const board_rows white = unpacked(s.stones[1], size_);
  const board_rows white_columns = transposed(white, size_);
  if (joins_top_bottom(black.data(), size_) || joins_top_bottom(white_columns.data(), size_)) {
    return 0;  // the game is over
  }
  board_rows empty{};
  for (std::size_t r = 0; r < static_cast<std::size_t>(size_); ++r) {
    empty[r] = row_mask_ & ~(black[r] | white[r]);
  }
  board_rows wins = who == 1 ? top_bottom_threats(black, empty, size_)
                             : transposed(top_bottom_threats(white_columns,
                                                             transposed(empty, size_), size_),
                                          size_);
  std::size_t count = 0;
  for (int r = 0; r < size_; ++r) {
    for (std::uint32_t bits = wins[static_cast<std::size_t>(r)]; bits != 0; bits &= bits - 1) {
      out[count++] = at(r, std::countr_zero(bits));
    }
  }
  return count;
}

}  // namespace seriema::hex

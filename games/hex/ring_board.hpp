// A Hex board as one byte per cell with a border of edge "stones", and the ring of six
// neighbours of each cell as a 12-bit code: what the inferior-cell analysis (inferior.cpp) and
// the pattern priors (patterns.cpp) read a position through.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "hex.hpp"

namespace seriema::hex {

// A cell's neighbours in ring order, each touching the next and the last the first:
// (r-1, c), (r-1, c+1), (r, c+1), (r+1, c), (r+1, c-1), (r, c-1). The neighbour opposite
// direction d is direction (d + 3) % 6.
constexpr int ring_size = 6;
constexpr std::array<int, ring_size> ring_rows = {-1, -1, 0, 1, 1, 0};
constexpr std::array<int, ring_size> ring_columns = {0, 1, 1, 0, -1, -1};

// A ring as 2 bits per direction (bits 2d and 2d+1): empty (0), 1 or 2 (a stone, or an edge of
// that player).
constexpr std::size_t ring_codes = std::size_t{1} << (2 * ring_size);

// One byte per cell (empty, or the player whose stone it is) on a grid with a border, so that
// a ring is six fixed offsets. The border rows above and below are black (player 1's edges, the
// corners outside the obtuse corner cells included: there the ring meets the top or bottom
// edge once more), the border columns left and right white. The inferior-cell analysis fills
// cells in as it goes (set).
class fill_board {
 public:
  static constexpr int stride = hex::max_size + 2;

  fill_board(const hex& g, const hex::state& s) noexcept : size_(g.size()) {
    cells_.fill(1);
    for (int r = 0; r < size_; ++r) {
      cells_[static_cast<std::size_t>(grid(r, -1))] = 2;
      cells_[static_cast<std::size_t>(grid(r, size_))] = 2;
      for (int c = 0; c < size_; ++c) {
        cells_[static_cast<std::size_t>(grid(r, c))] = g.cell(s, r, c);
      }
    }
  }
  [[nodiscard]] static constexpr int grid(int r, int c) noexcept {
    return (r + 1) * stride + c + 1;
  }
  [[nodiscard]] static constexpr int neighbour(int cell, int d) noexcept {
    return cell + ring_rows[static_cast<std::size_t>(d)] * stride +
           ring_columns[static_cast<std::size_t>(d)];
  }
  [[nodiscard]] std::uint8_t at(int cell) const noexcept {
    return cells_[static_cast<std::size_t>(cell)];
  }
  void set(int cell, player p) noexcept { cells_[static_cast<std::size_t>(cell)] = p; }
  [[nodiscard]] std::size_t ring_code(int cell) const noexcept {
    std::size_t code = 0;
    for (int d = 0; d < ring_size; ++d) code |= std::size_t{at(neighbour(cell, d))} << 2 * d;
    return code;
  }
  [[nodiscard]] int size() const noexcept { return size_; }

 private:
  int size_;
  std::array<std::uint8_t, stride * stride> cells_{};
};

}  // namespace seriema::hex

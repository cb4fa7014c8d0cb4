// hex::priors and hex::pattern_features_of (hex.hpp): move priors from local patterns, a move's
// ring of six neighbours seen by the player to move and its place next to the last move, each
// feature weighed by a gamma trained on self-play games (train_patterns.py writes
// pattern_weights.inc; seriema-hex selfplay makes the games), and the playout policy that draws
// its moves by the same weights.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "bitboard.hpp"

#include "hex.hpp"
#include "ring_board.hpp"

namespace seriema::hex {
namespace {

struct trained_gamma {
  std::uint32_t feature;
  float gamma;
};

// The trained gammas; a feature not listed weighs 1 (seen too rarely in training to say more).
constexpr trained_gamma trained[] = {
#include "pattern_weights.inc"
    {hex::no_feature, 1.0F},  // the end (the file may list none)
};

const std::array<float, hex::pattern_features>& gamma_table() {
  static const auto table = [] {
    std::array<float, hex::pattern_features> t;
    t.fill(1.0F);
    for (const trained_gamma& g : trained) {
      if (g.feature < hex::pattern_features) t[g.feature] = g.gamma;
    }
    return t;
  }();
  return table;
}

// A ring code's 2-bit label in direction d.
constexpr std::size_t label(std::size_t code, int d) noexcept { return code >> (2 * d) & 3; }
constexpr std::size_t swap_colour(std::size_t l) noexcept { return l == 0 ? 0 : 3 - l; }

// The ring as player `mover` sees it. White's board transposed, (r, c) -> (c, r), takes
// direction d to 5 - d and white's edges to the top and bottom; with the colours swapped
// white plays black's part.
std::size_t as_mover_sees(std::size_t code, player mover) noexcept {
  if (mover == 1) return code;
  std::size_t seen = 0;
  for (int d = 0; d < ring_size; ++d) seen |= swap_colour(label(code, d)) << 2 * (5 - d);
  return seen;
}

// The smaller of the ring and the ring turned half a turn (direction d to d + 3), which keeps
// every colour and edge: one feature for both.
std::size_t half_turn_canonical(std::size_t code) noexcept {
  std::size_t turned = 0;
  for (int d = 0; d < ring_size; ++d) turned |= label(code, (d + 3) % ring_size) << 2 * d;
  return std::min(code, turned);
}

// The canonical ring of every ring, as each player sees it: ring_features()[p - 1][code].
using ring_feature_table = std::array<std::array<std::uint16_t, ring_codes>, 2>;
const ring_feature_table& ring_features() {
  static const auto table = [] {
    ring_feature_table t{};
    for (player p = 1; p <= 2; ++p) {
      for (std::size_t code = 0; code < ring_codes; ++code) {
        t[p - 1][code] = static_cast<std::uint16_t>(half_turn_canonical(as_mover_sees(code, p)));
      }
    }
    return t;
  }();
  return table;
}

// Where cell (r, c) lies from the last move (lr, lc): 1 a neighbour, 2 a bridge away (the two
// cells share two empty-or-not neighbours), 0 elsewhere.
constexpr std::array<std::array<int, 2>, 6> bridge_offsets = {
    {{-2, 1}, {-1, 2}, {1, 1}, {2, -1}, {1, -2}, {-1, -1}}};
std::uint32_t place_from_last(int r, int c, int lr, int lc) noexcept {
  const int dr = r - lr;
  const int dc = c - lc;
  for (int d = 0; d < ring_size; ++d) {
    if (dr == ring_rows[static_cast<std::size_t>(d)] &&
        dc == ring_columns[static_cast<std::size_t>(d)]) {
      return 1;
    }
  }
  for (const auto& [br, bc] : bridge_offsets) {
    if (dr == br && dc == bc) return 2;
  }
  return 0;
}

// The empty cells of a playout and each one's ring code and base weights (its gamma at place 0,
// as each player sees it), with each row's sum of them and the board's, kept up to date as
// stones fall: a stone changes the rings of its six neighbours only. A draw then walks the rows
// and one row's cells, not every cell.
class weighted_cells {
 public:
  weighted_cells(const fill_board& board, int size) noexcept : board_(board), size_(size) {
    for (int r = 0; r < size; ++r) {
      for (int c = 0; c < size; ++c) {
        const int cell = fill_board::grid(r, c);
        if (board.at(cell) != 0) continue;
        ++count_;
        code_[static_cast<std::size_t>(cell)] = static_cast<std::uint16_t>(board.ring_code(cell));
        reweigh(cell);
      }
    }
  }
  [[nodiscard]] int count() const noexcept { return count_; }
  [[nodiscard]] double total(player mover) const noexcept { return total_[mover - 1]; }
  [[nodiscard]] float base(player mover, int cell) const noexcept {
    return weight_[mover - 1][static_cast<std::size_t>(cell)];
  }
  // The gamma of `cell` for `mover` at `place` from the last move (1 a neighbour, 2 a bridge).
  [[nodiscard]] float at_place(player mover, int cell, std::uint32_t place) const noexcept {
    const std::uint32_t ring = ring_features()[mover - 1][code_[static_cast<std::size_t>(cell)]];
    return gamma_table()[ring * 3 + place];
  }
  // The empty cell at `u` in [0, total(mover) - the base weights of `skipped`) when the cells
  // are laid end to end by base weight, row by row, the skipped ones left out; the last empty
  // cell when rounding overshoots.
  [[nodiscard]] int at(player mover, double u, std::span<const int> skipped) const noexcept {
    std::array<double, hex::max_size> left_out{};
    for (const int cell : skipped) {
      left_out[static_cast<std::size_t>(cell / fill_board::stride - 1)] += base(mover, cell);
    }
    int last_empty = -1;
    for (int r = 0; r < size_; ++r) {
      const double in_row = row_total_[mover - 1][static_cast<std::size_t>(r)] -
                            left_out[static_cast<std::size_t>(r)];
      if (u >= in_row) {
        u -= in_row;
        continue;
      }
      for (int c = 0; c < size_; ++c) {
        const int cell = fill_board::grid(r, c);
        if (board_.at(cell) != 0 ||
            std::find(skipped.begin(), skipped.end(), cell) != skipped.end()) {
          continue;
        }
        last_empty = cell;
        if (u < base(mover, cell)) return cell;
        u -= base(mover, cell);
      }
    }
    if (last_empty >= 0) return last_empty;
    for (int cell = fill_board::grid(size_ - 1, size_ - 1);; --cell) {
      if (board_.at(cell) == 0) return cell;  // count() > 0: one is empty
    }
  }
  // `cell` (empty, now set on the board to `who`) leaves the sums; its empty neighbours' rings
  // and weights change (it is their neighbour in the opposite direction).
  void play(int cell, player who) noexcept {
    --count_;
    set_weights(cell, 0, 0);
    for (int d = 0; d < ring_size; ++d) {
      const int next = fill_board::neighbour(cell, d);
      if (board_.at(next) != 0) continue;  // a stone, or the border
      const auto n = static_cast<std::size_t>(next);
      code_[n] = static_cast<std::uint16_t>(code_[n] | std::size_t{who} << 2 * ((d + 3) % 6));
      reweigh(next);
    }
  }

 private:
  static constexpr std::size_t grid_cells = fill_board::stride * fill_board::stride;
  void reweigh(int cell) noexcept { set_weights(cell, at_place(1, cell, 0), at_place(2, cell, 0)); }
  void set_weights(int cell, float black, float white) noexcept {
    const auto i = static_cast<std::size_t>(cell);
    const auto row = static_cast<std::size_t>(cell / fill_board::stride - 1);
    const float now[2] = {black, white};
    for (std::size_t p = 0; p < 2; ++p) {
      const double change = static_cast<double>(now[p]) - weight_[p][i];
      row_total_[p][row] += change;
      total_[p] += change;
      weight_[p][i] = now[p];
    }
  }

  const fill_board& board_;
  int size_;
  int count_ = 0;
  std::array<std::uint16_t, grid_cells> code_{};
  std::array<std::array<float, grid_cells>, 2> weight_{};
  std::array<std::array<double, hex::max_size>, 2> row_total_{};
  std::array<double, 2> total_{};
};

}  // namespace

// Each move: the base weights' sum for the mover, the cells next to and a bridge from the last
// move at their own place's gamma, one draw over the whole.
player hex::pattern_fill(const state& s, mcts::random& rng, player* played_by) const noexcept {
  fill_board board(*this, s);
  weighted_cells cells(board, size_);
  board_rows black = unpacked(s.stones[0], size_);
  player mover = s.to_move;
  int last = s.last_move < size_ * size_
                 ? fill_board::grid(s.last_move / size_, s.last_move % size_)
                 : -1;
  std::array<int, 12> near{};  // the last move's empty neighbours and bridge cells
  std::array<float, 12> near_weight{};
  while (cells.count() != 0) {
    std::size_t near_count = 0;
    double near_total = 0;
    double total = cells.total(mover);
    if (last >= 0) {
      const int lr = last / fill_board::stride - 1;
      const int lc = last % fill_board::stride - 1;
      for (int d = 0; d < ring_size; ++d) {
        for (const std::uint32_t place : {1U, 2U}) {
          const auto k = static_cast<std::size_t>(d);
          const int r = lr + (place == 1 ? ring_rows[k] : bridge_offsets[k][0]);
          const int c = lc + (place == 1 ? ring_columns[k] : bridge_offsets[k][1]);
          if (r < 0 || c < 0 || r >= size_ || c >= size_) continue;
          const int cell = fill_board::grid(r, c);
          if (board.at(cell) != 0) continue;
          near[near_count] = cell;
          near_weight[near_count] = cells.at_place(mover, cell, place);
          near_total += near_weight[near_count];
          total -= cells.base(mover, cell);
          ++near_count;
        }
      }
    }
    double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * (total + near_total);
    int chosen = -1;
    for (std::size_t j = 0; j < near_count && chosen < 0; ++j) {
      if (u < near_weight[j]) chosen = near[j];
      u -= near_weight[j];
    }
    if (chosen < 0) chosen = cells.at(mover, u, std::span<const int>(near.data(), near_count));
    board.set(chosen, mover);
    cells.play(chosen, mover);
    const int row = chosen / fill_board::stride - 1;
    const int column = chosen % fill_board::stride - 1;
    if (mover == 1) black[static_cast<std::size_t>(row)] |= std::uint32_t{1} << column;
    if (played_by != nullptr) played_by[row * size_ + column] = mover;
    last = chosen;
    mover = mcts::opponent(mover);
  }
  return joins_top_bottom(black.data(), size_) ? 1 : 2;
}

void hex::pattern_features_of(const state& s, std::span<const move> moves,
                              std::span<std::uint32_t> out) const noexcept {
  const fill_board board(*this, s);
  const auto& canonical = ring_features()[s.to_move - 1];
  const bool after_a_move = s.last_move < size_ * size_;
  const int last_row = after_a_move ? s.last_move / size_ : -10;
  const int last_column = after_a_move ? s.last_move % size_ : -10;
  for (std::size_t i = 0; i < moves.size(); ++i) {
    if (moves[i] == swap_move) {
      out[i] = no_feature;
      continue;
    }
    const int r = moves[i] / size_;
    const int c = moves[i] % size_;
    const std::uint32_t seen = canonical[board.ring_code(fill_board::grid(r, c))];
    out[i] = seen * 3 + place_from_last(r, c, last_row, last_column);
  }
}

void hex::priors(const state& s, std::span<const move> moves,
                 std::span<float> weights) const noexcept {
  std::array<std::uint32_t, max_size * max_size + 1> features;
  pattern_features_of(s, moves, std::span<std::uint32_t>(features.data(), moves.size()));
  const auto& gammas = gamma_table();
  for (std::size_t i = 0; i < moves.size(); ++i) {
    weights[i] = features[i] == no_feature ? 1.0F : gammas[features[i]];
  }
}

}  // namespace seriema::hex

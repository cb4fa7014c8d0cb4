// hex::priors and hex::pattern_features_of (hex.hpp): move priors from local patterns, a move's
// ring of six neighbours seen by the player to move and its place next to the last move, each
// feature weighed by a gamma trained on self-play games (train_patterns.py writes
// pattern_weights.inc; seriema-hex selfplay makes the games).
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

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

}  // namespace

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

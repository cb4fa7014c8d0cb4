// A test game for RAVE (seriema::mcts::amaf_game): two players claim cells in turn until all
// are claimed, and whoever holds cell 0 wins. Random playouts rate every first move near even
// except cell 0, which wins every playout in which its player claims it, so all-moves-as-first
// statistics single it out after a few rollouts, long before every move has been tried.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <optional>
#include <seriema/mcts/game.hpp>
#include <seriema/mcts/search.hpp>
#include <span>
#include <string>
#include <string_view>

namespace seriema::test {

struct claim_game {
  struct state {
    std::uint32_t claimed_by[2] = {0, 0};  ///< bit i: cell i is player 1's / player 2's
    mcts::player to_move = 1;
  };
  using move = std::uint8_t;

  std::uint32_t cells = 24;  ///< at most 32

  [[nodiscard]] state initial_state() const noexcept { return {}; }
  [[nodiscard]] mcts::player to_move(const state& s) const noexcept { return s.to_move; }
  [[nodiscard]] std::size_t max_moves() const noexcept { return cells; }
  std::size_t legal_moves(const state& s, std::span<move> out) const noexcept {
    std::size_t count = 0;
    for (std::uint32_t free = free_cells(s); free != 0; free &= free - 1) {
      out[count++] = static_cast<move>(std::countr_zero(free));
    }
    return count;
  }
  void apply(state& s, move m) const noexcept {
    s.claimed_by[s.to_move - 1] |= std::uint32_t{1} << m;
    s.to_move = mcts::opponent(s.to_move);
  }
  [[nodiscard]] mcts::player winner(const state& s) const noexcept {
    if (free_cells(s) != 0) return mcts::nobody;
    return (s.claimed_by[0] & 1) != 0 ? 1 : 2;
  }
  [[nodiscard]] mcts::player playout(const state& s, mcts::random& rng) const noexcept {
    mcts::player played_by[32];
    return playout(s, rng, std::span<mcts::player>(played_by, cells));
  }
  mcts::player playout(state s, mcts::random& rng,
                       std::span<mcts::player> played_by) const noexcept {
    move free[32];
    std::size_t count = legal_moves(s, std::span<move>(free, 32));
    while (count > 0) {
      const std::uint32_t pick = rng.below(static_cast<std::uint32_t>(count));
      played_by[free[pick]] = s.to_move;
      apply(s, free[pick]);
      free[pick] = free[--count];
    }
    return winner(s);
  }
  [[nodiscard]] std::size_t move_index(move m) const noexcept { return m; }
  [[nodiscard]] std::string move_name(move m) const { return std::to_string(m); }
  [[nodiscard]] std::optional<move> parse_move(const state& s, std::string_view text) const {
    for (std::uint32_t free = free_cells(s); free != 0; free &= free - 1) {
      const auto m = static_cast<move>(std::countr_zero(free));
      if (text == move_name(m)) return m;
    }
    return std::nullopt;
  }
  [[nodiscard]] std::string render(const state& s) const {
    std::string out;
    for (std::uint32_t i = 0; i < cells; ++i) {
      out += (s.claimed_by[0] >> i & 1) ? 'X' : (s.claimed_by[1] >> i & 1) ? 'O' : '.';
    }
    return out;
  }

 private:
  [[nodiscard]] std::uint32_t free_cells(const state& s) const noexcept {
    const std::uint32_t all = cells == 32 ? ~std::uint32_t{0} : (std::uint32_t{1} << cells) - 1;
    return all & ~(s.claimed_by[0] | s.claimed_by[1]);
  }
};
static_assert(mcts::amaf_game<claim_game>);

/// The claim game with move priors (mcts::prior_game): cell i weighs weights[i].
struct claim_game_with_priors : claim_game {
  std::array<float, 32> weights{};
  void priors(const state&, std::span<const move> moves, std::span<float> out) const noexcept {
    for (std::size_t i = 0; i < moves.size(); ++i) out[i] = weights[moves[i]];
  }
  [[nodiscard]] bool gives_priors() const noexcept { return true; }
};
static_assert(mcts::prior_game<claim_game_with_priors>);

/// The RAVE searches of the claim game's tests: fewer rollouts than moves, exploration 0.3
/// (RAVE rates untried moves; 1.0 would keep spreading the rollouts).
inline mcts::search_options claim_rave_options() {
  mcts::search_options o;
  o.rollouts = 20;
  o.playouts_per_leaf = 4;
  o.exploration = 0.3;
  o.rave = true;
  return o;
}

}  // namespace seriema::test

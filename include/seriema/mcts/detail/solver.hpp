// The expansion rule, shared by both engines: which moves a new node's edges are made of and
// whether the node is already decided (search_options::solver and knowledge, solver_game and
// pruning_game).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <seriema/mcts/game.hpp>
#include <seriema/mcts/search.hpp>
#include <span>
#include <stdexcept>
#include <string>

namespace seriema::mcts::detail {

/// The moves written to `out` for a node's edges, and the node's result when it is decided
/// (nobody: not decided).
struct expansion {
  std::size_t count = 0;
  player decided = nobody;
};

/// Legal moves of s (not over) into out; with the solver on a solver_game, only a winning move
/// (the node is won by the player to move), or only the blocks of the opponent's threats (two
/// or more: the node is lost, the threats kept as edges so that a root still names a move).
/// Otherwise, with knowledge on a pruning_game, the moves its prune() keeps, and with the
/// solver its proof: a won node's only edge is the winning move, a lost node keeps every move
/// prune() kept. The solver counts only on a solver_game, as the trees' own solver flag does.
/// Throws std::logic_error when prune() breaks its contract (keeps none, or more than legal).
template <game G>
expansion moves_to_search(const G& g, const typename G::state& s,
                          std::span<typename G::move> out, bool solver, bool knowledge) {
  const player mover = g.to_move(s);
  const bool proving = solver && solver_game<G>;
  if constexpr (solver_game<G>) {
    if (proving) {
      if (g.threats(s, mover, out) > 0) return {1, mover};
      if (const std::size_t blocks = g.threats(s, opponent(mover), out); blocks > 0) {
        return {blocks, blocks > 1 ? opponent(mover) : nobody};
      }
    }
  }
  const std::size_t legal = g.legal_moves(s, out);
  if constexpr (pruning_game<G>) {
    if (knowledge && legal > 0) {
      const pruned kept = g.prune(s, out.first(legal));
      if (kept.count < 1 || kept.count > legal) {
        throw std::logic_error("game::prune kept " + std::to_string(kept.count) + " of " +
                               std::to_string(legal) + " legal moves; it must keep 1 to all");
      }
      if (!proving || kept.decided == nobody) return {kept.count, nobody};
      return {kept.decided == mover ? 1 : kept.count, kept.decided};
    }
  }
  return {legal, nobody};
}

/// Whether a search of g with knowledge on uses its move priors (a prior_game that gives them):
/// both engines then give every edge table a prior share per edge.
template <game G>
[[nodiscard]] bool uses_priors(const G& g, bool knowledge) noexcept {
  if constexpr (prior_game<G>) {
    return knowledge && g.gives_priors();
  } else {
    return false;
  }
}

/// The largest search_options::prior_bias: a bias term stays far below with_prior's place for
/// unvisited moves (1e9), so that order holds.
inline constexpr double max_prior_bias = 1e6;

/// Throws std::invalid_argument, naming `engine`, for a prior_bias that is not a finite number
/// in [0, max_prior_bias] (a NaN would make every score NaN and selection take the first edge,
/// even one the solver proved lost).
inline void check_prior_bias(const search_options& options, const char* engine) {
  if (!(options.prior_bias >= 0 && options.prior_bias <= max_prior_bias)) {
    throw std::invalid_argument(std::string(engine) + ": prior_bias must be in [0, 1e6], not " +
                                std::to_string(options.prior_bias));
  }
}

/// The prior shares of `moves` (a new node's edges, in their final order) into `shares`: the
/// game's weights divided by their sum, equal shares when the sum is 0. Throws
/// std::logic_error when priors() breaks its contract (a negative or not finite weight).
template <game G>
void prior_shares(const G& g, const typename G::state& s,
                  std::span<const typename G::move> moves, std::span<float> shares) {
  if constexpr (prior_game<G>) {
    g.priors(s, moves, shares);
    double sum = 0;
    for (const float w : shares) {
      if (!(w >= 0) || !std::isfinite(w)) {
        throw std::logic_error("game::priors gave the weight " + std::to_string(w) +
                               "; weights must be finite and non-negative");
      }
      sum += w;
    }
    if (sum > 0) {
      for (float& w : shares) w = static_cast<float>(w / sum);
    } else if (!shares.empty()) {
      std::fill(shares.begin(), shares.end(), 1.0F / static_cast<float>(shares.size()));
    }
  }
}

/// A root the solver proved won by its player to move: the winning move first in the result,
/// whatever its visits (a proof outranks statistics).
template <class Move>
void put_proven_move_first(search_result<Move>& result, const Move& winning) {
  const auto proven = std::find_if(result.moves.begin(), result.moves.end(),
                                   [&](const auto& s) { return s.move == winning; });
  if (proven != result.moves.end()) std::rotate(result.moves.begin(), proven, proven + 1);
  result.best = winning;
  if (!result.moves.empty()) result.win_rate = result.moves.front().win_rate();
}

}  // namespace seriema::mcts::detail

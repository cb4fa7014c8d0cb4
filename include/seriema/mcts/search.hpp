// What both MCTS engines (sequential and distributed) take and return: the budget and tuning of
// one search, the statistics of its result, and the UCB1 score they both select with.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <seriema/mcts/game.hpp>
#include <span>
#include <utility>
#include <vector>

namespace seriema::mcts {

/// One search. A rollout is one selection from the root, one expansion, `playouts_per_leaf`
/// random playouts from the new leaf and one backpropagation. The search stops at the first
/// budget reached (rollouts, or seconds when > 0); at least one must be set.
struct search_options {
  std::uint64_t rollouts = 10'000;  ///< 0: no rollout bound (seconds must be > 0)
  double seconds = 0;               ///< 0: no time bound
  unsigned playouts_per_leaf = 16;  ///< K
  /// c in  w/n + c * sqrt(ln N / n), w/n in [0, 1]. 0.7 would be the textbook 1.4 on values
  /// in [-1, 1] and plays stronger (docs/mcts.md, "Exploration"); the default stays 1.0 until
  /// its effect on bench/run-mcts.sh's 2-thread scaling is measured.
  double exploration = 1.0;
  std::uint64_t seed = 1;           ///< the search is reproducible per seed (sequential engine)
  /// Most bytes of tree per process (0: no limit, the default for library users; seriema-hex
  /// sets one). Once a new node or edge table would need memory past it, the search goes on
  /// without growing the tree: a leaf that would be expanded is played out from as a leaf (its
  /// results still count up the tree). Checked when memory is taken in blocks, never per node.
  /// The distributed engine applies rank 0's value in every process, to the nodes it owns.
  std::uint64_t memory_budget = 0;
  /// RAVE (rapid action value estimation, Gelly & Silver 2007): each move's win rate is
  /// blended with its all-moves-as-first rate, the results of every rollout through its node in
  /// which the player to move there played it at any later point (rave_score). Needs a game
  /// whose playouts record their moves (amaf_game); the search refuses it otherwise, and with
  /// playouts_per_leaf above 32767. Adds 16 bytes per edge and, in the distributed engine, a
  /// record of 8 bytes per move index to each backpropagation call between processes.
  bool rave = false;
  /// RAVE's equivalence parameter k: a move's AMAF rate weighs beta = sqrt(k / (3n + k)) after
  /// n visits (half at n = k).
  double rave_equivalence = 1000;
  /// MCTS-solver, for games that name one-move threats (solver_game; ignored otherwise). When a
  /// node is expanded, a winning move of the player to move makes it a won node with that move
  /// as its only edge; one threat of the opponent leaves the block as the only edge; two or more
  /// make it a lost node. Proofs go up with the results: a node is won once one of its moves
  /// leads to a position won by its player, lost once all do not; lost moves are never chosen
  /// again. Rollouts reaching a decided node below the root count its result without playouts,
  /// as at the end of a game, and a decided root ends the search (search_result::proven_winner).
  bool solver = false;
  /// Game knowledge, for games that supply it (pruning_game; ignored otherwise): when a node is
  /// expanded (the root too), only the moves the game's prune() keeps become its edges, the
  /// others being provably no better (for Hex: dead and captured cells). With the solver, a
  /// position the knowledge proves decides the node as a one-move threat does. Costs one
  /// prune() per edge table. With a prior_game, also the game's move priors (prior_bias).
  bool knowledge = false;
  /// With knowledge on a prior_game: progressive bias, the weight of a move's prior (its share
  /// of its node's prior weights, in [0, 1]) in its selection score, fading with its visits:
  /// score + prior_bias * share / sqrt(visits + 1). Moves with no statistics at all (no visit,
  /// and with RAVE no all-moves-as-first result either) are tried in the order of their priors,
  /// highest first; 0 keeps only that order. A finite number in [0, 1e6] (the searches throw
  /// std::invalid_argument otherwise). Costs one priors() per edge table and 4 bytes an edge.
  double prior_bias = 1.0;
  /// Playouts a node must have had (as a leaf) before a rollout makes its edges and goes
  /// through it; until then a rollout reaching it plays out from it. 1: at its second rollout,
  /// since the rollout that creates a node plays out from it. Larger values make fewer edge
  /// tables (most nodes are reached once or twice), hence less memory per node.
  std::uint32_t expansion_visits = 1;
  /// Tree reuse between the searches of one engine object (distributed_search,
  /// sequential_engine): the tree stays after this search, and when the next search also sets
  /// reuse_tree and its root is this search's root or a position up to two moves after it
  /// (found by applying the tree's moves and comparing with the state's operator==, so the
  /// game's states must be equality-comparable: reusable_game), that subtree becomes its root
  /// with every statistic and proof below it, and the rest of the tree is freed. Otherwise (also
  /// when `rave`, `solver` or `knowledge` differ from the kept tree's) the next search starts
  /// from an empty tree. A kept tree counts against the memory budget; copying it counts in the
  /// next search's time.
  bool reuse_tree = false;
  /// Set by another thread to end the search early (a solver working beside it,
  /// search_beside_solver): read where the clock is (every 64 rollouts in the sequential
  /// engine, before rollouts start in the distributed one, rank 0's pointer only). The search
  /// ends as at its budget, after one rollout at least. Null: none.
  const std::atomic<bool>* stop = nullptr;
  /// Called now and then from the searching thread (never concurrently) with the rollouts done
  /// so far; a progress bar hangs here. May be empty.
  std::function<void(std::uint64_t rollouts_done, double seconds)> progress;
};

/// Visits and wins of one move at the root, from the point of view of the player to move there.
template <class Move>
struct move_statistics {
  Move move{};               ///< the move
  /// Playouts through this move. In the distributed search every move's visits and wins are
  /// halved together each time one move's visits reach 2^30 (detail::packed_counts; minutes of
  /// a long search on many cores), so past that they are relative: win rates and order stay.
  std::uint64_t visits = 0;
  double wins = 0;           ///< of them, won by the player to move at the root
  [[nodiscard]] double win_rate() const noexcept {  ///< wins / visits (0 without visits)
    return visits == 0 ? 0.0 : wins / static_cast<double>(visits);
  }
};

/// The order of the root's moves in a result, most convincing first: more visits, and among
/// equal visits more wins (with fewer rollouts than moves many moves have one rollout each, and
/// the first in board order would be played whatever its playouts said).
template <class Move>
[[nodiscard]] bool more_convincing(const move_statistics<Move>& a,
                                   const move_statistics<Move>& b) noexcept {
  if (a.visits != b.visits) return a.visits > b.visits;
  return a.wins > b.wins;
}

/// What a search found: the move to play, the root's statistics and what it cost.
template <class Move>
struct search_result {
  Move best{};                                 ///< the first of `moves`
  double win_rate = 0;                         ///< of `best`, for the player to move
  std::vector<move_statistics<Move>> moves;    ///< every root move tried, more_convincing first
  std::uint64_t rollouts = 0;                  ///< rollouts completed
  std::uint64_t playouts = 0;                  ///< random games played
  std::uint64_t tree_nodes = 0;                ///< nodes created (root included)
  std::uint64_t remote_calls = 0;              ///< calls between threads (distributed engine)
  double seconds = 0;                          ///< wall time of the search
  /// Tree memory at the end of the search: the sequential engine's arrays, or in the
  /// distributed engine the largest of any process's pools (the budget is per process).
  std::uint64_t tree_bytes = 0;
  /// With the solver: who wins the root with best play, once the search proved it (the search
  /// then ends early); nobody otherwise. When it is the player to move, `best` is the proven
  /// winning move, whatever its visits.
  player proven_winner = nobody;
  /// With reuse_tree: playouts through the root and nodes carried over from the previous
  /// search's tree (both 0 when the search started from an empty tree). `rollouts`,
  /// `playouts` and `tree_nodes` count this search's own work only.
  std::uint64_t reused_visits = 0;
  std::uint64_t reused_nodes = 0;  ///< see reused_visits
  std::uint64_t memory_budget = 0;             ///< search_options::memory_budget it ran with
  bool memory_budget_reached = false;          ///< in some process the tree stopped growing
  /// When the budget was first reached (0 if never): seconds into the search, and rollouts
  /// completed by then. The distributed engine knows the rollouts only where the root's
  /// process reached its own budget (0 where only other processes did; the seconds tell).
  double memory_budget_reached_seconds = 0;
  std::uint64_t memory_budget_reached_rollouts = 0;  ///< see memory_budget_reached_seconds
  [[nodiscard]] double rollouts_per_second() const noexcept {  ///< rollouts / seconds
    return seconds > 0 ? static_cast<double>(rollouts) / seconds : 0.0;
  }
};

/// UCB1 of a move with `visits` playouts of which `wins` won for the player choosing, under a
/// parent whose visit count has natural logarithm `log_parent_visits` (computed once per
/// selection, not once per move). Unvisited moves come first (infinite score).
[[nodiscard]] inline double ucb1(double wins, std::uint64_t visits, double log_parent_visits,
                                 double exploration) noexcept {
  if (visits == 0) return INFINITY;
  const double n = static_cast<double>(visits);
  return wins / n + exploration * std::sqrt(log_parent_visits / n);
}
/// The RAVE score of a move with `visits` playouts (`wins` won by the player choosing) and
/// `amaf_visits` all-moves-as-first results (`amaf_wins` won): the two win rates blended with
/// beta = sqrt(equivalence / (3 visits + equivalence)) on the AMAF rate (all of it before the
/// first visit), plus exploration * sqrt(ln N / (visits + 1)). A move with neither comes first.
[[nodiscard]] inline double rave_score(double wins, std::uint64_t visits, double amaf_wins,
                                       std::uint64_t amaf_visits, double log_parent_visits,
                                       double exploration, double equivalence) noexcept {
  if (visits == 0 && amaf_visits == 0) return INFINITY;
  const double n = static_cast<double>(visits);
  double value = visits == 0 ? 0.0 : wins / n;
  if (amaf_visits != 0) {
    const double beta = visits == 0 ? 1.0 : std::sqrt(equivalence / (3 * n + equivalence));
    value = (1 - beta) * value + beta * amaf_wins / static_cast<double>(amaf_visits);
  }
  return value + exploration * std::sqrt(std::max(log_parent_visits, 0.0) / (n + 1));
}
/// A move's selection score (ucb1 or rave_score) with its prior share (search_options::
/// prior_bias): an unvisited move (infinite score) ahead of every visited one and of
/// unvisited ones with lower priors; a visited one gains bias * prior / sqrt(visits + 1).
[[nodiscard]] inline double with_prior(double score, float prior, std::uint64_t visits,
                                       double bias) noexcept {
  constexpr double unvisited = 1e9;  // above any finite score: win rates and bias terms are small
  if (score == INFINITY) return unvisited + static_cast<double>(prior);
  return score + bias * static_cast<double>(prior) / std::sqrt(static_cast<double>(visits) + 1);
}
/// Puts `moves` in a random order (Fisher-Yates). Edges are made in this order, and selection
/// tries unvisited moves first in edge order: in board order every node's first replies would
/// always be the same cells.
template <class Move, class Random>
void shuffle_moves(std::span<Move> moves, Random& rng) noexcept {
  for (std::size_t i = moves.size(); i > 1; --i) {
    const std::size_t j = rng.below(static_cast<std::uint32_t>(i));
    std::swap(moves[i - 1], moves[j]);
  }
}

/// ln(parent_visits), the term ucb1 takes (computed once per selection).
[[nodiscard]] inline double log_visits(std::uint64_t parent_visits) noexcept {
  return std::log(static_cast<double>(parent_visits));
}

}  // namespace seriema::mcts

// distributed_search, the third step of a rollout: simulation, K random playouts from a leaf
// (or from an edge whose child had no room within the memory budget).
#pragma once

#include <seriema/mcts/distributed.hpp>

namespace seriema::mcts {

/// K playouts from the position after edge `index` of n, credited as if its child were there.
template <game G>
inline void distributed_search<G>::play_out_unstored(fabric::thread_context& me, worker& w, node* n,
                                                     std::uint32_t index) {
  state s = n->state;
  game_.apply(s, n->edges.load(std::memory_order_acquire)->moves()[index]);
  std::uint32_t points1 = 0;
  std::uint32_t points2 = 0;
  if (rave_) w.record.clear();
  const player winner = game_.winner(s);
  if (winner != nobody) {
    add_result(winner, K_, points1, points2);
  } else {
    for (std::uint32_t k = 0; k < K_; ++k) add_result(play_out(w, s), 1, points1, points2);
    w.playouts += K_;
  }
  const player proven = credit(w, n, index, points1, points2, solver_ ? winner : nobody);
  backpropagate(me, w, n, points1, points2, proven);
}

/// K random playouts from the leaf, then the result goes up.
template <game G>
inline void distributed_search<G>::simulate(fabric::thread_context& me, worker& w, node* leaf) {
  std::uint32_t points1 = 0;
  std::uint32_t points2 = 0;
  if (rave_) w.record.clear();
  if (leaf->winner != nobody) {
    add_result(leaf->winner, K_, points1, points2);
  } else {
    for (std::uint32_t k = 0; k < K_; ++k) {
      add_result(play_out(w, leaf->state), 1, points1, points2);
    }
    w.playouts += K_;
  }
  backpropagate(me, w, leaf, points1, points2, solver_ ? leaf->winner : nobody);
}

/// One playout from s, recording its moves in w.record with RAVE.
template <game G>
inline player distributed_search<G>::play_out(worker& w, const state& s) {
  if constexpr (amaf_game<G>) {
    if (rave_) return w.record.play(game_, s, w.rng);
  }
  return game_.playout(s, w.rng);
}

/// `games` results won by `winner` (nobody: drawn) in half wins of each player.
template <game G>
inline void distributed_search<G>::add_result(
    player winner, std::uint32_t games, std::uint32_t& points1, std::uint32_t& points2) noexcept {
  points1 += winner == 1 ? 2 * games : winner == nobody ? games : 0;
  points2 += winner == 2 ? 2 * games : winner == nobody ? games : 0;
}

}  // namespace seriema::mcts

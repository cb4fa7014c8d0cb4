// distributed_search, the first step of a rollout: selection from a node downward (UCB1 or
// RAVE, with virtual loss), and the edge tables and child blocks it makes on its way.
#pragma once

#include <seriema/mcts/distributed.hpp>

namespace seriema::mcts {

/// Selection from n downward, taken directly while the nodes are reachable from here.
template <game G>
inline void distributed_search<G>::select(fabric::thread_context& me, worker& w, node* n) {
  for (;;) {
    if (stays_leaf(n)) {
      simulation_queue_for(w).enqueue(n);
      return;
    }
    table* edges = edges_of(w, n);
    if (edges == nullptr) {  // no room for its edges (memory budget): n is the leaf
      note_budget_reached();
      simulation_queue_for(w).enqueue(n);
      return;
    }
    table& t = *edges;
    // The game is over here, or below the root the solver decided it: known result, K times.
    const player decided = n->parent != 0 ? t.decided.load(std::memory_order_acquire) : nobody;
    if (n->winner != nobody || t.count == 0 || decided != nobody) {
      const player result = decided != nobody ? decided : n->winner;
      std::uint32_t points1 = 0;
      std::uint32_t points2 = 0;
      add_result(result, K_, points1, points2);
      if (rave_) w.record.clear();
      backpropagate(me, w, n, points1, points2, solver_ ? result : nobody);
      return;
    }
    const std::uint32_t index = choose(n, t);
    n->visits.fetch_add(K_, std::memory_order_relaxed);  // virtual loss on the way down
    if (t.statistics()[index].add(K_, 0)) {  // its visits reached 2^30: the table's halve
      detail::packed_counts::halve_all(t.statistics(), t.count);
    }
    std::atomic<std::uint64_t>* slot = child_slot(w.pool, t, index);
    if (slot == nullptr) {  // no room for its link (memory budget): played out unstored
      note_budget_reached();
      play_out_unstored(me, w, n, index);
      return;
    }
    std::atomic<std::uint64_t>& child = *slot;
    std::uint64_t word = child.load(std::memory_order_acquire);
    for (;;) {
      if (word == 0) {
        if (child.compare_exchange_weak(word, 1, std::memory_order_acq_rel,
                                        std::memory_order_acquire)) {
          expand(me, w, n, index, t.moves()[index]);
          return;
        }
      } else if ((word & 1) != 0) {  // being created: wait at the parent for the location
        if (child.compare_exchange_weak(word, word + 2, std::memory_order_acq_rel,
                                        std::memory_order_acquire)) {
          ++w.deferred_selections;
          return;
        }
      } else {
        break;
      }
    }
    if (word == detail::unstored_child) {
      play_out_unstored(me, w, n, index);
      return;
    }
    const fabric::thread_id owner = detail::child_owner(word);
    if (!steps_directly(me, owner)) {
      send_select(me, w, owner, detail::child_address(word));
      return;
    }
    n = reinterpret_cast<node*>(detail::child_address(word));
  }
}

/// A node below the root without edges stays a leaf until it has had expansion_visits
/// playouts: K when it was created, and K per rollout that ended at it since (counted in its
/// visits here; relaxed, so two rollouts arriving together may both stay or both expand).
template <game G>
inline bool distributed_search<G>::stays_leaf(node* n) noexcept {
  if (expansion_visits_ <= K_ || n->parent == 0 || n->winner != nobody) return false;
  if (n->edges.load(std::memory_order_acquire) != nullptr) return false;
  if (K_ + n->visits.load(std::memory_order_relaxed) >= expansion_visits_) return false;
  n->visits.fetch_add(K_, std::memory_order_relaxed);
  return true;
}

/// UCB1 over the edges, with the virtual losses of selections in flight counted as visits.
template <game G>
inline std::uint32_t distributed_search<G>::choose(const node* n, const table& t) const noexcept {
  const double log_parent = log_visits(n->visits.load(std::memory_order_relaxed));
  const detail::packed_counts* statistics = t.statistics();
  const detail::packed_counts* amaf = t.amaf();
  const float* priors = t.priors();
  const std::atomic<std::uint64_t>* lost = t.lost();
  std::uint32_t best = 0;
  double best_score = -1;
  for (std::uint32_t i = 0; i < t.count; ++i) {
    if (lost != nullptr && (lost[i / 64].load(std::memory_order_relaxed) >> (i % 64) & 1)) {
      continue;  // proven lost (solver): never chosen
    }
    const auto [visits, points] = statistics[i].load();
    const double wins = 0.5 * static_cast<double>(points);
    double score = 0;
    if (rave_) {
      const auto all_moves = amaf[i].load();
      score = rave_score(wins, visits, 0.5 * static_cast<double>(all_moves.points),
                         all_moves.visits, log_parent, exploration_, rave_equivalence_);
    } else {
      score = ucb1(wins, visits, log_parent, exploration_);
    }
    if (priors != nullptr) score = with_prior(score, priors[i], visits, prior_bias_);
    if (score > best_score) {
      best_score = score;
      best = i;
      if (score == INFINITY) break;
    }
  }
  return best;
}

/// n's edge table, made by the first selection through n; null where the pool has no room
/// for it within the memory budget (never at the root: its edges are the result). What a
/// refused table took stays in the pool, unused, until the tree is released.
template <game G>
inline auto distributed_search<G>::edges_of(worker& w, node* n) -> table* {
  if (table* t = n->edges.load(std::memory_order_acquire)) return t;
  const detail::expansion made =
      detail::moves_to_search(game_, n->state, std::span<move>(w.moves), solver_, knowledge_);
  const std::size_t count = made.count;
  table* fresh = allocate_table(w.pool, count, n->parent == 0);
  if (fresh == nullptr) return nullptr;
  shuffle_moves(std::span<move>(w.moves.data(), count), w.rng);
  fresh->decided.store(made.decided, std::memory_order_relaxed);
  std::copy_n(w.moves.data(), count, fresh->moves());
  if (priors_ && count > 0) {  // a finished position's table has no moves to weigh
    detail::prior_shares(game_, n->state, std::span<const move>(w.moves.data(), count),
                         std::span<float>(fresh->priors(), count));
  }
  table* expected = nullptr;
  // A thread that loses the race leaves its table in its pool until the tree is released.
  if (!n->edges.compare_exchange_strong(expected, fresh, std::memory_order_acq_rel,
                                        std::memory_order_acquire)) {
    return expected;
  }
  return fresh;
}

/// Edge `index`'s link word in t, its child block made in `pool` (the calling thread's) when
/// absent; null where the budget has no room for the block.
template <game G>
inline std::atomic<std::uint64_t>* distributed_search<G>::child_slot(tree_pool& pool, table& t,
                                                                     std::uint32_t index) {
  return t.child_slot(index, [&pool] {
    return pool.try_allocate(sizeof(detail::child_block), alignof(detail::child_block));
  });
}

/// An edge table of `count` edges in `pool`, every statistic zero and every link empty (with
/// RAVE its AMAF statistics, with the solver its lost bits, with priors zero shares); null
/// where the pool refuses (memory budget), except for a root's table, which is always made.
template <game G>
inline auto distributed_search<G>::allocate_table(tree_pool& pool, std::size_t count,
                                                  bool root) -> table* {
  const std::size_t bytes = table::bytes(count, rave_, solver_, priors_);
  void* memory = root ? pool.allocate(bytes, alignof(table))
                      : pool.try_allocate(bytes, alignof(table));
  if (memory == nullptr) return nullptr;
  return table::create(memory, count, rave_, solver_, priors_);
}

}  // namespace seriema::mcts

// distributed_search, the fourth step of a rollout: backpropagation, the results credited to
// every edge up to the root, with the RAVE statistics and the solver's proofs.
#pragma once

#include <seriema/mcts/distributed.hpp>

namespace seriema::mcts {

/// Adds the points to every edge from `child` up to the root: directly while the parent is
/// reachable from here, by a call to its owner otherwise. `proven`: who wins at `child` by
/// the solver's proof (nobody: not known).
template <game G>
inline void distributed_search<G>::backpropagate(fabric::thread_context& me, worker& w,
                                                 const node* child, std::uint32_t points1,
                                                 std::uint32_t points2, player proven) {
  for (;;) {
    if (child->parent == 0) {
      complete_rollout(me);
      return;
    }
    const std::uint64_t parent = child->parent;
    const std::uint32_t index = child->index_in_parent;
    if (!steps_directly(me, child->parent_owner)) {
      ++w.remote_calls;
      if (rave_) {
        send_backpropagation_with_record(me, w, child->parent_owner, parent, index, points1,
                                         points2, proven);
        return;
      }
      send(me, child->parent_owner,
           [parent, index, points1, points2, proven](fabric::thread_context& target) {
             auto* self = active_;
             self->guarded(target, [&] {
               self->backpropagate_from(target, self->worker_of(target),
                                        reinterpret_cast<node*>(parent), index, points1,
                                        points2, proven);
             });
           });
      return;
    }
    child = reinterpret_cast<node*>(parent);
    proven = credit(w, const_cast<node*>(child), index, points1, points2, proven);
  }
}

/// A backpropagation arriving at the node at `parent`: credit its edge `index`, go on up.
template <game G>
inline void distributed_search<G>::backpropagate_from(
    fabric::thread_context& me, worker& w, node* parent, std::uint32_t index, std::uint32_t points1,
    std::uint32_t points2, player proven) {
  proven = credit(w, parent, index, points1, points2, proven);
  backpropagate(me, w, parent, points1, points2, proven);
}

/// With RAVE the backpropagation call carries the rollout's record (w.record), which the
/// receiving worker takes as its own before going on.
template <game G>
inline void distributed_search<G>::send_backpropagation_with_record(
    fabric::thread_context& me, worker& w, fabric::thread_id parent_owner, std::uint64_t parent,
    std::uint32_t index, std::uint32_t points1, std::uint32_t points2, player proven) {
  invoke_buffer(
      me, parent_owner,
      [parent, index, points1, points2, proven](fabric::thread_context& target,
                                        std::span<std::byte> bytes) {
        auto* self = active_;
        self->guarded(target, [&] {
          worker& tw = self->worker_of(target);
          if (!tw.record.assign(bytes)) {
            throw error(fmt::format("mcts: a RAVE record arrived with {} bytes, expected {}",
                                    bytes.size(), tw.record.bytes().size()));
          }
          self->backpropagate_from(target, tw, reinterpret_cast<node*>(parent), index,
                                   points1, points2, proven);
        });
      },
      w.record.bytes());
}

/// An edge's points count for the player who chose it: the player to move at its node. With
/// RAVE its move joins the rollout's record, and every edge of n gains the record's results.
/// With the solver, `proven` (who wins after the edge) may decide n: returns n's result if so.
template <game G>
inline player distributed_search<G>::credit(worker& w, node* n, std::uint32_t index,
                                            std::uint32_t points1, std::uint32_t points2,
                                            player proven) {
  const player chooser = game_.to_move(n->state);
  const std::uint32_t points = chooser == 1 ? points1 : points2;
  table& t = *n->edges.load(std::memory_order_acquire);
  t.statistics()[index].add_points(points);
  if constexpr (amaf_game<G>) {
    if (rave_) credit_amaf(w, t, index, chooser, points);
  }
  return solver_ ? prove(t, index, chooser, proven) : nobody;
}

/// MCTS-solver: edge `index` of table t (of a node n) leads to a position won by `proven`
/// (nobody: not known). n is won once its chooser wins after one edge, lost once every edge
/// is lost; each lost edge is counted once (its bit's fetch_or), so the step that counts the
/// last one decides n. Returns n's result once decided, for its parent's edge.
template <game G>
inline player distributed_search<G>::prove(table& t, std::uint32_t index, player chooser,
                                           player proven) {
  if (const player known = t.decided.load(std::memory_order_acquire); known != nobody) {
    return known;
  }
  if (proven == nobody) return nobody;
  if (proven != chooser) {
    const std::uint64_t bit = std::uint64_t{1} << (index % 64);
    if ((t.lost()[index / 64].fetch_or(bit, std::memory_order_relaxed) & bit) != 0) return nobody;
    if (t.lost_count.fetch_add(1, std::memory_order_acq_rel) + 1 < t.count) return nobody;
  }
  player expected = nobody;
  if (t.decided.compare_exchange_strong(expected, proven, std::memory_order_acq_rel) &&
      proven == chooser) {
    t.won_edge = index;  // only the step that decided n writes it
  }
  return t.decided.load(std::memory_order_acquire);
}

template <game G>
inline void distributed_search<G>::credit_amaf(worker& w, table& t, std::uint32_t index,
                                               player chooser,
                                               std::uint32_t points) requires amaf_game<G> {
  const move* moves = t.moves();
  detail::packed_counts* amaf = t.amaf();
  w.record.play_in_tree(game_.move_index(moves[index]), chooser, K_, points);
  bool rescale = false;
  for (std::uint32_t i = 0; i < t.count; ++i) {
    const auto move_index = static_cast<std::size_t>(game_.move_index(moves[i]));
    const std::uint32_t played = w.record.played_by(chooser, move_index);
    if (played == 0) continue;
    rescale |= amaf[i].add(played, w.record.points_of(chooser, move_index));
  }
  if (rescale) detail::packed_counts::halve_all(amaf, t.count);
}

}  // namespace seriema::mcts

// The distributed search's tree: nodes owned by threads, links that name a child's owner and
// address, per-edge statistics.
#pragma once

#include <atomic>
#include <cstdint>
#include <seriema/fabric/placement.hpp>
#include <seriema/mcts/game.hpp>
#include <seriema/mcts/search.hpp>
#include <type_traits>

namespace seriema::mcts {

namespace detail {

template <class G>
struct tree_node;

/// Where one move out of a node leads. `child` is the only word written concurrently:
///   0                  not expanded;
///   odd                being created: (child >> 1) selections are deferred on it (a
///                      selection CASes +2 onto it);
///   2 (unstored_child) the owner had no room for the child (memory budget): selections through
///                      this edge play out from the child's position without a node;
///   even, > 2          the child's address in the process of thread `owner`.
/// The creating thread CASes 0 -> 1; the child's location notice exchanges the odd word for the
/// address (release) after writing `owner`, and resumes the deferred selections it took out;
/// an owner without room sends a notice that exchanges it for unstored_child instead.
template <class G>
struct tree_link {
  static constexpr std::uint64_t unstored_child = 2;  ///< never a node's address (aligned, > 2)
  std::atomic<std::uint64_t> child{0};
  fabric::thread_id owner = 0;
  typename G::move move{};
};

/// The statistics of one move, apart from the links so that a selection's UCB1 scan touches 16
/// bytes per move (the lines other threads update). visits grow by K on the way down (the
/// virtual loss); points on the way up, in half wins of the player choosing the move (a won
/// playout is 2, a drawn one 1). Relaxed: they are statistics. 64-bit: no wrap in any search.
struct edge_statistics {
  std::atomic<std::uint64_t> visits{0};
  std::atomic<std::uint64_t> points{0};
};

/// With RAVE, the all-moves-as-first results of one move for the player choosing it: visits
/// and points (half wins) of the rollouts through its node in which that player played it
/// later. Relaxed, like edge_statistics.
struct amaf_statistics {
  std::atomic<std::uint64_t> visits{0};
  std::atomic<std::uint64_t> points{0};
};

template <class G>
struct edge_table {
  std::uint32_t count = 0;
  /// With the solver, once `decided` names the player choosing here: the edge that wins (0 for a
  /// table made decided, whose only edge is the win; else written by the step whose
  /// compare-exchange decided it, after it). Read after the search, or by a later search that
  /// keeps the node as its root (search_options::reuse_tree).
  std::uint32_t won_edge = 0;
  edge_statistics* statistics = nullptr;  ///< [count]
  tree_link<G>* links = nullptr;          ///< [count]
  amaf_statistics* amaf = nullptr;        ///< [count] with RAVE, else null
  /// With the solver: the node's result, nobody while undecided. Set when the table is made
  /// (detail::moves_to_search), before it is published, or later once by the compare-exchange of
  /// the step that proves it.
  std::atomic<player> decided{nobody};
  /// With the solver: bit i of lost[i / 64] is set (once, by fetch_or) when edge i is proven
  /// lost for the player choosing it; lost_count counts the bits set, so the step that sets the
  /// last one knows the node is lost.
  std::atomic<std::uint64_t>* lost = nullptr;
  std::atomic<std::uint32_t> lost_count{0};
  /// While a kept tree is carried into a new one (search_options::reuse_tree), in the new copy:
  /// the node's children not yet carried (written only by the owner's thread; in padding, so
  /// the table is no bigger for it). 0 otherwise.
  std::uint32_t carry_pending = 0;
};

/// A node lives in the tree_pool of the thread that created it, in the process of `owner`.
/// Everything but `visits` and `edges` is written once, before the node's address is published
/// (by a call, or the release exchange of the parent's edge).
template <class G>
struct tree_node {
  typename G::state state{};
  std::uint64_t parent = 0;  ///< the parent's address in parent_owner's process; 0 at the root
  fabric::thread_id parent_owner = 0;
  fabric::thread_id owner = 0;
  std::uint32_t index_in_parent = 0;
  player winner = nobody;  ///< the game is over here
  std::atomic<std::uint64_t> visits{0};  ///< playouts through this node, virtual ones included
  std::atomic<edge_table<G>*> edges{nullptr};  ///< created by the first selection through here
};

}  // namespace detail

}  // namespace seriema::mcts

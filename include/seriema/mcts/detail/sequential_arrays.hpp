// The sequential engine's tree as plain arrays (nodes, edges, RAVE statistics, move priors),
// and tree reuse over them: finding the next root below the kept one and copying its subtree,
// compacted, into fresh arrays (sequential_engine, search_options::reuse_tree).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <seriema/mcts/game.hpp>
#include <span>
#include <vector>

namespace seriema::mcts::detail {

/// How many nodes a subtree holds, and how many edges in its nodes' edge tables.
struct subtree_extent {
  std::uint64_t nodes = 0;
  std::uint64_t edges = 0;
};

/// A sequential tree's arrays, index-based: node 0 is the root. Owned by one sequential_tree
/// while it searches, then by the sequential_engine that keeps it for the next search.
template <game G>
struct sequential_arrays {
  using move = typename G::move;
  using state = typename G::state;
  static constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();

  /// A move out of a node. visits == 0 exactly while child == none, until the memory budget is
  /// reached: a rollout that takes an edge creates its child and adds K visits, or once there
  /// is no room for the child plays out from the child's position without storing it (the
  /// edge gains visits, child stays none). wins count for the player choosing the edge.
  struct edge {
    move m;
    bool lost;  ///< with the solver: proven lost for the player choosing it
    std::uint32_t child;
    std::uint64_t visits;
    double wins;
  };
  /// A node's edges are edges[first_edge, first_edge + edge_count), made when a rollout first
  /// passes through it (first_edge == none before): most nodes stay leaves, and a node's edges
  /// outweigh its position many times over. edge_count == 0 means the game is over there, with
  /// `winner` its result; with the solver, a node whose edges were made with `winner` set was
  /// decided then (moves_to_search), and below the root it is treated as over. visits is the
  /// sum of its edges' visits plus the playouts made at it (K when it was created, K per
  /// rollout ending at it while a leaf or when its result is known).
  struct node {
    state position;
    std::uint32_t parent;
    std::uint32_t in_edge;  ///< the parent's edge leading here
    std::uint32_t first_edge;
    std::uint32_t edge_count;
    std::uint64_t visits;
    player winner;
    std::uint32_t lost_edges;  ///< with the solver: how many of its edges are lost
  };
  /// With RAVE, the all-moves-as-first results of edges[i] (same index), for its chooser.
  struct amaf_edge {
    std::uint64_t visits;
    double wins;
  };

  std::vector<node> nodes;
  std::vector<edge> edges;
  std::vector<amaf_edge> amaf;  ///< empty without RAVE
  std::vector<float> priors;    ///< with move priors, edges[i]'s share (same index); else empty
  /// With the solver, a root won by its player to move: the edge proven to win (none: not
  /// known, or not won).
  std::uint32_t proven_root_edge = none;
  bool rave = false;       ///< the search that made the tree used RAVE (amaf is filled)
  bool solver = false;     ///< ... and the solver (edges may be pruned, proofs recorded)
  bool knowledge = false;  ///< ... and game knowledge (edges may be pruned)
  bool priors_on = false;  ///< ... and the game's move priors (priors is filled)

  /// The bytes the arrays hold (their capacity).
  [[nodiscard]] std::uint64_t bytes() const noexcept {
    return nodes.capacity() * sizeof(node) + edges.capacity() * sizeof(edge) +
           amaf.capacity() * sizeof(amaf_edge) + priors.capacity() * sizeof(float);
  }
  /// The bytes of arrays of exactly `extent`'s size (with an AMAF array when `with_rave`, a
  /// prior array when `with_priors`).
  [[nodiscard]] static std::uint64_t bytes_for(subtree_extent extent, bool with_rave,
                                               bool with_priors) noexcept {
    return extent.nodes * sizeof(node) +
           extent.edges * (sizeof(edge) + (with_rave ? sizeof(amaf_edge) : 0) +
                           (with_priors ? sizeof(float) : 0));
  }
  /// Frees the arrays (swapped with empty ones: clear() would keep their memory).
  void release() noexcept { *this = sequential_arrays{}; }
};

/// The node reached from `tree`'s root by `path` through stored children; nullopt when a move
/// is not among a node's edges (not made yet, or pruned by the solver) or leads to no node.
template <game G>
std::optional<std::uint32_t> find_subtree(const sequential_arrays<G>& tree,
                                          std::span<const typename G::move> path) {
  using arrays = sequential_arrays<G>;
  if (tree.nodes.empty()) return std::nullopt;
  std::uint32_t at = 0;
  for (const auto& m : path) {
    const auto& n = tree.nodes[at];
    if (n.first_edge == arrays::none) return std::nullopt;
    const auto first = tree.edges.begin() + n.first_edge;
    const auto taken =
        std::find_if(first, first + n.edge_count, [&](const auto& e) { return e.m == m; });
    if (taken == first + n.edge_count || taken->child == arrays::none) return std::nullopt;
    at = taken->child;
  }
  return at;
}

/// How many nodes and edges the subtree of `root` holds (its nodes with their edge tables).
template <game G>
subtree_extent subtree_size(const sequential_arrays<G>& tree, std::uint32_t root) {
  using arrays = sequential_arrays<G>;
  subtree_extent extent;
  std::vector<std::uint32_t> pending{root};
  while (!pending.empty()) {
    const auto& n = tree.nodes[pending.back()];
    pending.pop_back();
    ++extent.nodes;
    if (n.first_edge == arrays::none) continue;
    extent.edges += n.edge_count;
    for (std::uint32_t e = n.first_edge; e < n.first_edge + n.edge_count; ++e) {
      if (tree.edges[e].child != arrays::none) pending.push_back(tree.edges[e].child);
    }
  }
  return extent;
}

/// A root won by its player to move: the edge that wins (the proof came up through it). A
/// node is won either at its expansion, its only edge then being the winning move, or by a
/// proof through an edge whose child is won by the chooser, or whose position (not stored,
/// past the memory budget) the chooser has won (as backpropagation proves it: g.winner).
/// none when no edge is.
template <game G>
std::uint32_t find_won_edge(const G& g, const sequential_arrays<G>& tree) {
  using arrays = sequential_arrays<G>;
  const auto& root = tree.nodes[0];
  const player mover = g.to_move(root.position);
  if (root.winner != mover || root.first_edge == arrays::none) return arrays::none;
  for (std::uint32_t e = root.first_edge; e < root.first_edge + root.edge_count; ++e) {
    const auto& x = tree.edges[e];
    if (x.child != arrays::none) {
      if (tree.nodes[x.child].winner == mover) return e;
      continue;
    }
    auto after = root.position;
    g.apply(after, x.m);
    if (g.winner(after) == mover) return e;
  }
  return arrays::none;
}

/// Copies the subtree of `old`'s node `root` (of `size`: subtree_size) into fresh arrays,
/// breadth first: the root at index 0 with no parent, every index renumbered, every statistic
/// and proof kept (edges out of the subtree's nodes too; an edge's child exists only inside
/// it). `spare_nodes` more nodes are reserved for the next search (so that its first nodes do
/// not copy the array again). Then frees `old`. Both trees are held while it copies. An edge
/// played out without a child (past the old search's memory budget) keeps its visits and may
/// get its child in the next search, which then starts with fewer visits than its edge.
template <game G>
sequential_arrays<G> compact_subtree(const G& g, sequential_arrays<G>& old, std::uint32_t root,
                                     subtree_extent size, std::uint64_t spare_nodes) {
  using arrays = sequential_arrays<G>;
  const auto [node_count, edge_count] = size;
  arrays fresh;
  fresh.rave = old.rave;
  fresh.solver = old.solver;
  fresh.knowledge = old.knowledge;
  fresh.priors_on = old.priors_on;
  fresh.nodes.reserve(node_count + spare_nodes);
  fresh.nodes.resize(node_count);
  fresh.edges.reserve(edge_count);
  if (old.rave) fresh.amaf.reserve(edge_count);
  if (old.priors_on) fresh.priors.reserve(edge_count);
  fresh.nodes[0] = old.nodes[root];
  fresh.nodes[0].parent = arrays::none;
  fresh.nodes[0].in_edge = arrays::none;
  // Node i is written before it is visited (by its parent, earlier in breadth-first order);
  // its first_edge still names old's edges until it is visited.
  std::uint32_t next_node = 1;
  for (std::uint32_t i = 0; i < node_count; ++i) {
    auto& n = fresh.nodes[i];
    if (n.first_edge == arrays::none) continue;
    const std::uint32_t old_first = n.first_edge;
    n.first_edge = static_cast<std::uint32_t>(fresh.edges.size());
    for (std::uint32_t e = old_first; e < old_first + n.edge_count; ++e) {
      auto x = old.edges[e];
      if (old.rave) fresh.amaf.push_back(old.amaf[e]);
      if (old.priors_on) fresh.priors.push_back(old.priors[e]);
      if (x.child != arrays::none) {
        fresh.nodes[next_node] = old.nodes[x.child];
        fresh.nodes[next_node].parent = i;
        fresh.nodes[next_node].in_edge = static_cast<std::uint32_t>(fresh.edges.size());
        x.child = next_node++;
      }
      fresh.edges.push_back(x);
    }
  }
  // The same root keeps the edge its proof came through (its edges are copied first, in
  // order); another root finds one (it was decided below the old root, where none is noted).
  if (root == 0 && old.proven_root_edge != arrays::none) {
    fresh.proven_root_edge = old.proven_root_edge - old.nodes[0].first_edge;
  } else {
    fresh.proven_root_edge = find_won_edge(g, fresh);
  }
  old.release();
  return fresh;
}

}  // namespace seriema::mcts::detail

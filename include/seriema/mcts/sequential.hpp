// The sequential reference MCTS engine: one thread, one tree, UCB1 selection, one expansion and
// K random playouts per rollout. The distributed engine is measured and checked against it.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <seriema/mcts/detail/amaf.hpp>
#include <seriema/mcts/detail/solver.hpp>
#include <seriema/mcts/game.hpp>
#include <seriema/mcts/search.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace seriema::mcts {

/// Searches from `root` within the budget of `options` and returns the root statistics.
/// Reproducible: equal arguments give equal results, except where options.seconds ends it.
/// The clock is read every 64 rollouts, so a time budget ends a search after a multiple of 64
/// rollouts (at least 64). Throws std::invalid_argument without a budget, with
/// playouts_per_leaf == 0, or when the game is over in `root`.
/// With options.memory_budget, the node and edge arrays (their capacity) stay within it: they
/// grow by doubling, clamped to the budget, and once an array cannot grow the tree stops
/// growing (see search_options::memory_budget). While an array grows its old copy is held too.
/// One function on purpose (about 200 lines, the memory budget's paths included): it is the
/// baseline every MCTS benchmark divides by (bench/run-mcts.sh), so its loop stays the code
/// that was measured, and its selection, simulation and backpropagation read top to bottom as
/// the distributed search mirrors them.
template <game G>
search_result<typename G::move> sequential_search(const G& g, const typename G::state& root,
                                                  const search_options& options) {
  using move = typename G::move;
  using state = typename G::state;
  using clock = std::chrono::steady_clock;
  constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();
  constexpr std::uint64_t clock_period = 64;  ///< rollouts between readings of the clock

  if (options.rollouts == 0 && !(options.seconds > 0)) {
    throw std::invalid_argument("sequential_search: set a budget (rollouts > 0 or seconds > 0)");
  }
  if (options.playouts_per_leaf == 0) {
    throw std::invalid_argument("sequential_search: playouts_per_leaf must be at least 1");
  }
  detail::check_rave<G>(options, "sequential_search");

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
  /// decided then (detail::moves_to_search), and below the root it is treated as over. visits is
  /// the sum of its edges' visits plus the playouts made at it (K when it was created, K per
  /// rollout ending at it when its result is known or when there was no room for its edges).
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
  /// With RAVE, the all-moves-as-first results of edges[i] (same index), for the player
  /// choosing it.
  struct amaf_edge {
    std::uint64_t visits;
    double wins;
  };
  std::vector<node> nodes;
  std::vector<edge> edges;
  std::vector<amaf_edge> amaf;  // empty without RAVE
  detail::amaf_record record;   // the rollout's, with RAVE
  const bool rave = options.rave;
  if (rave) record.resize(g.max_moves());
  std::vector<move> scratch(g.max_moves());
  const std::uint64_t budget = options.memory_budget;
  if (options.rollouts != 0) {  // a quarter of the budget at most
    std::uint64_t reserved_nodes = std::min<std::uint64_t>(options.rollouts + 1, 1 << 20);
    if (budget != 0) {
      reserved_nodes = std::min<std::uint64_t>(reserved_nodes, budget / 4 / sizeof(node));
    }
    nodes.reserve(std::max<std::uint64_t>(reserved_nodes, 1));
  }
  const auto tree_bytes = [&] {
    return nodes.capacity() * sizeof(node) + edges.capacity() * sizeof(edge) +
           amaf.capacity() * sizeof(amaf_edge);
  };
  bool budget_reached = false;
  std::uint64_t budget_reached_rollouts = 0;
  double budget_reached_seconds = 0;
  // Room for `extra` more elements in `array` without passing the budget (growing it by
  // doubling, clamped to the budget); false once it cannot grow. Checked only where the
  // array is full, so not per node.
  const auto room_for = [&](auto& array, std::size_t extra) {
    if (budget == 0 || array.size() + extra <= array.capacity()) return true;
    using element = typename std::remove_reference_t<decltype(array)>::value_type;
    const std::uint64_t others = tree_bytes() - array.capacity() * sizeof(element);
    const std::uint64_t most = budget > others ? (budget - others) / sizeof(element) : 0;
    const std::uint64_t wanted =
        std::max<std::uint64_t>(array.size() + extra, 2 * array.capacity());
    if (most < array.size() + extra) return false;
    array.reserve(std::min(wanted, most));
    return true;
  };

  const auto legal_moves = [&](const state& position) {
    return static_cast<std::uint32_t>(g.legal_moves(position, std::span<move>(scratch)));
  };
  const auto add_node = [&](const state& position, std::uint32_t parent, std::uint32_t in_edge) {
    const std::uint32_t count = legal_moves(position);
    const auto index = static_cast<std::uint32_t>(nodes.size());
    nodes.push_back(node{position, parent, in_edge, none, count, 0,
                         count == 0 ? g.winner(position) : nobody, 0});
    return index;
  };
  add_node(root, none, none);  // the root and its edges whatever the budget: they are the result
  if (nodes[0].edge_count == 0) {
    throw std::invalid_argument("sequential_search: the game is over in the root position");
  }

  const unsigned k = options.playouts_per_leaf;
  const double playouts = static_cast<double>(k);
  random rng(options.seed);
  const auto start = clock::now();
  auto last_progress = start;
  const auto elapsed = [&start](clock::time_point now) {
    return std::chrono::duration<double>(now - start).count();
  };

  const auto note_budget_reached = [&](std::uint64_t rollouts_done) {
    if (budget_reached) return;
    budget_reached = true;
    budget_reached_rollouts = rollouts_done;
    budget_reached_seconds = elapsed(clock::now());
  };

  // One playout, recording its moves with RAVE.
  const auto play_out = [&](const state& position) {
    if constexpr (amaf_game<G>) {
      if (rave) return record.play(g, position, rng);
    }
    return g.playout(position, rng);
  };
  // Edge e of node `at` gains the rollout's K results for the player choosing it; with RAVE
  // its move joins the record and every edge of `at` gains the record's AMAF results.
  const auto credit = [&](std::uint32_t at, std::uint32_t e, double wins_of_first) {
    const player chooser = g.to_move(nodes[at].position);
    const double wins = chooser == 1 ? wins_of_first : playouts - wins_of_first;
    edges[e].visits += k;
    edges[e].wins += wins;
    if constexpr (amaf_game<G>) {
      if (!rave) return;
      record.play_in_tree(g.move_index(edges[e].m), chooser, k,
                          static_cast<std::uint32_t>(2 * wins + 0.5));
      const std::uint32_t first = nodes[at].first_edge;
      for (std::uint32_t f = first; f < first + nodes[at].edge_count; ++f) {
        const auto index = static_cast<std::size_t>(g.move_index(edges[f].m));
        amaf[f].visits += record.played_by(chooser, index);
        amaf[f].wins += 0.5 * record.points_of(chooser, index);
      }
    }
  };

  // MCTS-solver: edge e of node `at` leads to a position won by `proven` (nobody: not known).
  // The node is won if its chooser wins there, lost once all its edges are lost. Returns the
  // node's result if it is decided, for its parent's edge.
  std::uint32_t proven_root_edge = none;
  const auto prove = [&](std::uint32_t at, std::uint32_t e, player proven) -> player {
    node& n = nodes[at];
    if (proven == nobody || n.winner != nobody) return n.winner;
    const player chooser = g.to_move(n.position);
    if (proven == chooser) {
      n.winner = chooser;
      if (at == 0) proven_root_edge = e;
      return chooser;
    }
    if (!edges[e].lost) {
      edges[e].lost = true;
      ++n.lost_edges;
    }
    if (n.lost_edges < n.edge_count) return nobody;
    n.winner = proven;
    return proven;
  };

  std::uint64_t rollouts = 0;
  state unstored;  // the position of a child played out without a node (budget reached)
  while (options.rollouts == 0 || rollouts < options.rollouts) {
    // Selection: the best edge by UCB1 (the first unvisited one if any, edges being in random
    // order; among equal scores the first), down to an edge without a child, which is
    // expanded, or to a finished position. Past the memory budget: a node without room for its
    // edges is the leaf, and an edge without room for its child is played out from its
    // position (unstored_edge) without a node.
    std::uint32_t leaf = 0;
    std::uint32_t unstored_edge = none;
    for (;;) {
      node& n = nodes[leaf];
      if (n.edge_count == 0) break;
      if (n.first_edge == none && leaf != 0 && n.visits < options.expansion_visits) break;
      if (n.first_edge == none && leaf != 0 &&
          !(room_for(edges, n.edge_count) && (!rave || room_for(amaf, n.edge_count)))) {
        note_budget_reached(rollouts);
        break;
      }
      if (n.first_edge == none) {
        const detail::expansion made =
            detail::moves_to_search(g, n.position, std::span<move>(scratch), options.solver);
        n.edge_count = static_cast<std::uint32_t>(made.count);
        n.winner = made.decided;
        shuffle_moves(std::span<move>(scratch.data(), n.edge_count), rng);
        n.first_edge = static_cast<std::uint32_t>(edges.size());
        for (std::uint32_t i = 0; i < n.edge_count; ++i) {
          edges.push_back(edge{scratch[i], false, none, 0, 0.0});
        }
        if (rave) amaf.resize(edges.size(), amaf_edge{0, 0.0});
      }
      if (leaf != 0 && n.winner != nobody) break;  // decided by the solver: a known result
      std::uint32_t chosen = n.first_edge;
      double best_score = -std::numeric_limits<double>::infinity();
      const double log_parent = log_visits(n.visits);
      for (std::uint32_t e = n.first_edge; e < n.first_edge + n.edge_count; ++e) {
        if (edges[e].lost) continue;  // proven lost (solver): never chosen
        if (!rave && edges[e].visits == 0) {
          chosen = e;
          break;
        }
        const double score =
            rave ? rave_score(edges[e].wins, edges[e].visits, amaf[e].wins, amaf[e].visits,
                              log_parent, options.exploration, options.rave_equivalence)
                 : ucb1(edges[e].wins, edges[e].visits, log_parent, options.exploration);
        if (score > best_score) {
          best_score = score;
          chosen = e;
        }
      }
      if (edges[chosen].child == none) {
        state position = n.position;
        g.apply(position, edges[chosen].m);
        if (!room_for(nodes, 1)) {  // may move `n` when it grows the array
          note_budget_reached(rollouts);
          unstored = position;
          unstored_edge = chosen;
          break;
        }
        const std::uint32_t child = add_node(position, leaf, chosen);  // may move `n`
        edges[chosen].child = child;
        leaf = child;
        break;
      }
      leaf = edges[chosen].child;
    }

    // Simulation: K playouts from the leaf; a finished position repeats its result K times.
    // Draws (no winner) count half a win for each player. With RAVE the playouts record their
    // moves.
    if (rave) record.clear();
    const state& played_from = unstored_edge != none ? unstored : nodes[leaf].position;
    double wins_of_first = 0;
    const bool known_result = nodes[leaf].edge_count == 0 || nodes[leaf].winner != nobody;
    if (unstored_edge == none && known_result) {
      const player w = nodes[leaf].winner;
      wins_of_first = w == 1 ? playouts : w == nobody ? playouts / 2 : 0;
    } else if (unstored_edge != none && legal_moves(unstored) == 0) {
      const player w = g.winner(unstored);
      wins_of_first = w == 1 ? playouts : w == nobody ? playouts / 2 : 0;
    } else {
      for (unsigned i = 0; i < k; ++i) {
        const player w = play_out(played_from);
        wins_of_first += w == 1 ? 1.0 : w == nobody ? 0.5 : 0.0;
      }
    }

    // Backpropagation: each edge credits the player who chose it, the one to move at its tail
    // (first the unstored child's edge, as if its node were there).
    // With the solver a known result also goes up as a proof while it decides nodes.
    player proven = nobody;
    if (options.solver && unstored_edge != none) proven = g.winner(unstored);
    if (options.solver && unstored_edge == none && known_result) proven = nodes[leaf].winner;
    if (unstored_edge != none) {
      credit(leaf, unstored_edge, wins_of_first);
      proven = prove(leaf, unstored_edge, proven);
    }
    for (std::uint32_t n = leaf;;) {
      nodes[n].visits += k;
      const std::uint32_t parent = nodes[n].parent;
      if (parent == none) break;
      credit(parent, nodes[n].in_edge, wins_of_first);
      proven = prove(parent, nodes[n].in_edge, proven);
      n = parent;
    }
    ++rollouts;
    if (nodes[0].winner != nobody) break;  // the solver decided the root

    if (rollouts % clock_period == 0 && (options.seconds > 0 || options.progress)) {
      const auto now = clock::now();
      const double seconds = elapsed(now);
      if (options.seconds > 0 && seconds >= options.seconds) break;
      if (options.progress && now - last_progress >= std::chrono::milliseconds(100)) {
        options.progress(rollouts, seconds);
        last_progress = now;
      }
    }
  }

  search_result<move> result;
  const node& top = nodes[0];
  for (std::uint32_t e = top.first_edge; e < top.first_edge + top.edge_count; ++e) {
    if (edges[e].visits != 0) result.moves.push_back({edges[e].m, edges[e].visits, edges[e].wins});
  }
  std::stable_sort(result.moves.begin(), result.moves.end(), more_convincing<move>);
  result.best = result.moves.front().move;
  result.win_rate = result.moves.front().win_rate();
  result.proven_winner = top.winner;
  if (top.winner != nobody && top.winner == g.to_move(top.position)) {
    const std::uint32_t won = proven_root_edge != none ? proven_root_edge : top.first_edge;
    detail::put_proven_move_first(result, edges[won].m);
  }
  result.rollouts = rollouts;
  result.playouts = rollouts * k;
  result.tree_nodes = nodes.size();
  result.seconds = elapsed(clock::now());
  result.tree_bytes = tree_bytes();
  result.memory_budget = budget;
  result.memory_budget_reached = budget_reached;
  result.memory_budget_reached_rollouts = budget_reached_rollouts;
  result.memory_budget_reached_seconds = budget_reached_seconds;
  return result;
}

}  // namespace seriema::mcts

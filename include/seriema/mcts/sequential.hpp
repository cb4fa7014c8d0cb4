// The sequential reference MCTS engine: one thread, one tree, UCB1 selection, one expansion and
// K random playouts per rollout. The distributed engine is measured and checked against it.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <seriema/mcts/game.hpp>
#include <seriema/mcts/search.hpp>
#include <span>
#include <stdexcept>
#include <vector>

namespace seriema::mcts {

/// Searches from `root` within the budget of `options` and returns the root statistics.
/// Reproducible: equal arguments give equal results, except where options.seconds ends it.
/// The clock is read every 64 rollouts, so a time budget ends a search after a multiple of 64
/// rollouts (at least 64). Throws std::invalid_argument without a budget, with
/// playouts_per_leaf == 0, or when the game is over in `root`.
/// One function on purpose (about 150 lines): it is the baseline every MCTS benchmark divides by
/// (bench/run-mcts.sh), so its loop stays the code that was measured, and its selection,
/// simulation and backpropagation read top to bottom as the distributed search mirrors them.
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

  /// A move out of a node. visits == 0 exactly while child == none: a rollout that takes an
  /// edge creates its child and adds K visits. wins count for the player choosing the edge.
  struct edge {
    move m;
    std::uint32_t child;
    std::uint64_t visits;
    double wins;
  };
  /// A node's edges are edges[first_edge, first_edge + edge_count), made when a rollout first
  /// passes through it (first_edge == none before): most nodes stay leaves, and a node's edges
  /// outweigh its position many times over. edge_count == 0 means the game is over there, with
  /// `winner` its result. visits is the sum of its edges' visits plus the playouts made at it
  /// (K when it was created, K per rollout ending at it when the game is over there).
  struct node {
    state position;
    std::uint32_t parent;
    std::uint32_t in_edge;  ///< the parent's edge leading here
    std::uint32_t first_edge;
    std::uint32_t edge_count;
    std::uint64_t visits;
    player winner;
  };
  std::vector<node> nodes;
  std::vector<edge> edges;
  std::vector<move> scratch(g.max_moves());
  if (options.rollouts != 0) nodes.reserve(std::min<std::uint64_t>(options.rollouts + 1, 1 << 20));

  const auto legal_moves = [&](const state& position) {
    return static_cast<std::uint32_t>(g.legal_moves(position, std::span<move>(scratch)));
  };
  const auto add_node = [&](const state& position, std::uint32_t parent, std::uint32_t in_edge) {
    const std::uint32_t count = legal_moves(position);
    const auto index = static_cast<std::uint32_t>(nodes.size());
    nodes.push_back(node{position, parent, in_edge, none, count, 0,
                         count == 0 ? g.winner(position) : nobody});
    return index;
  };
  add_node(root, none, none);
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

  std::uint64_t rollouts = 0;
  while (options.rollouts == 0 || rollouts < options.rollouts) {
    // Selection: the best edge by UCB1 (the first unvisited one if any, edges being in random
    // order; among equal scores the first), down to an edge without a child, which is
    // expanded, or to a finished position.
    std::uint32_t leaf = 0;
    for (;;) {
      node& n = nodes[leaf];
      if (n.edge_count == 0) break;
      if (n.first_edge == none) {
        legal_moves(n.position);
        shuffle_moves(std::span<move>(scratch.data(), n.edge_count), rng);
        n.first_edge = static_cast<std::uint32_t>(edges.size());
        for (std::uint32_t i = 0; i < n.edge_count; ++i) {
          edges.push_back(edge{scratch[i], none, 0, 0.0});
        }
      }
      std::uint32_t chosen = n.first_edge;
      double best_score = -std::numeric_limits<double>::infinity();
      const double log_parent = log_visits(n.visits);
      for (std::uint32_t e = n.first_edge; e < n.first_edge + n.edge_count; ++e) {
        if (edges[e].visits == 0) {
          chosen = e;
          break;
        }
        const double score = ucb1(edges[e].wins, edges[e].visits, log_parent, options.exploration);
        if (score > best_score) {
          best_score = score;
          chosen = e;
        }
      }
      if (edges[chosen].child == none) {
        state position = n.position;
        g.apply(position, edges[chosen].m);
        const std::uint32_t child = add_node(position, leaf, chosen);  // may move `n`
        edges[chosen].child = child;
        leaf = child;
        break;
      }
      leaf = edges[chosen].child;
    }

    // Simulation: K playouts from the leaf; a finished position repeats its result K times.
    // Draws (no winner) count half a win for each player.
    double wins_of_first = 0;
    if (nodes[leaf].edge_count == 0) {
      const player w = nodes[leaf].winner;
      wins_of_first = w == 1 ? playouts : w == nobody ? playouts / 2 : 0;
    } else {
      for (unsigned i = 0; i < k; ++i) {
        const player w = g.playout(nodes[leaf].position, rng);
        wins_of_first += w == 1 ? 1.0 : w == nobody ? 0.5 : 0.0;
      }
    }

    // Backpropagation: each edge credits the player who chose it, the one to move at its tail.
    for (std::uint32_t n = leaf;;) {
      nodes[n].visits += k;
      const std::uint32_t parent = nodes[n].parent;
      if (parent == none) break;
      edge& e = edges[nodes[n].in_edge];
      e.visits += k;
      e.wins += g.to_move(nodes[parent].position) == 1 ? wins_of_first : playouts - wins_of_first;
      n = parent;
    }
    ++rollouts;

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
  result.rollouts = rollouts;
  result.playouts = rollouts * k;
  result.tree_nodes = nodes.size();
  result.seconds = elapsed(clock::now());
  return result;
}

}  // namespace seriema::mcts

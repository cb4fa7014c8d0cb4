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

namespace detail {

/// The sequential engine's tree and one search over it (see sequential_search). Its steps
/// (select, simulate, backpropagate) read top to bottom as the distributed search mirrors them;
/// it is the baseline every MCTS benchmark divides by (bench/run-mcts.sh).
template <game G>
class sequential_tree {
 public:
  using move = typename G::move;
  using state = typename G::state;

  sequential_tree(const G& g, const state& root, const search_options& options)
      : g_(g), options_(options), k_(options.playouts_per_leaf), rng_(options.seed) {
    if (options.rollouts == 0 && !(options.seconds > 0)) {
      throw std::invalid_argument("sequential_search: set a budget (rollouts > 0 or seconds > 0)");
    }
    if (options.playouts_per_leaf == 0) {
      throw std::invalid_argument("sequential_search: playouts_per_leaf must be at least 1");
    }
    check_rave<G>(options, "sequential_search");
    if (options.rave) record_.resize(g.max_moves());
    scratch_.resize(g.max_moves());
    if (options.rollouts != 0) {  // a quarter of the budget at most
      std::uint64_t reserved_nodes = std::min<std::uint64_t>(options.rollouts + 1, 1 << 20);
      if (options.memory_budget != 0) {
        reserved_nodes =
            std::min<std::uint64_t>(reserved_nodes, options.memory_budget / 4 / sizeof(node));
      }
      nodes_.reserve(std::max<std::uint64_t>(reserved_nodes, 1));
    }
    add_node(root, none, none);  // the root and its edges whatever the budget: the result
    if (nodes_[0].edge_count == 0) {
      throw std::invalid_argument("sequential_search: the game is over in the root position");
    }
  }

  /// Rollouts until the budget, the clock (read every 64 rollouts) or a proof of the root ends
  /// the search.
  search_result<move> run() {
    constexpr std::uint64_t clock_period = 64;  // rollouts between readings of the clock
    start_ = clock::now();
    auto last_progress = start_;
    while (options_.rollouts == 0 || rollouts_ < options_.rollouts) {
      std::uint32_t unstored_edge = none;
      const std::uint32_t leaf = select(unstored_edge);
      const double wins_of_first = simulate(leaf, unstored_edge);
      backpropagate(leaf, unstored_edge, wins_of_first);
      ++rollouts_;
      if (nodes_[0].winner != nobody) break;  // the solver decided the root
      if (rollouts_ % clock_period == 0 && (options_.seconds > 0 || options_.progress)) {
        const auto now = clock::now();
        const double seconds = elapsed(now);
        if (options_.seconds > 0 && seconds >= options_.seconds) break;
        if (options_.progress && now - last_progress >= std::chrono::milliseconds(100)) {
          options_.progress(rollouts_, seconds);
          last_progress = now;
        }
      }
    }
    return result();
  }

 private:
  using clock = std::chrono::steady_clock;
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
  /// A node's edges are edges_[first_edge, first_edge + edge_count), made when a rollout first
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
  /// With RAVE, the all-moves-as-first results of edges_[i] (same index), for its chooser.
  struct amaf_edge {
    std::uint64_t visits;
    double wins;
  };

  // ---- selection ----

  /// From the root, the best edge by its score down to an edge without a child, which is
  /// expanded (the new node is the leaf), or to a node whose result is known or that stays a
  /// leaf (expansion_visits, or no room for its edges). An edge without room for its child is
  /// played out from its position without a node: `unstored_edge` names it (its tail is the
  /// returned node) and unstored_ holds the position.
  std::uint32_t select(std::uint32_t& unstored_edge) {
    std::uint32_t at = 0;
    for (;;) {
      node& n = nodes_[at];
      if (n.edge_count == 0) return at;
      if (n.first_edge == none && at != 0 && !may_make_edges(n)) return at;
      if (n.first_edge == none) make_edges(n);
      if (at != 0 && n.winner != nobody) return at;  // decided by the solver: a known result
      const std::uint32_t chosen = choose(n);
      if (edges_[chosen].child != none) {
        at = edges_[chosen].child;
        continue;
      }
      state position = n.position;
      g_.apply(position, edges_[chosen].m);
      if (!room_for(nodes_, 1)) {  // may move `n` when it grows the array
        note_budget_reached();
        unstored_ = position;
        unstored_edge = chosen;
        return at;
      }
      const std::uint32_t child = add_node(position, at, chosen);  // may move `n`
      edges_[chosen].child = child;
      return child;
    }
  }
  /// Whether n (below the root, without edges) gets its edges now: it had its expansion_visits
  /// playouts as a leaf, and the arrays have room for them within the memory budget.
  bool may_make_edges(const node& n) {
    if (n.visits < options_.expansion_visits) return false;
    if (room_for(edges_, n.edge_count) && (!options_.rave || room_for(amaf_, n.edge_count))) {
      return true;
    }
    note_budget_reached();
    return false;
  }
  /// n's edges, in random order (selection takes the first unvisited one): only the decisive
  /// moves with the solver (moves_to_search), which may decide n.
  void make_edges(node& n) {
    const expansion made =
        moves_to_search(g_, n.position, std::span<move>(scratch_), options_.solver);
    n.edge_count = static_cast<std::uint32_t>(made.count);
    n.winner = made.decided;
    shuffle_moves(std::span<move>(scratch_.data(), n.edge_count), rng_);
    n.first_edge = static_cast<std::uint32_t>(edges_.size());
    for (std::uint32_t i = 0; i < n.edge_count; ++i) {
      edges_.push_back(edge{scratch_[i], false, none, 0, 0.0});
    }
    if (options_.rave) amaf_.resize(edges_.size(), amaf_edge{0, 0.0});
  }
  /// UCB1 (the first unvisited edge if any), or with RAVE rave_score; among equal scores the
  /// first; never an edge the solver proved lost.
  std::uint32_t choose(const node& n) const {
    std::uint32_t chosen = n.first_edge;
    double best_score = -std::numeric_limits<double>::infinity();
    const double log_parent = log_visits(n.visits);
    for (std::uint32_t e = n.first_edge; e < n.first_edge + n.edge_count; ++e) {
      if (edges_[e].lost) continue;
      if (!options_.rave && edges_[e].visits == 0) return e;
      const double score =
          options_.rave
              ? rave_score(edges_[e].wins, edges_[e].visits, amaf_[e].wins, amaf_[e].visits,
                           log_parent, options_.exploration, options_.rave_equivalence)
              : ucb1(edges_[e].wins, edges_[e].visits, log_parent, options_.exploration);
      if (score > best_score) {
        best_score = score;
        chosen = e;
      }
    }
    return chosen;
  }

  // ---- simulation ----

  /// K playouts from the leaf (or the unstored child's position), recording their moves with
  /// RAVE; a known result counts K times. Returns player 1's wins (a draw is half of one).
  double simulate(std::uint32_t leaf, std::uint32_t unstored_edge) {
    if (options_.rave) record_.clear();
    const double playouts = static_cast<double>(k_);
    const auto known = [&](player w) { return w == 1 ? playouts : w == nobody ? playouts / 2 : 0; };
    if (unstored_edge == none && known_result(leaf)) return known(nodes_[leaf].winner);
    if (unstored_edge != none && legal_moves(unstored_) == 0) return known(g_.winner(unstored_));
    const state& from = unstored_edge != none ? unstored_ : nodes_[leaf].position;
    double wins_of_first = 0;
    for (unsigned i = 0; i < k_; ++i) {
      const player w = play_out(from);
      wins_of_first += w == 1 ? 1.0 : w == nobody ? 0.5 : 0.0;
    }
    return wins_of_first;
  }
  bool known_result(std::uint32_t at) const {
    return nodes_[at].edge_count == 0 || nodes_[at].winner != nobody;
  }
  player play_out(const state& position) {
    if constexpr (amaf_game<G>) {
      if (options_.rave) return record_.play(g_, position, rng_);
    }
    return g_.playout(position, rng_);
  }

  // ---- backpropagation ----

  /// Each edge from the leaf (first the unstored child's edge, as if its node were there) up
  /// to the root credits the player who chose it; with the solver a known result goes up as a
  /// proof while it decides nodes.
  void backpropagate(std::uint32_t leaf, std::uint32_t unstored_edge, double wins_of_first) {
    player proven = nobody;
    if (options_.solver) {
      if (unstored_edge != none) proven = g_.winner(unstored_);
      if (unstored_edge == none && known_result(leaf)) proven = nodes_[leaf].winner;
    }
    if (unstored_edge != none) {
      credit(leaf, unstored_edge, wins_of_first);
      proven = prove(leaf, unstored_edge, proven);
    }
    for (std::uint32_t n = leaf;;) {
      nodes_[n].visits += k_;
      const std::uint32_t parent = nodes_[n].parent;
      if (parent == none) return;
      credit(parent, nodes_[n].in_edge, wins_of_first);
      proven = prove(parent, nodes_[n].in_edge, proven);
      n = parent;
    }
  }
  /// Edge e of node `at` gains the rollout's K results for the player choosing it; with RAVE
  /// its move joins the record and every edge of `at` gains the record's AMAF results.
  void credit(std::uint32_t at, std::uint32_t e, double wins_of_first) {
    const player chooser = g_.to_move(nodes_[at].position);
    const double wins = chooser == 1 ? wins_of_first : static_cast<double>(k_) - wins_of_first;
    edges_[e].visits += k_;
    edges_[e].wins += wins;
    if constexpr (amaf_game<G>) {
      if (!options_.rave) return;
      record_.play_in_tree(g_.move_index(edges_[e].m), chooser, k_,
                           static_cast<std::uint32_t>(2 * wins + 0.5));
      const std::uint32_t first = nodes_[at].first_edge;
      for (std::uint32_t f = first; f < first + nodes_[at].edge_count; ++f) {
        const auto index = static_cast<std::size_t>(g_.move_index(edges_[f].m));
        amaf_[f].visits += record_.played_by(chooser, index);
        amaf_[f].wins += 0.5 * record_.points_of(chooser, index);
      }
    }
  }
  /// MCTS-solver: edge e of node `at` leads to a position won by `proven` (nobody: not known).
  /// The node is won if its chooser wins there, lost once all its edges are lost. Returns the
  /// node's result if it is decided, for its parent's edge.
  player prove(std::uint32_t at, std::uint32_t e, player proven) {
    node& n = nodes_[at];
    if (proven == nobody || n.winner != nobody) return n.winner;
    const player chooser = g_.to_move(n.position);
    if (proven == chooser) {
      n.winner = chooser;
      if (at == 0) proven_root_edge_ = e;
      return chooser;
    }
    if (!edges_[e].lost) {
      edges_[e].lost = true;
      ++n.lost_edges;
    }
    if (n.lost_edges < n.edge_count) return nobody;
    n.winner = proven;
    return proven;
  }

  // ---- the tree's arrays and the result ----

  std::uint32_t legal_moves(const state& position) {
    return static_cast<std::uint32_t>(g_.legal_moves(position, std::span<move>(scratch_)));
  }
  std::uint32_t add_node(const state& position, std::uint32_t parent, std::uint32_t in_edge) {
    const std::uint32_t count = legal_moves(position);
    const auto index = static_cast<std::uint32_t>(nodes_.size());
    nodes_.push_back(node{position, parent, in_edge, none, count, 0,
                          count == 0 ? g_.winner(position) : nobody, 0});
    return index;
  }
  std::uint64_t tree_bytes() const {
    return nodes_.capacity() * sizeof(node) + edges_.capacity() * sizeof(edge) +
           amaf_.capacity() * sizeof(amaf_edge);
  }
  /// Room for `extra` more elements in `array` without passing the budget (growing it by
  /// doubling, clamped to the budget); false once it cannot grow. Checked only where the array
  /// is full, so not per node. While an array grows its old copy is held too.
  template <class Array>
  bool room_for(Array& array, std::size_t extra) {
    const std::uint64_t budget = options_.memory_budget;
    if (budget == 0 || array.size() + extra <= array.capacity()) return true;
    using element = typename Array::value_type;
    const std::uint64_t others = tree_bytes() - array.capacity() * sizeof(element);
    const std::uint64_t most = budget > others ? (budget - others) / sizeof(element) : 0;
    const std::uint64_t wanted =
        std::max<std::uint64_t>(array.size() + extra, 2 * array.capacity());
    if (most < array.size() + extra) return false;
    array.reserve(std::min(wanted, most));
    return true;
  }
  void note_budget_reached() {
    if (budget_reached_) return;
    budget_reached_ = true;
    budget_reached_rollouts_ = rollouts_;
    budget_reached_seconds_ = elapsed(clock::now());
  }
  double elapsed(clock::time_point now) const {
    return std::chrono::duration<double>(now - start_).count();
  }

  search_result<move> result() const {
    search_result<move> result;
    const node& top = nodes_[0];
    for (std::uint32_t e = top.first_edge; e < top.first_edge + top.edge_count; ++e) {
      const edge& x = edges_[e];
      if (x.visits != 0) result.moves.push_back({x.m, x.visits, x.wins});
    }
    std::stable_sort(result.moves.begin(), result.moves.end(), more_convincing<move>);
    result.best = result.moves.front().move;
    result.win_rate = result.moves.front().win_rate();
    result.proven_winner = top.winner;
    if (top.winner != nobody && top.winner == g_.to_move(top.position)) {
      const std::uint32_t won = proven_root_edge_ != none ? proven_root_edge_ : top.first_edge;
      put_proven_move_first(result, edges_[won].m);
    }
    result.rollouts = rollouts_;
    result.playouts = rollouts_ * k_;
    result.tree_nodes = nodes_.size();
    result.seconds = elapsed(clock::now());
    result.tree_bytes = tree_bytes();
    result.memory_budget = options_.memory_budget;
    result.memory_budget_reached = budget_reached_;
    result.memory_budget_reached_rollouts = budget_reached_rollouts_;
    result.memory_budget_reached_seconds = budget_reached_seconds_;
    return result;
  }

  const G& g_;
  const search_options& options_;
  const unsigned k_;
  random rng_;
  std::vector<node> nodes_;
  std::vector<edge> edges_;
  std::vector<amaf_edge> amaf_;  // empty without RAVE
  amaf_record record_;           // the rollout's, with RAVE
  std::vector<move> scratch_;
  state unstored_{};  // the position of a child played out without a node (budget reached)
  std::uint32_t proven_root_edge_ = none;
  std::uint64_t rollouts_ = 0;
  clock::time_point start_ = clock::now();
  bool budget_reached_ = false;
  std::uint64_t budget_reached_rollouts_ = 0;
  double budget_reached_seconds_ = 0;
};

}  // namespace detail

/// Searches from `root` within the budget of `options` and returns the root statistics.
/// Reproducible: equal arguments give equal results, except where options.seconds ends it.
/// The clock is read every 64 rollouts, so a time budget ends a search after a multiple of 64
/// rollouts (at least 64). Throws std::invalid_argument without a budget, with
/// playouts_per_leaf == 0, for RAVE the game cannot serve, or when the game is over in `root`.
/// With options.memory_budget, the node and edge arrays (their capacity) stay within it: they
/// grow by doubling, clamped to the budget, and once an array cannot grow the tree stops
/// growing (see search_options::memory_budget). While an array grows its old copy is held too.
template <game G>
search_result<typename G::move> sequential_search(const G& g, const typename G::state& root,
                                                  const search_options& options) {
  return detail::sequential_tree<G>(g, root, options).run();
}

}  // namespace seriema::mcts

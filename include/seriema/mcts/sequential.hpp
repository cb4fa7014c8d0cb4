// The sequential reference MCTS engine: one thread, one tree, UCB1 selection, one expansion and
// K random playouts per rollout. The distributed engine is measured and checked against it.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <seriema/mcts/detail/amaf.hpp>
#include <seriema/mcts/detail/reuse.hpp>
#include <seriema/mcts/detail/sequential_arrays.hpp>
#include <seriema/mcts/detail/solver.hpp>
#include <seriema/mcts/game.hpp>
#include <seriema/mcts/search.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
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

  /// A search from `root`, in a new tree or, when `carried` holds one (whose root position is
  /// `root`: compact_subtree's result), in that one. `engine` names the caller in errors.
  sequential_tree(const G& g, const state& root, const search_options& options,
                  sequential_arrays<G> carried = {}, const char* engine = "sequential_search")
      : g_(g),
        options_(options),
        k_(options.playouts_per_leaf),
        rng_(options.seed),
        priors_on_(uses_priors(g, options.knowledge)) {
    check_options(options, engine);
    if (options.rave) record_.resize(g.max_moves());
    scratch_.resize(g.max_moves());
    if (carried.nodes.empty()) {
      start_tree(root);
    } else {
      adopt_tree(root, std::move(carried));
    }
    if (nodes_[0].edge_count == 0) {
      throw std::invalid_argument(std::string(engine) +
                                  ": the game is over in the root position");
    }
  }

  /// Throws std::invalid_argument, naming `engine`, for options no search can run with.
  static void check_options(const search_options& options, const char* engine) {
    const std::string name(engine);
    if (options.rollouts == 0 && !(options.seconds > 0)) {
      throw std::invalid_argument(name + ": set a budget (rollouts > 0 or seconds > 0)");
    }
    if (options.playouts_per_leaf == 0) {
      throw std::invalid_argument(name + ": playouts_per_leaf must be at least 1");
    }
    check_rave<G>(options, engine);
    check_prior_bias(options, engine);
  }
  /// Nodes a new tree reserves for a search with `options` (0: none): one per rollout, at
  /// most 2^20 and a quarter of the memory budget, so that most searches never copy the array.
  static std::uint64_t nodes_to_reserve(const search_options& options) {
    if (options.rollouts == 0) return 0;
    std::uint64_t reserved_nodes = std::min<std::uint64_t>(options.rollouts + 1, 1 << 20);
    if (options.memory_budget != 0) {
      reserved_nodes =
          std::min<std::uint64_t>(reserved_nodes, options.memory_budget / 4 / sizeof(node));
    }
    return std::max<std::uint64_t>(reserved_nodes, 1);
  }
  /// Whether a tree searched with `options` can be carried into a search of g with `next`: the
  /// same kind of edges (the solver and knowledge prune them) and statistics (RAVE's, priors).
  static bool same_kind_of_tree(const G& g, const sequential_arrays<G>& tree,
                                const search_options& next) {
    return tree.rave == next.rave && tree.solver == (next.solver && solver_game<G>) &&
           tree.knowledge == (next.knowledge && pruning_game<G>) &&
           tree.priors_on == uses_priors(g, next.knowledge);
  }

  /// The tree's arrays, for the next search (sequential_engine); the tree is empty after.
  sequential_arrays<G> take_arrays() {
    sequential_arrays<G> taken;
    taken.nodes = std::move(nodes_);
    taken.edges = std::move(edges_);
    taken.amaf = std::move(amaf_);
    taken.priors = std::move(priors_);
    taken.proven_root_edge = proven_root_edge_;
    taken.rave = options_.rave;
    taken.solver = options_.solver && solver_game<G>;
    taken.knowledge = options_.knowledge && pruning_game<G>;
    taken.priors_on = priors_on_;
    return taken;
  }

  /// Rollouts until the budget, the clock or the stop flag (read every 64 rollouts) or a proof
  /// of the root ends the search.
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
      if (rollouts_ % clock_period != 0) continue;
      if (options_.stop != nullptr && options_.stop->load(std::memory_order_relaxed)) break;
      if (options_.seconds > 0 || options_.progress) {
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
  static constexpr std::uint32_t none = sequential_arrays<G>::none;

  using arrays = sequential_arrays<G>;
  using edge = typename arrays::edge;
  using node = typename arrays::node;
  using amaf_edge = typename arrays::amaf_edge;

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
    if (room_for_edges(n.edge_count)) return true;
    note_budget_reached();
    return false;
  }
  /// n's edges, in random order (selection takes the first unvisited one, or with priors the
  /// unvisited one of highest prior): only the decisive moves with the solver, those knowledge
  /// keeps with it (moves_to_search); either may decide n.
  void make_edges(node& n) {
    const expansion made =
        moves_to_search(g_, n.position, std::span<move>(scratch_), options_.solver,
                        options_.knowledge);
    n.edge_count = static_cast<std::uint32_t>(made.count);
    n.winner = made.decided;
    shuffle_moves(std::span<move>(scratch_.data(), n.edge_count), rng_);
    n.first_edge = static_cast<std::uint32_t>(edges_.size());
    for (std::uint32_t i = 0; i < n.edge_count; ++i) {
      edges_.push_back(edge{scratch_[i], false, none, 0, 0.0});
    }
    if (options_.rave) amaf_.resize(edges_.size(), amaf_edge{0, 0.0});
    if (priors_on_) {
      priors_.resize(edges_.size());
      prior_shares(g_, n.position, std::span<const move>(scratch_.data(), n.edge_count),
                   std::span<float>(priors_.data() + n.first_edge, n.edge_count));
    }
  }
  /// UCB1 (the first unvisited edge if any), or with RAVE rave_score, each with_prior when the
  /// game gives priors; among equal scores the first; never an edge the solver proved lost.
  std::uint32_t choose(const node& n) const {
    std::uint32_t chosen = n.first_edge;
    double best_score = -std::numeric_limits<double>::infinity();
    const double log_parent = log_visits(n.visits);
    for (std::uint32_t e = n.first_edge; e < n.first_edge + n.edge_count; ++e) {
      if (edges_[e].lost) continue;
      if (!options_.rave && !priors_on_ && edges_[e].visits == 0) return e;
      double score =
          options_.rave
              ? rave_score(edges_[e].wins, edges_[e].visits, amaf_[e].wins, amaf_[e].visits,
                           log_parent, options_.exploration, options_.rave_equivalence)
              : ucb1(edges_[e].wins, edges_[e].visits, log_parent, options_.exploration);
      if (priors_on_) score = with_prior(score, priors_[e], edges_[e].visits, options_.prior_bias);
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

  /// A new tree: the root and its edges whatever the budget (they are the result).
  void start_tree(const state& root) {
    if (const std::uint64_t reserved = nodes_to_reserve(options_); reserved != 0) {
      nodes_.reserve(reserved);
    }
    add_node(root, none, none);
  }
  /// A carried tree: its statistics count as the reused part of the result, its nodes not as
  /// this search's. The root takes the caller's `root` (equal to its own position, but a game
  /// may keep what operator== ignores, as Hex's last move).
  void adopt_tree(const state& root, sequential_arrays<G> carried) {
    nodes_ = std::move(carried.nodes);
    edges_ = std::move(carried.edges);
    amaf_ = std::move(carried.amaf);
    priors_ = std::move(carried.priors);
    proven_root_edge_ = carried.proven_root_edge;
    nodes_[0].position = root;
    reused_nodes_ = nodes_.size();
    reused_visits_ = nodes_[0].visits;
  }

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
           amaf_.capacity() * sizeof(amaf_edge) + priors_.capacity() * sizeof(float);
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
  /// Room for `extra` more edges in the edge arrays (edges_, and amaf_ and priors_ where they
  /// are filled: parallel, one element an edge) without passing the budget. They grow
  /// together, by doubling clamped to the budget, to one capacity: grown one by one, the first
  /// would take the room the others need.
  bool room_for_edges(std::size_t extra) {
    const std::uint64_t budget = options_.memory_budget;
    const std::size_t needed = edges_.size() + extra;
    if (budget == 0 || needed <= edges_.capacity()) return true;
    const std::uint64_t per_edge = sizeof(edge) + (options_.rave ? sizeof(amaf_edge) : 0) +
                                   (priors_on_ ? sizeof(float) : 0);
    const std::uint64_t edge_bytes = edges_.capacity() * sizeof(edge) +
                                     amaf_.capacity() * sizeof(amaf_edge) +
                                     priors_.capacity() * sizeof(float);
    const std::uint64_t others = tree_bytes() - edge_bytes;
    const std::uint64_t most = budget > others ? (budget - others) / per_edge : 0;
    if (most < needed) return false;
    const std::uint64_t capacity =
        std::min(std::max<std::uint64_t>(needed, 2 * edges_.capacity()), most);
    edges_.reserve(capacity);
    if (options_.rave) amaf_.reserve(capacity);
    if (priors_on_) priors_.reserve(capacity);
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
    result.tree_nodes = nodes_.size() - reused_nodes_;
    result.reused_visits = reused_visits_;
    result.reused_nodes = reused_nodes_;
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
  const bool priors_on_;         // uses_priors(g, knowledge): priors_ is filled
  std::vector<float> priors_;    // edges_[i]'s prior share (same index), with priors
  std::vector<move> scratch_;
  state unstored_{};  // the position of a child played out without a node (budget reached)
  std::uint32_t proven_root_edge_ = none;
  std::uint64_t reused_nodes_ = 0;   // carried from the previous search (adopt_tree)
  std::uint64_t reused_visits_ = 0;  // the carried root's visits then
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
/// playouts_per_leaf == 0, for RAVE the game cannot serve, for a prior_bias outside
/// [0, 1e6], or when the game is over in `root`; std::logic_error when the game's prune() or
/// priors() break their contracts.
/// With options.memory_budget, the node and edge arrays (their capacity) stay within it: they
/// grow by doubling, clamped to the budget, and once an array cannot grow the tree stops
/// growing (see search_options::memory_budget). While an array grows its old copy is held too.
/// Ignores reuse_tree (nothing outlives the call): sequential_engine keeps trees.
template <game G>
search_result<typename G::move> sequential_search(const G& g, const typename G::state& root,
                                                  const search_options& options) {
  return detail::sequential_tree<G>(g, root, options).run();
}

/// The sequential search as an object that can keep its tree between searches
/// (search_options::reuse_tree): each search() is sequential_search() on its game (the same
/// result for the same arguments when no tree is carried), and with reuse_tree the tree stays
/// after it. The next search with reuse_tree whose root is the kept root or up to two moves
/// after it (detail::moves_between), reached through nodes the tree holds, starts from that
/// node's subtree with every statistic below it (visits, wins, RAVE's, the solver's proofs and
/// lost moves): the subtree is copied breadth first into arrays of its exact size (plus the
/// nodes a new tree reserves for its rollouts) and the old tree is freed, so the subtree is all
/// the memory kept. Both are held while it copies. The tree is not carried, and the search
/// starts from an empty tree (the old one freed, result.reused_nodes == 0), when the next
/// search does not set reuse_tree, when its root is not found that way, when its rave, solver
/// or knowledge setting, or its game's priors, differ from the kept tree's (the edges and
/// statistics would not match), or
/// when the subtree alone would take more than its memory_budget (the copy counts against the
/// budget, and the whole subtree or none of it is kept: a subtree over the budget is dropped
/// and the search starts afresh within the budget). The search's rollouts, playouts and
/// tree_nodes count its own work (its rollout budget too), reused_visits (the carried root's
/// visits) and reused_nodes the carried part.
/// Throws as sequential_search, and std::invalid_argument for reuse_tree on a game whose
/// states do not compare equal (reusable_game). A search that throws keeps no tree.
/// Thread-safety: one thread at a time per engine.
template <game G>
class sequential_engine {
 public:
  using move = typename G::move;    ///< the game's move
  using state = typename G::state;  ///< the game's position

  /// An engine searching `g` (a copy: the engine holds its own).
  explicit sequential_engine(G g) : game_(std::move(g)) {}

  /// Searches from `root` within the budget of `options` (see the class comment and
  /// sequential_search), in the kept subtree when one is carried.
  search_result<move> search(const state& root, const search_options& options) {
    arrays kept = std::exchange(kept_, arrays{});  // a search that throws keeps no tree
    tree_type::check_options(options, "sequential_engine");
    detail::check_reuse<G>(options, "sequential_engine");
    tree_type tree(game_, root, options, carry_over(std::move(kept), root, options),
                   "sequential_engine");
    search_result<move> result = tree.run();
    if (options.reuse_tree) kept_ = tree.take_arrays();
    return result;
  }
  /// Frees the kept tree: the next search starts from an empty one.
  void release_tree() noexcept { kept_.release(); }
  /// The game searched (as distributed_search::game()).
  [[nodiscard]] const G& game() const noexcept { return game_; }
  /// The bytes the kept tree holds (its arrays' capacity; 0 when none is kept).
  [[nodiscard]] std::uint64_t kept_tree_bytes() const noexcept { return kept_.bytes(); }

 private:
  using arrays = detail::sequential_arrays<G>;
  using tree_type = detail::sequential_tree<G>;

  /// The subtree of `kept` for a search from `root` with `options`, compacted, or an empty
  /// tree; `kept` is freed either way.
  arrays carry_over(arrays kept, const state& root, const search_options& options) {
    if (!options.reuse_tree || kept.nodes.empty() ||
        !tree_type::same_kind_of_tree(game_, kept, options)) {
      return {};
    }
    const auto path = detail::moves_between(game_, kept.nodes[0].position, root);
    if (!path) return {};
    const auto at = detail::find_subtree(kept, std::span<const move>(*path));
    if (!at) return {};
    const auto size = detail::subtree_size(kept, *at);
    const std::uint64_t bytes = arrays::bytes_for(size, options.rave, kept.priors_on);
    const std::uint64_t budget = options.memory_budget;
    if (budget != 0 && bytes > budget) return {};
    std::uint64_t spare = tree_type::nodes_to_reserve(options);
    if (budget != 0) spare = std::min(spare, (budget - bytes) / sizeof(typename arrays::node));
    return detail::compact_subtree(game_, kept, *at, size, spare);
  }

  G game_;
  arrays kept_;  // empty when no tree is kept
};

}  // namespace seriema::mcts

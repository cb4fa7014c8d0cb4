// Distributed tree-parallel MCTS (paper §5.3) over any seriema::mcts::game: one search tree
// whose nodes are owned by the threads of every process, grown and walked by remote calls.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <concurrentqueue/concurrentqueue.h>
#include <cstdint>
#include <cstring>
#include <fmt/format.h>
#include <functional>
#include <memory>
#include <mutex>
#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/invoke.hpp>
#include <seriema/mcts/detail/amaf.hpp>
#include <seriema/mcts/detail/carry.hpp>
#include <seriema/mcts/detail/command.hpp>
#include <seriema/mcts/detail/reuse.hpp>
#include <seriema/mcts/detail/solver.hpp>
#include <seriema/mcts/detail/tree.hpp>
#include <seriema/mcts/game.hpp>
#include <seriema/mcts/search.hpp>
#include <seriema/mcts/tree_memory.hpp>
#include <seriema/base/error.hpp>
#include <span>
#include <string>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace seriema::mcts {

/// Which thread owns a new node: uniformly random (the paper), or the thread the position's
/// hash names (needs G::hash; Zobrist partitioning).
enum class node_placement : std::uint8_t { random, hashed };

/// How a distributed search spreads and moves its tree.
struct distributed_options {
  /// Every step of a rollout (select, create, locate, backpropagate) is a remote call to the
  /// owner of the node it touches, even inside a process and even to the calling thread itself.
  /// Otherwise a step to a node of this process is taken directly in shared memory.
  bool remote_only = false;
  /// How the framework's calls travel (channel::trad batches them and is published at the end
  /// of each scheduling round of the sending thread).
  invoke::channel channel = invoke::channel::trad;
  /// At most this many rollouts started and not yet backpropagated to the root; 0: 16 per
  /// thread of the job. More keeps every thread busy; fewer keeps virtual losses small.
  std::uint32_t rollouts_in_flight = 0;
  node_placement placement = node_placement::random;  ///< which thread owns a new node
};

/// What the last search did, summed over every process.
struct distributed_counters {
  std::uint64_t nodes_created = 0;        ///< root included
  std::uint64_t remote_calls = 0;         ///< calls the framework sent between threads
  std::uint64_t deferred_selections = 0;  ///< selections that waited for a child's location
  std::uint64_t playouts = 0;             ///< random games played
  std::uint64_t tree_bytes_allocated = 0; ///< node memory taken during the search
  std::uint64_t tree_bytes_live = 0;      ///< after the search: 0 once the tree was freed
};

/// One search tree over every thread of the job (paper §5.3): nodes are owned by threads of
/// every process, and each step of a rollout (select, create, locate, backpropagate) is a call
/// to the owner of the node it touches. Every rank calls search() together, or rank 0 calls
/// search() and close() while the others serve(). Errors: seriema::error when a process fails
/// or a deadline passes.
/// Thread-safety: search(), serve() and close() from the main thread, collectively (see each).
/// One distributed_search per game type searches at a time in a process.
template <game G>
class distributed_search {
 public:
  using state = typename G::state;  ///< the game's position type
  using move = typename G::move;    ///< the game's move type

  /// Every process passes the same game (configuration identical everywhere).
  distributed_search(fabric::runtime& rt, const G& game, distributed_options options = {})
      : rt_(rt), game_(game), options_(options) {
    if (options_.placement == node_placement::hashed && !hashed_game<G>) {
      throw std::invalid_argument("node_placement::hashed needs a game with a hash(state)");
    }
    if (rt_.placement().thread_count() > detail::max_link_threads) {
      throw std::invalid_argument(fmt::format(
          "distributed_search: a tree link names one of at most {} threads; the job has {}",
          detail::max_link_threads, rt_.placement().thread_count()));
    }
    if (game.max_moves() > detail::max_edges) {
      throw std::invalid_argument(fmt::format(
          "distributed_search: a node holds at most {} moves; the game has up to {}",
          detail::max_edges, game.max_moves()));
    }
    const int local = rt_.placement().threads_per_process();
    for (int i = 0; i < local; ++i) workers_.push_back(std::make_unique<worker>(memory_));
  }
  distributed_search(const distributed_search&) = delete;
  distributed_search& operator=(const distributed_search&) = delete;
  ~distributed_search() = default;

  /// Collective: every rank calls it; rank 0's `root` and `options` are the search, the other
  /// ranks' arguments are ignored. Returns the search's result on rank 0; on the other ranks
  /// only `best`, `rollouts`, the job-wide counts and the memory fields are filled. Throws
  /// std::invalid_argument (on rank 0, before anything is sent) for a finished root, a missing
  /// budget or options the game cannot serve (RAVE without recording playouts, reuse_tree
  /// without comparable states). With options.reuse_tree the tree stays in every process for
  /// the next search, which starts from the subtree of its root if the tree holds it (up to two
  /// moves below this root) and frees the rest (docs/mcts.md, "Tree reuse").
  search_result<move> search(const state& root, const search_options& options) {
    detail::search_command<G> command;
    if (rt_.rank() == 0) {
      validate(root, options);
      command = make_command(detail::command_kind::search, root, options);
      plan_reuse(command, root, options);
    }
    command = exchange(command);
    if (command.kind != detail::command_kind::search) {
      throw std::logic_error("distributed_search: rank 0 closed the service");
    }
    detail::check_carry(command);
    return run_search(command, rt_.rank() == 0 ? &options : nullptr);
  }

  /// Ranks other than 0: run every search rank 0 starts, until rank 0 calls close().
  void serve() {
    for (;;) {
      const auto command = exchange(detail::search_command<G>{});
      if (command.kind != detail::command_kind::search) return;
      detail::check_carry(command);
      (void)run_search(command, nullptr);
    }
  }
  /// Rank 0: ends the other ranks' serve().
  void close() {
    detail::search_command<G> command;
    command.kind = detail::command_kind::close;
    (void)exchange(command);
  }

  /// Rank 0, between searches: the game the next searches play (it reaches the other ranks
  /// with the next command). Only for trivially copyable games. A kept tree
  /// (search_options::reuse_tree) is not reused by the next search.
  void set_game(const G& game)
    requires std::is_trivially_copyable_v<G>
  {
    game_ = game;
    kept_root_valid_ = false;
  }
  [[nodiscard]] const G& game() const noexcept { return game_; }  ///< the game searched

  /// What the last search did (every process's counts; rank 0's copy is the job's).
  [[nodiscard]] const distributed_counters& last_counters() const noexcept { return counters_; }
  /// This process's tree memory, for checking that a search left nothing behind.
  [[nodiscard]] const tree_memory_counters& memory() const noexcept { return memory_; }
  /// The options the search runs with.
  [[nodiscard]] const distributed_options& options() const noexcept { return options_; }

 private:
  using node = detail::tree_node<G>;
  using table = detail::edge_table<G>;
  using call_status = fabric::call_status;
  static constexpr std::uint64_t stop_bit = std::uint64_t{1} << 63;

  /// Per worker thread of this process; touched only by that thread during a search, except
  /// `simulations` (any thread of the process enqueues), `finished` (set by the finishing
  /// thread, or by a call) and `completed_here` (read by the thread that ends the search).
  struct alignas(64) worker {
    explicit worker(tree_memory_counters& counters) : pool(counters), next_pool(counters) {}
    tree_pool pool;
    /// While a kept tree is carried over (reuse_tree): the new tree's nodes this thread owns;
    /// it replaces `pool` once the carry is done.
    tree_pool next_pool;
    std::vector<std::byte> image;  ///< a node image being carried (scratch)
    moodycamel::ConcurrentQueue<node*> simulations;
    random rng;
    std::atomic<bool> finished{false};
    std::vector<move> moves;  ///< legal-move scratch
    detail::amaf_record record;  ///< with RAVE: the rollout being simulated or backpropagated
    std::uint64_t remote_calls = 0;
    std::uint64_t nodes_created = 0;
    std::uint64_t deferred_selections = 0;
    std::uint64_t playouts = 0;
    std::uint64_t nodes_held = 0;  ///< nodes in `pool` (kept ones included)
    std::uint64_t nodes_carried = 0;  ///< nodes in `next_pool` during a carry
    /// Root process: the in-flight window, per thread so that starting and completing a rollout
    /// touch no line another thread writes. started_here counts the rollouts this thread began,
    /// completed_here those that came back to the root on this thread (any thread's). This
    /// thread starts only while started_here - completed_here < window_share, so the rollouts in
    /// flight, the sum of these differences, never exceed the window. Written only by this
    /// thread; completed_here is sequentially consistent for the end of the search (stop()).
    std::uint64_t started_here = 0;
    std::int64_t window_share = 0;
    std::int64_t start_batch = 1;
    alignas(64) std::atomic<std::uint64_t> completed_here{0};
  };

  /// The search running in this process, for the calls (they carry no pointer to it: addresses
  /// differ between processes).
  static inline distributed_search* active_ = nullptr;

  void validate(const state& root, const search_options& options) const {
    if (options.rollouts == 0 && options.seconds <= 0) {
      throw std::invalid_argument("search: set a budget (rollouts > 0 or seconds > 0)");
    }
    if (options.playouts_per_leaf == 0 || options.playouts_per_leaf > 0xffff) {
      throw std::invalid_argument("search: playouts_per_leaf must be in 1..65535");
    }
    detail::check_rave<G>(options, "search");
    detail::check_reuse<G>(options, "search");
    const std::uint32_t window = window_for(rt_.placement().thread_count());
    const std::uint64_t in_flight = std::uint64_t{window} * options.playouts_per_leaf;
    if (in_flight > detail::packed_counts::max_in_flight_visits) {
      throw std::invalid_argument(fmt::format(
          "search: {} rollouts in flight x {} playouts per leaf may add {} visits to one move "
          "while its counts halve, more than the {} they leave room for; lower "
          "distributed_options::rollouts_in_flight or playouts_per_leaf",
          window, options.playouts_per_leaf, in_flight,
          detail::packed_counts::max_in_flight_visits));
    }
    std::vector<move> moves(game_.max_moves());
    if (game_.legal_moves(root, std::span<move>(moves)) == 0) {
      throw std::invalid_argument("search: the game is over in the root position");
    }
  }
  /// The rollouts in flight at most: distributed_options::rollouts_in_flight, or 16 per thread.
  [[nodiscard]] std::uint32_t window_for(fabric::thread_id threads) const noexcept {
    return options_.rollouts_in_flight != 0 ? options_.rollouts_in_flight
                                            : 16 * static_cast<std::uint32_t>(threads);
  }
  static detail::search_command<G> make_command(detail::command_kind kind, const state& root,
                                                const search_options& options) {
    detail::search_command<G> c;
    c.kind = kind;
    c.playouts_per_leaf = options.playouts_per_leaf;
    c.rollouts = options.rollouts;
    c.seconds = options.seconds;
    c.exploration = options.exploration;
    c.seed = options.seed;
    c.memory_budget = options.memory_budget;
    c.rave = options.rave ? 1 : 0;
    c.solver = options.solver ? 1 : 0;
    c.expansion_visits = options.expansion_visits;
    c.rave_equivalence = options.rave_equivalence;
    c.reuse_tree = options.reuse_tree ? 1 : 0;
    c.root = root;
    return c;
  }
  /// Rank 0: what of the kept tree the search starts from (the kept root, the subtree up to
  /// two moves below it that holds `root`, or nothing: also when the tree was grown with another
  /// rave or solver setting, whose tables lack the AMAF statistics or lost bits this one reads).
  void plan_reuse(detail::search_command<G>& c, const state& root,
                  const search_options& options) const {
    if (!options.reuse_tree || !kept_ || !kept_root_valid_) return;
    if (options.rave != kept_rave_ || options.solver != kept_solver_) return;
    const auto path = detail::moves_between(game_, kept_root_, root);
    if (!path) return;
    c.carry = path->empty() ? detail::carry_kind::same_root : detail::carry_kind::subtree;
    c.path_length = static_cast<std::uint8_t>(path->size());
    std::copy(path->begin(), path->end(), c.path);
  }
  detail::search_command<G> exchange(const detail::search_command<G>& mine) {
    return detail::exchange_command(rt_, game_, mine);
  }

  /// One search on this rank, in four phases that each read or write the search state the
  /// workers share: everything is set before the first worker starts (prepare), read after
  /// the last one stopped (fail_everywhere_if_failed, collect_result).
  search_result<move> run_search(const detail::search_command<G>& command,
                                 const search_options* rank0_options) {
    if (active_ != nullptr) throw std::logic_error("distributed_search: a search is running");
    prepare(command, rank0_options);
    active_ = this;
    struct clear_active {
      ~clear_active() { active_ = nullptr; }
    } clear_on_exit;
    plant_root(command);
    std::exception_ptr run_error;
    try {
      rt_.run([this](fabric::thread_context& me) { thread_main(me); });
    } catch (...) {
      run_error = std::current_exception();
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    fail_everywhere_if_failed(run_error);
    return collect_result(command, seconds);
  }

  /// The search's parameters, its shared words and every worker's state, and the root (rank 0).
  void prepare(const detail::search_command<G>& command, const search_options* rank0_options) {
    K_ = command.playouts_per_leaf;
    exploration_ = command.exploration;
    rave_ = command.rave != 0;
    rave_equivalence_ = command.rave_equivalence;
    solver_ = command.solver != 0;
    expansion_visits_ = command.expansion_visits;
    thread_count_ = rt_.placement().thread_count();
    window_ = window_for(thread_count_);
    budget_ = command.rollouts == 0 ? ~stop_bit : command.rollouts;
    start_ = std::chrono::steady_clock::now();
    has_deadline_ = command.seconds > 0;
    deadline_ = start_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             std::chrono::duration<double>(command.seconds));
    started_.store(0);
    finish_sent_.store(false);
    aborted_.store(false);
    failure_.clear();
    memory_.reset_budget(search_budget(command));
    budget_noted_.store(false);
    budget_reached_nanoseconds_ = 0;
    budget_reached_rollouts_ = 0;
    progress_ = rank0_options != nullptr ? &rank0_options->progress : nullptr;
    for (std::size_t i = 0; i < workers_.size(); ++i) prepare_worker(i, command.seed);
    carry_path_length_ = command.path_length;
    std::copy(std::begin(command.path), std::end(command.path), carry_path_);
  }
  /// The budget a search's tree grows to: with reuse_tree half of memory_budget, so that
  /// carrying the kept subtree into a new tree (both held for a moment) stays within it.
  static std::uint64_t search_budget(const detail::search_command<G>& command) noexcept {
    if (command.reuse_tree == 0 || command.memory_budget == 0) return command.memory_budget;
    return std::max<std::uint64_t>(command.memory_budget / 2, 1);
  }

  /// The root the search starts from (rank 0): the kept root, the carried subtree's root, or a
  /// new one; a kept tree the search does not start from is freed everywhere.
  void plant_root(const detail::search_command<G>& command) {
    if (command.carry == detail::carry_kind::fresh) release_tree();
    if (command.carry == detail::carry_kind::subtree) carry_over(command);
    kept_ = false;
    reused_visits_ = 0;
    reused_nodes_here_ = 0;
    for (auto& w : workers_) reused_nodes_here_ += w->nodes_held;
    if (rt_.rank() != 0) return;
    if (root_ != nullptr) {
      root_->state = command.root;  // equal, but the caller's last_move (no thread runs yet)
      reused_visits_ = root_->visits.load(std::memory_order_relaxed);
      return;
    }
    worker& first = *workers_[0];
    root_ = first.pool.template create<node>();
    root_->state = command.root;
    root_->owner = static_cast<std::uint16_t>(rt_.placement().global_id(0, 0));
    root_->winner = game_.winner(command.root);
    ++first.nodes_created;
    ++first.nodes_held;
  }
  /// Frees this process's tree (the kept one, or one a failure left).
  void release_tree() noexcept {
    for (auto& w : workers_) {
      w->pool.release();
      w->next_pool.release();
      w->nodes_held = w->nodes_carried = 0;
    }
    root_ = nullptr;
    kept_ = false;
    kept_root_valid_ = false;
  }
  void prepare_worker(std::size_t i, std::uint64_t seed) {
    auto& w = *workers_[i];
    w.finished.store(false, std::memory_order_relaxed);
    w.rng.reseed(seed * 0x9e3779b97f4a7c15ULL +
                 rt_.placement().global_id(rt_.rank(), static_cast<int>(i)));
    w.moves.resize(game_.max_moves());
    if (rave_) w.record.resize(game_.max_moves());
    w.remote_calls = w.nodes_created = w.deferred_selections = w.playouts = 0;
    w.started_here = 0;
    w.completed_here.store(0, std::memory_order_relaxed);
    // The window split over the root process's threads (the remainder to the first ones); a
    // thread starts rollouts in batches of a quarter of its share, so that the shared started_
    // word is taken once per batch.
    const auto starters = static_cast<std::uint32_t>(workers_.size());
    w.window_share = window_ / starters + (i < window_ % starters ? 1 : 0);
    w.start_batch = std::max<std::int64_t>(1, w.window_share / 4);
  }

  /// Every rank learns whether the search failed anywhere (so none is left in a collective);
  /// if it did, every rank drops its tree and throws the first rank's reason (rank 0 is the
  /// one that talks to people).
  void fail_everywhere_if_failed(const std::exception_ptr& run_error) {
    // An aborted search leaves leaves queued and rollouts unfinished: drop them with the tree.
    for (auto& w : workers_) {
      node* leftover = nullptr;
      while (w->simulations.try_dequeue(leftover)) {
      }
    }
    const bool failed_here = run_error != nullptr || aborted_.load();
    if (rt_.allreduce_sum(failed_here ? 1 : 0) == 0) return;
    release_tree();
    if (run_error && failure_.empty()) failure_ = reason_of(run_error);
    // Every rank joins the allgather before any throws: a rank that threw first would leave
    // the others waiting in it until its deadline, and they would not learn why.
    const auto reasons = rt_.allgather(std::as_bytes(std::span(failure_)));
    if (run_error) std::rethrow_exception(run_error);  // its own type, on the rank it hit
    for (const auto& reason : reasons) {
      if (!reason.empty()) {
        throw error("distributed_search: " +
                    std::string(reinterpret_cast<const char*>(reason.data()), reason.size()));
      }
    }
    throw error("distributed_search: the search was aborted");
  }

  /// What a failure that ended runtime::run on this rank says, for the other ranks.
  std::string reason_of(const std::exception_ptr& failure) const {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      return fmt::format("the search failed on rank {}: {}", rt_.rank(), e.what());
    } catch (...) {
      return fmt::format("the search failed on rank {}: an exception that is not a "
                         "std::exception",
                         rt_.rank());
    }
  }

  /// The result (rank 0: the root's statistics and the proof), the job-wide counters and the
  /// memory report (collective), and every process's tree released.
  search_result<move> collect_result(const detail::search_command<G>& command, double seconds) {
    search_result<move> result = root_statistics();
    distributed_counters local;
    for (auto& w : workers_) {
      local.nodes_created += w->nodes_created;
      local.remote_calls += w->remote_calls;
      local.deferred_selections += w->deferred_selections;
      local.playouts += w->playouts;
    }
    local.tree_bytes_allocated = memory_.bytes_live();
    const memory_report memory = gather_memory_report(local.tree_bytes_allocated);
    keep_or_release_tree(command);
    local.tree_bytes_live = memory_.bytes_live();
    counters_.nodes_created = rt_.allreduce_sum(local.nodes_created);
    counters_.remote_calls = rt_.allreduce_sum(local.remote_calls);
    counters_.deferred_selections = rt_.allreduce_sum(local.deferred_selections);
    counters_.playouts = rt_.allreduce_sum(local.playouts);
    counters_.tree_bytes_allocated = rt_.allreduce_sum(local.tree_bytes_allocated);
    counters_.tree_bytes_live = rt_.allreduce_sum(local.tree_bytes_live);
    share_best_move(result);
    result.rollouts = rt_.allreduce_sum(rt_.rank() == 0 ? completed_rollouts() : 0);
    result.reused_nodes = rt_.allreduce_sum(reused_nodes_here_);
    result.reused_visits = reused_visits_;
    result.playouts = counters_.playouts;
    result.tree_nodes = counters_.nodes_created;
    result.remote_calls = counters_.remote_calls;
    result.seconds = seconds;
    result.tree_bytes = memory.largest_tree_bytes;
    result.memory_budget = command.memory_budget;
    result.memory_budget_reached = memory.reached;
    result.memory_budget_reached_seconds = memory.reached_seconds;
    result.memory_budget_reached_rollouts = memory.reached_rollouts;
    return result;
  }
  /// With reuse_tree the tree stays for the next search (rank 0 remembers its root's
  /// position); otherwise it is freed.
  void keep_or_release_tree(const detail::search_command<G>& command) {
    if (command.reuse_tree == 0) {
      release_tree();
      return;
    }
    kept_ = true;
    if (rt_.rank() == 0) {
      kept_root_ = root_->state;
      kept_root_valid_ = true;
      kept_rave_ = command.rave != 0;
      kept_solver_ = command.solver != 0;
    }
  }
  /// Rank 0: the root's moves, most convincing first, and the solver's proof; elsewhere empty.
  search_result<move> root_statistics() const {
    search_result<move> result;
    if (root_ == nullptr) return result;
    if (const table* t = root_->edges.load(std::memory_order_acquire)) {
      for (std::uint32_t i = 0; i < t->count; ++i) {
        const auto [visits, points] = t->statistics()[i].load();
        if (visits == 0) continue;
        // Rollouts in flight when a table halved add their whole points to halved visits
        // (packed_counts): a win rate can pass 1 by that much, reported as 1.
        const double wins = static_cast<double>(std::min(points, 2 * visits)) / 2;
        result.moves.push_back({t->moves()[i], visits, wins});
      }
    }
    std::stable_sort(result.moves.begin(), result.moves.end(), more_convincing<move>);
    if (!result.moves.empty()) {
      result.best = result.moves.front().move;
      result.win_rate = result.moves.front().win_rate();
    }
    put_proof_in(result);
    return result;
  }
  /// Every rank learns rank 0's best move (collective).
  void share_best_move(search_result<move>& result) {
    if constexpr (sizeof(move) <= sizeof(std::uint64_t)) {
      std::uint64_t best_bits = 0;
      if (rt_.rank() == 0) std::memcpy(&best_bits, &result.best, sizeof(move));
      best_bits = rt_.allreduce_sum(best_bits);
      std::memcpy(&result.best, &best_bits, sizeof(move));
    }
  }

  /// Root process, after the search: the solver's proof of the root, if any, in the result.
  void put_proof_in(search_result<move>& result) const {
    if (!solver_) return;
    result.proven_winner = root_winner();
    if (result.proven_winner != game_.to_move(root_->state)) return;
    const table& t = *root_->edges.load(std::memory_order_acquire);
    detail::put_proven_move_first(result, t.moves()[t.won_edge]);
  }

  /// The memory budget's outcome over every process (collective).
  struct memory_report {
    std::uint64_t largest_tree_bytes = 0;
    bool reached = false;
    double reached_seconds = 0;  ///< the earliest process's
    std::uint64_t reached_rollouts = 0;  ///< the root's process's, if it reached its budget
  };
  struct memory_record {  ///< what each process contributes
    std::uint64_t tree_bytes;
    std::uint64_t reached;
    std::uint64_t reached_nanoseconds;
    std::uint64_t reached_rollouts;
  };
  memory_report gather_memory_report(std::uint64_t tree_bytes) {
    const memory_record mine{tree_bytes, budget_noted_.load() ? 1U : 0U,
                             budget_reached_nanoseconds_, budget_reached_rollouts_};
    std::vector<memory_record> records{mine};
    if (rt_.size() > 1) {
      records.clear();
      for (const auto& bytes : rt_.allgather(std::as_bytes(std::span(&mine, 1)))) {
        if (bytes.size() != sizeof(memory_record)) {
          throw error("distributed_search: a rank sent a malformed memory report");
        }
        memory_record r{};
        std::memcpy(&r, bytes.data(), sizeof r);
        records.push_back(r);
      }
    }
    memory_report report;
    std::uint64_t earliest = ~std::uint64_t{0};
    for (const auto& r : records) {
      report.largest_tree_bytes = std::max(report.largest_tree_bytes, r.tree_bytes);
      if (r.reached == 0) continue;
      report.reached = true;
      earliest = std::min(earliest, r.reached_nanoseconds);
    }
    if (report.reached) report.reached_seconds = static_cast<double>(earliest) * 1e-9;
    if (records[0].reached != 0) report.reached_rollouts = records[0].reached_rollouts;
    return report;
  }
  /// A pool refused memory: the first time in this search, remember when (and on the root's
  /// process how many rollouts had completed). Read after the threads stopped.
  void note_budget_reached() {
    if (budget_noted_.load(std::memory_order_relaxed) || budget_noted_.exchange(true)) return;
    budget_reached_nanoseconds_ = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                             start_)
            .count());
    if (rt_.rank() == 0) budget_reached_rollouts_ = completed_rollouts();
  }

  // ---- the threads' loop: serve calls, simulate, start rollouts (root process only) ----

  void thread_main(fabric::thread_context& me) {
    const int local_index = rt_.placement().locate(me.id()).local_thread;
    worker& w = *workers_[static_cast<std::size_t>(local_index)];
    const bool starts_rollouts = rt_.rank() == 0 && !carrying_;
    const bool reports = starts_rollouts && local_index == 0 && progress_ && *progress_;
    auto last_report = std::chrono::steady_clock::now();
    unsigned idle = 0;
    if (carrying_ && rt_.rank() == 0 && local_index == 0) {
      guarded(me, [&] { descend(me, w, carry_from_, 0); });
    }
    // An abort anywhere in the process ends every loop (its steps are dropped from then on).
    while (!w.finished.load(std::memory_order_acquire) &&
           !aborted_.load(std::memory_order_acquire)) {
      std::size_t work = 0;
      guarded(me, [&] {
        work += me.poll();
        node* leaf = nullptr;
        if (w.simulations.try_dequeue(leaf)) {
          simulate(me, w, leaf);
          ++work;
        }
        if (starts_rollouts) work += start_rollouts(me, w);
      });
      if (options_.channel == invoke::channel::trad) {
        if (auto* extension = me.extension()) extension->flush(me);
      }
      if (reports) {
        const auto now = std::chrono::steady_clock::now();
        if (now - last_report > std::chrono::milliseconds(100)) {
          last_report = now;
          guarded(me, [&] {
            (*progress_)(completed_rollouts(),
                         std::chrono::duration<double>(now - start_).count());
          });
        }
      }
      if (work == 0) {
        fabric::thread_context::back_off(idle);
      } else {
        idle = 0;
      }
    }
  }

  /// Starts a batch of rollouts while the budget and this thread's share of the in-flight
  /// window allow. Root process only.
  std::size_t start_rollouts(fabric::thread_context& me, worker& w) {
    const std::int64_t in_flight_here = static_cast<std::int64_t>(w.started_here) -
        static_cast<std::int64_t>(w.completed_here.load(std::memory_order_relaxed));
    const std::int64_t credit = w.window_share - in_flight_here;
    if (credit < w.start_batch) return 0;  // a full share is the common case
    std::uint64_t s = started_.load();
    std::uint64_t batch = 0;
    // The solver's proof ends the search, after one rollout at least: a root proven before the
    // search (a kept one, reuse_tree) may have no edge with visits yet, and the result names
    // its most visited move.
    const bool decided = root_decided();
    if (decided && (s & ~stop_bit) > 0) {
      if ((s & stop_bit) == 0) stop(me);
      return 0;
    }
    for (;;) {
      if ((s & stop_bit) != 0) return 0;
      if (s >= budget_) {
        stop(me);
        return 0;
      }
      // The clock only when rollouts would start. At least one rollout, however short the
      // time: the result names a move.
      if (has_deadline_ && s > 0 && std::chrono::steady_clock::now() >= deadline_) {
        stop(me);
        return 0;
      }
      // A thread that completed others' rollouts may have more credit than its share; it
      // starts at most a share (or 4) at a time and polls in between.
      const auto share = static_cast<std::uint64_t>(std::max<std::int64_t>(4, w.window_share));
      batch = decided ? 1
                      : std::min<std::uint64_t>(
                            {static_cast<std::uint64_t>(credit), budget_ - s, share});
      if (started_.compare_exchange_weak(s, s + batch)) break;
    }
    w.started_here += batch;
    for (std::uint64_t i = 0; i < batch; ++i) {
      if (steps_directly(me, root_->owner)) {
        select(me, w, root_);
      } else {
        send_select(me, w, root_->owner, address_of(root_));
      }
    }
    return static_cast<std::size_t>(batch);
  }

  /// Who wins the root by the solver's proof (root process; nobody while unproven).
  [[nodiscard]] player root_winner() const noexcept {
    const table* t = root_->edges.load(std::memory_order_acquire);
    return t != nullptr ? t->decided.load(std::memory_order_acquire) : nobody;
  }
  [[nodiscard]] bool root_decided() const noexcept { return solver_ && root_winner() != nobody; }

  /// Rollouts back at the root so far (root process).
  [[nodiscard]] std::uint64_t completed_rollouts() const noexcept {
    std::uint64_t sum = 0;
    for (const auto& w : workers_) sum += w->completed_here.load();
    return sum;
  }
  /// No rollout starts after this. The last one to complete (or this, if none is in flight)
  /// ends the search. started_ and the completed_here words are sequentially consistent: in
  /// their single total order, either stop()'s fetch_or precedes the last completion's
  /// increment, and that completion's loads see the stop bit and every completion, or it
  /// follows it, and stop()'s sum sees every completion. finish() runs once either way.
  void stop(fabric::thread_context& me) {
    const std::uint64_t s = started_.fetch_or(stop_bit) & ~stop_bit;
    if (completed_rollouts() == s) finish(me);
  }
  void complete_rollout(fabric::thread_context& me) {
    worker_of(me).completed_here.fetch_add(1);
    const std::uint64_t s = started_.load();
    if ((s & stop_bit) != 0 && completed_rollouts() == (s & ~stop_bit)) finish(me);
  }
  /// Every rollout has come back to the root: every thread of the job leaves its loop.
  void finish(fabric::thread_context& me) {
    if (finish_sent_.exchange(true)) return;
    worker& self = worker_of(me);
    for (fabric::thread_id t = 0; t < thread_count_; ++t) {
      if (rt_.is_local(t)) {
        workers_[local_index(t)]->finished.store(true, std::memory_order_release);
      } else {
        ++self.remote_calls;
        check(me, invoke::channel::send, t,
              me.call(t, [](fabric::thread_context& target) {  // send-based: never full
                active_->worker_of(target).finished.store(true, std::memory_order_release);
              }));
      }
    }
  }

  /// Runs a step; an exception (a call that could not be sent, memory exhausted, a throwing game
  /// or progress callback) aborts the search instead of leaving the thread: a lost rollout
  /// would never complete, and the job would wait for it forever. Steps arriving after the
  /// abort are dropped, so the job quiets down and every rank reports the failure.
  template <class Step>
  void guarded(fabric::thread_context& me, Step&& step) noexcept {
    if (aborted_.load(std::memory_order_acquire)) return;
    try {
      step();
    } catch (const std::exception& e) {
      abort_search(me, e.what());
    } catch (...) {
      abort_search(me, "an exception that is not a std::exception");
    }
  }
  void abort_search(fabric::thread_context& me, const std::string& what) noexcept {
    {
      std::lock_guard lock(failure_mutex_);
      if (failure_.empty()) {
        failure_ = fmt::format("the search failed on rank {}, thread {}: {}", rt_.rank(),
                               me.id(), what);
      }
    }
    if (aborted_.exchange(true, std::memory_order_acq_rel)) return;
    // Every thread of the job leaves its loop and drops what still arrives.
    for (fabric::thread_id t = 0; t < thread_count_; ++t) {
      if (rt_.is_local(t)) {
        workers_[local_index(t)]->finished.store(true, std::memory_order_release);
        continue;
      }
      // Send-based: it needs no room in a ring that may be what failed. A peer that cannot be
      // told fails in the runtime's own termination rounds.
      try {
        (void)me.call(t, [](fabric::thread_context& target) {
          active_->aborted_.store(true, std::memory_order_release);
          active_->worker_of(target).finished.store(true, std::memory_order_release);
        });
      } catch (...) {
      }
    }
  }

  // ---- the four steps of a rollout ----

  /// Selection from n downward, taken directly while the nodes are reachable from here.
  void select(fabric::thread_context& me, worker& w, node* n) {
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
  bool stays_leaf(node* n) noexcept {
    if (expansion_visits_ <= K_ || n->parent == 0 || n->winner != nobody) return false;
    if (n->edges.load(std::memory_order_acquire) != nullptr) return false;
    if (K_ + n->visits.load(std::memory_order_relaxed) >= expansion_visits_) return false;
    n->visits.fetch_add(K_, std::memory_order_relaxed);
    return true;
  }

  /// UCB1 over the edges, with the virtual losses of selections in flight counted as visits.
  std::uint32_t choose(const node* n, const table& t) const noexcept {
    const double log_parent = log_visits(n->visits.load(std::memory_order_relaxed));
    const detail::packed_counts* statistics = t.statistics();
    const detail::packed_counts* amaf = t.amaf();
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
  table* edges_of(worker& w, node* n) {
    if (table* t = n->edges.load(std::memory_order_acquire)) return t;
    const detail::expansion made =
        detail::moves_to_search(game_, n->state, std::span<move>(w.moves), solver_);
    const std::size_t count = made.count;
    table* fresh = allocate_table(w.pool, count, n->parent == 0);
    if (fresh == nullptr) return nullptr;
    shuffle_moves(std::span<move>(w.moves.data(), count), w.rng);
    fresh->decided.store(made.decided, std::memory_order_relaxed);
    std::copy_n(w.moves.data(), count, fresh->moves());
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
  static std::atomic<std::uint64_t>* child_slot(tree_pool& pool, table& t, std::uint32_t index) {
    return t.child_slot(index, [&pool] {
      return pool.try_allocate(sizeof(detail::child_block), alignof(detail::child_block));
    });
  }
  /// An edge table of `count` edges in `pool`, every statistic zero and every link empty (with
  /// RAVE its AMAF statistics, with the solver its lost bits); null where the pool refuses
  /// (memory budget), except for a root's table, which is always made.
  table* allocate_table(tree_pool& pool, std::size_t count, bool root) {
    const std::size_t bytes = table::bytes(count, rave_, solver_);
    void* memory = root ? pool.allocate(bytes, alignof(table))
                        : pool.try_allocate(bytes, alignof(table));
    if (memory == nullptr) return nullptr;
    return table::create(memory, count, rave_, solver_);
  }

  /// Creates the child for edge `index` of n on a thread picked by the placement policy.
  void expand(fabric::thread_context& me, worker& w, node* n, std::uint32_t index, move m) {
    state child = n->state;
    game_.apply(child, m);
    const fabric::thread_id owner = pick_owner(w, child);
    const fabric::thread_id parent_owner = n->owner;
    const std::uint64_t parent = address_of(n);
    if (steps_directly(me, owner)) {
      create(me, w, owner, child, parent_owner, parent, index);
      return;
    }
    ++w.remote_calls;
    invoke_buffer(
        me, owner,
        [parent_owner, parent, index](fabric::thread_context& target, std::span<std::byte> bytes) {
          auto* self = active_;
          self->guarded(target, [&] {
            state s;
            if (bytes.size() != sizeof s) {
              throw error(fmt::format("mcts: a node's state arrived with {} bytes, expected {}",
                                      bytes.size(), sizeof s));
            }
            std::memcpy(&s, bytes.data(), sizeof s);
            self->create(target, self->worker_of(target), target.id(), s, parent_owner, parent,
                         index);
          });
        },
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(&child), sizeof child));
  }

  /// The new leaf: tells its parent where it is, then goes to a random local worker's
  /// simulation queue. Without room for it (memory budget), tells the parent so instead.
  void create(fabric::thread_context& me, worker& w, fabric::thread_id owner, const state& s,
              fabric::thread_id parent_owner, std::uint64_t parent, std::uint32_t index) {
    node* leaf = w.pool.template try_create<node>();
    if (leaf == nullptr) {
      note_budget_reached();
      tell_not_stored(me, w, parent_owner, parent, index);
      return;
    }
    leaf->state = s;
    leaf->parent = parent;
    leaf->parent_owner = static_cast<std::uint16_t>(parent_owner);  // < max_link_threads
    leaf->owner = static_cast<std::uint16_t>(owner);
    leaf->index_in_parent = static_cast<std::uint16_t>(index);  // < max_edges
    leaf->winner = game_.winner(s);
    ++w.nodes_created;
    ++w.nodes_held;
    const std::uint64_t address = link_address_of(leaf);
    if (steps_directly(me, parent_owner)) {
      located(me, w, reinterpret_cast<node*>(parent), index, owner, address);
    } else {
      ++w.remote_calls;
      send(me, parent_owner, [parent, index, owner, address](fabric::thread_context& target) {
        auto* self = active_;
        self->guarded(target, [&] {
          self->located(target, self->worker_of(target), reinterpret_cast<node*>(parent), index,
                        owner, address);
        });
      });
    }
    simulation_queue_for(w).enqueue(leaf);
  }

  /// The child of edge `index` of n is at (owner, address): publish it and resume the
  /// selections deferred on it.
  void located(fabric::thread_context& me, worker& w, node* n, std::uint32_t index,
               fabric::thread_id owner, std::uint64_t address) {
    std::atomic<std::uint64_t>& child = n->edges.load(std::memory_order_acquire)->child_word(index);
    const std::uint64_t previous =
        child.exchange(detail::child_link(address, owner), std::memory_order_acq_rel);
    for (std::uint64_t deferred = previous >> 1; deferred > 0; --deferred) {
      if (steps_directly(me, owner)) {
        select(me, w, reinterpret_cast<node*>(address));
      } else {
        send_select(me, w, owner, address);
      }
    }
  }

  /// The owner of edge `index` of the node at `parent` had no room for its child: the parent's
  /// owner learns it (directly when reachable, by a call otherwise).
  void tell_not_stored(fabric::thread_context& me, worker& w, fabric::thread_id parent_owner,
                       std::uint64_t parent, std::uint32_t index) {
    if (steps_directly(me, parent_owner)) {
      not_stored(me, w, reinterpret_cast<node*>(parent), index);
      return;
    }
    ++w.remote_calls;
    send(me, parent_owner, [parent, index](fabric::thread_context& target) {
      auto* self = active_;
      self->guarded(target, [&] {
        self->not_stored(target, self->worker_of(target), reinterpret_cast<node*>(parent), index);
      });
    });
  }
  /// Edge `index` of n will have no child: mark it so (later selections play out from its
  /// position), and play out for the selection that tried to create it and those deferred on it.
  void not_stored(fabric::thread_context& me, worker& w, node* n, std::uint32_t index) {
    std::atomic<std::uint64_t>& child = n->edges.load(std::memory_order_acquire)->child_word(index);
    const std::uint64_t previous =
        child.exchange(detail::unstored_child, std::memory_order_acq_rel);
    for (std::uint64_t waiting = (previous >> 1) + 1; waiting > 0; --waiting) {
      play_out_unstored(me, w, n, index);
    }
  }
  /// K playouts from the position after edge `index` of n, credited as if its child were there.
  void play_out_unstored(fabric::thread_context& me, worker& w, node* n, std::uint32_t index) {
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
  void simulate(fabric::thread_context& me, worker& w, node* leaf) {
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
  player play_out(worker& w, const state& s) {
    if constexpr (amaf_game<G>) {
      if (rave_) return w.record.play(game_, s, w.rng);
    }
    return game_.playout(s, w.rng);
  }
  /// `games` results won by `winner` (nobody: drawn) in half wins of each player.
  static void add_result(player winner, std::uint32_t games, std::uint32_t& points1,
                         std::uint32_t& points2) noexcept {
    points1 += winner == 1 ? 2 * games : winner == nobody ? games : 0;
    points2 += winner == 2 ? 2 * games : winner == nobody ? games : 0;
  }

  /// Adds the points to every edge from `child` up to the root: directly while the parent is
  /// reachable from here, by a call to its owner otherwise. `proven`: who wins at `child` by
  /// the solver's proof (nobody: not known).
  void backpropagate(fabric::thread_context& me, worker& w, const node* child,
                     std::uint32_t points1, std::uint32_t points2, player proven) {
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
  void backpropagate_from(fabric::thread_context& me, worker& w, node* parent,
                          std::uint32_t index, std::uint32_t points1, std::uint32_t points2,
                          player proven) {
    proven = credit(w, parent, index, points1, points2, proven);
    backpropagate(me, w, parent, points1, points2, proven);
  }
  /// With RAVE the backpropagation call carries the rollout's record (w.record), which the
  /// receiving worker takes as its own before going on.
  void send_backpropagation_with_record(fabric::thread_context& me, worker& w,
                                        fabric::thread_id parent_owner, std::uint64_t parent,
                                        std::uint32_t index, std::uint32_t points1,
                                        std::uint32_t points2, player proven) {
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
  player credit(worker& w, node* n, std::uint32_t index, std::uint32_t points1,
                std::uint32_t points2, player proven) {
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
  static player prove(table& t, std::uint32_t index, player chooser, player proven) {
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
  void credit_amaf(worker& w, table& t, std::uint32_t index, player chooser,
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

  // ---- carrying a kept tree into the next search (search_options::reuse_tree) ----
  //
  // A collective phase before the search's own run (carry_over). Rank 0's first thread follows
  // the path from the kept root (descend, a call to each node's owner); the node it ends at is
  // sent as an image to rank 0's first thread, which makes the new root of it (adopt_root).
  // Every copied node asks the owners of its children to copy them (carry_node, on the thread
  // that owns the kept child, into its next_pool); each copy reports to its parent's owner
  // once its whole subtree is copied (carried), so the root hears last, and ends the phase.
  // While this runs no rollout does: a node of either tree is touched only by its owner.

  /// Every process: copies the kept subtree that command.path leads to into the next pools,
  /// then frees the kept tree. Rank 0's root_ is the copy's root, or null when the path leads
  /// to no node (the search then starts from an empty tree).
  void carry_over(const detail::search_command<G>& command) {
    memory_.reset_budget(command.memory_budget);  // the copy may take the other half
    carry_from_ = root_;
    root_ = nullptr;
    carrying_ = true;
    std::exception_ptr run_error;
    try {
      rt_.run([this](fabric::thread_context& me) { thread_main(me); });
    } catch (...) {
      run_error = std::current_exception();
    }
    carrying_ = false;
    carry_from_ = nullptr;
    fail_everywhere_if_failed(run_error);
    for (auto& w : workers_) {
      w->pool = std::move(w->next_pool);  // the rest of the kept tree is freed here
      w->nodes_held = w->nodes_carried;
      w->nodes_carried = 0;
      w->finished.store(false, std::memory_order_relaxed);
    }
    finish_sent_.store(false);
    memory_.reset_budget(search_budget(command));
  }
  /// Follows the carry path from n (depth moves of it taken so far), then sends the node at
  /// its end to rank 0's first thread.
  void descend(fabric::thread_context& me, worker& w, const node* n, std::uint32_t depth) {
    if (depth == carry_path_length_) {
      send_root_image(me, w, n);
      return;
    }
    const table* t = n->edges.load(std::memory_order_acquire);
    for (std::uint32_t i = 0; t != nullptr && i < t->count; ++i) {
      const std::uint64_t word = t->child(i, std::memory_order_relaxed);
      if (t->moves()[i] != carry_path_[depth] || !detail::names_child(word)) continue;
      ++w.remote_calls;
      const std::uint64_t child = detail::child_address(word);
      send(me, detail::child_owner(word), [child, depth](fabric::thread_context& target) {
        auto* self = active_;
        self->guarded(target, [&] {
          self->descend(target, self->worker_of(target), reinterpret_cast<const node*>(child),
                        depth + 1);
        });
      });
      return;
    }
    // The tree has no node there: rank 0's first thread ends the phase without a root.
    ++w.remote_calls;
    send(me, rt_.placement().global_id(0, 0), [](fabric::thread_context& target) {
      active_->guarded(target, [&] { active_->finish(target); });
    });
  }
  void send_root_image(fabric::thread_context& me, worker& w, const node* n) {
    detail::write_image(*n, w.image);
    ++w.remote_calls;
    invoke_buffer(
        me, rt_.placement().global_id(0, 0),
        [](fabric::thread_context& target, std::span<std::byte> bytes) {
          auto* self = active_;
          self->guarded(target, [&] { self->adopt_root(target, self->worker_of(target), bytes); });
        },
        std::span<const std::byte>(w.image));
  }
  /// Rank 0's first thread: the carried root, from its image.
  void adopt_root(fabric::thread_context& me, worker& w, std::span<const std::byte> bytes) {
    const auto image = detail::node_image<G>::read(bytes);
    if (!image) {
      throw error(fmt::format("mcts: a carried root arrived with {} bytes, not an image of its "
                              "edge count", bytes.size()));
    }
    root_ = rebuild(me, w, *image, 0, 0, 0);
    carry_children(me, w, root_);
  }
  /// The owner of a kept node: its copy, under the copy of its parent (at parent_owner,
  /// parent), or a report that there was no room for it.
  void carry_node(fabric::thread_context& me, worker& w, const node* kept,
                  fabric::thread_id parent_owner, std::uint64_t parent, std::uint32_t index) {
    detail::write_image(*kept, w.image);
    const auto image = detail::node_image<G>::read(w.image);
    node* copy = rebuild(me, w, *image, parent_owner, parent, index);
    if (copy == nullptr) {
      note_budget_reached();
      tell_carried(me, w, parent_owner, parent, index, 0);
      return;
    }
    carry_children(me, w, copy);
  }
  /// A node of the new tree made from `image` in w.next_pool (the root's always; another's
  /// null where the budget refuses it; its table left out where the budget refuses that). Its
  /// links keep the kept tree's child words until the children report (carried).
  node* rebuild(fabric::thread_context& me, worker& w, const detail::node_image<G>& image,
                fabric::thread_id parent_owner, std::uint64_t parent, std::uint32_t index) {
    const bool root = parent == 0;
    node* copy = root ? w.next_pool.template create<node>()
                      : w.next_pool.template try_create<node>();
    if (copy == nullptr) return nullptr;
    const auto& head = image.head();
    copy->state = head.state;
    copy->parent = parent;
    copy->parent_owner = static_cast<std::uint16_t>(parent_owner);
    copy->owner = static_cast<std::uint16_t>(me.id());
    copy->index_in_parent = static_cast<std::uint16_t>(index);
    copy->winner = head.winner;
    copy->visits.store(head.visits, std::memory_order_relaxed);
    ++w.nodes_carried;
    if (head.count == 0) return copy;
    table* t = allocate_table(w.next_pool, head.count, root);
    if (t == nullptr) {  // a leaf again: the budget had no room for its edges
      note_budget_reached();
      return copy;
    }
    t->decided.store(head.decided, std::memory_order_relaxed);
    t->won_edge = head.won_edge;
    for (std::uint32_t i = 0; i < head.count; ++i) copy_edge(w, *t, i, image.edge(i));
    copy->edges.store(t, std::memory_order_release);
    return copy;
  }
  /// Edge i of the copy from its image; a kept child whose block the budget has no room for is
  /// dropped (the edge keeps its statistics and is expanded again when chosen).
  void copy_edge(worker& w, table& t, std::uint32_t i, const detail::carried_edge<G>& e) {
    t.statistics()[i].store(e.visits, e.points);
    if (t.amaf() != nullptr) t.amaf()[i].store(e.amaf_visits, e.amaf_points);
    if (t.lost() != nullptr && e.lost != 0) {
      t.lost()[i / 64].fetch_or(std::uint64_t{1} << (i % 64), std::memory_order_relaxed);
      t.lost_count.fetch_add(1, std::memory_order_relaxed);
    }
    t.moves()[i] = e.move;
    if (!detail::names_child(e.child)) return;
    std::atomic<std::uint64_t>* slot = child_slot(w.next_pool, t, i);
    if (slot == nullptr) {
      note_budget_reached();
      return;
    }
    slot->store(e.child, std::memory_order_relaxed);
  }
  /// Asks the owner of each kept child of `copy` to copy it; with none, the copy is complete.
  void carry_children(fabric::thread_context& me, worker& w, node* copy) {
    table* t = copy->edges.load(std::memory_order_relaxed);
    std::uint32_t pending = 0;
    for (std::uint32_t i = 0; t != nullptr && i < t->count; ++i) {
      pending += t->child(i, std::memory_order_relaxed) != 0 ? 1 : 0;
    }
    if (pending == 0) {
      report_carried(me, w, copy);
      return;
    }
    t->carry_pending = pending;  // before any child is asked: none reports before
    const fabric::thread_id owner = me.id();
    const std::uint64_t parent = address_of(copy);
    for (std::uint32_t i = 0; i < t->count; ++i) {
      const std::uint64_t word = t->child(i, std::memory_order_relaxed);
      if (word == 0) continue;
      ++w.remote_calls;
      const std::uint64_t kept = detail::child_address(word);
      send(me, detail::child_owner(word), [kept, owner, parent, i](fabric::thread_context& target) {
        auto* self = active_;
        self->guarded(target, [&] {
          self->carry_node(target, self->worker_of(target), reinterpret_cast<const node*>(kept),
                           owner, parent, i);
        });
      });
    }
  }
  /// `copy`'s subtree is copied: its parent's owner learns where it is; the root ends the phase.
  void report_carried(fabric::thread_context& me, worker& w, node* copy) {
    if (copy->parent == 0) {
      finish(me);
      return;
    }
    tell_carried(me, w, copy->parent_owner, copy->parent, copy->index_in_parent,
                 link_address_of(copy));
  }
  void tell_carried(fabric::thread_context& me, worker& w, fabric::thread_id parent_owner,
                    std::uint64_t parent, std::uint32_t index, std::uint64_t address) {
    ++w.remote_calls;
    const fabric::thread_id owner = me.id();
    send(me, parent_owner, [parent, index, owner, address](fabric::thread_context& target) {
      auto* self = active_;
      self->guarded(target, [&] {
        self->carried(target, self->worker_of(target), reinterpret_cast<node*>(parent), index,
                      owner, address);
      });
    });
  }
  /// The parent's owner: edge `index` of the copy `parent` leads to (owner, address), or to
  /// nothing (address 0: no room for the child); the last child to report completes `parent`.
  void carried(fabric::thread_context& me, worker& w, node* parent, std::uint32_t index,
               fabric::thread_id owner, std::uint64_t address) {
    table& t = *parent->edges.load(std::memory_order_relaxed);
    t.child_word(index).store(address == 0 ? 0 : detail::child_link(address, owner),
                            std::memory_order_relaxed);
    if (--t.carry_pending == 0) report_carried(me, w, parent);
  }

  // ---- placement and transport ----

  /// The queue of a random local worker: the shorter of two picked at random, so that a thread
  /// busier with selections than the others (the root's owner, in remote-only mode) gets fewer
  /// leaves instead of leaving the others idle. Each queue keeps its one consumer.
  moodycamel::ConcurrentQueue<node*>& simulation_queue_for(worker& w) {
    const auto count = static_cast<std::uint32_t>(workers_.size());
    auto& first = workers_[w.rng.below(count)]->simulations;
    if (count == 1) return first;
    auto& second = workers_[w.rng.below(count)]->simulations;
    return second.size_approx() < first.size_approx() ? second : first;
  }

  fabric::thread_id pick_owner(worker& w, const state& s) {
    if constexpr (hashed_game<G>) {
      if (options_.placement == node_placement::hashed) {
        return static_cast<fabric::thread_id>(game_.hash(s) % thread_count_);
      }
    }
    return w.rng.below(static_cast<std::uint32_t>(thread_count_));
  }
  [[nodiscard]] bool steps_directly(const fabric::thread_context& me,
                                    fabric::thread_id owner) const noexcept {
    if (options_.remote_only) return false;
    return owner == me.id() || rt_.is_local(owner);
  }
  void send_select(fabric::thread_context& me, worker& w, fabric::thread_id owner,
                   std::uint64_t address) {
    ++w.remote_calls;
    send(me, owner, [address](fabric::thread_context& target) {
      auto* self = active_;
      self->guarded(target, [&] {
        self->select(target, self->worker_of(target), reinterpret_cast<node*>(address));
      });
    });
  }
  template <class F>
  void send(fabric::thread_context& me, fabric::thread_id dest, const F& f) {
    check(me, options_.channel, dest, dispatch(options_.channel, [&]<invoke::channel C>() {
            return invoke::call<C, invoke::policy::retry_async>(me, dest, f);
          }));
  }
  template <class F>
  void invoke_buffer(fabric::thread_context& me, fabric::thread_id dest, const F& f,
                     std::span<const std::byte> bytes) {
    check(me, options_.channel, dest, dispatch(options_.channel, [&]<invoke::channel C>() {
            return invoke::call_buffer<C, invoke::policy::retry_async>(me, dest, f, bytes);
          }));
  }
  template <class Body>
  static call_status dispatch(invoke::channel c, Body&& body) {
    switch (c) {
      case invoke::channel::send:
        return body.template operator()<invoke::channel::send>();
      case invoke::channel::write:
        return body.template operator()<invoke::channel::write>();
      case invoke::channel::trad:
        return body.template operator()<invoke::channel::trad>();
      case invoke::channel::ovfl:
        return body.template operator()<invoke::channel::ovfl>();
    }
    return call_status::error;
  }
  /// A rollout whose call could not be sent would never come back: the search cannot finish.
  /// The message says what `status` means on channel `c` (which limit, for too_large).
  static void check(fabric::thread_context& me, invoke::channel c, fabric::thread_id dest,
                    call_status status) {
    if (status != call_status::ok) {
      throw error(fmt::format(
          "mcts: a call to thread {} failed ({}); the search cannot go on{}", dest,
          invoke::describe(me, status, c),
          status == call_status::full
              ? " (queue room: raise SERIEMA_EXCEEDING_LIMIT or SERIEMA_MAX_CHUNKS, or lower "
                "rollouts_in_flight)"
              : ""));
    }
  }

  [[nodiscard]] std::size_t local_index(fabric::thread_id t) const noexcept {
    return static_cast<std::size_t>(rt_.placement().locate(t).local_thread);
  }
  worker& worker_of(const fabric::thread_context& me) noexcept {
    return *workers_[local_index(me.id())];
  }
  static std::uint64_t address_of(const node* n) noexcept {
    return reinterpret_cast<std::uint64_t>(n);
  }
  /// A node's address for its parent's link (detail::child_link), which holds 48 bits of it.
  static std::uint64_t link_address_of(const node* n) {
    const std::uint64_t address = address_of(n);
    if (!detail::fits_link(address)) {
      throw error(fmt::format("mcts: a tree node at {:#x} lies above the 48 address bits a link "
                              "holds",
                              address));
    }
    return address;
  }

  fabric::runtime& rt_;
  G game_;
  distributed_options options_;
  tree_memory_counters memory_;
  std::vector<std::unique_ptr<worker>> workers_;  ///< by local thread index
  distributed_counters counters_;

  /// Per search, written by the main thread before run() (the threads start after).
  std::uint32_t K_ = 16;
  double exploration_ = 1;
  bool rave_ = false;
  bool solver_ = false;
  std::uint64_t expansion_visits_ = 1;
  double rave_equivalence_ = 1000;
  fabric::thread_id thread_count_ = 1;
  std::uint32_t window_ = 4;
  std::uint64_t budget_ = 0;
  bool has_deadline_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point deadline_;
  const std::function<void(std::uint64_t, double)>* progress_ = nullptr;
  node* root_ = nullptr;  ///< rank 0 only
  /// Between searches: the last search's tree is still in the pools (reuse_tree; every rank).
  bool kept_ = false;
  /// Rank 0: the kept tree's root position, and whether the next search may start from it
  /// (not after set_game).
  state kept_root_{};
  bool kept_root_valid_ = false;
  bool kept_rave_ = false;    ///< rank 0: the kept tree's search_options::rave
  bool kept_solver_ = false;  ///< rank 0: the kept tree's search_options::solver
  /// The carry phase (carry_over) is running; during it, rank 0's kept root, and the path.
  bool carrying_ = false;
  const node* carry_from_ = nullptr;
  std::uint32_t carry_path_length_ = 0;
  move carry_path_[detail::reuse_depth]{};
  std::uint64_t reused_visits_ = 0;  ///< rank 0: the root's visits when the search started
  std::uint64_t reused_nodes_here_ = 0;  ///< nodes of this process the search started with
  /// Root process: rollouts started (with stop_bit once no more may start); taken once per
  /// batch (the completions are counted per thread). Its own cache line, apart from the words
  /// every loop iteration reads.
  alignas(64) std::atomic<std::uint64_t> started_{0};
  alignas(64) std::atomic<bool> finish_sent_{false};
  /// Set by the first failure in this process (or a peer's abort call); failure_ says why.
  /// Read by every loop iteration and step, written once: a line of its own.
  alignas(64) std::atomic<bool> aborted_{false};
  /// Set by the first refusal of a pool in this search (note_budget_reached), which alone
  /// writes the two words after it; they are read after the threads stopped.
  alignas(64) std::atomic<bool> budget_noted_{false};
  std::uint64_t budget_reached_nanoseconds_ = 0;
  std::uint64_t budget_reached_rollouts_ = 0;
  std::mutex failure_mutex_;
  std::string failure_;
};

}  // namespace seriema::mcts

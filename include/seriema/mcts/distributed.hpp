// Distributed tree-parallel MCTS (paper §5.3) over any seriema::mcts::game: one search tree
// whose nodes are owned by the threads of every process, grown and walked by remote calls.
// The class is declared here; its members are defined in detail/distributed/, one header per
// part of the search (the sections of the class name them), included at the end of this one.
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
      command.priors = detail::uses_priors(game_, options.knowledge) ? 1 : 0;
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

  // ---- one search on this rank: rank 0's command, then the phases every rank runs
  //      (detail/distributed/run.hpp) ----

  void validate(const state& root, const search_options& options) const;
  [[nodiscard]] std::uint32_t window_for(fabric::thread_id threads) const noexcept;
  static detail::search_command<G> make_command(detail::command_kind kind, const state& root,
                                                const search_options& options);
  void plan_reuse(detail::search_command<G>& c, const state& root,
                  const search_options& options) const;
  detail::search_command<G> exchange(const detail::search_command<G>& mine);
  search_result<move> run_search(const detail::search_command<G>& command,
                                 const search_options* rank0_options);
  void prepare(const detail::search_command<G>& command, const search_options* rank0_options);
  static std::uint64_t search_budget(const detail::search_command<G>& command) noexcept;
  void plant_root(const detail::search_command<G>& command);
  void release_tree() noexcept;
  void prepare_worker(std::size_t i, std::uint64_t seed);
  void fail_everywhere_if_failed(const std::exception_ptr& run_error);
  std::string reason_of(const std::exception_ptr& failure) const;

  // ---- the result, the counters and the memory report (detail/distributed/result.hpp) ----

  search_result<move> collect_result(const detail::search_command<G>& command, double seconds);
  void keep_or_release_tree(const detail::search_command<G>& command);
  search_result<move> root_statistics() const;
  void share_best_move(search_result<move>& result);
  void put_proof_in(search_result<move>& result) const;

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
  memory_report gather_memory_report(std::uint64_t tree_bytes);
  void note_budget_reached();

  // ---- the threads' loop: serve calls, simulate, start rollouts (root process only)
  //      (detail/distributed/thread_loop.hpp) ----

  void thread_main(fabric::thread_context& me);
  std::size_t start_rollouts(fabric::thread_context& me, worker& w);
  [[nodiscard]] player root_winner() const noexcept;
  [[nodiscard]] bool root_decided() const noexcept;
  [[nodiscard]] std::uint64_t completed_rollouts() const noexcept;
  void stop(fabric::thread_context& me);
  void complete_rollout(fabric::thread_context& me);
  void finish(fabric::thread_context& me);
  template <class Step>
  void guarded(fabric::thread_context& me, Step&& step) noexcept;
  void abort_search(fabric::thread_context& me, const std::string& what) noexcept;

  // ---- the four steps of a rollout: selection (detail/distributed/selection.hpp) ----

  void select(fabric::thread_context& me, worker& w, node* n);
  bool stays_leaf(node* n) noexcept;
  std::uint32_t choose(const node* n, const table& t) const noexcept;
  table* edges_of(worker& w, node* n);
  static std::atomic<std::uint64_t>* child_slot(tree_pool& pool, table& t, std::uint32_t index);
  table* allocate_table(tree_pool& pool, std::size_t count, bool root);

  // ---- expansion (detail/distributed/expansion.hpp) ----

  void expand(fabric::thread_context& me, worker& w, node* n, std::uint32_t index, move m);
  void create(fabric::thread_context& me, worker& w, fabric::thread_id owner, const state& s,
              fabric::thread_id parent_owner, std::uint64_t parent, std::uint32_t index);
  void located(fabric::thread_context& me, worker& w, node* n, std::uint32_t index,
               fabric::thread_id owner, std::uint64_t address);
  void tell_not_stored(fabric::thread_context& me, worker& w, fabric::thread_id parent_owner,
                       std::uint64_t parent, std::uint32_t index);
  void not_stored(fabric::thread_context& me, worker& w, node* n, std::uint32_t index);

  // ---- simulation (detail/distributed/simulation.hpp) ----

  void play_out_unstored(fabric::thread_context& me, worker& w, node* n, std::uint32_t index);
  void simulate(fabric::thread_context& me, worker& w, node* leaf);
  player play_out(worker& w, const state& s);
  static void add_result(player winner, std::uint32_t games, std::uint32_t& points1,
                         std::uint32_t& points2) noexcept;

  // ---- backpropagation (detail/distributed/backpropagation.hpp) ----

  void backpropagate(fabric::thread_context& me, worker& w, const node* child,
                     std::uint32_t points1, std::uint32_t points2, player proven);
  void backpropagate_from(fabric::thread_context& me, worker& w, node* parent,
                          std::uint32_t index, std::uint32_t points1, std::uint32_t points2,
                          player proven);
  void send_backpropagation_with_record(fabric::thread_context& me, worker& w,
                                        fabric::thread_id parent_owner, std::uint64_t parent,
                                        std::uint32_t index, std::uint32_t points1,
                                        std::uint32_t points2, player proven);
  player credit(worker& w, node* n, std::uint32_t index, std::uint32_t points1,
                std::uint32_t points2, player proven);
  static player prove(table& t, std::uint32_t index, player chooser, player proven);
  void credit_amaf(worker& w, table& t, std::uint32_t index, player chooser,
                   std::uint32_t points) requires amaf_game<G>;

  // ---- carrying a kept tree into the next search (search_options::reuse_tree)
  //      (detail/distributed/carry_over.hpp, which describes the phase) ----

  void carry_over(const detail::search_command<G>& command);
  void descend(fabric::thread_context& me, worker& w, const node* n, std::uint32_t depth);
  void send_root_image(fabric::thread_context& me, worker& w, const node* n);
  void adopt_root(fabric::thread_context& me, worker& w, std::span<const std::byte> bytes);
  void carry_node(fabric::thread_context& me, worker& w, const node* kept,
                  fabric::thread_id parent_owner, std::uint64_t parent, std::uint32_t index);
  node* rebuild(fabric::thread_context& me, worker& w, const detail::node_image<G>& image,
                fabric::thread_id parent_owner, std::uint64_t parent, std::uint32_t index);
  void copy_edge(worker& w, table& t, std::uint32_t i, const detail::carried_edge<G>& e);
  void carry_children(fabric::thread_context& me, worker& w, node* copy);
  void report_carried(fabric::thread_context& me, worker& w, node* copy);
  void tell_carried(fabric::thread_context& me, worker& w, fabric::thread_id parent_owner,
                    std::uint64_t parent, std::uint32_t index, std::uint64_t address);
  void carried(fabric::thread_context& me, worker& w, node* parent, std::uint32_t index,
               fabric::thread_id owner, std::uint64_t address);

  // ---- placement and transport (detail/distributed/transport.hpp) ----

  moodycamel::ConcurrentQueue<node*>& simulation_queue_for(worker& w);
  fabric::thread_id pick_owner(worker& w, const state& s);
  [[nodiscard]] bool steps_directly(const fabric::thread_context& me,
                                    fabric::thread_id owner) const noexcept;
  void send_select(fabric::thread_context& me, worker& w, fabric::thread_id owner,
                   std::uint64_t address);
  template <class F>
  void send(fabric::thread_context& me, fabric::thread_id dest, const F& f);
  template <class F>
  void invoke_buffer(fabric::thread_context& me, fabric::thread_id dest, const F& f,
                     std::span<const std::byte> bytes);
  template <class Body>
  static call_status dispatch(invoke::channel c, Body&& body);
  /// A rollout whose call could not be sent would never come back: the search cannot finish.
  /// The message says what `status` means on channel `c` (which limit, for too_large).
  static void check(fabric::thread_context& me, invoke::channel c, fabric::thread_id dest,
                    call_status status);
  [[nodiscard]] std::size_t local_index(fabric::thread_id t) const noexcept;
  worker& worker_of(const fabric::thread_context& me) noexcept;
  static std::uint64_t address_of(const node* n) noexcept;
  static std::uint64_t link_address_of(const node* n);

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
  bool knowledge_ = false;
  bool priors_ = false;  ///< uses_priors: every edge table has priors()
  double prior_bias_ = 1.0;
  std::uint64_t expansion_visits_ = 1;
  double rave_equivalence_ = 1000;
  fabric::thread_id thread_count_ = 1;
  std::uint32_t window_ = 4;
  std::uint64_t budget_ = 0;
  bool has_deadline_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point deadline_;
  const std::function<void(std::uint64_t, double)>* progress_ = nullptr;
  /// Rank 0's search_options::stop (null elsewhere): read where the deadline is.
  const std::atomic<bool>* stop_ = nullptr;
  node* root_ = nullptr;  ///< rank 0 only
  /// Between searches: the last search's tree is still in the pools (reuse_tree; every rank).
  bool kept_ = false;
  /// Rank 0: the kept tree's root position, and whether the next search may start from it
  /// (not after set_game).
  state kept_root_{};
  bool kept_root_valid_ = false;
  bool kept_rave_ = false;       ///< rank 0: the kept tree's search_options::rave
  bool kept_solver_ = false;     ///< rank 0: the kept tree's search_options::solver
  bool kept_knowledge_ = false;  ///< rank 0: the kept tree's search_options::knowledge
  bool kept_priors_ = false;     ///< rank 0: whether the kept tree's tables hold priors
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

#include <seriema/mcts/detail/distributed/run.hpp>
#include <seriema/mcts/detail/distributed/result.hpp>
#include <seriema/mcts/detail/distributed/thread_loop.hpp>
#include <seriema/mcts/detail/distributed/selection.hpp>
#include <seriema/mcts/detail/distributed/expansion.hpp>
#include <seriema/mcts/detail/distributed/simulation.hpp>
#include <seriema/mcts/detail/distributed/backpropagation.hpp>
#include <seriema/mcts/detail/distributed/carry_over.hpp>
#include <seriema/mcts/detail/distributed/transport.hpp>

// distributed_search, one search on each rank: rank 0 checks the options and makes the command;
// every rank prepares its workers, plants the root, runs the threads and learns whether the
// search failed anywhere.
#pragma once

#include <seriema/mcts/distributed.hpp>

namespace seriema::mcts {

template <game G>
inline void distributed_search<G>::validate(const state& root,
                                            const search_options& options) const {
  if (options.rollouts == 0 && options.seconds <= 0) {
    throw std::invalid_argument("search: set a budget (rollouts > 0 or seconds > 0)");
  }
  if (options.playouts_per_leaf == 0 || options.playouts_per_leaf > 0xffff) {
    throw std::invalid_argument("search: playouts_per_leaf must be in 1..65535");
  }
  detail::check_rave<G>(options, "search");
  detail::check_prior_bias(options, "search");
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
template <game G>
inline std::uint32_t distributed_search<G>::window_for(fabric::thread_id threads) const noexcept {
  return options_.rollouts_in_flight != 0 ? options_.rollouts_in_flight
                                          : 16 * static_cast<std::uint32_t>(threads);
}

template <game G>
inline detail::search_command<G> distributed_search<G>::make_command(
    detail::command_kind kind, const state& root, const search_options& options) {
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
  c.knowledge = options.knowledge ? 1 : 0;
  c.expansion_visits = options.expansion_visits;
  c.rave_equivalence = options.rave_equivalence;
  c.prior_bias = options.prior_bias;
  c.reuse_tree = options.reuse_tree ? 1 : 0;
  c.root = root;
  return c;
}

/// Rank 0: what of the kept tree the search starts from (the kept root, the subtree up to
/// two moves below it that holds `root`, or nothing: also when the tree was grown with another
/// rave or solver setting, whose tables lack the AMAF statistics or lost bits this one reads,
/// or another knowledge or priors setting, whose tables hold other moves or lack priors).
template <game G>
inline void distributed_search<G>::plan_reuse(detail::search_command<G>& c, const state& root,
                                              const search_options& options) const {
  if (!options.reuse_tree || !kept_ || !kept_root_valid_) return;
  if (options.rave != kept_rave_ || options.solver != kept_solver_ ||
      options.knowledge != kept_knowledge_ || (c.priors != 0) != kept_priors_) {
    return;
  }
  const auto path = detail::moves_between(game_, kept_root_, root);
  if (!path) return;
  c.carry = path->empty() ? detail::carry_kind::same_root : detail::carry_kind::subtree;
  c.path_length = static_cast<std::uint8_t>(path->size());
  std::copy(path->begin(), path->end(), c.path);
}

template <game G>
inline detail::search_command<G> distributed_search<G>::exchange(
    const detail::search_command<G>& mine) {
  return detail::exchange_command(rt_, game_, mine);
}

/// One search on this rank, in four phases that each read or write the search state the
/// workers share: everything is set before the first worker starts (prepare), read after
/// the last one stopped (fail_everywhere_if_failed, collect_result).
template <game G>
inline auto distributed_search<G>::run_search(
    const detail::search_command<G>& command,
    const search_options* rank0_options) -> search_result<move> {
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
template <game G>
inline void distributed_search<G>::prepare(const detail::search_command<G>& command,
                                           const search_options* rank0_options) {
  K_ = command.playouts_per_leaf;
  exploration_ = command.exploration;
  rave_ = command.rave != 0;
  rave_equivalence_ = command.rave_equivalence;
  solver_ = command.solver != 0;
  knowledge_ = command.knowledge != 0;
  priors_ = command.priors != 0;  // rank 0's game decides: every table of the job alike
  prior_bias_ = command.prior_bias;
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
  stop_ = rank0_options != nullptr ? rank0_options->stop : nullptr;
  for (std::size_t i = 0; i < workers_.size(); ++i) prepare_worker(i, command.seed);
  carry_path_length_ = command.path_length;
  std::copy(std::begin(command.path), std::end(command.path), carry_path_);
}

/// The budget a search's tree grows to: with reuse_tree half of memory_budget, so that
/// carrying the kept subtree into a new tree (both held for a moment) stays within it.
template <game G>
inline std::uint64_t distributed_search<G>::search_budget(
    const detail::search_command<G>& command) noexcept {
  if (command.reuse_tree == 0 || command.memory_budget == 0) return command.memory_budget;
  return std::max<std::uint64_t>(command.memory_budget / 2, 1);
}

/// The root the search starts from (rank 0): the kept root, the carried subtree's root, or a
/// new one; a kept tree the search does not start from is freed everywhere.
template <game G>
inline void distributed_search<G>::plant_root(const detail::search_command<G>& command) {
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
template <game G>
inline void distributed_search<G>::release_tree() noexcept {
  for (auto& w : workers_) {
    w->pool.release();
    w->next_pool.release();
    w->nodes_held = w->nodes_carried = 0;
  }
  root_ = nullptr;
  kept_ = false;
  kept_root_valid_ = false;
}

template <game G>
inline void distributed_search<G>::prepare_worker(std::size_t i, std::uint64_t seed) {
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
template <game G>
inline void distributed_search<G>::fail_everywhere_if_failed(const std::exception_ptr& run_error) {
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
template <game G>
inline std::string distributed_search<G>::reason_of(const std::exception_ptr& failure) const {
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

}  // namespace seriema::mcts

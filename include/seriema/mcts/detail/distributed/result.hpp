// distributed_search after its threads stopped: the result (rank 0: the root's statistics and
// the solver's proof), the job-wide counters, the memory report (collective), and the tree
// kept for the next search or released.
#pragma once

#include <seriema/mcts/distributed.hpp>

namespace seriema::mcts {

/// The result (rank 0: the root's statistics and the proof), the job-wide counters and the
/// memory report (collective), and every process's tree released.
template <game G>
inline auto distributed_search<G>::collect_result(const detail::search_command<G>& command,
                                                  double seconds) -> search_result<move> {
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
template <game G>
inline void distributed_search<G>::keep_or_release_tree(const detail::search_command<G>& command) {
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
    kept_knowledge_ = command.knowledge != 0;
    kept_priors_ = command.priors != 0;
  }
}

/// Rank 0: the root's moves, most convincing first, and the solver's proof; elsewhere empty.
template <game G>
inline auto distributed_search<G>::root_statistics() const -> search_result<move> {
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
template <game G>
inline void distributed_search<G>::share_best_move(search_result<move>& result) {
  if constexpr (sizeof(move) <= sizeof(std::uint64_t)) {
    std::uint64_t best_bits = 0;
    if (rt_.rank() == 0) std::memcpy(&best_bits, &result.best, sizeof(move));
    best_bits = rt_.allreduce_sum(best_bits);
    std::memcpy(&result.best, &best_bits, sizeof(move));
  }
}

/// Root process, after the search: the solver's proof of the root, if any, in the result.
template <game G>
inline void distributed_search<G>::put_proof_in(search_result<move>& result) const {
  if (!solver_) return;
  result.proven_winner = root_winner();
  if (result.proven_winner != game_.to_move(root_->state)) return;
  const table& t = *root_->edges.load(std::memory_order_acquire);
  detail::put_proven_move_first(result, t.moves()[t.won_edge]);
}

template <game G>
inline auto distributed_search<G>::gather_memory_report(std::uint64_t tree_bytes) -> memory_report {
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
template <game G>
inline void distributed_search<G>::note_budget_reached() {
  if (budget_noted_.load(std::memory_order_relaxed) || budget_noted_.exchange(true)) return;
  budget_reached_nanoseconds_ = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                           start_)
          .count());
  if (rt_.rank() == 0) budget_reached_rollouts_ = completed_rollouts();
}

}  // namespace seriema::mcts

// Time management of the Hex program under a GTP clock (see time_control.hpp).
#include "time_control.hpp"

#include <algorithm>

namespace seriema::hex {

clock_state starting_clock(const time_settings& settings) noexcept {
  if (settings.main_time <= 0 && settings.has_byo_yomi()) {
    return {settings.byo_yomi_time, settings.byo_yomi_stones};
  }
  return {settings.main_time, 0};
}

time_budget plan_move_time(const time_settings& settings, const clock_state& clock,
                           int empty_cells, const time_policy& policy) noexcept {
  const double usable = std::max(
      0.0, clock.seconds * (1 - policy.reserve_share) - policy.reserve_seconds);
  int moves = clock.stones;
  if (moves <= 0) {
    const int expected = (std::max(empty_cells, 0) + policy.cells_per_own_move - 1) /
                         std::max(policy.cells_per_own_move, 1);
    moves = std::max(expected, policy.min_moves_to_plan);
  }
  double base = usable / moves;
  if (clock.stones <= 0 && settings.has_byo_yomi()) {
    // Main time runs into a byo-yomi: its rate is always affordable, whatever main time is left.
    base = std::max(base, settings.byo_yomi_time * (1 - policy.reserve_share) /
                              settings.byo_yomi_stones - policy.reserve_seconds);
  }
  double maximum = moves == 1 ? usable
                              : std::min(policy.extension_factor * base,
                                         policy.max_share_of_left * usable);
  if (clock.stones <= 0 && settings.has_byo_yomi()) maximum = std::max(maximum, base);
  base = std::max(base, policy.min_seconds);
  maximum = std::max(maximum, base);
  return {base, maximum};
}

bool worth_extending(std::span<const mcts::move_statistics<hex::move>> moves,
                     const time_policy& policy) noexcept {
  if (moves.size() < 2 || moves[0].visits == 0) return false;
  std::uint64_t total = 0;
  for (const auto& m : moves) total += m.visits;
  const double best = static_cast<double>(moves[0].visits);
  const double runner_up = static_cast<double>(moves[1].visits);
  return best < policy.critical_best_share * static_cast<double>(total) ||
         runner_up >= policy.critical_runner_up_ratio * best;
}

clock_state after_move(const time_settings& settings, clock_state clock, double spent) noexcept {
  clock.seconds -= spent;
  if (clock.stones <= 0) {  // main time
    if (clock.seconds >= 0 || !settings.has_byo_yomi()) {
      clock.seconds = std::max(clock.seconds, 0.0);
      return clock;
    }
    // Main time ran out during this move: the rest came from the first period.
    clock = {settings.byo_yomi_time + clock.seconds, settings.byo_yomi_stones};
  }
  clock.stones -= 1;
  if (clock.seconds < 0) return {0, std::max(clock.stones, 1)};  // lost on time
  if (clock.stones == 0) return {settings.byo_yomi_time, settings.byo_yomi_stones};
  return clock;
}

namespace {

// `more`'s costs added to out's: what two searches took together.
void add_costs(mcts::search_result<hex::move>& out,
               const mcts::search_result<hex::move>& more) {
  out.rollouts += more.rollouts;
  out.playouts += more.playouts;
  out.tree_nodes += more.tree_nodes;
  out.remote_calls += more.remote_calls;
  out.seconds += more.seconds;
}

// b went on from a's tree (tree reuse kept a's root): b's statistics, both searches' costs,
// and what a started from.
mcts::search_result<hex::move> continued(const mcts::search_result<hex::move>& a,
                                         const mcts::search_result<hex::move>& b) {
  mcts::search_result<hex::move> out = b;
  out.reused_visits = a.reused_visits;
  out.reused_nodes = a.reused_nodes;
  add_costs(out, a);
  return out;
}

}  // namespace

mcts::search_result<hex::move> merged(const mcts::search_result<hex::move>& a,
                                      const mcts::search_result<hex::move>& b) {
  if (b.reused_visits != 0) return continued(a, b);
  mcts::search_result<hex::move> out = a;
  for (const auto& m : b.moves) {
    const auto same = std::find_if(out.moves.begin(), out.moves.end(),
                                   [&](const auto& o) { return o.move == m.move; });
    if (same == out.moves.end()) {
      out.moves.push_back(m);
    } else {
      same->visits += m.visits;
      same->wins += m.wins;
    }
  }
  std::stable_sort(out.moves.begin(), out.moves.end(),
                   mcts::more_convincing<hex::move>);
  if (!out.moves.empty()) {
    out.best = out.moves.front().move;
    out.win_rate = out.moves.front().win_rate();
  }
  add_costs(out, b);
  return out;
}

}  // namespace seriema::hex

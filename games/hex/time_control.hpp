// Time management of the Hex program under a GTP clock: the clock's state as time_settings and
// time_left give it, how much of it one genmove may spend, when a search is worth extending,
// and what a move costs the engine's own clock. Pure functions, tested on their own.
#pragma once

#include <seriema/mcts/search.hpp>
#include <span>

#include "hex.hpp"

namespace seriema::hex {

// GTP 2's time settings (time_settings main_time byo_yomi_time byo_yomi_stones): main time,
// then Canadian byo-yomi periods of byo_yomi_stones moves in byo_yomi_time seconds each.
// byo_yomi_time 0 is absolute time (main time only).
struct time_settings {
  double main_time = 0;
  double byo_yomi_time = 0;
  int byo_yomi_stones = 0;
  // GTP 2: byo_yomi_time > 0 with byo_yomi_stones 0 means no time limits.
  [[nodiscard]] bool unlimited() const noexcept {
    return byo_yomi_time > 0 && byo_yomi_stones == 0;
  }
  [[nodiscard]] bool has_byo_yomi() const noexcept {
    return byo_yomi_time > 0 && byo_yomi_stones > 0;
  }
};

// One colour's clock as time_left states it: seconds left in the current period, and the moves
// to play in it (0: main time, or absolute time).
struct clock_state {
  double seconds = 0;
  int stones = 0;
};

// The clock of both colours at the start of a game under `settings`.
[[nodiscard]] clock_state starting_clock(const time_settings& settings) noexcept;

// The knobs of the rule below, with their defaults (docs/mcts.md, "Time management").
struct time_policy {
  double reserve_seconds = 0.05;   // kept back per move: the GTP round trip, the search's stop
  double reserve_share = 0.05;     // and a share of what is left, for the same reasons
  int cells_per_own_move = 4;      // a game ends with about a quarter of its empty cells
  int min_moves_to_plan = 2;       // main time is never planned for fewer moves than this
  double extension_factor = 2.0;   // a critical move may take this many base budgets ...
  double max_share_of_left = 0.5;  // ... but never more than this share of the usable time
  double min_seconds = 0.01;       // the least search, even when the clock has run out
  double critical_best_share = 0.3;      // critical: the best move has under this visit share
  double critical_runner_up_ratio = 0.75;  // or the second has this fraction of its visits
};

// How long one genmove may search: `base` at first, up to `maximum` if the move is critical.
struct time_budget {
  double base = 0;
  double maximum = 0;
};

// The budget of the next move with `clock` left, `empty_cells` empty cells on the board.
// Main time: the usable time (left minus the reserve) over the moves still expected
// (empty cells / cells_per_own_move, at least min_moves_to_plan), never under the byo-yomi's
// own rate when one follows. Byo-yomi: the usable time over the stones left in the period.
// maximum = min(extension_factor * base, max_share_of_left * usable), or all of the usable
// time for the period's last stone. Both at least min_seconds.
[[nodiscard]] time_budget plan_move_time(const time_settings& settings, const clock_state& clock,
                                         int empty_cells, const time_policy& policy = {}) noexcept;

// Whether a search's root statistics (more_convincing first) leave the choice open: the best
// move has a low share of the visits, or the runner-up is close behind it in visits.
[[nodiscard]] bool worth_extending(std::span<const mcts::move_statistics<hex::move>> moves,
                                   const time_policy& policy = {}) noexcept;

// The clock after a move that took `spent` seconds, when no time_left corrects it: main time
// runs into the byo-yomi when there is one (the overflow taken from its first period); each
// move in byo-yomi uses one stone, and the period restarts when its stones are played. A clock
// that ran out stays at 0 seconds.
[[nodiscard]] clock_state after_move(const time_settings& settings, clock_state clock,
                                     double spent) noexcept;

// Two searches of the same position as one, costs added. When b went on from a's tree (tree
// reuse: b.reused_visits != 0, its root statistics already hold a's), b's moves as they are;
// else per-move visits and wins added, moves re-sorted (more_convincing first), best and
// win_rate those of the new first.
[[nodiscard]] mcts::search_result<hex::move> merged(const mcts::search_result<hex::move>& a,
                                                    const mcts::search_result<hex::move>& b);

}  // namespace seriema::hex

// The Go Text Protocol as Hex programs speak it (HexGui, the Hex GTP tools): one session of
// commands against one game, with the engine's move choice behind a callback.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <iosfwd>
#include <seriema/mcts/search.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "hex.hpp"
#include "time_control.hpp"

namespace seriema::hex {

// How a session starts and when it resigns (docs/mcts.md, "seriema-hex over GTP").
struct gtp_options {
  int size = hex::default_size;
  bool swap_rule = false;  // param_game allow_swap changes it
  playout_policy policy = playout_policy::random;  // the games' playouts, across boardsize
  knowledge_sources knowledge{};  // what the games' prune() uses, across boardsize
  // genmove answers `resign` when the chosen move's win rate is below this, the search had at
  // least resign_min_rollouts rollouts and at least `size` moves were played, or when the
  // search proved the position lost (search_result::proven_winner). 0: never.
  double resign_threshold = 0.05;
  std::uint64_t resign_min_rollouts = 1000;
  std::ostream* log = nullptr;  // one line per genmove under a clock (null: none)
};

// Answers GTP commands one line at a time. Responses are "=[id] text\n\n" on success and
// "?[id] message\n\n" on failure. Commands: protocol_version, name, version, known_command,
// list_commands, boardsize, clear_board, play, genmove, showboard, final_score, undo, quit,
// time_settings, time_left, param_game, hexgui-analyze_commands.
// "play" and "genmove" take either colour regardless of whose turn it is (as GTP allows); the
// move is then played by that colour and the opponent is to move. Once a side is connected,
// genmove answers `resign` for either colour (as MoHex does) and play accepts only `resign`.
// Thread-safety: none (one session per connection).
class gtp_session {
 public:
  // The longest input line a session takes: a longer one is answered "? line too long (N bytes,
  // limit 65536)" (run() reads and drops its rest in bounded memory), and an error never echoes
  // more than a short prefix of what it refuses, so one huge line costs kilobytes, not copies
  // of itself.
  static constexpr std::size_t max_line_bytes = std::size_t{64} << 10;

  // The engine: called with the position where the colour asked for is to move (the game not
  // over) and a time budget in seconds (0: the engine's own budget, no clock is set); returns
  // its search's result, whose best move is legal in that position.
  using engine = std::function<mcts::search_result<hex::move>(
      const hex& game, const hex::state& position, double seconds)>;

  // Throws std::invalid_argument when `size` is outside [hex::min_size, hex::max_size].
  gtp_session(engine genmove, std::string name, std::string version,
              int size = hex::default_size, bool swap_rule = false);
  gtp_session(engine genmove, std::string name, std::string version, gtp_options options);

  // The full response to one input line, or "" for a line that is blank once comments are
  // stripped. Never throws: a failure of any kind is answered with "?" (a line longer than
  // max_line_bytes with "? line too long").
  std::string handle(std::string_view line);
  // Reads commands until "quit" or the end of `in`, flushing `out` after every response. Keeps
  // at most max_line_bytes of a line: the rest of a longer one is read and dropped.
  void run(std::istream& in, std::ostream& out);

  [[nodiscard]] bool quit_requested() const noexcept { return quit_requested_; }
  [[nodiscard]] const hex& game() const noexcept { return game_; }
  [[nodiscard]] const hex::state& position() const noexcept { return position_; }
  // Whether a clock is set (time_settings with limits, or time_left), and `who`'s clock.
  [[nodiscard]] bool clock_set() const noexcept { return clock_set_; }
  [[nodiscard]] const clock_state& clock(player who) const noexcept { return clocks_[who - 1]; }

 private:
  struct reply {
    bool success;
    std::string text;
  };
  // The protocol's own commands; the others go on to dispatch_game (the board, the clock).
  reply dispatch(std::string_view command, const std::vector<std::string_view>& args);
  reply dispatch_game(std::string_view command, const std::vector<std::string_view>& args);
  reply boardsize(const std::vector<std::string_view>& args);
  reply play(const std::vector<std::string_view>& args);
  reply genmove(const std::vector<std::string_view>& args);
  reply time_settings_command(const std::vector<std::string_view>& args);
  reply time_left(const std::vector<std::string_view>& args);
  reply param_game(const std::vector<std::string_view>& args);
  reply undo();
  // The engine's search for `position`, extended once when the clock allows and the first
  // search leaves the choice open.
  mcts::search_result<hex::move> search(const hex::state& position);
  // One engine call, its seconds the longer of its own measure and the wall time seen here.
  mcts::search_result<hex::move> timed_search(const hex::state& position, double seconds);
  [[nodiscard]] bool should_resign(const mcts::search_result<hex::move>& result) const noexcept;
  void reset(int size);
  [[nodiscard]] bool game_over() const noexcept;

  engine genmove_;
  std::string name_;
  std::string version_;
  gtp_options options_;
  hex game_;
  hex::state position_;
  // The positions before each play or genmove since the last boardsize or clear_board, oldest
  // first: undo returns to the last one.
  std::vector<hex::state> history_;
  time_settings time_settings_;
  bool clock_set_ = false;
  bool settings_given_ = false;  // time_settings with limits (clear_board restarts the clocks)
  std::array<clock_state, 2> clocks_{};  // black's, white's
  bool quit_requested_ = false;
};

}  // namespace seriema::hex

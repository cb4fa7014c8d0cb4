// The Go Text Protocol as Hex programs speak it (HexGui, the Hex GTP tools): one session of
// commands against one game, with the engine's move choice behind a callback.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "hex.hpp"

namespace seriema::hex {

// Answers GTP commands one line at a time. Responses are "=[id] text\n\n" on success and
// "?[id] message\n\n" on failure. Commands: protocol_version, name, version, known_command,
// list_commands, boardsize, clear_board, play, genmove, showboard, final_score, undo, quit,
// hexgui-analyze_commands.
// "play" and "genmove" take either colour regardless of whose turn it is (as GTP allows); the
// move is then played by that colour and the opponent is to move.
// Thread-safety: none (one session per connection).
class gtp_session {
 public:
  // The engine: called with the position where the colour asked for is to move (the game not
  // over); returns a legal move of that position.
  using engine = std::function<hex::move(const hex& game, const hex::state& position)>;

  // Throws std::invalid_argument when `size` is outside [hex::min_size, hex::max_size].
  gtp_session(engine genmove, std::string name, std::string version,
              int size = hex::default_size, bool swap_rule = false);

  // The full response to one input line, or "" for a line that is blank once comments are
  // stripped. Never throws: a failure of any kind is answered with "?".
  std::string handle(std::string_view line);
  // Reads commands until "quit" or the end of `in`, flushing `out` after every response.
  void run(std::istream& in, std::ostream& out);

  [[nodiscard]] bool quit_requested() const noexcept { return quit_requested_; }
  [[nodiscard]] const hex& game() const noexcept { return game_; }
  [[nodiscard]] const hex::state& position() const noexcept { return position_; }

 private:
  struct reply {
    bool success;
    std::string text;
  };
  reply dispatch(std::string_view command, const std::vector<std::string_view>& args);
  reply boardsize(const std::vector<std::string_view>& args);
  reply play(const std::vector<std::string_view>& args);
  reply genmove(const std::vector<std::string_view>& args);
  reply undo();
  void reset(int size);
  [[nodiscard]] bool game_over() const noexcept;

  engine genmove_;
  std::string name_;
  std::string version_;
  bool swap_rule_;
  hex game_;
  hex::state position_;
  // The positions before each play or genmove since the last boardsize or clear_board, oldest
  // first: undo returns to the last one.
  std::vector<hex::state> history_;
  bool quit_requested_ = false;
};

}  // namespace seriema::hex

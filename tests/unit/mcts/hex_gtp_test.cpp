// Unit tests of the Hex program's GTP session (scripted against a deterministic fake engine:
// exact responses, board effects, errors, undo, the end of the game, resignation, the clock,
// the swap rule), of its time management as pure functions, and of its progress bar.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <seriema/mcts/game.hpp>
#include <seriema/mcts/search.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "gtp.hpp"
#include "hex.hpp"
#include "progress.hpp"
#include "time_control.hpp"

namespace {

using seriema::hex::clock_state;
using seriema::hex::gtp_options;
using seriema::hex::gtp_session;
using seriema::hex::hex;
using seriema::hex::progress_bar;
using seriema::hex::time_settings;
using result = seriema::mcts::search_result<hex::move>;

// A search result that chose `move` after `rollouts` rollouts at `win_rate`, spending `seconds`.
result answer(hex::move move, double seconds = 0, double win_rate = 0.5,
              std::uint64_t rollouts = 100) {
  result r;
  r.best = move;
  r.win_rate = win_rate;
  r.moves.push_back({move, rollouts, win_rate * static_cast<double>(rollouts)});
  r.rollouts = rollouts;
  r.seconds = seconds;
  return r;
}

hex::move first_empty(const hex& game, const hex::state& position) {
  for (int row = 0; row < game.size(); ++row) {
    for (int column = 0; column < game.size(); ++column) {
      if (game.cell(position, row, column) == seriema::mcts::nobody) return game.at(row, column);
    }
  }
  throw std::logic_error("no empty cell");
}

// The fake engine: the first empty cell in reading order, found at once. It records the colour
// it was asked to move for.
struct first_empty_cell {
  seriema::mcts::player* asked_for;
  result operator()(const hex& game, const hex::state& position, double) const {
    *asked_for = game.to_move(position);
    return answer(first_empty(game, position));
  }
};

bool same_position(const hex::state& a, const hex::state& b) {
  return a.stones == b.stones && a.moves_played == b.moves_played && a.size == b.size &&
         a.to_move == b.to_move && a.swapped == b.swapped;
}

std::string without_empty_lines(std::string_view text) {
  std::string out;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    if (end > at) {
      out.append(text.substr(at, end - at));
      out += '\n';
    }
    at = end + 1;
  }
  return out;
}

class gtp_test : public testing::Test {
 protected:
  seriema::mcts::player asked_for_ = seriema::mcts::nobody;
  gtp_session session_{first_empty_cell{&asked_for_}, "test-engine", "1.2.3", 3};

  std::string send(std::string_view line) { return session_.handle(line); }
  seriema::mcts::player at(int row, int column) const {
    return session_.game().cell(session_.position(), row, column);
  }
};

TEST_F(gtp_test, answers_the_administrative_commands_with_and_without_ids) {
  EXPECT_EQ(send("protocol_version"), "= 2\n\n");
  EXPECT_EQ(send("5 protocol_version"), "=5 2\n\n");
  EXPECT_EQ(send("name"), "= test-engine\n\n");
  EXPECT_EQ(send("12 version"), "=12 1.2.3\n\n");
  EXPECT_EQ(send("known_command play"), "= true\n\n");
  EXPECT_EQ(send("3 known_command final_score"), "=3 true\n\n");
  EXPECT_EQ(send("known_command fly"), "= false\n\n");
  EXPECT_EQ(send("known_command PLAY"), "= false\n\n");
  EXPECT_EQ(send("known_command"), "? syntax error: expected known_command NAME\n\n");
  EXPECT_EQ(send("fly"), "? unknown command\n\n");
  EXPECT_EQ(send("7 fly away"), "?7 unknown command\n\n");
  EXPECT_EQ(send("NAME"), "? unknown command\n\n");
  EXPECT_EQ(send("8"), "?8 syntax error: missing command\n\n");
  EXPECT_EQ(send("name please"), "? syntax error: expected name\n\n");
  EXPECT_FALSE(session_.quit_requested());
}

TEST_F(gtp_test, lists_every_command_one_per_line_and_knows_each) {
  EXPECT_EQ(send("list_commands"),
            "= protocol_version\nname\nversion\nknown_command\nlist_commands\nboardsize\n"
            "clear_board\nplay\ngenmove\nshowboard\nfinal_score\nundo\nquit\n"
            "time_settings\ntime_left\nparam_game\nhexgui-analyze_commands\n\n");
  for (const char* command : {"protocol_version", "name", "version", "known_command",
                              "list_commands", "boardsize", "clear_board", "play", "genmove",
                              "showboard", "final_score", "undo", "quit", "time_settings",
                              "time_left", "param_game", "hexgui-analyze_commands"}) {
    EXPECT_EQ(send(std::string("known_command ") + command), "= true\n\n") << command;
  }
}

// HexGui asks for its analyze menu on every connect: each line is type/label/command, and each
// command named there is one the session knows.
TEST_F(gtp_test, offers_hexgui_its_analyze_commands) {
  const std::string answer = send("hexgui-analyze_commands");
  EXPECT_EQ(answer,
            "= param/Game Param/param_game\nstring/Show Board/showboard\n"
            "string/Final Score/final_score\n\n");
  EXPECT_EQ(send("hexgui-analyze_commands now"),
            "? syntax error: expected hexgui-analyze_commands\n\n");
  for (const char* command : {"param_game", "showboard", "final_score"}) {
    EXPECT_EQ(send(std::string("known_command ") + command), "= true\n\n") << command;
  }
}

TEST_F(gtp_test, skips_blank_and_comment_lines_and_strips_comments) {
  EXPECT_EQ(send(""), "");
  EXPECT_EQ(send("   \t "), "");
  EXPECT_EQ(send("# a comment"), "");
  EXPECT_EQ(send("  # indented comment"), "");
  EXPECT_EQ(send("name # trailing comment"), "= test-engine\n\n");
  EXPECT_EQ(send("\t4\tname\r"), "=4 test-engine\n\n");
  EXPECT_EQ(send("play b a1#comment"), "= \n\n");
  EXPECT_EQ(at(0, 0), 1);
}

TEST_F(gtp_test, boardsize_changes_the_board_and_rejects_bad_sizes) {
  EXPECT_EQ(session_.game().size(), 3);
  EXPECT_EQ(send("boardsize 5"), "= \n\n");
  EXPECT_EQ(session_.game().size(), 5);
  EXPECT_EQ(session_.position().size, 5);
  EXPECT_EQ(send("2 boardsize 7 7"), "=2 \n\n");
  EXPECT_EQ(session_.game().size(), 7);
  EXPECT_EQ(send("boardsize 2"), "= \n\n");
  EXPECT_EQ(send("boardsize 19"), "= \n\n");
  EXPECT_EQ(session_.game().size(), 19);

  EXPECT_EQ(send("boardsize 1"), "? invalid board size\n\n");
  EXPECT_EQ(send("boardsize 20"), "? invalid board size\n\n");
  EXPECT_EQ(send("boardsize -3"), "? invalid board size\n\n");
  EXPECT_EQ(send("boardsize x"), "? syntax error: expected boardsize N [N]\n\n");
  EXPECT_EQ(send("boardsize 99999999999999999999"), "? syntax error: expected boardsize N [N]\n\n");
  EXPECT_EQ(send("boardsize"), "? syntax error: expected boardsize N [N]\n\n");
  EXPECT_EQ(send("boardsize 5 5 5"), "? syntax error: expected boardsize N [N]\n\n");
  EXPECT_EQ(send("boardsize 4 5"), "? non-square boards are not supported\n\n");
  EXPECT_EQ(session_.game().size(), 19);
}

TEST_F(gtp_test, boardsize_and_clear_board_empty_the_board_and_the_history) {
  ASSERT_EQ(send("play b a1"), "= \n\n");
  ASSERT_EQ(send("play w b2"), "= \n\n");
  EXPECT_EQ(send("clear_board"), "= \n\n");
  EXPECT_TRUE(same_position(session_.position(), session_.game().initial_state()));
  EXPECT_EQ(send("undo"), "? cannot undo\n\n");

  ASSERT_EQ(send("play b c3"), "= \n\n");
  EXPECT_EQ(send("boardsize 3"), "= \n\n");
  EXPECT_TRUE(same_position(session_.position(), session_.game().initial_state()));
  EXPECT_EQ(send("undo"), "? cannot undo\n\n");
  EXPECT_EQ(send("clear_board now"), "? syntax error: expected clear_board\n\n");
}

TEST_F(gtp_test, play_places_a_stone_of_either_colour_and_passes_the_turn) {
  EXPECT_EQ(send("play b a1"), "= \n\n");
  EXPECT_EQ(at(0, 0), 1);
  EXPECT_EQ(session_.position().to_move, 2);
  EXPECT_EQ(send("play white b3"), "= \n\n");  // column b, row 3
  EXPECT_EQ(at(2, 1), 2);
  EXPECT_EQ(session_.position().to_move, 1);
  EXPECT_EQ(send("play BLACK C1"), "= \n\n");
  EXPECT_EQ(at(0, 2), 1);
  EXPECT_EQ(send("4 play W a2"), "=4 \n\n");
  EXPECT_EQ(at(1, 0), 2);
  // Out of turn, as GTP allows: white again, then black is to move.
  EXPECT_EQ(send("play w c2"), "= \n\n");
  EXPECT_EQ(at(1, 2), 2);
  EXPECT_EQ(session_.position().to_move, 1);
}

TEST_F(gtp_test, play_rejects_malformed_commands_without_touching_the_position) {
  const hex::state before = session_.position();
  EXPECT_EQ(send("play"), "? syntax error: expected play COLOR MOVE\n\n");
  EXPECT_EQ(send("play b"), "? syntax error: expected play COLOR MOVE\n\n");
  EXPECT_EQ(send("play b a1 a2"), "? syntax error: expected play COLOR MOVE\n\n");
  EXPECT_EQ(send("play x a1"), "? syntax error: invalid color 'x'\n\n");
  EXPECT_EQ(send("play blue a1"), "? syntax error: invalid color 'blue'\n\n");
  EXPECT_EQ(send("play b z99"), "? syntax error: invalid move text 'z99'\n\n");
  EXPECT_EQ(send("play b a0"), "? syntax error: invalid move text 'a0'\n\n");
  EXPECT_EQ(send("play b a01"), "? syntax error: invalid move text 'a01'\n\n");
  EXPECT_EQ(send("play b 11"), "? syntax error: invalid move text '11'\n\n");
  EXPECT_EQ(send("play b pass"), "? syntax error: invalid move text 'pass'\n\n");
  EXPECT_EQ(send("6 play b a"), "?6 syntax error: invalid move text 'a'\n\n");
  EXPECT_TRUE(same_position(session_.position(), before));
  EXPECT_EQ(send("undo"), "? cannot undo\n\n");
}

TEST_F(gtp_test, play_rejects_cells_off_the_board_occupied_cells_and_illegal_swaps) {
  EXPECT_EQ(send("play b d1"), "? invalid move\n\n");
  EXPECT_EQ(send("play b a4"), "? invalid move\n\n");
  EXPECT_EQ(send("play b s19"), "? invalid move\n\n");
  ASSERT_EQ(send("play b b2"), "= \n\n");
  const hex::state before = session_.position();
  EXPECT_EQ(send("play w b2"), "? cell occupied\n\n");
  EXPECT_EQ(send("play b b2"), "? cell occupied\n\n");
  EXPECT_EQ(send("play w swap-pieces"), "? illegal move\n\n");  // swap rule off
  EXPECT_TRUE(same_position(session_.position(), before));
}

TEST(gtp_swap, swap_pieces_is_the_second_move_only_with_the_swap_rule) {
  seriema::mcts::player asked_for = seriema::mcts::nobody;
  gtp_session session{first_empty_cell{&asked_for}, "test-engine", "1.2.3", 5, true};
  EXPECT_EQ(session.handle("play b swap-pieces"), "? illegal move\n\n");
  ASSERT_EQ(session.handle("play b a2"), "= \n\n");
  const hex::state before = session.position();
  EXPECT_EQ(session.handle("play w swap-pieces"), "= \n\n");
  EXPECT_TRUE(session.position().swapped);
  EXPECT_EQ(session.handle("play w swap-pieces"), "? illegal move\n\n");
  EXPECT_EQ(session.handle("undo"), "= \n\n");
  EXPECT_TRUE(same_position(session.position(), before));
}

// The playout policy is the session's, kept when boardsize or param_game make a new game, and
// the engine's position names the last move played (the bridges playout answers it).
TEST(gtp_policy, the_playout_policy_survives_a_new_game_and_the_engine_sees_the_last_move) {
  using seriema::hex::playout_policy;
  seriema::mcts::player asked_for = seriema::mcts::nobody;
  playout_policy seen = playout_policy::random;
  hex::move last = hex::no_move;
  gtp_session session{
      [&](const hex& game, const hex::state& position, double seconds) {
        seen = game.policy();
        last = position.last_move;
        return first_empty_cell{&asked_for}(game, position, seconds);
      },
      "e", "0", gtp_options{.size = 5, .policy = playout_policy::bridges}};
  EXPECT_EQ(session.game().policy(), playout_policy::bridges);
  ASSERT_EQ(session.handle("boardsize 7"), "= \n\n");
  EXPECT_EQ(session.game().policy(), playout_policy::bridges);
  ASSERT_EQ(session.handle("param_game allow_swap 1"), "= \n\n");
  EXPECT_EQ(session.game().policy(), playout_policy::bridges);
  EXPECT_TRUE(session.game().swap_rule());
  ASSERT_EQ(session.handle("play b c3"), "= \n\n");
  ASSERT_EQ(session.handle("genmove w"), "= a1\n\n");
  EXPECT_EQ(seen, playout_policy::bridges);
  EXPECT_EQ(last, *session.game().parse_cell("c3"));
}

TEST_F(gtp_test, genmove_plays_and_names_the_engine_move_for_the_colour_asked) {
  EXPECT_EQ(send("genmove b"), "= a1\n\n");
  EXPECT_EQ(asked_for_, 1);
  EXPECT_EQ(at(0, 0), 1);
  EXPECT_EQ(session_.position().to_move, 2);
  EXPECT_EQ(send("9 genmove white"), "=9 b1\n\n");
  EXPECT_EQ(asked_for_, 2);
  EXPECT_EQ(at(0, 1), 2);
  // Out of turn: white again.
  EXPECT_EQ(send("genmove W"), "= c1\n\n");
  EXPECT_EQ(asked_for_, 2);
  EXPECT_EQ(at(0, 2), 2);
  EXPECT_EQ(session_.position().to_move, 1);

  EXPECT_EQ(send("genmove"), "? syntax error: expected genmove COLOR\n\n");
  EXPECT_EQ(send("genmove x"), "? syntax error: invalid color 'x'\n\n");
  EXPECT_EQ(send("genmove b w"), "? syntax error: expected genmove COLOR\n\n");
}

TEST(gtp_engine, a_bad_or_failing_engine_is_answered_with_an_error) {
  gtp_session cheat{
      [](const hex& game, const hex::state&, double) { return answer(game.at(0, 0)); }, "cheat",
      "0", 3};
  EXPECT_EQ(cheat.handle("genmove b"), "= a1\n\n");
  const hex::state before = cheat.position();
  EXPECT_EQ(cheat.handle("genmove w"), "? engine chose an illegal move\n\n");
  EXPECT_TRUE(same_position(cheat.position(), before));

  gtp_session failing{[](const hex&, const hex::state&, double) -> result {
                        throw std::runtime_error("out of ideas");
                      },
                      "failing", "0", 3};
  EXPECT_EQ(failing.handle("3 genmove b"), "?3 internal error: out of ideas\n\n");
  EXPECT_TRUE(same_position(failing.position(), failing.game().initial_state()));
  EXPECT_EQ(failing.handle("name"), "= failing\n\n");
}

TEST_F(gtp_test, showboard_answers_the_rendered_board_on_the_lines_after_the_status) {
  ASSERT_EQ(send("play b a1"), "= \n\n");
  ASSERT_EQ(send("play w c3"), "= \n\n");
  const std::string response = send("showboard");
  const std::string board = session_.game().render(session_.position());
  // An empty line would end the response early, so the board comes without any.
  EXPECT_EQ(response, "= \n" + without_empty_lines(board) + "\n");
  EXPECT_EQ(send("11 showboard"), "=11 \n" + without_empty_lines(board) + "\n");
}

TEST_F(gtp_test, final_score_names_the_connected_player_and_ends_the_game) {
  EXPECT_EQ(send("final_score"), "? game not over\n\n");
  // Black joins the top and bottom rows down column a.
  for (const char* line : {"play b a1", "play w b1", "play b a2", "play w b2"}) {
    ASSERT_EQ(send(line), "= \n\n") << line;
  }
  EXPECT_EQ(send("final_score"), "? game not over\n\n");
  ASSERT_EQ(send("play b a3"), "= \n\n");
  EXPECT_EQ(send("final_score"), "= B+\n\n");
  EXPECT_EQ(send("4 final_score"), "=4 B+\n\n");

  const hex::state over = session_.position();
  EXPECT_EQ(send("play w c1"), "? game is over\n\n");
  EXPECT_EQ(send("play w swap-pieces"), "? game is over\n\n");
  EXPECT_EQ(send("play w a0"), "? syntax error: invalid move text 'a0'\n\n");
  EXPECT_TRUE(same_position(session_.position(), over));

  // Taken back, the game goes on.
  EXPECT_EQ(send("undo"), "= \n\n");
  EXPECT_EQ(send("final_score"), "? game not over\n\n");
  EXPECT_EQ(send("genmove b"), "= c1\n\n");

  // White joins the left and right columns along row 2.
  ASSERT_EQ(send("clear_board"), "= \n\n");
  for (const char* line : {"play w a2", "play b a1", "play w b2", "play b b1", "play w c2"}) {
    ASSERT_EQ(send(line), "= \n\n") << line;
  }
  EXPECT_EQ(send("final_score"), "= W+\n\n");
  EXPECT_EQ(send("play b c1"), "? game is over\n\n");
}

TEST_F(gtp_test, undo_takes_back_plays_and_genmoves_one_at_a_time) {
  EXPECT_EQ(send("undo"), "? cannot undo\n\n");
  const hex::state start = session_.position();
  ASSERT_EQ(send("play b b2"), "= \n\n");
  const hex::state after_play = session_.position();
  ASSERT_EQ(send("genmove w"), "= a1\n\n");
  const hex::state after_genmove = session_.position();
  ASSERT_EQ(send("play w c3"), "= \n\n");

  EXPECT_EQ(send("2 undo"), "=2 \n\n");
  EXPECT_TRUE(same_position(session_.position(), after_genmove));
  EXPECT_EQ(send("undo"), "= \n\n");
  EXPECT_TRUE(same_position(session_.position(), after_play));
  EXPECT_EQ(send("undo"), "= \n\n");
  EXPECT_TRUE(same_position(session_.position(), start));
  EXPECT_EQ(send("undo"), "? cannot undo\n\n");
  // Failed commands left nothing to take back.
  EXPECT_EQ(send("play b z99"), "? syntax error: invalid move text 'z99'\n\n");
  EXPECT_EQ(send("undo"), "? cannot undo\n\n");
}

TEST_F(gtp_test, quit_answers_and_is_requested) {
  EXPECT_EQ(send("6 quit"), "=6 \n\n");
  EXPECT_TRUE(session_.quit_requested());
}

TEST_F(gtp_test, run_answers_each_command_and_stops_at_quit) {
  std::istringstream in("name\n\n# comment\n1 protocol_version\nplay b a1\nquit\nname\n");
  std::ostringstream out;
  session_.run(in, out);
  EXPECT_EQ(out.str(), "= test-engine\n\n=1 2\n\n= \n\n= \n\n");
  EXPECT_TRUE(session_.quit_requested());
  EXPECT_EQ(at(0, 0), 1);
}

TEST_F(gtp_test, run_stops_at_the_end_of_the_input) {
  std::istringstream in("version\ngenmove b");
  std::ostringstream out;
  session_.run(in, out);
  EXPECT_EQ(out.str(), "= 1.2.3\n\n= a1\n\n");
  EXPECT_FALSE(session_.quit_requested());
}

TEST_F(gtp_test, any_input_gets_a_well_framed_answer) {
  seriema::mcts::random rng(42);
  const std::string alphabet = "bwplayegnmoscrd 0123456789#\t\r\x01-_aAzZ";
  const auto letters = static_cast<std::uint32_t>(alphabet.size());
  for (int i = 0; i < 5000; ++i) {
    std::string line;
    const std::uint32_t length = rng.below(24);
    for (std::uint32_t j = 0; j < length; ++j) line += alphabet[rng.below(letters)];
    if (i % 3 == 0) line = std::string(i % 2 == 0 ? "play " : "genmove ") + line;
    const std::string response = send(line);
    if (response.empty()) continue;
    ASSERT_TRUE(response[0] == '=' || response[0] == '?') << line;
    ASSERT_GE(response.size(), 3U) << line;
    EXPECT_EQ(response.substr(response.size() - 2), "\n\n") << line;
    EXPECT_EQ(response.find("\n\n"), response.size() - 2) << line;
    if (session_.quit_requested()) break;
  }
}

// A finished game on 3x3: black joined top and bottom down column a.
void finish_as_black(gtp_session& session) {
  for (const char* line : {"play b a1", "play w b1", "play b a2", "play w b2", "play b a3"}) {
    ASSERT_EQ(session.handle(line), "= \n\n") << line;
  }
}

// After the end, genmove answers resign for either colour (as MoHex does), without asking the
// engine or touching the position; play accepts resign (a controller passing the loser's
// answer on) and nothing else.
TEST_F(gtp_test, genmove_after_the_end_resigns_for_either_colour) {
  finish_as_black(session_);
  const hex::state over = session_.position();
  asked_for_ = seriema::mcts::nobody;
  EXPECT_EQ(send("genmove w"), "= resign\n\n");
  EXPECT_EQ(send("3 genmove b"), "=3 resign\n\n");
  EXPECT_EQ(asked_for_, seriema::mcts::nobody);
  EXPECT_TRUE(same_position(session_.position(), over));
  EXPECT_EQ(send("play w resign"), "= \n\n");
  EXPECT_EQ(send("play W RESIGN"), "= \n\n");
  EXPECT_EQ(send("play w c1"), "? game is over\n\n");
  EXPECT_EQ(send("final_score"), "= B+\n\n");
  EXPECT_TRUE(same_position(session_.position(), over));
  EXPECT_EQ(send("genmove x"), "? syntax error: invalid color 'x'\n\n");
  // One undo takes back the winning move: resign answers left no trace in the history.
  EXPECT_EQ(send("undo"), "= \n\n");
  EXPECT_EQ(send("final_score"), "? game not over\n\n");
}

// An engine whose search ends at a given win rate and rollout count.
struct judged_engine {
  double* win_rate;
  std::uint64_t* rollouts;
  result operator()(const hex& game, const hex::state& position, double) const {
    return answer(first_empty(game, position), 0, *win_rate, *rollouts);
  }
};

class resign_test : public testing::Test {
 protected:
  double win_rate_ = 0;
  std::uint64_t rollouts_ = 1000;
  gtp_session session_{judged_engine{&win_rate_, &rollouts_}, "e", "0",
                       gtp_options{.size = 3, .resign_threshold = 0.1}};

  void play_opening(int moves) {
    const char* lines[] = {"play b c1", "play w c2", "play b c3"};
    for (int i = 0; i < moves; ++i) ASSERT_EQ(session_.handle(lines[i]), "= \n\n");
  }
};

TEST_F(resign_test, resigns_below_the_threshold_with_enough_rollouts_and_moves) {
  play_opening(3);
  const hex::state before = session_.position();
  win_rate_ = 0.0999;
  EXPECT_EQ(session_.handle("genmove w"), "= resign\n\n");
  EXPECT_TRUE(same_position(session_.position(), before));
  // The threshold itself is not below it.
  win_rate_ = 0.1;
  EXPECT_EQ(session_.handle("genmove w"), "= a1\n\n");
  EXPECT_EQ(session_.handle("undo"), "= \n\n");
  EXPECT_TRUE(same_position(session_.position(), before));
}

TEST_F(resign_test, does_not_resign_without_confidence_or_in_the_first_moves) {
  play_opening(3);
  win_rate_ = 0;
  rollouts_ = 999;  // too few rollouts to trust
  EXPECT_EQ(session_.handle("genmove w"), "= a1\n\n");
  ASSERT_EQ(session_.handle("clear_board"), "= \n\n");
  play_opening(2);  // fewer moves than the board's size
  rollouts_ = 100000;
  EXPECT_EQ(session_.handle("genmove b"), "= a1\n\n");
}

// A loss the solver proved is resigned at once: no rollout count or move count to wait for.
TEST(gtp_resign, a_proven_loss_resigns_whatever_the_rollouts) {
  gtp_session session{
      [](const hex& game, const hex::state& position, double) {
        result proven = answer(first_empty(game, position), 0, 0.4, 3);
        proven.proven_winner = seriema::mcts::opponent(position.to_move);
        return proven;
      },
      "e", "0", gtp_options{.size = 3, .resign_threshold = 0.1}};
  ASSERT_EQ(session.handle("play b c1"), "= \n\n");
  EXPECT_EQ(session.handle("genmove w"), "= resign\n\n");
  gtp_session never{[](const hex& game, const hex::state& position, double) {
                      result proven = answer(first_empty(game, position), 0, 0.0, 100000);
                      proven.proven_winner = seriema::mcts::opponent(position.to_move);
                      return proven;
                    },
                    "e", "0", gtp_options{.size = 3, .resign_threshold = 0}};
  EXPECT_EQ(never.handle("genmove b"), "= a1\n\n");
}

TEST(gtp_resign, a_threshold_of_zero_never_resigns) {
  double win_rate = 0;
  std::uint64_t rollouts = 100000;
  gtp_session session{judged_engine{&win_rate, &rollouts}, "e", "0",
                      gtp_options{.size = 3, .resign_threshold = 0}};
  for (const char* line : {"play b c1", "play w c2", "play b c3"}) {
    ASSERT_EQ(session.handle(line), "= \n\n");
  }
  EXPECT_EQ(session.handle("genmove w"), "= a1\n\n");
}

TEST_F(gtp_test, time_settings_sets_both_clocks_and_refuses_malformed_arguments) {
  EXPECT_FALSE(session_.clock_set());
  EXPECT_EQ(send("time_settings 60 0 0"), "= \n\n");
  EXPECT_TRUE(session_.clock_set());
  EXPECT_EQ(session_.clock(1).seconds, 60);
  EXPECT_EQ(session_.clock(2).stones, 0);
  EXPECT_EQ(send("2 time_settings 0 10 5"), "=2 \n\n");  // byo-yomi only: starts in a period
  EXPECT_EQ(session_.clock(2).seconds, 10);
  EXPECT_EQ(session_.clock(2).stones, 5);
  EXPECT_EQ(send("time_settings 1.5 0 0"), "= \n\n");
  EXPECT_EQ(session_.clock(1).seconds, 1.5);
  EXPECT_EQ(send("time_settings 0 1 0"), "= \n\n");  // GTP 2: no time limits
  EXPECT_FALSE(session_.clock_set());

  const std::string usage =
      "? syntax error: expected time_settings MAIN_TIME BYO_YOMI_TIME BYO_YOMI_STONES "
      "(seconds, seconds, moves)\n\n";
  for (const char* line : {"time_settings", "time_settings 60 0", "time_settings 60 0 0 0",
                           "time_settings -1 0 0", "time_settings 60 -5 1",
                           "time_settings 60 0 -1", "time_settings x 0 0",
                           "time_settings 60 10 1.5", "time_settings inf 0 0",
                           "time_settings nan 0 0", "time_settings 1e3 0 0"}) {
    EXPECT_EQ(send(line), usage) << line;
  }
  EXPECT_EQ(send("time_settings 60 0 5"), "? byo-yomi stones without byo-yomi time\n\n");
  EXPECT_FALSE(session_.clock_set());
}

TEST_F(gtp_test, time_left_states_one_colours_clock_and_refuses_malformed_arguments) {
  EXPECT_EQ(send("time_left b 30 0"), "= \n\n");
  EXPECT_TRUE(session_.clock_set());
  EXPECT_EQ(session_.clock(1).seconds, 30);
  EXPECT_EQ(send("time_left white 12 3"), "= \n\n");
  EXPECT_EQ(session_.clock(2).seconds, 12);
  EXPECT_EQ(session_.clock(2).stones, 3);
  const std::string usage = "? syntax error: expected time_left COLOR TIME STONES\n\n";
  for (const char* line : {"time_left", "time_left b", "time_left b 30", "time_left b 30 0 1",
                           "time_left x 30 0", "time_left b -1 0", "time_left b 30 -2",
                           "time_left b thirty 0", "time_left b 30 1.5"}) {
    EXPECT_EQ(send(line), usage) << line;
  }
  EXPECT_EQ(session_.clock(1).seconds, 30);
  // A clock only time_left stated is not restarted by a new game (there are no settings to
  // restart it from); the controller states it again.
  ASSERT_EQ(send("clear_board"), "= \n\n");
  EXPECT_TRUE(session_.clock_set());
  EXPECT_EQ(session_.clock(2).seconds, 12);
}

// An engine that spends every second it is given and splits its visits as told, recording the
// budgets it was asked for.
struct clocked_engine {
  std::vector<double>* budgets;
  bool close_call;  // the best and second moves get nearly equal visits
  bool proves = false;  // the search says the player to move wins (its solver, or df-pn)
  result operator()(const hex& game, const hex::state& position, double seconds) const {
    budgets->push_back(seconds);
    result r = answer(first_empty(game, position), seconds, 0.5, 1000);
    if (close_call) r.moves.push_back({static_cast<hex::move>(r.best + 1), 900, 450});
    if (proves) r.proven_winner = position.to_move;
    return r;
  }
};

TEST(gtp_clock, genmove_searches_for_the_planned_budget_and_charges_the_clock) {
  std::vector<double> budgets;
  gtp_session session{clocked_engine{&budgets, false}, "e", "0", gtp_options{.size = 5}};
  EXPECT_EQ(session.handle("genmove b"), "= a1\n\n");
  ASSERT_EQ(budgets.size(), 1U);
  EXPECT_EQ(budgets[0], 0);  // no clock: the engine's own budget

  ASSERT_EQ(session.handle("time_settings 20 0 0"), "= \n\n");
  const auto planned = seriema::hex::plan_move_time({20, 0, 0}, {20, 0}, 24);
  EXPECT_EQ(session.handle("genmove w"), "= b1\n\n");
  ASSERT_EQ(budgets.size(), 2U);  // not critical: one search
  EXPECT_DOUBLE_EQ(budgets[1], planned.base);
  EXPECT_DOUBLE_EQ(session.clock(2).seconds, 20 - planned.base);
  EXPECT_EQ(session.clock(1).seconds, 20);

  // A new game restarts both clocks.
  ASSERT_EQ(session.handle("clear_board"), "= \n\n");
  EXPECT_EQ(session.clock(2).seconds, 20);
}

TEST(gtp_clock, a_critical_move_is_extended_up_to_the_maximum_once) {
  std::vector<double> budgets;
  gtp_session session{clocked_engine{&budgets, true}, "e", "0", gtp_options{.size = 5}};
  ASSERT_EQ(session.handle("time_left b 20 0"), "= \n\n");
  const auto planned = seriema::hex::plan_move_time({}, {20, 0}, 25);
  ASSERT_GT(planned.maximum, planned.base);
  EXPECT_EQ(session.handle("genmove b"), "= a1\n\n");
  ASSERT_EQ(budgets.size(), 2U);
  EXPECT_DOUBLE_EQ(budgets[0], planned.base);
  EXPECT_DOUBLE_EQ(budgets[1], planned.maximum - planned.base);
  EXPECT_DOUBLE_EQ(session.clock(1).seconds, 20 - planned.maximum);
}

// A proof ends the move however open the visits look: no second search.
TEST(gtp_clock, a_proven_move_is_not_extended) {
  std::vector<double> budgets;
  gtp_session session{clocked_engine{&budgets, true, true}, "e", "0", gtp_options{.size = 5}};
  ASSERT_EQ(session.handle("time_left b 20 0"), "= \n\n");
  EXPECT_EQ(session.handle("genmove b"), "= a1\n\n");
  EXPECT_EQ(budgets.size(), 1U);
}

TEST(gtp_clock, a_timed_genmove_logs_its_time_and_the_clock) {
  std::vector<double> budgets;
  std::ostringstream log;
  gtp_session session{clocked_engine{&budgets, false}, "e", "0",
                      gtp_options{.size = 5, .log = &log}};
  EXPECT_EQ(session.handle("genmove b"), "= a1\n\n");
  EXPECT_EQ(log.str(), "");  // no clock, no line
  ASSERT_EQ(session.handle("time_left w 10 2"), "= \n\n");
  EXPECT_EQ(session.handle("genmove w"), "= b1\n\n");
  // 2 stones in 10 s: (10 * 0.95 - 0.05) / 2 = 4.725 s, then 5.275 s left for 1 stone.
  EXPECT_EQ(log.str(), "seriema-hex: genmove w: b1 after 4.72 s, 5.28 s left\n");
}

TEST(gtp_swap, genmove_may_answer_swap_pieces_as_the_second_move) {
  auto swapper = [](const hex& game, const hex::state& position, double) {
    std::vector<hex::move> legal(game.max_moves());
    legal.resize(game.legal_moves(position, legal));
    const bool can_swap =
        std::find(legal.begin(), legal.end(), hex::swap_move) != legal.end();
    return answer(can_swap ? hex::swap_move : first_empty(game, position));
  };
  gtp_session session{swapper, "e", "0", gtp_options{.size = 5, .swap_rule = true}};
  EXPECT_EQ(session.handle("genmove b"), "= a1\n\n");
  EXPECT_EQ(session.handle("genmove w"), "= swap-pieces\n\n");
  EXPECT_TRUE(session.position().swapped);
  EXPECT_EQ(session.handle("genmove b"), "= b1\n\n");
}

// param_game is how MoHex's controllers (and HexGui's parameter dialog) read and set the swap
// rule; the rule holds from the next move on.
TEST_F(gtp_test, param_game_reads_and_sets_the_swap_rule) {
  EXPECT_EQ(send("param_game"), "= \n[bool] allow_swap 0\n\n");
  ASSERT_EQ(send("play b b2"), "= \n\n");
  EXPECT_EQ(send("play w swap-pieces"), "? illegal move\n\n");
  EXPECT_EQ(send("param_game allow_swap 1"), "= \n\n");
  EXPECT_EQ(send("param_game"), "= \n[bool] allow_swap 1\n\n");
  EXPECT_EQ(send("play w swap-pieces"), "= \n\n");
  EXPECT_TRUE(session_.position().swapped);
  ASSERT_EQ(send("boardsize 4"), "= \n\n");
  EXPECT_TRUE(session_.game().swap_rule());  // kept across games and sizes
  EXPECT_EQ(send("param_game allow_swap false"), "= \n\n");
  EXPECT_FALSE(session_.game().swap_rule());

  EXPECT_EQ(send("param_game allow_swap"), "? syntax error: expected param_game [NAME VALUE]\n\n");
  EXPECT_EQ(send("param_game allow_swap 2"), "? syntax error: allow_swap takes 0 or 1\n\n");
  EXPECT_EQ(send("param_game game_time 60"), "? unknown parameter: game_time\n\n");
}

using seriema::hex::after_move;
using seriema::hex::plan_move_time;
using seriema::hex::worth_extending;

TEST(time_control, main_time_is_shared_over_the_moves_still_expected) {
  // 100 s, 121 empty cells: ceil(121 / 4) = 31 moves; (100 * 0.95 - 0.05) s usable.
  const auto budget = plan_move_time({100, 0, 0}, {100, 0}, 121);
  EXPECT_DOUBLE_EQ(budget.base, 94.95 / 31);
  EXPECT_DOUBLE_EQ(budget.maximum, 2 * 94.95 / 31);
  // Late in the game: never planned for fewer than 2 moves, and never over half of the usable.
  const auto late = plan_move_time({100, 0, 0}, {10, 0}, 3);
  EXPECT_DOUBLE_EQ(late.base, 9.45 / 2);
  EXPECT_DOUBLE_EQ(late.maximum, 9.45 / 2);
}

TEST(time_control, byo_yomi_is_shared_over_the_stones_of_the_period) {
  const time_settings canadian{0, 10, 5};
  const auto budget = plan_move_time(canadian, {10, 5}, 100);
  EXPECT_DOUBLE_EQ(budget.base, 9.45 / 5);
  EXPECT_DOUBLE_EQ(budget.maximum, 2 * 9.45 / 5);
  const auto last = plan_move_time(canadian, {4, 1}, 100);  // the period's last stone
  EXPECT_DOUBLE_EQ(last.base, 4 * 0.95 - 0.05);
  EXPECT_DOUBLE_EQ(last.maximum, last.base);
  // Main time nearly spent with a byo-yomi to follow: the byo-yomi's rate is affordable.
  const auto ending = plan_move_time({60, 10, 5}, {0.5, 0}, 100);
  EXPECT_DOUBLE_EQ(ending.base, 9.5 / 5 - 0.05);
}

TEST(time_control, an_empty_clock_still_allows_the_least_search) {
  const auto budget = plan_move_time({10, 0, 0}, {0, 0}, 50);
  EXPECT_DOUBLE_EQ(budget.base, seriema::hex::time_policy{}.min_seconds);
  EXPECT_DOUBLE_EQ(budget.maximum, budget.base);
}

TEST(time_control, a_move_is_critical_when_the_search_did_not_settle) {
  using stats = seriema::mcts::move_statistics<hex::move>;
  const std::vector<stats> settled{{1, 800, 400}, {2, 100, 40}, {3, 100, 30}};
  EXPECT_FALSE(worth_extending(settled));
  const std::vector<stats> close{{1, 500, 250}, {2, 375, 180}, {3, 125, 30}};
  EXPECT_TRUE(worth_extending(close));  // the runner-up has 75% of the best's visits
  const std::vector<stats> not_close{{1, 500, 250}, {2, 374, 180}, {3, 126, 30}};
  EXPECT_FALSE(worth_extending(not_close));
  std::vector<stats> spread;  // the best has under 30% of the visits
  for (hex::move m = 0; m < 10; ++m) spread.push_back({m, m == 0 ? 250U : 100U, 10});
  EXPECT_TRUE(worth_extending(spread));
  EXPECT_FALSE(worth_extending(std::vector<stats>{{1, 10, 5}}));  // one move: no choice
}

TEST(time_control, each_move_is_charged_to_the_clock_through_main_time_and_byo_yomi) {
  const time_settings canadian{10, 6, 2};
  clock_state clock = after_move(canadian, {10, 0}, 4);
  EXPECT_DOUBLE_EQ(clock.seconds, 6);
  EXPECT_EQ(clock.stones, 0);
  clock = after_move(canadian, clock, 7);  // main time ends 1 s into the first period
  EXPECT_DOUBLE_EQ(clock.seconds, 5);
  EXPECT_EQ(clock.stones, 1);
  clock = after_move(canadian, clock, 2);  // the period's last stone: a new period starts
  EXPECT_DOUBLE_EQ(clock.seconds, 6);
  EXPECT_EQ(clock.stones, 2);
  // Absolute time runs out and stays at 0.
  clock = after_move({5, 0, 0}, {5, 0}, 6);
  EXPECT_DOUBLE_EQ(clock.seconds, 0);
  EXPECT_EQ(clock.stones, 0);
}

TEST(time_control, two_searches_merge_into_one_result) {
  result a = answer(1, 1.0, 0.5, 100);
  a.moves.push_back({2, 80, 60});
  result b = answer(2, 0.5, 0.6, 50);
  const result both = seriema::hex::merged(a, b);
  ASSERT_EQ(both.moves.size(), 2U);
  EXPECT_EQ(both.best, 2);  // 130 visits against 100
  EXPECT_EQ(both.moves[0].visits, 130U);
  EXPECT_DOUBLE_EQ(both.win_rate, 90.0 / 130);
  EXPECT_EQ(both.rollouts, 150U);
  EXPECT_DOUBLE_EQ(both.seconds, 1.5);
}

TEST(time_control, a_second_search_that_kept_the_first_tree_is_not_counted_twice) {
  result a = answer(1, 1.0, 0.5, 100);
  a.moves.push_back({2, 80, 60});
  a.reused_visits = 40;  // the first search itself went on from the last move's tree
  // The second search kept the first's root: its statistics hold the first's 180 visits.
  result b = answer(1, 0.5, 0.55, 50);
  b.moves[0] = {1, 120, 66};
  b.moves.push_back({2, 110, 80});
  b.reused_visits = 180;
  b.reused_nodes = 90;
  a.reused_nodes = 20;
  a.playouts = 100;
  a.tree_nodes = 90;
  a.remote_calls = 7;
  b.playouts = 50;
  b.tree_nodes = 45;
  b.remote_calls = 5;
  const result both = seriema::hex::merged(a, b);
  ASSERT_EQ(both.moves.size(), 2U);
  EXPECT_EQ(both.moves[0].visits, 120U);  // not 220: the first's 100 are in it
  EXPECT_EQ(both.moves[1].visits, 110U);
  EXPECT_EQ(both.best, b.best);
  EXPECT_DOUBLE_EQ(both.win_rate, b.win_rate);
  EXPECT_EQ(both.rollouts, a.rollouts + b.rollouts);
  EXPECT_DOUBLE_EQ(both.seconds, 1.5);
  EXPECT_EQ(both.playouts, 150U);
  EXPECT_EQ(both.tree_nodes, 135U);
  EXPECT_EQ(both.remote_calls, 12U);
  EXPECT_EQ(both.reused_visits, 40U);  // what the move's search started from
  EXPECT_EQ(both.reused_nodes, 20U);
}

// The contents of a temporary file written so far.
std::string contents(std::FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string text;
  for (int c = std::fgetc(file); c != EOF; c = std::fgetc(file)) text += static_cast<char>(c);
  std::fseek(file, 0, SEEK_END);
  return text;
}

TEST(progress_bar, draws_one_line_in_place_with_the_rollouts_and_the_live_rate) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    progress_bar bar(1000, 0, file, true);
    EXPECT_TRUE(bar.active());
    bar.update(500, 0.5);
    const std::string first = contents(file);
    ASSERT_FALSE(first.empty());
    EXPECT_EQ(first[0], '\r');
    EXPECT_EQ(first.find('\n'), std::string::npos);
    EXPECT_NE(first.find(" 50%"), std::string::npos) << first;
    EXPECT_NE(first.find("500 rollouts "), std::string::npos) << first;
    EXPECT_NE(first.find("1000 rollouts/s"), std::string::npos) << first;
    EXPECT_NE(first.find(std::string(15, '#') + std::string(15, '.')), std::string::npos);

    // Less than a redraw interval of search time later: nothing new.
    bar.update(600, 0.55);
    EXPECT_EQ(contents(file), first);

    // The rate is over the interval since the last line: 300 rollouts in 0.2 s.
    bar.update(800, 0.7);
    const std::string second = contents(file).substr(first.size());
    EXPECT_EQ(second[0], '\r');
    EXPECT_NE(second.find(" 80%"), std::string::npos) << second;
    EXPECT_NE(second.find("800 rollouts "), std::string::npos) << second;
    EXPECT_NE(second.find("1500 rollouts/s"), std::string::npos) << second;

    bar.finish();
    const std::string all = contents(file);
    const std::string cleared = all.substr(first.size() + second.size());
    EXPECT_EQ(cleared, "\r" + std::string(second.size() - 1, ' ') + "\r");
  }
  std::fclose(file);
}

TEST(progress_bar, measures_a_time_budget_and_plugs_into_search_options) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    progress_bar bar(0, 10, file, true);
    seriema::mcts::search_options options;
    options.progress = bar.callback();
    options.progress(40, 2.5);
    const std::string line = contents(file);
    EXPECT_NE(line.find(" 25%"), std::string::npos) << line;
    EXPECT_NE(line.find("40 rollouts "), std::string::npos) << line;
    EXPECT_NE(line.find("16 rollouts/s"), std::string::npos) << line;
  }
  // The destructor finished the line.
  const std::string all = contents(file);
  EXPECT_EQ(all.back(), '\r');
  std::fclose(file);
}

TEST(progress_bar, prints_nothing_when_inactive) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    progress_bar bar(1000, 0, file);  // a file, not a terminal
    EXPECT_FALSE(bar.active());
    bar.update(500, 0.5);
    bar.update(1000, 2);
    bar.callback()(1000, 3);
    bar.finish();
  }
  EXPECT_EQ(contents(file), "");
  std::fclose(file);
}

}  // namespace

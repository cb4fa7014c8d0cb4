// Unit tests of the Hex program's GTP session (scripted against a deterministic fake engine:
// exact responses, board effects, errors, undo, the end of the game) and of its progress bar.
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

#include "gtp.hpp"
#include "hex.hpp"
#include "progress.hpp"

namespace {

using seriema::hex::gtp_session;
using seriema::hex::hex;
using seriema::hex::progress_bar;

// The fake engine: the first empty cell in reading order. It records the colour it was asked
// to move for.
struct first_empty_cell {
  seriema::mcts::player* asked_for;
  hex::move operator()(const hex& game, const hex::state& position) const {
    *asked_for = game.to_move(position);
    for (int row = 0; row < game.size(); ++row) {
      for (int column = 0; column < game.size(); ++column) {
        if (game.cell(position, row, column) == seriema::mcts::nobody) return game.at(row, column);
      }
    }
    throw std::logic_error("no empty cell");
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
            "hexgui-analyze_commands\n\n");
  for (const char* command : {"protocol_version", "name", "version", "known_command",
                              "list_commands", "boardsize", "clear_board", "play", "genmove",
                              "showboard", "final_score", "undo", "quit",
                              "hexgui-analyze_commands"}) {
    EXPECT_EQ(send(std::string("known_command ") + command), "= true\n\n") << command;
  }
}

// HexGui asks for its analyze menu on every connect: each line is type/label/command, and each
// command named there is one the session knows.
TEST_F(gtp_test, offers_hexgui_its_analyze_commands) {
  const std::string answer = send("hexgui-analyze_commands");
  EXPECT_EQ(answer, "= string/Show Board/showboard\nstring/Final Score/final_score\n\n");
  EXPECT_EQ(send("hexgui-analyze_commands now"),
            "? syntax error: expected hexgui-analyze_commands\n\n");
  for (const char* command : {"showboard", "final_score"}) {
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
  gtp_session cheat{[](const hex& game, const hex::state&) { return game.at(0, 0); }, "cheat",
                    "0", 3};
  EXPECT_EQ(cheat.handle("genmove b"), "= a1\n\n");
  const hex::state before = cheat.position();
  EXPECT_EQ(cheat.handle("genmove w"), "? engine chose an illegal move\n\n");
  EXPECT_TRUE(same_position(cheat.position(), before));

  gtp_session failing{[](const hex&, const hex::state&) -> hex::move {
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
  EXPECT_EQ(send("genmove w"), "? game is over\n\n");
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
  EXPECT_EQ(send("genmove b"), "? game is over\n\n");
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

// Tests of the sequential MCTS engine on Hex: it plays the only winning move and blocks the only
// threat (positions checked by enumeration, for both players), keeps its budget and statistics
// consistent, is reproducible per seed, tries untried moves in random order and prefers won
// moves among equally visited ones, and rejects invalid searches.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <hex.hpp>
#include <seriema/mcts/sequential.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "../../support/hex_positions.hpp"

namespace seriema::mcts {
namespace {

using hex::hex;

// A position drawn row by row ('X' player 1, 'O' player 2, '.' empty; spaces ignored).
hex::state position(const hex& g, const std::vector<std::string_view>& rows, player to_move) {
  hex::state s = g.initial_state();
  int r = 0;
  int stones = 0;
  for (const std::string_view row : rows) {
    int c = 0;
    for (const char ch : row) {
      if (ch == ' ') continue;
      if (ch != '.') {
        EXPECT_TRUE(g.place(s, r, c, ch == 'X' ? 1 : 2));
        ++stones;
      }
      ++c;
    }
    EXPECT_EQ(c, g.size());
    ++r;
  }
  EXPECT_EQ(r, g.size());
  s.to_move = to_move;
  s.moves_played = static_cast<std::uint16_t>(stones);
  return s;
}

using test::hex_mirrored;

// The moves after which the player to move has won.
std::set<hex::move> winning_moves(const hex& g, const hex::state& s) {
  const auto wins = test::hex_winning_moves(g, s, s.to_move);
  return {wins.begin(), wins.end()};
}

// The moves after which the opponent has no winning move.
std::set<hex::move> blocking_moves(const hex& g, const hex::state& s) {
  std::set<hex::move> blocks;
  for (const hex::move m : test::hex_legal(g, s)) {
    hex::state next = s;
    g.apply(next, m);
    if (winning_moves(g, next).empty()) blocks.insert(m);
  }
  return blocks;
}

search_options options_with(std::uint64_t rollouts, unsigned k, std::uint64_t seed) {
  search_options o;
  o.rollouts = rollouts;
  o.playouts_per_leaf = k;
  o.seed = seed;
  return o;
}

struct puzzle {
  int size;
  std::vector<std::string_view> rows;  // player 1 to move
};

// Player 1 (X, top-bottom) to move has exactly one winning cell, and player 2 threatens to win
// on the same cell: every other move loses at once, so no other move wins by force either.
const puzzle winning_puzzles[] = {
    {3,
     {". X .",
      "O . O",
      ". X ."}},
    {4,
     {". X . .",
      ". X . .",
      "O . O O",
      "X . . ."}},
    {5,
     {". . X . .",
      ". . X . .",
      "O O . O O",
      ". X . . .",
      "X . . . ."}},
};

// Player 2 (O, left-right) threatens to win on one cell; player 1 to move cannot win at once.
const puzzle blocking_puzzles[] = {
    {3,
     {"X . .",
      "O . O",
      ". . X"}},
    {4,
     {"X . . .",
      "O O . O",
      ". X . .",
      ". . . X"}},
    {5,
     {"X . . . .",
      ". . X . .",
      "O O . O O",
      ". X . . .",
      ". . . . X"}},
};

TEST(SequentialSearchTest, PlaysTheOnlyWinningMoveForEitherPlayer) {
  for (const puzzle& p : winning_puzzles) {
    const hex g(p.size);
    const hex::state first = position(g, p.rows, 1);
    for (const hex::state& s : {first, hex_mirrored(g, first)}) {
      const std::set<hex::move> wins = winning_moves(g, s);
      ASSERT_EQ(wins.size(), 1u) << g.render(s);
      ASSERT_EQ(blocking_moves(g, s), wins) << g.render(s);
      for (const std::uint64_t seed : {1, 2, 3}) {
        const auto result = sequential_search(g, s, options_with(3000, 8, seed));
        EXPECT_EQ(result.best, *wins.begin())
            << g.render(s) << "played " << g.move_name(result.best);
        // Every rollout through the winning move ends at a finished position.
        EXPECT_EQ(result.win_rate, 1.0);
      }
    }
  }
}

TEST(SequentialSearchTest, BlocksTheOnlyThreatForEitherPlayer) {
  for (const puzzle& p : blocking_puzzles) {
    const hex g(p.size);
    const hex::state first = position(g, p.rows, 1);
    for (const hex::state& s : {first, hex_mirrored(g, first)}) {
      ASSERT_TRUE(winning_moves(g, s).empty()) << g.render(s);
      hex::state threat = s;
      threat.to_move = opponent(s.to_move);
      const std::set<hex::move> threats = winning_moves(g, threat);
      ASSERT_EQ(threats.size(), 1u) << g.render(s);
      ASSERT_EQ(blocking_moves(g, s), threats) << g.render(s);
      for (const std::uint64_t seed : {1, 2, 3}) {
        const auto result = sequential_search(g, s, options_with(3000, 8, seed));
        EXPECT_EQ(result.best, *threats.begin())
            << g.render(s) << "played " << g.move_name(result.best);
      }
    }
  }
}

// One rollout per root move: each move's K playouts start at its own child. Only the block
// leaves player 1 well placed (about 0.78 of the fillings won against about 0.45 at most after
// the other moves); playouts from anywhere else would rate every move alike.
TEST(SequentialSearchTest, PlayoutsStartAtTheNewLeaf) {
  const hex g(5);
  const hex::state root = position(g, blocking_puzzles[2].rows, 1);
  const hex::move block = g.at(2, 2);
  const std::vector<hex::move> moves = test::hex_legal(g, root);
  const auto result = sequential_search(g, root, options_with(moves.size(), 500, 8));
  ASSERT_EQ(result.moves.size(), moves.size());
  double best_other = 0;
  double block_rate = 0;
  for (const auto& m : result.moves) {
    EXPECT_EQ(m.visits, 500u);
    if (m.move == block) {
      block_rate = m.win_rate();
    } else {
      best_other = std::max(best_other, m.win_rate());
    }
  }
  EXPECT_GT(block_rate, best_other + 0.2);
}

// The statistics every result must satisfy, whatever the position.
void expect_consistent(const hex& g, const hex::state& root,
                       const search_result<hex::move>& result, std::uint64_t rollouts,
                       unsigned k) {
  EXPECT_EQ(result.rollouts, rollouts);
  EXPECT_EQ(result.playouts, rollouts * k);
  EXPECT_EQ(result.remote_calls, 0u);
  ASSERT_FALSE(result.moves.empty());
  EXPECT_EQ(result.best, result.moves.front().move);
  EXPECT_EQ(result.win_rate, result.moves.front().win_rate());
  const std::vector<hex::move> moves = test::hex_legal(g, root);
  const std::set<hex::move> legal_set(moves.begin(), moves.end());
  std::set<hex::move> seen;
  std::uint64_t visits = 0;
  for (std::size_t i = 0; i < result.moves.size(); ++i) {
    const auto& m = result.moves[i];
    EXPECT_TRUE(legal_set.contains(m.move)) << g.move_name(m.move);
    EXPECT_TRUE(seen.insert(m.move).second) << "listed twice: " << g.move_name(m.move);
    EXPECT_GT(m.visits, 0u);
    EXPECT_EQ(m.visits % k, 0u);
    EXPECT_GE(m.wins, 0.0);
    EXPECT_LE(m.wins, static_cast<double>(m.visits));
    if (i > 0) {
      EXPECT_LE(m.visits, result.moves[i - 1].visits);
    }
    visits += m.visits;
  }
  EXPECT_EQ(visits, rollouts * k);
  EXPECT_GE(result.tree_nodes, 2u);
  EXPECT_LE(result.tree_nodes, rollouts + 1);
}

TEST(SequentialSearchTest, RolloutBudgetIsExactAndStatisticsAreConsistent) {
  const hex g(11);
  const hex::state root = g.initial_state();
  for (const std::uint64_t rollouts : {1, 63, 64, 65, 700}) {
    const auto result = sequential_search(g, root, options_with(rollouts, 4, 9));
    expect_consistent(g, root, result, rollouts, 4);
    // No game ends within so few moves: every rollout creates one node.
    EXPECT_EQ(result.tree_nodes, rollouts + 1);
    // Untried moves come first (in random order), so the first 121 rollouts try every root
    // move once.
    EXPECT_EQ(result.moves.size(), std::min<std::uint64_t>(rollouts, 121));
  }
}

TEST(SequentialSearchTest, RolloutsEndingAtFinishedPositionsStillCount) {
  const hex g(3);
  const hex::state root = position(g, winning_puzzles[0].rows, 1);
  const auto result = sequential_search(g, root, options_with(2000, 5, 4));
  expect_consistent(g, root, result, 2000, 5);
  // Five empty cells: at most 5 + 5*4 + 5*4*3 + 5*4*3*2 + 5*4*3*2*1 positions below the root,
  // so most of the 2000 rollouts ended at finished positions without creating a node.
  EXPECT_LE(result.tree_nodes, 1u + 5 + 20 + 60 + 120 + 120);
}

TEST(SequentialSearchTest, SameSeedSameSearch) {
  const hex g(7);
  hex::state root = g.initial_state();
  g.apply(root, g.at(3, 3));
  const auto a = sequential_search(g, root, options_with(1500, 6, 42));
  const auto b = sequential_search(g, root, options_with(1500, 6, 42));
  const auto c = sequential_search(g, root, options_with(1500, 6, 43));
  expect_consistent(g, root, a, 1500, 6);
  ASSERT_EQ(a.moves.size(), b.moves.size());
  for (std::size_t i = 0; i < a.moves.size(); ++i) {
    EXPECT_EQ(a.moves[i].move, b.moves[i].move);
    EXPECT_EQ(a.moves[i].visits, b.moves[i].visits);
    EXPECT_EQ(a.moves[i].wins, b.moves[i].wins);
  }
  EXPECT_EQ(a.best, b.best);
  EXPECT_EQ(a.tree_nodes, b.tree_nodes);
  // Another seed plays other playouts.
  bool differs = a.moves.size() != c.moves.size();
  for (std::size_t i = 0; !differs && i < a.moves.size(); ++i) {
    differs = a.moves[i].move != c.moves[i].move || a.moves[i].wins != c.moves[i].wins;
  }
  EXPECT_TRUE(differs);
}

// With fewer rollouts than moves (issue 23): the moves tried are not the first cells in board
// order, and among moves of equal visits the result puts those with more wins first, so the
// move played is one whose playouts won, not the first cell tried.
TEST(SequentialSearchTest, FewRolloutsTryRandomMovesAndPlayAWinner) {
  const hex g(11);
  const hex::state root = g.initial_state();
  std::set<hex::move> first_tried;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const auto result = sequential_search(g, root, options_with(10, 1, seed));
    expect_consistent(g, root, result, 10, 1);
    ASSERT_EQ(result.moves.size(), 10u);  // each rollout tried another move once
    for (std::size_t i = 1; i < result.moves.size(); ++i) {
      const auto& before = result.moves[i - 1];
      const auto& after = result.moves[i];
      EXPECT_TRUE(before.visits > after.visits ||
                  (before.visits == after.visits && before.wins >= after.wins))
          << "moves out of order at " << i;
    }
    EXPECT_EQ(result.best, result.moves.front().move);
    if (std::any_of(result.moves.begin(), result.moves.end(),
                    [](const auto& m) { return m.wins > 0; })) {
      EXPECT_GT(result.moves.front().wins, 0) << "played a move whose playout lost";
    }
    std::vector<hex::move> tried;
    for (const auto& m : result.moves) tried.push_back(m.move);
    std::sort(tried.begin(), tried.end());
    first_tried.insert(tried.front());
  }
  // In board order every search would try a1..j1 (moves 0..9).
  EXPECT_GT(first_tried.size(), 5u) << "the moves tried do not depend on the seed";
}

TEST(SequentialSearchTest, TimeBudgetStopsAtAClockReadingAndReportsProgress) {
  const hex g(5);
  search_options options;
  options.rollouts = 0;
  options.seconds = 0.3;
  options.playouts_per_leaf = 4;
  std::vector<std::uint64_t> reported;
  options.progress = [&reported](std::uint64_t done, double) { reported.push_back(done); };
  const auto result = sequential_search(g, g.initial_state(), options);
  EXPECT_GT(result.rollouts, 0u);
  EXPECT_EQ(result.rollouts % 64, 0u);  // the clock is read every 64 rollouts
  EXPECT_EQ(result.playouts, result.rollouts * 4);
  ASSERT_FALSE(reported.empty());
  for (std::size_t i = 0; i < reported.size(); ++i) {
    EXPECT_EQ(reported[i] % 64, 0u);
    EXPECT_LE(reported[i], result.rollouts);
    if (i > 0) {
      EXPECT_GT(reported[i], reported[i - 1]);
    }
  }
}

TEST(SequentialSearchTest, InvalidSearchesThrow) {
  const hex g(5);
  search_options no_budget;
  no_budget.rollouts = 0;
  no_budget.seconds = 0;
  EXPECT_THROW(sequential_search(g, g.initial_state(), no_budget), std::invalid_argument);
  search_options no_playouts = options_with(10, 0, 1);
  EXPECT_THROW(sequential_search(g, g.initial_state(), no_playouts), std::invalid_argument);
  const hex::state won = position(g,
                                  {". . X . .",
                                   ". X . . .",
                                   ". X . . .",
                                   "X . . . .",
                                   "X . . . ."},
                                  2);
  ASSERT_EQ(g.winner(won), 1);
  EXPECT_THROW(sequential_search(g, won, options_with(10, 1, 1)), std::invalid_argument);
}

}  // namespace
}  // namespace seriema::mcts

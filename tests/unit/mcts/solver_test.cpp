// Tests of the solver's immediate part (search_options::solver) in the sequential engine on
// Hex: a win in one and the only block are played after a single rollout, a double threat (win
// in three: the opponent can block only one of two cells) is found with few rollouts, and a
// lost root still names a move; positions checked by enumeration, for both players.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <hex.hpp>
#include <seriema/mcts/sequential.hpp>
#include <set>
#include <vector>

#include "../../support/hex_positions.hpp"

namespace seriema::mcts {
namespace {

using hex::hex;

using test::hex_legal;
using test::hex_mirrored;
using test::hex_position;
using test::mover_wins_by_force;

bool mover_wins_at_once(const hex& g, const hex::state& s) {
  return !test::hex_winning_moves(g, s, s.to_move).empty();
}
// Moves after which every reply leaves the mover a win in one (and the reply itself never
// wins): wins in three.
std::set<hex::move> wins_in_three(const hex& g, const hex::state& s) {
  std::set<hex::move> wins;
  for (const hex::move m : hex_legal(g, s)) {
    hex::state next = s;
    g.apply(next, m);
    if (g.winner(next) != nobody) continue;
    bool forced = true;
    for (const hex::move reply : hex_legal(g, next)) {
      hex::state after = next;
      g.apply(after, reply);
      forced = forced && g.winner(after) == nobody && mover_wins_at_once(g, after);
    }
    if (forced) wins.insert(m);
  }
  return wins;
}

search_options solver_options(std::uint64_t rollouts, std::uint64_t seed, bool solver = true) {
  search_options o;
  o.rollouts = rollouts;
  o.playouts_per_leaf = 1;
  o.seed = seed;
  o.solver = solver;
  return o;
}

// 5x5, black (top-bottom) to move: (1, 2) completes column 2 at once, and white (left-right)
// threatens row 3 at (3, 2).
hex::state win_in_one(const hex& g) {
  return hex_position(g, {{0, 2}, {2, 2}, {3, 2}, {4, 2}}, {{3, 0}, {3, 1}, {3, 3}, {3, 4}}, 1);
}

TEST(Solver, PlaysTheWinInOneAfterOneRollout) {
  const hex g(5);
  for (const hex::state& s : {win_in_one(g), hex_mirrored(g, win_in_one(g))}) {
    ASSERT_TRUE(mover_wins_at_once(g, s));
    hex::state after = s;
    const auto result = sequential_search(g, s, solver_options(1, 3));
    g.apply(after, result.best);
    EXPECT_EQ(g.winner(after), s.to_move) << g.render(s);
    EXPECT_EQ(result.moves.size(), 1u);
  }
}

TEST(Solver, BlocksTheOnlyThreatAfterOneRollout) {
  const hex g(5);
  // White threatens (3, 2) in row 3; black has no win of its own.
  const hex::state s = hex_position(g, {{0, 0}, {4, 4}}, {{3, 0}, {3, 1}, {3, 3}, {3, 4}}, 1);
  for (const hex::state& p : {s, hex_mirrored(g, s)}) {
    ASSERT_FALSE(mover_wins_at_once(g, p));
    int found = 0;
    for (std::uint64_t seed = 1; seed <= 10; ++seed) {
      const auto result = sequential_search(g, p, solver_options(1, seed));
      found += result.best == (p.to_move == 1 ? g.at(3, 2) : g.at(2, 3)) ? 1 : 0;
    }
    EXPECT_EQ(found, 10) << g.render(p);
  }
}

// Black: (0, 2), (1, 2) from the top and (4, 1), (4, 2) on the bottom row; (2, 2) threatens
// both (3, 1) and (3, 2), so white can block only one.
TEST(Solver, FindsTheDoubleThreatOfAWinInThree) {
  const hex g(5);
  const hex::state s = seriema::test::hex_win_in_three(g);
  for (const hex::state& p : {s, hex_mirrored(g, s)}) {
    const auto wins = wins_in_three(g, p);
    ASSERT_FALSE(wins.empty()) << g.render(p);
    ASSERT_FALSE(mover_wins_at_once(g, p));
    int with_solver = 0;
    int without = 0;
    for (std::uint64_t seed = 1; seed <= 10; ++seed) {
      const auto proof = sequential_search(g, p, solver_options(400, seed));
      with_solver += wins.count(proof.best);
      // The proof ends the search: after the double threat every reply is decided at once.
      EXPECT_EQ(proof.proven_winner, p.to_move);
      EXPECT_LT(proof.rollouts, 400u);
      without += wins.count(sequential_search(g, p, solver_options(400, seed, false)).best);
    }
    EXPECT_GE(with_solver, 10) << g.render(p);
    EXPECT_LT(without, with_solver) << "without the solver " << without << " of 10";
  }
}

TEST(Solver, ALostRootIsProvenAtOnceAndStillNamesAMove) {
  const hex g(5);
  // White threatens (3, 2) and (2, 2)... two separate cells: row 3 and row 1 each miss one.
  const hex::state s =
      hex_position(g, {{0, 0}, {4, 4}, {2, 0}},
               {{3, 0}, {3, 1}, {3, 3}, {3, 4}, {1, 0}, {1, 1}, {1, 2}, {1, 4}}, 1);
  ASSERT_FALSE(mover_wins_at_once(g, s));
  const auto result = sequential_search(g, s, solver_options(50, 1));
  EXPECT_TRUE(result.best == g.at(3, 2) || result.best == g.at(1, 3)) << g.move_name(result.best);
  EXPECT_EQ(result.proven_winner, 2);
  EXPECT_EQ(result.rollouts, 1u);
  EXPECT_EQ(result.win_rate, 0.0);
}

// Proofs need both directions: a node is won through one move, lost only once every move is
// (the opponent's nodes on the way). On 3x3, every position of up to two stones is proven
// within the budget, as exhaustive search says, and a proven win names a winning move.
TEST(Solver, ProvesEveryThreeByThreeOpeningAsExhaustiveSearchDoes) {
  const hex g(3);
  for (const hex::state& s : test::openings_up_to_two_stones(g)) {
    const bool mover_wins = mover_wins_by_force(g, s);
    const auto result = sequential_search(g, s, solver_options(20000, 5));
    ASSERT_NE(result.proven_winner, nobody) << "not proven in 20000 rollouts\n" << g.render(s);
    EXPECT_EQ(result.proven_winner == s.to_move, mover_wins) << g.render(s);
    if (mover_wins) {
      hex::state after = s;
      g.apply(after, result.best);
      EXPECT_TRUE(g.winner(after) == s.to_move || !mover_wins_by_force(g, after))
          << g.move_name(result.best) << "\n" << g.render(s);
    }
  }
}

// Knowledge (search_options::knowledge, Hex's dead and captured cells) with the solver: the
// same proofs and winning moves, with fewer rollouts; captured cells never among the root's
// moves; a filled-in win proven by the root's expansion.
TEST(Solver, KnowledgeProvesThreeByThreeOpeningsWithFewerRollouts) {
  const hex g(3);
  std::uint64_t rollouts[2] = {0, 0};
  for (const bool knowledge : {false, true}) {
    search_options o = solver_options(20000, 5);
    o.knowledge = knowledge;
    for (const hex::state& s : test::openings_up_to_two_stones(g)) {
      const bool mover_wins = mover_wins_by_force(g, s);
      const auto result = sequential_search(g, s, o);
      rollouts[knowledge ? 1 : 0] += result.rollouts;
      ASSERT_NE(result.proven_winner, nobody) << g.render(s);
      EXPECT_EQ(result.proven_winner == s.to_move, mover_wins) << g.render(s);
      if (!mover_wins) continue;
      hex::state after = s;
      g.apply(after, result.best);
      EXPECT_TRUE(g.winner(after) == s.to_move || !mover_wins_by_force(g, after))
          << g.move_name(result.best) << "\n" << g.render(s);
    }
  }
  EXPECT_LT(rollouts[1] * 3, rollouts[0] * 2) << rollouts[1] << " rollouts with knowledge, "
                                              << rollouts[0] << " without";
}

TEST(Solver, KnowledgePrunesCapturedCellsAndProvesFilledInWins) {
  const hex g(5);
  search_options o = solver_options(2000, 7);
  o.knowledge = true;
  const auto pruned = sequential_search(g, hex_position(g, {{1, 2}}, {}, 2), o);
  EXPECT_GT(pruned.moves.size(), 15u);
  for (const auto& m : pruned.moves) {
    EXPECT_NE(m.move, g.at(0, 2));
    EXPECT_NE(m.move, g.at(0, 3));
  }
  const auto chain = hex_position(g, {{1, 2}, {2, 2}, {3, 2}}, {{0, 0}, {4, 4}}, 2);
  for (const hex::state& s : {chain, hex_mirrored(g, chain)}) {
    const auto proven = sequential_search(g, s, o);
    EXPECT_EQ(proven.proven_winner, opponent(s.to_move)) << g.render(s);
    EXPECT_EQ(proven.rollouts, 1u);
  }
}

// The column with its bridges to both edges, black to move: a filled-in win, proven at the
// root's expansion, by a cell one of the bridges captured.
hex::state column_with_bridges(const hex& g) {
  return hex_position(g, {{1, 2}, {2, 2}, {3, 2}}, {{0, 0}, {4, 4}}, 1);
}
std::vector<hex::move> bridge_carriers(const hex& g) {
  return {g.at(0, 2), g.at(0, 3), g.at(4, 1), g.at(4, 2)};
}
TEST(Solver, KnowledgeWinsByFillInWithACapturedCell) {
  const hex g(5);
  search_options o = solver_options(2000, 7);
  o.knowledge = true;
  const auto won = sequential_search(g, column_with_bridges(g), o);
  EXPECT_EQ(won.proven_winner, 1);
  EXPECT_EQ(won.rollouts, 1u);
  const std::vector<hex::move> carriers = bridge_carriers(g);
  EXPECT_NE(std::find(carriers.begin(), carriers.end(), won.best), carriers.end())
      << g.move_name(won.best);
}

// Knowledge without the solver prunes the same moves but proves nothing: the search spends its
// budget, and a position won by fill-in keeps only its winning move (a captured cell).
TEST(Solver, KnowledgeWithoutTheSolverPrunesAndProvesNothing) {
  const hex g(5);
  search_options o = solver_options(500, 7);
  o.solver = false;
  o.knowledge = true;
  const auto pruned = sequential_search(g, hex_position(g, {{1, 2}}, {}, 2), o);
  EXPECT_EQ(pruned.proven_winner, nobody);
  EXPECT_EQ(pruned.rollouts, 500u);
  EXPECT_GT(pruned.moves.size(), 15u);
  for (const auto& m : pruned.moves) {
    EXPECT_NE(m.move, g.at(0, 2));
    EXPECT_NE(m.move, g.at(0, 3));
  }
  const auto won = sequential_search(g, column_with_bridges(g), o);
  EXPECT_EQ(won.proven_winner, nobody);
  EXPECT_EQ(won.rollouts, 500u);
  ASSERT_EQ(won.moves.size(), 1u);
  const std::vector<hex::move> carriers = bridge_carriers(g);
  EXPECT_NE(std::find(carriers.begin(), carriers.end(), won.best), carriers.end());
}

}  // namespace
}  // namespace seriema::mcts

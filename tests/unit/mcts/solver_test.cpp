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

namespace seriema::mcts {
namespace {

using hex::hex;

// Player 1's stones, player 2's stones, player to move.
hex::state position(const hex& g, std::initializer_list<std::pair<int, int>> black,
                    std::initializer_list<std::pair<int, int>> white, player to_move) {
  hex::state s = g.initial_state();
  for (auto [r, c] : black) EXPECT_TRUE(g.place(s, r, c, 1));
  for (auto [r, c] : white) EXPECT_TRUE(g.place(s, r, c, 2));
  s.to_move = to_move;
  s.moves_played = static_cast<std::uint16_t>(black.size() + white.size());
  return s;
}
// The same problem for the other player: mirrored in the main diagonal, colours exchanged.
hex::state mirrored(const hex& g, const hex::state& s) {
  hex::state m = g.initial_state();
  for (int r = 0; r < g.size(); ++r) {
    for (int c = 0; c < g.size(); ++c) {
      if (const player p = g.cell(s, r, c); p != nobody) g.place(m, c, r, opponent(p));
    }
  }
  m.to_move = opponent(s.to_move);
  m.moves_played = s.moves_played;
  return m;
}
std::vector<hex::move> legal(const hex& g, const hex::state& s) {
  std::vector<hex::move> moves(g.max_moves());
  moves.resize(g.legal_moves(s, moves));
  return moves;
}
bool mover_wins_at_once(const hex& g, const hex::state& s) {
  for (const hex::move m : legal(g, s)) {
    hex::state next = s;
    g.apply(next, m);
    if (g.winner(next) == s.to_move) return true;
  }
  return false;
}
// Moves after which every reply leaves the mover a win in one (and the reply itself never
// wins): wins in three.
std::set<hex::move> wins_in_three(const hex& g, const hex::state& s) {
  std::set<hex::move> wins;
  for (const hex::move m : legal(g, s)) {
    hex::state next = s;
    g.apply(next, m);
    if (g.winner(next) != nobody) continue;
    bool forced = true;
    for (const hex::move reply : legal(g, next)) {
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
  return position(g, {{0, 2}, {2, 2}, {3, 2}, {4, 2}}, {{3, 0}, {3, 1}, {3, 3}, {3, 4}}, 1);
}

TEST(Solver, PlaysTheWinInOneAfterOneRollout) {
  const hex g(5);
  for (const hex::state& s : {win_in_one(g), mirrored(g, win_in_one(g))}) {
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
  const hex::state s = position(g, {{0, 0}, {4, 4}}, {{3, 0}, {3, 1}, {3, 3}, {3, 4}}, 1);
  for (const hex::state& p : {s, mirrored(g, s)}) {
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
  const hex::state s = position(g, {{0, 2}, {1, 2}, {4, 1}, {4, 2}}, {{0, 0}, {1, 0}, {4, 4}}, 1);
  for (const hex::state& p : {s, mirrored(g, s)}) {
    const auto wins = wins_in_three(g, p);
    ASSERT_FALSE(wins.empty()) << g.render(p);
    ASSERT_FALSE(mover_wins_at_once(g, p));
    int with_solver = 0;
    int without = 0;
    for (std::uint64_t seed = 1; seed <= 10; ++seed) {
      with_solver += wins.count(sequential_search(g, p, solver_options(400, seed)).best);
      without += wins.count(sequential_search(g, p, solver_options(400, seed, false)).best);
    }
    EXPECT_GE(with_solver, 10) << g.render(p);
    EXPECT_LT(without, with_solver) << "without the solver " << without << " of 10";
  }
}

TEST(Solver, ALostRootStillNamesAMoveAndCountsItLost) {
  const hex g(5);
  // White threatens (3, 2) and (2, 2)... two separate cells: row 3 and row 1 each miss one.
  const hex::state s =
      position(g, {{0, 0}, {4, 4}, {2, 0}},
               {{3, 0}, {3, 1}, {3, 3}, {3, 4}, {1, 0}, {1, 1}, {1, 2}, {1, 4}}, 1);
  ASSERT_FALSE(mover_wins_at_once(g, s));
  const auto result = sequential_search(g, s, solver_options(50, 1));
  EXPECT_TRUE(result.best == g.at(3, 2) || result.best == g.at(1, 3)) << g.move_name(result.best);
  EXPECT_EQ(result.moves.size(), 2u);
  EXPECT_EQ(result.win_rate, 0.0);
}

}  // namespace
}  // namespace seriema::mcts

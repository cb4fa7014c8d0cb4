// Tests of the df-pn solver (mcts::dfpn_solver) on Hex: its proofs agree with an exhaustive
// search on every small position tried, with knowledge and without, for both players; its
// winning moves win; budgets and the stop flag end it without a proof; and beside a search
// (search_beside_solver) its proof ends the search early and names the winning move.
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <cstdint>
#include <hex.hpp>
#include <seriema/mcts/dfpn.hpp>
#include <seriema/mcts/sequential.hpp>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "../../support/hex_positions.hpp"

namespace seriema::mcts {
namespace {

using hex::hex;
using test::hex_legal;
using test::hex_mirrored;
using test::hex_position;

// Exhaustive search with a table of positions already decided: whether the player to move in s
// wins with best play (boards of 4x4 with a few stones in milliseconds).
class exhaustive {
 public:
  explicit exhaustive(const hex& g) : g_(g) {
    for (int cell = 0; cell < g.size() * g.size(); ++cell) {
      board_[static_cast<std::size_t>(cell / 64)] |= std::uint64_t{1} << (cell % 64);
    }
    decided_.reserve(std::size_t{1} << 20);
  }
  bool mover_wins(const hex::state& s) {
    const std::uint64_t key = g_.hash(s);
    if (const auto known = decided_.find(key); known != decided_.end()) return known->second;
    const hex::cell_set empty = empty_cells(s);
    // Stones never hurt their owner: a player who cannot join its edges with every empty cell
    // its own cannot win, and one of the two wins (no draws).
    bool wins = false;
    if (!joins_with(s, s.to_move, empty)) {
      wins = false;
    } else if (!joins_with(s, opponent(s.to_move), empty)) {
      wins = true;
    } else {
      for (std::size_t w = 0; w < empty.size() && !wins; ++w) {
        for (std::uint64_t bits = empty[w]; bits != 0 && !wins; bits &= bits - 1) {
          hex::state next = s;
          g_.apply(next, static_cast<hex::move>(w * 64 + static_cast<std::size_t>(
                                                              std::countr_zero(bits))));
          const player winner = g_.winner(next);
          wins = winner == s.to_move || (winner == nobody && !mover_wins(next));
        }
      }
    }
    decided_.emplace(key, wins);
    return wins;
  }

 private:
  hex::cell_set empty_cells(const hex::state& s) const {
    hex::cell_set empty{};
    for (std::size_t w = 0; w < empty.size(); ++w) {
      empty[w] = board_[w] & ~(s.stones[0][w] | s.stones[1][w]);
    }
    return empty;
  }
  bool joins_with(hex::state s, player who, const hex::cell_set& empty) const {
    for (std::size_t w = 0; w < empty.size(); ++w) s.stones[who - 1][w] |= empty[w];
    return g_.connected(s, who);
  }

  const hex& g_;
  hex::cell_set board_{};
  std::unordered_map<std::uint64_t, bool> decided_;
};

dfpn_options small_table(bool knowledge = true) {
  dfpn_options o;
  o.table_bytes = std::size_t{4} << 20;
  o.knowledge = knowledge;
  o.seconds = 120;  // a regression ends as "unknown", a failure, not a hang
  return o;
}

// Every proof is checked: the outcome against the exhaustive search, and a claimed winning
// move by playing it (after it the opponent must not win).
void expect_agrees(const hex& g, dfpn_solver<hex>& solver, exhaustive& truth,
                   const hex::state& s) {
  const dfpn_result<hex::move> r = solver.solve(s);
  const bool wins = truth.mover_wins(s);
  ASSERT_EQ(r.outcome, wins ? dfpn_outcome::win : dfpn_outcome::no_win) << g.render(s);
  if (!wins) return;
  hex::state after = s;
  g.apply(after, r.winning_move);
  const bool won_at_once = g.winner(after) == s.to_move;
  EXPECT_TRUE(won_at_once || (g.winner(after) == nobody && !truth.mover_wins(after)))
      << g.move_name(r.winning_move) << " does not win in\n"
      << g.render(s);
}

// Positions of a game in progress: `count` random games of `size` stopped after 4 to 7 moves
// (fixed seed), those with no winner yet.
std::vector<hex::state> random_positions(const hex& g, int count) {
  random rng(2026);
  std::vector<hex::state> positions;
  for (int i = 0; i < count; ++i) {
    hex::state s = g.initial_state();
    const std::uint32_t moves = 4 + rng.below(4);
    for (std::uint32_t m = 0; m < moves && g.winner(s) == nobody; ++m) {
      const std::vector<hex::move> legal = hex_legal(g, s);
      g.apply(s, legal[rng.below(static_cast<std::uint32_t>(legal.size()))]);
    }
    if (g.winner(s) == nobody) positions.push_back(s);
  }
  return positions;
}

// Every 3x3 position of up to two stones and 60 positions of 4x4 games in progress, each
// solved by one solver (the table kept between them) and checked, for both players.
void check_small_boards(const seriema::hex::knowledge_sources& knowledge,
                        bool solver_knowledge) {
  for (const int size : {3, 4}) {
    const hex g(size, false, seriema::hex::playout_policy::random, knowledge);
    dfpn_solver<hex> solver(g, small_table(solver_knowledge));
    exhaustive truth(g);
    const std::vector<hex::state> positions =
        size == 3 ? test::openings_up_to_two_stones(g) : random_positions(g, 60);
    for (const hex::state& s : positions) {
      expect_agrees(g, solver, truth, s);
      expect_agrees(g, solver, truth, hex_mirrored(g, s));
    }
  }
}

TEST(Dfpn, AgreesWithExhaustiveSearchWithoutKnowledge) {
  check_small_boards(seriema::hex::knowledge_sources{}, false);
}

TEST(Dfpn, AgreesWithExhaustiveSearchWithInferiorCellsAndConnections) {
  seriema::hex::knowledge_sources all;
  all.virtual_connections = true;
  all.must_play = true;
  check_small_boards(all, true);
}

// 5x5, black to move: a double threat wins in three (test::hex_win_in_three); after the
// solver's move a solver without knowledge finds no win for the opponent.
TEST(Dfpn, ProvesAWinInThreeForBothPlayers) {
  const hex g(5);
  dfpn_solver<hex> solver(g, small_table());
  dfpn_solver<hex> plain(g, small_table(false));
  const hex::state black = test::hex_win_in_three(g);
  for (const hex::state& s : {black, hex_mirrored(g, black)}) {
    const dfpn_result<hex::move> r = solver.solve(s);
    ASSERT_EQ(r.outcome, dfpn_outcome::win) << g.render(s);
    hex::state after = s;
    g.apply(after, r.winning_move);
    EXPECT_EQ(plain.solve(after).outcome, dfpn_outcome::no_win) << g.move_name(r.winning_move);
  }
}

// The empty 5x5 board is a first-player win, which no exhaustive search here could check in
// time: its proof's move is checked by the solver itself (the opponent cannot win after it).
TEST(Dfpn, ProvesTheEmpty5x5BoardAWinForTheFirstPlayer) {
  const hex g(5);
  dfpn_solver<hex> solver(g, small_table());
  const dfpn_result<hex::move> r = solver.solve(g.initial_state());
  ASSERT_EQ(r.outcome, dfpn_outcome::win);
  hex::state after = g.initial_state();
  g.apply(after, r.winning_move);
  EXPECT_EQ(solver.solve(after).outcome, dfpn_outcome::no_win) << g.move_name(r.winning_move);
}

TEST(Dfpn, BudgetsAndTheStopFlagEndItWithoutAProof) {
  const hex g(9);
  dfpn_options o = small_table();
  o.max_expansions = 500;
  dfpn_solver<hex> bounded(g, o);
  const dfpn_result<hex::move> r = bounded.solve(g.initial_state());
  EXPECT_EQ(r.outcome, dfpn_outcome::unknown);
  EXPECT_LE(r.expansions, 500u);

  dfpn_solver<hex> stopped(g, small_table());
  const std::atomic<bool> stop{true};
  const dfpn_result<hex::move> s = stopped.solve(g.initial_state(), &stop);
  EXPECT_EQ(s.outcome, dfpn_outcome::unknown);
  EXPECT_LE(s.expansions, 1u);
}

TEST(Dfpn, RefusesATableUnder1MiB) {
  const hex g(5);
  dfpn_options o;
  o.table_bytes = 1000;
  EXPECT_THROW(dfpn_solver<hex>(g, o), std::invalid_argument);
}

// Beside a search of two minutes, the solver proves the win in three at once: the search ends
// early (the stop flag works), and the result names the proven winner and its move, first.
TEST(Dfpn, ItsProofEndsTheSearchBesideIt) {
  const hex g(5);
  dfpn_solver<hex> solver(g, small_table());
  const hex::state s = test::hex_win_in_three(g);
  search_options o;
  o.rollouts = 0;
  o.seconds = 120;
  sequential_engine<hex> engine(g);
  const search_and_proof<hex::move> r = search_beside_solver(
      solver, s, o, [&](const search_options& with_stop) { return engine.search(s, with_stop); });
  ASSERT_EQ(r.proof.outcome, dfpn_outcome::win);
  EXPECT_EQ(r.search.proven_winner, 1);
  EXPECT_EQ(r.search.best, r.proof.winning_move);
  EXPECT_TRUE(r.proof_applied);
  ASSERT_FALSE(r.search.moves.empty());
  EXPECT_EQ(r.search.moves.front().move, r.proof.winning_move);
  EXPECT_LT(r.search.seconds, 60.0);
  exhaustive truth(g);
  hex::state after = s;
  g.apply(after, r.search.best);
  EXPECT_FALSE(truth.mover_wins(after));
}

TEST(Dfpn, RefusesAStopFlagOfTheCaller) {
  const hex g(5);
  dfpn_solver<hex> solver(g, small_table());
  const std::atomic<bool> stop{false};
  search_options o;
  o.stop = &stop;
  const auto no_search = [](const search_options&) { return search_result<hex::move>{}; };
  EXPECT_THROW(search_beside_solver(solver, g.initial_state(), o, no_search),
               std::invalid_argument);
}

}  // namespace
}  // namespace seriema::mcts

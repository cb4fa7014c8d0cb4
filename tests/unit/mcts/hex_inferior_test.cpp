// Tests of Hex's inferior-cell analysis (hex::inferior_cells) and of hex::prune: dead and
// captured cells on hand-made positions, and against exact game values by brute force on small
// boards: a filled board's winner is the position's, and the moves prune keeps hold a best one.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <hex.hpp>
#include <initializer_list>
#include <seriema/mcts/game.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace seriema::hex {
namespace {

// A position with black stones on `black`, white ones on `white` (cell names: "c2" is column
// c, row 2), and `to_move` to move.
hex::state position(const hex& g, std::initializer_list<std::string_view> black,
                    std::initializer_list<std::string_view> white, player to_move) {
  hex::state s = g.initial_state();
  for (const auto& [cells, who] : {std::pair{black, player{1}}, std::pair{white, player{2}}}) {
    for (const std::string_view name : cells) {
      const auto cell = g.parse_cell(name);
      EXPECT_TRUE(cell.has_value()) << name;
      EXPECT_TRUE(g.place(s, *cell / g.size(), *cell % g.size(), who)) << name;
    }
  }
  s.to_move = to_move;
  return s;
}

bool in(const hex::cell_set& cells, hex::move m) { return (cells[m / 64] >> (m % 64) & 1) != 0; }
hex::move cell(const hex& g, std::string_view name) { return *g.parse_cell(name); }
int count(const hex::cell_set& cells) {
  int n = 0;
  for (const std::uint64_t word : cells) n += std::popcount(word);
  return n;
}

TEST(HexInferior, AnEmptyBoardHasNoInferiorCell) {
  for (const int size : {2, 5, 11, 19}) {
    const hex g(size);
    const auto found = g.inferior_cells(g.initial_state());
    EXPECT_EQ(count(found.dead), 0) << size;
    EXPECT_EQ(count(found.captured[0]) + count(found.captured[1]), 0) << size;
    EXPECT_EQ(found.winner, mcts::nobody);
  }
}

TEST(HexInferior, ACellInsideFourStonesOfOnePlayerIsDead) {
  const hex g(5);
  // c3's ring: c2, d2, d3, c4 (black, consecutive), b4, b3 (empty).
  for (const player who : {player{1}, player{2}}) {
    const std::initializer_list<std::string_view> ring = {"c2", "d2", "d3", "c4"};
    const hex::state s = who == 1 ? position(g, ring, {}, 2) : position(g, {}, ring, 1);
    const auto found = g.inferior_cells(s);
    EXPECT_TRUE(in(found.dead, cell(g, "c3"))) << "player " << int(who) << "\n" << g.render(s);
    EXPECT_EQ(g.cell(found.filled, 2, 2), player{1});  // a dead cell is filled black
  }
}

TEST(HexInferior, StonesOnOppositeSidesLeaveACellAlive) {
  const hex g(5);
  const hex::state s = position(g, {"c2", "c4"}, {"b3", "d3"}, 1);
  const auto found = g.inferior_cells(s);
  EXPECT_FALSE(in(found.dead, cell(g, "c3"))) << g.render(found.filled);
  EXPECT_EQ(g.cell(found.filled, 2, 2), mcts::nobody);
}

TEST(HexInferior, ACornerBesideAStoneOnItsEdgeIsDead) {
  // a1 touches the top and left edges, b1 and a2; b1 black joins the top edge and touches a2.
  const hex g(4);
  const auto found = g.inferior_cells(position(g, {"b1"}, {}, 2));
  EXPECT_TRUE(in(found.dead, cell(g, "a1")));
  EXPECT_FALSE(in(found.dead, cell(g, "a2")));
}

TEST(HexInferior, TheTwoCellsOfABridgeToTheEdgeAreCaptured) {
  const hex g(5);
  // c2 black: c1 and d1 join it to the top edge; white on one, black answers on the other.
  const auto black = g.inferior_cells(position(g, {"c2"}, {}, 2));
  EXPECT_TRUE(in(black.captured[0], cell(g, "c1")));
  EXPECT_TRUE(in(black.captured[0], cell(g, "d1")));
  EXPECT_EQ(g.cell(black.filled, 0, 2), player{1});
  EXPECT_EQ(g.cell(black.filled, 0, 3), player{1});
  // The same for white at b3: a3 and a4 join it to the left edge.
  const auto white = g.inferior_cells(position(g, {}, {"b3"}, 1));
  EXPECT_TRUE(in(white.captured[1], cell(g, "a3")));
  EXPECT_TRUE(in(white.captured[1], cell(g, "a4")));
  EXPECT_EQ(count(white.captured[0]), 0);
}

TEST(HexInferior, TheCentreOfThreeByThreeWinsByFillIn) {
  // b2 with both bridges to its edges: the filled board joins them, whoever is to move.
  const hex g(3);
  for (const player who : {player{1}, player{2}}) {
    const hex::state s = who == 1 ? position(g, {"b2"}, {}, 2) : position(g, {}, {"b2"}, 1);
    const auto found = g.inferior_cells(s);
    EXPECT_EQ(found.winner, who) << g.render(found.filled);
    std::vector<hex::move> moves(g.max_moves());
    moves.resize(g.legal_moves(s, moves));
    const mcts::pruned kept = g.prune(s, moves);
    EXPECT_EQ(kept.decided, who);
    EXPECT_GE(kept.count, 1u);
  }
}

TEST(HexInferior, PruneKeepsTheCellsLeftEmptyAndEverythingWhileTheSwapIsAvailable) {
  const hex g(5, false, playout_policy::random, knowledge_sources{true, false, false, false});
  const hex::state s = position(g, {"c2"}, {"b4"}, 1);
  std::vector<hex::move> moves(g.max_moves());
  moves.resize(g.legal_moves(s, moves));
  const auto found = g.inferior_cells(s);
  const mcts::pruned kept = g.prune(s, moves);
  EXPECT_EQ(kept.decided, mcts::nobody);
  const int filled = count(found.dead) + count(found.captured[0]) + count(found.captured[1]);
  EXPECT_GT(filled, 0);
  EXPECT_EQ(kept.count, moves.size() - static_cast<std::size_t>(filled));
  for (std::size_t i = 0; i < moves.size(); ++i) {
    const bool empty_after = g.cell(found.filled, moves[i] / 5, moves[i] % 5) == mcts::nobody;
    EXPECT_EQ(i < kept.count, empty_after) << g.move_name(moves[i]);
  }
  // The swap's position: one black stone, white to move, the swap rule on.
  const hex with_swap(5, true);
  hex::state first = with_swap.initial_state();
  with_swap.apply(first, with_swap.at(1, 2));
  std::vector<hex::move> replies(with_swap.max_moves());
  replies.resize(with_swap.legal_moves(first, replies));
  EXPECT_EQ(with_swap.prune(first, replies).count, replies.size());
  // No knowledge source: nothing pruned.
  const hex without(5, false, playout_policy::random,
                    knowledge_sources{false, false, false, false});
  EXPECT_EQ(without.prune(s, moves).count, moves.size());
}

// Exact values by brute force, memoized on the position (boards of 25 cells or fewer: each
// player's stones are the low 25 bits of one word, and the key holds both and the mover).
class solver {
 public:
  explicit solver(const hex& g) : g_(g) { EXPECT_LE(g.size() * g.size(), 25); }
  // Whether the player to move in s (not over) wins with best play.
  bool mover_wins(const hex::state& s) {
    const std::uint64_t key =
        s.stones[0][0] | s.stones[1][0] << 25 | std::uint64_t{s.to_move} << 50;
    if (const auto it = memo_.find(key); it != memo_.end()) return it->second;
    std::vector<hex::move> moves(g_.max_moves());
    moves.resize(g_.legal_moves(s, moves));
    bool wins = false;
    for (const hex::move m : moves) {
      if (after_wins_for_mover(s, m)) {
        wins = true;
        break;
      }
    }
    memo_.emplace(key, wins);
    return wins;
  }
  // Whether playing m in s wins for the player to move in s.
  bool after_wins_for_mover(const hex::state& s, hex::move m) {
    hex::state after = s;
    g_.apply(after, m);
    if (g_.winner(after) != mcts::nobody) return g_.winner(after) == s.to_move;
    return !mover_wins(after);
  }

 private:
  const hex& g_;
  std::unordered_map<std::uint64_t, bool> memo_;
};

struct agreement {
  int checked = 0;
  int decided = 0;  // positions the fill-in decided
  int pruned = 0;   // positions where prune kept fewer moves than legal
  int proven = 0;   // positions prune decided
};

// Checks s (not over, `moves` its legal moves) against the exact value: a filled board's winner
// is the position's; the moves prune keeps hold a winning one when there is one; a mover it
// proves won keeps one move, a winning one, a captured cell of its own where it has one.
void expect_agrees(const hex& g, solver& exact, const hex::state& s,
                   const std::vector<hex::move>& moves, agreement& seen) {
  const bool mover_wins = exact.mover_wins(s);
  const player truth = mover_wins ? s.to_move : mcts::opponent(s.to_move);
  const auto found = g.inferior_cells(s);
  ++seen.checked;
  if (found.winner != mcts::nobody && g.knowledge().inferior_cells) {
    ASSERT_EQ(found.winner, truth) << g.render(s) << "filled\n" << g.render(found.filled);
    ++seen.decided;
  }
  std::vector<hex::move> kept_moves = moves;
  const mcts::pruned kept = g.prune(s, kept_moves);
  ASSERT_GE(kept.count, 1u);
  ASSERT_LE(kept.count, moves.size());
  seen.pruned += kept.count < moves.size() ? 1 : 0;
  if (kept.decided != mcts::nobody) {
    ASSERT_EQ(kept.decided, truth) << g.render(s);
    ++seen.proven;
  }
  bool a_kept_move_wins = false;
  for (std::size_t i = 0; i < kept.count; ++i) {
    a_kept_move_wins |= exact.after_wins_for_mover(s, kept_moves[i]);
  }
  ASSERT_EQ(a_kept_move_wins, mover_wins) << "kept " << kept.count << " of " << moves.size()
                                          << "\n" << g.render(s);
  if (kept.decided == s.to_move) {
    ASSERT_EQ(kept.count, 1u);
    ASSERT_TRUE(exact.after_wins_for_mover(s, kept_moves[0])) << g.render(s);
    // Decided by the fill-in (not by a virtual connection): the finishing captured cell.
    const hex::cell_set& own = found.captured[s.to_move - 1];
    ASSERT_TRUE(!g.knowledge().inferior_cells || found.winner != s.to_move || count(own) == 0 ||
                in(own, kept_moves[0]))
        << g.render(s);
  }
}

// Every source prune uses: inferior cells, virtual connections and must-play.
constexpr knowledge_sources all_pruning{true, false, true, true};

class HexPrune : public ::testing::TestWithParam<knowledge_sources> {};
INSTANTIATE_TEST_SUITE_P(Sources, HexPrune,
                         ::testing::Values(knowledge_sources{}, all_pruning,
                                           knowledge_sources{false, false, true, true}),
                         [](const auto& param) {
                           return param.index == 0   ? std::string("InferiorCells")
                                  : param.index == 1 ? std::string("All")
                                                    : std::string("ConnectionsOnly");
                         });

TEST_P(HexPrune, AgreesWithExactValuesOnRandomGamesOfSmallBoards) {
  mcts::random rng(46);
  agreement seen;
  // Checked once at most 10 cells are empty (the brute force stays fast).
  for (const int size : {3, 4, 5}) {
    const hex g(size, false, playout_policy::random, GetParam());
    solver exact(g);
    for (int game = 0; game < 300; ++game) {
      hex::state s = g.initial_state();
      std::vector<hex::move> moves(g.max_moves());
      for (;;) {
        moves.resize(g.max_moves());
        moves.resize(g.legal_moves(s, moves));
        if (moves.empty()) break;
        if (moves.size() <= 10) {
          expect_agrees(g, exact, s, moves, seen);
          if (HasFatalFailure()) return;
        }
        g.apply(s, moves[rng.below(static_cast<std::uint32_t>(moves.size()))]);
      }
    }
  }
  std::printf("%d positions decided by fill-in, %d by prune, %d pruned\n", seen.decided,
              seen.proven, seen.pruned);
  if (GetParam().inferior_cells) {
    EXPECT_GT(seen.decided, 300);  // fill-in decided positions
  }
  EXPECT_GT(seen.proven, 300);   // prune decided positions before the end
  EXPECT_GT(seen.pruned, 1000);  // and pruned moves in many
}

// Every placement of stones on the 2x2 and 3x3 boards (whatever the stone counts: a position's
// value is defined for any), each player to move, where the game is not over: the corners, the
// obtuse ones whose rings meet an edge twice included.
TEST_P(HexPrune, AgreesWithExactValuesOnEveryPositionOfTwoAndThreeByThree) {
  for (const int size : {2, 3}) {
    const hex g(size, false, playout_policy::random, GetParam());
    solver exact(g);
    agreement seen;
    const int cells = size * size;
    int placements = 1;
    for (int i = 0; i < cells; ++i) placements *= 3;
    for (int code = 0; code < placements; ++code) {
      for (const player to_move : {player{1}, player{2}}) {
        hex::state s = g.initial_state();
        for (int cell = 0, rest = code; cell < cells; ++cell, rest /= 3) {
          if (rest % 3 != 0) g.place(s, cell / size, cell % size, static_cast<player>(rest % 3));
        }
        s.to_move = to_move;
        std::vector<hex::move> moves(g.max_moves());
        moves.resize(g.legal_moves(s, moves));
        if (moves.empty() || g.winner(s) != mcts::nobody) continue;
        expect_agrees(g, exact, s, moves, seen);
        if (HasFatalFailure()) return;
      }
    }
    std::printf("%dx%d: %d positions, %d decided by fill-in, %d by prune, %d pruned\n", size,
                size, seen.checked, seen.decided, seen.proven, seen.pruned);
    EXPECT_GT(seen.proven, 0);
  }
}

}  // namespace
}  // namespace seriema::hex

// Tests of Hex's pattern priors (hex::pattern_features_of, hex::priors): a move's feature is the
// same seen by either player (the board transposed, colours swapped) and turned half a turn,
// the last move's neighbours and bridge points are marked, edges count as stones, and the
// trained gammas answer a bridge intrusion with the save and are off without their source.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <hex.hpp>
#include <set>
#include <span>
#include <vector>

#include "../../support/hex_positions.hpp"

namespace seriema::hex {
namespace {

using test::hex_mirrored;
using test::hex_position;

std::uint32_t feature(const hex& g, const hex::state& s, int r, int c) {
  const hex::move m = g.at(r, c);
  std::uint32_t f = 0;
  g.pattern_features_of(s, std::span<const hex::move>(&m, 1), std::span<std::uint32_t>(&f, 1));
  return f;
}

// s turned half a turn: (r, c) to (n-1-r, n-1-c), colours and side to move kept.
hex::state half_turned(const hex& g, const hex::state& s) {
  hex::state t = g.initial_state();
  const int n = g.size();
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < n; ++c) {
      if (const player p = g.cell(s, r, c); p != mcts::nobody) g.place(t, n - 1 - r, n - 1 - c, p);
    }
  }
  t.to_move = s.to_move;
  t.moves_played = s.moves_played;
  return t;
}

TEST(HexPatterns, AMoveHasTheFeatureOfItsMirrorAndHalfTurnedImages) {
  const hex g(7);
  mcts::random rng(46);
  int checked = 0;
  std::set<std::uint32_t> seen;
  for (int game = 0; game < 20; ++game) {
    hex::state s = g.initial_state();
    std::vector<hex::move> moves(g.max_moves());
    for (int ply = 0; ply < 30 && g.winner(s) == mcts::nobody; ++ply) {
      moves.resize(g.max_moves());
      moves.resize(g.legal_moves(s, moves));
      g.apply(s, moves[rng.below(static_cast<std::uint32_t>(moves.size()))]);
      hex::state mirrored = hex_mirrored(g, s);
      hex::state turned = half_turned(g, s);
      const int lr = s.last_move / 7;
      const int lc = s.last_move % 7;
      mirrored.last_move = g.at(lc, lr);
      turned.last_move = g.at(6 - lr, 6 - lc);
      for (int r = 0; r < 7; ++r) {
        for (int c = 0; c < 7; ++c) {
          if (g.cell(s, r, c) != mcts::nobody) continue;
          const std::uint32_t f = feature(g, s, r, c);
          // The obtuse corners' rings see the point outside the corner as black (ring_board.hpp)
          // for either player: only their half-turned images match.
          const bool obtuse_corner = (r == 0 && c == 6) || (r == 6 && c == 0);
          if (!obtuse_corner) {
            ASSERT_EQ(f, feature(g, mirrored, c, r)) << g.render(s) << r << "," << c;
          }
          ASSERT_EQ(f, feature(g, turned, 6 - r, 6 - c)) << g.render(s) << r << "," << c;
          ASSERT_LT(f, hex::pattern_features);
          seen.insert(f);
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 5000);
  EXPECT_GT(seen.size(), 200u);  // the features tell positions apart
}

TEST(HexPatterns, TheLastMovesNeighboursAndBridgePointsAreMarked) {
  const hex g(7);
  hex::state s = hex_position(g, {{3, 3}}, {}, 2);
  s.last_move = g.at(3, 3);
  const std::set<std::pair<int, int>> neighbours = {{2, 3}, {2, 4}, {3, 4},
                                                    {4, 3}, {4, 2}, {3, 2}};
  const std::set<std::pair<int, int>> bridge_points = {{1, 4}, {2, 5}, {4, 4},
                                                       {5, 2}, {4, 1}, {2, 2}};
  for (int r = 0; r < 7; ++r) {
    for (int c = 0; c < 7; ++c) {
      if (r == 3 && c == 3) continue;
      const std::uint32_t place = feature(g, s, r, c) % 3;
      const std::uint32_t expected = neighbours.contains({r, c})      ? 1
                                     : bridge_points.contains({r, c}) ? 2
                                                                      : 0;
      EXPECT_EQ(place, expected) << r << "," << c;
    }
  }
  s.last_move = hex::no_move;  // a set-up position: no last move
  EXPECT_EQ(feature(g, s, 2, 3) % 3, 0u);
}

TEST(HexPatterns, EdgesCountAsTheirPlayersStones) {
  const hex g(7);
  const hex::state empty = g.initial_state();
  // Black to move: the top row's cells see black edge above, the left column's white edge.
  const std::uint32_t centre = feature(g, empty, 3, 3);
  const std::uint32_t top = feature(g, empty, 0, 3);
  const std::uint32_t left = feature(g, empty, 3, 0);
  EXPECT_NE(top, centre);
  EXPECT_NE(left, centre);
  EXPECT_NE(top, left);
  // A black stone above a cell is what the top edge is to it.
  const hex::state stone = hex_position(g, {{2, 3}, {2, 4}}, {}, 1);
  EXPECT_EQ(feature(g, stone, 3, 3), top);
}

TEST(HexPatterns, PriorsAreOffWithoutTheirSourceAndPositiveWithIt) {
  const hex off(7);  // the default: off
  EXPECT_FALSE(off.gives_priors());
  const hex g(7, false, playout_policy::random, knowledge_sources{true, true, false, false});
  EXPECT_TRUE(g.gives_priors());
  hex::state s = hex_position(g, {{3, 3}, {1, 4}}, {{2, 4}}, 1);
  s.last_move = g.at(2, 4);
  std::vector<hex::move> moves(g.max_moves());
  moves.resize(g.legal_moves(s, moves));
  std::vector<float> weights(moves.size());
  g.priors(s, moves, weights);
  for (const float w : weights) EXPECT_TRUE(w > 0 && std::isfinite(w));
}

// Black's bridge d4-e5 (cells (3, 3) and (4, 4)), white intrudes at e4 (3, 4): the trained
// gammas put the save, d5 (4, 3), first among black's moves, far above an empty cell's.
TEST(HexPatterns, TrainedPriorsAnswerABridgeIntrusionWithTheSave) {
  const hex g(9);
  hex::state s = hex_position(g, {{3, 3}, {4, 4}}, {{3, 4}}, 1);
  s.last_move = g.at(3, 4);
  std::vector<hex::move> moves(g.max_moves());
  moves.resize(g.legal_moves(s, moves));
  std::vector<float> weights(moves.size());
  g.priors(s, moves, weights);
  const auto best = std::max_element(weights.begin(), weights.end()) - weights.begin();
  EXPECT_EQ(g.move_name(moves[static_cast<std::size_t>(best)]), g.move_name(g.at(4, 3)));
  const auto far = std::find(moves.begin(), moves.end(), g.at(8, 0)) - moves.begin();
  EXPECT_GT(weights[static_cast<std::size_t>(best)], 10 * weights[static_cast<std::size_t>(far)]);
}

}  // namespace
}  // namespace seriema::hex

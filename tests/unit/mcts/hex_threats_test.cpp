// Tests of hex::threats (the solver's one-move threats) against brute force: on random
// positions of several sizes, for both players, the cells it names are exactly the empty cells
// whose stone would join that player's edges; none once the game is over or while the swap is
// available.
#include <gtest/gtest.h>

#include <algorithm>
#include <hex.hpp>
#include <seriema/mcts/game.hpp>
#include <vector>

namespace seriema::hex {
namespace {

std::vector<hex::move> threats_of(const hex& g, const hex::state& s, player who) {
  std::vector<hex::move> out(g.max_moves());
  out.resize(g.threats(s, who, out));
  std::sort(out.begin(), out.end());
  return out;
}

// Every empty cell on which a stone of `who` makes `who` connected.
std::vector<hex::move> brute_force_threats(const hex& g, const hex::state& s, player who) {
  std::vector<hex::move> wins;
  for (int r = 0; r < g.size(); ++r) {
    for (int c = 0; c < g.size(); ++c) {
      hex::state after = s;
      if (g.place(after, r, c, who) && g.connected(after, who)) wins.push_back(g.at(r, c));
    }
  }
  return wins;
}

TEST(HexThreats, EqualBruteForceOnRandomPositions) {
  mcts::random rng(11);
  int positions_with_threats = 0;
  for (const int size : {2, 3, 5, 8, 11, 19}) {
    const hex g(size);
    for (int game = 0; game < 60; ++game) {
      hex::state s = g.initial_state();
      std::vector<hex::move> moves(g.max_moves());
      for (;;) {
        if (g.winner(s) != mcts::nobody) break;
        for (const player who : {player{1}, player{2}}) {
          const auto expected = brute_force_threats(g, s, who);
          ASSERT_EQ(threats_of(g, s, who), expected) << "player " << int(who) << "\n"
                                                      << g.render(s);
          positions_with_threats += expected.empty() ? 0 : 1;
        }
        const auto count = static_cast<std::uint32_t>(g.legal_moves(s, moves));
        g.apply(s, moves[rng.below(count)]);
      }
      EXPECT_TRUE(threats_of(g, s, 1).empty());
      EXPECT_TRUE(threats_of(g, s, 2).empty());
    }
  }
  EXPECT_GT(positions_with_threats, 500);  // the comparison saw threats, not only empty lists
}

TEST(HexThreats, NoneWhileTheSwapIsAvailable) {
  const hex g(2, true);
  hex::state s = g.initial_state();
  g.apply(s, g.at(0, 0));  // on 2x2 black's stone threatens at once: (1, 0)
  EXPECT_TRUE(threats_of(g, s, 1).empty());
  const hex no_swap(2);
  hex::state t = no_swap.initial_state();
  no_swap.apply(t, no_swap.at(0, 0));
  EXPECT_FALSE(threats_of(no_swap, t, 1).empty());
}

}  // namespace
}  // namespace seriema::hex

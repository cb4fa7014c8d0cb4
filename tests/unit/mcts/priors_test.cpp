// Tests of move priors (prior_game, search_options::knowledge and prior_bias) in the sequential
// engine: shares are the weights over their sum, a broken priors() is refused, first visits
// follow the priors, progressive bias spends visits on a favoured move, and the shares stay with
// their edges when a tree is kept and compacted for reuse, and steer the search that reuses it.
#include <gtest/gtest.h>

#include <cmath>
#include <hex.hpp>
#include <cstdint>
#include <limits>
#include <seriema/mcts/detail/sequential_arrays.hpp>
#include <seriema/mcts/detail/solver.hpp>
#include <seriema/mcts/sequential.hpp>
#include <set>
#include <span>
#include <stdexcept>
#include <vector>

#include "../../support/claim_game.hpp"
#include "../../support/hex_positions.hpp"

namespace seriema::mcts {
namespace {

using game = test::claim_game_with_priors;

game increasing_weights() {
  game g;
  for (std::size_t cell = 0; cell < g.weights.size(); ++cell) {
    g.weights[cell] = static_cast<float>(cell + 1);
  }
  return g;
}

search_options prior_options(std::uint64_t rollouts, double bias) {
  search_options o;
  o.rollouts = rollouts;
  o.playouts_per_leaf = 1;
  o.knowledge = true;
  o.prior_bias = bias;
  return o;
}

std::uint64_t visits_of(const search_result<game::move>& r, game::move m) {
  for (const auto& s : r.moves) {
    if (s.move == m) return s.visits;
  }
  return 0;
}

TEST(PriorShares, AreTheWeightsOverTheirSumOrEqualWhenAllAreZero) {
  game g = increasing_weights();
  const std::vector<game::move> moves = {0, 1, 3};  // weights 1, 2, 4
  std::vector<float> shares(3);
  detail::prior_shares(g, g.initial_state(), std::span<const game::move>(moves),
                       std::span<float>(shares));
  EXPECT_FLOAT_EQ(shares[0], 1.0F / 7);
  EXPECT_FLOAT_EQ(shares[1], 2.0F / 7);
  EXPECT_FLOAT_EQ(shares[2], 4.0F / 7);
  g.weights = {};
  detail::prior_shares(g, g.initial_state(), std::span<const game::move>(moves),
                       std::span<float>(shares));
  for (const float share : shares) EXPECT_FLOAT_EQ(share, 1.0F / 3);
}

TEST(PriorShares, ANegativeOrNotFiniteWeightIsRefused) {
  for (const float bad : {-1.0F, std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity()}) {
    game g = increasing_weights();
    g.weights[7] = bad;
    EXPECT_THROW(sequential_search(g, g.initial_state(), prior_options(10, 1)), std::logic_error)
        << bad;
  }
}

// Every move unvisited: the rollouts take them highest prior first (cells 23, 22, 21), where
// without knowledge the order is the shuffled edges'.
TEST(SequentialPriors, FirstVisitsGoToTheHighestPriors) {
  const game g = increasing_weights();
  for (const std::uint64_t seed : {1, 2, 3}) {
    search_options o = prior_options(3, 1);
    o.seed = seed;
    const auto r = sequential_search(g, g.initial_state(), o);
    std::set<game::move> visited;
    for (const auto& s : r.moves) visited.insert(s.move);
    EXPECT_EQ(visited, (std::set<game::move>{21, 22, 23})) << "seed " << seed;
  }
}

// Cell 5 (no better than any cell but 0) weighs 10 times the others: with a large bias it takes
// most rollouts; with bias 0 only the order of first visits changes, and it gets about its
// share; without knowledge the priors are ignored.
TEST(SequentialPriors, ProgressiveBiasSpendsVisitsOnAFavouredMove) {
  game g;
  g.weights.fill(1);
  g.weights[5] = 10;
  const std::uint64_t rollouts = 400;
  const auto strong = sequential_search(g, g.initial_state(), prior_options(rollouts, 100));
  const auto none = sequential_search(g, g.initial_state(), prior_options(rollouts, 0));
  search_options ignored = prior_options(rollouts, 100);
  ignored.knowledge = false;
  const auto off = sequential_search(g, g.initial_state(), ignored);
  EXPECT_GT(visits_of(strong, 5), rollouts / 2);
  EXPECT_LT(visits_of(none, 5), rollouts / 8);
  EXPECT_LT(visits_of(off, 5), rollouts / 8);
  EXPECT_EQ(strong.rollouts, rollouts);
}

// The shares of every node's edges sum to 1 and are its moves' weights over their sum; a
// compacted subtree keeps each edge's share.
TEST(SequentialPriors, SharesStayWithTheirEdgesWhenATreeIsKept) {
  const game g = increasing_weights();
  const search_options o = prior_options(300, 1);
  detail::sequential_tree<game> tree(g, g.initial_state(), o);
  const auto first = tree.run();
  auto arrays = tree.take_arrays();
  ASSERT_TRUE(arrays.priors_on);
  ASSERT_EQ(arrays.priors.size(), arrays.edges.size());
  const auto expect_shares = [&](const detail::sequential_arrays<game>& a) {
    int tables = 0;
    for (const auto& n : a.nodes) {
      if (n.first_edge == detail::sequential_arrays<game>::none) continue;
      ++tables;
      double weights = 0;
      for (std::uint32_t e = n.first_edge; e < n.first_edge + n.edge_count; ++e) {
        weights += g.weights[a.edges[e].m];
      }
      for (std::uint32_t e = n.first_edge; e < n.first_edge + n.edge_count; ++e) {
        EXPECT_NEAR(a.priors[e], g.weights[a.edges[e].m] / weights, 1e-6);
      }
    }
    return tables;
  };
  EXPECT_GT(expect_shares(arrays), 10);
  const game::move path[] = {first.best};
  const auto at = detail::find_subtree(arrays, std::span<const game::move>(path));
  ASSERT_TRUE(at.has_value());
  const auto size = detail::subtree_size(arrays, *at);
  auto kept = detail::compact_subtree(g, arrays, *at, size, 0);
  EXPECT_TRUE(kept.priors_on);
  ASSERT_EQ(kept.priors.size(), kept.edges.size());
  EXPECT_GT(expect_shares(kept), 1);
}

// Hex with pattern priors, tree reuse one move down (the subtree compacted into new arrays):
// the carried root's shares steer the next search. The first search stores the priors without
// using them (bias 0); the second, with a large bias, spends most rollouts on the move of
// highest prior, which it could not do if the copy had lost the shares.
TEST(SequentialPriors, ACarriedSubtreeKeepsItsSharesInTheEngine) {
  const hex::hex g(7, false, hex::playout_policy::random, hex::knowledge_sources{false, true, false, false});
  sequential_engine<hex::hex> e(g);
  search_options o = prior_options(2000, 0);
  o.reuse_tree = true;
  const auto first = e.search(g.initial_state(), o);
  hex::hex::state next = g.initial_state();
  g.apply(next, first.best);
  o.prior_bias = 1000;
  o.rollouts = 3000;
  const auto second = e.search(next, o);
  ASSERT_GT(second.reused_nodes, 1u);
  EXPECT_TRUE(test::is_highest_prior(g, next, second.best)) << g.move_name(second.best);
}

}  // namespace
}  // namespace seriema::mcts

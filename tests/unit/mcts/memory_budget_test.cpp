// Tests of the search memory budget: tree_pool refuses blocks past a process's budget (also with
// several threads taking blocks at once) and allocate() still serves the root; the sequential
// engine with a small budget keeps searching to its rollout count within the budget, says when
// it reached it and still plays a legal move, a budget not reached changes nothing, and a node
// that must be a leaf for several playouts before its edges are made (expansion_visits) takes
// the tree to fewer nodes and less memory for the same rollouts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <hex.hpp>
#include <seriema/mcts/sequential.hpp>
#include <seriema/mcts/tree_memory.hpp>
#include <thread>
#include <vector>

namespace seriema::mcts {
namespace {

using hex::hex;
constexpr std::uint64_t mebibyte = std::uint64_t{1} << 20;

TEST(TreePoolBudgetTest, RefusesBlocksPastTheBudgetButAllocateStillServes) {
  tree_memory_counters counters;
  counters.reset_budget(mebibyte);
  tree_pool pool(counters);
  std::uint64_t taken = 0;
  while (pool.try_allocate(1000, 8) != nullptr) {
    taken += 1000;
    ASSERT_LE(counters.bytes_live(), mebibyte);
  }
  EXPECT_TRUE(counters.budget_reached.load());
  EXPECT_EQ(counters.bytes_live(), mebibyte);  // 4 blocks of 256 KiB fit exactly
  EXPECT_GT(taken, mebibyte - tree_pool::block_bytes);
  // The refused request took nothing; allocate() (the root) passes the budget.
  EXPECT_NE(pool.allocate(tree_pool::block_bytes, 64), nullptr);
  EXPECT_GT(counters.bytes_live(), mebibyte);
  pool.release();
  EXPECT_EQ(counters.bytes_live(), 0u);
  counters.reset_budget(0);
  EXPECT_FALSE(counters.budget_reached.load());
  for (int i = 0; i < 8; ++i) EXPECT_NE(pool.try_allocate(tree_pool::block_bytes, 8), nullptr);
  EXPECT_FALSE(counters.budget_reached.load());  // 0: no limit
}

TEST(TreePoolBudgetTest, PoolsOfSeveralThreadsStayWithinTheProcessBudget) {
  tree_memory_counters counters;
  counters.reset_budget(3 * tree_pool::block_bytes);
  std::vector<tree_pool> pools;
  for (int i = 0; i < 4; ++i) pools.emplace_back(counters);
  std::vector<std::thread> threads;
  for (auto& pool : pools) {
    threads.emplace_back([&pool] {
      while (pool.try_allocate(4096, 64) != nullptr) {
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(counters.budget_reached.load());
  EXPECT_EQ(counters.bytes_live(), 3 * tree_pool::block_bytes);
  EXPECT_EQ(counters.blocks_allocated.load(), 3u);
}

search_options options_with(std::uint64_t rollouts, std::uint64_t budget) {
  search_options o;
  o.rollouts = rollouts;
  o.playouts_per_leaf = 2;
  o.seed = 11;
  o.memory_budget = budget;
  return o;
}

bool is_legal(const hex& g, const hex::state& s, hex::move m) {
  std::vector<hex::move> moves(g.max_moves());
  moves.resize(g.legal_moves(s, moves));
  return std::find(moves.begin(), moves.end(), m) != moves.end();
}

TEST(SequentialMemoryBudgetTest, ASmallBudgetStopsTheTreeNotTheSearch) {
  const hex g(11);
  const hex::state root = g.initial_state();
  constexpr std::uint64_t rollouts = 30'000;
  const auto bounded = sequential_search(g, root, options_with(rollouts, mebibyte));
  EXPECT_EQ(bounded.rollouts, rollouts);
  EXPECT_TRUE(bounded.memory_budget_reached);
  EXPECT_EQ(bounded.memory_budget, mebibyte);
  EXPECT_GT(bounded.memory_budget_reached_rollouts, 0u);
  EXPECT_LT(bounded.memory_budget_reached_rollouts, rollouts);
  EXPECT_GE(bounded.memory_budget_reached_seconds, 0.0);
  EXPECT_LE(bounded.tree_bytes, mebibyte + tree_pool::block_bytes);
  EXPECT_GT(bounded.tree_bytes, mebibyte / 2);
  EXPECT_TRUE(is_legal(g, root, bounded.best));
  // Every rollout still counts at the root, including those played out without a node.
  std::uint64_t visits = 0;
  for (const auto& m : bounded.moves) visits += m.visits;
  EXPECT_EQ(visits, rollouts * 2);
  const auto unbounded = sequential_search(g, root, options_with(rollouts, 0));
  EXPECT_FALSE(unbounded.memory_budget_reached);
  EXPECT_GT(unbounded.tree_bytes, 2 * mebibyte);
  EXPECT_LT(bounded.tree_nodes, unbounded.tree_nodes);
}

TEST(SequentialMemoryBudgetTest, ABudgetNotReachedChangesNothing) {
  const hex g(7);
  const hex::state root = g.initial_state();
  const auto bounded = sequential_search(g, root, options_with(3000, 64 * mebibyte));
  const auto unbounded = sequential_search(g, root, options_with(3000, 0));
  EXPECT_FALSE(bounded.memory_budget_reached);
  EXPECT_EQ(bounded.memory_budget_reached_rollouts, 0u);
  EXPECT_LE(bounded.tree_bytes, 64 * mebibyte);
  EXPECT_EQ(bounded.tree_nodes, unbounded.tree_nodes);
  EXPECT_EQ(bounded.best, unbounded.best);
  ASSERT_EQ(bounded.moves.size(), unbounded.moves.size());
  for (std::size_t i = 0; i < bounded.moves.size(); ++i) {
    EXPECT_EQ(bounded.moves[i].move, unbounded.moves[i].move);
    EXPECT_EQ(bounded.moves[i].visits, unbounded.moves[i].visits);
  }
}

// Most nodes are reached once or twice: making edges only after 4 playouts at a node leaves
// fewer nodes (rollouts that end at an unexpanded node create none) and less tree per rollout;
// the search still plays the only winning move.
TEST(SequentialExpansionTest, ExpansionVisitsTakeFewerNodesAndLessMemory) {
  const hex g(11);
  search_options o;
  o.rollouts = 20000;
  o.playouts_per_leaf = 1;
  o.seed = 3;
  const auto eager = sequential_search(g, g.initial_state(), o);
  o.expansion_visits = 4;
  const auto patient = sequential_search(g, g.initial_state(), o);
  EXPECT_EQ(patient.rollouts, eager.rollouts);
  EXPECT_LT(patient.tree_nodes * 10, eager.tree_nodes * 8)
      << patient.tree_nodes << " nodes against " << eager.tree_nodes;
  EXPECT_LT(patient.tree_bytes, eager.tree_bytes);

  // 5x5: black's (1, 2) completes column 2; white threatens row 3 at (3, 2).
  const hex small(5);
  hex::state s = small.initial_state();
  for (const auto& [r, c] : {std::pair{0, 2}, {2, 2}, {3, 2}, {4, 2}}) small.place(s, r, c, 1);
  for (const auto& [r, c] : {std::pair{3, 0}, {3, 1}, {3, 3}, {3, 4}}) small.place(s, r, c, 2);
  s.moves_played = 8;
  o.rollouts = 3000;
  EXPECT_EQ(sequential_search(small, s, o).best, small.at(1, 2));
}

}  // namespace
}  // namespace seriema::mcts

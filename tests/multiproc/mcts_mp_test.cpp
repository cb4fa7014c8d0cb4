// Distributed MCTS on Hex across real processes: finds and blocks immediate wins, returns legal
// moves on every configuration and channel, frees the whole tree after each move (or keeps the
// played subtree for the next, with its statistics and proofs), and keeps searching within a
// per-process memory budget; RAVE's records travel up the tree across processes.
#include <gtest/gtest.h>

#include <cstdio>
#include <hex.hpp>
#include <seriema/mcts/dfpn.hpp>
#include <seriema/mcts/distributed.hpp>
#include <vector>

#include "support/claim_game.hpp"
#include "support/hex_positions.hpp"
#include "support/mp_main.hpp"

namespace {

using seriema::hex::hex;
using seriema::mcts::distributed_options;
using seriema::mcts::distributed_search;
using seriema::mcts::player;
using seriema::mcts::search_options;
using seriema::test::rt;

using seriema::test::hex_winning_moves;
using seriema::test::hex_position;

search_options budget(std::uint64_t rollouts) {
  search_options options;
  options.rollouts = rollouts;
  options.playouts_per_leaf = 8;
  options.seed = 7;
  return options;
}

// Black (top-bottom) needs c3 (row 2, column 2) to join b1-b2 with b4... on 4x4: stones in
// column 1 rows 0, 1, 3 and the gap at (2, 1) is the only winning cell.
TEST(DistributedMcts, PlaysTheImmediateWin) {
  const hex game(4);
  for (player mover : {player{1}, player{2}}) {
    // For white (left-right) the same shape transposed.
    auto s = mover == 1 ? hex_position(game, {{0, 1}, {1, 1}, {3, 1}}, {{0, 0}, {3, 3}, {0, 3}}, 1)
                        : hex_position(game, {{0, 0}, {3, 3}, {3, 0}}, {{1, 0}, {1, 1}, {1, 3}}, 2);
    const auto wins = hex_winning_moves(game, s, mover);
    ASSERT_EQ(wins.size(), 1u) << game.render(s);
    distributed_search<hex> search(rt(), game);
    const auto result = search.search(s, budget(3000));
    EXPECT_EQ(result.best, wins.front()) << "player " << int(mover) << " chose "
                                         << game.move_name(result.best) << "\n"
                                         << game.render(s);
  }
}

// White threatens one cell; black has no win of its own: only blocking it does not lose.
TEST(DistributedMcts, BlocksTheOpponentsImmediateWin) {
  const hex game(4);
  // White (left-right) has row 2 except (2, 2); black stones scattered, none connecting.
  auto s = hex_position(game, {{0, 0}, {0, 3}, {3, 3}}, {{2, 0}, {2, 1}, {2, 3}}, 1);
  ASSERT_TRUE(hex_winning_moves(game, s, 1).empty()) << game.render(s);
  const auto threats = hex_winning_moves(game, s, 2);
  ASSERT_EQ(threats.size(), 1u) << game.render(s);
  distributed_search<hex> search(rt(), game);
  const auto result = search.search(s, budget(4000));
  EXPECT_EQ(result.best, threats.front()) << "chose " << game.move_name(result.best) << "\n"
                                          << game.render(s);
}

// A short game on 5x5 under every channel and mode: every answer is a legal move, the counters
// add up, and after each move no tree memory is left on any process.
void play_short_game(distributed_options options) {
  const hex game(5);
  distributed_search<hex> search(rt(), game, options);
  auto s = game.initial_state();
  std::vector<hex::move> legal(game.max_moves());
  for (int move_number = 0; move_number < 4; ++move_number) {
    legal.resize(game.max_moves());
    legal.resize(game.legal_moves(s, legal));
    auto opts = budget(300);
    const auto result = search.search(s, opts);
    EXPECT_NE(std::find(legal.begin(), legal.end(), result.best), legal.end())
        << "illegal move " << result.best;
    EXPECT_EQ(result.rollouts, 300u);
    const auto& counters = search.last_counters();
    EXPECT_GE(counters.nodes_created, 300u);  // one expansion per rollout (+ the root)
    EXPECT_GT(counters.tree_bytes_allocated, 0u);
    EXPECT_EQ(counters.tree_bytes_live, 0u);
    EXPECT_EQ(search.memory().bytes_live(), 0u);
    EXPECT_EQ(search.memory().blocks_allocated.load(), search.memory().blocks_released.load());
    if (rt().rank() == 0) {
      std::uint64_t visits = 0;
      for (const auto& m : result.moves) visits += m.visits;
      EXPECT_EQ(visits, 300u * 8u);  // every rollout went through one root move, K playouts
      // Steps between processes are calls; inside one only with remote_only.
      if (rt().size() > 1 || options.remote_only) {
        EXPECT_GT(counters.remote_calls, 0u);
      } else {
        EXPECT_EQ(counters.remote_calls, 0u);
      }
    }
    game.apply(s, result.best);
  }
}

TEST(DistributedMcts, LegalMovesAndFreedTreeTrad) { play_short_game({}); }
TEST(DistributedMcts, LegalMovesAndFreedTreeRemoteOnly) {
  for (auto c : {seriema::invoke::channel::send, seriema::invoke::channel::write,
                 seriema::invoke::channel::trad, seriema::invoke::channel::ovfl}) {
    distributed_options options;
    options.remote_only = true;
    options.channel = c;
    play_short_game(options);
  }
}
TEST(DistributedMcts, LegalMovesAndFreedTreeSendChannel) {
  distributed_options options;
  options.channel = seriema::invoke::channel::send;
  play_short_game(options);
}
TEST(DistributedMcts, LegalMovesAndFreedTreeWriteChannel) {
  distributed_options options;
  options.channel = seriema::invoke::channel::write;
  play_short_game(options);
}
TEST(DistributedMcts, LegalMovesAndFreedTreeOvflHashed) {
  distributed_options options;
  options.channel = seriema::invoke::channel::ovfl;
  options.placement = seriema::mcts::node_placement::hashed;
  options.rollouts_in_flight = 2;
  play_short_game(options);
}

// However short the time budget, a search completes one rollout and names a legal move.
TEST(DistributedMcts, ATinyTimeBudgetStillNamesALegalMove) {
  const hex game(5);
  distributed_search<hex> search(rt(), game);
  auto s = game.initial_state();
  game.apply(s, game.at(0, 0));
  search_options options;
  options.rollouts = 0;
  options.seconds = 1e-9;
  const auto result = search.search(s, options);
  EXPECT_GE(result.rollouts, 1u);
  EXPECT_EQ(game.cell(s, result.best / 5, result.best % 5), seriema::mcts::nobody)
      << game.move_name(result.best);
}

// A 1 MiB budget per process on 11x11: every process stops growing the tree (the pools of
// the process hold at most the budget, plus the root's block on rank 0), the search still
// completes its rollouts and says the budget was reached, and the move is legal. A budget
// not reached says so.
void expect_small_budget_kept(distributed_options distribution) {
  const hex game(11);
  distributed_search<hex> search(rt(), game, distribution);
  const auto s = game.initial_state();
  constexpr std::uint64_t mebibyte = std::uint64_t{1} << 20;
  auto options = budget(20000);
  options.playouts_per_leaf = 2;
  options.memory_budget = mebibyte;
  const auto bounded = search.search(s, options);
  EXPECT_EQ(bounded.rollouts, 20000u);
  EXPECT_TRUE(bounded.memory_budget_reached);
  EXPECT_EQ(bounded.memory_budget, mebibyte);
  EXPECT_GE(bounded.memory_budget_reached_seconds, 0.0);
  EXPECT_LE(bounded.tree_bytes, mebibyte + seriema::mcts::tree_pool::block_bytes);
  EXPECT_EQ(search.memory().bytes_live(), 0u);
  EXPECT_EQ(game.cell(s, bounded.best / 11, bounded.best % 11), seriema::mcts::nobody);
  if (rt().rank() == 0) {
    std::uint64_t visits = 0;
    for (const auto& m : bounded.moves) visits += m.visits;
    EXPECT_EQ(visits, 20000u * 2u);  // rollouts played out without a node count too
  }
  const std::uint64_t bounded_nodes = search.last_counters().nodes_created;
  options.memory_budget = 0;
  const auto unbounded = search.search(s, options);
  EXPECT_FALSE(unbounded.memory_budget_reached);
  EXPECT_GT(unbounded.tree_bytes, mebibyte);
  EXPECT_LT(bounded_nodes, search.last_counters().nodes_created);
  options.memory_budget = 64 * mebibyte;
  options.rollouts = 300;
  const auto roomy = search.search(s, options);
  EXPECT_FALSE(roomy.memory_budget_reached);
  EXPECT_EQ(roomy.memory_budget_reached_rollouts, 0u);
  EXPECT_EQ(roomy.rollouts, 300u);
}
TEST(DistributedMcts, ASmallMemoryBudgetStopsTheTreeNotTheSearch) { expect_small_budget_kept({}); }
// Every step a call: the owner's "no room" notice travels to the parent as a call too.
TEST(DistributedMcts, ASmallMemoryBudgetStopsTheTreeNotTheSearchRemoteOnly) {
  distributed_options options;
  options.remote_only = true;
  expect_small_budget_kept(options);
}

search_options solver_budget(std::uint64_t rollouts) {
  search_options o = budget(rollouts);
  o.playouts_per_leaf = 1;
  o.solver = true;
  return o;
}

// The solver across processes: the win in one after a single rollout (the root's only edge),
// and the double threat of a win in three (every rollout through it meets a node the solver
// decided lost for the opponent, wherever that node lives).
TEST(DistributedMcts, TheSolverPlaysTheWinInOneAndTheDoubleThreat) {
  const hex game(5);
  distributed_search<hex> search(rt(), game);
  search_options o = solver_budget(1);
  const auto in_one = hex_position(game, {{0, 2}, {2, 2}, {3, 2}, {4, 2}},
                               {{3, 0}, {3, 1}, {3, 3}, {3, 4}}, 1);
  EXPECT_EQ(search.search(in_one, o).best, game.at(1, 2));
  // (2, 2) threatens (3, 1) and (3, 2), and (3, 1) threatens (2, 1) and (2, 2): white can
  // block one.
  const auto in_three = seriema::test::hex_win_in_three(game);
  const auto double_threat = [&](hex::move m) {
    auto after = in_three;
    game.apply(after, m);
    return hex_winning_moves(game, after, 1).size() >= 2 &&
           hex_winning_moves(game, after, 2).empty();
  };
  o.rollouts = 400;
  int found = 0;
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    o.seed = seed;
    const auto result = search.search(in_three, o);
    found += double_threat(result.best) ? 1 : 0;
    if (rt().rank() == 0) {
      EXPECT_EQ(result.proven_winner, 1);  // and the proof ends the search early
    }
    EXPECT_LT(result.rollouts, 400u);
  }
  EXPECT_EQ(found, 5) << "the double threat was played in " << found << " of 5 searches";
}

// Proofs over processes: on 3x3 every opening of up to two stones is proven within the budget
// as exhaustive search says (a lost node needs every one of its edges proven lost, each edge's
// proof arriving from whichever thread owns the child).
TEST(DistributedMcts, TheSolverProvesThreeByThreeOpeningsAsExhaustiveSearchDoes) {
  const hex game(3);
  distributed_search<hex> search(rt(), game);
  const search_options o = solver_budget(20000);
  for (const hex::state& s : seriema::test::openings_up_to_two_stones(game)) {
    const auto result = search.search(s, o);
    if (rt().rank() != 0) continue;
    const bool mover_wins = seriema::test::mover_wins_by_force(game, s);
    // EXPECT, not ASSERT: rank 0 leaving the loop would leave the others in the next search.
    EXPECT_NE(result.proven_winner, seriema::mcts::nobody) << game.render(s);
    EXPECT_EQ(result.proven_winner == s.to_move, mover_wins) << game.render(s);
    if (mover_wins) {
      auto after = s;
      game.apply(after, result.best);
      EXPECT_TRUE(game.winner(after) == s.to_move ||
                  !seriema::test::mover_wins_by_force(game, after))
          << game.move_name(result.best) << "\n" << game.render(s);
    }
  }
}

// Game knowledge across processes (search_options::knowledge, Hex's dead and captured cells):
// the root's moves leave out the cells a bridge to the edge captured, and a position whose
// filled-in board already joins a player's edges is proven at the root's expansion, for both
// players.
TEST(DistributedMcts, KnowledgePrunesCapturedCellsAndProvesFilledInWins) {
  const hex game(5);
  distributed_search<hex> search(rt(), game);
  search_options o = solver_budget(2000);
  o.knowledge = true;
  // c2 black: c1 and d1 (row 0, columns 2 and 3) are captured.
  const auto bridge = hex_position(game, {{1, 2}}, {}, 2);
  const auto pruned = search.search(bridge, o);
  if (rt().rank() == 0) {
    EXPECT_GT(pruned.moves.size(), 15u);
    for (const auto& m : pruned.moves) {
      EXPECT_NE(m.move, game.at(0, 2));
      EXPECT_NE(m.move, game.at(0, 3));
    }
  }
  // Column 2 from row 1 to row 3, with its bridges to both edges: black has won.
  const auto chain = hex_position(game, {{1, 2}, {2, 2}, {3, 2}}, {{0, 0}, {4, 4}}, 2);
  for (const hex::state& s : {chain, seriema::test::hex_mirrored(game, chain)}) {
    const player winner = seriema::mcts::opponent(s.to_move);
    const auto proven = search.search(s, o);
    if (rt().rank() != 0) continue;
    EXPECT_EQ(proven.proven_winner, winner) << game.render(s);
    EXPECT_LT(proven.rollouts, 100u);
  }
}

// Virtual connections over processes (Hex's H-search, knowledge_sources::virtual_connections
// and must_play): two third-row stones with their ziggurats and a bridge between them have
// joined black's edges, which the fill-in does not see; the root's expansion proves it for
// both players, and without knowledge the budget does not.
TEST(DistributedMcts, VirtualConnectionsProveAWinTheFillInDoesNotSee) {
  const hex game(7, false, seriema::hex::playout_policy::random,
                 seriema::hex::knowledge_sources{true, false, true, true});
  distributed_search<hex> search(rt(), game);
  search_options o = solver_budget(200);
  const auto joined = hex_position(game, {{2, 3}, {4, 2}}, {}, 2);
  for (const hex::state& s : {joined, seriema::test::hex_mirrored(game, joined)}) {
    const player winner = seriema::mcts::opponent(s.to_move);
    o.knowledge = true;
    const auto proven = search.search(s, o);
    o.knowledge = false;
    const auto unproven = search.search(s, o);
    if (rt().rank() != 0) continue;
    EXPECT_EQ(proven.proven_winner, winner) << game.render(s);
    EXPECT_LT(proven.rollouts, 100u);
    EXPECT_EQ(unproven.proven_winner, seriema::mcts::nobody) << game.render(s);
  }
}

// A df-pn solver beside the distributed search (mcts::search_beside_solver, on rank 0 where the
// search is driven): with H-search it proves the empty 6x6 board a first-player win long before
// the search's two minutes are up, its proof ends the search on every process, and the move it
// names leaves white no win (a second solver, fresh, says so).
TEST(DistributedMcts, ADfpnProofEndsTheSearchBesideIt) {
  const hex game(6, false, seriema::hex::playout_policy::random,
                 seriema::hex::knowledge_sources{true, false, true, true});
  distributed_search<hex> search(rt(), game);
  search_options o = budget(0);
  o.seconds = 120;  // without a proof the assertions below fail after it
  o.knowledge = true;
  const hex::state empty = game.initial_state();
  seriema::mcts::dfpn_options small;
  small.table_bytes = std::size_t{16} << 20;
  if (rt().rank() != 0) {
    search.search(empty, o);
    return;
  }
  seriema::mcts::dfpn_solver<hex> solver(game, small);
  const auto both = seriema::mcts::search_beside_solver(
      solver, empty, o, [&](const search_options& with_stop) {
        return search.search(empty, with_stop);
      });
  ASSERT_EQ(both.proof.outcome, seriema::mcts::dfpn_outcome::win);
  EXPECT_EQ(both.search.proven_winner, 1);
  EXPECT_EQ(both.search.best, both.proof.winning_move);
  EXPECT_LT(both.search.seconds, 60.0);
  std::printf("6x6 proved by df-pn in %.2f s (%llu expansions), %llu rollouts meanwhile\n",
              both.proof.seconds, static_cast<unsigned long long>(both.proof.expansions),
              static_cast<unsigned long long>(both.search.rollouts));
  hex::state after = empty;
  game.apply(after, both.search.best);
  seriema::mcts::dfpn_solver<hex> check(game, small);
  EXPECT_EQ(check.solve(after).outcome, seriema::mcts::dfpn_outcome::no_win)
      << game.move_name(both.search.best);
}

// Knowledge and the solver over processes: 3x3 openings proven as exhaustive search says, with
// fewer rollouts than the solver alone (positions decided by fill-in below the root, on
// whichever thread owns them).
TEST(DistributedMcts, KnowledgeProvesThreeByThreeOpeningsWithFewerRollouts) {
  const hex game(3);
  distributed_search<hex> search(rt(), game);
  std::uint64_t rollouts[2] = {0, 0};
  for (const bool knowledge : {false, true}) {
    search_options o = solver_budget(20000);
    o.knowledge = knowledge;
    const auto openings = seriema::test::openings_up_to_two_stones(game);
    // Every third opening: a search's start and end cost much more than its rollouts under
    // mpirun's binding and AddressSanitizer, and 28 positions show the difference as well.
    for (std::size_t i = 0; i < openings.size(); i += 3) {
      const hex::state& s = openings[i];
      const auto result = search.search(s, o);
      if (rt().rank() != 0) continue;
      rollouts[knowledge ? 1 : 0] += result.rollouts;
      EXPECT_EQ(result.proven_winner == s.to_move, seriema::test::mover_wins_by_force(game, s))
          << game.render(s);
      EXPECT_NE(result.proven_winner, seriema::mcts::nobody) << game.render(s);
    }
  }
  if (rt().rank() == 0) {
    std::printf("3x3 openings proven in %llu rollouts with knowledge, %llu without\n",
                static_cast<unsigned long long>(rollouts[1]),
                static_cast<unsigned long long>(rollouts[0]));
    EXPECT_LT(rollouts[1] * 3, rollouts[0] * 2) << rollouts[1] << " rollouts with knowledge, "
                                            << rollouts[0] << " without";
  }
}

// expansion_visits across processes: a node stays a leaf for its first playouts (counted where
// it lives), so the same rollouts make fewer nodes and less tree in every process together,
// and the search still plays the only winning move.
TEST(DistributedMcts, ExpansionVisitsTakeFewerNodesAndLessMemory) {
  const hex game(11);
  distributed_search<hex> search(rt(), game);
  search_options o = budget(20000);
  o.playouts_per_leaf = 1;
  (void)search.search(game.initial_state(), o);
  const auto eager = search.last_counters();
  o.expansion_visits = 4;
  const auto result = search.search(game.initial_state(), o);
  const auto patient = search.last_counters();
  EXPECT_EQ(result.rollouts, 20000u);
  EXPECT_LT(patient.nodes_created * 10, eager.nodes_created * 8)
      << patient.nodes_created << " nodes against " << eager.nodes_created;
  EXPECT_LT(patient.tree_bytes_allocated, eager.tree_bytes_allocated);
  const hex small(5);
  const auto in_one = hex_position(small, {{0, 2}, {2, 2}, {3, 2}, {4, 2}},
                               {{3, 0}, {3, 1}, {3, 3}, {3, 4}}, 1);
  distributed_search<hex> small_search(rt(), small);
  o.rollouts = 3000;
  EXPECT_EQ(small_search.search(in_one, o).best, small.at(1, 2));
}

// RAVE across processes (support/claim_game.hpp: whoever holds cell 0 wins): with fewer
// rollouts than moves, only the all-moves-as-first results gathered along every backpropagation
// single out cell 0. A small window, so that most selections see the results of the rollouts
// before them. Remote-only: every backpropagation step, record included, is a call.
void expect_rave_finds_the_key_cell(distributed_options options) {
  const seriema::test::claim_game game{24};
  options.rollouts_in_flight = 2;
  distributed_search<seriema::test::claim_game> search(rt(), game, options);
  search_options o = seriema::test::claim_rave_options();
  int found = 0;
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    o.seed = seed;
    found += search.search(game.initial_state(), o).best == 0 ? 1 : 0;
  }
  EXPECT_GE(found, 9) << "RAVE found cell 0 in " << found << " of 10 searches";
  EXPECT_EQ(search.memory().bytes_live(), 0u);
}
TEST(DistributedMcts, RaveFindsTheKeyMoveBeforeTryingEveryMove) {
  expect_rave_finds_the_key_cell({});
}
TEST(DistributedMcts, RaveFindsTheKeyMoveBeforeTryingEveryMoveRemoteOnly) {
  distributed_options options;
  options.remote_only = true;
  options.placement = seriema::mcts::node_placement::random;
  expect_rave_finds_the_key_cell(options);
}

// Move priors across processes (support/claim_game.hpp): cell 5, no better than any cell but 0,
// weighs 10 times the others; with a large prior_bias it takes most rollouts at the root, and
// the priors leave the search alone without knowledge.
void expect_priors_steer_the_search(distributed_options options) {
  seriema::test::claim_game_with_priors game;
  game.weights.fill(1);
  game.weights[5] = 10;
  distributed_search<seriema::test::claim_game_with_priors> search(rt(), game, options);
  search_options o = budget(400);
  o.playouts_per_leaf = 1;
  o.knowledge = true;
  o.prior_bias = 100;
  const auto favoured = search.search(game.initial_state(), o);
  o.knowledge = false;
  const auto ignored = search.search(game.initial_state(), o);
  if (rt().rank() != 0) return;
  const auto visits_of_5 = [](const auto& result) {
    for (const auto& m : result.moves) {
      if (m.move == 5) return m.visits;
    }
    return std::uint64_t{0};
  };
  EXPECT_GT(visits_of_5(favoured), 200u) << "with priors";
  EXPECT_LT(visits_of_5(ignored), 50u) << "without knowledge";
}
TEST(DistributedMcts, PriorsSteerTheSearch) { expect_priors_steer_the_search({}); }
TEST(DistributedMcts, PriorsSteerTheSearchRemoteOnly) {
  distributed_options options;
  options.remote_only = true;
  expect_priors_steer_the_search(options);
}

// Hex whose playouts throw once the position has `fail_at` stones: a failing game step.
struct failing_hex : hex {
  using hex::hex;
  int fail_at = 1000;
  [[nodiscard]] player playout(const state& s, seriema::mcts::random& rng) const {
    if (s.moves_played >= fail_at) throw std::runtime_error("playout failed on purpose");
    return hex::playout(s, rng);
  }
};

// An exception in any step aborts the search on every rank with the first reason (no hang),
// and the next search on the same object runs normally.
TEST(DistributedMcts, AFailingStepAbortsTheSearchEverywhere) {
  failing_hex game(5);
  distributed_search<failing_hex> search(rt(), game);
  failing_hex failing = game;
  failing.fail_at = 1;  // every leaf below the root fails
  search.set_game(failing);
  try {
    (void)search.search(game.initial_state(), budget(500));
    ADD_FAILURE() << "the search did not fail";
  } catch (const seriema::error& e) {
    EXPECT_NE(std::string(e.what()).find("playout failed on purpose"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(search.memory().bytes_live(), 0u);
  search.set_game(game);
  const auto result = search.search(game.initial_state(), budget(200));
  EXPECT_EQ(result.rollouts, 200u);
}

search_options reuse_budget(std::uint64_t rollouts) {
  search_options o = budget(rollouts);
  o.playouts_per_leaf = 2;
  o.reuse_tree = true;
  return o;
}
std::uint64_t root_visits(const seriema::mcts::search_result<hex::move>& result) {
  std::uint64_t visits = 0;
  for (const auto& m : result.moves) visits += m.visits;
  return visits;
}
std::uint64_t visits_of(const seriema::mcts::search_result<hex::move>& result, hex::move move) {
  for (const auto& m : result.moves) {
    if (m.move == move) return m.visits;
  }
  return 0;
}

// Tree reuse across processes (the subtree lives on every thread of the job): the same root
// keeps the whole tree, one move and two moves later the played subtree becomes the root with
// its visits (an edge's visits, less the K of the rollout that created its node), the rest of
// the tree is freed, and a root the tree does not hold (or reuse off) starts afresh.
void expect_reuse_keeps_visits(distributed_options options) {
  const hex game(5);
  distributed_search<hex> search(rt(), game, options);
  const unsigned K = 2;
  const auto s0 = game.initial_state();
  const auto first = search.search(s0, reuse_budget(6000));
  EXPECT_EQ(first.reused_nodes, 0u);
  EXPECT_EQ(first.reused_visits, 0u);
  const std::uint64_t whole_tree = search.last_counters().tree_bytes_live;
  EXPECT_GT(whole_tree, 0u);  // kept for the next search

  const auto same = search.search(s0, reuse_budget(1));
  EXPECT_EQ(same.reused_nodes, first.tree_nodes);  // every node, none copied
  EXPECT_EQ(same.rollouts, 1u);
  if (rt().rank() == 0) {
    EXPECT_EQ(same.reused_visits, root_visits(first));
    EXPECT_EQ(root_visits(same), root_visits(first) + K);
    for (const auto& m : first.moves) EXPECT_GE(visits_of(same, m.move), m.visits);
  }

  auto s1 = s0;
  game.apply(s1, same.best);
  const auto one_later = search.search(s1, reuse_budget(1));
  EXPECT_GT(one_later.reused_nodes, 1u);
  EXPECT_LT(one_later.reused_nodes, same.reused_nodes);
  EXPECT_LT(search.last_counters().tree_bytes_live, whole_tree);  // the rest was freed
  if (rt().rank() == 0) {
    EXPECT_EQ(one_later.reused_visits, visits_of(same, same.best) - K);
    EXPECT_EQ(root_visits(one_later), one_later.reused_visits + K);
    EXPECT_LE(one_later.reused_nodes, one_later.reused_visits / K + 1);
  }

  // Two moves below a fresh tree: the reply is any move (every reply of the most visited first
  // move has been tried more than once in 6000 rollouts on 5x5).
  (void)search.search(s0, reuse_budget(6000));
  const std::uint64_t tree_nodes = search.last_counters().nodes_created;
  auto s2 = s1;
  std::vector<hex::move> legal(game.max_moves());
  legal.resize(game.legal_moves(s2, legal));
  game.apply(s2, legal.front());
  const auto two_later = search.search(s2, reuse_budget(10));
  EXPECT_GE(two_later.reused_nodes, 1u);
  EXPECT_LT(two_later.reused_nodes, tree_nodes);
  if (rt().rank() == 0) {
    EXPECT_GT(two_later.reused_visits, 0u);
    EXPECT_EQ(root_visits(two_later), two_later.reused_visits + 10 * K);
  }

  // A root the kept tree does not hold (three moves on), then reuse off: empty trees.
  auto far = s2;
  game.apply(far, legal[1]);
  game.apply(far, legal[2]);
  game.apply(far, legal[3]);
  const auto elsewhere = search.search(far, reuse_budget(10));
  EXPECT_EQ(elsewhere.reused_nodes, 0u);
  EXPECT_EQ(elsewhere.reused_visits, 0u);
  auto off = reuse_budget(10);
  off.reuse_tree = false;
  const auto without = search.search(far, off);
  EXPECT_EQ(without.reused_nodes, 0u);
  EXPECT_EQ(search.last_counters().tree_bytes_live, 0u);
  EXPECT_EQ(search.memory().bytes_live(), 0u);
}
TEST(DistributedMcts, TreeReuseKeepsThePlayedSubtreesVisits) { expect_reuse_keeps_visits({}); }
TEST(DistributedMcts, TreeReuseKeepsThePlayedSubtreesVisitsRemoteOnly) {
  distributed_options options;
  options.remote_only = true;
  expect_reuse_keeps_visits(options);
}

// Hex's pattern priors across processes (every edge table holds its moves' prior shares, made
// on whichever thread owns the node): the same 3x3 proofs as exhaustive search, and on 7x7 a
// kept tree of such tables reused whole (each node's image carries its shares: carry_image).
TEST(DistributedMcts, PatternPriorsKeepTheProofsAndTravelWithAKeptTree) {
  const seriema::hex::knowledge_sources with_priors{true, true, false, false};
  const hex game(3, false, seriema::hex::playout_policy::random, with_priors);
  distributed_search<hex> search(rt(), game);
  search_options o = solver_budget(20000);
  o.knowledge = true;
  const auto openings = seriema::test::openings_up_to_two_stones(game);
  for (std::size_t i = 0; i < openings.size(); i += 3) {  // as in the test above
    const hex::state& s = openings[i];
    const auto result = search.search(s, o);
    if (rt().rank() != 0) continue;
    EXPECT_NE(result.proven_winner, seriema::mcts::nobody) << game.render(s);
    EXPECT_EQ(result.proven_winner == s.to_move, seriema::test::mover_wins_by_force(game, s))
        << game.render(s);
  }
  const hex seven(7, false, seriema::hex::playout_policy::random, with_priors);
  distributed_search<hex> kept(rt(), seven);
  search_options r = reuse_budget(3000);
  r.knowledge = true;
  const auto first = kept.search(seven.initial_state(), r);
  r.rollouts = 10;
  const auto again = kept.search(seven.initial_state(), r);
  EXPECT_EQ(again.reused_nodes, first.tree_nodes);
  if (rt().rank() == 0) {
    EXPECT_EQ(root_visits(again), root_visits(first) + 10 * 2);
  }
}

// Tree reuse one move down with pattern priors (the subtree copied node by node between the
// threads that own it, each image with its shares): the first search stores the priors without
// using them (bias 0); the second, with a large bias, spends most rollouts on the move of
// highest prior at the carried root, which it could not if the copy had lost the shares.
TEST(DistributedMcts, ACarriedSubtreeKeepsItsPriorShares) {
  const hex game(7, false, seriema::hex::playout_policy::random, {false, true});
  distributed_search<hex> search(rt(), game);
  search_options o = reuse_budget(2000);
  o.knowledge = true;
  o.prior_bias = 0;
  const auto first = search.search(game.initial_state(), o);
  auto next = game.initial_state();
  game.apply(next, first.best);
  o.prior_bias = 1000;
  o.rollouts = 3000;
  const auto second = search.search(next, o);
  EXPECT_GT(second.reused_nodes, 1u);
  if (rt().rank() == 0) {
    EXPECT_TRUE(seriema::test::is_highest_prior(game, next, second.best))
        << game.move_name(second.best);
  }
}

// A kept tree whose edges were made under other knowledge is not reused (its nodes would keep
// moves the new search prunes, or lack ones it keeps): each change starts an empty tree.
TEST(DistributedMcts, TreeReuseStartsAfreshWhenKnowledgeChanges) {
  const hex game(5);
  distributed_search<hex> search(rt(), game);
  const auto s0 = game.initial_state();
  search_options o = reuse_budget(1000);
  EXPECT_EQ(search.search(s0, o).reused_nodes, 0u);
  EXPECT_GT(search.search(s0, o).reused_nodes, 0u);
  o.knowledge = true;
  EXPECT_EQ(search.search(s0, o).reused_nodes, 0u);
  EXPECT_GT(search.search(s0, o).reused_nodes, 0u);
  o.knowledge = false;
  EXPECT_EQ(search.search(s0, o).reused_nodes, 0u);
}

// The solver's proofs are carried: a root proven by the search stays proven with the same
// winning move, and a proven node one move down starts the next search decided.
TEST(DistributedMcts, TreeReuseKeepsTheSolversProofs) {
  const hex game(5);
  distributed_search<hex> search(rt(), game);
  search_options o = solver_budget(400);
  o.reuse_tree = true;
  const auto in_three = seriema::test::hex_win_in_three(game);
  const bool root_process = rt().rank() == 0;  // where the proof is reported
  const auto proven = search.search(in_three, o);
  if (root_process) {
    EXPECT_EQ(proven.proven_winner, 1);
  }
  o.rollouts = 1;
  const auto again = search.search(in_three, o);
  EXPECT_EQ(again.reused_nodes, proven.tree_nodes);
  if (root_process) {
    EXPECT_EQ(again.proven_winner, 1);
  }
  EXPECT_EQ(again.best, proven.best);  // the winning edge, whatever its visits
  EXPECT_EQ(again.rollouts, 1u);  // a proven root starts one rollout: a move to name
  // White to move against the double threat: lost, decided when its edges were made (a node
  // below the root then, so no rollout went through its edges). The search still names one of
  // its (legal) moves.
  auto after = in_three;
  game.apply(after, proven.best);
  const auto lost = search.search(after, o);
  EXPECT_GT(lost.reused_nodes, 0u);
  if (root_process) {
    EXPECT_EQ(lost.proven_winner, 1);
    EXPECT_FALSE(lost.moves.empty());
  }
  EXPECT_EQ(lost.rollouts, 1u);
  const auto legal = seriema::test::hex_legal(game, after);
  EXPECT_NE(std::find(legal.begin(), legal.end(), lost.best), legal.end())
      << game.move_name(lost.best) << "\n" << game.render(after);
}

// With RAVE the all-moves-as-first statistics travel with the copy: a search one move down
// with a single rollout prefers the move the kept statistics prefer.
TEST(DistributedMcts, TreeReuseKeepsRaveStatistics) {
  const hex game(5, false, seriema::hex::playout_policy::random);
  distributed_search<hex> search(rt(), game);
  search_options o = reuse_budget(6000);
  o.rave = true;
  const auto s0 = game.initial_state();
  const auto first = search.search(s0, o);
  auto s1 = s0;
  game.apply(s1, first.best);
  o.rollouts = 1;
  const auto next = search.search(s1, o);
  EXPECT_GT(next.reused_nodes, 1u);
  if (rt().rank() == 0) {
    EXPECT_EQ(next.reused_visits, visits_of(first, first.best) - o.playouts_per_leaf);
    EXPECT_EQ(root_visits(next), next.reused_visits + o.playouts_per_leaf);
  }
}

// A kept tree grown with another rave or solver setting lacks the statistics or proof words the
// next search reads: that search starts from an empty tree (same root or a move later).
TEST(DistributedMcts, TreeReuseStartsAfreshWhenRaveOrSolverChange) {
  const hex game(5);
  distributed_search<hex> search(rt(), game);
  search_options o = reuse_budget(2000);
  const auto s0 = game.initial_state();
  (void)search.search(s0, o);
  o.rave = true;
  const auto with_rave = search.search(s0, o);
  EXPECT_EQ(with_rave.reused_nodes, 0u);
  EXPECT_EQ(with_rave.rollouts, 2000u);
  o.solver = true;
  auto s1 = s0;
  game.apply(s1, with_rave.best);
  const auto with_solver = search.search(s1, o);
  EXPECT_EQ(with_solver.reused_nodes, 0u);
  const auto same_again = search.search(s1, o);
  EXPECT_EQ(same_again.reused_nodes, with_solver.tree_nodes);
}

// Under a memory budget a reusing search grows its tree to half of it, so that the kept tree
// and its copy together stay within the budget; the search still runs its rollouts.
TEST(DistributedMcts, TreeReuseStaysWithinTheMemoryBudget) {
  const hex game(11);
  distributed_search<hex> search(rt(), game);
  constexpr std::uint64_t mebibyte = std::uint64_t{1} << 20;
  constexpr std::uint64_t block = seriema::mcts::tree_pool::block_bytes;
  search_options o = reuse_budget(20000);
  o.memory_budget = 2 * mebibyte;
  const auto s0 = game.initial_state();
  const auto first = search.search(s0, o);
  EXPECT_TRUE(first.memory_budget_reached);
  EXPECT_EQ(first.rollouts, 20000u);
  EXPECT_LE(first.tree_bytes, mebibyte + block);  // half the budget, plus the root's block
  auto s1 = s0;
  game.apply(s1, first.best);
  const auto next = search.search(s1, o);
  EXPECT_GT(next.reused_nodes, 1u);
  EXPECT_EQ(next.rollouts, 20000u);
  EXPECT_LE(next.tree_bytes, mebibyte + 2 * block);
}

TEST(DistributedMcts, TreeReuseNeedsComparableStates) {
  if (rt().size() != 1) GTEST_SKIP() << "argument errors are raised on rank 0 before any exchange";
  const seriema::test::claim_game game{8};
  distributed_search<seriema::test::claim_game> search(rt(), game);
  search_options o;
  o.rollouts = 10;
  o.reuse_tree = true;
  EXPECT_THROW((void)search.search(game.initial_state(), o), std::invalid_argument);
}

// 2x2 Hex with 65535 playouts a leaf: the tree is whole after a few rollouts, and every later
// rollout ends at a finished game, which counts K visits without playing out, so 70 000
// rollouts push 4.6 billion visits through the root. Black wins by b1 or a2 (each touches both
// cells of the other row), so one of them takes at least 2.3 billion visits, whose points
// (two per won playout) would pass 2^32 and wrap into the visits if the root's packed counts
// did not halve at 2^30.
TEST(DistributedMcts, RootCountsHalveInsteadOfWrappingOnALongSearch) {
  // The halving is a table's own (its threads race on its words: 1 x 2 runs them); across
  // processes 70 000 rollouts of calls take seconds on an oversubscribed 2-core machine.
  if (rt().size() != 1) GTEST_SKIP() << "one process: the halving does not cross processes";
  const hex game(2);
  distributed_search<hex> search(rt(), game);
  search_options o = budget(70000);
  o.playouts_per_leaf = 65535;
  const auto result = search.search(game.initial_state(), o);
  if (rt().rank() != 0) return;
  std::uint64_t total = 0;
  for (const auto& m : result.moves) {
    total += m.visits;
    EXPECT_LT(m.visits, std::uint64_t{1} << 31) << game.move_name(m.move);
  }
  EXPECT_LT(total, std::uint64_t{70000} * 65535);  // halved at least once
  EXPECT_TRUE(result.best == game.at(0, 1) || result.best == game.at(1, 0))
      << game.move_name(result.best);
  EXPECT_GT(result.win_rate, 0.9);
}

TEST(DistributedMcts, RefusesMoreVisitsInFlightThanPackedCountsLeaveRoomFor) {
  if (rt().size() != 1) GTEST_SKIP() << "argument errors are raised on rank 0 before any exchange";
  const hex game(5);
  distributed_options wide;
  wide.rollouts_in_flight = 8192;
  distributed_search<hex> search(rt(), game, wide);
  search_options o = budget(10);
  o.playouts_per_leaf = 65535;  // 8192 x 65535 > 2^28
  EXPECT_THROW((void)search.search(game.initial_state(), o), std::invalid_argument);
  o.playouts_per_leaf = 32768;  // 8192 x 32768 = 2^28: room enough
  EXPECT_NO_THROW((void)search.search(game.initial_state(), o));
}

// A game whose positions may have more moves than a node's 16-bit edge index can name.
struct many_moves_game : seriema::test::claim_game {
  [[nodiscard]] std::size_t max_moves() const noexcept { return 70000; }
};

TEST(DistributedMcts, RefusesGamesWithMoreMovesThanANodeIndexes) {
  // In the constructor, on every rank, before any exchange.
  EXPECT_THROW(distributed_search<many_moves_game>(rt(), many_moves_game{}),
               std::invalid_argument);
}

TEST(DistributedMcts, RejectsAFinishedRootAndAMissingBudget) {
  if (rt().size() != 1) GTEST_SKIP() << "argument errors are raised on rank 0 before any exchange";
  const hex game(3);
  distributed_search<hex> search(rt(), game);
  auto won = hex_position(game, {{0, 0}, {1, 0}, {2, 0}}, {{0, 1}, {1, 1}}, 2);
  EXPECT_THROW((void)search.search(won, budget(10)), std::invalid_argument);
  search_options none;
  none.rollouts = 0;
  EXPECT_THROW((void)search.search(game.initial_state(), none), std::invalid_argument);
}

}  // namespace

int main(int argc, char** argv) { return seriema::test::run_all_tests(argc, argv); }

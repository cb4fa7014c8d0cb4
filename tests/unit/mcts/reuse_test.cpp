// Tests of tree reuse in the sequential engine (sequential_engine, search_options::reuse_tree)
// on Hex: the carried subtree's visits and nodes add up exactly to the kept tree's (same root,
// one move and two moves later), the copy keeps every statistic and proof field by field, a
// root farther away, a search without reuse or with other options starts from an empty tree,
// solver proofs and RAVE statistics survive, the memory budget holds, and a game without
// operator== is refused.
#include <gtest/gtest.h>

#include <cstdint>
#include <hex.hpp>
#include <initializer_list>
#include <span>
#include <seriema/mcts/sequential.hpp>
#include <stdexcept>
#include <utility>
#include <vector>

#include "../../support/claim_game.hpp"
#include "../../support/hex_positions.hpp"

namespace seriema::mcts {
namespace {

using hex::hex;
using engine = sequential_engine<hex>;
using result = search_result<hex::move>;
using test::hex_legal;
using test::hex_position;

constexpr unsigned playouts = 2;  // K in every test but the solver's

search_options reuse_options(std::uint64_t rollouts, std::uint64_t seed = 5) {
  search_options o;
  o.rollouts = rollouts;
  o.playouts_per_leaf = playouts;
  o.seed = seed;
  o.reuse_tree = true;
  return o;
}

hex::state after(const hex& g, hex::state s, std::initializer_list<hex::move> moves) {
  for (const hex::move m : moves) g.apply(s, m);
  return s;
}

std::uint64_t visits_of(const result& r, hex::move m) {
  for (const auto& s : r.moves) {
    if (s.move == m) return s.visits;
  }
  return 0;
}

std::uint64_t root_visits(const result& r) {
  std::uint64_t visits = 0;
  for (const auto& s : r.moves) visits += s.visits;
  return visits;
}

void expect_same_moves(const result& a, const result& b) {
  ASSERT_EQ(a.moves.size(), b.moves.size());
  for (std::size_t i = 0; i < a.moves.size(); ++i) {
    EXPECT_EQ(a.moves[i].move, b.moves[i].move);
    EXPECT_EQ(a.moves[i].visits, b.moves[i].visits);
    EXPECT_EQ(a.moves[i].wins, b.moves[i].wins);
  }
}

TEST(sequential_reuse, AFirstSearchIsSequentialSearch) {
  const hex g(7);
  const hex::state root = g.initial_state();
  const result alone = sequential_search(g, root, reuse_options(1000));
  engine e(g);
  expect_same_moves(e.search(root, reuse_options(1000)), alone);
  search_options without = reuse_options(1000);
  without.reuse_tree = false;
  expect_same_moves(e.search(root, without), alone);
}

// Every rollout goes through a root edge, so the root's visits are the search's playouts.
TEST(sequential_reuse, TheSameRootCarriesTheWholeTree) {
  const hex g(7);
  const hex::state root = g.initial_state();
  engine e(g);
  const result first = e.search(root, reuse_options(3000));
  ASSERT_EQ(root_visits(first), first.playouts);
  EXPECT_EQ(first.reused_visits, 0u);
  EXPECT_EQ(first.reused_nodes, 0u);
  EXPECT_GT(e.kept_tree_bytes(), 0u);

  const result second = e.search(root, reuse_options(500, 9));
  EXPECT_EQ(second.reused_visits, first.playouts);
  EXPECT_EQ(second.reused_nodes, first.tree_nodes);
  EXPECT_EQ(second.rollouts, 500u);
  EXPECT_EQ(second.playouts, 500u * playouts);
  EXPECT_GT(second.tree_nodes, 0u);
  EXPECT_LE(second.tree_nodes, 500u);
  EXPECT_EQ(root_visits(second), first.playouts + second.playouts);
  for (const auto& m : first.moves) {
    EXPECT_GE(visits_of(second, m.move), m.visits) << g.move_name(m.move);
  }
}

// The root's children partition the tree: searched from each child in turn (a copy of the
// engine each time), the carried nodes add up to the tree less its root and the carried visits
// to the root's. A child's visits are its moves' plus the K playouts made at its creation.
TEST(sequential_reuse, OneMoveLaterCarriesTheChildsSubtree) {
  const hex g(7);
  const hex::state root = g.initial_state();
  engine e(g);
  const result first = e.search(root, reuse_options(3000));
  const std::uint64_t kept_before = e.kept_tree_bytes();
  const engine with_first_tree = e;

  const hex::move best = first.best;
  const result second = e.search(after(g, root, {best}), reuse_options(1));
  EXPECT_EQ(second.reused_visits, first.moves.front().visits);
  EXPECT_GT(second.reused_nodes, 1u);
  EXPECT_LT(second.reused_nodes, first.tree_nodes);
  EXPECT_EQ(root_visits(second), second.reused_visits - playouts + second.playouts);
  EXPECT_LT(e.kept_tree_bytes(), kept_before);

  std::uint64_t nodes = 0;
  std::uint64_t visits = 0;
  for (const hex::move m : hex_legal(g, root)) {
    engine copy = with_first_tree;
    const result r = copy.search(after(g, root, {m}), reuse_options(1));
    EXPECT_EQ(r.reused_visits, visits_of(first, m)) << g.move_name(m);
    nodes += r.reused_nodes;
    visits += r.reused_visits;
  }
  EXPECT_EQ(nodes, first.tree_nodes - 1);
  EXPECT_EQ(visits, first.playouts);
}

TEST(sequential_reuse, TwoMovesLaterCarriesTheGrandchildsSubtree) {
  const hex g(7);
  const hex::state root = g.initial_state();
  engine e(g);
  const result first = e.search(root, reuse_options(4000));
  const hex::move best = first.best;
  engine one_move = e;
  const result child = one_move.search(after(g, root, {best}), reuse_options(1));

  std::uint64_t nodes = 0;
  std::uint64_t visits = 0;
  std::pair<std::uint64_t, hex::move> most_visited{0, 0};
  for (const hex::move reply : hex_legal(g, after(g, root, {best}))) {
    engine copy = e;
    const result r = copy.search(after(g, root, {best, reply}), reuse_options(1));
    nodes += r.reused_nodes;
    visits += r.reused_visits;
    if (r.reused_visits > most_visited.first) most_visited = {r.reused_visits, reply};
  }
  EXPECT_EQ(nodes, child.reused_nodes - 1);
  EXPECT_EQ(visits, child.reused_visits - playouts);

  const hex::state two_later = after(g, root, {best, most_visited.second});
  const result second = e.search(two_later, reuse_options(200));
  EXPECT_EQ(second.reused_visits, most_visited.first);
  EXPECT_GT(second.reused_nodes, 1u);
  EXPECT_EQ(root_visits(second), second.reused_visits - playouts + second.playouts);
  EXPECT_LE(second.tree_nodes, 200u);
}

TEST(sequential_reuse, AFartherRootOrNoReuseStartsAnEmptyTree) {
  const hex g(7);
  const hex::state root = g.initial_state();
  engine e(g);
  const result first = e.search(root, reuse_options(2000));
  const hex::state three_later = after(g, root, {first.best, g.at(0, 0), g.at(6, 6)});
  const result far = e.search(three_later, reuse_options(500));
  EXPECT_EQ(far.reused_visits, 0u);
  EXPECT_EQ(far.reused_nodes, 0u);
  expect_same_moves(far, sequential_search(g, three_later, reuse_options(500)));

  search_options without = reuse_options(500);
  without.reuse_tree = false;
  const result not_asked = e.search(three_later, without);  // the kept tree is this root's
  EXPECT_EQ(not_asked.reused_nodes, 0u);
  EXPECT_EQ(e.kept_tree_bytes(), 0u);
  expect_same_moves(not_asked, far);

  e.search(three_later, reuse_options(500));
  EXPECT_GT(e.kept_tree_bytes(), 0u);
  e.release_tree();
  EXPECT_EQ(e.kept_tree_bytes(), 0u);
  EXPECT_EQ(e.search(three_later, reuse_options(500)).reused_nodes, 0u);

  search_options with_rave = reuse_options(500);  // edges and statistics of another kind
  with_rave.rave = true;
  EXPECT_EQ(e.search(three_later, with_rave).reused_nodes, 0u);
  EXPECT_GT(e.search(three_later, with_rave).reused_nodes, 0u);

  search_options with_knowledge = with_rave;  // edges pruned by another rule
  with_knowledge.knowledge = true;
  EXPECT_EQ(e.search(three_later, with_knowledge).reused_nodes, 0u);
  EXPECT_GT(e.search(three_later, with_knowledge).reused_nodes, 0u);
  EXPECT_EQ(e.search(three_later, with_rave).reused_nodes, 0u);
}

// Field by field: the compacted subtree is the old one, renumbered (RAVE and solver on, so that
// the AMAF array, proofs and lost edges are filled).
template <class Arrays>
std::uint64_t expect_same_subtree(const Arrays& old, std::uint32_t o, const Arrays& fresh,
                                  std::uint32_t f) {
  const auto& a = old.nodes[o];
  const auto& b = fresh.nodes[f];
  EXPECT_TRUE(a.position == b.position);
  EXPECT_EQ(a.visits, b.visits);
  EXPECT_EQ(a.winner, b.winner);
  EXPECT_EQ(a.lost_edges, b.lost_edges);
  EXPECT_EQ(a.edge_count, b.edge_count);
  EXPECT_EQ(a.first_edge == Arrays::none, b.first_edge == Arrays::none);
  std::uint64_t nodes = 1;
  if (a.first_edge == Arrays::none || b.first_edge == Arrays::none) return nodes;
  for (std::uint32_t i = 0; i < a.edge_count; ++i) {
    const auto& x = old.edges[a.first_edge + i];
    const auto& y = fresh.edges[b.first_edge + i];
    EXPECT_EQ(x.m, y.m);
    EXPECT_EQ(x.lost, y.lost);
    EXPECT_EQ(x.visits, y.visits);
    EXPECT_EQ(x.wins, y.wins);
    EXPECT_EQ(old.amaf[a.first_edge + i].visits, fresh.amaf[b.first_edge + i].visits);
    EXPECT_EQ(old.amaf[a.first_edge + i].wins, fresh.amaf[b.first_edge + i].wins);
    EXPECT_EQ(x.child == Arrays::none, y.child == Arrays::none);
    if (x.child == Arrays::none || y.child == Arrays::none) continue;
    EXPECT_EQ(fresh.nodes[y.child].parent, f);
    EXPECT_EQ(fresh.nodes[y.child].in_edge, b.first_edge + i);
    nodes += expect_same_subtree(old, x.child, fresh, y.child);
  }
  return nodes;
}

TEST(sequential_reuse, TheCopyKeepsEveryStatisticAndProof) {
  const hex g(5);
  search_options o = reuse_options(3000);
  o.rave = true;
  o.solver = true;
  // Black to move on 5x5 among a few stones: proofs a few moves deep.
  const hex::state s = hex_position(g, {{0, 2}, {4, 1}}, {{2, 0}, {2, 4}}, 1);
  detail::sequential_tree<hex> searched(g, s, o);
  searched.run();
  detail::sequential_arrays<hex> old = searched.take_arrays();
  ASSERT_EQ(old.amaf.size(), old.edges.size());
  std::uint64_t lost = 0;
  for (const auto& x : old.edges) lost += x.lost ? 1 : 0;
  EXPECT_GT(lost, 0u);  // the copy has proofs to keep

  const auto& top = old.nodes[0];
  std::uint32_t child = top.first_edge;  // the most visited root edge's child, and its own
  for (std::uint32_t e = top.first_edge; e < top.first_edge + top.edge_count; ++e) {
    if (old.edges[e].visits > old.edges[child].visits) child = e;
  }
  constexpr std::uint32_t none = detail::sequential_arrays<hex>::none;
  const std::uint32_t one_below = old.edges[child].child;
  ASSERT_NE(one_below, none);
  const auto& middle = old.nodes[one_below];
  ASSERT_NE(middle.first_edge, none);
  std::uint32_t grandchild = middle.first_edge;
  for (std::uint32_t e = middle.first_edge; e < middle.first_edge + middle.edge_count; ++e) {
    if (old.edges[e].visits > old.edges[grandchild].visits) grandchild = e;
  }
  ASSERT_NE(old.edges[grandchild].child, none);
  for (const std::uint32_t at : {0u, one_below, old.edges[grandchild].child}) {
    detail::sequential_arrays<hex> kept = old;
    const auto size = detail::subtree_size(kept, at);
    const auto fresh = detail::compact_subtree(g, kept, at, size, 0);
    EXPECT_EQ(kept.bytes(), 0u);  // freed
    EXPECT_EQ(fresh.nodes.size(), size.nodes);
    EXPECT_EQ(fresh.nodes.capacity(), size.nodes);
    EXPECT_EQ(fresh.edges.capacity(), size.edges);
    EXPECT_EQ(fresh.nodes[0].parent, none);
    EXPECT_EQ(expect_same_subtree(old, at, fresh, 0), fresh.nodes.size());
    if (at == 0) {
      EXPECT_EQ(fresh.nodes.size(), old.nodes.size());
    }
  }
}

// 5x5, black (top-bottom) to move wins at (1, 2) at once: the root is decided at its expansion,
// its only edge the win.
hex::state win_in_one(const hex& g) {
  return hex_position(g, {{0, 2}, {2, 2}, {3, 2}, {4, 2}}, {{3, 0}, {3, 1}, {3, 3}, {3, 4}}, 1);
}

search_options solver_options(std::uint64_t rollouts) {
  search_options o = reuse_options(rollouts);
  o.playouts_per_leaf = 1;
  o.solver = true;
  return o;
}

TEST(sequential_reuse, AProvenRootStaysProvenAndNamesItsWinningMove) {
  const hex g(5);
  engine e(g);
  const hex::state once = win_in_one(g);
  const result first = e.search(once, solver_options(1));
  ASSERT_EQ(first.proven_winner, 1);
  ASSERT_EQ(first.best, g.at(1, 2));
  const result again = e.search(once, solver_options(5));
  EXPECT_EQ(again.reused_nodes, first.tree_nodes);
  EXPECT_EQ(again.proven_winner, 1);
  EXPECT_EQ(again.best, g.at(1, 2));
  EXPECT_EQ(again.rollouts, 1u);  // a decided root ends the search after one rollout

  const hex::state threat = seriema::test::hex_win_in_three(g);
  const result proof = e.search(threat, solver_options(400));
  ASSERT_EQ(proof.proven_winner, 1);
  const result same = e.search(threat, solver_options(400));
  EXPECT_EQ(same.proven_winner, 1);
  EXPECT_EQ(same.best, proof.best);
  EXPECT_EQ(same.reused_visits, proof.playouts);
  // After the double threat white's node was decided lost at its expansion.
  const result lost = e.search(after(g, threat, {proof.best}), solver_options(400));
  EXPECT_GE(lost.reused_nodes, 1u);
  EXPECT_EQ(lost.proven_winner, 1);
  EXPECT_EQ(lost.rollouts, 1u);
}

// On 3x3 every opening is proven (solver_test): each position one and two moves below the
// proven empty board, carried from its tree, keeps its proof, and a carried win names a move
// that keeps it (found among the carried root's edges: the proof may have come through any).
TEST(sequential_reuse, ProofsBelowTheRootAreCarriedWithTheirWinningMoves) {
  const hex g(3);
  engine e(g);
  const result first = e.search(g.initial_state(), solver_options(20000));
  ASSERT_EQ(first.proven_winner, 1);
  int carried_wins = 0;
  int carried_losses = 0;
  for (const hex::state& s : test::openings_up_to_two_stones(g)) {
    engine copy = e;
    const result r = copy.search(s, solver_options(1));
    if (r.reused_nodes == 0 || r.proven_winner == nobody) continue;
    const bool mover_wins = test::mover_wins_by_force(g, s);
    EXPECT_EQ(r.proven_winner == s.to_move, mover_wins) << g.render(s);
    if (!mover_wins) {
      ++carried_losses;
      continue;
    }
    ++carried_wins;
    hex::state next = s;
    g.apply(next, r.best);
    EXPECT_TRUE(g.winner(next) == s.to_move || !test::mover_wins_by_force(g, next))
        << g.move_name(r.best) << "\n" << g.render(s);
  }
  // The search stops once the empty board is proven: 9 carried wins and 1 loss with this seed.
  EXPECT_GE(carried_wins, 5);
  EXPECT_GE(carried_losses, 1);
}

TEST(sequential_reuse, RaveStatisticsAreCarried) {
  const hex g(7);
  engine e(g);
  search_options o = reuse_options(2000);
  o.rave = true;
  const result first = e.search(g.initial_state(), o);
  o.rollouts = 1;
  const result second = e.search(g.initial_state(), o);
  EXPECT_EQ(second.reused_visits, first.playouts);
  EXPECT_EQ(second.best, first.best);
}

TEST(sequential_reuse, AGameWithoutEqualityIsRefused) {
  sequential_engine<test::claim_game> e(test::claim_game{});
  search_options o = reuse_options(10);
  EXPECT_THROW(e.search(test::claim_game{}.initial_state(), o), std::invalid_argument);
  o.reuse_tree = false;
  EXPECT_EQ(e.search(test::claim_game{}.initial_state(), o).rollouts, 10u);
}

// A subtree larger than the next budget is not carried (the search starts afresh within the
// budget); one that fits is carried and the tree grows no further than the budget.
TEST(sequential_reuse, AKeptTreeStaysWithinTheNextBudget) {
  const hex g(7);
  const hex::state root = g.initial_state();
  engine e(g);
  const result first = e.search(root, reuse_options(20000));
  const engine with_first_tree = e;
  const hex::state next = after(g, root, {first.best});

  constexpr std::uint64_t small = 64 << 10;
  search_options o = reuse_options(5000);
  o.memory_budget = small;
  const result starved = e.search(next, o);
  EXPECT_EQ(starved.reused_nodes, 0u);
  EXPECT_LE(starved.tree_bytes, small);
  EXPECT_TRUE(starved.memory_budget_reached);
  EXPECT_EQ(starved.rollouts, 5000u);

  engine fits = with_first_tree;
  o.memory_budget = first.tree_bytes / 2;
  const result carried = fits.search(next, o);
  EXPECT_GT(carried.reused_nodes, 0u);
  EXPECT_LE(carried.tree_bytes, o.memory_budget);
  EXPECT_EQ(carried.rollouts, 5000u);
  EXPECT_EQ(root_visits(carried), carried.reused_visits - playouts + carried.playouts);

  // A budget just above the subtree (the same tree grown again to measure it): the nodes a new
  // tree reserves are cut to what is left.
  const search_options first_options = reuse_options(20000);
  detail::sequential_tree<hex> same(g, root, first_options);
  same.run();
  const auto arrays = same.take_arrays();
  const hex::move path[] = {first.best};
  const auto at = detail::find_subtree(arrays, std::span<const hex::move>(path));
  ASSERT_TRUE(at.has_value());
  const std::uint64_t subtree_bytes =
      detail::sequential_arrays<hex>::bytes_for(detail::subtree_size(arrays, *at), false, false);
  engine tight = with_first_tree;
  o.memory_budget = subtree_bytes + subtree_bytes / 8;
  const result squeezed = tight.search(next, o);
  EXPECT_EQ(squeezed.reused_nodes, detail::subtree_size(arrays, *at).nodes);
  EXPECT_LE(squeezed.tree_bytes, o.memory_budget);
  EXPECT_TRUE(squeezed.memory_budget_reached);
}

}  // namespace
}  // namespace seriema::mcts

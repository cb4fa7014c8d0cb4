// Tests of Hex's virtual connections (hex::edge_connections, hex::full_connections, H-search in
// vc.cpp) and of prune's use of them: the ziggurat found and checked by exhaustive search on its
// carrier, bridges and templates joined into a win, and a must-play set.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <hex.hpp>
#include <seriema/mcts/dfpn.hpp>
#include <seriema/mcts/game.hpp>
#include <string>
#include <utility>
#include <vector>

namespace seriema::hex {
namespace {

constexpr knowledge_sources connections{true, false, true, true};

int count(const hex::cell_set& cells) {
  int n = 0;
  for (const std::uint64_t word : cells) n += std::popcount(word);
  return n;
}
bool in(const hex::cell_set& cells, int m) { return (cells[m / 64] >> (m % 64) & 1) != 0; }

// Whether `who`, moving second inside `cells` (the other empty cells never played: a chain may
// only run through the carrier), always joins the stone `from` to its edge `edge`: exhaustive
// search. A position where the opponent has no carrier cell left to play and `who` is not
// joined does not hold.
bool holds_as_second_player(const hex& g, hex::state s, player who, int from, int edge,
                            std::vector<int> cells) {
  const auto joined = [&](const hex::state& t) {
    // The chain through `from` touches the edge: flood fill over who's stones.
    std::vector<int> stack = {from};
    std::vector<bool> seen(static_cast<std::size_t>(g.size() * g.size()));
    seen[static_cast<std::size_t>(from)] = true;
    while (!stack.empty()) {
      const int c = stack.back();
      stack.pop_back();
      const int along = who == 1 ? c / g.size() : c % g.size();
      if (along == (edge == 0 ? 0 : g.size() - 1)) return true;
      for (const auto& [dr, dc] : {std::pair{-1, 0}, {-1, 1}, {0, 1}, {1, 0}, {1, -1}, {0, -1}}) {
        const int r = c / g.size() + dr;
        const int col = c % g.size() + dc;
        if (r < 0 || col < 0 || r >= g.size() || col >= g.size()) continue;
        const int next = r * g.size() + col;
        if (!seen[static_cast<std::size_t>(next)] && g.cell(t, r, col) == who) {
          seen[static_cast<std::size_t>(next)] = true;
          stack.push_back(next);
        }
      }
    }
    return false;
  };
  if (joined(s)) return true;
  bool cell_left = false;
  // Opponent to move; `who` answers.
  for (std::size_t i = 0; i < cells.size(); ++i) {
    if (g.cell(s, cells[i] / g.size(), cells[i] % g.size()) != 0) continue;
    cell_left = true;
    hex::state cut = s;
    g.place(cut, cells[i] / g.size(), cells[i] % g.size(), mcts::opponent(who));
    bool answered = false;
    for (std::size_t j = 0; j < cells.size() && !answered; ++j) {
      if (g.cell(cut, cells[j] / g.size(), cells[j] % g.size()) != 0) continue;
      hex::state reply = cut;
      g.place(reply, cells[j] / g.size(), cells[j] % g.size(), who);
      answered = joined(reply) || holds_as_second_player(g, reply, who, from, edge, cells);
    }
    if (!answered) return false;
  }
  return cell_left;
}

// Whether `who`, moving second inside `cells`, always joins its two edges: exhaustive search.
bool edges_hold_as_second_player(const hex& g, const hex::state& s, player who,
                                 const std::vector<int>& cells) {
  if (g.connected(s, who)) return true;
  bool cell_left = false;
  for (const int cut_at : cells) {
    if (g.cell(s, cut_at / g.size(), cut_at % g.size()) != 0) continue;
    cell_left = true;
    hex::state cut = s;
    g.place(cut, cut_at / g.size(), cut_at % g.size(), mcts::opponent(who));
    bool answered = false;
    for (const int reply_at : cells) {
      if (answered || g.cell(cut, reply_at / g.size(), reply_at % g.size()) != 0) continue;
      hex::state reply = cut;
      g.place(reply, reply_at / g.size(), reply_at % g.size(), who);
      answered = edges_hold_as_second_player(g, reply, who, cells);
    }
    if (!answered) return false;
  }
  return cell_left;
}

// The same question for carriers of about 20 cells, where the exhaustive search above takes
// hours: df-pn (mcts::dfpn_solver, checked against exhaustive search in dfpn_test) on a board
// where `who`'s stones run straight from `from` to the far edge, every cell but the carrier's
// is the opponent's and the opponent is to move: `who` wins exactly when the stone joins `edge`
// through the carrier. The solver uses only the rules and inferior cells, nothing of H-search.
bool holds_by_proof(int size, player who, int from, int edge, const std::vector<int>& cells) {
  const hex g(size, false, playout_policy::random, knowledge_sources{true, false, false, false});
  hex::state s = g.initial_state();
  const int depth_of_stone = who == 1 ? from / size : from % size;
  const int along = who == 1 ? from % size : from / size;
  const int step = edge == 0 ? 1 : -1;  // away from `edge`
  for (int d = depth_of_stone; d >= 0 && d < size; d += step) {
    g.place(s, who == 1 ? d : along, who == 1 ? along : d, who);
  }
  for (int cell = 0; cell < size * size; ++cell) {
    if (std::find(cells.begin(), cells.end(), cell) == cells.end()) {
      g.place(s, cell / size, cell % size, mcts::opponent(who));  // false where occupied
    }
  }
  s.to_move = mcts::opponent(who);
  mcts::dfpn_options options;
  options.table_bytes = std::size_t{16} << 20;
  options.seconds = 120;  // a regression ends as "unknown", a failure, not a hang
  mcts::dfpn_solver<hex> solver(g, options);
  const mcts::dfpn_result<hex::move> result = solver.solve(s);
  EXPECT_NE(result.outcome, mcts::dfpn_outcome::unknown);
  return result.outcome == mcts::dfpn_outcome::no_win;
}

std::vector<int> cells_of(const hex::cell_set& carrier) {
  std::vector<int> cells;
  for (int i = 0; i < 64 * hex::cell_words; ++i) {
    if (in(carrier, i)) cells.push_back(i);
  }
  return cells;
}

// A stone on the third row joins its edge by the ziggurat (8 cells), for both players and both
// edges: in the middle in both orientations (two carriers of 8), and in the corner where one
// orientation fits (along 0 for the first edge, 10 for the second: the acute corners); each
// carrier H-search keeps holds by exhaustive search, and a second-row stone's carrier is its two
// edge cells.
TEST(HexConnections, TheZigguratJoinsAThirdRowStoneToItsEdge) {
  const hex g(11, false, playout_policy::random, connections);
  for (const player who : {player{1}, player{2}}) {
    for (const int edge : {0, 1}) {
      for (const int along : {0, 5, 10}) {
        const int depth = edge == 0 ? 2 : 8;
        const int r = who == 1 ? depth : along;
        const int c = who == 1 ? along : depth;
        hex::state s = g.initial_state();
        ASSERT_TRUE(g.place(s, r, c, who));
        const auto carriers = g.full_connections(s, who, g.at(r, c), edge);
        const std::string where = "player " + std::to_string(who) + " edge " +
                                  std::to_string(edge) + "\n" + g.render(s);
        for (const auto& carrier : carriers) {
          EXPECT_TRUE(holds_as_second_player(g, s, who, g.at(r, c), edge, cells_of(carrier)))
              << where;
        }
        const int fitting = along == 5 ? 2 : along == (edge == 0 ? 0 : 10) ? 1 : 0;
        int zigs = 0;
        for (const auto& carrier : carriers) zigs += count(carrier) == 8 ? 1 : 0;
        EXPECT_EQ(zigs, fitting) << where;
        // Not to the far edge.
        EXPECT_TRUE(g.full_connections(s, who, g.at(r, c), 1 - edge).empty()) << where;
      }
    }
  }
  hex::state second_row = g.initial_state();
  g.place(second_row, 1, 4, 1);
  const auto bridge = g.full_connections(second_row, 1, g.at(1, 4), 0);
  ASSERT_FALSE(bridge.empty());
  EXPECT_EQ(count(bridge.front()), 2);
  EXPECT_TRUE(in(bridge.front(), g.at(0, 4)) && in(bridge.front(), g.at(0, 5)));
}

// A stone on the fourth row joins its edge by the fourth-row template (19 cells), for both
// players and both edges: in the middle in both orientations, each checked by exhaustive search
// on its carrier (holds_by_proof, which agrees with holds_as_second_player on the ziggurat), and
// every cell of it needed (taking any one away lets the opponent cut, for black and the top edge).
TEST(HexConnections, TheFourthRowTemplateJoinsAFourthRowStoneToItsEdge) {
  const hex g(11, false, playout_policy::random, connections);
  for (const player who : {player{1}, player{2}}) {
    for (const int edge : {0, 1}) {
      const int depth = edge == 0 ? 3 : 7;
      const int r = who == 1 ? depth : 5;
      const int c = who == 1 ? 5 : depth;
      hex::state s = g.initial_state();
      ASSERT_TRUE(g.place(s, r, c, who));
      const std::string where = "player " + std::to_string(who) + " edge " +
                                std::to_string(edge) + "\n" + g.render(s);
      int templates = 0;
      for (const auto& carrier : g.full_connections(s, who, g.at(r, c), edge)) {
        const std::vector<int> cells = cells_of(carrier);
        EXPECT_TRUE(holds_by_proof(g.size(), who, g.at(r, c), edge, cells)) << where;
        if (cells.size() != 19) continue;
        ++templates;
        if (who != 1 || edge != 0) continue;
        for (std::size_t drop = 0; drop < cells.size(); ++drop) {
          std::vector<int> fewer = cells;
          fewer.erase(fewer.begin() + static_cast<std::ptrdiff_t>(drop));
          EXPECT_FALSE(holds_by_proof(g.size(), who, g.at(r, c), edge, fewer))
              << "cell " << g.move_name(static_cast<hex::move>(cells[drop]))
              << " is not needed\n" << where;
        }
      }
      EXPECT_EQ(templates, 2) << where;
    }
  }
  // The ziggurat's carriers pass the fast check as they pass the slow one; the wrong
  // reflection of the ziggurat fails both.
  hex::state third = g.initial_state();
  g.place(third, 2, 5, 1);
  for (const auto& carrier : g.full_connections(third, 1, g.at(2, 5), 0)) {
    EXPECT_TRUE(holds_by_proof(g.size(), 1, g.at(2, 5), 0, cells_of(carrier)));
  }
  hex::state corner = g.initial_state();
  g.place(corner, 2, 10, 1);
  EXPECT_FALSE(holds_by_proof(g.size(), 1, g.at(2, 10), 0,
                              {g.at(2, 9), g.at(1, 9), g.at(1, 8), g.at(1, 7), g.at(0, 8),
                               g.at(0, 7), g.at(0, 6), g.at(0, 5)}));
}

// The checker itself: a carrier that does not join the stone to its edge is refused (two cells
// far from it; and the image of the ziggurat under a wrong reflection, which once was kept).
TEST(HexConnections, TheExhaustiveCheckRefusesCarriersThatDoNotHold) {
  const hex g(11);
  hex::state s = g.initial_state();
  g.place(s, 2, 10, 1);
  EXPECT_FALSE(holds_as_second_player(g, s, 1, g.at(2, 10), 0, {g.at(5, 5), g.at(6, 6)}));
  const std::vector<int> wrong = {g.at(2, 9), g.at(1, 9), g.at(1, 8), g.at(1, 7),
                                  g.at(0, 8), g.at(0, 7), g.at(0, 6), g.at(0, 5)};
  EXPECT_FALSE(holds_as_second_player(g, s, 1, g.at(2, 10), 0, wrong));
}

// The position that wrong reflection misjudged: black stones down column f from row 3 with
// only the wrong image's 8 cells empty, black to move. Black cannot cover both e2 and e3; prune
// must not call it a black win (with the reflection right, black has no connection at all).
TEST(HexConnections, AZigguratsMirrorImageIsTheRightOne) {
  for (const knowledge_sources sources :
       {connections, knowledge_sources{false, false, true, true}}) {
    const hex g(6, false, playout_policy::random, sources);
    hex::state s = g.initial_state();
    for (int r = 2; r < 6; ++r) g.place(s, r, 5, 1);
    const std::vector<std::pair<int, int>> wrong = {{2, 4}, {1, 4}, {1, 3}, {1, 2},
                                                    {0, 3}, {0, 2}, {0, 1}, {0, 0}};
    for (int r = 0; r < 6; ++r) {
      for (int c = 0; c < 6; ++c) {
        const bool kept = std::find(wrong.begin(), wrong.end(), std::pair{r, c}) != wrong.end();
        if (!kept && g.cell(s, r, c) == 0) g.place(s, r, c, 2);
      }
    }
    s.to_move = 1;
    EXPECT_FALSE(g.edge_connections(s, 1).full);
    EXPECT_EQ(g.edge_connections(s, 1).semis, 0u);
    std::vector<hex::move> moves(g.max_moves());
    moves.resize(g.legal_moves(s, moves));
    EXPECT_NE(g.prune(s, moves).decided, 1) << g.render(s);
  }
}

// Every full connection H-search keeps from a stone to an edge, and its smallest full and semi
// connection between a player's edges, on random positions of 6x6 to 8x8 (both players, both
// edges; carriers of up to 10 or 11 cells, which exhaustive search checks quickly), holds by
// exhaustive search.
TEST(HexConnections, EveryKeptStoneToEdgeConnectionHoldsOnRandomPositions) {
  mcts::random rng(4646);
  int checked = 0;
  for (const int size : {6, 7, 8}) {
    const hex g(size, false, playout_policy::random, connections);
    for (int game = 0; game < 20; ++game) {
      hex::state s = g.initial_state();
      const int stones = 4 + static_cast<int>(rng.below(static_cast<std::uint32_t>(size * 2)));
      std::vector<hex::move> moves(g.max_moves());
      for (int i = 0; i < stones; ++i) {
        moves.resize(g.max_moves());
        moves.resize(g.legal_moves(s, moves));
        g.apply(s, moves[rng.below(static_cast<std::uint32_t>(moves.size()))]);
        if (g.winner(s) != mcts::nobody) break;
      }
      if (g.winner(s) != mcts::nobody) continue;
      for (const player who : {player{1}, player{2}}) {
        // Edge to edge: a full connection holds moving second, a semi one after its key.
        const auto found = g.edge_connections(s, who);
        if (found.full && count(found.full_carrier) <= 10) {
          ASSERT_TRUE(edges_hold_as_second_player(g, s, who, cells_of(found.full_carrier)))
              << g.render(s);
          ++checked;
        }
        if (found.semis > 0 && count(found.semi_carrier) <= 11) {
          hex::state keyed = s;
          g.place(keyed, found.key / size, found.key % size, who);
          ASSERT_TRUE(edges_hold_as_second_player(g, keyed, who, cells_of(found.semi_carrier)))
              << g.render(s) << "key " << g.move_name(found.key);
          ++checked;
        }
      }
      for (int cell = 0; cell < size * size; ++cell) {
        const player who = g.cell(s, cell / size, cell % size);
        if (who == 0) continue;
        for (const int edge : {0, 1}) {
          for (const auto& carrier : g.full_connections(s, who, static_cast<hex::move>(cell),
                                                        edge)) {
            if (count(carrier) > 10) continue;
            ASSERT_TRUE(holds_as_second_player(g, s, who, cell, edge, cells_of(carrier)))
                << "player " << int(who) << " edge " << edge << " from " << g.move_name(
                       static_cast<hex::move>(cell)) << "\n" << g.render(s);
            ++checked;
          }
        }
      }
    }
  }
  std::printf("%d carriers checked\n", checked);
  EXPECT_GT(checked, 300);
}

// Two third-row stones joined by a bridge, each with its ziggurat: black has joined its edges
// (a full connection), which the fill-in does not see; prune decides it for either mover.
TEST(HexConnections, ABridgeBetweenTwoZigguratsWins) {
  const hex g(7, false, playout_policy::random, connections);
  hex::state s = g.initial_state();
  g.place(s, 2, 3, 1);
  g.place(s, 4, 2, 1);
  for (const player to_move : {player{1}, player{2}}) {
    s.to_move = to_move;
    EXPECT_EQ(g.inferior_cells(s).winner, mcts::nobody);
    const auto black = g.edge_connections(s, 1);
    EXPECT_TRUE(black.full);
    EXPECT_FALSE(g.edge_connections(s, 2).full);
    std::vector<hex::move> moves(g.max_moves());
    moves.resize(g.legal_moves(s, moves));
    EXPECT_EQ(g.prune(s, moves).decided, 1) << "to move " << int(to_move);
    const hex without(7, false, playout_policy::random, knowledge_sources{});
    EXPECT_EQ(without.prune(s, moves).decided, mcts::nobody);
  }
}

// White cuts the bridge: black keeps a semi connection whose key is the bridge's other cell.
// White to move must play inside every semi connection's carrier: the key is one of the cells
// kept, and every kept cell lies in the carrier of each semi connection black has.
TEST(HexConnections, MustPlayKeepsOnlyTheCellsCommonToTheOpponentsSemiConnections) {
  const hex g(7, false, playout_policy::random, connections);
  hex::state s = g.initial_state();
  g.place(s, 2, 3, 1);
  g.place(s, 4, 2, 1);
  g.place(s, 3, 3, 2);
  s.to_move = 2;
  const auto black = g.edge_connections(s, 1);
  ASSERT_FALSE(black.full);
  ASSERT_GT(black.semis, 0u);
  EXPECT_TRUE(in(black.must_play, g.at(3, 2)));
  EXPECT_TRUE(in(black.semi_carrier, black.key));
  std::vector<hex::move> moves(g.max_moves());
  moves.resize(g.legal_moves(s, moves));
  const mcts::pruned kept = g.prune(s, moves);
  EXPECT_EQ(kept.decided, mcts::nobody);
  EXPECT_LT(kept.count, moves.size());
  EXPECT_LE(kept.count, static_cast<std::size_t>(count(black.must_play)));
  for (std::size_t i = 0; i < kept.count; ++i) EXPECT_TRUE(in(black.must_play, moves[i]));
  EXPECT_NE(std::find(moves.begin(), moves.begin() + static_cast<std::ptrdiff_t>(kept.count),
                      g.at(3, 2)),
            moves.begin() + static_cast<std::ptrdiff_t>(kept.count));
  // Black to move plays the key and wins.
  s.to_move = 1;
  moves.resize(g.max_moves());
  moves.resize(g.legal_moves(s, moves));
  const mcts::pruned wins = g.prune(s, moves);
  EXPECT_EQ(wins.decided, 1);
  EXPECT_EQ(wins.count, 1u);
  EXPECT_EQ(moves[0], black.key);
}

}  // namespace
}  // namespace seriema::hex

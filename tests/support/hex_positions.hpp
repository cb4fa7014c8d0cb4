// Hand-made Hex positions and exhaustive answers for the MCTS tests: stones placed by
// coordinates, the same problem for the other player, legal moves, whether the player to move
// wins by force on a tiny board, and which move the pattern priors like best.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <hex.hpp>
#include <initializer_list>
#include <utility>
#include <vector>

namespace seriema::test {

using hex_game = seriema::hex::hex;

/// Player 1's stones, player 2's stones (row, column), and the player to move.
inline hex_game::state hex_position(const hex_game& g,
                                    std::initializer_list<std::pair<int, int>> black,
                                    std::initializer_list<std::pair<int, int>> white,
                                    mcts::player to_move) {
  hex_game::state s = g.initial_state();
  for (auto [r, c] : black) EXPECT_TRUE(g.place(s, r, c, 1));
  for (auto [r, c] : white) EXPECT_TRUE(g.place(s, r, c, 2));
  s.to_move = to_move;
  s.moves_played = static_cast<std::uint16_t>(black.size() + white.size());
  return s;
}

/// The same problem for the other player: mirrored in the main diagonal, colours exchanged
/// (the neighbour rule is symmetric under the mirror; top-bottom becomes left-right).
inline hex_game::state hex_mirrored(const hex_game& g, const hex_game::state& s) {
  hex_game::state m = g.initial_state();
  for (int r = 0; r < g.size(); ++r) {
    for (int c = 0; c < g.size(); ++c) {
      if (const mcts::player p = g.cell(s, r, c); p != mcts::nobody) {
        g.place(m, c, r, mcts::opponent(p));
      }
    }
  }
  m.to_move = mcts::opponent(s.to_move);
  m.moves_played = s.moves_played;
  return m;
}

/// Whether m's prior weight in s is the largest of s's legal moves' (hex::priors; ties count).
inline bool is_highest_prior(const hex_game& g, const hex_game::state& s, hex_game::move m) {
  std::vector<hex_game::move> moves(g.max_moves());
  moves.resize(g.legal_moves(s, moves));
  std::vector<float> weights(moves.size());
  g.priors(s, moves, weights);
  const float best = *std::max_element(weights.begin(), weights.end());
  const auto at = std::find(moves.begin(), moves.end(), m);
  return at != moves.end() && weights[static_cast<std::size_t>(at - moves.begin())] == best;
}

/// 5x5, black to move with a win in three: (2, 2) threatens (3, 1) and (3, 2), and (3, 1)
/// threatens (2, 1) and (2, 2); white can block only one (the solver tests' double threat).
inline hex_game::state hex_win_in_three(const hex_game& g) {
  return hex_position(g, {{0, 2}, {1, 2}, {4, 1}, {4, 2}}, {{0, 0}, {1, 0}, {4, 4}}, 1);
}

inline std::vector<hex_game::move> hex_legal(const hex_game& g, const hex_game::state& s) {
  std::vector<hex_game::move> moves(g.max_moves());
  moves.resize(g.legal_moves(s, moves));
  return moves;
}

/// The moves of s after which `who` has won, as if `who` were to move in s.
inline std::vector<hex_game::move> hex_winning_moves(const hex_game& g, hex_game::state s,
                                                     mcts::player who) {
  s.to_move = who;
  std::vector<hex_game::move> wins;
  for (const hex_game::move m : hex_legal(g, s)) {
    hex_game::state after = s;
    g.apply(after, m);
    if (g.winner(after) == who) wins.push_back(m);
  }
  return wins;
}

/// Exhaustive search (tiny boards only): whether the player to move wins with best play.
inline bool mover_wins_by_force(const hex_game& g, const hex_game::state& s) {
  for (const hex_game::move m : hex_legal(g, s)) {
    hex_game::state next = s;
    g.apply(next, m);
    const mcts::player w = g.winner(next);
    if (w == s.to_move || (w == mcts::nobody && !mover_wins_by_force(g, next))) return true;
  }
  return false;
}

/// Every position of a `size` board with at most two stones and no winner.
inline std::vector<hex_game::state> openings_up_to_two_stones(const hex_game& g) {
  std::vector<hex_game::state> positions{g.initial_state()};
  for (const hex_game::move first : hex_legal(g, g.initial_state())) {
    hex_game::state one = g.initial_state();
    g.apply(one, first);
    positions.push_back(one);
    for (const hex_game::move second : hex_legal(g, one)) {
      hex_game::state two = one;
      g.apply(two, second);
      if (g.winner(two) == mcts::nobody) positions.push_back(two);
    }
  }
  return positions;
}

}  // namespace seriema::test

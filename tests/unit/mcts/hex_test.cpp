// Tests of the Hex game specification: winner detection against a plain breadth-first search,
// hand-made chains, the playout's distribution, move names, legal moves, swap, render, hash,
// every cell and row of every size, and seeded results pinned across the stones' layout.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <deque>
#include <hex.hpp>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace seriema::hex {
namespace {

using mcts::nobody;
using mcts::opponent;

// Breadth-first search over cells with the neighbour rule written out, independent of the
// bitboards: whether `who` joins their two edges.
bool bfs_connects(const hex& g, const hex::state& s, player who) {
  const int n = g.size();
  std::vector<char> seen(static_cast<std::size_t>(n * n), 0);
  std::deque<std::pair<int, int>> queue;
  for (int i = 0; i < n; ++i) {
    const int r = who == 1 ? 0 : i;
    const int c = who == 1 ? i : 0;
    if (g.cell(s, r, c) == who) {
      seen[static_cast<std::size_t>(r * n + c)] = 1;
      queue.emplace_back(r, c);
    }
  }
  constexpr int dr[6] = {0, 0, -1, 1, -1, 1};
  constexpr int dc[6] = {-1, 1, 0, 0, 1, -1};
  while (!queue.empty()) {
    const auto [r, c] = queue.front();
    queue.pop_front();
    if ((who == 1 ? r : c) == n - 1) return true;
    for (int d = 0; d < 6; ++d) {
      const int nr = r + dr[d];
      const int nc = c + dc[d];
      if (nr < 0 || nr >= n || nc < 0 || nc >= n) continue;
      const auto index = static_cast<std::size_t>(nr * n + nc);
      if (seen[index] || g.cell(s, nr, nc) != who) continue;
      seen[index] = 1;
      queue.emplace_back(nr, nc);
    }
  }
  return false;
}

player bfs_winner(const hex& g, const hex::state& s) {
  if (bfs_connects(g, s, 1)) return 1;
  if (bfs_connects(g, s, 2)) return 2;
  return nobody;
}

// `stones` random cells given alternately to players 1 and 2, with the turn that follows.
hex::state random_position(const hex& g, std::mt19937_64& rng, int stones) {
  std::vector<std::pair<int, int>> cells;
  for (int r = 0; r < g.size(); ++r) {
    for (int c = 0; c < g.size(); ++c) cells.emplace_back(r, c);
  }
  std::shuffle(cells.begin(), cells.end(), rng);
  hex::state s = g.initial_state();
  player who = 1;
  for (int i = 0; i < stones; ++i) {
    EXPECT_TRUE(g.place(s, cells[static_cast<std::size_t>(i)].first,
                        cells[static_cast<std::size_t>(i)].second, who));
    who = opponent(who);
  }
  s.to_move = who;
  s.moves_played = static_cast<std::uint16_t>(stones);
  return s;
}

std::size_t legal_count(const hex& g, const hex::state& s) {
  std::vector<hex::move> moves(g.max_moves());
  return g.legal_moves(s, moves);
}

TEST(HexTest, WinnerOfFullBoardsMatchesBreadthFirstSearch) {
  std::mt19937_64 rng(2024);
  mcts::random playout_rng(7);
  int boards = 0;
  for (int n : {2, 5, 7, 11, 13, 19}) {
    const hex g(n);
    int first_wins = 0;
    for (int i = 0; i < 1700; ++i, ++boards) {
      const hex::state s = random_position(g, rng, n * n);
      const player expected = bfs_winner(g, s);
      ASSERT_NE(expected, nobody) << "a full board has a winner";
      ASSERT_EQ(g.winner(s), expected) << "size " << n << "\n" << g.render(s);
      ASSERT_EQ(g.connected(s, 1), expected == 1);
      ASSERT_EQ(g.connected(s, 2), expected == 2);
      // Nothing left to fill: the playout's check alone decides.
      ASSERT_EQ(g.playout(s, playout_rng), expected);
      ASSERT_EQ(legal_count(g, s), 0u);
      first_wins += expected == 1;
    }
    // Both outcomes occur, so both branches of the comparison were exercised.
    EXPECT_GT(first_wins, 0) << "size " << n;
    EXPECT_LT(first_wins, 1700) << "size " << n;
  }
  EXPECT_GE(boards, 10'000);
}

TEST(HexTest, ConnectedOnPartialBoardsMatchesBreadthFirstSearch) {
  std::mt19937_64 rng(99);
  mcts::random playout_rng(3);
  for (int n : {2, 5, 7, 11, 13, 19}) {
    const hex g(n);
    int finished = 0;
    for (int i = 0; i < 1000; ++i) {
      const int stones = static_cast<int>(rng() % static_cast<std::uint64_t>(n * n + 1));
      const hex::state s = random_position(g, rng, stones);
      const bool first = bfs_connects(g, s, 1);
      const bool second = bfs_connects(g, s, 2);
      ASSERT_FALSE(first && second);
      ASSERT_EQ(g.connected(s, 1), first) << "size " << n << "\n" << g.render(s);
      ASSERT_EQ(g.connected(s, 2), second) << "size " << n << "\n" << g.render(s);
      const player expected = first ? 1 : second ? 2 : nobody;
      ASSERT_EQ(g.winner(s), expected);
      if (expected != nobody) {
        ++finished;
        ASSERT_EQ(legal_count(g, s), 0u);
        // A finished position's winner survives every filling.
        ASSERT_EQ(g.playout(s, playout_rng), expected);
      } else {
        ASSERT_EQ(legal_count(g, s), static_cast<std::size_t>(n * n - stones));
        const player p = g.playout(s, playout_rng);
        ASSERT_TRUE(p == 1 || p == 2);
      }
    }
    EXPECT_GT(finished, 0) << "size " << n;
  }
}

// The probability that player 1 wins when the empty cells of `s` are shared by alternate turns,
// by enumerating player 1's share (every split is equally likely).
double exact_first_win_probability(const hex& g, const hex::state& s) {
  std::vector<std::pair<int, int>> empty;
  for (int r = 0; r < g.size(); ++r) {
    for (int c = 0; c < g.size(); ++c) {
      if (g.cell(s, r, c) == nobody) empty.emplace_back(r, c);
    }
  }
  const int count = static_cast<int>(empty.size());
  const int share = s.to_move == 1 ? (count + 1) / 2 : count / 2;
  int splits = 0;
  int wins = 0;
  for (std::uint32_t subset = 0; subset < (1u << count); ++subset) {
    if (std::popcount(subset) != share) continue;
    hex::state full = s;
    for (int i = 0; i < count; ++i) {
      const player who = (subset >> i & 1) ? 1 : 2;
      g.place(full, empty[static_cast<std::size_t>(i)].first,
              empty[static_cast<std::size_t>(i)].second, who);
    }
    ++splits;
    wins += bfs_winner(g, full) == 1;
  }
  return static_cast<double>(wins) / splits;
}

TEST(HexTest, PlayoutsFollowTheAlternatingFillDistribution) {
  const hex small(3);
  const hex four(4);
  hex::state partial_position = four.initial_state();
  four.place(partial_position, 0, 1, 1);
  four.place(partial_position, 1, 1, 2);
  four.place(partial_position, 2, 2, 1);
  four.place(partial_position, 3, 0, 2);
  four.place(partial_position, 1, 2, 1);
  four.place(partial_position, 0, 3, 2);
  partial_position.to_move = 1;
  hex::state odd_position = partial_position;
  four.place(odd_position, 2, 1, 1);
  odd_position.to_move = 2;  // 9 empty cells: player 2 gets 5 of them

  const std::pair<const hex*, hex::state> cases[] = {
      {&small, small.initial_state()}, {&four, partial_position}, {&four, odd_position}};
  mcts::random rng(11);
  for (const auto& [g, s] : cases) {
    const double expected = exact_first_win_probability(*g, s);
    constexpr int playouts = 200'000;
    int wins = 0;
    for (int i = 0; i < playouts; ++i) wins += g->playout(s, rng) == 1;
    const double observed = static_cast<double>(wins) / playouts;
    // Ten standard deviations at most 0.011: a wrong share moves it further.
    EXPECT_NEAR(observed, expected, 0.011) << g->render(s);
  }
}

constexpr player unrecorded = 0xee;  // the sentinel a recording playout must not overwrite

// The position `s` with every cell `played_by` names given to its player.
hex::state recorded_board(const hex& g, const hex::state& s, const std::vector<player>& played_by) {
  hex::state full = s;
  for (int r = 0; r < g.size(); ++r) {
    for (int c = 0; c < g.size(); ++c) {
      const player who = played_by[g.move_index(g.at(r, c))];
      if (who != unrecorded) g.place(full, r, c, who);
    }
  }
  return full;
}

// Checks one recording playout of `s`: every empty cell recorded once with 1 or 2, occupied
// cells and the swap's entry untouched, player 1's count the alternating share, the recorded
// board's winner the playout's.
void expect_sound_record(const hex& g, const hex::state& s, const std::vector<player>& played_by,
                         player winner) {
  int empty = 0;
  int black = 0;
  for (int r = 0; r < g.size(); ++r) {
    for (int c = 0; c < g.size(); ++c) {
      const player who = played_by[g.move_index(g.at(r, c))];
      if (g.cell(s, r, c) != nobody) {
        ASSERT_EQ(who, unrecorded) << "occupied cell " << g.move_name(g.at(r, c)) << " recorded";
        continue;
      }
      ++empty;
      ASSERT_TRUE(who == 1 || who == 2) << "empty cell " << g.move_name(g.at(r, c)) << ": "
                                        << int{who};
      black += who == 1;
    }
  }
  if (g.swap_rule()) {
    ASSERT_EQ(played_by[g.move_index(hex::swap_move)], unrecorded);
  }
  ASSERT_EQ(black, s.to_move == 1 ? (empty + 1) / 2 : empty / 2);
  const hex::state full = recorded_board(g, s, played_by);
  ASSERT_EQ(bfs_winner(g, full), winner) << g.render(full);
  ASSERT_EQ(g.connected(full, winner), true);
}

TEST(HexTest, MoveIndexIsDense) {
  for (const bool swap : {false, true}) {
    const hex g(7, swap);
    std::set<std::size_t> indices;
    for (int r = 0; r < 7; ++r) {
      for (int c = 0; c < 7; ++c) indices.insert(g.move_index(g.at(r, c)));
    }
    if (swap) indices.insert(g.move_index(hex::swap_move));
    EXPECT_EQ(indices.size(), g.max_moves());
    EXPECT_EQ(*indices.rbegin(), g.max_moves() - 1);
    EXPECT_EQ(g.move_index(g.at(3, 5)), 3u * 7 + 5);
  }
}

// The recording playout is the plain one plus a record: with equal generators, equal winners and
// equal draws (the generators agree afterwards), on many positions of several sizes, under both
// playout policies. Half the positions end with a move (last_move set, for the bridges policy's
// first answer). Returns the number of playouts compared.
int compare_recording_with_plain(playout_policy policy, std::mt19937_64& positions) {
  int playouts = 0;
  for (int n : {2, 3, 5, 7, 11, 13, 19}) {
    const hex g(n, /*swap_rule=*/n % 2 == 1, policy);
    for (int i = 0; i < 400; ++i, ++playouts) {
      const int stones = static_cast<int>(positions() % static_cast<std::uint64_t>(n * n + 1));
      hex::state s = random_position(g, positions, stones);
      if (i % 2 == 1 && g.winner(s) == nobody) {
        std::vector<hex::move> legal(g.max_moves());
        legal.resize(g.legal_moves(s, legal));
        g.apply(s, legal[positions() % legal.size()]);
      }
      mcts::random plain(1000 + static_cast<std::uint64_t>(playouts));
      mcts::random recording(1000 + static_cast<std::uint64_t>(playouts));
      std::vector<player> played_by(g.max_moves(), unrecorded);
      const player winner = g.playout(s, plain);
      EXPECT_EQ(g.playout(s, recording, played_by), winner) << g.render(s);
      EXPECT_EQ(plain(), recording()) << "the two playouts drew differently\n" << g.render(s);
      expect_sound_record(g, s, played_by, winner);
      if (::testing::Test::HasFailure()) return playouts;
    }
  }
  return playouts;
}

TEST(HexTest, RecordingPlayoutPlaysAsThePlainOne) {
  std::mt19937_64 positions(515);
  EXPECT_EQ(compare_recording_with_plain(playout_policy::random, positions), 2800);
  EXPECT_EQ(compare_recording_with_plain(playout_policy::bridges, positions), 2800);
  EXPECT_EQ(compare_recording_with_plain(playout_policy::patterns, positions), 2800);
}

// On a full board the playout fills nothing: the record stays empty and the winner is the
// board's.
TEST(HexTest, RecordingPlayoutOfAFullBoardRecordsNothing) {
  std::mt19937_64 positions(77);
  mcts::random rng(5);
  const hex g(9);
  for (int i = 0; i < 200; ++i) {
    const hex::state s = random_position(g, positions, 81);
    std::vector<player> played_by(g.max_moves(), unrecorded);
    ASSERT_EQ(g.playout(s, rng, played_by), bfs_winner(g, s));
    ASSERT_EQ(std::count(played_by.begin(), played_by.end(), unrecorded),
              static_cast<std::ptrdiff_t>(played_by.size()));
  }
}

// How often, in `playouts` recording playouts of `s`, `who` got `cell`, and every record sound.
int times_played(const hex& g, const hex::state& s, hex::move cell, player who, int playouts,
                 mcts::random& rng) {
  int times = 0;
  for (int i = 0; i < playouts; ++i) {
    std::vector<player> played_by(g.max_moves(), unrecorded);
    const player winner = g.playout(s, rng, played_by);
    expect_sound_record(g, s, played_by, winner);
    times += played_by[g.move_index(cell)] == who;
  }
  return times;
}

TEST(HexTest, PlayoutPolicyIsCarriedAndRandomByDefault) {
  EXPECT_EQ(hex().policy(), playout_policy::random);
  EXPECT_EQ(hex(7, true, playout_policy::bridges).policy(), playout_policy::bridges);
  hex::state s = hex().initial_state();
  EXPECT_EQ(s.last_move, hex::no_move);
  hex().apply(s, hex().at(2, 3));
  EXPECT_EQ(s.last_move, hex().at(2, 3));
  hex().place(s, 4, 4, 1);
  EXPECT_EQ(s.last_move, hex::no_move);  // a set-up stone is no move to answer
}

// Black's bridge b2-c3 on 7x7 (carrier c2, b3); white's last tree move c2 intrudes, black is to
// move: the bridges playout's first move is black's b3, every time. The random policy gives b3
// to white sometimes (the test can fail).
TEST(HexTest, BridgesPlayoutAnswersTheLastTreeMove) {
  for (const playout_policy policy : {playout_policy::random, playout_policy::bridges}) {
    const hex g(7, false, policy);
    hex::state s = g.initial_state();
    g.place(s, 1, 1, 1);
    g.place(s, 2, 2, 1);
    g.place(s, 5, 5, 2);
    s.to_move = 2;
    g.apply(s, *g.parse_cell("c2"));  // white intrudes
    ASSERT_EQ(s.to_move, 1);
    mcts::random rng(31);
    const int black_b3 = times_played(g, s, *g.parse_cell("b3"), 1, 1000, rng);
    if (policy == playout_policy::bridges) {
      EXPECT_EQ(black_b3, 1000);
    } else {
      EXPECT_GT(black_b3, 300);
      EXPECT_LT(black_b3, 800);
    }
  }
}

// An intrusion made during the playout is answered. 3x3, black to move, no move to answer yet:
//   X . O      black's bridge a1-b2 has the carrier b1, a2; white's a3 and c1 leave no other
//    . X .     black bridge through b1 or a2, so whichever of them white takes, black takes the
//     O . .    other at once. White never gets both (the random policy: 1 split in 10).
TEST(HexTest, BridgesPlayoutAnswersIntrusionsDuringThePlayout) {
  for (const playout_policy policy : {playout_policy::random, playout_policy::bridges}) {
    const hex g(3, false, policy);
    hex::state s = g.initial_state();
    g.place(s, 0, 0, 1);
    g.place(s, 1, 1, 1);
    g.place(s, 0, 2, 2);
    g.place(s, 2, 0, 2);
    s.to_move = 1;
    mcts::random rng(8);
    int white_both = 0;
    for (int i = 0; i < 1000; ++i) {
      std::vector<player> played_by(g.max_moves(), unrecorded);
      const player winner = g.playout(s, rng, played_by);
      expect_sound_record(g, s, played_by, winner);
      white_both += played_by[g.move_index(g.at(0, 1))] == 2 &&
                    played_by[g.move_index(g.at(1, 0))] == 2;
    }
    if (policy == playout_policy::bridges) {
      EXPECT_EQ(white_both, 0);
    } else {
      EXPECT_GT(white_both, 50);
      EXPECT_LT(white_both, 150);
    }
  }
}

// The patterns playout draws each move by the gammas the priors give: with two empty cells the
// mover takes each with its prior's share of the two (within 4 standard errors over 20 000
// playouts), for positions after a move and after a stone set up by hand.
TEST(HexTest, PatternsPlayoutDrawsByThePriorsWeights) {
  const hex g(5, false, playout_policy::patterns);
  std::mt19937_64 positions(46);
  int checked = 0;
  for (int attempt = 0; attempt < 400 && checked < 6; ++attempt) {
    // Half the positions end with a move (the playout's first draw weighs its place next to
    // it, as the priors do), half with a stone set up by hand (no move before).
    hex::state s = random_position(g, positions, attempt % 2 == 0 ? 23 : 22);
    if (attempt % 2 == 1) {
      std::vector<hex::move> legal(g.max_moves());
      legal.resize(g.legal_moves(s, legal));
      if (legal.empty()) continue;
      g.apply(s, legal[positions() % legal.size()]);
    }
    std::vector<hex::move> two(g.max_moves());
    two.resize(g.legal_moves(s, two));
    if (two.size() != 2 || g.winner(s) != nobody) continue;
    std::vector<float> weights(2);
    g.priors(s, two, weights);
    const double share = weights[0] / (weights[0] + weights[1]);
    if (share > 0.4 && share < 0.6) continue;  // a position where the gammas differ
    mcts::random rng(static_cast<std::uint64_t>(attempt));
    constexpr int playouts = 20000;
    const int first = times_played(g, s, two[0], s.to_move, playouts, rng);
    const double error = std::sqrt(share * (1 - share) / playouts);
    EXPECT_NEAR(static_cast<double>(first) / playouts, share, 4 * error) << g.render(s);
    ++checked;
  }
  EXPECT_EQ(checked, 6);
}

// And the draws after the first, which see the weights a move changed: with three empty cells
// the opponent's one cell is its draw over the two the mover left, weighed on the board after
// the mover's first (new rings, and places next to that move). P(opponent gets c) = the sum over
// first moves m other than c of P(m) times c's share after m, each from priors() (20 000
// playouts a position, 4 standard errors).
TEST(HexTest, PatternsPlayoutDrawsLaterMovesByTheUpdatedWeights) {
  const hex g(5, false, playout_policy::patterns);
  std::mt19937_64 positions(47);
  int checked = 0;
  for (int attempt = 0; attempt < 400 && checked < 4; ++attempt) {
    const hex::state s = random_position(g, positions, 22);
    std::vector<hex::move> three(g.max_moves());
    three.resize(g.legal_moves(s, three));
    if (three.size() != 3 || g.winner(s) != nobody) continue;
    std::vector<float> first(3);
    g.priors(s, three, first);
    const double first_sum = first[0] + first[1] + first[2];
    std::array<double, 3> expected{};
    for (std::size_t m = 0; m < 3; ++m) {
      hex::state after = s;
      g.apply(after, three[m]);
      const std::array<std::size_t, 2> others = {(m + 1) % 3, (m + 2) % 3};
      const std::vector<hex::move> left = {three[others[0]], three[others[1]]};
      std::vector<float> second(2);
      g.priors(after, left, second);
      for (std::size_t k = 0; k < 2; ++k) {
        expected[others[k]] += first[m] / first_sum * second[k] / (second[0] + second[1]);
      }
    }
    mcts::random rng(static_cast<std::uint64_t>(attempt));
    constexpr int playouts = 20000;
    for (std::size_t c = 0; c < 3; ++c) {
      const int got = times_played(g, s, three[c], opponent(s.to_move), playouts, rng);
      const double error = std::sqrt(expected[c] * (1 - expected[c]) / playouts);
      EXPECT_NEAR(static_cast<double>(got) / playouts, expected[c], 4 * error)
          << g.move_name(three[c]) << "\n" << g.render(s);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

TEST(HexTest, AntiDiagonalJoinsTopAndBottomMainDiagonalDoesNot) {
  for (int n = hex::min_size; n <= hex::max_size; ++n) {
    const hex g(n);
    hex::state anti = g.initial_state();
    hex::state main = g.initial_state();
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(g.place(anti, r, n - 1 - r, 1));
      ASSERT_TRUE(g.place(main, r, r, 1));
    }
    EXPECT_TRUE(g.connected(anti, 1)) << n;
    EXPECT_EQ(g.winner(anti), 1) << n;
    EXPECT_FALSE(g.connected(main, 1)) << n;
    EXPECT_EQ(g.winner(main), nobody) << n;
  }
}

TEST(HexTest, RowJoinsLeftAndRightForPlayerTwoOnly) {
  for (int n = hex::min_size; n <= hex::max_size; ++n) {
    const hex g(n);
    const int row = n / 2;
    hex::state second = g.initial_state();
    hex::state first = g.initial_state();
    for (int c = 0; c < n; ++c) {
      ASSERT_TRUE(g.place(second, row, c, 2));
      ASSERT_TRUE(g.place(first, row, c, 1));
    }
    EXPECT_TRUE(g.connected(second, 2)) << n;
    EXPECT_EQ(g.winner(second), 2) << n;
    EXPECT_FALSE(g.connected(first, 1)) << n;
    EXPECT_EQ(g.winner(first), nobody) << n;
  }
}

// A chain that goes down, back up and down again: the fill needs several sweeps.
TEST(HexTest, WindingChainNeedsUpwardSweeps) {
  const hex g(7);
  hex::state s = g.initial_state();
  for (int r = 0; r <= 5; ++r) g.place(s, r, 0, 1);
  g.place(s, 5, 1, 1);
  for (int r = 5; r >= 1; --r) g.place(s, r, 2, 1);
  g.place(s, 1, 3, 1);
  for (int r = 1; r <= 6; ++r) g.place(s, r, 4, 1);
  ASSERT_TRUE(bfs_connects(g, s, 1));
  EXPECT_TRUE(g.connected(s, 1));
  hex::state cut = g.initial_state();  // the chain without (3, 2), its way up
  for (int r = 0; r < 7; ++r) {
    for (int c = 0; c < 7; ++c) {
      if (g.cell(s, r, c) == 1 && (r != 3 || c != 2)) g.place(cut, r, c, 1);
    }
  }
  ASSERT_FALSE(bfs_connects(g, cut, 1));
  EXPECT_FALSE(g.connected(cut, 1));

  // The same chain mirrored in the main diagonal, for player 2.
  hex::state mirrored = g.initial_state();
  for (int r = 0; r < 7; ++r) {
    for (int c = 0; c < 7; ++c) {
      if (g.cell(s, r, c) == 1) g.place(mirrored, c, r, 2);
    }
  }
  EXPECT_TRUE(g.connected(mirrored, 2));
  EXPECT_FALSE(g.connected(mirrored, 1));
}

TEST(HexTest, MoveNames) {
  const hex g19(19);
  EXPECT_EQ(g19.parse_cell("a1"), g19.at(0, 0));
  EXPECT_EQ(g19.at(0, 0), 0);
  EXPECT_EQ(g19.parse_cell("b3"), g19.at(2, 1));
  EXPECT_EQ(g19.move_name(g19.at(2, 1)), "b3");
  EXPECT_EQ(g19.move_name(g19.at(18, 18)), "s19");
  for (int r = 0; r < 19; ++r) {
    for (int c = 0; c < 19; ++c) {
      const hex::move m = g19.at(r, c);
      const std::string name = g19.move_name(m);
      EXPECT_EQ(g19.parse_cell(name), m) << name;
      std::string upper = name;
      upper[0] = static_cast<char>(upper[0] - 'a' + 'A');
      EXPECT_EQ(g19.parse_cell(upper), m) << upper;
    }
  }
  for (const char* bad :
       {"", "a", "a0", "a20", "a01", "1a", "t1", "a1x", " a1", "a1 ", "-1", "a-1"}) {
    EXPECT_EQ(g19.parse_cell(bad), std::nullopt) << '"' << bad << '"';
  }
  const hex g11(11);
  EXPECT_EQ(g11.parse_cell("k11"), g11.at(10, 10));
  for (const char* bad : {"t1", "k12", "l1", "a1x", "a0"}) {
    EXPECT_EQ(g11.parse_cell(bad), std::nullopt) << bad;
  }
}

TEST(HexTest, ParseMoveAcceptsOnlyLegalMoves) {
  const hex g(5);
  hex::state s = g.initial_state();
  ASSERT_EQ(g.parse_move(s, "C3"), g.at(2, 2));
  g.apply(s, g.at(2, 2));
  EXPECT_EQ(g.parse_move(s, "c3"), std::nullopt);  // occupied
  EXPECT_EQ(g.parse_move(s, "c4"), g.at(3, 2));
  EXPECT_EQ(g.parse_move(s, "swap"), std::nullopt);  // no swap rule
  EXPECT_EQ(g.parse_move(s, "f1"), std::nullopt);
  // Once someone has won, nothing is legal.
  hex::state won = g.initial_state();
  for (int r = 0; r < 5; ++r) g.place(won, r, 0, 1);
  won.to_move = 2;
  EXPECT_EQ(g.parse_move(won, "e5"), std::nullopt);
}

TEST(HexTest, RandomGamesKeepTheInvariants) {
  std::mt19937_64 rng(5);
  for (int n : {2, 3, 6, 11}) {
    const hex g(n);
    EXPECT_EQ(g.max_moves(), static_cast<std::size_t>(n * n));
    for (int game = 0; game < 50; ++game) {
      hex::state s = g.initial_state();
      std::vector<hex::move> moves(g.max_moves());
      for (int played = 0;; ++played) {
        const std::size_t count = g.legal_moves(s, moves);
        ASSERT_EQ(s.moves_played, played);
        ASSERT_EQ(g.to_move(s), played % 2 == 0 ? 1 : 2);
        if (count == 0) {
          ASSERT_NE(g.winner(s), nobody);
          ASSERT_EQ(g.winner(s), bfs_winner(g, s));
          // The last player to move won.
          ASSERT_EQ(g.winner(s), opponent(g.to_move(s)));
          break;
        }
        ASSERT_EQ(g.winner(s), nobody);
        ASSERT_EQ(count, static_cast<std::size_t>(n * n - played));
        const std::set<hex::move> distinct(moves.begin(),
                                           moves.begin() + static_cast<std::ptrdiff_t>(count));
        ASSERT_EQ(distinct.size(), count);
        const hex::move m = moves[rng() % count];
        ASSERT_EQ(g.cell(s, m / n, m % n), nobody);
        g.apply(s, m);
        ASSERT_EQ(g.cell(s, m / n, m % n), played % 2 == 0 ? 1 : 2);
      }
    }
  }
}

TEST(HexTest, SwapRule) {
  const hex g(5, true);
  EXPECT_TRUE(g.swap_rule());
  EXPECT_EQ(g.max_moves(), 26u);
  std::vector<hex::move> moves(g.max_moves());
  hex::state s = g.initial_state();
  ASSERT_EQ(g.legal_moves(s, moves), 25u);  // no swap on the first move
  EXPECT_EQ(g.parse_move(s, "swap"), std::nullopt);

  g.apply(s, g.at(1, 3));  // d2
  ASSERT_EQ(g.legal_moves(s, moves), 25u);
  EXPECT_EQ(moves[24], hex::swap_move);
  EXPECT_EQ(std::count(moves.begin(), moves.begin() + 25, hex::swap_move), 1);
  EXPECT_EQ(g.parse_move(s, "swap"), hex::swap_move);
  EXPECT_EQ(g.parse_move(s, "Swap-Pieces"), hex::swap_move);
  EXPECT_EQ(g.move_name(hex::swap_move), "swap-pieces");

  hex::state swapped = s;
  g.apply(swapped, hex::swap_move);
  EXPECT_EQ(g.cell(swapped, 1, 3), nobody);
  EXPECT_EQ(g.cell(swapped, 3, 1), 2);  // the mirrored cell, b4
  EXPECT_EQ(g.to_move(swapped), 1);
  EXPECT_EQ(swapped.moves_played, 2);
  EXPECT_TRUE(swapped.swapped);
  ASSERT_EQ(g.legal_moves(swapped, moves), 24u);
  EXPECT_EQ(std::count(moves.begin(), moves.begin() + 24, hex::swap_move), 0);
  EXPECT_EQ(g.parse_move(swapped, "swap"), std::nullopt);

  // A stone instead of the swap: the swap is gone for good.
  hex::state answered = s;
  g.apply(answered, g.at(0, 0));
  ASSERT_EQ(g.legal_moves(answered, moves), 23u);
  EXPECT_EQ(std::count(moves.begin(), moves.begin() + 23, hex::swap_move), 0);

  // Without the rule, no swap on the second move.
  const hex plain(5);
  hex::state p = plain.initial_state();
  plain.apply(p, plain.at(1, 3));
  std::vector<hex::move> plain_moves(plain.max_moves());
  ASSERT_EQ(plain.legal_moves(p, plain_moves), 24u);
  EXPECT_EQ(std::count(plain_moves.begin(), plain_moves.begin() + 24, hex::swap_move), 0);
}

TEST(HexTest, RenderShowsTheStones) {
  const hex g(3);
  hex::state s = g.initial_state();
  g.apply(s, g.at(0, 0));
  g.apply(s, g.at(1, 1));
  EXPECT_EQ(g.render(s),
            "   a b c\n"
            " 1 X . .\n"
            " 2  . O .\n"
            " 3   . . .\n");
  const hex big(11);
  hex::state b = big.initial_state();
  big.place(b, 9, 10, 2);
  const std::string text = big.render(b);
  EXPECT_NE(text.find("   a b c d e f g h i j k\n"), std::string::npos);
  // Row r is indented r spaces past the row number and its separating space.
  EXPECT_NE(text.find("\n10" + std::string(10, ' ') + ". . . . . . . . . . O\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\n11" + std::string(11, ' ') + ". . . . . . . . . . .\n"),
            std::string::npos)
      << text;
}

TEST(HexTest, BadSizesThrow) {
  for (int n : {-3, 0, 1, 20, 32}) {
    try {
      const hex g(n);
      ADD_FAILURE() << "size " << n << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()),
                "hex board size " + std::to_string(n) + ": expected 2..19");
    }
  }
  EXPECT_NO_THROW(hex(2));
  EXPECT_NO_THROW(hex(19));
  EXPECT_EQ(hex().size(), hex::default_size);
}

// Every cell of every size alone on the board: read back at its place only, counted, and the
// one cell missing from the legal moves, which come in increasing order (cells on both sides of
// a word boundary of the packed stones included: 63 and 64 on boards of 9x9 and more).
TEST(HexTest, EveryCellOfEverySizeIsItsOwnCell) {
  for (int n = hex::min_size; n <= hex::max_size; ++n) {
    const hex g(n);
    const auto cells = static_cast<std::size_t>(n * n);
    std::vector<hex::move> moves(g.max_moves());
    for (int r = 0; r < n; ++r) {
      for (int c = 0; c < n; ++c) {
        hex::state s = g.initial_state();
        ASSERT_TRUE(g.place(s, r, c, 2));
        EXPECT_FALSE(g.place(s, r, c, 1));
        int occupied = 0;
        for (int row = 0; row < n; ++row) {
          for (int column = 0; column < n; ++column) {
            if (g.cell(s, row, column) == nobody) continue;
            ++occupied;
            EXPECT_EQ(g.at(row, column), g.at(r, c)) << "size " << n;
          }
        }
        EXPECT_EQ(occupied, 1) << "size " << n;
        EXPECT_EQ(g.cell(s, r, c), 2);
        EXPECT_EQ(g.empty_cells(s), n * n - 1);
        ASSERT_EQ(g.legal_moves(s, moves), cells - 1);
        const auto legal_end = moves.begin() + static_cast<std::ptrdiff_t>(cells - 1);
        EXPECT_EQ(std::find(moves.begin(), legal_end, g.at(r, c)), legal_end);
        EXPECT_TRUE(std::is_sorted(moves.begin(), legal_end));
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

// At every size, a full row joins left and right for player 2 and a full column top and bottom
// for player 1; a row with one gap off the edges has that gap as player 2's only threat (rows
// straddling two words of the packed stones included).
TEST(HexTest, FullRowsAndColumnsConnectAtEverySize) {
  for (int n = hex::min_size; n <= hex::max_size; ++n) {
    const hex g(n);
    std::vector<hex::move> threats(g.max_moves());
    for (int i = 0; i < n; ++i) {
      const int gap_column = n > 2 ? 1 + i % (n - 2) : -1;  // none on 2x2: no column off the edges
      hex::state row = g.initial_state();
      hex::state column = g.initial_state();
      hex::state gap = g.initial_state();
      for (int j = 0; j < n; ++j) {
        g.place(row, i, j, 2);
        g.place(column, j, i, 1);
        if (j != gap_column) g.place(gap, i, j, 2);
      }
      EXPECT_EQ(g.winner(row), 2) << "size " << n << " row " << i;
      EXPECT_FALSE(g.connected(row, 1));
      EXPECT_EQ(g.winner(column), 1) << "size " << n << " column " << i;
      EXPECT_FALSE(g.connected(column, 2));
      if (gap_column < 0) continue;
      EXPECT_EQ(g.winner(gap), nobody);
      threats.resize(g.max_moves());
      threats.resize(g.threats(gap, 2, threats));
      EXPECT_EQ(threats, std::vector<hex::move>{g.at(i, gap_column)})
          << "size " << n << " row " << i;
    }
  }
}

// A digest (FNV-1a) of what seeded games show of the rules: hashes, both playouts (winners and
// records) from fixed seeds, both players' threats and the legal moves, over every position of
// 20 random games on each of nine sizes (odd ones with the swap rule).
std::uint64_t behaviour_digest(playout_policy policy) {
  std::uint64_t digest = 0xcbf29ce484222325ULL;
  const auto fold = [&digest](std::uint64_t value) {
    for (int i = 0; i < 8; ++i, value >>= 8) digest = (digest ^ (value & 0xff)) * 0x100000001b3ULL;
  };
  mcts::random choices(2026);
  for (int n : {2, 3, 5, 7, 8, 11, 13, 16, 19}) {
    const hex g(n, /*swap_rule=*/n % 2 == 1, policy);
    std::vector<hex::move> moves(g.max_moves());
    std::vector<player> played_by(g.max_moves());
    for (int game = 0; game < 20; ++game) {
      for (hex::state s = g.initial_state();;) {
        fold(g.hash(s));
        mcts::random rng(static_cast<std::uint64_t>(n * 1000 + game));
        fold(g.playout(s, rng));
        std::fill(played_by.begin(), played_by.end(), player{7});
        fold(g.playout(s, rng, played_by));
        for (const player who : played_by) fold(who);
        for (const player who : {player{1}, player{2}}) {
          moves.resize(g.max_moves());
          moves.resize(g.threats(s, who, moves));
          for (const hex::move m : moves) fold(m);
        }
        moves.resize(g.max_moves());
        moves.resize(g.legal_moves(s, moves));
        fold(moves.size());
        if (moves.empty()) break;
        g.apply(s, moves[choices.below(static_cast<std::uint32_t>(moves.size()))]);
      }
    }
  }
  return digest;
}

// The values of the code before the stones were packed (rows of 32 bits): the same seed gives
// the same playouts, the same hashes and the same move order, so searches with a seed repeat
// across that change. Change these only for a change of the rules' results that is meant.
TEST(HexTest, SeededResultsAreThoseOfTheRowLayout) {
  EXPECT_EQ(behaviour_digest(playout_policy::random), 0x404c9f2127702d41ULL);
  EXPECT_EQ(behaviour_digest(playout_policy::bridges), 0x43a9c28e3cb47be6ULL);
}

TEST(HexTest, HashIdentifiesPositions) {
  const hex g(11);
  const hex other(11);
  hex::state a = g.initial_state();
  hex::state b = g.initial_state();
  for (const char* name : {"a1", "b2", "c3"}) g.apply(a, *g.parse_cell(name));
  for (const char* name : {"c3", "b2", "a1"}) g.apply(b, *g.parse_cell(name));
  EXPECT_EQ(g.hash(a), g.hash(b));  // one position, two move orders
  EXPECT_NE(a.last_move, b.last_move);  // ... and two last moves, which the hash ignores
  EXPECT_EQ(g.hash(a), hex(11, false, playout_policy::bridges).hash(a));
  EXPECT_EQ(g.hash(a), other.hash(a));  // a fixed table: equal in every process

  std::set<std::uint64_t> hashes{g.hash(g.initial_state())};
  std::vector<hex::move> moves(g.max_moves());
  const std::size_t count = g.legal_moves(g.initial_state(), moves);
  for (std::size_t i = 0; i < count; ++i) {
    hex::state s = g.initial_state();
    g.apply(s, moves[i]);
    hashes.insert(g.hash(s));
    hex::state same_stones_other_turn = s;
    same_stones_other_turn.to_move = 1;
    hashes.insert(g.hash(same_stones_other_turn));
    hex::state other_colour = g.initial_state();
    g.place(other_colour, moves[i] / 11, moves[i] % 11, 2);
    hashes.insert(g.hash(other_colour));
  }
  EXPECT_EQ(hashes.size(), 1 + 3 * count);
  EXPECT_NE(hex(5).hash(hex(5).initial_state()), hex(7).hash(hex(7).initial_state()));
}

}  // namespace
}  // namespace seriema::hex

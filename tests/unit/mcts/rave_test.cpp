// Tests of RAVE: the all-moves-as-first record (recording, tree moves, bytes round trip), the
// blended score, the sequential engine finding a move by its AMAF statistics before trying
// every move, and the refusals (a game without recording playouts, too many playouts per leaf).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <seriema/mcts/detail/amaf.hpp>
#include <seriema/mcts/sequential.hpp>
#include <stdexcept>
#include <vector>

#include "../../support/claim_game.hpp"

namespace seriema::mcts {
namespace {

using test::claim_game;

TEST(AmafRecord, CountsWhoPlayedEachMoveAndTheirPoints) {
  const claim_game g{6};
  detail::amaf_record record;
  record.resize(g.max_moves());
  random rng(3);
  std::uint32_t wins1 = 0;
  const int games = 200;
  for (int i = 0; i < games; ++i) wins1 += record.play(g, g.initial_state(), rng) == 1 ? 1 : 0;
  for (std::size_t cell = 0; cell < 6; ++cell) {
    EXPECT_EQ(record.played_by(1, cell) + record.played_by(2, cell), std::uint32_t(games));
    EXPECT_LE(record.points_of(1, cell), 2 * record.played_by(1, cell));
  }
  // Cell 0 decides the game: its holder won every playout.
  EXPECT_EQ(record.points_of(1, 0), 2 * record.played_by(1, 0));
  EXPECT_EQ(record.points_of(2, 0), 2 * record.played_by(2, 0));
  EXPECT_EQ(record.played_by(1, 0), wins1);
  // Player 1 moves first and takes 3 of the 6 cells in every playout.
  std::uint32_t taken_by_1 = 0;
  for (std::size_t cell = 0; cell < 6; ++cell) taken_by_1 += record.played_by(1, cell);
  EXPECT_EQ(taken_by_1, 3u * games);
}

TEST(AmafRecord, ATreeMoveOverwritesItsEntryAndTheRecordTravelsAsBytes) {
  const claim_game g{4};
  detail::amaf_record record;
  record.resize(g.max_moves());
  random rng(5);
  for (int i = 0; i < 8; ++i) record.play(g, g.initial_state(), rng);
  record.play_in_tree(2, 2, 8, 10);
  EXPECT_EQ(record.played_by(2, 2), 8u);
  EXPECT_EQ(record.points_of(2, 2), 10u);
  EXPECT_EQ(record.played_by(1, 2), 0u);
  EXPECT_EQ(record.points_of(1, 2), 0u);

  detail::amaf_record copy;
  copy.resize(g.max_moves());
  ASSERT_TRUE(copy.assign(record.bytes()));
  for (std::size_t cell = 0; cell < 4; ++cell) {
    for (player p = 1; p <= 2; ++p) {
      EXPECT_EQ(copy.played_by(p, cell), record.played_by(p, cell));
      EXPECT_EQ(copy.points_of(p, cell), record.points_of(p, cell));
    }
  }
  detail::amaf_record other_size;
  other_size.resize(5);
  EXPECT_FALSE(other_size.assign(record.bytes()));
  record.clear();
  EXPECT_EQ(record.played_by(2, 2), 0u);
}

TEST(RaveScore, BlendsTowardTheVisitsAsTheyGrow) {
  const double log_n = std::log(100.0);
  EXPECT_EQ(rave_score(0, 0, 0, 0, log_n, 1.0, 1000), INFINITY);
  // Before the first visit the AMAF rate alone (plus exploration).
  EXPECT_DOUBLE_EQ(rave_score(0, 0, 9, 10, log_n, 0.0, 1000), 0.9);
  // beta = sqrt(k / (3n + k)): at n = k it is 1/2.
  EXPECT_DOUBLE_EQ(rave_score(200, 1000, 900, 1000, log_n, 0.0, 1000), 0.5 * 0.2 + 0.5 * 0.9);
  // Many visits: the move's own rate dominates.
  EXPECT_NEAR(rave_score(2e6, 1e7, 9e6, 1e7, log_n, 0.0, 1000), 0.2, 0.01);
  EXPECT_DOUBLE_EQ(rave_score(5, 10, 0, 0, log_n, 1.0, 1000), 0.5 + std::sqrt(log_n / 11));
}

// With fewer rollouts than moves, plain UCB1 can only have tried some moves once; RAVE learns
// from every playout which cell wins. Exploration 0.3: with RAVE's estimates for untried moves,
// exploration 1.0 keeps spreading the rollouts (docs/mcts.md, "RAVE").
int key_cell_found(bool rave, int seeds) {
  const claim_game g{24};
  int found = 0;
  for (int seed = 1; seed <= seeds; ++seed) {
    search_options o = test::claim_rave_options();
    o.seed = static_cast<std::uint64_t>(seed);
    o.rave = rave;
    found += sequential_search(g, g.initial_state(), o).best == 0 ? 1 : 0;
  }
  return found;
}

TEST(SequentialRave, FindsTheKeyMoveBeforeTryingEveryMove) {
  const int with_rave = key_cell_found(true, 30);
  const int without = key_cell_found(false, 30);
  EXPECT_GE(with_rave, 29) << "RAVE found cell 0 in " << with_rave << " of 30 searches";
  EXPECT_LE(without, 22) << "UCB1 alone found it " << without << " times of 30";
}

TEST(SequentialRave, FindsItForTheSecondPlayerToo) {
  const claim_game g{24};
  claim_game::state s = g.initial_state();
  g.apply(s, 5);  // player 1 took cell 5; player 2 to move
  search_options o = test::claim_rave_options();
  int found = 0;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    o.seed = seed;
    found += sequential_search(g, s, o).best == 0 ? 1 : 0;
  }
  EXPECT_GE(found, 19);
}

// claim_game without move_index or the recording playout: a game RAVE cannot serve.
struct unrecorded_game {
  claim_game g{8};
  using state = claim_game::state;
  using move = claim_game::move;
  [[nodiscard]] state initial_state() const noexcept { return g.initial_state(); }
  [[nodiscard]] player to_move(const state& s) const noexcept { return g.to_move(s); }
  [[nodiscard]] std::size_t max_moves() const noexcept { return g.max_moves(); }
  std::size_t legal_moves(const state& s, std::span<move> out) const noexcept {
    return g.legal_moves(s, out);
  }
  void apply(state& s, move m) const noexcept { g.apply(s, m); }
  [[nodiscard]] player winner(const state& s) const noexcept { return g.winner(s); }
  [[nodiscard]] player playout(const state& s, random& rng) const noexcept {
    return g.playout(s, rng);
  }
  [[nodiscard]] std::string move_name(move m) const { return g.move_name(m); }
  [[nodiscard]] std::optional<move> parse_move(const state& s, std::string_view t) const {
    return g.parse_move(s, t);
  }
  [[nodiscard]] std::string render(const state& s) const { return g.render(s); }
};
static_assert(game<unrecorded_game> && !amaf_game<unrecorded_game>);

TEST(SequentialRave, RefusesWhatItCannotCount) {
  search_options o;
  o.rollouts = 10;
  o.rave = true;
  const unrecorded_game plain;
  EXPECT_THROW(sequential_search(plain, plain.initial_state(), o), std::invalid_argument);
  o.rave = false;
  EXPECT_NO_THROW(sequential_search(plain, plain.initial_state(), o));
  const claim_game g;
  o.rave = true;
  o.playouts_per_leaf = 40000;
  EXPECT_THROW(sequential_search(g, g.initial_state(), o), std::invalid_argument);
}

}  // namespace
}  // namespace seriema::mcts

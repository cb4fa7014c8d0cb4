// Tests of the distributed search's node images (tree reuse): a node and its edge table written
// as bytes and read back keep every statistic, proof word and link, and a truncated or padded
// image is refused; detail::moves_between finds the next root up to two moves down.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <seriema/mcts/detail/carry.hpp>
#include <seriema/mcts/detail/reuse.hpp>
#include <vector>

#include "../../support/claim_game.hpp"
#include <hex.hpp>

namespace seriema::mcts {
namespace {

using seriema::hex::hex;
using node = detail::tree_node<hex>;
using table = detail::edge_table<hex>;

// A node of three edges with RAVE, solver words and priors: edge 1 lost, edge 2 winning, edge
// 0's child at a made-up address on thread 5.
struct three_edge_node {
  std::vector<std::uint64_t> storage =
      std::vector<std::uint64_t>(table::bytes(3, true, true, true) / 8);
  table& t = *table::create(storage.data(), 3, true, true, true);
  detail::child_block block;  // the links of edges 0..7
  node n;
  three_edge_node(const three_edge_node&) = delete;  // t refers into storage
  three_edge_node& operator=(const three_edge_node&) = delete;
  explicit three_edge_node(const hex& game) {
    n.state = game.initial_state();
    n.visits.store(90);
    n.winner = nobody;
    for (std::uint32_t i = 0; i < 3; ++i) {
      t.statistics()[i].store(10 * (i + 1), 7 * (i + 1));
      t.amaf()[i].store(100 + i, 50 + i);
      t.moves()[i] = static_cast<hex::move>(4 + i);
      t.priors()[i] = 0.25F * static_cast<float>(i + 1);
    }
    t.child_slot(0, [&] { return static_cast<void*>(&block); })
        ->store(detail::child_link(0x1000, 5));
    t.child_slot(1, [] { return static_cast<void*>(nullptr); })->store(detail::unstored_child);
    t.lost()[0].store(0b010);
    t.lost_count.store(1);
    t.decided.store(1);
    t.won_edge = 2;
    n.edges.store(&t);
  }
};

TEST(NodeImage, KeepsEveryStatisticProofAndLink) {
  const hex game(5);
  const three_edge_node kept(game);
  std::vector<std::byte> bytes;
  detail::write_image(kept.n, bytes);
  const auto image = detail::node_image<hex>::read(bytes);
  ASSERT_TRUE(image.has_value());
  EXPECT_EQ(image->head().state, kept.n.state);
  EXPECT_EQ(image->head().visits, 90u);
  EXPECT_EQ(image->head().count, 3u);
  EXPECT_EQ(image->head().decided, 1);
  EXPECT_EQ(image->head().won_edge, 2u);
  for (std::uint32_t i = 0; i < 3; ++i) {
    const auto e = image->edge(i);
    EXPECT_EQ(e.visits, 10u * (i + 1));
    EXPECT_EQ(e.points, 7u * (i + 1));
    EXPECT_EQ(e.amaf_visits, 100u + i);
    EXPECT_EQ(e.amaf_points, 50u + i);
    EXPECT_EQ(e.move, static_cast<hex::move>(4 + i));
    EXPECT_EQ(e.lost, i == 1 ? 1 : 0);
    EXPECT_EQ(e.prior, 0.25F * static_cast<float>(i + 1));
  }
  EXPECT_EQ(detail::child_address(image->edge(0).child), 0x1000u);
  EXPECT_EQ(detail::child_owner(image->edge(0).child), 5u);
  EXPECT_TRUE(detail::names_child(image->edge(0).child));
  EXPECT_FALSE(detail::names_child(image->edge(1).child));  // unstored_child
  EXPECT_FALSE(detail::names_child(image->edge(2).child));  // not expanded
}

TEST(NodeImage, ALeafHasNoEdgesAndABadSizeIsRefused) {
  const hex game(5);
  node leaf;
  leaf.state = game.initial_state();
  leaf.visits.store(3);
  std::vector<std::byte> bytes;
  detail::write_image(leaf, bytes);
  const auto image = detail::node_image<hex>::read(bytes);
  ASSERT_TRUE(image.has_value());
  EXPECT_EQ(image->head().count, 0u);
  EXPECT_EQ(image->head().visits, 3u);

  const three_edge_node kept(game);
  detail::write_image(kept.n, bytes);
  bytes.pop_back();
  EXPECT_FALSE(detail::node_image<hex>::read(bytes).has_value());
  bytes.resize(bytes.size() + 2);
  EXPECT_FALSE(detail::node_image<hex>::read(bytes).has_value());
  EXPECT_FALSE(detail::node_image<hex>::read({}).has_value());

  // A winning edge past the edges, or a player that does not exist, is refused too.
  three_edge_node bad(game);
  bad.t.won_edge = 3;
  detail::write_image(bad.n, bytes);
  EXPECT_FALSE(detail::node_image<hex>::read(bytes).has_value());
  bad.t.won_edge = 2;
  bad.t.decided.store(7);
  detail::write_image(bad.n, bytes);
  EXPECT_FALSE(detail::node_image<hex>::read(bytes).has_value());
}

TEST(MovesBetween, FindsTheNextRootUpToTwoMovesDown) {
  const hex game(5);
  const auto s0 = game.initial_state();
  EXPECT_EQ(detail::moves_between(game, s0, s0)->size(), 0u);
  auto s1 = s0;
  game.apply(s1, game.at(2, 2));
  EXPECT_EQ(*detail::moves_between(game, s0, s1), std::vector<hex::move>{game.at(2, 2)});
  auto s2 = s1;
  game.apply(s2, game.at(0, 4));
  EXPECT_EQ(*detail::moves_between(game, s0, s2),
            (std::vector<hex::move>{game.at(2, 2), game.at(0, 4)}));
  auto s3 = s2;
  game.apply(s3, game.at(4, 0));
  EXPECT_FALSE(detail::moves_between(game, s0, s3).has_value());  // three moves
  EXPECT_FALSE(detail::moves_between(game, s1, s0).has_value());  // not below
  EXPECT_FALSE(detail::moves_between(hex(7), hex(7).initial_state(), s1).has_value());
}

TEST(MovesBetween, RefusesReuseForStatesThatDoNotCompare) {
  static_assert(reusable_game<hex>);
  static_assert(!reusable_game<test::claim_game>);
  search_options options;
  EXPECT_NO_THROW(detail::check_reuse<test::claim_game>(options, "test"));
  options.reuse_tree = true;
  EXPECT_THROW(detail::check_reuse<test::claim_game>(options, "test"), std::invalid_argument);
  EXPECT_NO_THROW(detail::check_reuse<hex>(options, "test"));
}

}  // namespace
}  // namespace seriema::mcts

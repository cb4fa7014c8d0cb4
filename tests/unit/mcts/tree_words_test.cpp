// Tests of the distributed search's packed edge words: a link holds a child's address and its
// owner's thread id in one word and tells the protocol's other states apart; packed_counts
// holds visits and points in one word, adds them exactly, names the one add that reaches its
// rescale point (also when threads cross it together), and halving a table keeps each rate
// and the order of the visits; an edge table's arrays follow its header in one allocation,
// apart and within its size, and its links live in blocks of 8 made when first needed.
#include <gtest/gtest.h>

#include <hex.hpp>

#include <atomic>
#include <cstdint>
#include <seriema/mcts/detail/tree.hpp>
#include <set>
#include <thread>
#include <vector>

namespace seriema::mcts {
namespace {

TEST(ChildLink, HoldsAddressAndOwner) {
  const std::uint64_t address = 0x7ffd'1234'5670;  // a high user-space address, 8-aligned
  const fabric::thread_id owner = 0xfffe;
  ASSERT_TRUE(detail::fits_link(address));
  const std::uint64_t link = detail::child_link(address, owner);
  EXPECT_EQ(detail::child_address(link), address);
  EXPECT_EQ(detail::child_owner(link), owner);
  EXPECT_TRUE(detail::names_child(link));
  // Thread 0's child is still a child (its word is the bare address).
  EXPECT_TRUE(detail::names_child(detail::child_link(0x1000, 0)));
  EXPECT_EQ(detail::child_owner(detail::child_link(0x1000, 0)), 0u);
}

TEST(ChildLink, OtherStatesNameNoChild) {
  EXPECT_FALSE(detail::names_child(0));                       // not expanded
  EXPECT_FALSE(detail::names_child(1));                       // being created
  EXPECT_FALSE(detail::names_child(1 + 2 * 7));               // being created, 7 deferred
  EXPECT_FALSE(detail::names_child(detail::unstored_child));  // no room for it
  EXPECT_FALSE(detail::fits_link(std::uint64_t{1} << 48));
  EXPECT_EQ(detail::max_link_threads, 65536u);
}

TEST(PackedCounts, AddsVisitsAndPointsExactly) {
  detail::packed_counts c;
  EXPECT_FALSE(c.add(16, 0));
  c.add_points(31);
  EXPECT_FALSE(c.add(5, 9));
  const auto counts = c.load();
  EXPECT_EQ(counts.visits, 21u);
  EXPECT_EQ(counts.points, 40u);
  c.store(1000, 1999);
  EXPECT_EQ(c.load().visits, 1000u);
  EXPECT_EQ(c.load().points, 1999u);
}

TEST(PackedCounts, TheAddThatReachesTheRescalePointSaysSoOnce) {
  constexpr std::uint64_t at = detail::packed_counts::rescale_at;
  detail::packed_counts c;
  c.store(at - 10, 2 * (at - 10));
  EXPECT_FALSE(c.add(9, 18));  // at - 1
  EXPECT_TRUE(c.add(16, 32));  // crosses it
  EXPECT_FALSE(c.add(1, 2));   // already past: not again
  EXPECT_EQ(c.load().visits, at + 16);
}

TEST(PackedCounts, HalvingATableKeepsEachRateAndTheOrder) {
  constexpr std::uint64_t at = detail::packed_counts::rescale_at;
  detail::packed_counts words[3];
  words[0].store(at - 1, at);          // the most visited, half won
  words[1].store(at / 2 + 3, at / 2);  // the runner-up
  words[2].store(7, 14);
  ASSERT_TRUE(words[0].add(1, 0));
  detail::packed_counts::halve_all(words, 3);
  EXPECT_EQ(words[0].load().visits, at / 2);
  EXPECT_EQ(words[0].load().points, at / 2);
  EXPECT_EQ(words[1].load().visits, at / 4 + 2);  // (at / 2 + 3) / 2, rounded up
  EXPECT_EQ(words[1].load().points, at / 4);
  EXPECT_EQ(words[2].load().visits, 4u);
  EXPECT_EQ(words[2].load().points, 7u);
  EXPECT_GT(words[0].load().visits, words[1].load().visits);  // still the most visited
  detail::packed_counts once;
  once.store(1, 2);
  detail::packed_counts::halve_all(&once, 1);
  EXPECT_EQ(once.load().visits, 1u);  // a visited move stays visited
}

TEST(PackedCounts, ThreadsCrossingTogetherSeeOneCrossingAndLoseNoAdd) {
  constexpr std::uint64_t at = detail::packed_counts::rescale_at;
  constexpr int threads = 4;
  constexpr int adds = 2000;
  detail::packed_counts c;
  c.store(at - 100, 2 * (at - 100));
  std::atomic<int> crossings{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (int i = 0; i < adds; ++i) {
        if (c.add(1, 2)) crossings.fetch_add(1);
      }
    });
  }
  for (auto& t : pool) t.join();
  EXPECT_EQ(crossings.load(), 1);
  EXPECT_EQ(c.load().visits, at - 100 + threads * adds);
  EXPECT_EQ(c.load().points, 2 * (at - 100 + threads * adds));
}

using table = detail::edge_table<hex::hex>;

// The allocation a table's child_slot makes a block in: `block`, or none.
auto offer(detail::child_block& block) {
  return [&block] { return static_cast<void*>(&block); };
}
void* no_memory() { return nullptr; }

TEST(EdgeTable, IsTheHeaderAndElevenBytesAMove) {
  EXPECT_EQ(sizeof(table), 24u);
  EXPECT_EQ(sizeof(detail::child_block), 64u);
  // 11x11's empty board: 121 x (8 statistics + 2 move) and 16 block pointers, the moves
  // rounded up to 8.
  EXPECT_EQ(table::bytes(121, false, false), 24u + 121 * 8 + 16 * 8 + 248);
  EXPECT_EQ(table::bytes(121, true, false), 24u + 121 * 16 + 16 * 8 + 248);       // RAVE
  EXPECT_EQ(table::bytes(121, true, true), 24u + 121 * 16 + 16 * 8 + 2 * 8 + 248);  // solver
  EXPECT_EQ(table::bytes(121, false, false, true), 24u + 121 * 8 + 16 * 8 + 488 + 248);  // priors
}

TEST(EdgeTable, ArraysLieApartInsideTheAllocation) {
  for (const std::size_t count : {1, 7, 8, 9, 63, 64, 65, 121}) {
    for (const bool amaf : {false, true}) {
      for (const int words : {0, 1, 2, 3}) {  // the solver's lost bits, the priors
        const bool lost = (words & 1) != 0;
        const bool priors = (words & 2) != 0;
        const std::size_t bytes = table::bytes(count, amaf, lost, priors);
        std::vector<std::uint64_t> storage(bytes / 8 + 1, 0);
        storage.back() = 0x5eed;  // just past the table
        table& t = *table::create(storage.data(), count, amaf, lost, priors);
        std::vector<detail::child_block> blocks((count + 7) / 8);
        ASSERT_EQ(t.amaf() != nullptr, amaf);
        ASSERT_EQ(t.lost() != nullptr, lost);
        ASSERT_EQ(t.priors() != nullptr, priors);
        for (std::size_t i = 0; i < count; ++i) {
          EXPECT_EQ(t.child(i, std::memory_order_relaxed), 0u);  // no block yet
          t.statistics()[i].store(i + 1, 2 * i);
          t.child_slot(i, offer(blocks[i / 8]))->store(detail::child_link(8 * (i + 1), 3));
          if (amaf) t.amaf()[i].store(1000 + i, i);
          if (priors) t.priors()[i] = static_cast<float>(i) + 0.5F;
          t.moves()[i] = static_cast<hex::hex::move>(0xffff - i);
        }
        for (std::size_t w = 0; lost && w < (count + 63) / 64; ++w) t.lost()[w].store(~0ull);
        for (std::size_t i = 0; i < count; ++i) {
          EXPECT_EQ(t.statistics()[i].load().visits, i + 1);
          EXPECT_EQ(detail::child_address(t.child(i, std::memory_order_relaxed)), 8 * (i + 1));
          EXPECT_EQ(&t.child_word(i), &blocks[i / 8].words[i % 8]);
          if (amaf) {
            EXPECT_EQ(t.amaf()[i].load().visits, 1000 + i);
          }
          if (priors) {
            EXPECT_EQ(t.priors()[i], static_cast<float>(i) + 0.5F);
          }
          EXPECT_EQ(t.moves()[i], static_cast<hex::hex::move>(0xffff - i));
        }
        EXPECT_EQ(t.count, count);
        EXPECT_EQ(storage.back(), 0x5eedu) << count << " moves wrote past the table";
      }
    }
  }
}

TEST(EdgeTable, TheFirstBlockInstalledForAnEdgeIsKept) {
  std::vector<std::uint64_t> storage(table::bytes(16, false, false) / 8);
  table& t = *table::create(storage.data(), 16, false, false);
  detail::child_block first;
  detail::child_block second;
  EXPECT_EQ(t.child_slot(9, no_memory), nullptr);  // no block, no memory: no slot
  std::atomic<std::uint64_t>* slot = t.child_slot(9, offer(first));
  EXPECT_EQ(slot, &first.words[1]);
  EXPECT_EQ(t.child_slot(15, no_memory), &first.words[7]);  // same block: needs no memory
  EXPECT_EQ(t.child_slot(7, no_memory), nullptr);  // edges 0..7: another block, not made
  EXPECT_EQ(t.child_slot(10, offer(second)), &first.words[2]);  // a second offer: not taken
}

}  // namespace
}  // namespace seriema::mcts

// Unit tests of the incoming-memory map: grant order, selective takes, and grants from many
// threads while the owner takes (every entry seen once, in each producer's order).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <seriema/fabric/detail/incoming_memory_map.hpp>
#include <thread>
#include <vector>

namespace {

struct entry {
  int producer = 0;
  int sequence = 0;
};
using map = seriema::fabric::detail::incoming_memory_map<entry>;

TEST(IncomingMemoryMap, TakesSelectedEntriesInGrantOrderAndKeepsTheRest) {
  map m;
  for (int i = 0; i < 6; ++i) m.grant({i % 2, i});
  const auto odd = m.take([](const entry& e) { return e.producer == 1; });
  ASSERT_EQ(odd.size(), 3u);
  EXPECT_EQ(odd[0].sequence, 1);
  EXPECT_EQ(odd[1].sequence, 3);
  EXPECT_EQ(odd[2].sequence, 5);
  EXPECT_FALSE(m.in_flight());
  EXPECT_TRUE(m.take([](const entry& e) { return e.producer == 1; }).empty());
  m.grant({1, 6});
  const auto rest = m.take([](const entry&) { return true; });
  ASSERT_EQ(rest.size(), 4u);
  EXPECT_EQ(rest[0].sequence, 0);
  EXPECT_EQ(rest[3].sequence, 6);
}

TEST(IncomingMemoryMap, ConcurrentGrantsAreEachTakenOnceInProducerOrder) {
  constexpr int producers = 4;
  constexpr int per_producer = 20000;
  map m;
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      for (int i = 0; i < per_producer; ++i) m.grant({p, i});
    });
  }
  std::vector<int> next(producers, 0);
  int taken = 0;
  bool order_kept = true;
  // Take one producer's entries at a time (the others stay in the map) until all arrived, or
  // fail after a minute (an entry lost for good).
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  for (int round = 0; taken < producers * per_producer; ++round) {
    if (std::chrono::steady_clock::now() > give_up) {
      ADD_FAILURE() << "only " << taken << " grants became visible";
      break;
    }
    const int which = round % producers;
    for (const entry& e : m.take([&](const entry& x) { return x.producer == which; })) {
      order_kept = order_kept && e.sequence == next[which];
      next[which] = e.sequence + 1;
      ++taken;
    }
    if (round % 64 == 0) std::this_thread::yield();
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(order_kept) << "a producer's grants were taken out of order";
  EXPECT_EQ(taken, producers * per_producer);
  EXPECT_FALSE(m.in_flight());
  EXPECT_TRUE(m.take([](const entry&) { return true; }).empty());
}

}  // namespace

// Unit tests of the incoming-memory map: grant order, selective takes, grants from many threads
// while the owner takes (every entry seen once, in each producer's order), and batches that
// become visible whole.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <array>
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

// Producers grant batches of 1 to 4 entries while the owner takes: every take holds whole
// batches (a messenger's chunks granted together must be adopted together), in grant order.
TEST(IncomingMemoryMap, BatchesBecomeVisibleWhole) {
  constexpr int producers = 3;
  constexpr int batches_per_producer = 20000;
  // ends_batch[k]: a producer's entry k is the last of its batch (every producer grants batches
  // of sizes 1, 2, 3, 4, 1, 2, ...).
  std::vector<bool> ends_batch;
  for (int b = 0; b < batches_per_producer; ++b) {
    ends_batch.insert(ends_batch.end(), static_cast<std::size_t>(b % 4), false);
    ends_batch.push_back(true);
  }
  const long total = static_cast<long>(ends_batch.size()) * producers;
  map m;
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      int sequence = 0;
      for (int b = 0; b < batches_per_producer; ++b) {
        const std::size_t size = 1 + static_cast<std::size_t>(b % 4);
        std::array<entry, 4> batch{};
        for (std::size_t i = 0; i < size; ++i) batch[i] = {p, sequence++};
        m.grant(std::span<const entry>(batch.data(), size));
      }
    });
  }
  std::vector<int> next(producers, 0);
  bool whole = true, order_kept = true;
  long taken = 0;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  while (taken < total) {
    if (std::chrono::steady_clock::now() > give_up) {
      ADD_FAILURE() << "only " << taken << " of " << total << " entries became visible";
      break;
    }
    std::vector<int> last(producers, -1);  // each producer's last entry in this take
    for (const entry& e : m.take([](const entry&) { return true; })) {
      const auto p = static_cast<std::size_t>(e.producer);
      order_kept = order_kept && e.sequence == next[p];
      next[p] = e.sequence + 1;
      last[p] = e.sequence;
      ++taken;
    }
    for (int l : last) {
      if (l >= 0 && !ends_batch[static_cast<std::size_t>(l)]) whole = false;
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(whole) << "a take held part of a batch";
  EXPECT_TRUE(order_kept) << "a producer's grants were taken out of order";
  EXPECT_EQ(taken, total);
}

}  // namespace

// containers::map across the worker threads of one or several processes: reductions from every
// worker (checked against the sequential count), insert / insert_or_assign / erase semantics,
// visit with arguments and onward operations, string keys and values (the serialized path),
// find through futures, gather, top_k and size, and operations on a destroyed map.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <seriema/containers/containers.hpp>
#include <string>
#include <vector>

#include "support/mp_main.hpp"

using namespace seriema;
using fabric::thread_context;
using invoke::call_status;

namespace {

constexpr std::uint64_t distinct_keys = 97;
constexpr std::uint64_t updates_per_worker = 5000;

// How many times worker `t` adds to key k in the reduction test: update i goes to key
// (i * 7 + t) % distinct_keys.
std::map<std::uint64_t, std::uint64_t> expected_counts(std::uint64_t workers) {
  std::map<std::uint64_t, std::uint64_t> counts;
  for (std::uint64_t t = 0; t < workers; ++t) {
    for (std::uint64_t i = 0; i < updates_per_worker; ++i) ++counts[(i * 7 + t) % distinct_keys];
  }
  return counts;
}

// Every worker adds 1 to keys spread over every owner; after the barrier each key's value is
// the number of updates made to it anywhere, seen through find, gather, size and top_k.
TEST(ContainersMap, ReductionsFromEveryWorkerMatchTheSequentialCount) {
  test::rt().run([&](thread_context& me) {
    containers::map<std::uint64_t, std::uint64_t> counts(me);
    for (std::uint64_t i = 0; i < updates_per_worker; ++i) {
      const call_status st =
          counts.reduce((i * 7 + me.id()) % distinct_keys, 1, [](std::uint64_t a, std::uint64_t b) {
            return a + b;
          });
      ASSERT_EQ(st, call_status::ok);
    }
    counts.barrier();
    const auto expected = expected_counts(me.thread_count());
    for (const auto& [key, count] : expected) {
      if (key % me.thread_count() != me.id() % me.thread_count()) continue;  // a share each
      EXPECT_EQ(counts.find(key).get(), std::optional<std::uint64_t>(count)) << "key " << key;
    }
    EXPECT_EQ(counts.find(distinct_keys + 1).get(), std::nullopt);
    for (const auto& [key, value] : counts.local()) EXPECT_EQ(counts.owner(key), me.id());
    if (me.id() == 0) {
      EXPECT_EQ(counts.size(), distinct_keys);
      auto all = counts.gather();
      ASSERT_EQ(all.size(), distinct_keys);
      std::map<std::uint64_t, std::uint64_t> gathered(all.begin(), all.end());
      EXPECT_EQ(gathered, expected);
      auto top = counts.top_k(3);
      ASSERT_EQ(top.size(), 3u);
      std::vector<std::uint64_t> sorted;
      for (const auto& [key, count] : expected) sorted.push_back(count);
      std::sort(sorted.rbegin(), sorted.rend());
      for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(top[i].second, sorted[i]);
    }
    counts.barrier();  // nobody destroys its part while thread 0 still asks
  });
}

// insert keeps the first value, insert_or_assign replaces it, erase removes the key; one
// sender's operations to an owner apply in the order it made them.
TEST(ContainersMap, InsertAssignEraseInSenderOrder) {
  test::rt().run([&](thread_context& me) {
    containers::map<std::uint64_t, std::int64_t> m(me);
    const std::uint64_t base = 1000 * (me.id() + 1);  // keys of this worker only
    for (std::uint64_t k = base; k < base + 50; ++k) {
      ASSERT_EQ(m.insert(k, 1), call_status::ok);
      ASSERT_EQ(m.insert(k, 2), call_status::ok);  // no effect: the key is there
      if (k % 2 == 0) {
        ASSERT_EQ(m.insert_or_assign(k, 3), call_status::ok);
      }
      if (k % 5 == 0) {
        ASSERT_EQ(m.erase(k), call_status::ok);
      }
    }
    // find goes through the same channel as the updates: it sees them without a barrier.
    for (std::uint64_t k = base; k < base + 50; ++k) {
      const std::optional<std::int64_t> got = m.find(k).get();
      if (k % 5 == 0) {
        EXPECT_EQ(got, std::nullopt) << "key " << k;
      } else {
        EXPECT_EQ(got, std::optional<std::int64_t>(k % 2 == 0 ? 3 : 1)) << "key " << k;
      }
    }
    m.barrier();
  });
}

// String keys and values (serialized), visit with arguments, and a visit that makes a further
// operation from the owner (an onward insert the barrier also waits for).
TEST(ContainersMap, VisitWithArgumentsAndOnwardOperations) {
  test::rt().run([&](thread_context& me) {
    containers::map<std::string, std::string> words(me);
    const std::string mine = "worker-" + std::to_string(me.id());
    ASSERT_EQ(words.visit(mine, [](const std::string& key, std::string& value,
                                   std::string& suffix, int& times) {
                for (int i = 0; i < times; ++i) value += suffix;
                value += "@" + key;
              }, std::string("ab"), 3),
              call_status::ok);
    // The owner of `mine` records, under "seen-<id>", that it saw it (an operation made there).
    ASSERT_EQ(words.visit(mine, [](containers::map<std::string, std::string>& m,
                                   const std::string& key, std::string&) {
                (void)m.insert_or_assign("seen-" + key, key);
              }),
              call_status::ok);
    words.barrier();
    EXPECT_EQ(words.find(mine).get(), std::optional<std::string>("ababab@" + mine));
    EXPECT_EQ(words.find("seen-" + mine).get(), std::optional<std::string>(mine));
    EXPECT_EQ(words.size(), 2 * std::uint64_t{me.thread_count()});
    words.barrier();
  });
}

// An operation that reaches a map its owner destroyed is dropped and counted there, and a find
// of it fails (the owner's error comes back through the future) instead of reading another map;
// the next map made gets a new id, so late traffic of the old one cannot land in it.
TEST(ContainersMap, OperationsOnADestroyedMapAreDroppedAndCounted) {
  test::rt().run([&](thread_context& me) {
    if (me.thread_count() < 2) return;  // one worker: nothing is remote
    auto m = std::make_unique<containers::map<std::uint64_t, std::uint64_t>>(me);
    std::uint64_t key = 0;
    while (m->owner(key) % 2 == 0) ++key;  // a key owned by an odd worker
    const fabric::thread_id owner = m->owner(key);
    const bool odd = me.id() % 2 == 1;
    auto& table = containers::detail::containers_of(me);
    const std::uint64_t dropped_before = table.dropped();
    if (odd) m.reset();  // the odd workers destroy their parts
    me.quiesce();
    if (!odd) {
      ASSERT_EQ(m->insert(key, 7), call_status::ok);  // dropped at the owner
      EXPECT_THROW((void)m->find(key).get(), std::exception);
    }
    me.quiesce();
    if (me.id() == owner) {
      EXPECT_GT(table.dropped(), dropped_before);
    }
    m.reset();
    containers::map<std::uint64_t, std::uint64_t> fresh(me);
    EXPECT_EQ(fresh.find(key).get(), std::nullopt);
    fresh.barrier();
  });
}

}  // namespace

int main(int argc, char** argv) { return seriema::test::run_all_tests(argc, argv); }

// containers::counting_set across the worker threads of one or several processes: a skewed
// stream of keys (a few hot words, many cold ones) counted from every worker matches the
// sequential count through count, gather, size and top_k, and the sender-side cache merged
// repeated keys (fewer updates travelled than inserts); with the cache off every insert to
// another owner travels.
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

constexpr std::uint64_t inserts_per_worker = 20000;

// Worker t's i-th word: "hot-0".."hot-3" three times in four, else one of 500 cold words.
std::string word(std::uint64_t t, std::uint64_t i) {
  if (i % 4 != 3) return "hot-" + std::to_string((i + t) % 4);
  return "cold-" + std::to_string((i * 31 + t * 7) % 500);
}

std::map<std::string, std::uint64_t> sequential_count(std::uint64_t workers) {
  std::map<std::string, std::uint64_t> counts;
  for (std::uint64_t t = 0; t < workers; ++t) {
    for (std::uint64_t i = 0; i < inserts_per_worker; ++i) ++counts[word(t, i)];
  }
  return counts;
}

void count_and_check(thread_context& me, std::size_t cache_slots) {
  containers::counting_set<std::string> words(me, cache_slots);
  for (std::uint64_t i = 0; i < inserts_per_worker; ++i) {
    ASSERT_EQ(words.insert(word(me.id(), i)), call_status::ok);
  }
  words.barrier();
  const auto expected = sequential_count(me.thread_count());
  EXPECT_EQ(words.count("hot-" + std::to_string(me.id() % 4)).get(),
            expected.at("hot-" + std::to_string(me.id() % 4)));
  EXPECT_EQ(words.count("never-inserted").get(), 0u);
  if (me.id() == 0) {
    EXPECT_EQ(words.size(), expected.size());
    auto all = words.gather();
    const std::map<std::string, std::uint64_t> gathered(all.begin(), all.end());
    EXPECT_EQ(gathered, expected);
    auto top = words.top_k(4);
    ASSERT_EQ(top.size(), 4u);
    for (const auto& [key, n] : top) EXPECT_EQ(key.rfind("hot-", 0), 0u) << key;
  }
  if (me.thread_count() > 1 && cache_slots >= 64) {
    // Hot words owned elsewhere were merged: far fewer updates than inserts travelled.
    EXPECT_GT(words.combined(), inserts_per_worker / 4);
    EXPECT_LT(words.sent(), inserts_per_worker / 2);
  }
  if (cache_slots == 0) {
    EXPECT_EQ(words.combined(), 0u);
  }
  words.barrier();
}

TEST(CountingSet, SkewedStreamMatchesTheSequentialCountAndIsCombined) {
  test::rt().run([&](thread_context& me) { count_and_check(me, 1024); });
}

TEST(CountingSet, WithoutCacheEveryInsertTravels) {
  test::rt().run([&](thread_context& me) { count_and_check(me, 0); });
}

// A cache of one slot evicts at almost every insert and still counts right.
TEST(CountingSet, OneSlotCacheCountsRight) {
  test::rt().run([&](thread_context& me) { count_and_check(me, 1); });
}

}  // namespace

int main(int argc, char** argv) { return seriema::test::run_all_tests(argc, argv); }

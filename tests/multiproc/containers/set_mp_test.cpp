// containers::set across the worker threads of one or several processes: every worker inserts
// overlapping ranges of keys and erases some of its own (the result checked against the
// sequential set through contains, size and gather), with integer and string keys.
#include <gtest/gtest.h>

#include <cstdint>
#include <seriema/containers/containers.hpp>
#include <set>
#include <string>
#include <vector>

#include "support/mp_main.hpp"

using namespace seriema;
using fabric::thread_context;
using invoke::call_status;

namespace {

constexpr std::uint64_t keys_per_worker = 300;

// Worker t inserts t*100 .. t*100+299 (ranges overlap) and erases its multiples of 7 (which
// another worker may insert again: an erase and an insert from different senders race, so the
// check below waits at a barrier between them).
std::set<std::uint64_t> expected_keys(std::uint64_t workers) {
  std::set<std::uint64_t> keys;
  for (std::uint64_t t = 0; t < workers; ++t) {
    for (std::uint64_t k = t * 100; k < t * 100 + keys_per_worker; ++k) keys.insert(k);
  }
  for (std::uint64_t t = 0; t < workers; ++t) {
    for (std::uint64_t k = t * 100; k < t * 100 + keys_per_worker; ++k) {
      if (k % 7 == 0) keys.erase(k);
    }
  }
  return keys;
}

template <class Key, class MakeKey>
void insert_erase_check(thread_context& me, MakeKey make_key) {
  containers::set<Key> s(me);
  const std::uint64_t t = me.id();
  for (std::uint64_t k = t * 100; k < t * 100 + keys_per_worker; ++k) {
    ASSERT_EQ(s.insert(make_key(k)), call_status::ok);
  }
  s.barrier();  // every insert before any erase
  for (std::uint64_t k = t * 100; k < t * 100 + keys_per_worker; ++k) {
    if (k % 7 == 0) {
      ASSERT_EQ(s.erase(make_key(k)), call_status::ok);
    }
  }
  s.barrier();
  const auto expected = expected_keys(me.thread_count());
  for (std::uint64_t k = t * 100; k < t * 100 + keys_per_worker; ++k) {
    EXPECT_EQ(s.contains(make_key(k)).get(), expected.count(k) == 1) << "key " << k;
  }
  s.for_each_local([&](const Key& key) { EXPECT_EQ(s.owner(key), me.id()); });
  if (me.id() == 0) {
    EXPECT_EQ(s.size(), expected.size());
    const std::vector<Key> all = s.gather();
    EXPECT_EQ(all.size(), expected.size());
    std::set<Key> gathered(all.begin(), all.end());
    for (std::uint64_t k : expected) EXPECT_EQ(gathered.count(make_key(k)), 1u) << "key " << k;
  }
  s.barrier();
}

TEST(ContainersSet, IntegerKeys) {
  test::rt().run([&](thread_context& me) {
    insert_erase_check<std::uint64_t>(me, [](std::uint64_t k) { return k; });
  });
}

TEST(ContainersSet, StringKeys) {
  test::rt().run([&](thread_context& me) {
    insert_erase_check<std::string>(me, [](std::uint64_t k) { return "key-" + std::to_string(k); });
  });
}

}  // namespace

int main(int argc, char** argv) { return seriema::test::run_all_tests(argc, argv); }

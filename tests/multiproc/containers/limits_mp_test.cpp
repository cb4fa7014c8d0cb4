// Containers at their limits, across the worker threads of one or several processes: more keys
// than a map's bound (refused at the owners, counted, nothing lost that was admitted), every
// worker hammering one key, empty containers everywhere, a key type whose bytes fail to
// deserialize at the owner (rejected and counted there; a find of it fails), and a container
// made on a thread that has no containers (a clear error).
#include <gtest/gtest.h>

#include <cereal/types/string.hpp>
#include <cstdint>
#include <functional>
#include <seriema/containers/containers.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "support/mp_main.hpp"

using namespace seriema;
using fabric::thread_context;
using invoke::call_status;

/// A key whose load throws when its number is odd: its bytes "fail to deserialize" at the owner.
struct fragile_key {
  std::uint64_t number = 0;
  std::string tag;
  bool operator==(const fragile_key&) const = default;
  template <class Archive>
  void save(Archive& ar) const {
    ar(number, tag);
  }
  template <class Archive>
  void load(Archive& ar) {
    ar(number, tag);
    if (number % 2 == 1) throw std::runtime_error("fragile_key: odd keys do not load");
  }
};

template <>
struct std::hash<fragile_key> {
  std::size_t operator()(const fragile_key& k) const noexcept {
    return std::hash<std::uint64_t>{}(k.number);
  }
};

namespace {

constexpr std::size_t bound = 10;
constexpr std::uint64_t distinct = 200;

// Every worker inserts the same 200 keys into a map whose parts hold 10 keys at most: every part
// ends with exactly min(10, keys it owns) keys, the refusals are counted at the owners, and the
// admitted keys keep their values.
TEST(ContainersLimits, MoreKeysThanTheBoundAreRefusedAndCounted) {
  test::rt().run([&](thread_context& me) {
    containers::map<std::uint64_t, std::uint64_t> m(me, containers::limits{bound});
    auto& table = containers::detail::containers_of(me);
    const std::uint64_t refused_before = table.refused();
    for (std::uint64_t k = 0; k < distinct; ++k) {
      ASSERT_EQ(m.insert_or_assign(k, k * 3), call_status::ok);
    }
    m.barrier();
    std::uint64_t owned = 0;
    for (std::uint64_t k = 0; k < distinct; ++k) owned += m.owner(k) == me.id() ? 1 : 0;
    EXPECT_EQ(m.local().size(), std::min<std::uint64_t>(owned, bound));
    for (const auto& [key, value] : m.local()) EXPECT_EQ(value, key * 3);
    if (owned > bound) {
      EXPECT_GT(table.refused(), refused_before);
    }
    m.barrier();
  });
}

TEST(ContainersLimits, OneKeyFromEveryWorker) {
  test::rt().run([&](thread_context& me) {
    containers::counting_set<std::string> one(me);
    containers::array<std::uint64_t> cell(me, 1);
    for (int k = 0; k < 1000; ++k) {
      ASSERT_EQ(one.insert("the"), call_status::ok);
      ASSERT_EQ(cell.add(0, 1), call_status::ok);
    }
    one.barrier();
    EXPECT_EQ(one.count("the").get(), 1000u * me.thread_count());
    EXPECT_EQ(cell.get(0).get(), 1000u * me.thread_count());
    one.barrier();
  });
}

TEST(ContainersLimits, EmptyContainersEverywhere) {
  test::rt().run([&](thread_context& me) {
    containers::map<std::string, std::string> m(me);
    containers::counting_set<std::uint64_t> c(me);
    containers::array<std::uint64_t> a(me, 0);
    containers::bag<std::string> b(me);
    m.barrier();
    if (me.id() == 0) {
      EXPECT_EQ(m.size(), 0u);
      EXPECT_TRUE(m.gather().empty());
      EXPECT_TRUE(m.top_k(5).empty());
      EXPECT_EQ(m.find("nothing").get(), std::nullopt);
      EXPECT_TRUE(c.top_k(3).empty());
      EXPECT_EQ(c.count(7).get(), 0u);
      EXPECT_TRUE(a.gather().empty());
      EXPECT_THROW((void)a.get(0), seriema::error);
      EXPECT_EQ(b.size(), 0u);
    }
    b.rebalance();
    EXPECT_TRUE(b.local().empty());
    m.barrier();
  });
}

// Keys with an odd number fail to load at their owner: the update is rejected there (counted in
// the runtime's rejected_arguments) and never applied; a find of one fails (not executed); the
// even keys, in the same stream, are all applied.
TEST(ContainersLimits, AKeyThatFailsToDeserializeIsRejectedAtTheOwner) {
  test::rt().run([&](thread_context& me) {
    containers::map<fragile_key, std::uint64_t> m(me);
    const std::uint64_t rejected_before =
        test::rt().counters().rejected_arguments.load(std::memory_order_relaxed);
    std::uint64_t sent_odd_remote = 0;
    for (std::uint64_t k = 0; k < 40; ++k) {
      const fragile_key key{k, "k" + std::to_string(k)};
      ASSERT_EQ(m.insert(key, k), call_status::ok);
      if (k % 2 == 1 && m.owner(key) != me.id()) ++sent_odd_remote;
    }
    m.barrier();
    for (const auto& [key, value] : m.local()) {
      EXPECT_EQ(value, key.number);
    }
    for (std::uint64_t k = 0; k < 40; k += 2) {
      EXPECT_EQ(m.find(fragile_key{k, "k" + std::to_string(k)}).get(), k) << "key " << k;
    }
    for (std::uint64_t k = 1; k < 40; k += 2) {
      const fragile_key key{k, "k" + std::to_string(k)};
      if (m.owner(key) == me.id()) continue;  // made here: nothing was serialized
      EXPECT_THROW((void)m.find(key).get(), std::exception) << "key " << k;
    }
    m.barrier();
    if (sent_odd_remote > 0) {
      EXPECT_GT(test::rt().counters().rejected_arguments.load(std::memory_order_relaxed),
                rejected_before);
    }
    m.barrier();
  });
}

// A container is made by run()'s workers: an attached thread's context has no container table,
// and making one there says so instead of crashing.
TEST(ContainersLimits, AContainerOnAThreadWithoutContainersIsAClearError) {
  std::string message;
  std::thread other([&] {
    auto attached = test::rt().attach();
    try {
      containers::map<std::uint64_t, std::uint64_t> m(attached.context());
    } catch (const seriema::error& e) {
      message = e.what();
    }
  });
  other.join();
  EXPECT_NE(message.find("has no containers"), std::string::npos) << message;
}

}  // namespace

int main(int argc, char** argv) { return seriema::test::run_all_tests(argc, argv); }

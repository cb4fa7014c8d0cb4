// containers::disjoint_set across the worker threads of one or several processes: random unites
// from every worker (integer and string keys) checked against a sequential union-find through
// find (after a barrier), compress, set_count and gather; unite_and_run's action runs once per
// merge, with its arguments; an empty disjoint_set and one pair united by every worker.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <map>
#include <numeric>
#include <seriema/containers/containers.hpp>
#include <string>
#include <utility>
#include <vector>

#include "support/mp_main.hpp"

using namespace seriema;
using fabric::thread_context;
using invoke::call_status;

namespace {

constexpr std::uint64_t key_space = 600;
constexpr std::uint64_t unites_per_worker = 250;

// Worker w's k-th unite: a pair of keys in [0, key_space), a pure function of (w, k).
std::pair<std::uint64_t, std::uint64_t> pair_of(std::uint64_t w, std::uint64_t k) {
  std::uint64_t x = (w << 32) ^ k;
  x = (x ^ (x >> 31)) * 0x7fb5d329728ea185ULL;
  x = (x ^ (x >> 27)) * 0x81dadef4bc2dd44dULL;
  return {x % key_space, (x >> 32) % key_space};
}

// Key -> the first key of its set in the disjoint_set's order, for every key some unite named.
template <class DS, class MakeKey>
auto sequential_roots(std::uint64_t workers, MakeKey make_key) {
  using K = typename DS::key_type;
  std::vector<std::uint64_t> parent(key_space);
  std::iota(parent.begin(), parent.end(), 0);
  std::vector<bool> named(key_space);
  auto root = [&](std::uint64_t v) {
    while (parent[v] != v) v = parent[v];
    return v;
  };
  for (std::uint64_t w = 0; w < workers; ++w) {
    for (std::uint64_t k = 0; k < unites_per_worker; ++k) {
      const auto [a, b] = pair_of(w, k);
      if (a == b) continue;
      named[a] = named[b] = true;
      const std::uint64_t ra = root(a), rb = root(b);
      if (ra == rb) continue;
      if (DS::before(make_key(ra), make_key(rb))) {
        parent[rb] = ra;
      } else {
        parent[ra] = rb;
      }
    }
  }
  std::map<K, K> roots;
  for (std::uint64_t v = 0; v < key_space; ++v) {
    if (named[v]) roots[make_key(v)] = make_key(root(v));
  }
  return roots;
}

template <class K, class MakeKey>
void unite_find_compress_check(thread_context& me, MakeKey make_key) {
  using DS = containers::disjoint_set<K>;
  DS sets(me);
  for (std::uint64_t k = 0; k < unites_per_worker; ++k) {
    const auto [a, b] = pair_of(me.id(), k);
    ASSERT_EQ(sets.unite(make_key(a), make_key(b)), call_status::ok);
  }
  sets.barrier();
  const auto expected = sequential_roots<DS>(me.thread_count(), make_key);
  for (std::uint64_t v = me.id(); v < key_space; v += me.thread_count()) {
    const K key = make_key(v);
    auto at = expected.find(key);
    EXPECT_EQ(sets.find(key).get(), at == expected.end() ? key : at->second) << "key " << v;
  }
  sets.compress();
  for (const auto& [key, parent] : sets.local()) {
    EXPECT_EQ(sets.owner(key), me.id());
    EXPECT_EQ(parent, expected.at(key));  // compressed: every parent is a root
  }
  if (me.id() == 0) {
    std::map<K, K> roots;
    for (auto& [key, root] : sets.gather()) roots.emplace(key, root);
    EXPECT_EQ(roots, expected);
    std::map<K, int> distinct;
    for (const auto& [key, root] : expected) distinct[root] = 1;
    EXPECT_EQ(sets.set_count(), distinct.size());
  }
  sets.barrier();
}

TEST(ContainersDisjointSet, IntegerKeys) {
  test::rt().run([&](thread_context& me) {
    unite_find_compress_check<std::uint64_t>(me, [](std::uint64_t k) { return k; });
  });
}

TEST(ContainersDisjointSet, StringKeys) {
  test::rt().run([&](thread_context& me) {
    unite_find_compress_check<std::string>(me,
                                           [](std::uint64_t k) { return "v" + std::to_string(k); });
  });
}

// unite_and_run's action: one run per merge, at the worker where the sets merged, with the
// unite's keys and arguments (a string: serialized with every step).
// Per worker of this process (each entry written by its worker only).
std::array<std::uint64_t, 256> merges_seen{}, wrong_argument{};

TEST(ContainersDisjointSet, UniteAndRunOncePerMerge) {
  test::rt().run([&](thread_context& me) {
    using DS = containers::disjoint_set<std::uint64_t>;
    ASSERT_LT(me.thread_count(), merges_seen.size());
    merges_seen[me.id()] = wrong_argument[me.id()] = 0;
    DS sets(me);  // a quiesce: every entry is reset before an action can run
    for (std::uint64_t k = 0; k < unites_per_worker; ++k) {
      const auto [a, b] = pair_of(me.id(), k);
      const std::string tag = "from " + std::to_string(me.id()) + ":" + std::to_string(a);
      ASSERT_EQ(sets.unite_and_run(
                    a, b,
                    [](DS& at, std::uint64_t a0, std::uint64_t, const std::string& t) {
                      ++merges_seen[at.self().id()];
                      if (t.find(":" + std::to_string(a0)) == std::string::npos) {
                        ++wrong_argument[at.self().id()];
                      }
                    },
                    tag),
                call_status::ok);
    }
    sets.compress();
    EXPECT_EQ(merges_seen[me.id()], sets.local_merges());
    EXPECT_EQ(wrong_argument[me.id()], 0u);
    containers::array<std::uint64_t> merges(me, me.thread_count(),
                                            containers::distribution::cyclic);
    merges.local()[0] = merges_seen[me.id()];
    merges.barrier();
    if (me.id() == 0) {
      const auto expected = sequential_roots<DS>(me.thread_count(), [](std::uint64_t k) {
        return k;
      });
      std::uint64_t total = 0;
      for (std::uint64_t n : merges.gather()) total += n;
      EXPECT_EQ(total, expected.size() - sets.set_count());  // keys - sets = links made
    }
    merges.barrier();
  });
}

TEST(ContainersDisjointSet, EmptyAndOnePairEverywhere) {
  test::rt().run([&](thread_context& me) {
    containers::disjoint_set<std::uint64_t> empty(me);
    empty.compress();
    containers::disjoint_set<std::uint64_t> one(me);
    for (int k = 0; k < 100; ++k) {
      ASSERT_EQ(one.unite(7, 11), call_status::ok);
      ASSERT_EQ(one.unite(11, 7), call_status::ok);
      ASSERT_EQ(one.unite(7, 7), call_status::ok);
    }
    one.compress();
    EXPECT_EQ(one.find(11).get(), one.find(7).get());
    if (me.id() == 0) {
      EXPECT_EQ(empty.set_count(), 0u);
      EXPECT_TRUE(empty.gather().empty());
      EXPECT_EQ(empty.find(42).get(), 42u);  // a key no unite named is a set of its own
      EXPECT_EQ(one.set_count(), 1u);
      EXPECT_EQ(one.gather().size(), 2u);
    }
    one.barrier();
  });
}

}  // namespace

int main(int argc, char** argv) { return seriema::test::run_all_tests(argc, argv); }

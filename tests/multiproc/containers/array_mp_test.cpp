// containers::array across the worker threads of one or several processes, block and cyclic:
// every worker adds to every element (the sum checked through gather and get), sets and visits
// elements other workers own (string values: the serialized path), an index past the end is
// refused, and arrays smaller than the number of workers (some own nothing) work.
#include <gtest/gtest.h>

#include <cstdint>
#include <seriema/containers/containers.hpp>
#include <string>
#include <vector>

#include "support/mp_main.hpp"

using namespace seriema;
using containers::distribution;
using fabric::thread_context;
using invoke::call_status;

namespace {

// Every index belongs to exactly one worker, and index_of inverts the owner's numbering.
template <class A>
void check_layout(const A& a, std::uint64_t workers) {
  std::vector<int> seen(a.size(), 0);
  for (fabric::thread_id t = 0; t < workers; ++t) {
    for (std::uint64_t k = 0; k < a.count_of(t); ++k) {
      const std::uint64_t i = a.index_of(t, k);
      ASSERT_LT(i, a.size());
      EXPECT_EQ(a.owner(i), t) << "index " << i;
      ++seen[i];
    }
  }
  for (std::uint64_t i = 0; i < a.size(); ++i) EXPECT_EQ(seen[i], 1) << "index " << i;
}

void every_worker_adds(thread_context& me, std::uint64_t size, distribution how) {
  containers::array<std::uint64_t> a(me, size, how);
  check_layout(a, me.thread_count());
  EXPECT_EQ(a.local().size(), a.count_of(me.id()));
  for (std::uint64_t i = 0; i < size; ++i) ASSERT_EQ(a.add(i, i + 1), call_status::ok);
  a.barrier();
  const std::uint64_t workers = me.thread_count();
  if (size > 0) {
    EXPECT_EQ(a.get(size - 1).get(), workers * size);
  }
  if (me.id() == 0) {
    const std::vector<std::uint64_t> all = a.gather();
    ASSERT_EQ(all.size(), size);
    for (std::uint64_t i = 0; i < size; ++i) EXPECT_EQ(all[i], workers * (i + 1)) << i;
  }
  EXPECT_THROW((void)a.add(size, 1), seriema::error);
  EXPECT_THROW((void)a.get(size), seriema::error);
  a.barrier();
}

TEST(ContainersArray, EveryWorkerAddsBlock) {
  test::rt().run([&](thread_context& me) { every_worker_adds(me, 1001, distribution::block); });
}

TEST(ContainersArray, EveryWorkerAddsCyclic) {
  test::rt().run([&](thread_context& me) { every_worker_adds(me, 1001, distribution::cyclic); });
}

TEST(ContainersArray, FewerElementsThanWorkers) {
  test::rt().run([&](thread_context& me) {
    every_worker_adds(me, 2, distribution::block);
    every_worker_adds(me, 2, distribution::cyclic);
    every_worker_adds(me, 0, distribution::block);
  });
}

// String elements: a worker sets the element after its own id's and visits it with arguments;
// the sender's order holds at the owner (set, then visit, then get).
TEST(ContainersArray, SetAndVisitStrings) {
  test::rt().run([&](thread_context& me) {
    const std::uint64_t n = me.thread_count();
    containers::array<std::string> names(me, n, distribution::cyclic);
    const std::uint64_t target = (me.id() + 1) % n;
    ASSERT_EQ(names.set(target, "from-" + std::to_string(me.id())), call_status::ok);
    ASSERT_EQ(names.visit(target, [](std::uint64_t i, std::string& value, std::string& tail) {
                value += tail + std::to_string(i);
              }, std::string("/at-")),
              call_status::ok);
    EXPECT_EQ(names.get(target).get(),
              "from-" + std::to_string(me.id()) + "/at-" + std::to_string(target));
    names.barrier();
  });
}

}  // namespace

int main(int argc, char** argv) { return seriema::test::run_all_tests(argc, argv); }

// containers::array across the worker threads of one or several processes, block and cyclic:
// every worker adds to every element (the sum checked through gather and get), sets and visits
// elements other workers own (string values: the serialized path), an index past the end is
// refused, and arrays smaller than the number of workers (some own nothing) work. Packed
// updates: sets, adds and visits without captures interleaved with unpacked visits and gets
// reach the owner in the sender's order, across batch limits; what a worker packed goes out
// when it waits idle (no barrier, no get).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
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

// Unpacked visits (below) that found an element not as the packed updates before them left it,
// in this process.
std::atomic<int> misordered{0};

// Every worker drives an element the next worker owns (its own, alone) through rounds of packed
// set / add / add / visit (no captures) and an unpacked visit (a capture) that checks, at the
// owner, the value the packed ones left: any reordering is counted there. 400 rounds of 4 packed
// entries cross the 2 KiB batch limit many times; gets in between flush too.
TEST(ContainersArray, PackedAndUnpackedUpdatesKeepTheSendersOrder) {
  test::rt().run([&](thread_context& me) {
    const std::uint64_t n = me.thread_count();
    containers::array<std::uint64_t> a(me, 3 * n, distribution::cyclic);
    const std::uint64_t target = 2 * n + (me.id() + 1) % n;  // owned by worker id + 1
    for (std::uint64_t round = 0; round < 400; ++round) {
      ASSERT_EQ(a.set(target, round * 10), call_status::ok);
      ASSERT_EQ(a.add(target, 3), call_status::ok);
      ASSERT_EQ(a.add(target, 4), call_status::ok);
      ASSERT_EQ(a.visit(target, [](std::uint64_t, std::uint64_t& v, std::uint64_t plus) {
                  v = 2 * v + plus;
                }, std::uint64_t{1}),
                call_status::ok);
      const std::uint64_t expected = 2 * (round * 10 + 7) + 1;
      ASSERT_EQ(a.visit(target, [expected](std::uint64_t, std::uint64_t& v) {
                  if (v != expected) misordered.fetch_add(1);
                }),
                call_status::ok);
      if (round % 100 == 99) {
        EXPECT_EQ(a.get(target).get(), expected) << "round " << round;
      }
    }
    a.barrier();
    EXPECT_EQ(a.get(target).get(), 2 * (399 * 10 + 7) + 1);
    EXPECT_EQ(misordered.load(), 0) << "updates reached their owner out of their sender's order";
    a.barrier();
  });
}

// A worker's packed add to an element another worker owns goes out when the sender waits idle:
// the owner sees it by polling its own part (no barrier, no get from the sender). Workers pair
// up with the next one; each waits for the add of the previous one.
TEST(ContainersArray, PackedUpdatesGoOutWhenTheSenderWaits) {
  test::rt().run([&](thread_context& me) {
    const std::uint64_t n = me.thread_count();
    if (n < 2) GTEST_SKIP() << "needs two workers";
    containers::array<std::uint64_t> a(me, n, distribution::cyclic);
    ASSERT_EQ(a.add((me.id() + 1) % n, 1), call_status::ok);  // packed: index i is worker i's
    const auto until = fabric::deadline_clock::now() + std::chrono::seconds(20);
    EXPECT_TRUE(me.wait_until([&] { return a.local()[0] == 1; }, until))
        << "worker " << me.id() << " never received its neighbour's packed add";
    a.barrier();
  });
}

}  // namespace

int main(int argc, char** argv) { return seriema::test::run_all_tests(argc, argv); }

// containers::bag across the worker threads of one or several processes: inserts from every
// worker (round-robin over the parts), everything gathered once, and a rebalance of a lopsided
// bag (every value on one worker) that leaves parts differing by one at most and loses nothing;
// integer and string values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <seriema/containers/containers.hpp>
#include <string>
#include <vector>

#include "support/mp_main.hpp"

using namespace seriema;
using fabric::thread_context;
using invoke::call_status;

namespace {

template <class T, class Make>
void fill_gather_rebalance(thread_context& me, std::uint64_t per_worker, bool only_worker_0,
                           Make make) {
  containers::bag<T> b(me);
  const std::uint64_t mine = only_worker_0 ? (me.id() == 0 ? per_worker * me.thread_count() : 0)
                                           : per_worker;
  for (std::uint64_t k = 0; k < mine; ++k) {
    // Lopsided: worker 0's values all go to its own part (local() directly).
    if (only_worker_0) {
      b.local().push_back(make(k));
    } else {
      ASSERT_EQ(b.insert(make(me.id() * 1000000 + k)), call_status::ok);
    }
  }
  b.barrier();
  const std::uint64_t total = per_worker * me.thread_count();
  if (!only_worker_0) {
    // Round-robin from each inserter: the parts differ by one at most already.
    EXPECT_LE(b.local().size(), per_worker + 1);
  }
  b.rebalance();
  const std::uint64_t workers = me.thread_count();
  EXPECT_GE(b.local().size(), total / workers);
  EXPECT_LE(b.local().size(), total / workers + 1);
  if (me.id() == 0) {
    EXPECT_EQ(b.size(), total);
    std::vector<T> all = b.gather();
    ASSERT_EQ(all.size(), total);
    std::vector<T> expected;
    for (std::uint64_t w = 0; w < workers; ++w) {
      for (std::uint64_t k = 0; k < per_worker; ++k) {
        expected.push_back(only_worker_0 ? make(w * per_worker + k) : make(w * 1000000 + k));
      }
    }
    std::sort(all.begin(), all.end());
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(all, expected);
  }
  b.barrier();
}

TEST(ContainersBag, InsertsSpreadAndGatherEverything) {
  test::rt().run([&](thread_context& me) {
    fill_gather_rebalance<std::uint64_t>(me, 1000, false, [](std::uint64_t k) { return k; });
  });
}

TEST(ContainersBag, RebalanceALopsidedBag) {
  test::rt().run([&](thread_context& me) {
    fill_gather_rebalance<std::uint64_t>(me, 777, true, [](std::uint64_t k) { return k; });
  });
}

TEST(ContainersBag, StringValues) {
  test::rt().run([&](thread_context& me) {
    fill_gather_rebalance<std::string>(me, 200, true,
                                       [](std::uint64_t k) { return "v" + std::to_string(k); });
  });
}

}  // namespace

int main(int argc, char** argv) { return seriema::test::run_all_tests(argc, argv); }

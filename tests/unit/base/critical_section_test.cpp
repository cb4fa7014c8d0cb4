// critical_section under thread contention: exact counts of a non-atomic counter on the path the
// CPU selects and on the forced fallback lock, the path the cpuid check picks, and a deadline
// that ends a wait for a held lock.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <seriema/base/critical_section.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

using seriema::critical_path;
using seriema::critical_section;

constexpr int threads = 4;
constexpr std::uint64_t increments_per_thread = 200'000;

// Every thread adds 1 to `counter` (a plain integer) increments_per_thread times, each under
// the section; two words, so a torn section would also show as a mismatch between them.
struct pair_of_counters {
  std::uint64_t first = 0;
  std::uint64_t second = 0;
};

void hammer(critical_section& section, pair_of_counters& counters) {
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      for (std::uint64_t i = 0; i < increments_per_thread; ++i) {
        std::lock_guard guard(section);
        counters.first = counters.first + 1;
        counters.second = counters.first;
      }
    });
  }
  for (auto& worker : workers) worker.join();
}

TEST(CriticalSection, CountsExactlyOnTheFallbackLock) {
  critical_section section(/*use_rtm=*/false);
  EXPECT_EQ(section.path(), critical_path::fallback_lock);
  pair_of_counters counters;
  hammer(section, counters);
  EXPECT_EQ(counters.first, threads * increments_per_thread);
  EXPECT_EQ(counters.second, counters.first);
  EXPECT_EQ(section.fallbacks(), threads * increments_per_thread);
  EXPECT_EQ(section.commits(), 0u);
}

TEST(CriticalSection, CountsExactlyOnThePathTheCpuSelects) {
  critical_section section;
  EXPECT_EQ(section.path(), seriema::cpu_has_rtm() ? critical_path::transactional
                                                   : critical_path::fallback_lock);
  pair_of_counters counters;
  hammer(section, counters);
  EXPECT_EQ(counters.first, threads * increments_per_thread);
  EXPECT_EQ(counters.second, counters.first);
  // Every section ran once: as a committed transaction or under the fallback lock.
  EXPECT_EQ(section.commits() + section.fallbacks(), threads * increments_per_thread);
  if (!seriema::cpu_has_rtm()) {
    EXPECT_EQ(section.commits(), 0u);
  }
  std::printf("critical_section path: %s, commits %llu, aborts %llu, fallbacks %llu\n",
              seriema::to_string(section.path()),
              static_cast<unsigned long long>(section.commits()),
              static_cast<unsigned long long>(section.aborts()),
              static_cast<unsigned long long>(section.fallbacks()));
}

TEST(CriticalSection, TryLockUntilGivesUpWhileAnotherThreadHoldsIt) {
  critical_section section(/*use_rtm=*/false);
  section.lock();
  bool entered = true;
  std::thread other([&] {
    entered = section.try_lock_until(std::chrono::steady_clock::now() +
                                     std::chrono::milliseconds(50));
  });
  other.join();
  EXPECT_FALSE(entered);
  section.unlock();
  std::thread again([&] {
    entered = section.try_lock_until(std::chrono::steady_clock::now() + std::chrono::seconds(5));
    if (entered) section.unlock();
  });
  again.join();
  EXPECT_TRUE(entered);
}

TEST(CriticalSection, PathNamesAreReadable) {
  EXPECT_EQ(std::string(seriema::to_string(critical_path::transactional)), "transactional (RTM)");
  EXPECT_EQ(std::string(seriema::to_string(critical_path::fallback_lock)), "fallback lock");
}

}  // namespace

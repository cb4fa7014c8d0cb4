// Stress tests of the allocators: many threads on one general_allocator checking that live
// buffers never overlap (each thread's pattern must survive until it frees), an exact shadow
// interval check single-threaded, and the circular allocators fed by simulated transmitters whose
// completions arrive late and out of step.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <iterator>
#include <map>
#include <random>
#include <seriema/transfer/allocators.hpp>
#include <seriema/transfer/heap_block_source.hpp>
#include <string>
#include <thread>
#include <vector>

namespace seriema::transfer {
namespace {

bool aligned(const void* p, std::size_t alignment) {
  return reinterpret_cast<std::uintptr_t>(p) % alignment == 0;
}

// Fills `n` bytes with copies of `word` (the last copy truncated).
void fill(std::byte* p, std::size_t n, std::uint64_t word) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) std::memcpy(p + i, &word, 8);
  std::memcpy(p + i, &word, n - i);
}

bool intact(const std::byte* p, std::size_t n, std::uint64_t word) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (std::memcmp(p + i, &word, 8) != 0) return false;
  }
  return std::memcmp(p + i, &word, n - i) == 0;
}

// Mostly small sizes (log-uniform 1 B .. 16 KiB), sometimes up to 512 KiB.
std::size_t random_size(std::mt19937_64& random) {
  const int log2 = static_cast<int>(random() % (random() % 64 == 0 ? 19 : 14));
  const std::size_t base = std::size_t{1} << log2;
  return base + random() % base;
}

std::size_t random_alignment(std::mt19937_64& random) {
  const std::uint64_t r = random() % 16;
  if (r < 10) return min_alignment;
  return std::size_t{1} << (random() % 13);  // 1 .. 4096
}

struct stress_totals {
  std::atomic<std::uint64_t> allocations{0};
  std::atomic<std::uint64_t> exhausted{0};
  std::atomic<std::uint64_t> corruptions{0};
  std::atomic<std::uint64_t> misplaced{0};  // misaligned, outside the segment, or wrong size
  std::atomic<std::uint64_t> refused_frees{0};
};

// One thread's share: keeps up to `max_live` buffers, each holding (thread, sequence) words from
// the moment it is allocated until just before it is freed. Another thread handed an overlapping
// range would overwrite them.
void stress_thread(general_allocator& allocator, int id, std::uint64_t operations,
                   std::size_t max_live, int size_shift, stress_totals& totals) {
  struct live_buffer {
    registered_buffer buffer;
    std::uint64_t word;
  };
  std::mt19937_64 random(0x5e41e3a + static_cast<std::uint64_t>(id));
  std::vector<live_buffer> live;
  std::uint64_t sequence = 0;
  auto release = [&](std::size_t i) {
    if (!intact(live[i].buffer.data, live[i].buffer.size, live[i].word)) ++totals.corruptions;
    if (allocator.free(live[i].buffer) != free_status::ok) ++totals.refused_frees;
    live[i] = live.back();
    live.pop_back();
  };
  for (std::uint64_t op = 0; op < operations; ++op) {
    const bool allocate = live.empty() || (live.size() < max_live && random() % 2 == 0);
    if (!allocate) {
      release(random() % live.size());
      continue;
    }
    const std::size_t n = std::min(random_size(random) << size_shift, block_size);
    const std::size_t alignment = random_alignment(random);
    const registered_buffer b = allocator.allocate(n, alignment);
    if (!b) {
      ++totals.exhausted;
      if (!live.empty()) release(random() % live.size());
      continue;
    }
    ++totals.allocations;
    if (b.size != n || !aligned(b.data, std::max(alignment, min_alignment)) ||
        b.segment == nullptr || !b.segment->contains(b.data, b.size)) {
      ++totals.misplaced;
    }
    const std::uint64_t word = (static_cast<std::uint64_t>(id) << 48) | ++sequence;
    fill(b.data, b.size, word);
    live.push_back({b, word});
  }
  while (!live.empty()) release(live.size() - 1);
}

// `threads` threads share one allocator capped at `max_blocks`; at the cap a thread frees one of
// its buffers and goes on, so a tight cap exercises exhaustion and recovery under contention.
// Sizes are random_size() << size_shift.
void run_threads(fit_policy policy, int threads, std::uint64_t total_operations,
                 std::size_t max_blocks = 128, std::size_t max_live = 32, int size_shift = 0) {
  heap_block_source source;
  general_allocator_config config;
  config.policy = policy;
  config.max_bytes = max_blocks * block_size;
  stress_totals totals;
  {
    general_allocator allocator(source, config);
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back(stress_thread, std::ref(allocator), t + 1,
                           total_operations / static_cast<std::uint64_t>(threads), max_live,
                           size_shift, std::ref(totals));
    }
    for (auto& w : workers) w.join();

    EXPECT_EQ(totals.corruptions.load(), 0u) << "two live buffers overlapped";
    EXPECT_EQ(totals.misplaced.load(), 0u);
    EXPECT_EQ(totals.refused_frees.load(), 0u);
    if (max_blocks >= 128) {
      EXPECT_EQ(totals.exhausted.load(), 0u) << "256 MiB is far above the live peak";
    } else {
      EXPECT_GT(totals.exhausted.load(), 0u) << "the cap was meant to be reached";
    }
    EXPECT_GT(totals.allocations.load(), total_operations / 3);
    EXPECT_EQ(allocator.live_allocations(), 0u);
    EXPECT_EQ(allocator.bytes_in_use(), 0u);
    EXPECT_EQ(allocator.free_ranges(), allocator.blocks()) << "everything coalesced back";
  }
  EXPECT_EQ(source.outstanding_blocks(), 0u);
  EXPECT_EQ(source.bad_releases(), 0u);
}

TEST(AllocatorStressTest, FourThreadsShareOneGeneralAllocatorWithoutOverlap) {
  run_threads(fit_policy::best_fit, 4, 1'000'000);
}

TEST(AllocatorStressTest, FourThreadsAtTheCapRecoverWithoutOverlap) {
  // 4 threads x up to 64 live buffers of ~20 KiB on average do not fit in one 2 MiB block.
  run_threads(fit_policy::first_fit, 4, 200'000, 1, 64, 3);
}

class GeneralAllocatorStressPolicyTest : public ::testing::TestWithParam<fit_policy> {};

INSTANTIATE_TEST_SUITE_P(AllPolicies, GeneralAllocatorStressPolicyTest,
                         ::testing::Values(fit_policy::first_fit, fit_policy::best_fit,
                                           fit_policy::next_fit, fit_policy::worst_fit),
                         [](const auto& param_info) {
                           return std::string(to_string(param_info.param));
                         });

TEST_P(GeneralAllocatorStressPolicyTest, FourThreadsWithoutOverlap) {
  run_threads(GetParam(), 4, 200'000);
}

// Single thread, exact check: a shadow map of live intervals must never see two intersect, and
// the allocator's byte count must match the shadow's.
TEST_P(GeneralAllocatorStressPolicyTest, ShadowIntervalsNeverOverlap) {
  heap_block_source source;
  general_allocator_config config;
  config.policy = GetParam();
  config.max_bytes = 8 * block_size;  // tight: exercises exhaustion and reuse
  general_allocator allocator(source, config);
  std::mt19937_64 random(42);
  std::map<std::uintptr_t, registered_buffer> shadow;  // start -> buffer
  std::vector<std::uintptr_t> starts;                  // same keys, for random picks
  std::size_t shadow_bytes = 0;
  std::uint64_t exhausted = 0;
  // Always forgets the buffer, so a failed free cannot make the loops below spin.
  auto release = [&](std::size_t i) {
    const registered_buffer b = shadow.at(starts[i]);
    shadow.erase(starts[i]);
    starts[i] = starts.back();
    starts.pop_back();
    shadow_bytes -= (b.size + 63) / 64 * 64;
    EXPECT_EQ(allocator.free(b), free_status::ok);
  };
  for (int op = 0; op < 100'000; ++op) {
    if (!starts.empty() && random() % 5 < 2) {  // drifts upward until the cap is reached
      release(random() % starts.size());
      continue;
    }
    const std::size_t n = random_size(random);
    const std::size_t alignment = random_alignment(random);
    const allocation a = allocator.try_allocate(n, alignment);
    if (!a) {
      ASSERT_EQ(a.status, alloc_status::exhausted);
      ++exhausted;
      continue;
    }
    const registered_buffer& b = a.buffer;
    ASSERT_TRUE(aligned(b.data, std::max(alignment, min_alignment)));
    ASSERT_TRUE(b.segment->contains(b.data, b.size));
    const auto begin = reinterpret_cast<std::uintptr_t>(b.data);
    const auto next = shadow.lower_bound(begin);
    if (next != shadow.end()) {
      ASSERT_LE(begin + b.size, next->first) << "overlaps the next live buffer";
    }
    if (next != shadow.begin()) {
      const auto& prev = std::prev(next)->second;
      ASSERT_LE(reinterpret_cast<std::uintptr_t>(prev.data) + prev.size, begin)
          << "overlaps the previous live buffer";
    }
    shadow.emplace(begin, b);
    starts.push_back(begin);
    shadow_bytes += (n + 63) / 64 * 64;
    ASSERT_EQ(allocator.bytes_in_use(), shadow_bytes);
  }
  EXPECT_EQ(allocator.live_allocations(), shadow.size());
  while (!starts.empty()) release(starts.size() - 1);
  EXPECT_EQ(allocator.free_ranges(), allocator.blocks());
  EXPECT_LE(allocator.blocks(), 8u);
  EXPECT_GT(exhausted, 0u) << "the cap was meant to be reached";
}

// A transmitter as the circular allocators see it: operations tagged with the current ticket;
// completing up to a ticket verifies that every buffer of those operations still holds what was
// written into it (a unit recycled too early would have been overwritten), then publishes.
class simulated_transmitter {
 public:
  struct operation {
    std::byte* data;
    std::size_t size;
    std::uint64_t word;
    std::uint64_t ticket;
  };

  void post(const registered_buffer& b, std::uint64_t word) {
    ASSERT_TRUE(b.tags->add({&counter_, ticket_}));
    pending_.push_back({b.data, b.size, word, ticket_});
    in_flight_[b.data] += 1;
  }
  void flush() { ++ticket_; }  // later operations get a newer ticket

  // Completes every operation tagged below a random ticket in (completed, current] (or all of
  // them when `all`); returns how many buffers were found overwritten.
  std::uint64_t complete(std::mt19937_64& random, bool all) {
    const std::uint64_t done = counter_.completed_tickets.load();
    if (all) flush();
    if (ticket_ <= done) return 0;
    const std::uint64_t target = all ? ticket_ : done + 1 + random() % (ticket_ - done);
    std::uint64_t corrupted = 0;
    while (!pending_.empty() && pending_.front().ticket < target) {
      const operation& op = pending_.front();
      if (!intact(op.data, op.size, op.word)) ++corrupted;
      if (--in_flight_[op.data] == 0) in_flight_.erase(op.data);
      pending_.pop_front();
    }
    counter_.completed_tickets.store(target);
    return corrupted;
  }

  // True when an operation that used memory starting at `data` has not completed yet.
  [[nodiscard]] bool in_flight(const std::byte* data) const { return in_flight_.count(data) != 0; }
  [[nodiscard]] std::size_t pending() const { return pending_.size(); }

 private:
  completion_counter counter_;
  std::uint64_t ticket_ = 0;
  std::deque<operation> pending_;
  std::map<const std::byte*, int> in_flight_;
};

void circular_stress(growth_policy growth) {
  heap_block_source source;
  circular_allocator_config config;
  config.unit_size = 200;
  config.initial_units = 4;
  config.growth = growth;
  config.linear_growth_units = 5;
  config.max_units = 300;
  std::uint64_t corrupted = 0;
  std::uint64_t full = 0;
  std::uint64_t reused_in_flight = 0;
  {
    circular_allocator allocator(source, config);
    simulated_transmitter transmitters[3];
    std::mt19937_64 random(static_cast<std::uint64_t>(growth) + 11);
    for (std::uint64_t op = 1; op <= 300'000; ++op) {
      const registered_buffer b = allocator.allocate();
      if (!b) {
        ++full;
        for (auto& t : transmitters) corrupted += t.complete(random, true);
        continue;
      }
      for (const auto& t : transmitters) reused_in_flight += t.in_flight(b.data) ? 1 : 0;
      fill(b.data, b.size, op);
      // Used by one or two transmitters.
      const std::size_t first = random() % 3;
      transmitters[first].post(b, op);
      if (random() % 4 == 0) transmitters[(first + 1) % 3].post(b, op);
      for (auto& t : transmitters) {
        if (random() % 8 == 0) t.flush();
        // Transmitters complete at different, bursty rates.
        if (random() % (64 << (&t - transmitters)) == 0) corrupted += t.complete(random, false);
      }
    }
    for (auto& t : transmitters) corrupted += t.complete(random, true);
    EXPECT_EQ(allocator.units(), 300u) << "completions lag enough to grow to the cap";
  }
  EXPECT_EQ(corrupted, 0u) << "a unit was recycled before its operations completed";
  EXPECT_EQ(reused_in_flight, 0u);
  EXPECT_GT(full, 0u) << "the cap was meant to be reached";
  EXPECT_EQ(source.outstanding_blocks(), 0u);
}

TEST(AllocatorStressTest, CircularAllocatorRecyclesOnlyCompletedUnitsExponential) {
  circular_stress(growth_policy::exponential);
}

TEST(AllocatorStressTest, CircularAllocatorRecyclesOnlyCompletedUnitsLinear) {
  circular_stress(growth_policy::linear);
}

TEST(AllocatorStressTest, LinearCircularAllocatorRecyclesOnlyCompletedUnits) {
  heap_block_source source;
  linear_circular_allocator_config config;
  config.unit_size = 4096;
  config.initial_units = 2;
  config.growth = growth_policy::exponential;
  config.max_units = 64;
  std::uint64_t corrupted = 0;
  std::uint64_t full = 0;
  std::uint64_t overlaps = 0;
  {
    linear_circular_allocator allocator(source, config);
    simulated_transmitter transmitters[2];
    std::mt19937_64 random(99);
    // Segments not yet completed, start -> end; a new segment must not intersect any of them.
    std::map<std::uintptr_t, std::uintptr_t> in_flight;
    auto forget_completed = [&] {
      for (auto it = in_flight.begin(); it != in_flight.end();) {
        const auto* p = reinterpret_cast<const std::byte*>(it->first);
        if (!transmitters[0].in_flight(p) && !transmitters[1].in_flight(p)) {
          it = in_flight.erase(it);
        } else {
          ++it;
        }
      }
    };
    for (std::uint64_t op = 1; op <= 200'000; ++op) {
      const std::size_t n = 1 + random() % 1500;
      const std::size_t alignment = std::size_t{1} << (random() % 9);
      const allocation a = allocator.try_allocate(n, alignment);
      if (!a) {
        ASSERT_EQ(a.status, alloc_status::exhausted);
        ++full;
        for (auto& t : transmitters) corrupted += t.complete(random, true);
        forget_completed();
        continue;
      }
      const registered_buffer& b = a.buffer;
      ASSERT_TRUE(aligned(b.data, std::max(alignment, min_alignment)));
      const auto begin = reinterpret_cast<std::uintptr_t>(b.data);
      const auto next = in_flight.lower_bound(begin);
      if (next != in_flight.end() && begin + n > next->first) ++overlaps;
      if (next != in_flight.begin() && std::prev(next)->second > begin) ++overlaps;
      fill(b.data, n, op);
      in_flight[begin] = begin + n;
      transmitters[random() % 2].post(b, op);
      for (auto& t : transmitters) {
        if (random() % 4 == 0) t.flush();
        if (random() % (48 << (&t - transmitters)) == 0) {
          corrupted += t.complete(random, false);
          forget_completed();
        }
      }
    }
    for (auto& t : transmitters) corrupted += t.complete(random, true);
    EXPECT_EQ(allocator.units(), 64u);
  }
  EXPECT_EQ(corrupted, 0u) << "a unit was recycled before its segments completed";
  EXPECT_EQ(overlaps, 0u) << "a segment overlapped one still in flight";
  EXPECT_GT(full, 0u);
  EXPECT_EQ(source.outstanding_blocks(), 0u);
}

}  // namespace
}  // namespace seriema::transfer

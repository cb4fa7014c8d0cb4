// Tests of general_allocator: each fit policy's choice, alignment, coalescing in every free order,
// growth one block at a time, exhaustion and recovery, misuse detection, configuration errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <random>
#include <seriema/base/error.hpp>
#include <seriema/transfer/allocators.hpp>
#include <seriema/transfer/heap_block_source.hpp>
#include <string>
#include <vector>

namespace seriema::transfer {
namespace {

constexpr std::size_t kib = 1024;

bool aligned(const void* p, std::size_t alignment) {
  return reinterpret_cast<std::uintptr_t>(p) % alignment == 0;
}

general_allocator_config with_policy(fit_policy policy, std::size_t max_blocks = 1) {
  general_allocator_config config;
  config.policy = policy;
  config.max_bytes = max_blocks * block_size;
  return config;
}

class GeneralAllocatorPolicyTest : public ::testing::TestWithParam<fit_policy> {};

INSTANTIATE_TEST_SUITE_P(AllPolicies, GeneralAllocatorPolicyTest,
                         ::testing::Values(fit_policy::first_fit, fit_policy::best_fit,
                                           fit_policy::next_fit, fit_policy::worst_fit),
                         [](const auto& param_info) {
                           return std::string(to_string(param_info.param));
                         });

TEST_P(GeneralAllocatorPolicyTest, AllocatesAlignedBuffersInsideTheirSegment) {
  heap_block_source source;
  general_allocator allocator(source, with_policy(GetParam(), 4));
  EXPECT_EQ(allocator.policy(), GetParam());
  std::vector<registered_buffer> live;
  for (std::size_t alignment : {1u, 2u, 64u, 128u, 4096u, 65536u}) {
    for (std::size_t n : {1u, 63u, 64u, 65u, 1000u, 5000u}) {
      const registered_buffer b = allocator.allocate(n, alignment);
      ASSERT_TRUE(b) << n << " " << alignment;
      EXPECT_EQ(b.size, n);
      EXPECT_TRUE(aligned(b.data, std::max(alignment, min_alignment)));
      ASSERT_NE(b.segment, nullptr);
      EXPECT_TRUE(b.segment->contains(b.data, b.size));
      EXPECT_EQ(b.tags, nullptr);
      live.push_back(b);
    }
  }
  EXPECT_EQ(allocator.live_allocations(), live.size());
  for (const auto& b : live) EXPECT_EQ(allocator.free(b), free_status::ok);
  EXPECT_EQ(allocator.live_allocations(), 0u);
  EXPECT_EQ(allocator.bytes_in_use(), 0u);
  EXPECT_EQ(allocator.free_ranges(), allocator.blocks());
}

TEST_P(GeneralAllocatorPolicyTest, ReportsWhyARequestFails) {
  heap_block_source source;
  general_allocator allocator(source, with_policy(GetParam()));
  EXPECT_EQ(allocator.try_allocate(0).status, alloc_status::zero_size);
  EXPECT_EQ(allocator.try_allocate(64, 0).status, alloc_status::bad_alignment);
  EXPECT_EQ(allocator.try_allocate(64, 48).status, alloc_status::bad_alignment);
  EXPECT_EQ(allocator.try_allocate(64, 2 * block_size).status, alloc_status::bad_alignment);
  EXPECT_EQ(allocator.try_allocate(block_size + 1).status, alloc_status::too_large);
  EXPECT_FALSE(allocator.allocate(block_size + 1));
  EXPECT_EQ(allocator.blocks(), 0u) << "failed requests obtain nothing";
  const allocation whole = allocator.try_allocate(block_size, block_size);
  ASSERT_EQ(whole.status, alloc_status::ok);
  EXPECT_TRUE(aligned(whole.buffer.data, block_size));
  EXPECT_EQ(allocator.free(whole.buffer), free_status::ok);
}

TEST_P(GeneralAllocatorPolicyTest, CoalescesFreedRangesInAnyOrder) {
  constexpr std::size_t count = 32;
  constexpr std::size_t piece = block_size / count;
  std::vector<std::vector<std::size_t>> orders;
  std::vector<std::size_t> forward(count);
  std::iota(forward.begin(), forward.end(), 0);
  orders.push_back(forward);
  orders.emplace_back(forward.rbegin(), forward.rend());
  std::vector<std::size_t> odd_then_even;
  for (std::size_t i = 1; i < count; i += 2) odd_then_even.push_back(i);
  for (std::size_t i = 0; i < count; i += 2) odd_then_even.push_back(i);
  orders.push_back(odd_then_even);
  std::vector<std::size_t> middle_out;  // frees between two live neighbours first
  for (std::size_t i = 0; i < count / 2; ++i) {
    middle_out.push_back(count / 2 + i);
    middle_out.push_back(count / 2 - 1 - i);
  }
  orders.push_back(middle_out);
  std::mt19937 random(7);
  for (int i = 0; i < 4; ++i) {
    std::shuffle(forward.begin(), forward.end(), random);
    orders.push_back(forward);
  }

  heap_block_source source;
  general_allocator allocator(source, with_policy(GetParam(), 1));  // cap: one block
  for (const auto& order : orders) {
    std::vector<registered_buffer> pieces;
    for (std::size_t i = 0; i < count; ++i) {
      pieces.push_back(allocator.allocate(piece));
      ASSERT_TRUE(pieces.back()) << i;
    }
    EXPECT_EQ(allocator.free_ranges(), 0u);
    EXPECT_FALSE(allocator.allocate(1)) << "the single block is full";
    for (std::size_t i : order) ASSERT_EQ(allocator.free(pieces[i]), free_status::ok);
    EXPECT_EQ(allocator.free_ranges(), 1u);
    // Only a fully coalesced block can satisfy this within the one-block cap.
    const registered_buffer whole = allocator.allocate(block_size);
    ASSERT_TRUE(whole);
    EXPECT_EQ(allocator.free(whole), free_status::ok);
  }
  EXPECT_EQ(allocator.blocks(), 1u);
}

TEST_P(GeneralAllocatorPolicyTest, ExhaustionAtTheCapRecoversAfterFree) {
  heap_block_source source;
  general_allocator allocator(source, with_policy(GetParam(), 2));
  const registered_buffer a = allocator.allocate(block_size);
  const registered_buffer b = allocator.allocate(block_size / 2);
  const registered_buffer c = allocator.allocate(block_size / 2);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(allocator.blocks(), 2u);
  EXPECT_EQ(allocator.try_allocate(64).status, alloc_status::exhausted);
  EXPECT_EQ(source.outstanding_blocks(), 2u) << "the cap stops growth before the source";
  EXPECT_EQ(allocator.free(b), free_status::ok);
  const registered_buffer d = allocator.allocate(block_size / 4);
  ASSERT_TRUE(d);
  EXPECT_TRUE(d.data >= b.data && d.data < b.data + block_size / 2) << "reuses b's range";
  EXPECT_FALSE(allocator.allocate(block_size / 2));
  EXPECT_EQ(allocator.free(a), free_status::ok);
  EXPECT_TRUE(allocator.allocate(block_size / 2));
}

TEST_P(GeneralAllocatorPolicyTest, SourceExhaustionIsReportedAsExhausted) {
  heap_block_source source(1);
  general_allocator allocator(source, with_policy(GetParam(), 8));
  const registered_buffer a = allocator.allocate(block_size);
  ASSERT_TRUE(a);
  EXPECT_EQ(allocator.try_allocate(1).status, alloc_status::exhausted);
  EXPECT_EQ(allocator.free(a), free_status::ok);
  EXPECT_TRUE(allocator.allocate(1));
}

TEST_P(GeneralAllocatorPolicyTest, DetectsDoubleFreeForeignPointersAndWrongSizes) {
  heap_block_source source;
  general_allocator allocator(source, with_policy(GetParam()));
  const registered_buffer a = allocator.allocate(1000);
  const registered_buffer b = allocator.allocate(1000);
  ASSERT_TRUE(a && b);

  registered_buffer wrong_size = a;
  wrong_size.size = 999;
  EXPECT_EQ(allocator.free(wrong_size), free_status::size_mismatch);
  registered_buffer inside = a;
  inside.data += 64;
  EXPECT_EQ(allocator.free(inside), free_status::not_allocated);
  std::byte on_stack[64];
  EXPECT_EQ(allocator.free({on_stack, sizeof on_stack, nullptr, nullptr}),
            free_status::not_allocated);
  EXPECT_EQ(allocator.free(registered_buffer{}), free_status::not_allocated);
  EXPECT_EQ(allocator.live_allocations(), 2u) << "refused frees change nothing";

  EXPECT_EQ(allocator.free(a), free_status::ok);
  EXPECT_EQ(allocator.free(a), free_status::not_allocated);
  EXPECT_EQ(allocator.live_allocations(), 1u);
  EXPECT_EQ(allocator.free(b), free_status::ok);
  EXPECT_EQ(allocator.free_ranges(), 1u);
  EXPECT_STREQ(to_string(free_status::not_allocated), "not_allocated");
}

TEST_P(GeneralAllocatorPolicyTest, GrowsOneBlockAtATimeAndReturnsBlocksOnDestruction) {
  heap_block_source source;
  {
    general_allocator allocator(source, with_policy(GetParam(), 16));
    EXPECT_EQ(allocator.blocks(), 0u);
    std::vector<registered_buffer> live;
    for (std::size_t i = 1; i <= 5; ++i) {
      live.push_back(allocator.allocate(block_size * 3 / 4));
      ASSERT_TRUE(live.back());
      EXPECT_EQ(allocator.blocks(), i);
      EXPECT_EQ(source.blocks_obtained(), i);
    }
    EXPECT_EQ(allocator.bytes_in_use(), 5 * (block_size * 3 / 4));
    // Five quarter-block requests fit in the five quarters left: no growth.
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(allocator.allocate(block_size / 4));
    EXPECT_EQ(allocator.blocks(), 5u);
    EXPECT_EQ(allocator.free_ranges(), 0u);
    EXPECT_EQ(allocator.free(live[2]), free_status::ok);
  }  // destroyed with live buffers: blocks still go back
  EXPECT_EQ(source.outstanding_blocks(), 0u);
  EXPECT_EQ(source.bad_releases(), 0u);
}

// One block laid out as | A 1K | x | C 4K | x | E 2K | x | rest |, then A, C and E freed: three
// holes of different sizes in address order, so each policy's pick is observable.
struct holes {
  std::byte* a;
  std::byte* c;
  std::byte* e;
};

holes make_holes(general_allocator& allocator) {
  const std::size_t sizes[] = {kib, 64, 4 * kib, 64, 2 * kib, 64};
  std::vector<registered_buffer> pieces;
  for (std::size_t n : sizes) pieces.push_back(allocator.allocate(n));
  std::size_t used = 0;
  for (std::size_t n : sizes) used += n;
  pieces.push_back(allocator.allocate(block_size - used));
  for (std::size_t i = 1; i < pieces.size(); ++i) {
    EXPECT_EQ(pieces[i].data, pieces[i - 1].data + pieces[i - 1].size) << "laid out in order";
  }
  EXPECT_EQ(allocator.free(pieces[0]), free_status::ok);
  EXPECT_EQ(allocator.free(pieces[2]), free_status::ok);
  EXPECT_EQ(allocator.free(pieces[4]), free_status::ok);
  EXPECT_EQ(allocator.free_ranges(), 3u);
  return {pieces[0].data, pieces[2].data, pieces[4].data};
}

TEST(GeneralAllocatorTest, FirstFitTakesTheLowestHoleThatFits) {
  heap_block_source source;
  general_allocator allocator(source, with_policy(fit_policy::first_fit));
  const holes h = make_holes(allocator);
  EXPECT_EQ(allocator.allocate(1536).data, h.c);
  EXPECT_EQ(allocator.allocate(512).data, h.a);
  EXPECT_EQ(allocator.allocate(512).data, h.a + 512);
}

TEST(GeneralAllocatorTest, BestFitTakesTheSmallestHoleThatFits) {
  heap_block_source source;
  general_allocator allocator(source, with_policy(fit_policy::best_fit));
  const holes h = make_holes(allocator);
  EXPECT_EQ(allocator.allocate(1536).data, h.e);
  EXPECT_EQ(allocator.allocate(512).data, h.e + 1536) << "the 512-byte rest of E";
  EXPECT_EQ(allocator.allocate(700).data, h.a);
}

TEST(GeneralAllocatorTest, WorstFitTakesTheLargestHole) {
  heap_block_source source;
  general_allocator allocator(source, with_policy(fit_policy::worst_fit));
  const holes h = make_holes(allocator);
  EXPECT_EQ(allocator.allocate(512).data, h.c);
  EXPECT_EQ(allocator.allocate(1024).data, h.c + 512);  // C's rest 3.5K > E 2K
  EXPECT_EQ(allocator.allocate(1024).data, h.c + 1536);  // C's rest 2.5K > E 2K
  EXPECT_EQ(allocator.allocate(1024).data, h.e);         // E 2K > C's rest 1.5K
}

TEST(GeneralAllocatorTest, NextFitResumesWhereThePreviousAllocationEnded) {
  heap_block_source source;
  general_allocator allocator(source, with_policy(fit_policy::next_fit));
  const holes h = make_holes(allocator);
  // The last allocation ended at the block's end: the search wraps to the lowest hole.
  const registered_buffer first = allocator.allocate(512);
  EXPECT_EQ(first.data, h.a);
  EXPECT_EQ(allocator.free(first), free_status::ok);  // A is whole again, but behind the rover
  EXPECT_EQ(allocator.allocate(512).data, h.c) << "first fit would have taken A again";
  EXPECT_EQ(allocator.allocate(3584).data, h.c + 512) << "the rest of C";
  EXPECT_EQ(allocator.allocate(1024).data, h.e) << "best fit would have taken A";
  EXPECT_EQ(allocator.allocate(1024).data, h.e + 1024);
  EXPECT_EQ(allocator.allocate(1024).data, h.a) << "nothing after E: wrapped around";
}

TEST(GeneralAllocatorTest, RejectsBadConfigurationNamingTheField) {
  heap_block_source source;
  general_allocator_config config;
  config.max_bytes = block_size - 1;
  try {
    general_allocator allocator(source, config);
    ADD_FAILURE() << "no config_error";
  } catch (const config_error& e) {
    EXPECT_STREQ(e.what(),
                 "general_allocator: max_bytes 2097151 must be at least 2097152 (one block)");
  }
  config = {};
  config.policy = static_cast<fit_policy>(9);
  EXPECT_THROW(general_allocator(source, config), config_error);
  config = {};
  config.max_bytes = 2 * block_size;
  config.initial_blocks = 3;
  try {
    general_allocator allocator(source, config);
    ADD_FAILURE() << "no config_error";
  } catch (const config_error& e) {
    EXPECT_NE(std::string(e.what()).find("initial_blocks 3"), std::string::npos) << e.what();
  }
  EXPECT_EQ(source.outstanding_blocks(), 0u);

  heap_block_source small(2);
  config = {};
  config.initial_blocks = 3;
  EXPECT_THROW(general_allocator(small, config), seriema::error);
  EXPECT_EQ(small.outstanding_blocks(), 0u) << "a failed construction keeps no block";
  config.initial_blocks = 2;
  general_allocator allocator(small, config);
  EXPECT_EQ(allocator.blocks(), 2u);
  EXPECT_EQ(allocator.free_ranges(), 2u);
}

// Hands out adjacent blocks of one region, each with its own segment (as an arena may), so that
// coalescing across a block boundary would be possible and must still not happen.
class adjacent_block_source final : public block_source {
 public:
  static constexpr std::size_t count = 4;
  adjacent_block_source()
      : region_(static_cast<std::byte*>(std::aligned_alloc(block_size, count * block_size))) {
    for (std::size_t i = 0; i < count; ++i) {
      segments_[i].base = region_ + i * block_size;
      segments_[i].size = block_size;
    }
  }
  ~adjacent_block_source() override { std::free(region_); }
  memory_block allocate_block() override {
    if (next_ == count) return {};
    const std::size_t i = next_++;
    return {segments_[i].base, block_size, &segments_[i]};
  }
  void release_block(memory_block) override {}

 private:
  std::byte* region_;
  registered_segment segments_[count];
  std::size_t next_ = 0;
};

TEST(GeneralAllocatorTest, NeverCoalescesAcrossBlocks) {
  adjacent_block_source source;
  general_allocator allocator(source, with_policy(fit_policy::first_fit, 4));
  std::vector<registered_buffer> whole;
  for (int i = 0; i < 4; ++i) whole.push_back(allocator.allocate(block_size));
  for (const auto& b : whole) ASSERT_TRUE(b);
  // Block 1 is freed between free neighbours on both sides.
  for (std::size_t i : {0u, 2u, 1u, 3u}) EXPECT_EQ(allocator.free(whole[i]), free_status::ok);
  EXPECT_EQ(whole[1].data, whole[0].data + block_size) << "the blocks are adjacent";
  EXPECT_EQ(allocator.free_ranges(), 4u) << "one range per block, even if blocks are adjacent";
  for (int i = 0; i < 4; ++i) {
    const registered_buffer again = allocator.allocate(block_size);
    ASSERT_TRUE(again);
    EXPECT_EQ(again.segment->base, again.data);
  }
  EXPECT_FALSE(allocator.allocate(64));
}

}  // namespace
}  // namespace seriema::transfer

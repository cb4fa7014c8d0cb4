// Tests of linear_circular_allocator: segments carved linearly inside units, alignment, moving to
// the next unit only when its tags are complete, growth, exhaustion and configuration errors.
#include <gtest/gtest.h>

#include <cstdint>
#include <seriema/base/error.hpp>
#include <seriema/transfer/allocators.hpp>
#include <seriema/transfer/heap_block_source.hpp>
#include <set>
#include <string>
#include <vector>

namespace seriema::transfer {
namespace {

bool aligned(const void* p, std::size_t alignment) {
  return reinterpret_cast<std::uintptr_t>(p) % alignment == 0;
}

linear_circular_allocator_config small_units(std::size_t unit_size, std::size_t units) {
  linear_circular_allocator_config config;
  config.unit_size = unit_size;
  config.initial_units = units;
  config.max_units = units;
  return config;
}

TEST(LinearCircularAllocatorTest, CarvesConsecutiveSegmentsInsideOneUnit) {
  heap_block_source source;
  linear_circular_allocator allocator(source, small_units(4096, 2));
  const registered_buffer a = allocator.allocate(100);
  const registered_buffer b = allocator.allocate(64);
  const registered_buffer c = allocator.allocate(1);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a.size, 100u);
  EXPECT_EQ(b.size, 64u);
  EXPECT_EQ(c.size, 1u);
  EXPECT_EQ(b.data, a.data + 128) << "100 bytes rounded up to the next cache line";
  EXPECT_EQ(c.data, b.data + 64);
  EXPECT_EQ(a.tags, b.tags) << "segments of a unit share its tags";
  EXPECT_EQ(a.tags, c.tags);
  EXPECT_TRUE(a.segment->contains(a.data, 4096));
}

TEST(LinearCircularAllocatorTest, FillsAUnitCompletelyBeforeMovingOn) {
  heap_block_source source;
  linear_circular_allocator allocator(source, small_units(4096, 2));
  const registered_buffer first = allocator.allocate(64);
  for (int i = 1; i < 64; ++i) {
    const registered_buffer b = allocator.allocate(64);
    ASSERT_TRUE(b);
    EXPECT_EQ(b.data, first.data + 64 * i);
    EXPECT_EQ(b.tags, first.tags);
  }
  const registered_buffer next = allocator.allocate(64);
  ASSERT_TRUE(next);
  EXPECT_NE(next.tags, first.tags) << "the 65th segment opens the next unit";
  EXPECT_FALSE(next.data >= first.data && next.data < first.data + 4096);
}

TEST(LinearCircularAllocatorTest, HonoursAlignment) {
  heap_block_source source;
  linear_circular_allocator allocator(source, small_units(64 * 1024, 4));
  ASSERT_TRUE(allocator.allocate(10));
  for (std::size_t alignment : {1u, 8u, 64u, 128u, 512u, 4096u, 16384u}) {
    const registered_buffer b = allocator.allocate(100, alignment);
    ASSERT_TRUE(b) << alignment;
    EXPECT_TRUE(aligned(b.data, alignment)) << alignment;
    EXPECT_TRUE(aligned(b.data, min_alignment)) << alignment;
  }
}

TEST(LinearCircularAllocatorTest, ReportsWhyARequestFails) {
  heap_block_source source;
  linear_circular_allocator allocator(source, small_units(4096, 2));
  EXPECT_EQ(allocator.try_allocate(0).status, alloc_status::zero_size);
  EXPECT_EQ(allocator.try_allocate(8, 0).status, alloc_status::bad_alignment);
  EXPECT_EQ(allocator.try_allocate(8, 3).status, alloc_status::bad_alignment);
  EXPECT_EQ(allocator.try_allocate(8, 96).status, alloc_status::bad_alignment);
  EXPECT_EQ(allocator.try_allocate(8, 2 * block_size).status, alloc_status::bad_alignment);
  EXPECT_EQ(allocator.try_allocate(4097).status, alloc_status::too_large);
  EXPECT_FALSE(allocator.allocate(4097));
  // Units are 4096 apart, so each is 4096-aligned: a whole-unit segment at 4096 alignment fits,
  // but at 8192 alignment it may need up to 4096 bytes of padding.
  EXPECT_EQ(allocator.unit_alignment(), 4096u);
  EXPECT_EQ(allocator.try_allocate(4096, 8192).status, alloc_status::too_large);
  const allocation whole = allocator.try_allocate(4096, 4096);
  EXPECT_EQ(whole.status, alloc_status::ok);
  EXPECT_EQ(whole.buffer.size, 4096u);
  EXPECT_STREQ(to_string(alloc_status::too_large), "too_large");
}

TEST(LinearCircularAllocatorTest, MovesToTheNextUnitOnlyWhenItsTagsAreComplete) {
  heap_block_source source;
  linear_circular_allocator allocator(source, small_units(4096, 2));
  completion_counter transmitter;

  const registered_buffer a1 = allocator.allocate(3000);
  ASSERT_TRUE(a1.tags->add({&transmitter, 0}));
  const registered_buffer a2 = allocator.allocate(1000);  // still fits in unit A
  ASSERT_TRUE(a2);
  EXPECT_EQ(a2.tags, a1.tags);
  ASSERT_TRUE(a2.tags->add({&transmitter, 1}));  // unit A now waits for ticket 1

  const registered_buffer b1 = allocator.allocate(3000);  // opens unit B
  ASSERT_TRUE(b1);
  EXPECT_NE(b1.tags, a1.tags);
  ASSERT_TRUE(b1.tags->add({&transmitter, 2}));

  const allocation failed = allocator.try_allocate(2000);
  EXPECT_EQ(failed.status, alloc_status::exhausted) << "A busy, cap reached";
  const registered_buffer small = allocator.allocate(500);
  ASSERT_TRUE(small) << "a failed request must not close the open unit";
  EXPECT_EQ(small.tags, b1.tags);

  transmitter.completed_tickets.store(1);  // ticket 0 only: A still waits for ticket 1
  EXPECT_EQ(allocator.try_allocate(2000).status, alloc_status::exhausted);
  transmitter.completed_tickets.store(2);
  const registered_buffer reused = allocator.allocate(2000);
  ASSERT_TRUE(reused);
  EXPECT_EQ(reused.data, a1.data) << "unit A reopened from its start";
  EXPECT_EQ(reused.tags, a1.tags);
  // Reopening cleared A's tags: moving the counter back (only a test may) leaves it complete.
  transmitter.completed_tickets.store(0);
  EXPECT_TRUE(reused.tags->all_complete());
}

TEST(LinearCircularAllocatorTest, GrowsAfterTheOpenUnitAndKeepsOlderUnitsInOrder) {
  heap_block_source source;
  linear_circular_allocator_config config;
  config.unit_size = 1024;
  config.initial_units = 2;
  config.growth = growth_policy::exponential;
  config.max_units = 8;
  linear_circular_allocator allocator(source, config);
  completion_counter transmitter;

  std::vector<std::byte*> unit_starts;
  std::uint64_t ticket = 0;
  // Fill 8 units with one busy 1024-byte segment each: the ring grows 2 -> 4 -> 8.
  for (int i = 0; i < 8; ++i) {
    const registered_buffer b = allocator.allocate(1024);
    ASSERT_TRUE(b) << i;
    ASSERT_TRUE(b.tags->add({&transmitter, ticket++}));
    unit_starts.push_back(b.data);
  }
  EXPECT_EQ(allocator.units(), 8u);
  EXPECT_EQ(std::set<std::byte*>(unit_starts.begin(), unit_starts.end()).size(), 8u);
  EXPECT_FALSE(allocator.allocate(64));

  // Completing in order reopens the units in the order they were first filled.
  for (std::size_t i = 0; i < 8; ++i) {
    transmitter.completed_tickets.store(i + 1);
    const registered_buffer b = allocator.allocate(1024);
    ASSERT_TRUE(b) << i;
    EXPECT_EQ(b.data, unit_starts[i]) << i;
    ASSERT_TRUE(b.tags->add({&transmitter, ticket++}));
  }
}

TEST(LinearCircularAllocatorTest, LinearGrowthCountsBlocks) {
  heap_block_source source;
  linear_circular_allocator_config config;
  config.unit_size = 512 * 1024;  // 4 units per block
  config.initial_units = 1;
  config.growth = growth_policy::linear;
  config.linear_growth_units = 4;
  config.max_units = 9;
  completion_counter never;
  {
    linear_circular_allocator allocator(source, config);
    EXPECT_EQ(allocator.blocks(), 1u);
    std::vector<std::size_t> units;
    while (const registered_buffer b = allocator.allocate(512 * 1024)) {
      ASSERT_TRUE(b.tags->add({&never, 0}));
      units.push_back(allocator.units());
      ASSERT_LE(units.size(), 9u) << "the cap must stop growth";
    }
    EXPECT_EQ(units, (std::vector<std::size_t>{1, 5, 5, 5, 5, 9, 9, 9, 9}));
    EXPECT_EQ(allocator.blocks(), 3u);
    EXPECT_EQ(source.outstanding_blocks(), 3u);
  }
  EXPECT_EQ(source.outstanding_blocks(), 0u);
  EXPECT_EQ(source.bad_releases(), 0u);
}

TEST(LinearCircularAllocatorTest, RejectsBadConfigurationNamingTheAllocator) {
  heap_block_source source;
  linear_circular_allocator_config config;
  config.unit_size = 0;
  try {
    linear_circular_allocator allocator(source, config);
    ADD_FAILURE() << "no config_error";
  } catch (const config_error& e) {
    EXPECT_STREQ(e.what(), "linear_circular_allocator: unit_size 0 must be in 1..2097152");
  }
  config = {};
  config.max_bytes = 0;
  EXPECT_THROW(linear_circular_allocator(source, config), config_error);
  EXPECT_EQ(source.outstanding_blocks(), 0u);

  heap_block_source empty(0);
  EXPECT_THROW(linear_circular_allocator(empty, linear_circular_allocator_config{}),
               seriema::error);
}

}  // namespace
}  // namespace seriema::transfer

// Tests of circular_allocator: unit hand-out, recycling by completion tags, FIFO reuse, growth
// (linear and exponential) up to the cap, exhaustion, configuration errors; over heap blocks.
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

constexpr std::size_t mib = std::size_t{1} << 20;

bool aligned(const void* p, std::size_t alignment) {
  return reinterpret_cast<std::uintptr_t>(p) % alignment == 0;
}

// Marks `buffer` as used by an operation of `counter` with `ticket` (what a transmitter does).
void tag(const registered_buffer& buffer, const completion_counter& counter, std::uint64_t ticket) {
  ASSERT_NE(buffer.tags, nullptr);
  ASSERT_TRUE(buffer.tags->add({&counter, ticket}));
}

std::string config_error_message(const circular_allocator_config& config) {
  heap_block_source source;
  try {
    circular_allocator allocator(source, config);
  } catch (const config_error& e) {
    EXPECT_EQ(source.outstanding_blocks(), 0u);
    return e.what();
  }
  return "(no config_error)";
}

TEST(CircularAllocatorTest, HandsOutDistinctAlignedUnitsInsideTheirSegment) {
  heap_block_source source;
  circular_allocator_config config;
  config.unit_size = 100;  // not a multiple of 64: units still start on cache lines
  config.initial_units = 50;
  config.max_units = 50;
  circular_allocator allocator(source, config);
  EXPECT_EQ(allocator.units(), 50u);
  EXPECT_EQ(allocator.unit_size(), 100u);
  EXPECT_GE(allocator.unit_alignment(), min_alignment);

  std::set<std::uintptr_t> starts;
  std::set<const unit_tags*> tags;
  for (int i = 0; i < 50; ++i) {
    const registered_buffer b = allocator.allocate();
    ASSERT_TRUE(b);
    EXPECT_EQ(b.size, 100u);
    EXPECT_TRUE(aligned(b.data, min_alignment));
    EXPECT_TRUE(aligned(b.data, allocator.unit_alignment()));
    ASSERT_NE(b.segment, nullptr);
    EXPECT_TRUE(b.segment->contains(b.data, b.size));
    EXPECT_EQ(b.segment->memh, nullptr);
    ASSERT_NE(b.tags, nullptr);
    EXPECT_TRUE(b.tags->all_complete());
    starts.insert(reinterpret_cast<std::uintptr_t>(b.data));
    tags.insert(b.tags);
  }
  EXPECT_EQ(starts.size(), 50u);
  EXPECT_EQ(tags.size(), 50u);
  // Non-overlap: sorted starts at least a unit apart.
  std::uintptr_t previous = 0;
  for (auto s : starts) {
    if (previous != 0) {
      EXPECT_GE(s - previous, 100u);
    }
    previous = s;
  }
}

TEST(CircularAllocatorTest, UnitsNeverStraddleBlocks) {
  heap_block_source source;
  circular_allocator_config config;
  config.unit_size = 700 * 1024;  // 2 units per 2 MiB block, 648 KiB left over
  config.initial_units = 5;
  config.max_units = 5;
  circular_allocator allocator(source, config);
  EXPECT_EQ(allocator.blocks(), 3u);
  EXPECT_EQ(source.outstanding_blocks(), 3u);
  for (int i = 0; i < 5; ++i) {
    const registered_buffer b = allocator.allocate();
    ASSERT_TRUE(b);
    EXPECT_TRUE(b.segment->contains(b.data, b.size));
    const auto offset = static_cast<std::size_t>(b.data - b.segment->base);
    EXPECT_LE(offset + b.size, block_size);
  }
}

TEST(CircularAllocatorTest, RecyclesAUnitOnlyAfterItsTagsComplete) {
  heap_block_source source;
  circular_allocator_config config;
  config.unit_size = 4096;
  config.initial_units = 4;
  config.max_units = 4;
  circular_allocator allocator(source, config);
  completion_counter transmitter;

  std::vector<std::byte*> first_round;
  for (std::uint64_t t = 0; t < 4; ++t) {
    const registered_buffer b = allocator.allocate();
    ASSERT_TRUE(b);
    tag(b, transmitter, t);  // unit t completes when completed_tickets > t
    first_round.push_back(b.data);
  }
  EXPECT_FALSE(allocator.allocate()) << "cap reached and every unit busy";
  EXPECT_FALSE(allocator.allocate()) << "failing must not move the ring";

  transmitter.completed_tickets.store(1);  // unit 0 only
  registered_buffer b = allocator.allocate();
  ASSERT_TRUE(b);
  EXPECT_EQ(b.data, first_round[0]);
  EXPECT_TRUE(b.tags->all_complete());
  tag(b, transmitter, 10);
  EXPECT_FALSE(allocator.allocate()) << "unit 1 still busy";

  transmitter.completed_tickets.store(3);  // units 1 and 2
  b = allocator.allocate();
  ASSERT_TRUE(b);
  EXPECT_EQ(b.data, first_round[1]);
  tag(b, transmitter, 10);
  b = allocator.allocate();
  ASSERT_TRUE(b);
  EXPECT_EQ(b.data, first_round[2]);
  tag(b, transmitter, 10);
  EXPECT_FALSE(allocator.allocate()) << "unit 3 still busy";
  EXPECT_EQ(allocator.units(), 4u);
}

TEST(CircularAllocatorTest, AUnitWaitsForEveryTransmitterThatUsedIt) {
  heap_block_source source;
  circular_allocator_config config;
  config.unit_size = 256;
  config.initial_units = 1;
  config.max_units = 1;
  circular_allocator allocator(source, config);
  completion_counter a;
  completion_counter b;

  const registered_buffer unit = allocator.allocate();
  ASSERT_TRUE(unit);
  tag(unit, a, 0);
  tag(unit, b, 5);
  a.completed_tickets.store(1);
  EXPECT_FALSE(allocator.allocate()) << "b has not completed ticket 5";
  b.completed_tickets.store(5);
  EXPECT_FALSE(allocator.allocate()) << "completed_tickets must exceed the ticket";
  b.completed_tickets.store(6);
  EXPECT_EQ(allocator.allocate().data, unit.data);
}

TEST(CircularAllocatorTest, ClearsTagsWhenHandingAUnitOut) {
  heap_block_source source;
  circular_allocator_config config;
  config.unit_size = 256;
  config.initial_units = 1;
  config.max_units = 1;
  circular_allocator allocator(source, config);
  completion_counter transmitter;
  const registered_buffer unit = allocator.allocate();
  tag(unit, transmitter, 3);
  transmitter.completed_tickets.store(4);
  const registered_buffer again = allocator.allocate();
  ASSERT_EQ(again.data, unit.data);
  // Only a test can move a counter backwards: had the old tag survived, the unit would be busy.
  transmitter.completed_tickets.store(0);
  EXPECT_TRUE(again.tags->all_complete());
}

TEST(CircularAllocatorTest, AnUntaggedUnitIsReusedWhenTheRingWraps) {
  heap_block_source source;
  circular_allocator_config config;
  config.unit_size = 512;
  config.initial_units = 2;
  config.max_units = 2;
  circular_allocator allocator(source, config);
  const registered_buffer first = allocator.allocate();
  const registered_buffer second = allocator.allocate();
  ASSERT_TRUE(first && second);
  EXPECT_NE(first.data, second.data);
  EXPECT_EQ(allocator.allocate().data, first.data);
  EXPECT_EQ(allocator.allocate().data, second.data);
}

TEST(CircularAllocatorTest, ReusesUnitsInFifoOrder) {
  heap_block_source source;
  circular_allocator_config config;
  config.unit_size = 1024;
  config.initial_units = 8;
  config.max_units = 8;
  circular_allocator allocator(source, config);
  completion_counter transmitter;
  std::vector<std::byte*> order;
  for (std::uint64_t i = 0; i < 8; ++i) {
    const registered_buffer b = allocator.allocate();
    tag(b, transmitter, i);
    order.push_back(b.data);
  }
  transmitter.completed_tickets.store(100);
  for (int round = 0; round < 3; ++round) {
    for (std::size_t i = 0; i < 8; ++i) {
      const registered_buffer b = allocator.allocate();
      ASSERT_TRUE(b);
      EXPECT_EQ(b.data, order[i]) << "round " << round << " unit " << i;
    }
  }
}

TEST(CircularAllocatorTest, GrowthInsertsFreshUnitsBeforeTheBusyOnesKeepingTheirOrder) {
  heap_block_source source;
  circular_allocator_config config;
  config.unit_size = 1024;
  config.initial_units = 2;
  config.growth = growth_policy::linear;
  config.linear_growth_units = 2;
  config.max_units = 4;
  circular_allocator allocator(source, config);
  completion_counter transmitter;

  const registered_buffer a = allocator.allocate();
  const registered_buffer b = allocator.allocate();
  tag(a, transmitter, 0);
  tag(b, transmitter, 1);
  // The ring is back at a, which is busy: it grows by two fresh units, handed out first.
  const registered_buffer c = allocator.allocate();
  const registered_buffer d = allocator.allocate();
  ASSERT_TRUE(c && d);
  EXPECT_EQ(allocator.units(), 4u);
  std::set<std::byte*> seen{a.data, b.data, c.data, d.data};
  EXPECT_EQ(seen.size(), 4u);
  tag(c, transmitter, 2);
  tag(d, transmitter, 3);
  EXPECT_FALSE(allocator.allocate()) << "at the cap, a still busy";

  transmitter.completed_tickets.store(4);
  EXPECT_EQ(allocator.allocate().data, a.data);
  EXPECT_EQ(allocator.allocate().data, b.data);
  EXPECT_EQ(allocator.allocate().data, c.data);
  EXPECT_EQ(allocator.allocate().data, d.data);
  EXPECT_EQ(allocator.allocate().data, a.data);
}

// Keeps every unit busy so that each allocate() past the ring's size forces growth; returns the
// number of units after each growth.
std::vector<std::size_t> grow_until_capped(circular_allocator& allocator,
                                           const completion_counter& never_completes,
                                           std::vector<std::size_t>* blocks_after) {
  std::vector<std::size_t> sizes{allocator.units()};
  blocks_after->push_back(allocator.blocks());
  // Bounded so that an allocator that never reports the cap fails instead of hanging.
  for (std::size_t i = 0; i < 4 * allocator.max_units(); ++i) {
    const registered_buffer b = allocator.allocate();
    if (!b) break;
    EXPECT_TRUE(b.tags->add({&never_completes, 0}));
    if (allocator.units() != sizes.back()) {
      sizes.push_back(allocator.units());
      blocks_after->push_back(allocator.blocks());
    }
  }
  return sizes;
}

TEST(CircularAllocatorTest, ExponentialGrowthDoublesUpToTheCap) {
  heap_block_source source;
  circular_allocator_config config;
  config.unit_size = mib;  // two units per block
  config.initial_units = 2;
  config.growth = growth_policy::exponential;
  config.max_units = 20;
  completion_counter never;
  {
    circular_allocator allocator(source, config);
    std::vector<std::size_t> blocks;
    const auto sizes = grow_until_capped(allocator, never, &blocks);
    EXPECT_EQ(sizes, (std::vector<std::size_t>{2, 4, 8, 16, 20}));
    EXPECT_EQ(blocks, (std::vector<std::size_t>{1, 2, 4, 8, 10}));
    EXPECT_EQ(source.blocks_obtained(), 10u);
    EXPECT_EQ(source.outstanding_blocks(), 10u);
  }
  EXPECT_EQ(source.outstanding_blocks(), 0u) << "the destructor returns every block";
  EXPECT_EQ(source.bad_releases(), 0u);
}

TEST(CircularAllocatorTest, LinearGrowthAddsAFixedNumberOfUnits) {
  heap_block_source source;
  circular_allocator_config config;
  config.unit_size = mib;
  config.initial_units = 2;
  config.growth = growth_policy::linear;
  config.linear_growth_units = 3;
  config.max_units = 10;
  completion_counter never;
  {
    circular_allocator allocator(source, config);
    std::vector<std::size_t> blocks;
    const auto sizes = grow_until_capped(allocator, never, &blocks);
    EXPECT_EQ(sizes, (std::vector<std::size_t>{2, 5, 8, 10}));
    // Units are carved in order, so a block is shared across growths: ceil(units / 2) blocks.
    EXPECT_EQ(blocks, (std::vector<std::size_t>{1, 3, 4, 5}));
    EXPECT_EQ(source.blocks_obtained(), 5u);
  }
  EXPECT_EQ(source.outstanding_blocks(), 0u);
}

TEST(CircularAllocatorTest, MaxBytesCapsTheRing) {
  heap_block_source source;
  circular_allocator_config config;
  config.unit_size = 64 * 1024;
  config.initial_units = 1;
  config.max_bytes = 256 * 1024;  // 4 units
  circular_allocator allocator(source, config);
  EXPECT_EQ(allocator.max_units(), 4u);
  completion_counter never;
  int handed_out = 0;
  while (const registered_buffer b = allocator.allocate()) {
    tag(b, never, 0);
    ++handed_out;
    ASSERT_LE(handed_out, 4);
  }
  EXPECT_EQ(handed_out, 4);
  EXPECT_EQ(allocator.units(), 4u);
}

TEST(CircularAllocatorTest, SourceExhaustionFailsAllocationAndRecovers) {
  heap_block_source source(1);  // one block: 2 units of 1 MiB
  circular_allocator_config config;
  config.unit_size = mib;
  config.initial_units = 2;
  circular_allocator allocator(source, config);
  completion_counter transmitter;
  const registered_buffer a = allocator.allocate();
  const registered_buffer b = allocator.allocate();
  tag(a, transmitter, 0);
  tag(b, transmitter, 0);
  EXPECT_FALSE(allocator.allocate()) << "no block for growth";
  EXPECT_GE(source.refused_allocations(), 1u);
  EXPECT_EQ(allocator.units(), 2u);
  transmitter.completed_tickets.store(1);
  EXPECT_EQ(allocator.allocate().data, a.data);
  EXPECT_EQ(allocator.allocate().data, b.data);
}

TEST(CircularAllocatorTest, ConstructionFailsCleanlyWhenTheSourceCannotSupplyInitialUnits) {
  heap_block_source source(2);
  circular_allocator_config config;
  config.unit_size = mib;
  config.initial_units = 6;  // needs 3 blocks
  EXPECT_THROW(circular_allocator(source, config), seriema::error);
  EXPECT_EQ(source.outstanding_blocks(), 0u);
  EXPECT_EQ(source.blocks_obtained(), 2u);
}

TEST(CircularAllocatorTest, RejectsBadConfigurationNamingTheField) {
  circular_allocator_config c;
  c.unit_size = 0;
  EXPECT_EQ(config_error_message(c), "circular_allocator: unit_size 0 must be in 1..2097152");
  c.unit_size = block_size + 1;
  EXPECT_EQ(config_error_message(c), "circular_allocator: unit_size 2097153 must be in 1..2097152");

  c = {};
  c.initial_units = 0;
  EXPECT_NE(config_error_message(c).find("initial_units 0"), std::string::npos);
  c = {};
  c.linear_growth_units = 0;
  EXPECT_NE(config_error_message(c).find("linear_growth_units 0"), std::string::npos);
  c = {};
  c.growth = static_cast<growth_policy>(7);
  EXPECT_NE(config_error_message(c).find("growth 7"), std::string::npos);
  c = {};
  c.max_units = 4;
  c.initial_units = 5;
  EXPECT_NE(config_error_message(c).find("max_units 4"), std::string::npos);
  c = {};
  c.unit_size = 4096;
  c.initial_units = 2;
  c.max_bytes = 4096;
  EXPECT_NE(config_error_message(c).find("max_bytes 4096"), std::string::npos);

  heap_block_source source;
  EXPECT_NO_THROW(circular_allocator(source, circular_allocator_config{}));
  EXPECT_EQ(source.outstanding_blocks(), 0u);
}

TEST(CircularAllocatorTest, UnitOfAWholeBlock) {
  heap_block_source source;
  circular_allocator_config config;
  config.unit_size = block_size;
  config.initial_units = 3;
  config.max_units = 3;
  circular_allocator allocator(source, config);
  EXPECT_EQ(allocator.blocks(), 3u);
  EXPECT_EQ(allocator.unit_alignment(), block_size);
  const registered_buffer b = allocator.allocate();
  ASSERT_TRUE(b);
  EXPECT_EQ(b.size, block_size);
  EXPECT_TRUE(aligned(b.data, block_size));
}

}  // namespace
}  // namespace seriema::transfer

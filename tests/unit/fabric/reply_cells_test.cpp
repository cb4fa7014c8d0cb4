// Reply cells: one writer per generation, stale/duplicate/mis-sized replies write nothing, an
// abandoned cell drops its late reply, cells are reused only once free, and racing writers
// (threads standing in for processes) deliver exactly one value.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <seriema/fabric/detail/reply_cells.hpp>
#include <thread>
#include <vector>

using namespace seriema::fabric;

namespace {

template <class T>
std::span<const std::byte> bytes_of(const T& value) {
  return {reinterpret_cast<const std::byte*>(&value), sizeof value};
}

// A region of first + count cells, the last `count` of which the table owns.
struct cells_fixture {
  explicit cells_fixture(std::uint32_t count, std::uint32_t first = 0)
      : cells(first + count),
        region(new (std::align_val_t{64}) std::byte[cells * reply_cell::size]{}) {
    table.attach(region.get() + std::size_t{first} * reply_cell::size, first, count);
  }
  struct aligned_delete {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::uint32_t cells;
  std::unique_ptr<std::byte[], aligned_delete> region;
  reply_cell_table table;
  std::span<std::byte> bytes() { return {region.get(), cells * reply_cell::size}; }
};

}  // namespace

TEST(ReplyCells, AValueWrittenByTheCalleeIsReadOnceAndFreesTheCell) {
  cells_fixture f(4);
  auto [slot, generation] = *f.table.open(sizeof(std::uint64_t), 1);
  EXPECT_NE(slot & reply_cell::index_bit, 0u);
  std::uint64_t out = 0;
  EXPECT_EQ(f.table.collect(slot, generation, &out, sizeof out), outcome::pending);
  // The callee knows only the region and the header's (slot, generation).
  std::byte* cell = reply_cell::in_region(f.bytes(), slot);
  ASSERT_NE(cell, nullptr);
  const std::uint64_t value = 0x1234'5678'9abc'def0;
  EXPECT_TRUE(reply_cell::write(cell, generation, bytes_of(value), outcome::done));
  EXPECT_FALSE(reply_cell::write(cell, generation, bytes_of(value), outcome::done)) << "duplicate";
  EXPECT_EQ(f.table.collect(slot, generation, &out, sizeof out), outcome::done);
  EXPECT_EQ(out, value);
  // Freed: four opens succeed again, a fifth finds none.
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(f.table.open(8, 1).has_value());
  EXPECT_FALSE(f.table.open(8, 1).has_value());
}

TEST(ReplyCells, ACellNeverOpenedTakesNoReply) {
  cells_fixture f(2);
  std::byte* fresh = reply_cell::in_region(f.bytes(), reply_cell::index_bit | 1);
  EXPECT_FALSE(reply_cell::write(fresh, 0, {}, outcome::threw)) << "generation 0 failure on a fresh cell";
  EXPECT_FALSE(reply_cell::write(fresh, 0, {}, outcome::done)) << "generation 0, empty value";
  auto [slot, generation] = *f.table.open(8, 1);
  EXPECT_NE(generation, 0u);
}

TEST(ReplyCells, WrongGenerationOrSizeWritesNothing) {
  cells_fixture f(1);
  auto [slot, generation] = *f.table.open(sizeof(std::uint32_t), 1);
  std::byte* cell = reply_cell::in_region(f.bytes(), slot);
  const std::uint64_t eight = 7;
  const std::uint32_t four = 9;
  EXPECT_FALSE(reply_cell::write(cell, generation + 1, bytes_of(four), outcome::done));
  EXPECT_FALSE(reply_cell::write(cell, generation, bytes_of(eight), outcome::done)) << "size differs";
  std::byte too_big[reply_cell::value_capacity + 8]{};
  EXPECT_FALSE(reply_cell::write(cell, generation, too_big, outcome::done));
  std::uint32_t out = 0;
  EXPECT_EQ(f.table.collect(slot, generation, &out, sizeof out), outcome::pending);
  EXPECT_TRUE(reply_cell::write(cell, generation, bytes_of(four), outcome::done));
  EXPECT_EQ(f.table.collect(slot, generation, &out, sizeof out), outcome::done);
  EXPECT_EQ(out, 9u);
}

TEST(ReplyCells, FailuresAndCallsNeverSentFailTheSlot) {
  cells_fixture f(2);
  auto [slot, generation] = *f.table.open(16, 1);
  std::byte* cell = reply_cell::in_region(f.bytes(), slot);
  EXPECT_FALSE(reply_cell::write(cell, generation + 1, {}, outcome::threw)) << "stale failure";
  EXPECT_TRUE(reply_cell::write(cell, generation, {}, outcome::threw));
  std::byte out[16];
  EXPECT_EQ(f.table.collect(slot, generation, out, 16), outcome::threw);

  auto [unsent, unsent_generation] = *f.table.open(16, 1);
  f.table.fail_unsent(unsent);
  EXPECT_EQ(f.table.collect(unsent, unsent_generation, out, 16), outcome::not_executed);
}

TEST(ReplyCells, AnAbandonedCellDropsItsLateReplyAndIsReusedWithANewGeneration) {
  cells_fixture f(1);
  auto [slot, generation] = *f.table.open(8, 1);
  f.table.abandon(slot, generation, 8);
  auto [again, next_generation] = *f.table.open(8, 1);
  EXPECT_EQ(again, slot);
  EXPECT_NE(next_generation, generation);
  std::byte* cell = reply_cell::in_region(f.bytes(), slot);
  const std::uint64_t late = 1, fresh = 2;
  EXPECT_FALSE(reply_cell::write(cell, generation, bytes_of(late), outcome::done)) << "late reply";
  EXPECT_TRUE(reply_cell::write(cell, next_generation, bytes_of(fresh), outcome::done));
  std::uint64_t out = 0;
  EXPECT_EQ(f.table.collect(again, next_generation, &out, 8), outcome::done);
  EXPECT_EQ(out, fresh);
}

// An open cell as a writer leaves it between its CAS and its last store: claimed.
struct claimed_cell {
  std::uint32_t slot, generation;
  std::byte* cell;
  std::atomic_ref<std::uint64_t> word;
};
claimed_cell claim_by_writer(cells_fixture& f) {
  auto [slot, generation] = *f.table.open(8, 1);
  std::byte* cell = reply_cell::in_region(f.bytes(), slot);
  std::atomic_ref<std::uint64_t> word(*reinterpret_cast<std::uint64_t*>(cell));
  word.store(reply_cell::word(generation, 8, reply_cell::claimed));
  return {slot, generation, cell, word};
}

TEST(ReplyCells, ACellAbandonedWhileBeingWrittenIsReusedOnlyAfterTheWrite) {
  for (auto outcome : {reply_cell::ready, reply_cell::failed}) {
    cells_fixture f(1);
    claimed_cell c = claim_by_writer(f);
    f.table.abandon(c.slot, c.generation, 8);
    EXPECT_FALSE(f.table.open(8, 1).has_value()) << "reused while a writer holds it";
    c.word.store(reply_cell::word(c.generation, 8, outcome));  // the writer finishes
    EXPECT_TRUE(f.table.open(8, 1).has_value());
  }
}

TEST(ReplyCells, AnUnsentFailureLeavesAClaimedCellToItsWriter) {
  // The send was reported as failed, but the call arrived and its writer holds the cell: the
  // writer's outcome stands and the cell is not reused under it.
  cells_fixture f(1);
  claimed_cell c = claim_by_writer(f);
  f.table.fail_unsent(c.slot);
  std::uint64_t out = 0;
  EXPECT_EQ(f.table.collect(c.slot, c.generation, &out, 8), outcome::pending);
  EXPECT_FALSE(f.table.open(8, 1).has_value());
  const std::uint64_t value = 42;
  std::memcpy(c.cell + reply_cell::value_offset, &value, 8);
  c.word.store(reply_cell::word(c.generation, 8, reply_cell::ready));
  EXPECT_EQ(f.table.collect(c.slot, c.generation, &out, 8), outcome::done);
  EXPECT_EQ(out, 42u);
}

TEST(ReplyCells, IndicesOutsideTheRegionOrTheTableAreRefused) {
  cells_fixture f(4, 8);  // a region of 12 cells; this table owns cells 8..11
  EXPECT_EQ(reply_cell::in_region(f.bytes(), reply_cell::index_bit | 12), nullptr);
  EXPECT_EQ(reply_cell::in_region(f.bytes(), reply_cell::index_bit | 0x7fff'ffff), nullptr);
  EXPECT_NE(reply_cell::in_region(f.bytes(), reply_cell::index_bit | 11), nullptr);
  const std::uint64_t v = 1;
  EXPECT_FALSE(f.table.deliver(reply_cell::index_bit | 7, 1, bytes_of(v), outcome::done));
  EXPECT_FALSE(f.table.deliver(reply_cell::index_bit | 12, 1, bytes_of(v), outcome::done));
  EXPECT_FALSE(f.table.deliver(8, 1, bytes_of(v), outcome::done)) << "a table index, not a cell";
  auto [slot, generation] = *f.table.open(8, 1);
  EXPECT_GE(slot & ~reply_cell::index_bit, 8u);
  EXPECT_TRUE(f.table.deliver(slot, generation, bytes_of(v), outcome::done));
}

TEST(ReplyCells, RacingWritersAndAnAbandoningOwnerLeaveOneOutcome) {
  cells_fixture f(1);
  // Two writers race for one cell (a duplicated or forged reply): exactly one value lands.
  for (int round = 0; round < 2000; ++round) {
    auto [slot, generation] = *f.table.open(8, 1);
    std::byte* cell = reply_cell::in_region(f.bytes(), slot);
    std::atomic<int> ready_to_go{0}, won{0};
    auto writer = [&, generation = generation](std::uint64_t value) {
      ready_to_go.fetch_add(1);
      while (ready_to_go.load() < 2) {
      }
      if (reply_cell::write(cell, generation, bytes_of(value), outcome::done)) won.fetch_add(1);
    };
    std::thread a(writer, 1), b(writer, 2);
    a.join();
    b.join();
    std::uint64_t out = 0;
    ASSERT_EQ(won.load(), 1) << "round " << round;
    ASSERT_EQ(f.table.collect(slot, generation, &out, 8), outcome::done);
    ASSERT_TRUE(out == 1 || out == 2);
  }
  // The owner abandons the cell while a writer delivers: either the close or the write wins,
  // and the cell is free for the next open once both are over.
  for (int round = 0; round < 2000; ++round) {
    auto [slot, generation] = *f.table.open(8, 1);
    std::byte* cell = reply_cell::in_region(f.bytes(), slot);
    std::atomic<bool> go{false};
    std::thread w([&, generation = generation] {
      while (!go.load()) {
      }
      const std::uint64_t v = 5;
      (void)reply_cell::write(cell, generation, bytes_of(v), outcome::done);
    });
    go = true;
    f.table.abandon(slot, generation, 8);
    w.join();
    // The reopened cell is pending for its new generation only: nothing of the old reply
    // reached it, and a reply of the new generation lands.
    auto reopened = f.table.open(8, 1);
    ASSERT_TRUE(reopened.has_value()) << "round " << round;
    std::uint64_t out = 0;
    ASSERT_EQ(f.table.collect(reopened->first, reopened->second, &out, 8), outcome::pending);
    const std::uint64_t fresh = round;
    ASSERT_TRUE(reply_cell::write(cell, reopened->second, bytes_of(fresh), outcome::done));
    ASSERT_EQ(f.table.collect(reopened->first, reopened->second, &out, 8), outcome::done);
    ASSERT_EQ(out, fresh);
  }
}

TEST(ReplyCells, ADeadDestinationFailsOnlyItsPendingCellsAndTheirLateRepliesAreDropped) {
  cells_fixture f(4);
  auto [to_dead, dead_generation] = *f.table.open(8, 3);
  auto [to_alive, alive_generation] = *f.table.open(8, 1);
  auto [answered, answered_generation] = *f.table.open(8, 3);
  const std::uint64_t value = 7;
  ASSERT_TRUE(reply_cell::write(reply_cell::in_region(f.bytes(), answered), answered_generation,
                                bytes_of(value), outcome::done));

  EXPECT_EQ(f.table.fail_pending_to(3, outcome::may_have_executed), 1u);
  EXPECT_EQ(f.table.fail_pending_to(3, outcome::may_have_executed), 0u) << "ends once";
  EXPECT_FALSE(reply_cell::write(reply_cell::in_region(f.bytes(), to_dead), dead_generation,
                                 bytes_of(value), outcome::done))
      << "a reply after the death was noticed is dropped";
  std::uint64_t out = 0;
  EXPECT_EQ(f.table.collect(to_dead, dead_generation, &out, 8), outcome::may_have_executed);
  EXPECT_EQ(f.table.collect(to_alive, alive_generation, &out, 8), outcome::pending);
  EXPECT_EQ(f.table.collect(answered, answered_generation, &out, 8), outcome::done);
  EXPECT_EQ(out, 7u);
}

TEST(ReplyCells, AReplyCarriesOnlyTheFailuresACalleeCanReport) {
  cells_fixture f(3);
  auto [slot, generation] = *f.table.open(8, 1);
  std::byte* cell = reply_cell::in_region(f.bytes(), slot);
  for (outcome forged : {outcome::pending, outcome::may_have_executed,
                         outcome::deadline_exceeded, outcome::cancelled}) {
    EXPECT_FALSE(reply_cell::write(cell, generation, {}, forged)) << to_string(forged);
  }
  EXPECT_TRUE(reply_cell::write(cell, generation, {}, outcome::not_executed));
  std::uint64_t out = 0;
  EXPECT_EQ(f.table.collect(slot, generation, &out, 8), outcome::not_executed);
}

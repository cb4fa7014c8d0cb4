// The pipe's slot decoder and release entries: a slot is used only when its word, its header and
// its payload agree with the heap; anything else is empty (not yet written) or invalid.
#include <gtest/gtest.h>

#include <cstring>
#include <seriema/pipe/detail/slot.hpp>
#include <vector>

using namespace seriema::pipe::detail;

namespace {

struct heap_fixture {
  std::vector<std::byte> heap = std::vector<std::byte>(4096);
  void write_header(std::uint64_t offset, std::uint64_t size, std::uint32_t tag,
                    std::uint32_t entry) {
    const buffer_header h{size, tag, entry};
    std::memcpy(heap.data() + offset, &h, sizeof h);
  }
};

TEST(PipeSlot, TagsSkipZero) {
  EXPECT_EQ(tag_of(0), 1u);
  EXPECT_EQ(tag_of(41), 42u);
  EXPECT_EQ(tag_of(0xffffffffull), 1u);  // would be 0: "never written"
}

TEST(PipeSlot, AValidSlotDecodes) {
  heap_fixture f;
  f.write_header(128, 100, tag_of(7), 0x30002);
  const slot_view v = decode_slot(slot_word(tag_of(7), 128), tag_of(7), tag_of(3), f.heap);
  ASSERT_EQ(v.state, slot_state::ready);
  EXPECT_EQ(v.offset, 128u);
  EXPECT_EQ(v.size, 100u);
  EXPECT_EQ(v.entry, 0x30002u);
}

TEST(PipeSlot, UnwrittenAndPreviousLapAreEmpty) {
  heap_fixture f;
  EXPECT_EQ(decode_slot(0, tag_of(0), 0, f.heap).state, slot_state::empty);
  EXPECT_EQ(decode_slot(slot_word(tag_of(3), 0), tag_of(7), tag_of(3), f.heap).state,
            slot_state::empty);
}

TEST(PipeSlot, ForeignTagsOffsetsAndSizesAreInvalid) {
  heap_fixture f;
  f.write_header(64, 100, tag_of(7), 1);
  // A tag from neither this write nor the slot's previous one.
  EXPECT_EQ(decode_slot(slot_word(tag_of(5), 64), tag_of(7), tag_of(3), f.heap).state,
            slot_state::invalid);
  // Offsets past the heap, or leaving no room for the header.
  EXPECT_EQ(decode_slot(slot_word(tag_of(7), 8192), tag_of(7), 0, f.heap).state,
            slot_state::invalid);
  EXPECT_EQ(decode_slot((std::uint64_t{tag_of(7)} << 32) | 0xffffffffu, tag_of(7), 0, f.heap).state,
            slot_state::invalid);
  // The header names another write (torn or stale data), a size of 0, or one past the heap.
  f.write_header(64, 100, tag_of(6), 1);
  EXPECT_EQ(decode_slot(slot_word(tag_of(7), 64), tag_of(7), 0, f.heap).state,
            slot_state::invalid);
  f.write_header(64, 0, tag_of(7), 1);
  EXPECT_EQ(decode_slot(slot_word(tag_of(7), 64), tag_of(7), 0, f.heap).state,
            slot_state::invalid);
  f.write_header(64, 4096 - 64 - header_size + 1, tag_of(7), 1);
  EXPECT_EQ(decode_slot(slot_word(tag_of(7), 64), tag_of(7), 0, f.heap).state,
            slot_state::invalid);
  f.write_header(64, 4096 - 64 - header_size, tag_of(7), 1);  // exactly to the end
  EXPECT_EQ(decode_slot(slot_word(tag_of(7), 64), tag_of(7), 0, f.heap).state, slot_state::ready);
  f.write_header(64, ~std::uint64_t{0}, tag_of(7), 1);  // overflow
  EXPECT_EQ(decode_slot(slot_word(tag_of(7), 64), tag_of(7), 0, f.heap).state,
            slot_state::invalid);
}

TEST(PipeSlot, ReleaseEntriesRoundTripAndRejectGarbage) {
  std::uint32_t entry = 0;
  ASSERT_TRUE(decode_release(release_entry(0x70005), entry));
  EXPECT_EQ(entry, 0x70005u);
  EXPECT_FALSE(decode_release(0, entry));  // a zeroed ring entry
  EXPECT_FALSE(decode_release(release_entry(9) ^ (std::uint64_t{1} << 40), entry));
}

TEST(PipeSlot, HeapBytesRoundToGranules) {
  EXPECT_EQ(heap_bytes_for(1), 64u);
  EXPECT_EQ(heap_bytes_for(48), 64u);
  EXPECT_EQ(heap_bytes_for(49), 128u);
}

}  // namespace

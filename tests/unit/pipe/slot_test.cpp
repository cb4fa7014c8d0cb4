// The pipe's decoders: a buffer is used only when its flag, its header and its extent agree with
// the heap (in place, through the notification ring, and pull slots against the exposed heap);
// anything else is empty (not written yet), a wrap marker, or invalid. Release entries
// round-trip and reject garbage.
#include <gtest/gtest.h>

#include <cstring>
#include <seriema/pipe/detail/slot.hpp>
#include <vector>

using namespace seriema::pipe::detail;

namespace {

struct heap_fixture {
  std::vector<std::byte> heap = std::vector<std::byte>(4096);
  // Writes a header at `offset` and returns its word 0 (what the reader would load).
  std::uint64_t header(std::uint64_t offset, std::uint32_t tag, std::uint64_t granules,
                       std::uint64_t used, std::uint32_t entry) {
    const std::uint64_t words[2] = {header_word0(tag, granules), header_word1(used, entry)};
    std::memcpy(heap.data() + offset, words, sizeof words);
    return words[0];
  }
  std::uint64_t word0(std::uint64_t offset) const {
    std::uint64_t w;
    std::memcpy(&w, heap.data() + offset, sizeof w);
    return w;
  }
  slot_view in_place(std::uint64_t position, std::uint32_t expected) const {
    return decode_in_place(word0(position), position, expected, heap);
  }
  slot_view ring(std::uint64_t word, std::uint32_t expected, std::uint32_t previous) const {
    return decode_slot(word, expected, previous, heap,
                       [this](std::uint64_t offset) { return word0(offset); });
  }
};

TEST(PipeSlot, TagsSkipZero) {
  EXPECT_EQ(tag_of(0), 1u);
  EXPECT_EQ(tag_of(41), 42u);
  EXPECT_EQ(tag_of(0xffffffffull), 1u);  // would be 0: "never written"
}

TEST(PipeSlot, InPlaceHeaderDecodes) {
  heap_fixture f;
  f.header(128, tag_of(7), 2, 100, 0x30002);
  const slot_view v = f.in_place(128, tag_of(7));
  ASSERT_EQ(v.state, slot_state::ready);
  EXPECT_EQ(v.offset, 128u);
  EXPECT_EQ(v.size, 100u);
  EXPECT_EQ(v.granules, 2u);
  EXPECT_EQ(v.entry, 0x30002u);
}

TEST(PipeSlot, InPlaceUnwrittenAndMarkers) {
  heap_fixture f;
  EXPECT_EQ(f.in_place(0, tag_of(0)).state, slot_state::empty);  // zeroed heap
  f.header(64, tag_of(3), 1, 8, 0);  // an older write at the place
  EXPECT_EQ(f.in_place(64, tag_of(7)).state, slot_state::empty);
  f.header(64, tag_of(7), 0, 0, 0);
  EXPECT_EQ(f.in_place(64, tag_of(7)).state, slot_state::wrap);
}

TEST(PipeSlot, InPlaceExtentsOutsideTheHeapAreInvalid) {
  heap_fixture f;
  f.header(64, tag_of(7), 64, 100, 1);  // 64 + 64 * 64 > 4096
  EXPECT_EQ(f.in_place(64, tag_of(7)).state, slot_state::invalid);
  f.header(64, tag_of(7), 1, 0, 1);  // nothing used
  EXPECT_EQ(f.in_place(64, tag_of(7)).state, slot_state::invalid);
  f.header(64, tag_of(7), 1, 49, 1);  // more than the granule holds after the header
  EXPECT_EQ(f.in_place(64, tag_of(7)).state, slot_state::invalid);
  f.header(64, tag_of(7), 62, 62 * 64 - 16, 1);  // exactly to the end
  EXPECT_EQ(f.in_place(64, tag_of(7)).state, slot_state::ready);
  EXPECT_EQ(decode_in_place(header_word0(tag_of(7), 1), 4090, tag_of(7), f.heap).state,
            slot_state::invalid);  // no room for a header
}

TEST(PipeSlot, RingSlotLeadsToAValidHeader) {
  heap_fixture f;
  f.header(128, tag_of(7), 2, 100, 5);
  const slot_view v = f.ring(slot_word(tag_of(7), 128), tag_of(7), tag_of(3));
  ASSERT_EQ(v.state, slot_state::ready);
  EXPECT_EQ(v.offset, 128u);
  EXPECT_EQ(v.size, 100u);
  EXPECT_EQ(v.entry, 5u);
}

TEST(PipeSlot, RingEmptyAndInvalid) {
  heap_fixture f;
  f.header(128, tag_of(7), 2, 100, 5);
  EXPECT_EQ(f.ring(0, tag_of(7), tag_of(3)).state, slot_state::empty);
  EXPECT_EQ(f.ring(slot_word(tag_of(3), 0), tag_of(7), tag_of(3)).state, slot_state::empty);
  // A tag from neither this write nor the slot's previous one.
  EXPECT_EQ(f.ring(slot_word(tag_of(5), 128), tag_of(7), tag_of(3)).state, slot_state::invalid);
  // Offsets past the heap.
  EXPECT_EQ(f.ring(slot_word(tag_of(7), 4096), tag_of(7), 0).state, slot_state::invalid);
  EXPECT_EQ(f.ring((std::uint64_t{tag_of(7)} << 32) | 0xffffffffu, tag_of(7), 0).state,
            slot_state::invalid);
  // The header names another write (torn or stale), or is a wrap marker.
  f.header(128, tag_of(6), 2, 100, 5);
  EXPECT_EQ(f.ring(slot_word(tag_of(7), 128), tag_of(7), 0).state, slot_state::invalid);
  f.header(128, tag_of(7), 0, 0, 0);
  EXPECT_EQ(f.ring(slot_word(tag_of(7), 128), tag_of(7), 0).state, slot_state::invalid);
}

TEST(PipeSlot, PullSlotsDecodeInsideTheExposedHeap) {
  const std::uint64_t flag = header_word0(tag_of(4), 0) | 0x20003;
  const slot_view v = decode_pull(flag, pull_descriptor(128, 1000), tag_of(4), 4096);
  ASSERT_EQ(v.state, slot_state::ready);
  EXPECT_EQ(v.offset, 128u);
  EXPECT_EQ(v.size, 1000u);
  EXPECT_EQ(v.entry, 0x20003u);
  EXPECT_EQ(decode_pull(flag, pull_descriptor(128, 1000), tag_of(5), 4096).state,
            slot_state::empty);  // not posted yet
  EXPECT_EQ(decode_pull(flag, pull_descriptor(4096, 8), tag_of(4), 4096).state,
            slot_state::invalid);  // no room for a header
  EXPECT_EQ(decode_pull(flag, pull_descriptor(0, 4096 - 15), tag_of(4), 4096).state,
            slot_state::invalid);  // past the end
  EXPECT_EQ(decode_pull(flag, pull_descriptor(0, 0), tag_of(4), 4096).state, slot_state::invalid);
  EXPECT_EQ(decode_pull(flag, (std::uint64_t{1} << 32) | 0xffffffffu, tag_of(4), 4096).state,
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

// The pipe's wire format: the regions each end writes into the other's memory, the header in front
// of each buffer, how a write is published (in place for next fit, through a notification ring
// for the other fit policies), the release entries a reader hands back, and the decoders that
// validate what the reader finds before it uses it.
//
// Reader's region (allocated by the reader in its own zone; written only by the writer):
//   [0, 8 * width)           notification ring (ring mode): slot i holds the word of write i,
//                            i + width, ...
//   [heap_offset, + heap)    the heap the writer manages; buffer = header (16 B) + payload
// Writer's region (allocated by the writer in its own zone; written only by the reader):
//   [0, 8)                   releases handed back so far (the release count word)
//   [64, 64 + 8 * slots)     release entries: entry k at (k % slots); slots = width, or 2 * width
//                            with a pull direction (each direction has width buffers live)
//
// Header: word 0 = tag << 32 | granules (heap bytes / 64 of the allocation; 0: a wrap marker),
// word 1 = used bytes | entry << 32 (the writer's allocation entry); bit 31 of the used bytes
// marks a record of forwarding (docs/pipes.md, "Redirect records"): with a 16-byte payload a
// redirect record, naming a buffer in another region on this machine (forwarded uncopied); with a
// 216-byte one a source record, announcing that region (its number and locator) ahead of the
// first redirect record naming it. Payload at +16.
//
// In-place mode (next fit: the heap is circular and buffers are published in allocation order):
// the reader knows where the next buffer starts (the end of the previous one; the heap's start
// once fewer than 16 bytes are left, or where a wrap marker sends it) and polls its word 0, the
// flag, which the writer stores last. Payload and flag share their cache lines (the seed's
// PUT_W_SYNC, flag beside the data): a small write costs the reader one line.
// Ring mode (best, worst, first fit: buffers anywhere): the writer stores the whole header with
// the payload, then the slot word (tag << 32 | offset / 64) of the write's ring slot.
//
// Publication order (every path: direct stores, put + fence + put, one write message): what a
// word publishes lands before the word; the word is stored with release and loaded with acquire.
// So a reader that sees the tag it expects reads a complete header and payload, unless the writer
// is broken or someone else wrote the memory: hence the checks of the decoders.
//
// Why no slot or release entry is overwritten before it is read: a writer has at most `width`
// allocations live (allocated and not yet released back to it), and a write's ring slot is reused
// width writes later; if write s - width were unread when write s goes out, writes s - width .. s
// would all be unread, hence unreleased, hence live: width + 1 of them. The same bound keeps the
// release ring from overwriting an entry the writer has not processed: an entry is appended only
// for a live allocation, which stays live until the writer has read the entry, and at most
// width (push) + width (pull) allocations are live, hence release_slots().
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace seriema::pipe::detail {

/// Granularity of the heap: every buffer (header included) starts and ends on it.
inline constexpr std::size_t heap_granule = 64;
/// Bytes in front of each payload.
inline constexpr std::size_t header_size = 16;
/// Offset of the release entries in the writer's region.
inline constexpr std::size_t release_entries_offset = 64;

/// Header word 0: the tag and the allocation's granules (0: a wrap marker, "go to offset 0").
constexpr std::uint64_t header_word0(std::uint32_t tag, std::uint64_t granules) noexcept {
  return (std::uint64_t{tag} << 32) | granules;
}
/// Header word 1: the payload bytes used and the writer's allocation entry.
constexpr std::uint64_t header_word1(std::uint64_t used, std::uint32_t entry) noexcept {
  return (std::uint64_t{entry} << 32) | used;
}
/// In header word 1's used bytes: the payload is a redirect descriptor.
inline constexpr std::uint64_t redirect_bit = std::uint64_t{1} << 31;
/// Payload bytes of a redirect record: word 0 = source << 32 | size, word 1 = the forwarded
/// payload's offset in the source region (source: 1, 2, ... as the writer announced them).
inline constexpr std::size_t redirect_descriptor_size = 16;
/// Source regions a writer may name in its redirect records (more are forwarded by copy).
inline constexpr std::uint32_t max_redirect_sources = 64;
/// Payload bytes of a source record: word 0 = the source's number, then the region's locator
/// (transfer::remote_memory_locator, 208 bytes).
inline constexpr std::size_t source_record_size = 8 + 208;

/// The tag of write number `sequence` (0, 1, ...): never 0, so a slot never written (zeroed)
/// never looks published.
constexpr std::uint32_t tag_of(std::uint64_t sequence) noexcept {
  const auto tag = static_cast<std::uint32_t>(sequence + 1);
  return tag == 0 ? 1u : tag;  // wraps every 2^32 writes; 0 stays "never written"
}

/// Slot word: tag in the upper half, the buffer's heap offset in granules in the lower half.
constexpr std::uint64_t slot_word(std::uint32_t tag, std::uint64_t heap_offset) noexcept {
  return (std::uint64_t{tag} << 32) | (heap_offset / heap_granule);
}

/// Release entry: the allocation entry (index | generation << 16) a buffer's header named.
/// The entry's upper half repeats it inverted, so a zeroed or torn entry never decodes.
constexpr std::uint64_t release_entry(std::uint32_t entry) noexcept {
  return (std::uint64_t{~entry} << 32) | entry;
}
/// The allocation entry of a release entry, or false when the word is not one.
constexpr bool decode_release(std::uint64_t word, std::uint32_t& entry) noexcept {
  entry = static_cast<std::uint32_t>(word);
  return static_cast<std::uint32_t>(word >> 32) == ~entry;
}

enum class slot_state : std::uint8_t {
  empty,    ///< not written yet (the place still holds an older write, or nothing)
  ready,    ///< a valid buffer: inside the heap, header and flag agree
  wrap,     ///< in-place mode: a wrap marker; the next buffer is at the heap's start
  invalid,  ///< what the reader found is not what a writer of this pipe writes
};

/// A decoded slot or header.
struct slot_view {
  slot_state state = slot_state::empty;
  std::uint64_t offset = 0;    ///< of the header, in the heap
  std::uint64_t size = 0;      ///< payload bytes used
  std::uint64_t granules = 0;  ///< of the allocation (where in-place mode's next buffer starts)
  std::uint32_t entry = 0;     ///< the writer's allocation entry
  bool redirect = false;  ///< a record of forwarding: a redirect (size 16) or a source record
};

/// Validates the header at `offset` of `heap` for the write whose tag is `expected`, given its
/// word 0 as loaded (acquire) by the caller: the tag must match (else empty: not written yet),
/// and the allocation and the payload must lie inside the heap (else invalid). Reads nothing
/// outside `heap`; never trusts a field before checking it. `offset` + 16 <= heap.size().
inline slot_view decode_header(std::uint64_t word0, std::uint64_t offset, std::uint32_t expected,
                               std::span<const std::byte> heap) noexcept {
  if (static_cast<std::uint32_t>(word0 >> 32) != expected) return {};
  const std::uint64_t granules = word0 & 0xffffffffu;
  if (granules == 0) return {slot_state::wrap, offset, 0, 0, 0};
  std::uint64_t word1;
  std::memcpy(&word1, heap.data() + offset + 8, sizeof word1);
  const bool redirect = (word1 & redirect_bit) != 0;
  const std::uint64_t used = word1 & (redirect_bit - 1);
  const std::uint64_t room = heap.size() - offset;
  if (granules > room / heap_granule || used == 0 || used > granules * heap_granule - header_size ||
      (redirect && used != redirect_descriptor_size && used != source_record_size)) {
    return {slot_state::invalid, offset, 0, 0, 0};
  }
  return {slot_state::ready, offset, used, granules, static_cast<std::uint32_t>(word1 >> 32),
          redirect};
}

/// A redirect record's payload, decoded: the source it names (0 when invalid) and where in that
/// source's region the forwarded payload lies.
struct redirect_view {
  std::uint32_t source = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};
/// The source a redirect descriptor names (look it up before validating the rest).
inline std::uint32_t redirect_source(std::span<const std::byte, redirect_descriptor_size> d) noexcept {
  std::uint64_t word0;
  std::memcpy(&word0, d.data(), sizeof word0);
  return static_cast<std::uint32_t>(word0 >> 32);
}
/// Validates a redirect descriptor against its source's region of `source_bytes`: the source
/// must be named (not 0), the payload non-empty, inside the region and where a heap's payload
/// lies (16 bytes into a granule: aligned like any buffer); else source 0, invalid.
inline redirect_view decode_redirect(std::span<const std::byte, redirect_descriptor_size> d,
                                     std::uint64_t source_bytes) noexcept {
  std::uint64_t words[2];
  std::memcpy(words, d.data(), sizeof words);
  const std::uint64_t size = words[0] & 0xffffffffu;
  const std::uint64_t offset = words[1];
  const auto source = static_cast<std::uint32_t>(words[0] >> 32);
  if (source == 0 || size == 0 || offset % heap_granule != header_size || offset > source_bytes ||
      size > source_bytes - offset) {
    return {};
  }
  return {source, offset, size};
}
/// The descriptor a writer stores as a redirect record's payload.
inline void encode_redirect(std::span<std::byte, redirect_descriptor_size> d, std::uint32_t source,
                            std::uint64_t offset, std::uint64_t size) noexcept {
  const std::uint64_t words[2] = {(std::uint64_t{source} << 32) | size, offset};
  std::memcpy(d.data(), words, sizeof words);
}

/// In-place mode: the buffer the reader expects at `position` (it moved to 0 when fewer than 16
/// bytes were left), for the write whose tag is `expected`.
inline slot_view decode_in_place(std::uint64_t word0, std::uint64_t position,
                                 std::uint32_t expected, std::span<const std::byte> heap) noexcept {
  if (position > heap.size() || heap.size() - position < header_size) {
    return {slot_state::invalid, position, 0, 0, 0};
  }
  return decode_header(word0, position, expected, heap);
}

/// Ring mode: validates slot `word` for the write whose tag is `expected` (and whose previous
/// lap's tag is `previous`), then the header it points to, whose word 0 the caller loads through
/// `load_word0(offset)` once the offset is known to be inside the heap.
template <class LoadWord0>
slot_view decode_slot(std::uint64_t word, std::uint32_t expected, std::uint32_t previous,
                      std::span<const std::byte> heap, LoadWord0 load_word0) noexcept {
  const auto tag = static_cast<std::uint32_t>(word >> 32);
  if (tag != expected) {
    return {tag == 0 || tag == previous ? slot_state::empty : slot_state::invalid, 0, 0, 0, 0};
  }
  const std::uint64_t granules = word & 0xffffffffu;
  if (granules >= heap.size() / heap_granule) return {slot_state::invalid, 0, 0, 0, 0};
  const std::uint64_t offset = granules * heap_granule;
  const slot_view view = decode_header(load_word0(offset), offset, expected, heap);
  // The slot said it is written: a header that disagrees (or a wrap marker) is not a buffer.
  if (view.state != slot_state::ready) return {slot_state::invalid, offset, 0, 0, 0};
  return view;
}

/// Where things lie in the two regions (pull_heap: pipe_options::pull_heap_bytes, 0 when the
/// pipe has no pull direction).
struct region_layout {
  std::uint64_t width, heap, pull_heap;
  static constexpr std::uint64_t granules(std::uint64_t bytes) noexcept {
    return (bytes + heap_granule - 1) / heap_granule * heap_granule;
  }
  /// Reader's region: the notification ring, the heap, the pull ring (16-byte slots).
  [[nodiscard]] constexpr std::uint64_t heap_offset() const noexcept { return granules(width * 8); }
  [[nodiscard]] constexpr std::uint64_t pull_ring_offset() const noexcept {
    return heap_offset() + heap;
  }
  [[nodiscard]] constexpr std::uint64_t reader_bytes() const noexcept {
    return pull_ring_offset() + (pull_heap != 0 ? width * 16 : 0);
  }
  /// Release entries in the writer's region: one per buffer that can be live, in each direction.
  [[nodiscard]] constexpr std::uint64_t release_slots() const noexcept {
    return pull_heap != 0 ? 2 * width : width;
  }
  /// Writer's region: the release count and entries, the exposed heap of the pull direction.
  [[nodiscard]] constexpr std::uint64_t exposed_offset() const noexcept {
    return granules(release_entries_offset + release_slots() * 8);
  }
  [[nodiscard]] constexpr std::uint64_t writer_bytes() const noexcept {
    return exposed_offset() + pull_heap;
  }
};

/// Bytes a buffer of `payload` bytes takes in the heap (header included, rounded to granules).
constexpr std::uint64_t heap_bytes_for(std::uint64_t payload) noexcept {
  return (header_size + payload + heap_granule - 1) / heap_granule * heap_granule;
}

/// Pull direction: the descriptor of a posted buffer (its offset in the exposed heap in granules,
/// its size) and the flag word after it (the post's tag, the writer's allocation entry).
constexpr std::uint64_t pull_descriptor(std::uint64_t offset, std::uint64_t size) noexcept {
  return (size << 32) | (offset / heap_granule);
}
/// Marks a release entry as one of the exposed heap's (entry indexes are below 4096).
inline constexpr std::uint32_t pull_entry_bit = 0x8000;

/// Validates a pull slot: its flag (loaded with acquire) must carry the post's tag `expected`
/// (else empty), and its descriptor a payload inside an exposed heap of `exposed_bytes` (else
/// invalid). `offset` is the header's; the payload follows it.
constexpr slot_view decode_pull(std::uint64_t flag, std::uint64_t descriptor,
                                std::uint32_t expected, std::uint64_t exposed_bytes) noexcept {
  if (static_cast<std::uint32_t>(flag >> 32) != expected) return {};
  const std::uint64_t granules = descriptor & 0xffffffffu;
  const std::uint64_t size = descriptor >> 32;
  if (granules > exposed_bytes / heap_granule) return {slot_state::invalid, 0, 0, 0, 0};
  const std::uint64_t offset = granules * heap_granule;
  const std::uint64_t room = exposed_bytes - offset;
  if (room < header_size || size == 0 || size > room - header_size) {
    return {slot_state::invalid, offset, 0, 0, 0};
  }
  return {slot_state::ready, offset, size, 0, static_cast<std::uint32_t>(flag)};
}

}  // namespace seriema::pipe::detail

// The pipe's wire format: the regions each end writes into the other's memory, the notification
// slot word that publishes a written buffer, the header in front of each buffer, the release
// entries a reader hands back, and the decoder that validates a slot before the reader uses it.
//
// Reader's region (allocated by the reader in its own zone; written only by the writer):
//   [0, 8 * width)           notification ring: slot i holds the word of write i, i + width, ...
//   [heap_offset, + heap)    the heap the writer manages; buffer = header (16 B) + payload
// Writer's region (allocated by the writer in its own zone; written only by the reader):
//   [0, 8)                   releases handed back so far (the release count word)
//   [64, 64 + 8 * width)     release entries: entry k at (k % width)
//
// Publication order (every path: direct stores, put + fence + put, one write message): the
// header and payload land before the slot word, and release entries before the count word; the
// word is stored with release and loaded with acquire. So a reader that sees a slot word whose tag
// is the one it expects reads a header and payload that are complete, unless the writer is broken
// or the memory was written by someone else: hence the checks of decode_slot.
//
// Why a slot never holds a record the reader has not read yet: a writer has at most `width`
// allocations live (allocated and not yet released back to it), and a write's slot is reused
// width writes later; if write s - width were unread when write s goes out, writes s - width .. s
// would all be unread, hence unreleased, hence live: width + 1 of them. The same bound keeps the
// release ring from overwriting an entry the writer has not processed.
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

/// What the writer writes in front of a payload, in the same operation as the payload.
struct buffer_header {
  std::uint64_t size;    ///< payload bytes
  std::uint32_t tag;     ///< the write's tag (as in its slot word)
  std::uint32_t entry;   ///< the writer's allocation entry: index | generation << 16
};
static_assert(sizeof(buffer_header) == header_size);

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
  empty,    ///< not written yet (the slot still holds an older lap's word, or nothing)
  ready,    ///< a valid buffer: offset and size inside the heap, header agrees with the word
  invalid,  ///< the word or the header is not what a writer of this pipe writes
};

/// A decoded slot.
struct slot_view {
  slot_state state = slot_state::empty;
  std::uint64_t offset = 0;  ///< of the header, in the heap
  std::uint64_t size = 0;    ///< payload bytes
  std::uint32_t entry = 0;   ///< the writer's allocation entry
};

/// Validates slot `word` for the write whose tag is `expected` (and whose previous lap's tag is
/// `previous`) against `heap`: the header must lie inside the heap, name the same tag, and its
/// payload fit. Reads nothing outside `heap`; never trusts a field before checking it.
inline slot_view decode_slot(std::uint64_t word, std::uint32_t expected, std::uint32_t previous,
                             std::span<const std::byte> heap) noexcept {
  const auto tag = static_cast<std::uint32_t>(word >> 32);
  if (tag != expected) {
    return {tag == 0 || tag == previous ? slot_state::empty : slot_state::invalid, 0, 0, 0};
  }
  const std::uint64_t granules = word & 0xffffffffu;
  if (granules > heap.size() / heap_granule) return {slot_state::invalid, 0, 0, 0};
  const std::uint64_t offset = granules * heap_granule;
  if (heap.size() - offset < header_size) return {slot_state::invalid, 0, 0, 0};
  buffer_header header;
  std::memcpy(&header, heap.data() + offset, sizeof header);
  const std::uint64_t room = heap.size() - offset - header_size;
  if (header.tag != expected || header.size == 0 || header.size > room) {
    return {slot_state::invalid, 0, 0, 0};
  }
  return {slot_state::ready, offset, header.size, header.entry};
}

/// Bytes a buffer of `payload` bytes takes in the heap (header included, rounded to granules).
constexpr std::uint64_t heap_bytes_for(std::uint64_t payload) noexcept {
  return (header_size + payload + heap_granule - 1) / heap_granule * heap_granule;
}

}  // namespace seriema::pipe::detail

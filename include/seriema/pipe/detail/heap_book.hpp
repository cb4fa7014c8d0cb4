// The writer's book of the heap it manages in the reader's memory: which ranges are live, under
// which allocation entry, in which state, and where the next allocation goes (next fit as a
// circular heap, or best / worst / first fit through transfer::general_allocator).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <seriema/transfer/allocators.hpp>
#include <vector>

namespace seriema::pipe::detail {

/// A live allocation's state: rmalloc'd, rwrite'n but waiting for older allocations to be
/// published (next fit publishes in allocation order), published.
enum class entry_state : std::uint8_t { free, allocated, queued, written };

/// Owner thread only (the writer's). Offsets are of the buffer's header in the heap; sizes are
/// heap bytes (heap_bytes_for(payload)). Entries are named index | generation << 16, so a
/// stale name (an entry reused since) is refused.
class heap_book {
 public:
  /// `view` is the writer's view of the heap (heap_bytes bytes, 64-byte aligned): best, worst and
  /// first fit carve pointers in it (never touching its bytes); next fit needs no view.
  heap_book(std::size_t heap_bytes, std::uint32_t width, transfer::fit_policy policy,
            std::byte* view);
  ~heap_book();
  heap_book(const heap_book&) = delete;
  heap_book& operator=(const heap_book&) = delete;

  struct grant {
    std::uint64_t offset;  ///< of the header
    std::uint32_t entry;   ///< index | generation << 16
  };
  /// A range of `bytes` (a multiple of 64), or nullopt when the heap or the width is full.
  std::optional<grant> allocate(std::uint64_t bytes);
  /// The live entry `entry` names (its offset and heap bytes), or null when it names none.
  struct record {
    std::uint64_t offset = 0;
    std::uint64_t bytes = 0;
    std::uint64_t payload = 0;  ///< payload bytes (set by the caller at allocation)
    std::uint64_t used = 0;     ///< payload bytes written (set by the caller at rwrite)
    std::uint64_t sequence = 0;  ///< next fit: allocations before this one
    std::uint64_t follows = 0;   ///< next fit: where the previous allocation ended (the cursor)
    /// next fit: where the range this allocation holds starts: its offset, or `follows` when it
    /// wrapped to the start (the skipped end of the heap holds the reader's wrap marker, which
    /// must stay until the reader has passed it, i.e. until this allocation is released)
    std::uint64_t holds_from = 0;
    std::uint16_t generation = 0;
    entry_state state = entry_state::free;
    bool redirect = false;  ///< the payload is a redirect descriptor (rforward in place)
  };
  [[nodiscard]] record* find(std::uint32_t entry) noexcept;
  /// Next fit: the live allocation made after `sequence` others, or null.
  [[nodiscard]] record* at_sequence(std::uint64_t sequence) noexcept;
  /// The index part of an entry's name (below the width).
  static constexpr std::uint32_t index_of(std::uint32_t entry) noexcept { return entry & 0xffffu; }
  /// The name (index | generation << 16) of a live record.
  [[nodiscard]] std::uint32_t name_of(const record& r) const noexcept;
  /// Takes back a written entry (the reader released it); false when it names none.
  bool release(std::uint32_t entry);

  [[nodiscard]] std::uint32_t live() const noexcept { return live_; }
  [[nodiscard]] std::uint64_t live_bytes() const noexcept { return live_bytes_; }
  [[nodiscard]] std::uint64_t peak_live_bytes() const noexcept { return peak_live_bytes_; }
  [[nodiscard]] std::uint64_t peak_end() const noexcept { return peak_end_; }

 private:
  std::optional<std::uint64_t> place_next_fit(std::uint64_t bytes) const noexcept;
  void free_entry(std::uint32_t index);

  std::uint64_t heap_bytes_;
  std::uint32_t width_;
  transfer::fit_policy policy_;
  std::byte* view_;
  std::vector<record> entries_;
  // next fit: entries are taken in allocation order, a FIFO of indexes head_ - tail_ long;
  // allocation goes at cursor_ (the end of the newest), the oldest live range starts where
  // entries_[tail_ % width_] does.
  std::uint64_t head_ = 0;
  std::uint64_t tail_ = 0;
  std::uint64_t cursor_ = 0;
  // the other policies: free entry indexes, and the general allocator over one block (view_).
  std::vector<std::uint32_t> free_indexes_;
  struct one_block;
  std::unique_ptr<one_block> source_;
  std::unique_ptr<transfer::general_allocator> general_;
  std::uint32_t live_ = 0;
  std::uint64_t live_bytes_ = 0;
  std::uint64_t peak_live_bytes_ = 0;
  std::uint64_t peak_end_ = 0;
};

}  // namespace seriema::pipe::detail

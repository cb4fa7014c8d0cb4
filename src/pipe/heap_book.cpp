// heap_book: the writer's allocation entries over the reader's heap; next fit as a circular heap
// freed from its oldest end, the other fit policies through transfer::general_allocator.
#include <fmt/format.h>

#include <algorithm>
#include <seriema/base/error.hpp>
#include <seriema/pipe/detail/heap_book.hpp>
#include <seriema/pipe/detail/slot.hpp>

namespace seriema::pipe::detail {

// The general allocator's block source: the heap's view as its only block (shorter than
// transfer::block_size, which the allocator allows).
struct heap_book::one_block final : transfer::block_source {
  transfer::memory_block block;
  bool lent = false;
  transfer::memory_block allocate_block() override {
    if (lent) return {};
    lent = true;
    return block;
  }
  void release_block(transfer::memory_block) override { lent = false; }
};

heap_book::heap_book(std::size_t heap_bytes, std::uint32_t width, transfer::fit_policy policy,
                     std::byte* view)
    : heap_bytes_(heap_bytes), width_(width), policy_(policy), view_(view), entries_(width) {
  if (width == 0 || width > 0x10000 || heap_bytes % heap_granule != 0 ||
      heap_bytes > transfer::block_size) {
    throw config_error(fmt::format("pipe heap: width {} must be 1..65536 and the heap ({} bytes) "
                                   "a multiple of {} up to {}",
                                   width, heap_bytes, heap_granule, transfer::block_size));
  }
  if (policy == transfer::fit_policy::next_fit) return;
  if (view == nullptr || reinterpret_cast<std::uintptr_t>(view) % heap_granule != 0) {
    throw error("pipe heap: best, worst and first fit need a 64-byte aligned view of the heap");
  }
  source_ = std::make_unique<one_block>();
  source_->block = {view, heap_bytes, nullptr};
  transfer::general_allocator_config config;
  config.policy = policy;
  config.initial_blocks = 1;
  config.max_bytes = transfer::block_size;  // one block: the heap
  general_ = std::make_unique<transfer::general_allocator>(*source_, config);
  free_indexes_.reserve(width);
  for (std::uint32_t i = width; i > 0; --i) free_indexes_.push_back(i - 1);
}

heap_book::~heap_book() = default;

std::optional<std::uint64_t> heap_book::place_next_fit(std::uint64_t bytes) const noexcept {
  // Empty: go on from the cursor (the reader looks there next), or wrap to the start.
  if (head_ == tail_) {
    if (heap_bytes_ - cursor_ >= bytes) return cursor_;
    return bytes <= heap_bytes_ ? std::optional<std::uint64_t>(0) : std::nullopt;
  }
  const std::uint64_t oldest = entries_[tail_ % width_].holds_from;
  if (cursor_ > oldest) {  // live: [oldest, cursor_); room after it, else before it
    if (heap_bytes_ - cursor_ >= bytes) return cursor_;
    if (oldest >= bytes) return 0;
    return std::nullopt;
  }
  // Wrapped (a non-empty heap with cursor_ <= oldest): live are [oldest, end) and [0, cursor_).
  if (oldest - cursor_ >= bytes) return cursor_;
  return std::nullopt;
}

std::optional<heap_book::grant> heap_book::allocate(std::uint64_t bytes) {
  if (live_ == width_) return std::nullopt;
  std::uint64_t offset;
  std::uint32_t index;
  if (policy_ == transfer::fit_policy::next_fit) {
    // The FIFO may still hold entries freed behind a live older one: it, not live_, is bounded.
    if (head_ - tail_ == width_) return std::nullopt;
    const auto placed = place_next_fit(bytes);
    if (!placed) return std::nullopt;
    offset = *placed;
    index = static_cast<std::uint32_t>(head_ % width_);
    entries_[index].sequence = head_;
    entries_[index].follows = cursor_;
    entries_[index].holds_from = offset == cursor_ || cursor_ == heap_bytes_ ? offset : cursor_;
    ++head_;
    cursor_ = offset + bytes;
  } else {
    const transfer::registered_buffer got = general_->allocate(bytes, heap_granule);
    if (!got) return std::nullopt;
    offset = static_cast<std::uint64_t>(got.data - view_);
    index = free_indexes_.back();
    free_indexes_.pop_back();
  }
  record& r = entries_[index];
  r.offset = offset;
  r.bytes = bytes;
  r.payload = 0;
  r.used = 0;
  r.redirect = false;
  ++r.generation;
  r.state = entry_state::allocated;
  ++live_;
  live_bytes_ += bytes;
  peak_live_bytes_ = std::max(peak_live_bytes_, live_bytes_);
  peak_end_ = std::max(peak_end_, offset + bytes);
  return grant{offset, index | std::uint32_t{r.generation} << 16};
}

heap_book::record* heap_book::find(std::uint32_t entry) noexcept {
  const std::uint32_t index = entry & 0xffffu;
  if (index >= width_) return nullptr;
  record& r = entries_[index];
  if (r.state == entry_state::free || r.generation != entry >> 16) return nullptr;
  return &r;
}

heap_book::record* heap_book::at_sequence(std::uint64_t sequence) noexcept {
  record& r = entries_[sequence % width_];
  return r.state != entry_state::free && r.sequence == sequence ? &r : nullptr;
}

std::uint32_t heap_book::name_of(const record& r) const noexcept {
  return static_cast<std::uint32_t>(&r - entries_.data()) | std::uint32_t{r.generation} << 16;
}

bool heap_book::release(std::uint32_t entry) {
  record* r = find(entry);
  if (r == nullptr || r->state != entry_state::written) return false;
  free_entry(entry & 0xffffu);
  return true;
}

void heap_book::free_entry(std::uint32_t index) {
  record& r = entries_[index];
  r.state = entry_state::free;
  --live_;
  live_bytes_ -= r.bytes;
  if (policy_ == transfer::fit_policy::next_fit) {
    // Coalesce from the oldest end: the heap is free up to the oldest entry still live.
    while (tail_ != head_ && entries_[tail_ % width_].state == entry_state::free) ++tail_;
    return;
  }
  (void)general_->free({view_ + r.offset, static_cast<std::size_t>(r.bytes), nullptr, nullptr});
  free_indexes_.push_back(index);
}

}  // namespace seriema::pipe::detail

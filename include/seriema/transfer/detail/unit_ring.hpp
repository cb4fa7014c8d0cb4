// The ring of fixed-size units shared by circular_allocator and linear_circular_allocator: carves
// blocks into units, keeps each unit's unit_tags at a stable address, and grows in place.
#pragma once

#include <cstddef>
#include <memory>
#include <seriema/transfer/completion.hpp>
#include <seriema/transfer/memory.hpp>
#include <vector>

namespace seriema::transfer {
struct circular_allocator_config;
}

namespace seriema::transfer::detail {

// One unit as the ring sees it. `tags` points into a per-block array owned by the ring, so the
// pointer handed to users stays valid while the ring grows (the ring vector itself moves).
struct ring_unit {
  std::byte* data = nullptr;
  const registered_segment* segment = nullptr;
  unit_tags* tags = nullptr;
};

// Invariants: units never straddle blocks (stride = unit_size rounded up to 64, units_per_block =
// block_size / stride); size() <= max_units(); every unit of every held block except the last
// units_per_block - carved_in_last_ of the newest block is in ring_, exactly once.
// Thread-safety: none; owned by one allocator, used by its owner thread only.
class unit_ring {
 public:
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  // Validates `config` (config_error naming `owner` and the field) and obtains the initial units
  // (seriema::error when the source cannot supply them; nothing is kept in that case).
  unit_ring(block_source& source, const circular_allocator_config& config, const char* owner);
  ~unit_ring();  // returns every block to the source
  unit_ring(const unit_ring&) = delete;
  unit_ring& operator=(const unit_ring&) = delete;

  // Finds a unit that may be (re)used, at ring position `pos` in 0..size() (size() names the
  // slot after the last unit, which wraps around to unit 0): the unit already there when its
  // tags are all complete, otherwise the first of the fresh units that growth inserts at `pos`
  // (so the older units keep their FIFO order after them). Returns its index, or npos when the
  // unit there is busy and the ring cannot grow (cap reached or source exhausted). Does not clear
  // tags; the caller does when it hands the unit out.
  [[nodiscard]] std::size_t acquire_at(std::size_t pos);

  [[nodiscard]] const ring_unit& operator[](std::size_t i) const noexcept { return ring_[i]; }
  [[nodiscard]] std::size_t size() const noexcept { return ring_.size(); }
  [[nodiscard]] std::size_t blocks() const noexcept { return blocks_.size(); }
  [[nodiscard]] std::size_t unit_size() const noexcept { return unit_size_; }
  [[nodiscard]] std::size_t max_units() const noexcept { return max_units_; }
  // Every unit starts at an address aligned to at least this (a power of two, >= 64).
  [[nodiscard]] std::size_t unit_alignment() const noexcept { return unit_alignment_; }

 private:
  // Inserts up to `count` fresh units at `pos`; returns how many it inserted.
  std::size_t grow_at(std::size_t pos, std::size_t count);
  void release_all() noexcept;

  struct held_block {
    memory_block block;
    std::unique_ptr<unit_tags[]> tags;  // one per unit of the block
  };

  block_source* source_;
  std::size_t unit_size_;
  std::size_t stride_;
  std::size_t units_per_block_;
  std::size_t unit_alignment_;
  std::size_t max_units_;
  bool exponential_;
  std::size_t linear_growth_units_;
  std::vector<held_block> blocks_;
  std::size_t carved_in_last_ = 0;  // units of blocks_.back() already in the ring
  std::vector<ring_unit> ring_;
  std::vector<ring_unit> fresh_;  // scratch for grow_at, kept to avoid reallocating
};

}  // namespace seriema::transfer::detail

// The unit ring and the two circular allocators built on it (circular, linear-circular), plus the
// status/policy names shared by all allocators.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <seriema/base/enum_names.hpp>
#include <seriema/base/error.hpp>
#include <seriema/transfer/allocators.hpp>

namespace seriema::transfer {

const char* to_string(alloc_status status) noexcept {
  static constexpr enum_name_entry<alloc_status> names[] = {
      {alloc_status::ok, "ok"},
      {alloc_status::exhausted, "exhausted"},
      {alloc_status::too_large, "too_large"},
      {alloc_status::bad_alignment, "bad_alignment"},
      {alloc_status::zero_size, "zero_size"},
  };
  return name_in(names, status);
}

const char* to_string(growth_policy policy) noexcept {
  static constexpr enum_name_entry<growth_policy> names[] = {
      {growth_policy::linear, "linear"},
      {growth_policy::exponential, "exponential"},
  };
  return name_in(names, policy);
}

const char* to_string(fit_policy policy) noexcept {
  static constexpr enum_name_entry<fit_policy> names[] = {
      {fit_policy::first_fit, "first_fit"},
      {fit_policy::best_fit, "best_fit"},
      {fit_policy::next_fit, "next_fit"},
      {fit_policy::worst_fit, "worst_fit"},
  };
  return name_in(names, policy);
}

const char* to_string(free_status status) noexcept {
  static constexpr enum_name_entry<free_status> names[] = {
      {free_status::ok, "ok"},
      {free_status::not_allocated, "not_allocated"},
      {free_status::size_mismatch, "size_mismatch"},
  };
  return name_in(names, status);
}

namespace detail {
namespace {

constexpr std::size_t round_up(std::size_t n, std::size_t alignment) noexcept {
  return (n + alignment - 1) & ~(alignment - 1);
}

// The unit cap a valid config implies; throws config_error naming the first bad field.
std::size_t validate(const circular_allocator_config& c, const char* owner) {
  if (c.unit_size < 1 || c.unit_size > block_size) {
    throw config_error(
        fmt::format("{}: unit_size {} must be in 1..{}", owner, c.unit_size, block_size));
  }
  if (c.growth != growth_policy::linear && c.growth != growth_policy::exponential) {
    throw config_error(fmt::format("{}: growth {} must be linear or exponential", owner,
                                   static_cast<unsigned>(c.growth)));
  }
  if (c.linear_growth_units < 1) {
    throw config_error(fmt::format("{}: linear_growth_units {} must be at least 1", owner,
                                   c.linear_growth_units));
  }
  if (c.initial_units < 1) {
    throw config_error(
        fmt::format("{}: initial_units {} must be at least 1", owner, c.initial_units));
  }
  const std::size_t by_bytes = c.max_bytes / c.unit_size;
  if (by_bytes < c.initial_units) {
    throw config_error(fmt::format(
        "{}: max_bytes {} holds {} units of unit_size {}, fewer than initial_units {}; raise "
        "max_bytes to at least {} or lower initial_units",
        owner, c.max_bytes, by_bytes, c.unit_size, c.initial_units,
        c.initial_units * c.unit_size));
  }
  if (c.max_units < c.initial_units) {
    throw config_error(fmt::format("{}: max_units {} must be at least initial_units {}", owner,
                                   c.max_units, c.initial_units));
  }
  return std::min(c.max_units, by_bytes);
}

}  // namespace

unit_ring::unit_ring(block_source& source, const circular_allocator_config& config,
                     const char* owner)
    : source_(&source),
      unit_size_(config.unit_size),
      stride_(0),
      units_per_block_(0),
      unit_alignment_(0),
      max_units_(validate(config, owner)),
      exponential_(config.growth == growth_policy::exponential),
      linear_growth_units_(config.linear_growth_units) {
  stride_ = round_up(unit_size_, min_alignment);  // <= block_size, since block_size % 64 == 0
  units_per_block_ = block_size / stride_;
  // Blocks are block_size-aligned, so unit i of a block starts at a multiple of i * stride; the
  // lowest set bit of the stride is the alignment every unit is guaranteed.
  unit_alignment_ = stride_ & (~stride_ + 1);
  const std::size_t got = grow_at(0, config.initial_units);
  if (got < config.initial_units) {
    release_all();
    throw error(fmt::format(
        "{}: the block source supplied only {} of the {} initial units ({} blocks of {} bytes); "
        "raise the source's limit or lower initial_units",
        owner, got, config.initial_units,
        (config.initial_units + units_per_block_ - 1) / units_per_block_, block_size));
  }
}

unit_ring::~unit_ring() { release_all(); }

void unit_ring::release_all() noexcept {
  for (auto& held : blocks_) source_->release_block(held.block);
  blocks_.clear();
  ring_.clear();
  carved_in_last_ = 0;
}

std::size_t unit_ring::grow_at(std::size_t pos, std::size_t count) {
  count = std::min(count, max_units_ - ring_.size());
  fresh_.clear();
  while (fresh_.size() < count) {
    if (blocks_.empty() || carved_in_last_ == units_per_block_) {
      memory_block block = source_->allocate_block();
      if (block.data == nullptr) break;
      blocks_.push_back({block, std::make_unique<unit_tags[]>(units_per_block_)});
      carved_in_last_ = 0;
    }
    held_block& held = blocks_.back();
    const std::size_t i = carved_in_last_++;
    fresh_.push_back({held.block.data + i * stride_, held.block.segment, &held.tags[i]});
  }
  ring_.insert(ring_.begin() + static_cast<std::ptrdiff_t>(pos), fresh_.begin(), fresh_.end());
  return fresh_.size();
}

std::size_t unit_ring::acquire_at(std::size_t pos) {
  const std::size_t existing = pos == ring_.size() ? 0 : pos;
  if (ring_[existing].tags->all_complete()) return existing;
  const std::size_t want = exponential_ ? ring_.size() : linear_growth_units_;
  return grow_at(pos, want) > 0 ? pos : npos;
}

}  // namespace detail

circular_allocator::circular_allocator(block_source& source,
                                       const circular_allocator_config& config)
    : ring_(source, config, "circular_allocator") {}

registered_buffer circular_allocator::allocate_slow() {
  const std::size_t i = ring_.acquire_at(next_);
  if (i == detail::unit_ring::npos) return {};
  const detail::ring_unit& unit = ring_[i];
  unit.tags->clear();
  next_ = i + 1 == ring_.size() ? 0 : i + 1;
  return {unit.data, ring_.unit_size(), unit.segment, unit.tags};
}

linear_circular_allocator::linear_circular_allocator(
    block_source& source, const linear_circular_allocator_config& config)
    : ring_(source, config, "linear_circular_allocator") {}

allocation linear_circular_allocator::try_allocate(std::size_t n, std::size_t alignment) {
  if (n == 0) return {{}, alloc_status::zero_size};
  if (!std::has_single_bit(alignment) || alignment > block_size) {
    return {{}, alloc_status::bad_alignment};
  }
  alignment = std::max(alignment, min_alignment);
  const std::size_t unit_size = ring_.unit_size();
  const std::size_t worst_padding =
      alignment > ring_.unit_alignment() ? alignment - ring_.unit_alignment() : 0;
  if (n > unit_size || worst_padding > unit_size - n) return {{}, alloc_status::too_large};

  // Offset of an aligned segment inside `unit` starting no earlier than `from`.
  auto aligned_offset = [alignment](const detail::ring_unit& unit, std::size_t from) {
    const auto address = reinterpret_cast<std::uintptr_t>(unit.data) + from;
    return from + (((address + alignment - 1) & ~(alignment - 1)) - address);
  };

  std::size_t start = aligned_offset(ring_[current_], offset_);
  if (start > unit_size || n > unit_size - start) {
    const std::size_t i = ring_.acquire_at(current_ + 1);
    if (i == detail::unit_ring::npos) return {{}, alloc_status::exhausted};
    current_ = i;
    ring_[current_].tags->clear();
    start = aligned_offset(ring_[current_], 0);  // fits: checked against worst_padding above
  }
  const detail::ring_unit& unit = ring_[current_];
  offset_ = detail::round_up(start + n, min_alignment);
  return {{unit.data + start, n, unit.segment, unit.tags}, alloc_status::ok};
}

}  // namespace seriema::transfer

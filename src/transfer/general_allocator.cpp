// general_allocator: allocate/free over blocks with first/best/next/worst fit, coalescing on free,
// growth one block at a time up to a cap. One mutex guards all state.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <map>
#include <mutex>
#include <seriema/base/error.hpp>
#include <seriema/transfer/allocators.hpp>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

namespace seriema::transfer {
namespace {

constexpr std::size_t round_up(std::size_t n, std::size_t alignment) noexcept {
  return (n + alignment - 1) & ~(alignment - 1);
}

std::byte* align_up(std::byte* p, std::size_t alignment) noexcept {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  return p + (((a + alignment - 1) & ~(alignment - 1)) - a);
}

}  // namespace

// Invariants (under mutex): every byte of every held block is in exactly one free range or one
// live allocation; range boundaries are multiples of 64 bytes; no two free ranges of the same
// block are adjacent (free coalesces); free_by_size holds exactly the ranges of free_by_address.
struct general_allocator::state {
  struct free_range {
    std::byte* end;
    std::size_t block;  // index into blocks; ranges of different blocks never merge
  };
  struct live_allocation {
    std::byte* end;     // data + size rounded up to 64
    std::size_t size;   // as requested, for free()'s check
    std::size_t block;
  };

  block_source* source;
  fit_policy policy;
  std::size_t max_blocks;
  mutable std::mutex mutex;
  std::vector<memory_block> blocks;
  std::map<std::byte*, free_range> free_by_address;
  std::set<std::pair<std::size_t, std::byte*>> free_by_size;
  std::unordered_map<const std::byte*, live_allocation> live;
  std::byte* rover = nullptr;  // next_fit: where the previous allocation ended
  std::size_t bytes_in_use = 0;

  using range_iterator = std::map<std::byte*, free_range>::iterator;

  void insert_free(std::byte* begin, std::byte* end, std::size_t block) {
    if (begin == end) return;
    free_by_address.emplace(begin, free_range{end, block});
    free_by_size.emplace(static_cast<std::size_t>(end - begin), begin);
  }

  void erase_free(range_iterator it) {
    free_by_size.erase({static_cast<std::size_t>(it->second.end - it->first), it->first});
    free_by_address.erase(it);
  }

  bool add_block() {
    if (blocks.size() >= max_blocks) return false;
    memory_block block = source->allocate_block();
    if (block.data == nullptr) return false;
    blocks.push_back(block);
    // A source may hand out a block shorter than block_size (a pipe's heap): only its bytes.
    insert_free(block.data, block.data + std::min(block.size, block_size), blocks.size() - 1);
    return true;
  }

  // Where an aligned allocation of `size` bytes would start in `it`, or nullptr if it does not fit.
  static std::byte* fit(range_iterator it, std::size_t size, std::size_t alignment) {
    std::byte* start = align_up(it->first, alignment);
    if (start >= it->second.end || static_cast<std::size_t>(it->second.end - start) < size) {
      return nullptr;
    }
    return start;
  }

  // The free range the policy picks for (size, alignment), or end() when none fits.
  range_iterator find(std::size_t size, std::size_t alignment) {
    const auto none = free_by_address.end();
    switch (policy) {
      case fit_policy::first_fit:
        for (auto it = free_by_address.begin(); it != none; ++it) {
          if (fit(it, size, alignment) != nullptr) return it;
        }
        return none;
      case fit_policy::next_fit: {
        const auto from = free_by_address.lower_bound(rover);
        for (auto it = from; it != none; ++it) {
          if (fit(it, size, alignment) != nullptr) return it;
        }
        for (auto it = free_by_address.begin(); it != from; ++it) {
          if (fit(it, size, alignment) != nullptr) return it;
        }
        return none;
      }
      case fit_policy::best_fit:
        for (auto s = free_by_size.lower_bound({size, nullptr}); s != free_by_size.end(); ++s) {
          auto it = free_by_address.find(s->second);
          if (fit(it, size, alignment) != nullptr) return it;
        }
        return none;
      case fit_policy::worst_fit:
        for (auto s = free_by_size.rbegin(); s != free_by_size.rend() && s->first >= size; ++s) {
          auto it = free_by_address.find(s->second);
          if (fit(it, size, alignment) != nullptr) return it;
        }
        return none;
    }
    return none;
  }

  registered_buffer carve(range_iterator it, std::size_t n, std::size_t size,
                          std::size_t alignment) {
    std::byte* const range_begin = it->first;
    const free_range range = it->second;
    std::byte* const start = fit(it, size, alignment);
    erase_free(it);
    insert_free(range_begin, start, range.block);
    insert_free(start + size, range.end, range.block);
    live.emplace(start, live_allocation{start + size, n, range.block});
    bytes_in_use += size;
    rover = start + size;
    return {start, n, blocks[range.block].segment, nullptr};
  }
};

general_allocator::general_allocator(block_source& source, const general_allocator_config& config)
    : state_(std::make_unique<state>()) {
  const auto p = config.policy;
  if (p != fit_policy::first_fit && p != fit_policy::best_fit && p != fit_policy::next_fit &&
      p != fit_policy::worst_fit) {
    throw config_error(
        fmt::format("general_allocator: policy {} must be first_fit, best_fit, next_fit or "
                    "worst_fit",
                    static_cast<unsigned>(p)));
  }
  const std::size_t max_blocks = config.max_bytes / block_size;
  if (max_blocks < 1) {
    throw config_error(
        fmt::format("general_allocator: max_bytes {} must be at least {} (one block)",
                    config.max_bytes, block_size));
  }
  if (config.initial_blocks > max_blocks) {
    throw config_error(
        fmt::format("general_allocator: initial_blocks {} exceeds the {} blocks max_bytes {} "
                    "allows; lower initial_blocks or raise max_bytes",
                    config.initial_blocks, max_blocks, config.max_bytes));
  }
  state_->source = &source;
  state_->policy = p;
  state_->max_blocks = max_blocks;
  for (std::size_t i = 0; i < config.initial_blocks; ++i) {
    if (!state_->add_block()) {
      const std::size_t got = state_->blocks.size();
      for (const auto& block : state_->blocks) source.release_block(block);
      throw error(fmt::format(
          "general_allocator: the block source supplied only {} of the {} initial blocks; raise "
          "the source's limit or lower initial_blocks",
          got, config.initial_blocks));
    }
  }
}

general_allocator::~general_allocator() {
  for (const auto& block : state_->blocks) state_->source->release_block(block);
}

allocation general_allocator::try_allocate(std::size_t n, std::size_t alignment) {
  if (n == 0) return {{}, alloc_status::zero_size};
  if (!std::has_single_bit(alignment) || alignment > block_size) {
    return {{}, alloc_status::bad_alignment};
  }
  if (n > block_size) return {{}, alloc_status::too_large};
  alignment = std::max(alignment, min_alignment);
  const std::size_t size = round_up(n, min_alignment);

  state& s = *state_;
  std::lock_guard lock(s.mutex);
  auto it = s.find(size, alignment);
  if (it == s.free_by_address.end()) {
    // Any request of at most block_size bytes, aligned to at most block_size, fits in a fresh
    // block (blocks are block_size-aligned), so one more block suffices; the check below only
    // guards against a source that breaks that promise.
    if (!s.add_block()) return {{}, alloc_status::exhausted};
    it = s.free_by_address.find(s.blocks.back().data);
    if (state::fit(it, size, alignment) == nullptr) return {{}, alloc_status::exhausted};
  }
  return {s.carve(it, n, size, alignment), alloc_status::ok};
}

free_status general_allocator::free(const registered_buffer& buffer) {
  state& s = *state_;
  std::lock_guard lock(s.mutex);
  const auto live = s.live.find(buffer.data);
  if (buffer.data == nullptr || live == s.live.end()) return free_status::not_allocated;
  if (live->second.size != buffer.size) return free_status::size_mismatch;

  std::byte* begin = buffer.data;
  std::byte* end = live->second.end;
  const std::size_t block = live->second.block;
  s.bytes_in_use -= static_cast<std::size_t>(end - begin);
  s.live.erase(live);

  auto next = s.free_by_address.lower_bound(begin);
  if (next != s.free_by_address.begin()) {
    auto prev = std::prev(next);
    if (prev->second.end == begin && prev->second.block == block) {
      begin = prev->first;
      s.erase_free(prev);
    }
  }
  if (next != s.free_by_address.end() && next->first == end && next->second.block == block) {
    end = next->second.end;
    s.erase_free(next);
  }
  s.insert_free(begin, end, block);
  return free_status::ok;
}

fit_policy general_allocator::policy() const noexcept { return state_->policy; }

std::size_t general_allocator::max_blocks() const noexcept { return state_->max_blocks; }

std::size_t general_allocator::blocks() const {
  std::lock_guard lock(state_->mutex);
  return state_->blocks.size();
}

std::size_t general_allocator::live_allocations() const {
  std::lock_guard lock(state_->mutex);
  return state_->live.size();
}

std::size_t general_allocator::bytes_in_use() const {
  std::lock_guard lock(state_->mutex);
  return state_->bytes_in_use;
}

std::size_t general_allocator::free_ranges() const {
  std::lock_guard lock(state_->mutex);
  return state_->free_by_address.size();
}

}  // namespace seriema::transfer

// heap_block_source: 2 MiB blocks from aligned_alloc, with a cap and outstanding-block accounting.
#include <cstdio>
#include <cstdlib>
#include <new>
#include <seriema/base/log.hpp>
#include <seriema/transfer/heap_block_source.hpp>

namespace seriema::transfer {

heap_block_source::heap_block_source(std::size_t max_blocks) : max_blocks_(max_blocks) {}

heap_block_source::~heap_block_source() {
  for (auto& [base, segment] : outstanding_) std::free(base);
}

memory_block heap_block_source::allocate_block() {
  std::lock_guard lock(mutex_);
  if (outstanding_.size() >= max_blocks_) {
    ++refused_;
    return {};
  }
  auto* base = static_cast<std::byte*>(std::aligned_alloc(block_size, block_size));
  if (base == nullptr) {
    ++refused_;
    return {};
  }
  auto segment = std::make_unique<registered_segment>();
  segment->base = base;
  segment->size = block_size;
  const registered_segment* seg = segment.get();
  try {
    outstanding_.emplace(base, std::move(segment));
  } catch (const std::bad_alloc&) {
    std::free(base);
    ++refused_;
    return {};
  }
  ++obtained_;
  return {base, block_size, seg};
}

void heap_block_source::release_block(memory_block block) {
  std::lock_guard lock(mutex_);
  auto it = outstanding_.find(block.data);
  if (it == outstanding_.end() || block.segment != it->second.get()) {
    ++bad_releases_;
    log::error("heap_block_source::release_block({}): not a block this source has outstanding "
               "(double release or foreign block); ignored",
               static_cast<void*>(block.data));
    return;
  }
  std::free(it->first);
  outstanding_.erase(it);
  ++released_;
}

std::size_t heap_block_source::outstanding_blocks() const {
  std::lock_guard lock(mutex_);
  return outstanding_.size();
}

std::size_t heap_block_source::blocks_obtained() const {
  std::lock_guard lock(mutex_);
  return obtained_;
}

std::size_t heap_block_source::blocks_released() const {
  std::lock_guard lock(mutex_);
  return released_;
}

std::size_t heap_block_source::refused_allocations() const {
  std::lock_guard lock(mutex_);
  return refused_;
}

std::size_t heap_block_source::bad_releases() const {
  std::lock_guard lock(mutex_);
  return bad_releases_;
}

}  // namespace seriema::transfer

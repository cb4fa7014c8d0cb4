// A small registered area that UCX allocates, so that peers on the same machine can map it
// (ucp_rkey_ptr) and others reach it with put/get: control words that peers write into (the
// fabric's reply cells). Arenas are for bulk memory; this is one mapping of a few pages.
#pragma once

#include <cstddef>
#include <seriema/transfer/memory.hpp>
#include <seriema/transfer/remote_memory.hpp>
#include <seriema/transfer/ucx.hpp>
#include <span>

namespace seriema::transfer {

/// A few pages of UCX-allocated, registered memory that peers write into (put, or plain stores
/// when they map it). Thread-safety: immutable after construction (the bytes themselves are the
/// user's business).
class shared_region {
 public:
  /// Allocates and registers `size` bytes (rounded up to whole pages), zeroed. Throws ucx_error
  /// naming `purpose` (what the region is for, and the setting that sizes it) when UCX cannot
  /// allocate it (e.g. /dev/shm full).
  shared_region(ucx_context& context, std::size_t size, const char* purpose);
  ~shared_region();  ///< unmaps the region; peers must no longer write to it
  shared_region(const shared_region&) = delete;
  shared_region& operator=(const shared_region&) = delete;

  /// The region's `size` bytes as asked for (the mapping may be larger).
  [[nodiscard]] std::span<std::byte> bytes() const noexcept { return {segment_.base, size_}; }
  /// The locator peers resolve to reach the region (`process`: this process's rank).
  [[nodiscard]] remote_memory_locator locator(int process) const {
    return remote_memory_locator::make(process, segment_, segment_.base, size_);
  }

 private:
  ucx_context& context_;
  std::size_t size_;             ///< as asked for
  registered_segment segment_;  ///< the whole mapping (size_ rounded up to pages)
};

}  // namespace seriema::transfer

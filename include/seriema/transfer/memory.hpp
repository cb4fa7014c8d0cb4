// Value types for registered memory: a registered segment (one UCX registration), 2 MiB blocks
// carved from it, and buffers handed out by the allocators.
#pragma once

#include <cstddef>
#include <cstdint>
#include <seriema/transfer/completion.hpp>
#include <span>
#include <vector>

struct ucp_mem;  // ucp_mem_h without pulling <ucp/api/ucp.h> into every header

namespace seriema::transfer {

inline constexpr std::size_t block_size = std::size_t{2} << 20;  // 2 MiB, one huge page

// How the pages of a segment were obtained (reported by seriema-info; never fatal).
enum class page_kind : std::uint8_t { gigantic_1g, hugetlb_2m, transparent_huge, normal };
const char* to_string(page_kind kind) noexcept;

// One contiguous range of memory registered with UCX once. Owned by an arena; lives until the
// arena is destroyed. `packed_rkey` is what a peer needs to address it (see RemoteMemoryLocator).
struct registered_segment {
  std::byte* base = nullptr;
  std::size_t size = 0;
  ucp_mem* memh = nullptr;  // null for plain (unregistered) memory used by unit tests
  std::vector<std::byte> packed_rkey;
  page_kind pages = page_kind::normal;
  std::size_t page_size = 4096;  // bytes per page as reported by the kernel for this range
  int numa_zone = -1;            // zone the memory is bound to; -1 when unbound
  bool ucx_allocated = false;    // true: peers on this machine can map it (ucp_rkey_ptr)

  [[nodiscard]] bool contains(const void* p, std::size_t n) const noexcept {
    auto* b = static_cast<const std::byte*>(p);
    return b >= base && n <= size && b <= base + (size - n);
  }
};

// A block_size-aligned piece of a segment.
struct memory_block {
  std::byte* data = nullptr;
  std::size_t size = 0;
  const registered_segment* segment = nullptr;
};

// Anything that hands out blocks: the per-zone arena, or a plain heap source in unit tests.
// Thread-safety: implementations must allow concurrent allocate_block/release_block.
class block_source {
 public:
  virtual ~block_source() = default;
  // Returns a block, or a block with data == nullptr when the source is exhausted (its cap is
  // reached). Never throws on exhaustion.
  virtual memory_block allocate_block() = 0;
  virtual void release_block(memory_block block) = 0;
};

// Memory handed to a user by an allocator. `tags` is non-null for units of the circular
// allocators: a transmitter that uses the buffer records its completion tag there, and the
// allocator reuses the unit only once every tag is complete.
struct registered_buffer {
  std::byte* data = nullptr;
  std::size_t size = 0;
  const registered_segment* segment = nullptr;
  unit_tags* tags = nullptr;

  [[nodiscard]] explicit operator bool() const noexcept { return data != nullptr; }
  [[nodiscard]] std::span<std::byte> bytes() const noexcept { return {data, size}; }
};

}  // namespace seriema::transfer

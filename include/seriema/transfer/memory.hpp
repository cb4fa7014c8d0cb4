// Value types for registered memory: a registered segment (one UCX registration), 2 MiB blocks
// carved from it, and buffers handed out by the allocators.
#pragma once

#include <cstddef>
#include <cstdint>
#include <seriema/transfer/completion.hpp>
#include <span>
#include <string>
#include <vector>

struct ucp_mem;  // ucp_mem_h without pulling <ucp/api/ucp.h> into every header

namespace seriema::transfer {

/// Size and alignment of every block a block_source hands out: 2 MiB, one huge page.
inline constexpr std::size_t block_size = std::size_t{2} << 20;

/// How the pages of a segment were obtained (reported by seriema-info; never fatal).
enum class page_kind : std::uint8_t {
  gigantic_1g,       ///< 1 GiB hugetlb pages
  hugetlb_2m,        ///< 2 MiB hugetlb pages
  transparent_huge,  ///< base pages with transparent huge pages advised (madvise) where the kernel
                     ///< allows it: 2 MiB pages as they are touched, when the kernel has them
  normal             ///< base pages (usually 4 KiB)
};
/// A readable name ("2 MiB hugetlb"), or "unknown".
const char* to_string(page_kind kind) noexcept;

/// One contiguous range of memory registered with UCX once. Owned by an arena; lives until the
/// arena is destroyed. `packed_rkey` is what a peer needs to address it (see
/// remote_memory_locator).
struct registered_segment {
  std::byte* base = nullptr;  ///< first byte
  std::size_t size = 0;       ///< bytes
  /// UCX registration handle; null for plain (unregistered) memory used by unit tests.
  ucp_mem* memh = nullptr;
  std::vector<std::byte> packed_rkey;   ///< the packed remote key; empty when not registered
  page_kind pages = page_kind::normal;  ///< how the pages were obtained
  std::size_t page_size = 4096;  ///< bytes per page as reported by the kernel for this range
  int numa_zone = -1;            ///< zone the memory is bound to; -1 when unbound
  bool ucx_allocated = false;    ///< true: peers on this machine can map it (ucp_rkey_ptr)
  /// Why the larger pages the preference allows were not obtained, e.g. "2 MiB: 0 free, the
  /// segment needs 32 (...)"; empty when the first choice was obtained.
  std::string page_note;

  /// True when [p, p+n) lies inside the segment (overflow-safe).
  [[nodiscard]] bool contains(const void* p, std::size_t n) const noexcept {
    auto* b = static_cast<const std::byte*>(p);
    return b >= base && n <= size && b <= base + (size - n);
  }
};

/// A block_size-aligned piece of a segment.
struct memory_block {
  std::byte* data = nullptr;                    ///< first byte; null: no block (source exhausted)
  /// bytes: block_size, or fewer from a source of one short block (the general allocator then
  /// uses only these; the circular allocators need whole blocks)
  std::size_t size = 0;
  const registered_segment* segment = nullptr;  ///< the segment the block lies in
};

/// Anything that hands out blocks: the per-zone arena, or a plain heap source in unit tests.
/// Thread-safety: implementations must allow concurrent allocate_block/release_block.
class block_source {
 public:
  virtual ~block_source() = default;
  /// Returns a block, or a block with data == nullptr when the source is exhausted (its cap is
  /// reached). Never throws on exhaustion.
  virtual memory_block allocate_block() = 0;
  /// Takes back a block allocate_block() returned. Called from destructors: must not throw.
  virtual void release_block(memory_block block) = 0;
};

/// Memory handed to a user by an allocator. `tags` is non-null for units of the circular
/// allocators: a transmitter that uses the buffer records its completion tag there, and the
/// allocator reuses the unit only once every tag is complete.
struct registered_buffer {
  std::byte* data = nullptr;                    ///< first byte; null: empty (allocation failed)
  std::size_t size = 0;                         ///< bytes
  const registered_segment* segment = nullptr;  ///< the registered segment containing the buffer
  unit_tags* tags = nullptr;  ///< the unit's completion tags; null outside circular allocators

  /// True unless the buffer is empty.
  [[nodiscard]] explicit operator bool() const noexcept { return data != nullptr; }
  /// The buffer as a byte span.
  [[nodiscard]] std::span<std::byte> bytes() const noexcept { return {data, size}; }
};

}  // namespace seriema::transfer

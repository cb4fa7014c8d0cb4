// Registered arenas: one per NUMA zone. Large segments (1 GiB pages, else 2 MiB hugetlb, else
// transparent huge pages, else normal pages), bound to the zone, registered with UCX once per
// segment, handed out as 2 MiB blocks.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <seriema/transfer/detail/settings.hpp>
#include <seriema/transfer/memory.hpp>
#include <seriema/transfer/options.hpp>
#include <seriema/transfer/ucx.hpp>
#include <string>
#include <vector>

namespace seriema::transfer {

/// A concurrent source of registered 2 MiB blocks in one NUMA zone.
/// Thread-safety: all members may be called from any thread (a mutex guards the free list; blocks
/// are taken only when an allocator grows, never per operation).
class arena final : public block_source {
 public:
  /// zone: OS index of the NUMA node to bind to, or -1 for no binding. Obtains no memory yet
  /// (the first allocate_block() or grow() does). Throws config_error for bad `options`.
  arena(ucx_context& context, int zone, const arena_options& options);
  ~arena() override;
  arena(const arena&) = delete;
  arena& operator=(const arena&) = delete;

  /// A free block, adding a segment when none is left; data == nullptr when the limit is
  /// reached. Throws seriema::error when the system refuses memory for a new segment.
  memory_block allocate_block() override;
  /// Puts `block` back on the free list. A block this arena did not hand out is logged and
  /// ignored; never throws for it.
  void release_block(memory_block block) override;

  /// Segment containing [p, p+n), or nullptr. O(segments).
  [[nodiscard]] const registered_segment* segment_of(const void* p, std::size_t n) const;
  /// The NUMA zone given at construction (-1: unbound).
  [[nodiscard]] int zone() const noexcept { return zone_; }
  /// Bytes of all segments obtained so far.
  [[nodiscard]] std::size_t bytes_obtained() const;
  /// One line per segment: size, page kind and size, zone, source, and why larger pages were not
  /// obtained (registered_segment::page_note).
  [[nodiscard]] std::vector<std::string> describe_segments() const;

  /// Allocates one segment now (e.g. so seriema-info can report the pages obtained). Throws
  /// seriema::error when the limit is reached or the system refuses memory.
  const registered_segment& grow();

 private:
  const registered_segment& grow_locked();
  void map_ucx_allocated(registered_segment& segment);
  void record_ucx_pages(registered_segment& segment);
  void map_self_allocated(registered_segment& segment);

  ucx_context& context_;
  int zone_;
  arena_options options_;
  mutable std::mutex mutex_;
  std::deque<registered_segment> segments_;  ///< deque: segment addresses stay stable
  std::vector<memory_block> free_blocks_;
  std::size_t bytes_obtained_ = 0;
};

/// Kernel page size backing the mapping that contains `address` (from /proc/self/smaps), or 0.
std::size_t kernel_page_size_of(const void* address);

}  // namespace seriema::transfer

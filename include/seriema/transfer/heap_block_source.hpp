// A block_source over plain heap memory (unregistered, memh == nullptr): lets unit tests and
// programs that do not use UCX run the registered-memory allocators.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <seriema/transfer/memory.hpp>
#include <unordered_map>

namespace seriema::transfer {

/// Hands out block_size blocks, each its own aligned_alloc(block_size, block_size) with its own
/// registered_segment (base = the block, memh = nullptr), optionally up to a cap on the number of
/// blocks outstanding at once. Released blocks go straight back to the heap, so a sanitizer sees
/// any use after release. Counts what it hands out so tests can check that every block came back.
/// Thread-safety: every member function may be called concurrently (one mutex; not a hot path).
/// Lifetime: must outlive every user of its blocks; the destructor frees blocks still outstanding.
class heap_block_source final : public block_source {
 public:
  /// max_blocks value meaning no cap.
  static constexpr std::size_t unlimited = std::numeric_limits<std::size_t>::max();

  /// `max_blocks`: how many blocks may be outstanding at once; 0 is allowed (always exhausted,
  /// useful to test exhaustion).
  explicit heap_block_source(std::size_t max_blocks = unlimited);
  ~heap_block_source() override;
  heap_block_source(const heap_block_source&) = delete;
  heap_block_source& operator=(const heap_block_source&) = delete;

  /// A block, or {data == nullptr} when max_blocks are outstanding or the heap refused.
  memory_block allocate_block() override;
  /// Returns `block` to the heap. A block this source does not have outstanding (double release,
  /// foreign block) is a bug in the caller: it is reported on stderr, counted in bad_releases()
  /// and otherwise ignored (release_block is called from destructors, so it never throws).
  void release_block(memory_block block) override;

  /// The cap given at construction (`unlimited`: none).
  [[nodiscard]] std::size_t max_blocks() const noexcept { return max_blocks_; }
  /// Blocks handed out and not yet released.
  [[nodiscard]] std::size_t outstanding_blocks() const;
  [[nodiscard]] std::size_t blocks_obtained() const;     ///< successful allocate_block calls, ever
  [[nodiscard]] std::size_t blocks_released() const;     ///< accepted release_block calls, ever
  [[nodiscard]] std::size_t refused_allocations() const;  ///< allocate_block calls that got nothing
  [[nodiscard]] std::size_t bad_releases() const;        ///< release_block calls refused

 private:
  const std::size_t max_blocks_;
  mutable std::mutex mutex_;  ///< guards everything below
  /// Outstanding blocks by base address; the segment lives exactly as long as its block.
  std::unordered_map<std::byte*, std::unique_ptr<registered_segment>> outstanding_;
  std::size_t obtained_ = 0;
  std::size_t released_ = 0;
  std::size_t refused_ = 0;
  std::size_t bad_releases_ = 0;
};

}  // namespace seriema::transfer

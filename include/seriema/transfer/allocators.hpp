// Allocators of registered memory built on a block_source (paper §4.2): the circular allocator
// (fixed-size units recycled by completion tags), the linear-circular allocator (variable-size
// segments carved inside those units) and the general allocator (allocate/free with a fit policy).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <seriema/transfer/detail/unit_ring.hpp>
#include <seriema/transfer/memory.hpp>

namespace seriema::transfer {

/// Every buffer any allocator here returns is aligned to at least this (one cache line).
inline constexpr std::size_t min_alignment = 64;

/// Why an allocation returned an empty buffer. Data path: returned, never thrown.
enum class alloc_status : std::uint8_t {
  ok,  ///< the buffer is valid
  /// Cap reached (or source exhausted) and nothing reusable now; retry after tags complete
  /// (circular allocators) or after frees (general allocator).
  exhausted,
  too_large,      ///< can never succeed: larger than a unit (linear-circular) or a block (general)
  bad_alignment,  ///< alignment is not a power of two, or is larger than block_size
  zero_size,      ///< n == 0
};
/// The enumerator's name ("exhausted"), or "unknown".
const char* to_string(alloc_status status) noexcept;

/// A buffer and, when it is empty, why.
struct allocation {
  registered_buffer buffer;                ///< the memory; empty unless status == ok
  alloc_status status = alloc_status::ok;  ///< ok, or why `buffer` is empty
  /// True when the allocation succeeded (status == ok).
  [[nodiscard]] explicit operator bool() const noexcept { return status == alloc_status::ok; }
};

/// How a circular allocator's ring grows when the next unit is busy.
enum class growth_policy : std::uint8_t {
  linear,       ///< add linear_growth_units units per growth
  exponential,  ///< double the number of units per growth
};
/// The enumerator's name ("linear"), or "unknown".
const char* to_string(growth_policy policy) noexcept;

/// Configuration of both circular allocators. The ring never holds more than
/// min(max_units, max_bytes / unit_size) units; growth stops there.
struct circular_allocator_config {
  std::size_t unit_size = 64 * 1024;  ///< bytes per unit, 1..block_size
  std::size_t initial_units = 32;     ///< units obtained at construction, >= 1, <= the cap
  growth_policy growth = growth_policy::exponential;  ///< how the ring grows when it must
  std::size_t linear_growth_units = 32;  ///< units per growth when growth == linear, >= 1
  std::size_t max_units = std::numeric_limits<std::size_t>::max();  ///< cap on the number of units
  std::size_t max_bytes = std::size_t{64} << 20;  ///< cap on units * unit_size
};
/// Configuration of the linear-circular allocator: the same as the circular allocator's.
using linear_circular_allocator_config = circular_allocator_config;

/// Hands out fixed-size units in ring order (paper §4.2). A unit is reused when the ring comes
/// back to it and every tag recorded in its unit_tags is complete; its tags are cleared when it is
/// handed out. A unit nobody tagged counts as free: tag it (buffer.tags->add) right after posting
/// the operation that uses it, before the ring can wrap around. When the next unit is busy the
/// ring grows by inserting fresh units at the current position (older units keep their FIFO
/// order); at the cap allocate() returns an empty buffer and never blocks.
/// Buffers: size unit_size, aligned to unit_alignment() (>= 64), tags != nullptr.
/// Thread-safety: none; one owner thread (typically one allocator per transmitter per thread).
/// The source must outlive the allocator; the destructor returns every block to it.
class circular_allocator {
 public:
  /// Throws config_error for a bad `config`, seriema::error when the source cannot supply the
  /// initial units.
  explicit circular_allocator(block_source& source, const circular_allocator_config& config = {});
  circular_allocator(const circular_allocator&) = delete;
  circular_allocator& operator=(const circular_allocator&) = delete;

  /// The next unit, or an empty buffer when it is busy and the ring cannot grow. Owner thread.
  /// Fast path inline: the next unit is free (the usual case once the ring is sized).
  [[nodiscard]] registered_buffer allocate() {
    const detail::ring_unit& unit = ring_[next_];
    if (unit.tags->all_complete()) {
      unit.tags->clear();
      next_ = next_ + 1 == ring_.size() ? 0 : next_ + 1;
      return {unit.data, ring_.unit_size(), unit.segment, unit.tags};
    }
    return allocate_slow();
  }

  /// Bytes per unit (config.unit_size).
  [[nodiscard]] std::size_t unit_size() const noexcept { return ring_.unit_size(); }
  /// Alignment of every unit's start, at least 64.
  [[nodiscard]] std::size_t unit_alignment() const noexcept { return ring_.unit_alignment(); }
  /// Units in the ring now.
  [[nodiscard]] std::size_t units() const noexcept { return ring_.size(); }
  /// The cap on units: min(max_units, max_bytes / unit_size).
  [[nodiscard]] std::size_t max_units() const noexcept { return ring_.max_units(); }
  /// Blocks obtained from the source so far.
  [[nodiscard]] std::size_t blocks() const noexcept { return ring_.blocks(); }

 private:
  registered_buffer allocate_slow();
  detail::unit_ring ring_;
  std::size_t next_ = 0;  ///< ring index of the unit allocate() tries next; < units()
};

/// The circular allocator's ring of units, but allocate(n, alignment) carves variable-size
/// segments linearly inside the current ("open") unit, so small messages waste no space (paper
/// §4.2). When a segment does not fit in the rest of the open unit, the allocator moves to the
/// next unit under the circular rules (reuse when its tags are complete, else grow, else fail).
/// All segments of a unit share its unit_tags: tag each segment after posting it; the unit is
/// recycled once every tag is complete. A segment of n bytes with alignment a (a power of two,
/// at least 64 is used) fits in a unit when n + max(0, a - unit_alignment()) <= unit_size;
/// larger requests fail with alloc_status::too_large.
/// Thread-safety: none; one owner thread. The source must outlive the allocator.
class linear_circular_allocator {
 public:
  /// Throws config_error for a bad `config`, seriema::error when the source cannot supply the
  /// initial units.
  explicit linear_circular_allocator(block_source& source,
                                     const linear_circular_allocator_config& config = {});
  linear_circular_allocator(const linear_circular_allocator&) = delete;
  linear_circular_allocator& operator=(const linear_circular_allocator&) = delete;

  /// A segment of n bytes, or an empty buffer. Owner thread.
  [[nodiscard]] registered_buffer allocate(std::size_t n, std::size_t alignment = min_alignment) {
    return try_allocate(n, alignment).buffer;
  }
  /// Same, saying why when it fails. Owner thread.
  [[nodiscard]] allocation try_allocate(std::size_t n, std::size_t alignment = min_alignment);

  /// Bytes per unit (config.unit_size); the largest segment with alignment <= unit_alignment().
  [[nodiscard]] std::size_t unit_size() const noexcept { return ring_.unit_size(); }
  /// Alignment of every unit's start, at least 64.
  [[nodiscard]] std::size_t unit_alignment() const noexcept { return ring_.unit_alignment(); }
  /// Units in the ring now.
  [[nodiscard]] std::size_t units() const noexcept { return ring_.size(); }
  /// The cap on units: min(max_units, max_bytes / unit_size).
  [[nodiscard]] std::size_t max_units() const noexcept { return ring_.max_units(); }
  /// Blocks obtained from the source so far.
  [[nodiscard]] std::size_t blocks() const noexcept { return ring_.blocks(); }

 private:
  detail::unit_ring ring_;
  std::size_t current_ = 0;  ///< ring index of the open unit
  std::size_t offset_ = 0;   ///< bytes of the open unit already carved (a multiple of 64)
};

/// Which free range the general allocator carves a request from.
enum class fit_policy : std::uint8_t {
  first_fit,  ///< lowest-addressed free range that fits
  best_fit,   ///< smallest free range that fits
  next_fit,   ///< first fit searching on from where the previous allocation ended, wrapping
  worst_fit,  ///< largest free range
};
/// The enumerator's name ("best_fit"), or "unknown".
const char* to_string(fit_policy policy) noexcept;

/// Configuration of the general allocator.
struct general_allocator_config {
  fit_policy policy = fit_policy::best_fit;      ///< how a free range is chosen
  std::size_t initial_blocks = 0;                ///< blocks obtained at construction
  std::size_t max_bytes = std::size_t{1} << 30;  ///< cap on blocks held, rounded down to blocks
};

/// Why free() refused a buffer. API misuse is reported by status, not by exception, because free
/// runs on the data path (and in destructors); a refused buffer leaves the allocator unchanged.
enum class free_status : std::uint8_t {
  ok,             ///< the buffer was taken back
  not_allocated,  ///< double free, or a pointer this allocator did not hand out (or not its start)
  size_mismatch,  ///< buffer.data is live but buffer.size is not the size it was allocated with
};
/// The enumerator's name ("not_allocated"), or "unknown".
const char* to_string(free_status status) noexcept;

/// Classic allocate/free over blocks from a block_source, with a fit policy chosen at
/// construction. Freed ranges coalesce with free neighbours in the same block (never across
/// blocks: the source does not promise contiguity). When nothing fits it obtains one more block,
/// up to max_bytes; past that allocation fails with alloc_status::exhausted. Requests larger than
/// block_size fail with alloc_status::too_large (a block is the largest contiguous range we are
/// promised). Blocks are kept until destruction, then returned to the source.
/// Buffers: aligned to max(64, alignment), tags == nullptr, segment = the block's segment.
/// Thread-safety: every member function may be called concurrently (one internal mutex).
/// Bookkeeping lives in node-based containers: allocate/free may allocate heap memory.
class general_allocator {
 public:
  /// Throws config_error for a bad `config`, seriema::error when the source cannot supply the
  /// initial blocks.
  explicit general_allocator(block_source& source, const general_allocator_config& config = {});
  ~general_allocator();  ///< returns every block to the source; live buffers become invalid
  general_allocator(const general_allocator&) = delete;
  general_allocator& operator=(const general_allocator&) = delete;

  /// A buffer of n bytes aligned to max(64, alignment), or an empty buffer. Any thread.
  [[nodiscard]] registered_buffer allocate(std::size_t n, std::size_t alignment = min_alignment) {
    return try_allocate(n, alignment).buffer;
  }
  /// Same, saying why when it fails. Any thread.
  [[nodiscard]] allocation try_allocate(std::size_t n, std::size_t alignment = min_alignment);
  /// Takes back a buffer allocate() returned, exactly as returned (data and size).
  [[nodiscard]] free_status free(const registered_buffer& buffer);

  [[nodiscard]] fit_policy policy() const noexcept;  ///< the policy chosen at construction
  [[nodiscard]] std::size_t max_blocks() const noexcept;  ///< max_bytes / block_size
  [[nodiscard]] std::size_t blocks() const;               ///< blocks obtained so far
  [[nodiscard]] std::size_t live_allocations() const;     ///< buffers allocated and not yet freed
  [[nodiscard]] std::size_t bytes_in_use() const;  ///< live bytes, each rounded up to 64
  [[nodiscard]] std::size_t free_ranges() const;   ///< == blocks() when everything is free

 private:
  struct state;
  std::unique_ptr<state> state_;
};

}  // namespace seriema::transfer

// Release-consistent shared memory across the processes of a job (seed 002, MENPS): a space
// mapped at the same virtual address in every process, divided into blocks, kept coherent by the
// floating-home protocol (a release migrates each written block's home to the releaser: one
// coarse get of the master copy and a local three-way merge, no diffs shipped) and by write
// notices that travel with barriers (a read after one is served by one get from the block's last
// releaser). The protocol, the ownership of every word and the failure model are in
// docs/shared-memory.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <seriema/base/error.hpp>
#include <seriema/fabric/outcome.hpp>
#include <span>
#include <string>
#include <type_traits>

namespace seriema::fabric {
class runtime;
class thread_context;
}  // namespace seriema::fabric

namespace seriema::dsm {

/// @cond INTERNAL
namespace detail {
struct space_state;
}
/// @endcond

using fabric::deadline_clock;
using fabric::no_deadline;

/// A space's shape; every process must create it with equal options (creation refuses a
/// mismatch).
struct space_options {
  /// Bytes of shared memory, a multiple of block_bytes; 1 block .. 64 GiB. Each process keeps a
  /// private copy (address space reserved, pages touched as used) and a registered public copy
  /// of this size.
  std::size_t bytes = std::size_t{64} << 20;
  /// Bytes of a block, the unit of coherence (fetch, twin, merge, home); a power of two,
  /// 4 KiB .. 1 MiB. 32 KiB is the seed's.
  std::size_t block_bytes = std::size_t{32} << 10;
};

/// What a space's process did (its threads together), for tests, benchmarks and tuning.
struct space_counters {
  std::uint64_t fetches = 0;        ///< blocks brought in after an invalidation
  std::uint64_t fast_reads = 0;     ///< of those, served by one get from the last releaser
  std::uint64_t home_reads = 0;     ///< of those, served from the home named by the block's word
  std::uint64_t twins = 0;          ///< blocks twinned at their first write of an interval
  std::uint64_t releases = 0;       ///< blocks released (merged into a master copy)
  std::uint64_t migrations = 0;     ///< releases that moved the home here (one coarse get)
  std::uint64_t local_merges = 0;   ///< releases by the home itself (no get)
  std::uint64_t invalidations = 0;  ///< copies dropped at an acquire by a newer write notice
  std::uint64_t barriers = 0;       ///< barriers this process passed
  std::uint64_t lock_retries = 0;   ///< block-lock attempts that found the block locked
};

/// A block whose only master copy was in a process that died (or whose lock word was): what it
/// held is gone, and the space refuses to return anything stale as current.
class block_lost : public error {
 public:
  /// `block` lost with process `rank`; `what` is the full message.
  block_lost(const std::string& what, std::uint64_t block, int rank)
      : error(what), block_(block), rank_(rank) {}
  [[nodiscard]] std::uint64_t block() const noexcept { return block_; }  ///< the block's index
  [[nodiscard]] int rank() const noexcept { return rank_; }  ///< the dead process
 private:
  std::uint64_t block_;
  int rank_;
};

/// Shared memory at one address in every process of a job, under release consistency.
///
/// Access is explicit: read(p, n) makes the blocks of [p, p+n) current and returns them as a
/// span; write(p, n) does the same and twins each block at its first write of an interval, so
/// the span may then be stored to. A release (release(), or the start of barrier()) merges the
/// process's writes into the blocks' master copies; barrier() then exchanges write notices, so
/// that every process's copies of blocks written elsewhere are dropped and the next read fetches
/// them. Writes to different bytes of one block by several processes (false sharing) all
/// survive.
///
/// Threads: a space belongs to a process and its threads share one copy of every block. Any
/// thread may allocate, read and write; barrier() is called by every worker thread of the job.
/// A thread must not store through a write span while another thread of its process runs
/// release() (barrier() cannot meet that: it releases once every local worker arrived).
///
/// Errors: a pointer or span outside the space throws std::out_of_range naming it, before
/// anything is fetched; every wait (block lock, fetch, barrier) ends by its deadline (argument or
/// SERIEMA_TIMEOUT, the earlier) with seriema::deadline_error; a block whose master copy died
/// with its process throws block_lost; a barrier with a dead process throws seriema::error
/// naming it.
class space {
 public:
  /// Maps the space at one address in every process (collective: one thread of every process,
  /// outside run() or as one worker of each process, with equal options). Throws config_error for
  /// bad or mismatched options, seriema::error when no common address is found or a peer fails,
  /// deadline_error at `deadline`.
  space(fabric::runtime& rt, const space_options& options = {},
        deadline_clock::time_point deadline = no_deadline);
  ~space();  ///< unmaps the space; peers must have finished with it (end with a barrier)
  space(const space&) = delete;
  space& operator=(const space&) = delete;

  /// Room for `n` objects of T in the space (aligned to alignof(T) and at least 8), zero on
  /// first use, shared by every process; allocation is job-wide (one remote fetch-add), never
  /// freed. Throws std::bad_alloc when the space is full.
  template <class T>
  T* allocate(fabric::thread_context& self, std::size_t n) {
    static_assert(std::is_trivially_copyable_v<T>, "a shared space holds trivially copyable types");
    return static_cast<T*>(allocate_bytes(self, n * sizeof(T), alignof(T)));
  }
  /// [p, p+n) brought up to date (blocks invalidated by an acquire fetched), readable until the
  /// process's next acquire.
  template <class T>
  std::span<const T> read(fabric::thread_context& self, const T* p, std::size_t n,
                          deadline_clock::time_point deadline = no_deadline) {
    prepare(self, p, n * sizeof(T), false, deadline);
    return {p, n};
  }
  /// [p, p+n) brought up to date and twinned, writable until the process's next release.
  template <class T>
  std::span<T> write(fabric::thread_context& self, T* p, std::size_t n,
                     deadline_clock::time_point deadline = no_deadline) {
    prepare(self, p, n * sizeof(T), true, deadline);
    return {p, n};
  }
  /// Merges every block this process wrote since its last release into the blocks' master
  /// copies (floating home: each becomes homed here) and records write notices for the next
  /// barrier. Throws block_lost, deadline_error (blocks merged before it stay released).
  void release(fabric::thread_context& self, deadline_clock::time_point deadline = no_deadline);
  /// Release, exchange of write notices with every process, acquire: afterwards every write
  /// released anywhere before the barrier is visible here. Every worker thread of the job calls
  /// it. Throws seriema::error naming a dead process, deadline_error, block_lost.
  void barrier(fabric::thread_context& self, deadline_clock::time_point deadline = no_deadline);

  /// Whether [p, p+n) lies inside the space.
  [[nodiscard]] bool contains(const void* p, std::size_t n) const noexcept;
  [[nodiscard]] std::byte* base() const noexcept;     ///< the space's first byte, equal everywhere
  [[nodiscard]] std::size_t size() const noexcept;    ///< bytes
  [[nodiscard]] std::size_t block_bytes() const noexcept;  ///< bytes per block
  [[nodiscard]] space_counters counters() const;  ///< this process's counters so far

 private:
  void* allocate_bytes(fabric::thread_context& self, std::size_t bytes, std::size_t align);
  void prepare(fabric::thread_context& self, const void* p, std::size_t n, bool for_write,
               deadline_clock::time_point deadline);

  std::unique_ptr<detail::space_state> state_;
};

}  // namespace seriema::dsm

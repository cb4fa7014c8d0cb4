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
#include <utility>

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

/// How a space keeps its blocks coherent (docs/shared-memory.md "Protocols").
enum class coherence_protocol : std::uint8_t {
  /// The seed's: a release moves the block's home to the releaser (one coarse get of the master
  /// and a local merge), barriers tell every process the blocks released, and a read after one is
  /// one get from the last releaser.
  floating_home,
  /// The classic baseline the seed measures against: every block's home is fixed (its manager,
  /// block mod P); a release merges into the home's master copy (a get of it, a local merge, a
  /// put of the whole block back), reads always come from the home, and a directory of sharers
  /// at the home decides which processes a barrier tells of a release (a reader joins it when it
  /// fetches, leaves it when it drops its copy). At most 64 processes.
  fixed_home,
};

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
  /// Mutexes of the space (lock(), unlock()), numbered from 0; 0 .. 2^20 with atomics.
  std::size_t mutexes = 64;
  /// 64-bit acquire/release atomics of the space (load_acquire(), store_release(),
  /// compare_exchange_acquire()), numbered from 0, each 0 at first.
  std::size_t atomics = 64;
  /// Write notices one hand-over of a mutex or atomic carries (1 .. 2^20). A process that knows
  /// more since the last barrier hands over the newest ones and a *floor*, the newest version
  /// among those left out: the acquirer keeps the copies whose logical lease reaches the floor
  /// and renews or refetches the others on their next use (floating home with lease > 0); with
  /// a fixed home or lease 0 the record says "everything" and the acquirer drops every copy.
  /// Each process registers (mutexes + atomics) x (32 + 16 x this) bytes for the records.
  std::size_t handover_notices = 512;
  /// Logical lease of a renewed read copy, in version ticks (0 .. 2^20; floating home only): a
  /// copy whose lease ended before a hand-over's floor is renewed at its block's manager on its
  /// next use, for this many ticks past the floor, and no later release of the block takes a
  /// version inside the lease. 0: no leases (an overflowing hand-over says "everything"). The
  /// seed's MENPS uses 10. docs/shared-memory.md "Logical leases".
  std::uint32_t lease = 10;
  /// Fault-driven access: the space's pages are protected by their blocks' state, so plain
  /// loads and stores through pointers into it work as read() and write() spans do (a load of
  /// an invalid block fetches it, the first store to a clean one twins it). Off: only spans
  /// are coherent. docs/shared-memory.md "Fault-driven access" says what it costs and forbids.
  bool fault_driven = false;
  /// The coherence protocol: the seed's floating home, or the fixed-home baseline with a
  /// directory.
  coherence_protocol protocol = coherence_protocol::floating_home;
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
  std::uint64_t barrier_notices = 0;  ///< write notices received at barriers
  std::uint64_t lock_retries = 0;   ///< block- and mutex-lock attempts that found them held
  std::uint64_t faults = 0;         ///< protection faults served (fault-driven spaces)
  std::uint64_t acquires = 0;  ///< acquire, lock, load_acquire and compare_exchange_acquire calls
  std::uint64_t handovers = 0;      ///< unlocks, store_release and successful exchanges
  std::uint64_t handover_notices = 0;    ///< write notices received with acquires
  std::uint64_t handover_overflows = 0;  ///< acquires that dropped every copy ("everything")
  std::uint64_t home_writes = 0;  ///< fixed home: merged blocks put back into a remote home
  std::uint64_t directory_updates = 0;  ///< fixed home: joins and leaves of a block's sharers
  std::uint64_t lease_expiries = 0;  ///< copies whose lease ended before a hand-over's floor
  std::uint64_t lease_renewals = 0;  ///< of those, kept by renewing the lease (no get)
  std::uint64_t leases_held = 0;     ///< copies a hand-over's floor left valid by their lease
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
/// Mutexes and atomics synchronize fewer than all: unlock() and store_release() are releases
/// whose hand-over carries the write notices this process knows (its own releases since the
/// last barrier and those it acquired), and lock(), load_acquire() and compare_exchange_acquire()
/// are acquires that apply them; so whatever was released before a hand-over is read after the
/// acquire that takes it, transitively through chains of hand-overs.
///
/// Threads: a space belongs to a process and its threads share one copy of every block. Any
/// thread may allocate, read and write; barrier() is called by every worker thread of the job.
/// A thread must not store through a write span while another thread of its process runs a
/// release (release(), unlock(), store_release(), a successful compare_exchange_acquire();
/// barrier() cannot meet that: it releases once every local worker arrived), nor read through a
/// span whose blocks another thread's acquire may refetch, unless those bytes did not change;
/// a fault-driven space (space_options::fault_driven) lifts both.
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
  /// first use, shared by every process; allocation is job-wide (one remote fetch-add at rank
  /// 0), never freed. Throws std::bad_alloc when the space is full, deadline_error when rank 0
  /// did not answer by the deadline, seriema::error when it died.
  template <class T>
  T* allocate(fabric::thread_context& self, std::size_t n,
              deadline_clock::time_point deadline = no_deadline) {
    static_assert(std::is_trivially_copyable_v<T>, "a shared space holds trivially copyable types");
    return static_cast<T*>(allocate_bytes(self, n * sizeof(T), alignof(T), deadline));
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
  /// An acquire without a synchronization object: every write that any process had released
  /// when this call began is read here afterwards (one get of each peer's release log, and one
  /// more of its entries when it has any). For programs that synchronize by other means (a
  /// call, a message). Throws seriema::error when a peer died (its releases cannot be learnt),
  /// deadline_error.
  void acquire(fabric::thread_context& self, deadline_clock::time_point deadline = no_deadline);
  /// Release, exchange of write notices with every process, acquire: afterwards every write
  /// released anywhere before the barrier is visible here. Every worker thread of the job calls
  /// it. Throws seriema::error naming a dead process, deadline_error, block_lost.
  void barrier(fabric::thread_context& self, deadline_clock::time_point deadline = no_deadline);

  /// Runs body(i) for every i of [first, last) spread over the job's worker threads (worker w of
  /// W takes the w-th of W contiguous slices), then barrier(). Every worker calls it with equal
  /// bounds; a body that throws leaves the others' barrier to end by its deadline.
  template <class F>
  void parallel_for(fabric::thread_context& self, std::size_t first, std::size_t last, F&& body,
                    deadline_clock::time_point deadline = no_deadline) {
    const auto [from, to] = slice(self, first, last);
    for (std::size_t i = from; i < to; ++i) body(i);
    barrier(self, deadline);
  }

  /// Takes mutex `mutex` (an acquire: every write released before its last unlock, anywhere,
  /// is then read here). Waits, serving calls, while another thread holds it. Throws
  /// std::out_of_range for a mutex the space does not have, seriema::error when its holder or
  /// manager died, deadline_error.
  void lock(fabric::thread_context& self, std::size_t mutex,
            deadline_clock::time_point deadline = no_deadline);
  /// Releases this process's writes and hands mutex `mutex` over with their notices. Throws
  /// std::logic_error when this thread does not hold it; block_lost or deadline_error when the
  /// release failed (the mutex is then free, and its next holder drops every copy it has).
  void unlock(fabric::thread_context& self, std::size_t mutex,
              deadline_clock::time_point deadline = no_deadline);
  /// Atomic `atomic`'s value, as an acquire (what was released before the store_release or
  /// exchange that wrote it is then read here). Throws std::out_of_range, seriema::error when
  /// the process that wrote it last died (its value is lost), deadline_error.
  std::uint64_t load_acquire(fabric::thread_context& self, std::size_t atomic,
                             deadline_clock::time_point deadline = no_deadline);
  /// Releases this process's writes, then sets atomic `atomic` to `value` with their notices.
  /// Throws as load_acquire and release (on a failed release the value is not stored).
  void store_release(fabric::thread_context& self, std::size_t atomic, std::uint64_t value,
                     deadline_clock::time_point deadline = no_deadline);
  /// An acquire of atomic `atomic`; when it equals `expected` also a release that sets it to
  /// `desired` (true), else `expected` becomes its value (false). Throws as store_release.
  bool compare_exchange_acquire(fabric::thread_context& self, std::size_t atomic,
                                std::uint64_t& expected, std::uint64_t desired,
                                deadline_clock::time_point deadline = no_deadline);

  /// Whether [p, p+n) lies inside the space.
  [[nodiscard]] bool contains(const void* p, std::size_t n) const noexcept;
  [[nodiscard]] std::byte* base() const noexcept;     ///< the space's first byte, equal everywhere
  [[nodiscard]] std::size_t size() const noexcept;    ///< bytes
  [[nodiscard]] std::size_t block_bytes() const noexcept;  ///< bytes per block
  [[nodiscard]] space_counters counters() const;  ///< this process's counters so far

 private:
  void* allocate_bytes(fabric::thread_context& self, std::size_t bytes, std::size_t align,
                       deadline_clock::time_point deadline);
  void prepare(fabric::thread_context& self, const void* p, std::size_t n, bool for_write,
               deadline_clock::time_point deadline);
  [[nodiscard]] std::pair<std::size_t, std::size_t> slice(const fabric::thread_context& self,
                                                          std::size_t first,
                                                          std::size_t last) const;

  std::unique_ptr<detail::space_state> state_;
};

}  // namespace seriema::dsm

// What a space keeps in each process: the layout of its two registered regions, the state of
// every block of the private copy, and each thread's handles on the peers' regions.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <seriema/dsm/space.hpp>
#include <seriema/fabric/detail/region_publisher.hpp>
#include <seriema/fabric/remote_atomic.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/transfer/shared_region.hpp>
#include <string>
#include <vector>

namespace seriema::dsm::detail {

/// The block word, one per block in its manager's meta region (block b: process b % P), changed
/// only by remote atomics: bit 63 *leased* (a process registered a lease on the current version in
/// the block's lease word, so the next release must read it), bits 48..62 the locking process + 1
/// (0: unlocked), bits 32..47 the home (the last releaser, whose public copy is the master) + 1
/// (0: never released, the master is all zeros), bits 0..31 the block's version: a logical time,
/// greater at each release (by one, or past a registered lease).
struct block_word {
  std::uint32_t locker = 0;   ///< process + 1; 0 unlocked
  std::uint32_t home = 0;     ///< process + 1; 0 none
  std::uint32_t version = 0;  ///< the current master's logical time
  bool leased = false;        ///< the lease word holds a lease on `version`

  static constexpr std::uint32_t max_process = (1u << 15) - 2;  ///< locker = process + 1

  static block_word decode(std::uint64_t w) noexcept {
    return {static_cast<std::uint32_t>((w >> 48) & 0x7fff),
            static_cast<std::uint32_t>((w >> 32) & 0xffff), static_cast<std::uint32_t>(w),
            (w >> 63) != 0};
  }
  [[nodiscard]] std::uint64_t encode() const noexcept {
    return (std::uint64_t{leased} << 63) | (std::uint64_t{locker} << 48) |
           (std::uint64_t{home} << 32) | version;
  }
};

/// The lease word, one per block beside its directory word at its manager (floating home with
/// leases): bits 32..63 a version, bits 0..31 the end of the leases registered on it. Changed only
/// by remote atomics: a renewing reader raises the end by compare-and-swap while its copy's
/// version is current and the block word says `leased`; a releaser that found `leased` swaps in
/// its new version, past the end. (Without `leased` the word may name an older version.)
struct lease_word {
  std::uint32_t version = 0;
  std::uint32_t end = 0;

  static lease_word decode(std::uint64_t w) noexcept {
    return {static_cast<std::uint32_t>(w >> 32), static_cast<std::uint32_t>(w)};
  }
  [[nodiscard]] std::uint64_t encode() const noexcept {
    return (std::uint64_t{version} << 32) | end;
  }
};

/// A synchronization object's lock word, in its manager's meta region (object m: process m % P),
/// changed only by remote atomics: bits 40..63 the holding thread + 1 (0: free), bits 24..39 the
/// process that last handed it over + 1 (0: never), whose meta region holds the object's
/// hand-over record, bits 0..23 the unlocks so far (wrapping).
struct sync_word {
  std::uint32_t holder = 0;     ///< thread + 1 (24 bits); 0 free
  std::uint32_t last = 0;       ///< process + 1 (16 bits); 0 never handed over
  std::uint32_t handovers = 0;  ///< unlocks so far (24 bits, wrapping): a record read between
                                ///< two equal free words was not rewritten in between

  static constexpr std::uint32_t max_holder = (1u << 24) - 1;
  static constexpr std::uint32_t max_last = (1u << 16) - 1;
  static constexpr std::uint32_t handovers_mask = (1u << 24) - 1;

  static sync_word decode(std::uint64_t w) noexcept {
    return {static_cast<std::uint32_t>(w >> 40), static_cast<std::uint32_t>(w >> 24) & max_last,
            static_cast<std::uint32_t>(w) & handovers_mask};
  }
  [[nodiscard]] std::uint64_t encode() const noexcept {
    return (std::uint64_t{holder} << 40) | (std::uint64_t{last} << 24) |
           (handovers & handovers_mask);
  }
};

/// A hand-over record's count word when the notices did not fit (or were lost): the acquirer
/// drops every copy it holds.
constexpr std::uint64_t record_everything = ~std::uint64_t{0};

/// Byte offsets in the two regions every process registers.
///  public region: the public copy (`bytes`), then one sequence word per block: 2 x the version
///    the copy holds, odd while its owner rewrites the block. Written only by its process, under
///    the block's lock; read by peers' gets (a seqlock: word, block, word).
///  meta region: word 0 the allocation cursor (rank 0's is the job's), then the block words of
///    the blocks this process manages, then the lock words of the synchronization objects
///    (mutexes, then atomics) it manages, then one hand-over record per object: [epoch][count or
///    record_everything][value][floor][count x ((block << 32 | version), releaser)], written with
///    plain stores by this process only while one of its threads holds the object, read by the
///    next holder's get (or by load_acquire's get between two reads of the lock word); then two
///    release logs (by barrier epoch parity), written by this process with plain stores at each
///    release (entry, then the head word), read by peers' acquire(); then
///    the notice board: 2 parities x P senders, a slot each: [epoch word]
///    [count][count notices of (block << 32 | version)]. Slot (parity, q) is written only by
///    process q (data, then the epoch word), at barriers of that parity; then the directory
///    words and the lease words of the blocks this process manages.
struct region_layout {
  std::uint64_t bytes = 0;
  std::uint64_t block_bytes = 0;
  std::uint64_t blocks = 0;
  std::uint64_t processes = 0;
  std::uint64_t syncs = 0;           ///< mutexes + atomics
  std::uint64_t record_notices = 0;  ///< notices a hand-over record holds

  [[nodiscard]] std::uint64_t sequence_offset(std::uint64_t block) const noexcept {
    return bytes + 8 * block;
  }
  [[nodiscard]] std::uint64_t public_bytes() const noexcept { return bytes + 8 * blocks; }
  /// The process managing block or synchronization object `index`.
  [[nodiscard]] int manager_of(std::uint64_t index) const noexcept {
    return static_cast<int>(index % processes);
  }
  [[nodiscard]] std::uint64_t block_word_offset(std::uint64_t block) const noexcept {
    return 8 * (1 + block / processes);
  }
  [[nodiscard]] std::uint64_t sync_word_offset(std::uint64_t sync) const noexcept {
    return 8 * (1 + (blocks + processes - 1) / processes + sync / processes);
  }
  [[nodiscard]] std::uint64_t record_bytes() const noexcept { return 8 * (4 + 2 * record_notices); }
  [[nodiscard]] std::uint64_t record_offset(std::uint64_t sync) const noexcept {
    return sync_word_offset(0) + 8 * ((syncs + processes - 1) / processes) +
           record_bytes() * sync;
  }
  /// The release log of barrier epochs of `parity`: [epoch << 32 | count][count entries of
  /// (block << 32 | version)], this process's releases in that epoch, one entry per block.
  [[nodiscard]] std::uint64_t log_offset(std::uint64_t parity) const noexcept {
    return record_offset(syncs) + 8 * (1 + blocks) * parity;
  }
  [[nodiscard]] std::uint64_t board_offset() const noexcept { return log_offset(2); }
  [[nodiscard]] std::uint64_t slot_bytes() const noexcept { return 8 * (2 + blocks); }
  [[nodiscard]] std::uint64_t slot_offset(std::uint64_t parity, std::uint64_t sender) const
      noexcept {
    return board_offset() + slot_bytes() * (parity * processes + sender);
  }
  /// The directory word of block b at its manager (fixed-home spaces): bit q set while process q
  /// may hold a copy of b that a release must invalidate. Changed only by remote atomics: by q
  /// itself (joining before it fetches b, leaving after it dropped its copy), read by releasers.
  [[nodiscard]] std::uint64_t directory_offset(std::uint64_t block) const noexcept {
    return slot_offset(2, 0) + 8 * (block / processes);
  }
  /// The lease word (lease_word) of block b at its manager.
  [[nodiscard]] std::uint64_t lease_offset(std::uint64_t block) const noexcept {
    return directory_offset(0) + 8 * ((blocks + processes - 1) / processes + block / processes);
  }
  [[nodiscard]] std::uint64_t meta_bytes() const noexcept {
    return lease_offset(0) + 8 * ((blocks + processes - 1) / processes);
  }
};

/// One block of this process's private copy. Guarded by space_state::mutex.
struct block_state {
  bool valid = true;           ///< holds at least the version its last acquire asked for
  bool dirty = false;          ///< written since the last release (twin in `twins`)
  bool noticed = false;        ///< released since the last barrier (in `notices`)
  bool heard = false;          ///< named by a hand-over record since the last barrier (in `heard`)
  std::uint32_t notice_index = 0;  ///< its place in `notices` and in the release log, if noticed
  bool renewable = false;  ///< invalid only because its lease ended: renew before refetching
  std::uint32_t version = 0;   ///< the version the private copy holds
  std::uint32_t wanted = 0;    ///< the newest version a write notice named
  /// The copy's logical lease: no version of the block after `version` is at or below it (at
  /// least `version` itself; more once renewed at the manager).
  std::uint32_t lease_end = 0;
  /// Guesses that spare a renewal two remote atomics: the version + 1 whose block word a
  /// registration here saw `leased` (0: none), and the lease word as last seen.
  std::uint32_t seen_leased = 0;
  std::uint64_t seen_lease_word = 0;
  std::int32_t releaser = -1;  ///< who released `wanted` (the fast read's source); -1 none
  bool sharer = true;  ///< fixed home: this process's bit is set in b's directory word
  /// Fixed home, while noticed: the processes the directory named at this epoch's releases of the
  /// block (the barrier tells only them).
  std::uint64_t tell = 0;
};

/// A thread's handles on one peer's regions (made on first use, dropped with the thread's
/// context).
struct peer_handles {
  std::unique_ptr<fabric::detail::region_publisher> public_copy;  ///< gets of blocks, sequences
  std::unique_ptr<fabric::detail::region_publisher> board;        ///< notices published
  std::unique_ptr<fabric::detail::remote_words> words;            ///< block words, cursor
};

/// A space's state in one process (space.hpp holds it by pointer).
struct space_state {
  fabric::runtime& rt;
  std::uint64_t id;  ///< unique in the process: keys the threads' handles
  region_layout layout;
  std::uint64_t mutexes = 0;  ///< synchronization objects 0 .. mutexes - 1; atomics after them
  bool fault_driven = false;  ///< blocks' pages protected by their state (faults.cpp)
  bool fixed_home = false;    ///< coherence_protocol::fixed_home (else floating)
  int rank;
  fabric::detail::publish_route route;
  std::byte* base = nullptr;  ///< the private copy, at the same address everywhere
  /// The protocol's view of the private copy: `base` itself, or in a fault-driven space a
  /// second, always writable mapping of the same pages (the application's view at `base` stays
  /// inaccessible while a block is fetched through this one, so no thread reads it half done).
  std::byte* protocol_view = nullptr;
  std::unique_ptr<transfer::shared_region> public_region;
  std::unique_ptr<transfer::shared_region> meta_region;
  std::vector<transfer::remote_memory_locator> public_of;  ///< by process
  std::vector<transfer::remote_memory_locator> meta_of;    ///< by process

  /// Guards everything below (the threads of the process share one copy of every block).
  std::mutex mutex;
  std::vector<block_state> blocks;
  std::map<std::uint64_t, std::vector<std::byte>> twins;  ///< by dirty block
  std::vector<std::vector<std::byte>> spare_twins;        ///< reused twin buffers
  std::vector<std::uint64_t> dirty;                        ///< dirty blocks, in first-write order
  std::vector<std::uint64_t> notices;  ///< blocks released since the last barrier
  /// Blocks named by the hand-over records acquired since the last barrier; with `notices`, what
  /// this process's own records pass on (transitively) until the barrier tells everyone.
  std::vector<std::uint64_t> heard;
  /// An acquired record said "everything" since the last barrier: so do this process's records.
  bool heard_everything = false;
  /// The highest floor of the records acquired since the last barrier: this process's records
  /// pass it on (a notice left out of a record is left out of every record after it).
  std::uint32_t heard_floor = 0;
  /// Logical leases (floating home, space_options::lease > 0): the lease's length, and the
  /// highest floor any record acquired here carried (never lowered): every valid copy's lease
  /// reaches it, and this process's releases take versions above it.
  std::uint32_t lease = 0;
  std::uint32_t acquired_floor = 0;
  std::vector<std::uint64_t> record_scratch;  ///< write_record's notices, gathered
  std::uint64_t epoch = 0;             ///< barriers passed
  /// The notices sent at the barriers of each parity, by receiver: [count, notices...]; untouched
  /// until two barriers later, by which time every peer has read them. (Floating home sends every
  /// peer the same list, [parity][0].)
  std::vector<std::vector<std::uint64_t>> sent[2];
  space_counters counters;

  /// By synchronization object: the encoded sync_word this process's holder took (0: none here),
  /// written and read by the holding thread; and the last free word seen (encoded), a guess for
  /// the next compare-and-swap.
  std::unique_ptr<std::atomic<std::uint64_t>[]> held;
  std::unique_ptr<std::atomic<std::uint64_t>[]> last_seen;

  /// Local barrier of the process's workers: arrivals, and the generation the last one bumps
  /// after the process's release and exchange (`failure`: why they failed, for the others).
  int local_workers = 1;
  std::atomic<int> arrived{0};
  std::atomic<std::uint64_t> generation{0};
  std::exception_ptr failure;  ///< written by the last arriver before it bumps the generation

  space_state(fabric::runtime& runtime, std::uint64_t space_id) : rt(runtime), id(space_id) {}

  /// Block b of the private copy (in the protocol's view), of the public copy, and b's sequence
  /// word (local).
  [[nodiscard]] std::byte* private_block(std::uint64_t b) const noexcept {
    return protocol_view + b * layout.block_bytes;
  }
  [[nodiscard]] std::byte* public_block(std::uint64_t b) const noexcept {
    return public_region->bytes().data() + b * layout.block_bytes;
  }
  [[nodiscard]] std::uint64_t* sequence_word(std::uint64_t b) const noexcept {
    return reinterpret_cast<std::uint64_t*>(public_region->bytes().data() +
                                            layout.sequence_offset(b));
  }
  [[nodiscard]] std::uint64_t* meta_word(std::uint64_t offset) const noexcept {
    return reinterpret_cast<std::uint64_t*>(meta_region->bytes().data() + offset);
  }
  /// The calling thread's handles on `process` (made on first use).
  peer_handles& peer(fabric::thread_context& self, int process);
};

}  // namespace seriema::dsm::detail

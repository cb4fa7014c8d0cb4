// How a call travels (the channel), what a full ring does (the policy), the one-sided
// messengers' options, and the counters a thread's messengers keep.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/invoke/detail/settings.hpp>
#include <seriema/invoke/detail/wire.hpp>
#include <string>
#include <string_view>

namespace seriema::invoke {

using fabric::call_status;
using fabric::thread_context;
using fabric::thread_id;

/// How a call travels. send: UCX active message (fabric, no setup); write: the one-sided
/// Messenger, published at once; trad: batched, published every flush_size bytes (or on flush);
/// ovfl: published at once while the messenger has room, queued locally (in order) only while
/// it has none; adaptive: self-clocked, the first call after a publish goes at once when the
/// destination has run everything published to it (an idle destination gets it with write's
/// latency), and otherwise starts a batch that is published as trad's (a busy destination gets
/// trad's batches). The clock is the receiver's consumed word, which a sender reads where the
/// ring is mapped (same machine); where it is staged (another machine) adaptive batches as trad
/// does (docs/messenger.md).
enum class channel : std::uint8_t { send, write, trad, ovfl, adaptive };
const char* to_string(channel c) noexcept;  ///< "send", "write", "trad", "ovfl" or "adaptive"
/// The channel named as to_string names it ("send", "write", "trad", "ovfl", "adaptive"), or
/// nullopt.
std::optional<channel> channel_from_string(std::string_view name) noexcept;
/// What `status`, returned by a call of thread `self` on channel `c`, means there, naming the
/// setting that applies with its value in effect: fabric::to_string(status), except for
/// too_large, whose limit depends on the path: SERIEMA_SEND_LIMIT for channel::send; for the
/// one-sided channels the largest record, from SERIEMA_CHUNK_SIZE (the chunk's data area) and
/// SERIEMA_STAGING_SIZE (a staging unit, for calls to another machine). Never throws: on any
/// failure it falls back to fabric::to_string(status).
[[nodiscard]] std::string describe(thread_context& self, call_status status, channel c) noexcept;

/// What a call does when the destination's ring is full and cannot grow.
namespace policy {
struct fail {};         // return call_status::full; nothing was sent
struct retry {};        // block until there is room, running incoming calls meanwhile
struct retry_async {};  // queue the call locally (in order) and return; the thread's polls send it
}  // namespace policy

/// How a messenger publishes records staged for another machine: put of the batch, fence, put
/// of the published word (what RDMA networks do natively); or one write message that the
/// receiver's process worker applies in that order (cheaper where UCX emulates puts with
/// messages anyway, i.e. tcp: one send instead of two). automatic: message unless the UCX
/// context has an RDMA network transport.
enum class remote_publish : std::uint8_t { automatic, put, message };

/// How a receiver on another machine reports consumption to a sender (released chunks, and
/// synchronizers counted down on consumption): a one-sided atomic add into the sender's feedback
/// word (the paper's RDMA write of the notice), or an active message the sender's process
/// applies. automatic: atomic where the UCX context has an RDMA network transport (rc, dc,
/// ugni_rdma); message elsewhere (UCX 1.13 emulates atomics over tcp with a reply message, and a
/// reply to a process that died meanwhile aborts the replying process: force `atomic` over tcp
/// only where no process may die).
enum class remote_notice : std::uint8_t { automatic, atomic, message };

/// How queued records (overflow, retry_async, replies that found no room) reach a receiver on
/// another machine. automatic: the local queue is registered memory and each run of queued
/// records is put (or sent as a write message) from the queue itself, serialized once. always:
/// the queue is heap memory and each record is copied into a staging unit first (the second
/// copy the paper avoids; kept to measure it). Same-machine (mapped) rings copy from the queue
/// into the chunk either way: that copy is the transfer.
enum class exceeding_copy : std::uint8_t { automatic, always };

/// The one-sided messengers' sizes and limits (SERIEMA_* settings; docs/messenger.md).
struct messenger_options {
  std::size_t chunk_size = std::size_t{2} << 20;  ///< SERIEMA_CHUNK_SIZE, header included
  std::uint32_t chunks_per_allocation = 2;        ///< SERIEMA_CHUNKS_PER_ALLOCATION, 1..8
  std::uint32_t max_chunks = 8;                   ///< SERIEMA_MAX_CHUNKS, >= chunks_per_allocation
  /// SERIEMA_FLUSH_SIZE (trad): unpublished bytes that make a batch due; 0 (auto, the default):
  /// flush_size_for() picks by path.
  std::size_t flush_size = 0;
  std::size_t exceeding_limit = std::size_t{64} << 20;  ///< SERIEMA_EXCEEDING_LIMIT
  std::size_t staging_size = std::size_t{256} << 10;    ///< SERIEMA_STAGING_SIZE
  remote_publish publish_remote = remote_publish::automatic;  ///< SERIEMA_REMOTE_PUBLISH
  remote_notice notices_remote = remote_notice::automatic;    ///< SERIEMA_REMOTE_NOTICES
  exceeding_copy copy_exceeding = exceeding_copy::automatic;  ///< SERIEMA_EXCEEDING_COPY
  static constexpr std::uint32_t max_chunks_per_allocation = 8;  ///< bound of chunks_per_allocation
  /// flush_size auto: where the batch is written into mapped memory or put by RDMA, 4 KiB.
  static constexpr std::size_t auto_flush_size = 4096;
  /// flush_size auto where a batch travels as one write message (tcp): each message costs a
  /// send and its kernel path whatever its size, so batches are 32 KiB (docs/performance.md).
  static constexpr std::size_t auto_message_flush_size = std::size_t{32} << 10;

  /// The trad batch size of a messenger that publishes by message (`by_message`) or not: the
  /// setting, else the automatic choice (never past a chunk's data area).
  [[nodiscard]] std::size_t flush_size_for(bool by_message) const noexcept {
    if (flush_size != 0) return flush_size;
    return std::min(by_message ? auto_message_flush_size : auto_flush_size,
                    chunk_size - wire::chunk_header_size);
  }

  /// From the SERIEMA_* settings of the invoke layer. Throws config_error naming every bad
  /// setting, one line each.
  static messenger_options from_environment();
  /// Throws config_error naming every setting whose value cannot work, one line each.
  void validate() const;
  /// Largest record (header + closure + buffer) one call may have.
  [[nodiscard]] std::size_t max_record() const noexcept {
    // It must fit a chunk's data area and a staging unit (with the published word's slot).
    return std::min(chunk_size - wire::chunk_header_size, staging_size - 64);
  }
};

/// Counters of one messenger (sender side) or one thread's receiving side.
struct messenger_counters {
  std::uint64_t calls = 0;      ///< calls written or queued by the sender
  std::uint64_t repeated = 0;   ///< of those, calls appended to the open record (trad)
  std::uint64_t bytes = 0;      ///< record bytes
  std::uint64_t publishes = 0;  ///< published-word writes
  std::uint64_t chunks_grown = 0;  ///< chunks added to the ring
  std::uint64_t full = 0;       ///< calls that found the ring full (any policy)
  std::uint64_t exceeding = 0;  ///< records that went through the local queue
  std::uint64_t exceeding_peak_bytes = 0;  ///< largest size the local queue reached
  /// Queued records sent to another machine from the queue itself (registered), not copied.
  std::uint64_t exceeding_uncopied = 0;
  /// Queued records copied into a staging unit before they were sent (SERIEMA_EXCEEDING_COPY=
  /// always, records queued before the ring existed, or the queue's registered memory was used up).
  std::uint64_t exceeding_copied = 0;
  /// Queued records copied into a mapped chunk of the receiver (same machine: the copy is the
  /// transfer).
  std::uint64_t exceeding_direct = 0;

  /// {"calls":…,"bytes":…,…}: one JSON object, for benchmark reports and monitoring.
  [[nodiscard]] std::string to_json() const;
  /// What happened since `earlier`, a reading of the same messenger: each count's difference;
  /// exceeding_peak_bytes (a peak, not a count) is this reading's.
  [[nodiscard]] messenger_counters since(const messenger_counters& earlier) const noexcept {
    messenger_counters d = *this;
    d.calls -= earlier.calls;
    d.repeated -= earlier.repeated;
    d.bytes -= earlier.bytes;
    d.publishes -= earlier.publishes;
    d.chunks_grown -= earlier.chunks_grown;
    d.full -= earlier.full;
    d.exceeding -= earlier.exceeding;
    d.exceeding_uncopied -= earlier.exceeding_uncopied;
    d.exceeding_copied -= earlier.exceeding_copied;
    d.exceeding_direct -= earlier.exceeding_direct;
    return d;
  }
};

/// Counters of one thread's receiving side (wire safety: rejected input is counted, never run).
struct receive_counters {
  std::uint64_t calls = 0;  ///< calls run
  std::uint64_t rejected_malformed = 0;  ///< bad framing or a published word no sender writes
  std::uint64_t rejected_record = 0;     ///< well framed, but inconsistent with its function
  std::uint64_t rejected_unknown_function = 0;  ///< records naming an unregistered function
  std::uint64_t chunks_released = 0;  ///< chunks given back to the allocation service
  std::uint64_t failed_reads = 0;  ///< call_buffer_get reads that failed (origin's process died)
  /// put-then-call puts that failed (target's process died), or whose call could not be sent
  std::uint64_t failed_puts = 0;
  /// Chunks of senders whose process died, freed when the death was noticed (with what they
  /// held unpublished: never run).
  std::uint64_t chunks_reclaimed = 0;
  /// Consumption notices to senders on other machines written by one-sided atomic add
  /// (SERIEMA_REMOTE_NOTICES), and sent as active messages.
  std::uint64_t notices_by_atomic = 0;
  std::uint64_t notices_by_message = 0;  ///< (see notices_by_atomic)

  [[nodiscard]] std::string to_json() const;  ///< one JSON object of the counts
};

}  // namespace seriema::invoke

// Sender-side packing of a container's small updates: per destination worker, the updates made
// since its last flush as one byte buffer of fixed-size entries (no per-update closure or
// record), cut into segments of one operation each, sent as one call per segment.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <seriema/containers/detail/container_table.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/invoke/invoke.hpp>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace seriema::containers::detail {

/// Sends one segment's entries to `dest` as one call (a container's function for one operation).
using segment_sender = invoke::call_status (*)(void* container, fabric::thread_id dest,
                                               std::span<const std::byte> entries);

/// The batches of one container object, one per destination worker. Owner thread only.
///
/// Progress: after each flush the thread runs the calls it received (container_table::
/// make_progress). Calls run inside an update, as under policy::retry.
///
/// Order: a destination's entries go out in the order they were appended, segment after
/// segment; the container flushes a destination before it sends that destination anything
/// unpacked, so every update reaches the owner in the order the sender made it. While a flush
/// waits for room (policy::retry runs incoming calls meanwhile), what those calls append waits
/// for the next round of the same flush; an unpacked operation made by such a call may overtake
/// the batch in flight, as any call made while a retry waits may (docs/containers.md).
class packed_batches {
 public:
  /// Batches for `destinations` workers, each sent once it holds `limit_bytes` bytes.
  packed_batches(fabric::thread_context& self, container_table& table,
                 std::size_t destinations, std::size_t limit_bytes)
      : self_(self), table_(table), batches_(destinations), limit_(limit_bytes) {}

  /// Appends one entry for `dest` (the bytes of each value, in order: trivially copyable), to be
  /// sent by `send`; sends dest's batch once it reached the limit (returns that send's status),
  /// else returns ok.
  template <class... Values>
  invoke::call_status append(void* container, fabric::thread_id dest, segment_sender send,
                             const Values&... values) {
    static_assert((std::is_trivially_copyable_v<Values> && ...));
    constexpr std::size_t entry_size = (sizeof(Values) + ...);
    batch& b = batches_[dest];
    if (b.segments.empty() || b.segments.back().send != send) {
      b.segments.push_back({send, entry_size, b.bytes.size()});
    }
    std::byte* at = b.bytes.grow(entry_size);
    ((std::memcpy(at, &values, sizeof(Values)), at += sizeof(Values)), ...);
    b.segments.back().end = b.bytes.size();
    return b.bytes.size() >= limit_ ? flush(container, dest) : invoke::call_status::ok;
  }

  /// Sends dest's batch, segment by segment, and what calls run meanwhile appended, then makes
  /// progress; returns the first status that was not ok (or ok). Nested
  /// inside a flush of the same destination it returns at once: the outer flush sends the rest.
  invoke::call_status flush(void* container, fabric::thread_id dest);
  /// flush() of every destination.
  invoke::call_status flush_all(void* container);
  /// Drops what dest's batch holds (its process failed: it cannot be delivered; the job's
  /// barrier fails naming it).
  void drop(fabric::thread_id dest) noexcept;

 private:
  struct segment {
    segment_sender send;
    std::size_t entry_size;  // every entry of a segment has the same size
    std::size_t end;         // one past its last byte in the batch
  };
  // Bytes appended at the end of a buffer that keeps its storage when cleared (no value
  // initialization per entry, as std::vector::resize would do).
  class byte_buffer {
   public:
    // Room for `n` more bytes at the end (grown, rarely: a batch that calls run during its
    // flush filled past the limit).
    std::byte* grow(std::size_t n) {
      if (used_ + n > storage_.size()) storage_.resize(std::max(2 * storage_.size(), used_ + n));
      std::byte* at = storage_.data() + used_;
      used_ += n;
      return at;
    }
    [[nodiscard]] const std::byte* data() const noexcept { return storage_.data(); }
    [[nodiscard]] std::size_t size() const noexcept { return used_; }
    [[nodiscard]] bool empty() const noexcept { return used_ == 0; }
    void clear() noexcept { used_ = 0; }
    void swap(byte_buffer& other) noexcept {
      storage_.swap(other.storage_);
      std::swap(used_, other.used_);
    }

   private:
    std::vector<std::byte> storage_;
    std::size_t used_ = 0;
  };
  struct batch {
    byte_buffer bytes;  // appended to
    std::vector<segment> segments;
    byte_buffer sending_bytes;  // taken out of `bytes` by a flush in progress
    std::vector<segment> sending_segments;
    bool flushing = false;
  };
  // Sends one round: what the batch held when it began, in pieces of at most limit_ bytes.
  invoke::call_status send_round(void* container, fabric::thread_id dest, batch& b);

  fabric::thread_context& self_;
  container_table& table_;
  std::vector<batch> batches_;  // sized once: references to a batch stay valid in a flush
  std::size_t limit_;
};

}  // namespace seriema::containers::detail

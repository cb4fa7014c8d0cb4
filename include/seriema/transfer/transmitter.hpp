// Transmitter (paper: IBTransmitter): put / get / atomics / send on one endpoint with automatic
// selective completion and completion tags for bulk buffer recycling. Shareable by threads.
//
// Protocol and invariants (paper §4.1, adapted to UCX):
//  * An operation is posted "unsignaled": its UCX request, if any, is released at once.
//  * Completion is asked for by a *flush ticket*: k = tickets_claimed_.fetch_add(1), then
//    ucp_ep_flush_nbx. When flush k completes, every operation posted on the endpoint before
//    flush k was posted has completed (locally and at the target).
//  * After posting an operation, the poster reads v = tickets_claimed_ and tags the buffers it
//    used with (this, v). Ticket v had not been claimed when it was read, so flush v is posted
//    after the operation (UCX's worker lock orders the two posts), hence flush v's completion
//    implies the operation's. Any ticket w >= v implies it too: ticket w is claimed after v.
//  * counter_.completed_tickets = 1 + the largest ticket whose flush completed; it only grows
//    (fetch-max). A tag (this, v) is complete iff completed_tickets > v, so one atomic store
//    recycles every buffer tagged with a smaller ticket.
//  * Automatic mode: the poster of every S-th operation (ops_posted_ % S == 0) claims a ticket.
//    Manual mode: only request_completion() does. Either way, no thread waits for another: a
//    post is a bounded number of atomic operations plus the UCX call (wait-free bookkeeping;
//    the UCX worker itself serializes threads internally when shared).
//  * A flush's completion is reported by UCX on whichever thread progresses the worker. Ticket k
//    and the "who finishes" flag live in the request's reserved bytes; the poster and the
//    callback each do one atomic exchange on the flag, and the second one to arrive applies the
//    completion and frees the request (no allocation, no lock, no lost completion).
//  * A flush that fails (dead peer) marks the transmitter failed and completes every ticket
//    (completed_tickets = max): UCX has purged the endpoint's operations and will not touch
//    the buffers again, so units tagged by this transmitter recycle. A flush UCX refuses to
//    post for another reason (e.g. no memory) advances nothing; a later ticket covers it.
//  * wait(tag) claims a ticket itself when none covering `tag` was claimed yet, so it never
//    depends on other posts arriving.
//  * The completion state (counter, failure) lives in a block that is never freed while the
//    process runs (retired to a global list when the transmitter is destroyed): UCX may call
//    back for a flush after the transmitter is gone, and unit tags keep pointing at the counter.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <seriema/transfer/completion.hpp>
#include <seriema/transfer/memory.hpp>
#include <seriema/transfer/remote_memory.hpp>
#include <seriema/transfer/detail/ucx_forward.hpp>
#include <span>

namespace seriema::transfer {

/// Result of posting an operation. Data path: returned, never thrown.
enum class op_status : std::uint8_t {
  ok,            ///< posted
  peer_failed,   ///< the endpoint reported the peer dead; nothing more will be delivered
  out_of_range,  ///< the remote range is outside the locator (nothing was posted)
  error,         ///< UCX refused the operation (see transmitter::last_error())
  /// The buffer's unit already carries tags of unit_tags::max_transmitters other transmitters
  /// (nothing was posted).
  tags_full,
};
/// A readable description ("peer failed"), or "unknown".
const char* to_string(op_status status) noexcept;

/// How a transmitter asks for completion.
struct transmitter_options {
  std::uint32_t completion_interval = 64;  ///< S; >= 1. Default: SERIEMA_COMPLETION_INTERVAL
  bool automatic = true;                   ///< false: completion only on request_completion()
  /// completion_interval from SERIEMA_COMPLETION_INTERVAL (1..2^20); automatic stays true.
  /// Throws config_error naming the setting.
  static transmitter_options from_environment();
};

/// Posts put / get / atomics / active-message sends on one endpoint and tracks their completion
/// with flush tickets (protocol at the top of transmitter.hpp): every S-th operation (or
/// request_completion()) asks UCX for a flush, and completion tags tell buffers when they may
/// be reused. Errors: operations return op_status and never throw; a flush that fails on a dead
/// peer makes failed() true.
/// Thread-safety: every member may be called concurrently by threads sharing the endpoint's
/// worker (which must then be worker_sharing::multi_thread).
class transmitter {
 public:
  /// The endpoint must outlive the transmitter. Throws config_error when completion_interval is 0.
  transmitter(ucx_endpoint& endpoint, const transmitter_options& options);
  ~transmitter();  ///< asks for completion of everything and waits (at most 5 s); never throws
  transmitter(const transmitter&) = delete;
  transmitter& operator=(const transmitter&) = delete;

  /// Writes `local` to dst[offset, offset+local.size()). `local` must stay untouched until the
  /// tag recorded in `tags` (if given) is complete.
  [[nodiscard]] op_status put(std::span<const std::byte> local, const remote_memory& dst,
                              std::uint64_t offset, unit_tags* tags = nullptr) noexcept;
  /// Writes the first `bytes` of `local` to dst[offset, offset+bytes), tagging local.tags (if
  /// any).
  [[nodiscard]] op_status put(const registered_buffer& local, std::size_t bytes,
                              const remote_memory& dst, std::uint64_t offset) noexcept {
    return put(local.bytes().first(bytes), dst, offset, local.tags);
  }
  /// Reads src[offset, offset+local.size()) into `local`; the data is there once the tag is
  /// complete (wait(current_tag()) or the buffer's unit tags).
  [[nodiscard]] op_status get(std::span<std::byte> local, const remote_memory& src,
                              std::uint64_t offset, unit_tags* tags = nullptr) noexcept;
  /// 64-bit remote atomics; `offset` must be 8-byte aligned (else out_of_range). Fetching
  /// variants write the old value into *result once the tag is complete (*result must stay alive
  /// until then). This one adds `value` to the remote word and fetches nothing.
  [[nodiscard]] op_status atomic_add(const remote_memory& dst, std::uint64_t offset,
                                     std::uint64_t value) noexcept;
  /// Adds `value` to the remote word; *result receives the old value once the tag is complete.
  [[nodiscard]] op_status fetch_add(const remote_memory& dst, std::uint64_t offset,
                                    std::uint64_t value, std::uint64_t* result,
                                    unit_tags* tags = nullptr) noexcept;
  /// Swaps in `desired` if the remote word equals `expected`; *result receives the old value
  /// once the tag is complete.
  [[nodiscard]] op_status compare_swap(const remote_memory& dst, std::uint64_t offset,
                                       std::uint64_t expected, std::uint64_t desired,
                                       std::uint64_t* result, unit_tags* tags = nullptr) noexcept;
  /// Writes `value` into the remote word; *result receives the old value once the tag is
  /// complete (an atomic store that other initiators' atomics on the word never tear).
  [[nodiscard]] op_status swap(const remote_memory& dst, std::uint64_t offset, std::uint64_t value,
                               std::uint64_t* result, unit_tags* tags = nullptr) noexcept;
  /// Active-message send (header + payload) to handler `am_id` on the peer worker, always eager
  /// (a rendezvous send would still be reading `payload` after the flush that completes its
  /// tag). `header` and `payload` must stay untouched until the tag is complete.
  [[nodiscard]] op_status send(unsigned am_id, std::span<const std::byte> header,
                               std::span<const std::byte> payload, unit_tags* tags = nullptr) noexcept;

  /// The tag that covers every operation this thread posted so far.
  [[nodiscard]] completion_tag current_tag() const noexcept {
    return {&state_->counter, tickets_claimed_.load(std::memory_order_acquire)};
  }
  /// Claims a flush ticket now (manual selective completion; also usable in automatic mode).
  void request_completion() noexcept;
  /// Progresses the endpoint's worker (completions are delivered here).
  bool progress() noexcept;
  /// Blocks, progressing, until `tag` is complete (claiming a ticket if none covers it yet).
  /// Returns peer_failed if the peer died.
  [[nodiscard]] op_status wait(completion_tag tag) noexcept;
  /// request_completion() + wait for everything posted so far.
  [[nodiscard]] op_status flush() noexcept;

  /// The counter this transmitter's tags refer to; it outlives the transmitter.
  [[nodiscard]] const completion_counter& counter() const noexcept { return state_->counter; }
  /// True once a flush failed (the peer died); every ticket then counts as complete.
  [[nodiscard]] bool failed() const noexcept {
    return state_->failed.load(std::memory_order_acquire);
  }
  /// UCX's status of the last refused operation (ucs_status_t's value; UCS_OK = 0 when none).
  [[nodiscard]] ucx_status_code last_error() const noexcept {
    return state_->last_error.load(std::memory_order_relaxed);
  }
  /// Operations posted so far (statistics; relaxed read).
  [[nodiscard]] std::uint64_t operations_posted() const noexcept {
    return ops_posted_.load(std::memory_order_relaxed);
  }
  /// Flush tickets claimed so far (statistics; relaxed read).
  [[nodiscard]] std::uint64_t completions_requested() const noexcept {
    return tickets_claimed_.load(std::memory_order_relaxed);
  }
  /// The endpoint operations are posted on.
  [[nodiscard]] ucx_endpoint& endpoint() const noexcept { return endpoint_; }

 private:
  /// What outlives the transmitter (see the invariants above). Written by completion callbacks
  /// and posters; never freed while the process runs.
  struct completion_state {
    completion_counter counter;
    std::atomic<bool> failed{false};
    std::atomic<ucx_status_code> last_error{0};
    void complete_ticket(std::uint64_t ticket) noexcept;
    void fail(ucx_status_code status) noexcept;  ///< completes every ticket
  };

  [[nodiscard]] bool tags_accept(const unit_tags* tags) const noexcept {
    return tags == nullptr || tags->can_accept(&state_->counter);
  }
  op_status finish_post(void* request, unit_tags* tags) noexcept;
  op_status check_atomic_target(const remote_memory& dst, std::uint64_t offset) const noexcept;
  // A fetching atomic (`op`: a ucp_atomic_op_t) whose old value lands in *result. UCX reads
  // `operand` before returning (the reply buffer, *result, is written at completion).
  op_status fetching_atomic(unsigned op, const remote_memory& dst, std::uint64_t offset,
                            const std::uint64_t& operand, std::uint64_t* result,
                            unit_tags* tags) noexcept;
  /// UCX's completion callback of a flush and what it shares with the poster (transmitter.cpp).
  struct flush_completion;
  friend struct flush_completion;

  ucx_endpoint& endpoint_;
  const transmitter_options options_;
  /// S - 1 when S is a power of two (then "every S-th" is a mask test), else 0. Note S = 1 gives
  /// mask 0 and takes the modulo path, which is then trivially true.
  const std::uint64_t interval_mask_;
  completion_state* state_;
  alignas(64) std::atomic<std::uint64_t> ops_posted_{0};
  alignas(64) std::atomic<std::uint64_t> tickets_claimed_{0};
};

}  // namespace seriema::transfer

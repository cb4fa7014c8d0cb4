// Send-based messages (calls, replies) that UCX could not take at once, kept in memory their
// thread owns so that the sender can stop waiting at its deadline and leave the send to UCX.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <seriema/transfer/detail/ucx_forward.hpp>
#include <span>
#include <vector>

namespace seriema::fabric::detail {

// Why this exists: an active-message send that UCX queues (a full TCP socket to a stalled or
// partitioned peer) reads the sender's memory until it completes, and UCX 1.13 cannot cancel
// it. A message is therefore copied here before it is handed to UCX the slow way; when the
// deadline passes first, the caller returns and the request stays here, with its copy.
//
// Invariants: at most one request per destination process (a later message to that process is
// sent only once the earlier one completed, which keeps the sender's FIFO order and bounds the
// memory to one message per peer and thread); `bytes` is not touched while `request` is set.
// Owner: the one thread that sends through this table (a local_thread_state's user).
class staged_sends {
 public:
  struct staged {
    std::vector<std::byte> bytes;  // header, then payload; read by UCX while `request` is set
    void* request = nullptr;       // UCX's request for `bytes`, null when none is in flight
  };
  enum class result { sent, deadline_unsent, queued_at_deadline, peer_failed, error };
  // How a caller's wait for a request ended: the request completed (its status is read), or
  // it is still in flight because the deadline passed or the peer is known dead.
  enum class wait_end { completed, deadline, peer_dead };

  // Sends active message `am_id` (`header`, then `closure` and `buffer`) to `process` over
  // `endpoint`. Fast path: UCX sends it at once from the caller's memory
  // (UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL: done, or refused without a request). Otherwise it is
  // copied into the entry of `process` and sent from there, and `wait(request)` waits for it
  // (progressing the caller's worker until the caller's deadline); a request still in flight
  // then stays in the entry with its copy (queued_at_deadline). A message whose predecessor to
  // `process` is still in flight is sent only once that completed (FIFO order; one staged
  // message per peer), and not at all if `wait` gives up first (deadline_unsent).
  template <class Wait>
  result send(ucp_ep* endpoint, int process, unsigned am_id, std::span<const std::byte> header,
              std::span<const std::byte> closure, std::span<const std::byte> buffer, Wait wait);

  // The entry of `process` (created on first use: the slow path only).
  staged& of(int process);
  // Copies `parts` one after the other into `entry.bytes` (its capacity is kept, up to a cap).
  static void fill(staged& entry, std::span<const std::span<const std::byte>> parts);
  // `entry`'s request completed: frees it and trims a large block.
  static void complete(staged& entry) noexcept;
  // Teardown, after the endpoints were closed and before the worker goes: hands every request
  // still in flight (staged or left) back to UCX (ucp_request_free releases it when it
  // completes); the memory stays until this table goes.
  void release_requests() noexcept;
  [[nodiscard]] std::size_t in_flight() const noexcept;

  // One-sided operations (the invoke layer's put and get variants) whose deadline passed while
  // UCX still used their memory: `bytes` stays here with `request` until UCX completed it.
  // The layer does not start another such operation to `process` while one is left (it waits
  // for it, within its own deadline), so there is at most one per peer.
  void leave(int process, std::vector<std::byte> bytes, void* request);
  // The same for memory of any owner (`keeper` holds it; -1: no peer to settle, e.g. a
  // channel destroyed with notices still queued).
  void leave(int process, std::shared_ptr<const void> keeper, void* request);
  // Whether an operation left to `process` is still in flight (completed ones are released).
  [[nodiscard]] bool left_in_flight(int process) noexcept;

 private:
  struct left_operation {
    int process;
    std::shared_ptr<const void> keeper;  // the memory `request` uses
    void* request;
  };
  // The caller's wait, called through a pointer (no allocation, no template in the .cpp).
  struct waiter {
    void* caller_wait;
    wait_end (*call)(void* caller_wait, void* request);
  };
  result send_waiting(ucp_ep* endpoint, int process, unsigned am_id,
                      std::span<const std::byte> header, std::span<const std::byte> closure,
                      std::span<const std::byte> buffer, waiter wait);
  std::vector<staged> entries_;
  std::vector<left_operation> left_;
};

template <class Wait>
staged_sends::result staged_sends::send(ucp_ep* endpoint, int process, unsigned am_id,
                                        std::span<const std::byte> header,
                                        std::span<const std::byte> closure,
                                        std::span<const std::byte> buffer, Wait wait) {
  const waiter by_caller{&wait, [](void* caller_wait, void* request) {
                           return (*static_cast<Wait*>(caller_wait))(request);
                         }};
  return send_waiting(endpoint, process, am_id, header, closure, buffer, by_caller);
}

}  // namespace seriema::fabric::detail

// The send-based call's wire header and the per-destination queue of received calls (fabric
// machinery: the receive path fills it, the destination thread's poll empties it).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <seriema/fabric/function_registry.hpp>
#include <seriema/transfer/detail/ucx_forward.hpp>
#include <span>
#include <vector>

namespace seriema::fabric {

// Wire header of a send-based call (the UCX active-message header). Every field is checked by
// the receiver before use; see docs/invocation.md.
struct call_header {
  function_id function = 0;
  std::uint32_t destination = 0;   // global thread id, or service_of(process)
  std::uint32_t source = 0;        // global thread id of the caller
  std::uint32_t closure_size = 0;  // bytes of closure at the start of the payload
  std::uint32_t buffer_size = 0;   // bytes of buffer after the closure
  std::uint32_t reply_slot = 0;    // call_return: slot index at the caller (0 = no reply)
  std::uint32_t reply_generation = 0;
  std::uint32_t reserved = 0;
};
static_assert(sizeof(call_header) == 32);

// Destinations above this bit are a process's service role rather than a worker thread.
inline constexpr std::uint32_t service_bit = 0x8000'0000u;
constexpr std::uint32_t service_of(int process) noexcept {
  return service_bit | static_cast<std::uint32_t>(process);
}

// Per-destination FIFO of received calls. Producers: whoever progresses the process worker (AM
// handler) and same-process senders; consumer: the destination thread. A mutex with batch swap
// keeps a global FIFO order across producer threads (lock-free multi-producer queues only keep
// per-producer order, and the progressing thread may change between two calls of one sender).
class call_queue {
 public:
  // Payloads up to this size travel inside the item (no allocation, and the receiver does not
  // keep UCX's receive descriptor): most closures are a few words.
  static constexpr std::size_t inline_payload = 64;
  struct item {
    call_header header;
    const function_entry* entry = nullptr;  // found by the receive path (else looked up to run)
    // A call_return to an attach slot nobody ever attached, queued on the service role only so
    // that its caller's slot fails (not_executed) instead of waiting; never run.
    bool refused = false;
    std::byte* heap = nullptr;  // owned payload when larger than inline_payload (new[])
    void* ucx_data = nullptr;   // UCX AM data to release after running (payload lives there)
    alignas(16) std::byte inline_bytes[inline_payload];
    // Closure bytes, then buffer bytes. Points into the item itself when inline: use it on the
    // copy that runs, not across a move of the item.
    [[nodiscard]] std::byte* payload() noexcept {
      if (ucx_data != nullptr) return static_cast<std::byte*>(ucx_data);
      return heap != nullptr ? heap : inline_bytes;
    }
    // Copies `parts` (in order) into the item: inline when they fit, else a new[] block.
    void store(std::initializer_list<std::span<const std::byte>> parts);
    // Frees what the item owns; UCX data goes back to `worker`.
    void release(ucp_worker* worker) noexcept;
  };
  void push(const item& call);
  // Moves every queued call into `out` (cleared first); returns how many.
  std::size_t take_all(std::vector<item>& out);
  [[nodiscard]] bool empty() const noexcept { return size_.load(std::memory_order_relaxed) == 0; }

 private:
  std::mutex mutex_;
  std::vector<item> items_;
  std::atomic<std::size_t> size_{0};
};

}  // namespace seriema::fabric

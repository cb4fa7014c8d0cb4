// The receiving side of one ordered thread pair: the ring of chunks its sender allocated here,
// whose published records the receiving thread runs in FIFO order (docs/messenger.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <seriema/fabric/detail/thread_state.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/invoke/channel.hpp>
#include <seriema/invoke/detail/wire.hpp>
#include <seriema/transfer/remote_memory.hpp>
#include <vector>

namespace seriema::invoke {

class channels;

// The receiving side of one ordered pair: the ring of chunks the sender allocated here, read in
// FIFO order. Owner: the receiving thread.
class inbound_channel {
 public:
  inbound_channel(channels& owner, std::uint32_t sender, std::vector<fabric::granted_memory> first);
  ~inbound_channel();
  inbound_channel(const inbound_channel&) = delete;
  inbound_channel& operator=(const inbound_channel&) = delete;

  [[nodiscard]] std::uint32_t sender() const noexcept { return sender_; }
  [[nodiscard]] std::size_t chunks() const noexcept { return ring_.size(); }
  // Runs what the sender published since the last poll; returns calls run, and adds the bytes
  // of the records they came in to `bytes`.
  std::size_t poll(thread_context& self, std::uint64_t& bytes);
  // Addresses of the ring's chunks in ring order (see messenger::chunk_addresses).
  [[nodiscard]] std::vector<std::uint64_t> chunk_addresses() const;
  // A call of this channel is running (on this thread's stack): it must not be destroyed.
  [[nodiscard]] bool running() const noexcept { return running_; }
  // Adds `value` to word `word` of the sender's feedback area: directly when it is mapped here,
  // else by a one-sided atomic or an active message (SERIEMA_REMOTE_NOTICES).
  void notify(thread_context& self, std::uint32_t word, std::uint64_t value);

 private:
  struct chunk {
    fabric::granted_memory memory;
    wire::chunk_header* header = nullptr;
    std::byte* data = nullptr;
    std::uint64_t capacity = 0;
    std::uint32_t lap = 1;  // lap expected next
  };
  void adopt(std::vector<fabric::granted_memory>& batch, std::size_t position);
  void release_chunk(thread_context& self);
  std::size_t run_range(thread_context& self, chunk& c, std::uint64_t end);
  // Runs the closures of the repeated record at read_offset_ not run yet; returns calls run.
  std::size_t run_repeated(thread_context& self, const wire::parsed_record& rec);
  // Runs a call that expects a reply (a call_return's), then sends the reply; returns 1. Out of
  // the plain calls' way: their loop touches no result buffer or reply channel.
  std::size_t run_returning(thread_context& self, const wire::parsed_record& rec);

  channels& owner_;
  std::uint32_t sender_;
  std::vector<chunk> ring_;
  std::size_t current_ = 0;
  std::uint64_t read_offset_ = 0;
  std::uint32_t repeat_next_ = 0;  // closures of the repeated record at read_offset_ started
  std::uint32_t next_batch_ = 1;
  std::uint64_t last_bad_word_ = 0;
  bool running_ = false;  // a call of this channel is running: nested polls skip the channel
  transfer::remote_memory_locator feedback_locator_{};
  std::unique_ptr<transfer::remote_memory> feedback_;
  bool notices_by_atomic_ = false;  // chosen with feedback_ (SERIEMA_REMOTE_NOTICES)
  // Posts the atomic add of `value` at `offset` of the sender's feedback area; false when UCX
  // refused it (the endpoint failed).
  bool post_atomic_notice(std::uint64_t offset, std::uint64_t value);
};

}  // namespace seriema::invoke

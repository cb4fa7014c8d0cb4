// The result storage and reply channel of one call_return being run at its destination, shared
// by the receive paths of fabric (send-based calls) and invoke (one-sided records).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <seriema/fabric/detail/scratch.hpp>
#include <seriema/fabric/function_registry.hpp>
#include <span>
#include <vector>

namespace seriema::fabric::detail {

// A fixed-size result goes into 256 bytes on the stack (on the heap when larger); a function
// of variable_result_size gets a leased scratch buffer for its serialized value, kept until
// this object dies: the reply's send may wait for room and run calls meanwhile, whose replies
// lease buffers of their own. Pinned (the invocation points into it); the running thread only.
class returning_call {
 public:
  returning_call(const function_entry& entry, std::uint32_t slot, std::uint32_t generation)
      : reply_{slot, generation} {
    if (entry.result_size == variable_result_size) {
      reply_.storage = &serialized_.emplace().bytes();
    } else if (entry.result_size <= sizeof small_) {
      result_ = {small_, entry.result_size};
    } else {
      big_.resize(entry.result_size);
      result_ = big_;
    }
  }
  returning_call(const returning_call&) = delete;
  returning_call& operator=(const returning_call&) = delete;

  // What the function receives: its thread, its caller, the call's buffer, and this storage.
  [[nodiscard]] invocation make(thread_context& self, std::uint32_t source,
                                std::span<std::byte> buffer) noexcept {
    return {&self, source, buffer, result_, &reply_};
  }
  // The reply as the function's wrapper shaped it (finish_reply sends it).
  [[nodiscard]] reply_channel& reply() noexcept { return reply_; }

 private:
  alignas(16) std::byte small_[256];
  std::vector<std::byte> big_;
  std::span<std::byte> result_;
  reply_channel reply_;
  std::optional<scratch_lease> serialized_;
};

}  // namespace seriema::fabric::detail

// How a pending operation ends (docs/failures.md): the outcome of a call_return's slot or a
// synchronizer's wait, and the clock deadlines are given in.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace seriema::fabric {

/// How a pending operation (a call_return's slot, a synchronizer's wait) ended; exactly one of
/// these, once (docs/failures.md). Numeric values travel in replies: keep them.
enum class outcome : std::uint8_t {
  pending = 0,
  done = 1,               ///< the value is in the slot
  threw = 2,              ///< the function ran at the destination and threw
  not_executed = 3,       ///< failed; provably never ran (not sent, dropped before it was
                          ///< published, or its function is not registered at the destination)
  may_have_executed = 4,  ///< failed; the call was sent and no reply came: the destination's
                          ///< process died (the function ran at most once)
  deadline_exceeded = 5,  ///< the wait's deadline passed first; a late reply is dropped
  cancelled = 6,          ///< return_slot::cancel(); a late reply is dropped
};
const char* to_string(outcome o) noexcept;  ///< "done", "may have executed", ...
/// "call_return to thread 3 (rank 1): may have executed: ..." for messages and exceptions.
std::string describe(outcome o, std::uint32_t destination, int process);
/// Failure outcomes a reply (message or cell) may carry; anything else is a malformed reply.
constexpr bool is_reply_failure(outcome o) noexcept {
  return o == outcome::threw || o == outcome::not_executed;
}

/// The clock every deadline of the library is on.
using deadline_clock = std::chrono::steady_clock;
/// "No deadline": waits bounded only by peer failure detection.
inline constexpr deadline_clock::time_point no_deadline = deadline_clock::time_point::max();

}  // namespace seriema::fabric

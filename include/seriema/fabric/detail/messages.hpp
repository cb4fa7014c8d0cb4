// The fabric's own active messages: their ids and the headers of the feedback and write
// messages (wire formats; every field is checked by the receiving handler before use).
#pragma once

#include <cstdint>

namespace seriema::fabric {

// Active-message ids reserved by seriema's own layers (applications use ids >= 16).
inline constexpr unsigned am_id_runtime_barrier = 1;
inline constexpr unsigned am_id_call = 2;
inline constexpr unsigned am_id_reply = 3;
// A notification for a thread's feedback words (header: feedback_message; no payload).
inline constexpr unsigned am_id_feedback = 4;

struct feedback_message {
  std::uint32_t thread;  // global id of a thread of the receiving process
  std::uint32_t word;    // index into its feedback words
  std::uint64_t value;   // added (two's complement: ~0 subtracts one)
};
// A remote write with its publication, for transports whose puts are emulated anyway (tcp):
// the handler copies the payload to [base + data_offset, + length) and then stores `word` at
// base + word_offset (release), in that order, on whichever thread progresses the process
// worker. One message instead of put, fence, put. The target must be a live allocation of the
// receiving process's allocation service (base and size exactly as allocated) and both ranges
// inside it; anything else is counted in invocation_counters::rejected_writes and dropped.
inline constexpr unsigned am_id_write = 5;

struct write_message {
  std::uint64_t base;         // allocation start (the locator's address)
  std::uint64_t size;         // allocation size (the locator's size)
  std::uint64_t data_offset;  // where the payload lands
  std::uint64_t word_offset;  // 8-byte aligned; written after the payload
  std::uint64_t word;
};
static_assert(sizeof(write_message) == 40);
inline constexpr unsigned am_id_first_free = 16;

}  // namespace seriema::fabric

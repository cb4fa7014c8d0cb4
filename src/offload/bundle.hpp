// Calls of one batch to one thread as one message (engine_options::bundle_bytes): the layout an
// executor writes, and the call that hands the members to the destination's poll in order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/offload/engine.hpp>
#include <span>
#include <vector>

namespace seriema::offload::detail {

// A bundle is `count` members back to back, each: this header (16 bytes), the closure's bytes
// padded to 16, the call_buffer's bytes padded to 16 (none for a call). The executor writes it
// into its own scratch and the transport copies it; the destination reads it in the received
// message's payload, which it may not outlive.
struct bundle_member_header {
  fabric::function_id function = 0;  // the registered function (the closure's type)
  std::uint32_t closure_size = 0;
  std::uint32_t buffer_size = 0;
  std::uint32_t reserved = 0;
};
static_assert(sizeof(bundle_member_header) == 16);  // docs/offload.md counts 16 bytes a member

constexpr std::size_t padded16(std::size_t n) noexcept { return (n + 15) & ~std::size_t{15}; }

// Bytes command `c` (a call or call_buffer) takes in a bundle.
inline std::size_t bundle_bytes_of(const command& c) noexcept {
  return sizeof(bundle_member_header) + padded16(c.closure_size) + padded16(c.size);
}

// Appends `c` to `bytes`; the caller reserved room for it (no allocation on the hot path).
void append_to_bundle(std::vector<std::byte>& bytes, const command& c);

// Sends the `count` members laid out in `bytes` to thread `dest` as one send-based call of
// `from` (the status is that of the one message, for every member).
fabric::call_status send_bundle(fabric::thread_context& from, fabric::thread_id dest,
                                std::span<const std::byte> bytes, std::uint32_t count);

}  // namespace seriema::offload::detail

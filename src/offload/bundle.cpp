// Bundles of calls: writing a member at the executor, and handing a bundle's members to the
// destination thread's poll, each to run as the call it would have been on its own.
#include "bundle.hpp"

#include <fmt/format.h>

#include <cstring>
#include <seriema/base/error.hpp>

namespace seriema::offload::detail {

namespace {

[[noreturn]] void refuse_bundle(const fabric::invocation& call, std::uint32_t index,
                                std::uint32_t count, const char* why) {
  throw error(fmt::format(
      "offload: a bundle of {} calls from thread {} was not run: call {} {} (the processes of "
      "one job run one binary: this is memory corruption)",
      count, call.source, index + 1, why));
}

// Hands the members back to the destination's poll, in order, ahead of everything it received
// (thread_context::run_first): each then runs exactly as if it had come alone, so a member that
// waits lets the next run in its nested polls, and one that throws stops none of the others.
void hand_over(fabric::invocation& call, std::uint32_t count) {
  thread_local std::vector<fabric::thread_context::handed_call> members;
  members.clear();
  const std::span<const std::byte> bytes = call.buffer;
  std::size_t at = 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    bundle_member_header h;
    if (bytes.size() - at < sizeof h) refuse_bundle(call, i, count, "is past its end");
    std::memcpy(&h, bytes.data() + at, sizeof h);
    const std::size_t closure_at = at + sizeof h;
    const std::size_t buffer_at = closure_at + padded16(h.closure_size);
    at = buffer_at + padded16(h.buffer_size);  // no overflow: each size is 32 bits
    if (at > bytes.size()) refuse_bundle(call, i, count, "passes its end");
    members.push_back({h.function, call.source, bytes.subspan(closure_at, h.closure_size),
                       bytes.subspan(buffer_at, h.buffer_size)});
  }
  if (at != bytes.size()) refuse_bundle(call, count - 1, count, "is followed by stray bytes");
  call.self->run_first(members);
}

// The function a bundle's message names: its closure is the member count.
struct bundle_runner {
  static constexpr std::uint32_t result_bytes = 0;
  std::uint32_t count = 0;
  void operator()(fabric::invocation& call) const { hand_over(call, count); }
};

}  // namespace

void append_to_bundle(std::vector<std::byte>& bytes, const command& c) {
  const std::size_t at = bytes.size();
  bytes.resize(at + bundle_bytes_of(c));  // zeroes the padding
  bundle_member_header h;
  h.function = c.function;
  h.closure_size = c.closure_size;
  h.buffer_size = static_cast<std::uint32_t>(c.size);
  std::memcpy(bytes.data() + at, &h, sizeof h);
  std::memcpy(bytes.data() + at + sizeof h, c.closure, c.closure_size);
  if (c.size != 0) {
    std::memcpy(bytes.data() + at + sizeof h + padded16(c.closure_size), c.local, c.size);
  }
}

fabric::call_status send_bundle(fabric::thread_context& from, fabric::thread_id dest,
                                std::span<const std::byte> bytes, std::uint32_t count) {
  return from.call_as<fabric::invocation_shape>(dest, bundle_runner{count}, bytes);
}

}  // namespace seriema::offload::detail

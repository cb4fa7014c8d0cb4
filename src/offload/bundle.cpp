// Bundles of calls: writing a member at the executor, and running a bundle's members at the
// destination thread, each as the call it would have been on its own.
#include "bundle.hpp"

#include <fmt/format.h>

#include <cstring>
#include <exception>
#include <seriema/base/error.hpp>
#include <seriema/fabric/function_registry.hpp>

namespace seriema::offload::detail {

namespace {

[[noreturn]] void refuse_member(const fabric::invocation& call, std::uint32_t index,
                                std::uint32_t count, const char* why) {
  throw error(fmt::format(
      "offload: call {} of {} in a bundle from thread {} was not run ({}); the calls after it "
      "are lost too (the processes of one job run one binary: this is memory corruption)",
      index + 1, count, call.source, why));
}

// Runs the members in order, each with its own invocation (the bundle's source, its own
// buffer: a span of the received payload). A member that throws does not stop the others: the
// first exception leaves the call when all ran, later ones are kept for the next polls, as if
// each call had come alone.
void run_members(fabric::invocation& call, std::uint32_t count) {
  const std::span<std::byte> bytes = call.buffer;
  const fabric::function_registry& registry = fabric::function_registry::instance();
  std::exception_ptr first;
  std::size_t at = 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    bundle_member_header h;
    if (bytes.size() - at < sizeof h) refuse_member(call, i, count, "the bundle ends early");
    std::memcpy(&h, bytes.data() + at, sizeof h);
    const std::size_t closure_at = at + sizeof h;
    const std::size_t buffer_at = closure_at + padded16(h.closure_size);
    const std::size_t end = buffer_at + padded16(h.buffer_size);
    if (end > bytes.size()) refuse_member(call, i, count, "its bytes pass the bundle's end");
    const fabric::function_entry* entry = registry.find(h.function);
    if (entry == nullptr || entry->closure_size != h.closure_size || entry->result_size != 0) {
      refuse_member(call, i, count, "its function is not a registered plain call of that size");
    }
    fabric::invocation each{call.self, call.source, bytes.subspan(buffer_at, h.buffer_size), {},
                            nullptr};
    try {
      entry->invoke(bytes.data() + closure_at, each);
    } catch (...) {
      if (first == nullptr) {
        first = std::current_exception();
      } else {
        call.self->keep_exception(std::current_exception());
      }
    }
    at = end;
  }
  if (first != nullptr) std::rethrow_exception(first);
}

// The function a bundle's message names: its closure is the member count.
struct bundle_runner {
  static constexpr std::uint32_t result_bytes = 0;
  std::uint32_t count = 0;
  void operator()(fabric::invocation& call) const { run_members(call, count); }
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

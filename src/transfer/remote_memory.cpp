// RemoteMemoryLocator construction/validation and rkey resolution on an endpoint.
#include <fmt/format.h>

#include <cstring>
#include <seriema/base/error.hpp>
#include <seriema/transfer/remote_memory.hpp>
#include <seriema/transfer/ucx.hpp>

namespace seriema::transfer {

remote_memory_locator remote_memory_locator::make(int process, const registered_segment& segment,
                                                  const void* p, std::size_t n) {
  if (!segment.contains(p, n)) {
    throw error(fmt::format("remote_memory_locator: range {}+{} is outside its segment", p, n));
  }
  if (segment.packed_rkey.empty()) {
    throw error("remote_memory_locator: the memory is not registered with UCX");
  }
  if (segment.packed_rkey.size() > max_packed_rkey) {
    throw error(fmt::format(
        "remote_memory_locator: packed rkey of {} bytes exceeds the locator's {}-byte capacity "
        "(too many UCX memory domains; restrict UCX_TLS)",
        segment.packed_rkey.size(), max_packed_rkey));
  }
  remote_memory_locator locator;
  locator.process = process;
  locator.address = reinterpret_cast<std::uint64_t>(p);
  locator.size = n;
  locator.rkey_size = static_cast<std::uint16_t>(segment.packed_rkey.size());
  std::memcpy(locator.packed_rkey.data(), segment.packed_rkey.data(), segment.packed_rkey.size());
  return locator;
}

remote_memory_locator remote_memory_locator::make(int process, const registered_buffer& buffer) {
  if (buffer.segment == nullptr) throw error("remote_memory_locator: buffer has no segment");
  return make(process, *buffer.segment, buffer.data, buffer.size);
}

std::optional<remote_memory_locator> remote_memory_locator::slice(std::uint64_t offset,
                                                                  std::uint64_t n) const noexcept {
  if (offset > size || n > size - offset) return std::nullopt;
  remote_memory_locator out = *this;
  out.address += offset;
  out.size = n;
  return out;
}

std::string remote_memory_locator::to_string() const {
  return fmt::format("rank {}: {:#x}+{}", process, address, size);
}

remote_memory::remote_memory(ucx_endpoint& endpoint, const remote_memory_locator& locator,
                             bool allow_direct)
    : endpoint_(&endpoint), locator_(locator) {
  if (!locator.valid() || locator.rkey_size > remote_memory_locator::max_packed_rkey) {
    throw error(fmt::format("remote_memory: invalid locator ({})", locator.to_string()));
  }
  check_ucx(ucp_ep_rkey_unpack(endpoint.handle(), locator.packed_rkey.data(), &rkey_),
            "ucp_ep_rkey_unpack");
  if (allow_direct) {
    void* pointer = nullptr;
    if (ucp_rkey_ptr(rkey_, locator.address, &pointer) == UCS_OK) {
      direct_ = static_cast<std::byte*>(pointer);
    }
  }
}

remote_memory::~remote_memory() {
  if (rkey_ != nullptr) ucp_rkey_destroy(rkey_);
}

remote_memory::remote_memory(remote_memory&& other) noexcept
    : endpoint_(other.endpoint_), locator_(other.locator_), rkey_(other.rkey_),
      direct_(other.direct_) {
  other.rkey_ = nullptr;
  other.direct_ = nullptr;
}

remote_memory& remote_memory::operator=(remote_memory&& other) noexcept {
  if (this != &other) {
    if (rkey_ != nullptr) ucp_rkey_destroy(rkey_);
    endpoint_ = other.endpoint_;
    locator_ = other.locator_;
    rkey_ = other.rkey_;
    direct_ = other.direct_;
    other.rkey_ = nullptr;
    other.direct_ = nullptr;
  }
  return *this;
}

}  // namespace seriema::transfer

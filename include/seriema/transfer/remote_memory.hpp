// RemoteMemoryLocator: (process, address, size, packed rkey) as a plain value any process can
// hold, copy, send (it is trivially copyable, so it travels in lambda captures), and use for
// put/get/atomics after resolving it on an endpoint (remote_memory).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <seriema/transfer/memory.hpp>
#include <seriema/transfer/detail/ucx_forward.hpp>
#include <span>
#include <string>
#include <type_traits>

namespace seriema::transfer {

struct remote_memory_locator {
  // Packed rkeys of the transports we see are 11-60 bytes (tcp 11, shm 25); 184 leaves room for
  // RDMA NICs with several memory domains. A larger key is refused at make() with a clear error.
  static constexpr std::size_t max_packed_rkey = 184;

  std::int32_t process = -1;  // global process rank that owns the memory
  std::uint16_t rkey_size = 0;
  std::uint16_t reserved = 0;
  std::uint64_t address = 0;  // address in the owner's address space
  std::uint64_t size = 0;
  std::array<std::byte, max_packed_rkey> packed_rkey{};

  // Locator for [p, p+n) inside `segment`, owned by `process`. Throws seriema::error when the
  // range is outside the segment, the segment is not registered, or the rkey does not fit.
  static remote_memory_locator make(int process, const registered_segment& segment, const void* p,
                                    std::size_t n);
  static remote_memory_locator make(int process, const registered_buffer& buffer);

  [[nodiscard]] bool valid() const noexcept { return process >= 0 && rkey_size > 0; }
  // The sub-range [offset, offset+n), or nullopt when it is not inside this one.
  [[nodiscard]] std::optional<remote_memory_locator> slice(std::uint64_t offset,
                                                           std::uint64_t n) const noexcept;
  [[nodiscard]] std::span<const std::byte> rkey() const noexcept {
    return {packed_rkey.data(), rkey_size};
  }
  [[nodiscard]] std::string to_string() const;  // "rank 1: 0x7f..+4096"
};
static_assert(std::is_trivially_copyable_v<remote_memory_locator>,
              "remote_memory_locator must stay a plain value so it can be sent anywhere");

// A locator resolved on one endpoint: the unpacked rkey, and a direct pointer when the memory is
// mappable from this process (same machine, UCX-allocated shm) and direct access is allowed.
// Thread-safety: immutable after construction; may be used by any thread using the endpoint.
class remote_memory {
 public:
  // allow_direct: false forces the put/get path even if ucp_rkey_ptr would succeed (the caller
  // knows the owner is on another machine, or wants to measure the RDMA path).
  remote_memory(ucx_endpoint& endpoint, const remote_memory_locator& locator, bool allow_direct);
  ~remote_memory();
  remote_memory(remote_memory&& other) noexcept;
  remote_memory& operator=(remote_memory&& other) noexcept;
  remote_memory(const remote_memory&) = delete;
  remote_memory& operator=(const remote_memory&) = delete;

  [[nodiscard]] const remote_memory_locator& locator() const noexcept { return locator_; }
  [[nodiscard]] ucp_rkey* rkey() const noexcept { return rkey_; }  // ucp_rkey_h
  [[nodiscard]] ucx_endpoint& endpoint() const noexcept { return *endpoint_; }
  [[nodiscard]] std::uint64_t address() const noexcept { return locator_.address; }
  [[nodiscard]] std::uint64_t size() const noexcept { return locator_.size; }
  // Non-null when the remote bytes can be read/written with plain loads and stores.
  [[nodiscard]] std::byte* direct() const noexcept { return direct_; }
  // Overflow-safe: offset + n <= size.
  [[nodiscard]] bool contains(std::uint64_t offset, std::uint64_t n) const noexcept {
    return offset <= locator_.size && n <= locator_.size - offset;
  }

 private:
  ucx_endpoint* endpoint_;
  remote_memory_locator locator_;
  ucp_rkey* rkey_ = nullptr;
  std::byte* direct_ = nullptr;
};

}  // namespace seriema::transfer

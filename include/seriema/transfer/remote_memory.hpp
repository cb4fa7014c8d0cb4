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

/// Where a range of registered memory lives: owner rank, address, size and packed rkey. A plain,
/// trivially copyable value; resolve it on an endpoint (remote_memory) to access the memory.
struct remote_memory_locator {
  /// Packed rkeys of the transports we see are 11-60 bytes (tcp 11, shm 25); 184 leaves room for
  /// RDMA NICs with several memory domains. A larger key is refused at make() with a clear error.
  static constexpr std::size_t max_packed_rkey = 184;

  std::int32_t process = -1;  ///< global process rank that owns the memory
  std::uint16_t rkey_size = 0;  ///< bytes of packed_rkey in use; 0: invalid locator
  std::uint16_t reserved = 0;   ///< padding, always 0
  std::uint64_t address = 0;    ///< address in the owner's address space
  std::uint64_t size = 0;       ///< bytes
  std::array<std::byte, max_packed_rkey> packed_rkey{};  ///< the packed rkey (rkey_size bytes)

  /// Locator for [p, p+n) inside `segment`, owned by `process`. Throws seriema::error when the
  /// range is outside the segment, the segment is not registered, or the rkey does not fit.
  static remote_memory_locator make(int process, const registered_segment& segment, const void* p,
                                    std::size_t n);
  /// Locator for the whole of `buffer`. Throws seriema::error as above, or when the buffer has no
  /// segment.
  static remote_memory_locator make(int process, const registered_buffer& buffer);

  /// True when it names a process and carries an rkey (a default-constructed locator does not).
  [[nodiscard]] bool valid() const noexcept { return process >= 0 && rkey_size > 0; }
  /// The sub-range [offset, offset+n), or nullopt when it is not inside this one.
  [[nodiscard]] std::optional<remote_memory_locator> slice(std::uint64_t offset,
                                                           std::uint64_t n) const noexcept;
  /// The packed rkey bytes in use.
  [[nodiscard]] std::span<const std::byte> rkey() const noexcept {
    return {packed_rkey.data(), rkey_size};
  }
  [[nodiscard]] std::string to_string() const;  ///< "rank 1: 0x7f..+4096"
};
static_assert(std::is_trivially_copyable_v<remote_memory_locator>,
              "remote_memory_locator must stay a plain value so it can be sent anywhere");

/// A locator resolved on one endpoint: the unpacked rkey, and a direct pointer when the memory is
/// mappable from this process (same machine, UCX-allocated shm) and direct access is allowed.
/// Thread-safety: immutable after construction; may be used by any thread using the endpoint.
class remote_memory {
 public:
  /// allow_direct: false forces the put/get path even if ucp_rkey_ptr would succeed (the caller
  /// knows the owner is on another machine, or wants to measure the RDMA path).
  /// Throws seriema::error for an invalid locator, ucx_error when UCX cannot unpack the rkey.
  remote_memory(ucx_endpoint& endpoint, const remote_memory_locator& locator, bool allow_direct);
  ~remote_memory();  ///< destroys the unpacked rkey
  /// Takes over `other`'s rkey; `other` is left without one (only destructible or assignable).
  remote_memory(remote_memory&& other) noexcept;
  /// Destroys this rkey, then takes over `other`'s.
  remote_memory& operator=(remote_memory&& other) noexcept;
  remote_memory(const remote_memory&) = delete;
  remote_memory& operator=(const remote_memory&) = delete;

  /// The locator this was resolved from.
  [[nodiscard]] const remote_memory_locator& locator() const noexcept { return locator_; }
  /// The unpacked rkey (a ucp_rkey_h), valid on endpoint() only.
  [[nodiscard]] ucp_rkey* rkey() const noexcept { return rkey_; }
  /// The endpoint the rkey was unpacked on.
  [[nodiscard]] ucx_endpoint& endpoint() const noexcept { return *endpoint_; }
  /// Start address in the owner's address space.
  [[nodiscard]] std::uint64_t address() const noexcept { return locator_.address; }
  /// Bytes.
  [[nodiscard]] std::uint64_t size() const noexcept { return locator_.size; }
  /// Non-null when the remote bytes can be read/written with plain loads and stores.
  [[nodiscard]] std::byte* direct() const noexcept { return direct_; }
  /// Overflow-safe: offset + n <= size.
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

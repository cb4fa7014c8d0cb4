// How one pipe end writes into the other end's region: fabric's region_publisher (direct stores,
// put + fence + put, or one write message), with the pipe's protocol choice and statuses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <seriema/fabric/detail/region_publisher.hpp>
#include <seriema/pipe/pipe.hpp>
#include <span>

namespace seriema::pipe::detail {

using fabric::detail::publish_path;
using fabric::detail::to_string;

/// A region_publisher for one pipe end (owner thread only): `cells` is the pipe's width. The
/// pipe's protocol guarantees the region_publisher's rule (a range is reused only after the peer
/// handed it back). Each call is region_publisher's, its status as a pipe_status (pending:
/// empty).
class publisher {
 public:
  /// Picks the path from `protocol` (see write_protocol). Throws seriema::error when the
  /// locator cannot be resolved.
  publisher(fabric::thread_context& ctx, const transfer::remote_memory_locator& region,
            write_protocol protocol, std::uint32_t cells);

  [[nodiscard]] publish_path path() const noexcept { return out_.path(); }
  [[nodiscard]] std::byte* direct() const noexcept { return out_.direct(); }
  [[nodiscard]] pipe_status publish(std::span<const std::byte> data, std::uint64_t data_offset,
                                    std::uint64_t word_offset, std::uint64_t word) {
    return from(out_.publish(data, data_offset, word_offset, word));
  }
  [[nodiscard]] pipe_status fetch(std::span<std::byte> into, std::uint64_t offset,
                                  fabric::deadline_clock::time_point deadline) {
    return from(out_.fetch(into, offset, deadline));
  }
  [[nodiscard]] pipe_status start_fetch(std::span<std::byte> into, std::uint64_t offset,
                                        transfer::completion_tag& in_flight) {
    return from(out_.start_fetch(into, offset, in_flight));
  }
  [[nodiscard]] bool free_cells(std::size_t publications) const noexcept {
    return out_.free_cells(publications);
  }
  [[nodiscard]] pipe_status fetch_state(const transfer::completion_tag& in_flight) const noexcept {
    return from(out_.fetch_state(in_flight));
  }
  bool drain(fabric::deadline_clock::time_point deadline) { return out_.drain(deadline); }

 private:
  static pipe_status from(fabric::detail::publish_status status) noexcept;

  fabric::detail::region_publisher out_;
};

}  // namespace seriema::pipe::detail

// publisher: the pipe's choice of path and its statuses over fabric's region_publisher.
#include "publisher.hpp"

#include <seriema/fabric/runtime.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/transfer/ucx.hpp>

namespace seriema::pipe::detail {

namespace {

fabric::detail::publish_route route_of(fabric::thread_context& ctx, write_protocol protocol) {
  // data_then_flag goes through UCX even on one machine; one_operation sends one write message
  // where the region is not mapped; automatic puts only where the network has RDMA.
  const bool by_put = protocol == write_protocol::data_then_flag ||
                      (protocol == write_protocol::automatic && ctx.rt().context().network_rdma());
  return {protocol != write_protocol::data_then_flag, by_put};
}

}  // namespace

publisher::publisher(fabric::thread_context& ctx, const transfer::remote_memory_locator& region,
                     write_protocol protocol, std::uint32_t cells)
    : out_(ctx, region, route_of(ctx, protocol), cells) {}

pipe_status publisher::from(fabric::detail::publish_status status) noexcept {
  switch (status) {
    case fabric::detail::publish_status::ok:
      return pipe_status::ok;
    case fabric::detail::publish_status::pending:
      return pipe_status::empty;
    case fabric::detail::publish_status::peer_failed:
      return pipe_status::peer_failed;
    case fabric::detail::publish_status::deadline_exceeded:
      return pipe_status::deadline_exceeded;
    case fabric::detail::publish_status::error:
      return pipe_status::error;
  }
  return pipe_status::error;
}

}  // namespace seriema::pipe::detail

// How publications into another machine's memory travel, as SERIEMA_REMOTE_PUBLISH chooses:
// one answer for the messengers, group members and shared spaces that all publish that way.
#pragma once

#include <seriema/invoke/channel.hpp>

namespace seriema::invoke::detail {

/// Whether publications to another machine go by put + fence + put (`choice` put, or automatic
/// where the UCX context has an RDMA network: `network_rdma`) rather than by one write message.
inline bool publishes_by_put(remote_publish choice, bool network_rdma) noexcept {
  return choice == remote_publish::put || (choice == remote_publish::automatic && network_rdma);
}

/// The same for the SERIEMA_REMOTE_PUBLISH setting of the environment.
inline bool publishes_by_put_from_environment(bool network_rdma) {
  return publishes_by_put(messenger_options::from_environment().publish_remote, network_rdma);
}

}  // namespace seriema::invoke::detail

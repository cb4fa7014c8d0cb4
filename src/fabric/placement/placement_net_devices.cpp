// The network devices of each process: candidates by locality (own zone, else unknown locality,
// else every device of the kind), shared out among the processes with the same candidates.
#include "placement/placement_net_devices.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <seriema/base/error.hpp>

namespace seriema::fabric::detail {
namespace {

using net_device = machine_topology::net_device;

// Indexes (into topology.net_devices) of the devices of `kind` a process on `zone` may use.
std::vector<std::size_t> candidates_for(const machine_topology& topology, net_device_kind kind,
                                        int zone) {
  std::vector<std::size_t> own, unknown, all;
  for (std::size_t d = 0; d < topology.net_devices.size(); ++d) {
    const net_device& device = topology.net_devices[d];
    if (device.kind != kind) continue;
    all.push_back(d);
    if (device.zone == zone) own.push_back(d);
    if (device.zone < 0) unknown.push_back(d);
  }
  if (!own.empty()) return own;
  if (!unknown.empty()) return unknown;
  return all;
}

// Appends to each process's list its share of the devices of `kind` (see class placement).
void share_out(const machine_topology& topology, net_device_kind kind,
               const std::vector<int>& zones, std::vector<std::vector<std::string>>& lists) {
  std::vector<std::vector<std::size_t>> candidates;
  std::map<std::vector<std::size_t>, int> group_size;  // candidate set -> processes having it
  for (int zone : zones) {
    candidates.push_back(candidates_for(topology, kind, zone));
    ++group_size[candidates.back()];
  }
  std::map<std::vector<std::size_t>, int> seen;  // candidate set -> processes handled so far
  for (std::size_t p = 0; p < zones.size(); ++p) {
    const std::vector<std::size_t>& mine = candidates[p];
    if (mine.empty()) continue;
    const std::size_t k = static_cast<std::size_t>(group_size[mine]);
    const std::size_t j = static_cast<std::size_t>(seen[mine]++);
    const std::size_t n = mine.size();
    for (std::size_t c = 0; c < n; ++c) {
      const bool taken = n <= k ? c == j % n : c % k == j;
      if (taken) lists[p].push_back(topology.net_devices[mine[c]].name);
    }
  }
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ",") + name;
  return out;
}

}  // namespace

std::vector<std::vector<std::string>> choose_net_devices(const machine_topology& topology,
                                                         const std::vector<int>& zones,
                                                         const placement_options& options) {
  std::vector<std::vector<std::string>> lists(zones.size());
  if (!options.user_ucx_net_devices.empty()) return lists;
  switch (options.net_devices.mode) {
    case net_device_selection::policy::none:
      return lists;
    case net_device_selection::policy::list:
      std::fill(lists.begin(), lists.end(), options.net_devices.names);
      return lists;
    case net_device_selection::policy::automatic:
      break;
  }
  // RDMA ports first: UCX_NET_DEVICES is a set, but the order makes the lists read best-first.
  share_out(topology, net_device_kind::openfabrics, zones, lists);
  share_out(topology, net_device_kind::network, zones, lists);
  return lists;
}

std::string net_device_rule(const machine_topology& topology, const placement_options& options) {
  const bool listed = options.net_devices.mode == net_device_selection::policy::list;
  if (!options.user_ucx_net_devices.empty()) {
    if (listed) {
      throw config_error(fmt::format(
          "SERIEMA_NET_DEVICES={} and UCX_NET_DEVICES={} both name network devices; set only "
          "one of them",
          joined(options.net_devices.names), options.user_ucx_net_devices));
    }
    return fmt::format("UCX_NET_DEVICES={} set by the user: left to UCX",
                       options.user_ucx_net_devices);
  }
  switch (options.net_devices.mode) {
    case net_device_selection::policy::none:
      return "left to UCX (SERIEMA_NET_DEVICES=none)";
    case net_device_selection::policy::list:
      return fmt::format("{} for every process (SERIEMA_NET_DEVICES)",
                         joined(options.net_devices.names));
    case net_device_selection::policy::automatic:
      break;
  }
  if (topology.net_devices.empty()) return "left to UCX: hwloc reports no usable network device";
  return "nearest to each process's zone (SERIEMA_NET_DEVICES=auto)";
}

void check_net_devices(const machine_topology& topology) {
  for (const net_device& device : topology.net_devices) {
    if (device.name.empty()) throw error("placement: a network device of the topology has no name");
    if (device.zone < 0) continue;
    const bool known = std::any_of(
        topology.zones.begin(), topology.zones.end(),
        [&device](const machine_topology::zone& z) { return z.os_index == device.zone; });
    if (!known) {
      throw error(fmt::format("placement: network device {} is attached to zone {}, which the "
                              "topology does not have",
                              device.name, device.zone));
    }
  }
}

}  // namespace seriema::fabric::detail

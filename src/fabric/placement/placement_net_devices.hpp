// Which network devices each process of one machine restricts UCX to (the rule is in the
// comment of class placement): a pure function of the topology, the processes' zones and the
// options; no hwloc, no UCX.
#pragma once

#include <seriema/fabric/placement.hpp>
#include <string>
#include <vector>

namespace seriema::fabric::detail {

// The device lists of a machine's processes (zones: each local process's zone, an OS index)
// under options.net_devices and options.user_ucx_net_devices; empty lists leave UCX's choice.
std::vector<std::vector<std::string>> choose_net_devices(const machine_topology& topology,
                                                         const std::vector<int>& zones,
                                                         const placement_options& options);

// One line saying how the lists were chosen (placement::net_device_rule). Throws config_error
// when SERIEMA_NET_DEVICES names devices and the user set UCX_NET_DEVICES as well.
std::string net_device_rule(const machine_topology& topology, const placement_options& options);

// Throws seriema::error when a device of `topology` has no name or names a zone that does not
// exist (placement checks the topology it is given).
void check_net_devices(const machine_topology& topology);

}  // namespace seriema::fabric::detail

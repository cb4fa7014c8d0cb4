// Tests for network-device placement: synthetic machines with NICs on zones (two NICs on two
// zones, shared and unknown locality, both kinds), SERIEMA_NET_DEVICES parsing, a user-set
// UCX_NET_DEVICES, and the devices hwloc reports on the real machine.
#include <gtest/gtest.h>

#include <seriema/base/error.hpp>
#include <seriema/fabric/placement.hpp>
#include <string>
#include <vector>

namespace seriema::fabric {
namespace {

using names = std::vector<std::string>;

// Two zones of 4 cores, one RDMA port on each zone.
machine_topology two_nics_on_two_zones() {
  machine_topology topology = machine_topology::uniform(2, 4, 1);
  topology.add_net_device("mlx5_0:1", net_device_kind::openfabrics, 0);
  topology.add_net_device("mlx5_1:1", net_device_kind::openfabrics, 1);
  return topology;
}

// The device lists of every process of a one-machine job of `processes` x 1 thread.
std::vector<names> lists_of(const machine_topology& topology, int processes,
                            const placement_options& options = {}) {
  placement p(topology, std::vector<int>{processes}, 1, options);
  std::vector<names> out;
  for (int r = 0; r < processes; ++r) out.push_back(p.net_devices(r));
  return out;
}

TEST(NetDevices, TwoProcessesTakeTheNicOfTheirZone) {
  EXPECT_EQ(lists_of(two_nics_on_two_zones(), 2),
            (std::vector<names>{{"mlx5_0:1"}, {"mlx5_1:1"}}));
}

TEST(NetDevices, FourProcessesOnTwoZonesShareTheirZonesNic) {
  EXPECT_EQ(lists_of(two_nics_on_two_zones(), 4),
            (std::vector<names>{{"mlx5_0:1"}, {"mlx5_0:1"}, {"mlx5_1:1"}, {"mlx5_1:1"}}));
}

TEST(NetDevices, OneProcessPerMachineUsesTheNicOfItsZoneOnly) {
  EXPECT_EQ(lists_of(two_nics_on_two_zones(), 1), (std::vector<names>{{"mlx5_0:1"}}));
}

TEST(NetDevices, EveryMachineOfTheJobGetsTheSameChoice) {
  placement p(two_nics_on_two_zones(), job_shape{2, 2, 1}, {});
  EXPECT_EQ(p.net_devices(0), names{"mlx5_0:1"});
  EXPECT_EQ(p.net_devices(1), names{"mlx5_1:1"});
  EXPECT_EQ(p.net_devices(2), names{"mlx5_0:1"});
  EXPECT_EQ(p.net_devices(3), names{"mlx5_1:1"});
}

TEST(NetDevices, SeveralNicsOfOneZoneAreSharedOutAmongItsProcesses) {
  machine_topology topology = machine_topology::uniform(1, 4, 1);
  topology.add_net_device("mlx5_0:1", net_device_kind::openfabrics, 0);
  topology.add_net_device("mlx5_1:1", net_device_kind::openfabrics, 0);
  topology.add_net_device("mlx5_2:1", net_device_kind::openfabrics, 0);
  // Fewer processes than NICs: disjoint sets that use every NIC.
  EXPECT_EQ(lists_of(topology, 2), (std::vector<names>{{"mlx5_0:1", "mlx5_2:1"}, {"mlx5_1:1"}}));
  EXPECT_EQ(lists_of(topology, 1), (std::vector<names>{{"mlx5_0:1", "mlx5_1:1", "mlx5_2:1"}}));
  // More processes than NICs: one each, round robin.
  EXPECT_EQ(lists_of(topology, 4),
            (std::vector<names>{{"mlx5_0:1"}, {"mlx5_1:1"}, {"mlx5_2:1"}, {"mlx5_0:1"}}));
}

TEST(NetDevices, ZoneWithoutANicTakesTheOneOfUnknownLocality) {
  machine_topology topology = machine_topology::uniform(2, 4, 1);
  topology.add_net_device("mlx5_0:1", net_device_kind::openfabrics, 0);
  topology.add_net_device("mlx5_9:1", net_device_kind::openfabrics, -1);
  EXPECT_EQ(lists_of(topology, 2), (std::vector<names>{{"mlx5_0:1"}, {"mlx5_9:1"}}));
}

TEST(NetDevices, OnlyUnknownLocalityIsSharedByAllZones) {
  machine_topology topology = machine_topology::uniform(2, 4, 1);
  topology.add_net_device("eth0", net_device_kind::network, -1);
  topology.add_net_device("eth1", net_device_kind::network, -1);
  // Same candidates for all four: shared out among all of them, not per zone.
  EXPECT_EQ(lists_of(topology, 4),
            (std::vector<names>{{"eth0"}, {"eth1"}, {"eth0"}, {"eth1"}}));
}

TEST(NetDevices, ZoneWithoutANicFallsBackToTheOtherZones) {
  machine_topology topology = machine_topology::uniform(2, 4, 1);
  topology.add_net_device("mlx5_0:1", net_device_kind::openfabrics, 0);
  EXPECT_EQ(lists_of(topology, 2), (std::vector<names>{{"mlx5_0:1"}, {"mlx5_0:1"}}));
}

TEST(NetDevices, EachKindIsChosenSeparatelyRdmaFirst) {
  machine_topology topology = machine_topology::uniform(2, 4, 1);
  topology.add_net_device("eth0", net_device_kind::network, 0);
  topology.add_net_device("mlx5_0:1", net_device_kind::openfabrics, 0);
  topology.add_net_device("eth1", net_device_kind::network, 1);
  topology.add_net_device("mlx5_1:1", net_device_kind::openfabrics, 1);
  EXPECT_EQ(lists_of(topology, 2),
            (std::vector<names>{{"mlx5_0:1", "eth0"}, {"mlx5_1:1", "eth1"}}));
}

TEST(NetDevices, MachineWithoutDevicesLeavesUcxToChoose) {
  machine_topology topology = machine_topology::uniform(2, 4, 1);
  placement p(topology, std::vector<int>{2}, 1, {});
  EXPECT_TRUE(p.net_devices(0).empty());
  EXPECT_TRUE(p.net_devices(1).empty());
  EXPECT_NE(p.net_device_rule().find("no usable network device"), std::string::npos)
      << p.net_device_rule();
}

TEST(NetDevices, NoneLeavesUcxToChoose) {
  placement_options options;
  options.net_devices = net_device_selection::parse("none");
  placement p(two_nics_on_two_zones(), std::vector<int>{2}, 1, options);
  EXPECT_TRUE(p.net_devices(0).empty());
  EXPECT_TRUE(p.net_devices(1).empty());
  EXPECT_NE(p.net_device_rule().find("SERIEMA_NET_DEVICES=none"), std::string::npos);
}

TEST(NetDevices, ExplicitListGoesToEveryProcess) {
  placement_options options;
  options.net_devices = net_device_selection::parse("mlx5_1:1,eth0");
  EXPECT_EQ(lists_of(two_nics_on_two_zones(), 2, options),
            (std::vector<names>{{"mlx5_1:1", "eth0"}, {"mlx5_1:1", "eth0"}}));
}

TEST(NetDevices, UserSetUcxNetDevicesIsRespected) {
  placement_options options;
  options.user_ucx_net_devices = "mlx5_1:1";
  placement p(two_nics_on_two_zones(), std::vector<int>{2}, 1, options);
  EXPECT_TRUE(p.net_devices(0).empty());
  EXPECT_TRUE(p.net_devices(1).empty());
  EXPECT_EQ(p.net_device_rule(), "UCX_NET_DEVICES=mlx5_1:1 set by the user: left to UCX");
  EXPECT_NE(p.describe().find("net devices: UCX_NET_DEVICES=mlx5_1:1 set by the user"),
            std::string::npos)
      << p.describe();
}

TEST(NetDevices, ListInBothSettingsIsRefused) {
  placement_options options;
  options.user_ucx_net_devices = "mlx5_1:1";
  options.net_devices = net_device_selection::parse("eth0");
  try {
    placement p(two_nics_on_two_zones(), std::vector<int>{2}, 1, options);
    FAIL() << "expected config_error";
  } catch (const config_error& e) {
    EXPECT_NE(std::string(e.what()).find("SERIEMA_NET_DEVICES=eth0"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("UCX_NET_DEVICES=mlx5_1:1"), std::string::npos);
  }
}

TEST(NetDevices, DescribeShowsTheRuleAndEveryProcessesDevices) {
  placement p(two_nics_on_two_zones(), std::vector<int>{2}, 1, {});
  const std::string text = p.describe();
  EXPECT_NE(text.find("net devices: nearest to each process's zone"), std::string::npos) << text;
  EXPECT_NE(text.find("process 0: net devices mlx5_0:1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("process 1: net devices mlx5_1:1\n"), std::string::npos) << text;
}

TEST(NetDevices, TopologyDescriptionNamesTheDevices) {
  const machine_topology topology = two_nics_on_two_zones();
  EXPECT_EQ(topology.description,
            "2 zones, 8 cores, 8 PUs, 2 network devices: mlx5_0:1 (zone 0) mlx5_1:1 (zone 1)");
  EXPECT_EQ(machine_topology::uniform(1, 2, 1).description,
            "1 zone, 2 cores, 2 PUs, no network device known");
}

TEST(NetDevices, DeviceOnAZoneThatDoesNotExistIsRejected) {
  machine_topology topology = machine_topology::uniform(2, 4, 1);
  EXPECT_THROW(topology.add_net_device("mlx5_0:1", net_device_kind::openfabrics, 5), error);
  EXPECT_THROW(topology.add_net_device("", net_device_kind::network, 0), error);
  EXPECT_TRUE(topology.net_devices.empty());
  topology.net_devices.push_back({"eth7", net_device_kind::network, 3});  // built by hand
  EXPECT_THROW(placement(topology, std::vector<int>{1}, 1, {}), error);
}

// ------------------------------------------------------------------------------------------
// SERIEMA_NET_DEVICES

TEST(NetDeviceSelection, ParsesKeywordsAndLists) {
  EXPECT_EQ(net_device_selection::parse("").mode, net_device_selection::policy::automatic);
  EXPECT_EQ(net_device_selection::parse(" auto ").mode, net_device_selection::policy::automatic);
  EXPECT_EQ(net_device_selection::parse("none").mode, net_device_selection::policy::none);
  const auto listed = net_device_selection::parse("mlx5_0:1, eth0 ,ib0.8001");
  EXPECT_EQ(listed.mode, net_device_selection::policy::list);
  EXPECT_EQ(listed.names, (names{"mlx5_0:1", "eth0", "ib0.8001"}));
}

TEST(NetDeviceSelection, RejectsMalformedListsNamingTheSetting) {
  for (const char* text : {",eth0", "eth0,", "eth0,,eth1", "eth 0", "eth0;eth1", "none,eth0",
                           "auto,eth0", "mlx5_0:1/x"}) {
    try {
      (void)net_device_selection::parse(text);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const config_error& e) {
      EXPECT_NE(std::string(e.what()).find("SERIEMA_NET_DEVICES="), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("expected auto, none"), std::string::npos) << e.what();
    }
  }
}

// ------------------------------------------------------------------------------------------
// The real machine

TEST(NetDevicesRealMachine, DetectedDevicesAreNamedAndOnKnownZones) {
  const machine_topology topology = machine_topology::detect();
  for (const auto& device : topology.net_devices) {
    EXPECT_FALSE(device.name.empty());
    if (device.kind == net_device_kind::openfabrics) {
      EXPECT_NE(device.name.find(':'), std::string::npos) << device.name;  // device:port
    }
    bool zone_known = device.zone == -1;
    for (const auto& zone : topology.zones) zone_known = zone_known || zone.os_index == device.zone;
    EXPECT_TRUE(zone_known) << device.name << " on zone " << device.zone;
  }
  // The automatic choice gives every process a device whenever the machine has one.
  placement p(topology, std::vector<int>{2}, 1, {});
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(p.net_devices(r).empty(), topology.net_devices.empty()) << p.describe();
  }
  std::cout << "this machine: " << topology.description << "\n" << p.describe();
}

}  // namespace
}  // namespace seriema::fabric

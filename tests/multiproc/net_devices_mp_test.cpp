// Network-device placement in real jobs (shm, tcp, 2 emulated machines): each process's UCX
// context is restricted to the devices its placement chose (or to SERIEMA_NET_DEVICES), UCX's
// network resources are on those devices only, a list UCX cannot use falls back to UCX's own
// choice, and calls flow between every pair of threads either way.
// Usage: net_devices_mp_test [--expect-devices=auto|<comma list>|<empty>] [gtest flags]
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/transfer/ucx.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "support/mp_main.hpp"

using namespace seriema;
using fabric::call_status;
using fabric::thread_context;

namespace {

// What the runtime must report: "auto" = its placement's choice; otherwise this list.
std::string expected_devices = "auto";

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::string_view rest = list;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    out.emplace_back(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
  return out;
}

// UCX's resources on network devices ("tcp/eth0"): every one whose device is not memory.
std::vector<std::string> network_resources() {
  std::vector<std::string> out;
  for (const auto& resource : transfer::ucx_available_transports(test::rt().context())) {
    const std::string device = resource.substr(resource.find('/') + 1);
    if (!device.starts_with("memory")) out.push_back(resource);
  }
  return out;
}

}  // namespace

TEST(NetDevicesMp, RuntimeAppliedTheExpectedDevices) {
  auto& rt = test::rt();
  ASSERT_EQ(std::getenv("UCX_NET_DEVICES"), nullptr) << "this test chooses the devices itself";
  const auto& chosen = rt.placement().net_devices(rt.rank());
  if (expected_devices == "auto") {
    EXPECT_EQ(rt.net_devices(), chosen) << rt.placement().describe();
    // A machine with a usable device gives every process one.
    const bool known = !fabric::machine_topology::detect().net_devices.empty();
    EXPECT_EQ(chosen.empty(), !known) << rt.placement().describe();
  } else {
    EXPECT_EQ(rt.net_devices(), split(expected_devices)) << rt.placement().net_device_rule();
  }
}

TEST(NetDevicesMp, UcxNetworkResourcesAreOnTheAppliedDevicesOnly) {
  const auto& applied = test::rt().net_devices();
  if (applied.empty()) GTEST_SKIP() << "UCX chose the devices (nothing to check here)";
  for (const auto& resource : network_resources()) {
    const std::string device = resource.substr(resource.find('/') + 1);
    EXPECT_NE(std::find(applied.begin(), applied.end(), device), applied.end())
        << resource << " is outside the applied devices";
  }
}

TEST(NetDevicesMp, CallsFlowBetweenEveryPairOfThreads) {
  std::atomic<int> errors{0};
  test::rt().run([&errors](thread_context& ctx) {
    for (fabric::thread_id dest = 0; dest < ctx.thread_count(); ++dest) {
      const std::uint64_t x = 11 * ctx.id() + 5;
      fabric::return_slot<std::uint64_t> slot;
      if (ctx.call_return(dest, [x](thread_context& self) { return x * 1000 + self.id(); },
                          slot) != call_status::ok) {
        errors += 1;
        continue;
      }
      ctx.wait_for(slot);
      if (!slot.ready() || slot.value() != x * 1000 + dest) errors += 1;
    }
  });
  EXPECT_EQ(errors.load(), 0);
}

int main(int argc, char** argv) {
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with("--expect-devices=")) {
      expected_devices = std::string(arg.substr(std::string_view("--expect-devices=").size()));
    } else {
      rest.push_back(argv[i]);
    }
  }
  int count = static_cast<int>(rest.size());
  return seriema::test::run_all_tests(count, rest.data());
}

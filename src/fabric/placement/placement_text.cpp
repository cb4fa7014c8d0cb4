// The text of placement: helpers for numbers, nouns and labels; parsing job shapes (MxPxT) and
// the placement settings.
#include "placement/placement_text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <seriema/base/error.hpp>
#include <seriema/base/settings.hpp>
#include <seriema/fabric/detail/settings.hpp>
#include <system_error>

namespace seriema::fabric {
namespace detail {

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  return text;
}

std::string counted(long long n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

std::string join(const std::vector<int>& values, std::string_view separator) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i != 0) out += separator;
    out += std::to_string(values[i]);
  }
  return out;
}

std::optional<int> parse_positive(std::string_view text) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text.front()))) return std::nullopt;
  int value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || ptr != text.data() + text.size() || value < 1) return std::nullopt;
  return value;
}

std::string topology_counts(const machine_topology& topology) {
  std::string out = fmt::format(
      "{}, {}, {}", counted(static_cast<long long>(topology.zones.size()), "zone", "zones"),
      counted(topology.core_count(), "core", "cores"), counted(topology.pu_count(), "PU", "PUs"));
  if (topology.net_devices.empty()) return out + ", no network device known";
  out += fmt::format(", {}:", counted(static_cast<long long>(topology.net_devices.size()),
                                      "network device", "network devices"));
  for (const auto& device : topology.net_devices) {
    out += device.zone < 0 ? fmt::format(" {} (zone unknown)", device.name)
                           : fmt::format(" {} (zone {})", device.name, device.zone);
  }
  return out;
}

std::string machines_label(const std::vector<int>& machines) {
  if (machines.size() == 1) return fmt::format("machine {}", machines.front());
  bool contiguous = machines.back() - machines.front() + 1 == static_cast<int>(machines.size());
  if (contiguous) return fmt::format("machines {}-{}", machines.front(), machines.back());
  if (machines.size() <= 8) return fmt::format("machines {}", join(machines));
  return fmt::format("machines {},... ({} in all)", machines.front(), machines.size());
}

std::string zone_choices(const machine_topology& topology) {
  std::vector<int> zones;
  for (const auto& zone : topology.zones) zones.push_back(zone.os_index);
  bool contiguous = true;
  for (std::size_t i = 1; i < zones.size(); ++i)
    contiguous = contiguous && zones[i] == zones[i - 1] + 1;
  std::string choose = contiguous
                           ? fmt::format("choose zones in {}..{}", zones.front(), zones.back())
                           : fmt::format("choose zones among {}", join(zones));
  return fmt::format("this machine has {} NUMA {} ({}); {}", zones.size(),
                     zones.size() == 1 ? "zone" : "zones", join(zones), choose);
}

}  // namespace detail

using detail::parse_positive;
using detail::trim;

// -----------------------------------------------------------------------------------------------
// job_shape

job_shape job_shape::parse(std::string_view text) {
  auto fail = [&]() {
    return config_error(
        fmt::format("placement '{}': expected T, PxT or MxPxT with positive integers", text));
  };
  std::vector<int> parts;
  std::string_view rest = trim(text);
  while (true) {
    std::size_t x = rest.find_first_of("xX");
    auto value = parse_positive(rest.substr(0, x));
    if (!value) throw fail();
    parts.push_back(*value);
    if (x == std::string_view::npos) break;
    rest.remove_prefix(x + 1);
  }
  if (parts.size() > 3) throw fail();
  job_shape shape;
  shape.threads_per_process = parts.back();
  if (parts.size() >= 2) shape.processes_per_machine = parts[parts.size() - 2];
  if (parts.size() == 3) shape.machines = parts[0];
  return shape;
}

std::string job_shape::to_string() const {
  return fmt::format("{}x{}x{}", machines, processes_per_machine, threads_per_process);
}

// -----------------------------------------------------------------------------------------------
// placement_options

std::vector<int> placement_options::parse_process_zones(std::string_view text) {
  std::string_view list = trim(text);
  std::string lowered(list);
  std::transform(lowered.begin(), lowered.end(), lowered.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lowered.empty() || lowered == "auto") return {};
  std::vector<int> zones;
  std::string_view rest = list;
  while (true) {
    std::size_t comma = rest.find(',');
    std::string_view item = trim(rest.substr(0, comma));
    int value = 0;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || !std::isdigit(static_cast<unsigned char>(item.front())) ||
        ec != std::errc{} || ptr != item.data() + item.size()) {
      throw config_error(fmt::format(
          "SERIEMA_PROCESS_ZONES={}: expected auto or a comma list of NUMA zone numbers such as "
          "0,1",
          list));
    }
    zones.push_back(value);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return zones;
}

// -----------------------------------------------------------------------------------------------
// net_device_selection

net_device_selection net_device_selection::parse(std::string_view text) {
  const std::string_view list = trim(text);
  if (list.empty() || list == "auto") return {};
  if (list == "none") return {policy::none, {}};
  net_device_selection out{policy::list, {}};
  std::string_view rest = list;
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = trim(rest.substr(0, comma));
    // UCX device names are interface names or "device:port": letters, digits, '_', '-', '.', ':'.
    const bool plain = std::all_of(item.begin(), item.end(), [](unsigned char c) {
      return std::isalnum(c) || c == '_' || c == '-' || c == '.' || c == ':';
    });
    if (item.empty() || !plain || item == "auto" || item == "none") {
      throw config_error(fmt::format(
          "SERIEMA_NET_DEVICES={}: expected auto, none, or a comma list of UCX device names such "
          "as mlx5_0:1,eth0 (ucx_info -d lists them); '{}' is not one",
          list, item));
    }
    out.names.emplace_back(item);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

placement_options placement_options::from_environment() {
  static constexpr std::string_view hyperthread_choices[] = {"avoid", "use"};
  static constexpr std::string_view bind_choices[] = {"yes", "none"};
  config::problems found;  // every setting read, so that one message names every problem
  placement_options options;
  found.check([&] {
    options.hyperthreads = config::get_choice("SERIEMA_HYPERTHREADS", hyperthread_choices) == 1
                               ? hyperthread_policy::use
                               : hyperthread_policy::avoid;
  });
  found.check([&] { options.bind = config::get_choice("SERIEMA_BIND", bind_choices) == 0; });
  found.check([&] {
    if (auto zones = config::raw("SERIEMA_PROCESS_ZONES")) {
      options.process_zones = parse_process_zones(*zones);
    }
  });
  found.check([&] {
    if (auto devices = config::raw("SERIEMA_NET_DEVICES")) {
      options.net_devices = net_device_selection::parse(*devices);
    }
  });
  found.throw_if_any();
  // UCX's own variable: when the user set it, seriema leaves UCX's device choice alone.
  if (const char* ucx_devices = std::getenv("UCX_NET_DEVICES"); ucx_devices != nullptr) {
    options.user_ucx_net_devices = ucx_devices;
  }
  return options;
}

}  // namespace seriema::fabric

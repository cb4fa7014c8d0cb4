// seriema-info: what this machine looks like to seriema (zones, cores, network devices), where a
// given MxPxT would place threads and which network devices each process would use, the UCX
// version and transports, the pages arena segments obtain, and the
// effective configuration, as text or (--json) as one JSON document. Checks every set SERIEMA_*
// value as the layers do and exits non-zero with one line per bad setting.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <seriema/base/critical_section.hpp>
#include <seriema/base/error.hpp>
#include <seriema/base/settings.hpp>
#include <seriema/fabric/bootstrap.hpp>
#include <seriema/fabric/placement.hpp>
// Every layer's settings table, so that --settings lists them all and none is refused as unknown.
#include <seriema/invoke/channel.hpp>
#include <seriema/invoke/detail/settings.hpp>
#include <seriema/offload/detail/settings.hpp>
#include <seriema/transfer/arena.hpp>
#include <seriema/transfer/ucx.hpp>
#include <seriema/version.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace seriema;
using json = nlohmann::ordered_json;

std::string read_first_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line.empty() ? "(unavailable)" : line;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Every registered setting with its layer and value in effect (SERIEMA_RUN_* only when set).
json settings_json() {
  json settings = json::array();
  for (std::string_view layer : config::registered_layers()) {
    for (const auto& s : config::registered_table(layer)) {
      auto value = config::raw(s.name);
      if (s.name.starts_with("SERIEMA_RUN_") && !value) continue;
      settings.push_back({{"name", s.name},
                          {"layer", layer},
                          {"value", value ? *value : std::string(s.default_value)},
                          {"set", value.has_value()},
                          {"default", s.default_value},
                          {"help", s.help}});
    }
  }
  return settings;
}

json machine_json(const fabric::machine_topology& topology) {
  json zones = json::array();
  for (const auto& zone : topology.zones) {
    zones.push_back({{"os_index", zone.os_index},
                     {"memory_mib", zone.memory_bytes >> 20},
                     {"pus_per_core", zone.cores}});
  }
  json devices = json::array();
  for (const auto& device : topology.net_devices) {
    devices.push_back(
        {{"name", device.name},
         {"kind", device.kind == fabric::net_device_kind::openfabrics ? "openfabrics" : "network"},
         {"zone", device.zone < 0 ? json(nullptr) : json(device.zone)}});
  }
  // critical_section's path on this CPU (docs/locks.md).
  const seriema::critical_section section;
  return {{"description", topology.description},
          {"zones", std::move(zones)},
          {"net_devices", std::move(devices)},
          {"rtm", seriema::cpu_has_rtm()},
          {"critical_sections", seriema::to_string(section.path())}};
}

// Each process's network devices (UCX names) and the rule that chose them.
json net_devices_json(const fabric::placement& placement) {
  json per_process = json::array();
  for (int p = 0; p < placement.process_count(); ++p) {
    per_process.push_back(placement.net_devices(p));
  }
  return {{"rule", placement.net_device_rule()}, {"per_process", std::move(per_process)}};
}

json ucx_json(transfer::ucx_context& context, const transfer::context_options& options) {
  json environment = json::object();
  for (const char* name : {"UCX_TLS", "UCX_NET_DEVICES", "UCX_ALLOC_PRIO", "UCX_SYSV_HUGETLB_MODE",
                           "UCX_POSIX_HUGETLB_MODE", "UCX_MM_HUGETLB_MODE",
                           "UCX_KEEPALIVE_INTERVAL", "UCX_POSIX_ERROR_HANDLING",
                           "UCX_SYSV_ERROR_HANDLING", "UCX_MEM_EVENTS", "UCX_LOG_LEVEL",
                           "UCX_RNDV_THRESH", "UCX_MAX_EAGER_LANES"}) {
    const char* value = std::getenv(name);
    environment[name] = value ? json(value) : json(nullptr);
  }
  return {{"version", transfer::ucx_version()},
          {"transports", transfer::ucx_available_transports(context)},
          {"net_devices_applied", context.net_devices()},
          {"peer_errors", options.peer_errors},
          {"keepalive_ms", options.keepalive_ms},
          {"hugetlb_mode", context.hugetlb().described},
          {"environment", std::move(environment)}};
}

// How a program started with these settings reaches another process's registered memory, for the
// publications of one-sided calls, pipes and groups (data then its word) and for consumption
// notices: direct stores where the peer's memory is mapped (same machine, a UCX shared-memory
// transport that maps, UCX-allocated memory), else put + fence + put or one write message
// (SERIEMA_REMOTE_PUBLISH), and one-sided atomics or messages (SERIEMA_REMOTE_NOTICES); "auto"
// takes put and atomics where the network has RDMA (rc, dc, ud, ...).
struct path_rule {
  bool maps_same_machine = false;
  std::string remote_publish;
  std::string remote_notices;
};

path_rule path_rule_of(transfer::ucx_context& context, const transfer::arena_options& arena) {
  path_rule rule;
  bool mapping_transport = false;
  for (const std::string& t : transfer::ucx_available_transports(context)) {
    mapping_transport = mapping_transport || t.starts_with("posix/") || t.starts_with("sysv/") ||
                        t.starts_with("xpmem/");
  }
  rule.maps_same_machine = mapping_transport && arena.source == transfer::memory_source::ucx;
  const invoke::messenger_options messenger = invoke::messenger_options::from_environment();
  const bool rdma = context.network_rdma();
  const bool by_put = messenger.publish_remote == invoke::remote_publish::put ||
                      (messenger.publish_remote == invoke::remote_publish::automatic && rdma);
  const bool by_atomic = messenger.notices_remote == invoke::remote_notice::atomic ||
                         (messenger.notices_remote == invoke::remote_notice::automatic && rdma);
  rule.remote_publish = by_put ? "put, fence, put" : "write message";
  rule.remote_notices = by_atomic ? "one-sided atomic" : "message";
  return rule;
}

json paths_json(const fabric::placement& placement, transfer::ucx_context& context,
                const transfer::arena_options& arena) {
  const path_rule rule = path_rule_of(context, arena);
  const auto between = [&](bool same_machine) {
    const bool direct = same_machine && rule.maps_same_machine;
    return json{{"publish", direct ? "direct stores" : rule.remote_publish},
                {"notices", direct ? "direct stores" : rule.remote_notices}};
  };
  json pairs = json::array();
  constexpr int listed = 8;  // pairs listed one by one up to this many processes
  const int n = placement.process_count();
  for (int a = 0; a < n && n <= listed; ++a) {
    for (int b = a + 1; b < n; ++b) {
      json pair = between(placement.machine_of_process(a) == placement.machine_of_process(b));
      pair["processes"] = {a, b};
      pairs.push_back(std::move(pair));
    }
  }
  return {{"same_machine", between(true)},
          {"other_machine", between(false)},
          {"same_machine_maps", rule.maps_same_machine},
          {"pairs", std::move(pairs)}};
}

void print_paths(const json& paths) {
  fmt::print("\nPaths between processes (publication: data then its word; notices: consumption):\n");
  const auto line = [](const json& p) {
    return fmt::format("publish by {}, notices by {}", p["publish"].get<std::string>(),
                       p["notices"].get<std::string>());
  };
  if (!paths["same_machine_maps"].get<bool>()) {
    fmt::print("  (no UCX transport here maps another process's memory, or SERIEMA_MEMORY_SOURCE "
               "is not ucx: no direct stores)\n");
  }
  for (const json& pair : paths["pairs"]) {
    fmt::print("  processes {} <-> {}: {}\n", pair["processes"][0].get<int>(),
               pair["processes"][1].get<int>(), line(pair));
  }
  fmt::print("  same machine: {}\n  other machines: {}\n", line(paths["same_machine"]),
             line(paths["other_machine"]));
}

// The value of one /proc/meminfo line ("2048 kB"), or "(unavailable)".
std::string meminfo_value(const std::string& key) {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (!line.starts_with(key)) continue;
    auto value = line.find_first_not_of(' ', key.size());
    return value == std::string::npos ? "" : line.substr(value);
  }
  return "(unavailable)";
}

json huge_pages_json() {
  json pages = json::object();
  pages["default_size"] = meminfo_value("Hugepagesize:");
  for (const char* size : {"hugepages-2048kB", "hugepages-1048576kB"}) {
    std::string base = std::string("/sys/kernel/mm/hugepages/") + size;
    pages[size] = {{"reserved", read_first_line(base + "/nr_hugepages")},
                   {"free", read_first_line(base + "/free_hugepages")}};
  }
  pages["transparent"] = read_first_line("/sys/kernel/mm/transparent_hugepage/enabled");
  pages["transparent_shmem"] = read_first_line("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
  return pages;
}

json segment_json(const transfer::registered_segment& segment, std::string description) {
  return {{"pages", transfer::to_string(segment.pages)},
          {"page_kib", segment.page_size >> 10},
          {"shm_mappable", segment.ucx_allocated},
          {"not_larger_because", segment.page_note},
          {"description", std::move(description)}};
}

// One test segment from `source` in `zone`: the pages it obtains, or why it cannot.
json probe_source(transfer::ucx_context& context, int zone, transfer::arena_options options,
                  transfer::memory_source source) {
  options.source = source;
  json entry{{"source", source == transfer::memory_source::ucx ? "ucx" : "self"}};
  try {
    transfer::arena probe(context, zone, options);
    const auto& segment = probe.grow();
    auto lines = probe.describe_segments();
    entry["segment"] = segment_json(segment, lines.front());
    entry["segments"] = std::move(lines);
  } catch (const seriema::error& e) {
    entry["error"] = e.what();
  }
  return entry;
}

// One test segment per memory source in `zone`: what pages each obtains, or why it cannot.
json arena_segments_json(transfer::ucx_context& context, int zone,
                         const transfer::arena_options& in_effect) {
  json sources = json::array();
  for (auto source : {transfer::memory_source::ucx, transfer::memory_source::self}) {
    json entry = probe_source(context, zone, in_effect, source);
    entry["in_effect"] = source == in_effect.source;
    sources.push_back(std::move(entry));
  }
  return {{"zone", zone}, {"segment_mib", in_effect.segment_size >> 20}, {"sources", sources}};
}

// The pages each zone's arena obtains with the source in effect (one test segment per zone).
json arena_per_zone_json(transfer::ucx_context& context, const fabric::machine_topology& topology,
                         const transfer::arena_options& in_effect) {
  json zones = json::array();
  for (const auto& zone : topology.zones) {
    json entry = probe_source(context, zone.os_index, in_effect, in_effect.source);
    entry["zone"] = zone.os_index;
    zones.push_back(std::move(entry));
  }
  return zones;
}

void print_settings(const json& settings, bool with_help) {
  fmt::print("Settings (SERIEMA_*; * = set in the environment):\n");
  for (const auto& s : settings) {
    fmt::print("  {}{:<28} = {}\n", s["set"].get<bool>() ? '*' : ' ',
               s["name"].get<std::string>(), s["value"].get<std::string>());
    if (with_help) fmt::print("      {}\n", s["help"].get<std::string>());
  }
}

void print_machine(const json& machine) {
  fmt::print("Machine: {}\n", machine["description"].get<std::string>());
  for (const auto& zone : machine["zones"]) {
    std::string cores;
    for (const auto& core : zone["pus_per_core"]) {
      std::string pus;
      for (const auto& pu : core) pus += fmt::format("{}{}", pus.empty() ? "" : "+", pu.get<int>());
      cores += fmt::format(" [{}]", pus);
    }
    fmt::print("  zone {}: {} MiB, {} cores (PUs per core:{})\n", zone["os_index"].get<int>(),
               zone["memory_mib"].get<std::uint64_t>(), zone["pus_per_core"].size(), cores);
  }
  if (machine["net_devices"].empty()) fmt::print("  network devices: none known to hwloc\n");
  for (const auto& device : machine["net_devices"]) {
    fmt::print("  network device {} ({}): zone {}\n", device["name"].get<std::string>(),
               device["kind"].get<std::string>(),
               device["zone"].is_null() ? "unknown" : std::to_string(device["zone"].get<int>()));
  }
  fmt::print("  hardware transactions (RTM): {}; critical sections use: {}\n",
             machine["rtm"].get<bool>() ? "yes" : "no",
             machine["critical_sections"].get<std::string>());
}

void print_ucx(const json& ucx) {
  fmt::print("\nUCX {}\n  transports/devices available:", ucx["version"].get<std::string>());
  for (const auto& t : ucx["transports"]) fmt::print(" {}", t.get<std::string>());
  std::string applied;
  for (const auto& name : ucx["net_devices_applied"]) {
    applied += (applied.empty() ? "" : ",") + name.get<std::string>();
  }
  fmt::print("\n  network devices of process 0: {}",
             applied.empty() ? "chosen by UCX" : applied + " (UCX_NET_DEVICES as applied)");
  fmt::print("\n  peer error handling: {}, keepalive {} ms\n",
             ucx["peer_errors"].get<bool>() ? "on" : "off", ucx["keepalive_ms"].get<long>());
  fmt::print("  hugetlb pages for UCX-allocated memory: {}\n",
             ucx["hugetlb_mode"].get<std::string>());
  fmt::print("UCX variables that matter (unset = UCX default):\n");
  for (const auto& [name, value] : ucx["environment"].items()) {
    fmt::print("  {:<26} = {}\n", name, value.is_null() ? "(unset)" : value.get<std::string>());
  }
}

void print_memory(const json& pages, const json& arena, const json& per_zone) {
  fmt::print("\nHuge pages on this machine (default size {}):\n",
             pages["default_size"].get<std::string>());
  for (const char* size : {"hugepages-2048kB", "hugepages-1048576kB"}) {
    fmt::print("  {:<22} reserved {}, free {}\n", size,
               pages[size]["reserved"].get<std::string>(), pages[size]["free"].get<std::string>());
  }
  fmt::print("  transparent huge pages: {} (shmem: {})\n",
             pages["transparent"].get<std::string>(), pages["transparent_shmem"].get<std::string>());
  if (arena.is_null()) return;
  fmt::print("Arena segments obtained (zone {} of process 0, {} MiB each):\n",
             arena["zone"].get<int>(), arena["segment_mib"].get<std::size_t>());
  for (const auto& source : arena["sources"]) {
    const char* mark = source["in_effect"].get<bool>() ? "*" : " ";
    if (source.contains("error")) {
      fmt::print("  {} {} source: {}\n", mark, source["source"].get<std::string>(),
                 source["error"].get<std::string>());
      continue;
    }
    for (const auto& line : source["segments"]) fmt::print("  {} {}\n", mark, line.get<std::string>());
  }
  fmt::print("  (* = SERIEMA_MEMORY_SOURCE in effect)\n");
  fmt::print("Pages in effect per zone's arena:\n");
  for (const auto& zone : per_zone) {
    fmt::print("  zone {}: {}\n", zone["zone"].get<int>(),
               zone.contains("error") ? zone["error"].get<std::string>()
                                      : zone["segment"]["pages"].get<std::string>());
  }
}

void print_text(const json& info) {
  fmt::print("seriema {}\n\n", info["version"].get<std::string>());
  print_machine(info["machine"]);
  const json& placement = info["placement"];
  fmt::print("\nPlacement of {} (every machine assumed to look like this one):\n",
             placement["shape"].get<std::string>());
  for (const auto& line : placement["description"]) fmt::print("{}\n", line.get<std::string>());
  for (const auto& warning : placement["warnings"]) {
    fmt::print("  note: {}\n", warning.get<std::string>());
  }
  print_ucx(info["ucx"]);
  print_paths(info["paths"]);
  print_memory(info["huge_pages"], info["arena"], info["arena_per_zone"]);
  fmt::print("\n");
  print_settings(info["settings"], false);
}

int run(int argc, char** argv) {
  CLI::App app{"seriema-info: topology, placement, UCX transports, pages and configuration"};
  std::string shape_text;
  bool settings_only = false;
  bool skip_memory = false;
  bool as_json = false;
  app.add_option("--shape", shape_text,
                 "job to place: T, PxT or MxPxT (default: 1x1xSERIEMA_THREADS)");
  app.add_flag("--settings", settings_only, "list every SERIEMA_* setting with its meaning");
  app.add_flag("--no-memory", skip_memory, "do not allocate a test segment per memory source");
  app.add_flag("--json", as_json, "print everything as one JSON document");
  CLI11_PARSE(app, argc, argv);

  if (settings_only) {
    // The list first (it is where a user looks up a refused name), then the same check as below.
    if (as_json) fmt::print("{}\n", json{{"settings", settings_json()}}.dump(2));
    else print_settings(settings_json(), true);
    std::fflush(stdout);
    config::check_environment();
    return 0;
  }
  // Every set SERIEMA_* variable through the parsers and checks of the layer that reads it (this
  // program links every layer): what a program would refuse is refused here, all at once.
  config::check_environment();
  auto placement_options = fabric::placement_options::from_environment();
  auto context_options = transfer::context_options::from_environment();
  auto arena_options = transfer::arena_options::from_environment();
  int threads = static_cast<int>(config::get_unsigned("SERIEMA_THREADS", 1, 4096));
  fabric::job_shape shape = shape_text.empty() ? fabric::job_shape{1, 1, threads}
                                               : fabric::job_shape::parse(shape_text);

  // Everything that can reject the configuration happens before anything is printed.
  auto topology = fabric::machine_topology::detect();
  std::vector<int> processes(static_cast<std::size_t>(shape.machines), shape.processes_per_machine);
  fabric::placement placement(topology, processes, shape.threads_per_process, placement_options);
  context_options.net_devices = placement.net_devices(0);  // as process 0 of the job would
  transfer::ucx_context context(context_options);

  json info;
  info["version"] = SERIEMA_VERSION;
  info["machine"] = machine_json(topology);
  info["placement"] = {{"shape", shape.to_string()},
                       {"description", lines_of(placement.describe())},
                       {"warnings", placement.warnings()},
                       {"net_devices", net_devices_json(placement)}};
  info["ucx"] = ucx_json(context, context_options);
  info["paths"] = paths_json(placement, context, arena_options);
  info["huge_pages"] = huge_pages_json();
  info["arena"] = skip_memory ? json(nullptr)
                              : arena_segments_json(context, placement.zone_of_process(0),
                                                    arena_options);
  info["arena_per_zone"] =
      skip_memory ? json(nullptr) : arena_per_zone_json(context, topology, arena_options);
  info["settings"] = settings_json();
  if (as_json) fmt::print("{}\n", info.dump(2));
  else print_text(info);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const seriema::error& e) {
    fmt::print(stderr, "seriema-info: {}\n", e.what());
    return 1;
  }
}

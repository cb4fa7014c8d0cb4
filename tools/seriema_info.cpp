// seriema-info: what this machine looks like to seriema (zones, cores), where a given MxPxT
// would place threads, the UCX version and transports, the pages arena segments obtain, and the
// effective configuration. Exits non-zero with one line naming the setting on bad configuration.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <fstream>
#include <seriema/fabric/bootstrap.hpp>
#include <seriema/fabric/placement.hpp>
#include <seriema/transfer/arena.hpp>
#include <seriema/transfer/config.hpp>
#include <seriema/transfer/error.hpp>
#include <seriema/transfer/ucx.hpp>
#include <seriema/version.hpp>
#include <string>
#include <vector>

namespace {

using namespace seriema;

std::string read_first_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line.empty() ? "(unavailable)" : line;
}

void print_huge_page_reservations() {
  for (const char* size : {"hugepages-2048kB", "hugepages-1048576kB"}) {
    std::string base = std::string("/sys/kernel/mm/hugepages/") + size;
    fmt::print("  {:<22} reserved {}, free {}\n", size, read_first_line(base + "/nr_hugepages"),
               read_first_line(base + "/free_hugepages"));
  }
  fmt::print("  transparent huge pages: {} (shmem: {})\n",
             read_first_line("/sys/kernel/mm/transparent_hugepage/enabled"),
             read_first_line("/sys/kernel/mm/transparent_hugepage/shmem_enabled"));
}

void print_settings(bool with_help) {
  fmt::print("Settings (SERIEMA_*; * = set in the environment):\n");
  for (const auto& s : config::all_settings()) {
    if (s.name.starts_with("SERIEMA_RUN_") && !config::raw(s.name)) continue;
    auto value = config::raw(s.name);
    fmt::print("  {}{:<28} = {}\n", value ? '*' : ' ', s.name,
               value ? *value : std::string(s.default_value));
    if (with_help) fmt::print("      {}\n", s.help);
  }
}

void print_ucx_environment() {
  fmt::print("UCX variables that matter (unset = UCX default):\n");
  for (const char* name : {"UCX_TLS", "UCX_NET_DEVICES", "UCX_POSIX_HUGETLB_MODE",
                           "UCX_KEEPALIVE_INTERVAL", "UCX_POSIX_ERROR_HANDLING",
                           "UCX_SYSV_ERROR_HANDLING", "UCX_MEM_EVENTS", "UCX_LOG_LEVEL",
                           "UCX_RNDV_THRESH", "UCX_MAX_EAGER_LANES"}) {
    const char* value = std::getenv(name);
    fmt::print("  {:<26} = {}\n", name, value ? value : "(unset)");
  }
}

int run(int argc, char** argv) {
  CLI::App app{"seriema-info: topology, placement, UCX transports, pages and configuration"};
  std::string shape_text;
  bool settings_only = false;
  bool skip_memory = false;
  app.add_option("--shape", shape_text,
                 "job to place: T, PxT or MxPxT (default: 1x1xSERIEMA_THREADS)");
  app.add_flag("--settings", settings_only, "list every SERIEMA_* setting with its meaning");
  app.add_flag("--no-memory", skip_memory, "do not allocate a test segment per memory source");
  CLI11_PARSE(app, argc, argv);

  if (settings_only) {
    print_settings(true);
    return 0;
  }
  config::reject_unknown_environment_settings();
  auto placement_options = fabric::placement_options::from_environment();
  auto context_options = transfer::context_options::from_environment();
  auto arena_options = transfer::arena_options::from_environment();
  int threads = static_cast<int>(config::get_unsigned("SERIEMA_THREADS", 1, 4096));
  (void)config::get_duration("SERIEMA_BOOTSTRAP_TIMEOUT");
  fabric::job_shape shape = shape_text.empty() ? fabric::job_shape{1, 1, threads}
                                               : fabric::job_shape::parse(shape_text);

  // Everything that can reject the configuration happens before anything is printed.
  auto topology = fabric::machine_topology::detect();
  std::vector<int> processes(static_cast<std::size_t>(shape.machines), shape.processes_per_machine);
  fabric::placement placement(topology, processes, shape.threads_per_process, placement_options);
  transfer::ucx_context context(context_options);

  fmt::print("seriema {}\n\n", SERIEMA_VERSION);
  fmt::print("Machine: {}\n", topology.description);
  for (const auto& zone : topology.zones) {
    std::string cores;
    for (const auto& core : zone.cores) {
      std::string pus;
      for (int pu : core) pus += fmt::format("{}{}", pus.empty() ? "" : "+", pu);
      cores += fmt::format(" [{}]", pus);
    }
    fmt::print("  zone {}: {} MiB, {} cores (PUs per core:{})\n", zone.os_index,
               zone.memory_bytes >> 20, zone.cores.size(), cores);
  }

  fmt::print("\nPlacement of {} (every machine assumed to look like this one):\n{}",
             shape.to_string(), placement.describe());
  if (!placement.describe().ends_with('\n')) fmt::print("\n");
  for (const auto& warning : placement.warnings()) fmt::print("  note: {}\n", warning);

  fmt::print("\nUCX {}\n", transfer::ucx_version());
  fmt::print("  transports/devices available:");
  for (const auto& t : transfer::ucx_available_transports(context)) fmt::print(" {}", t);
  fmt::print("\n  peer error handling: {}, keepalive {} ms\n",
             context_options.peer_errors ? "on" : "off", context_options.keepalive_ms);
  print_ucx_environment();

  fmt::print("\nHuge pages on this machine:\n");
  print_huge_page_reservations();
  if (!skip_memory) {
    fmt::print("Arena segments obtained (zone {} of process 0, {} MiB each):\n",
               placement.zone_of_process(0), arena_options.segment_size >> 20);
    for (auto source : {transfer::memory_source::ucx, transfer::memory_source::self}) {
      auto options = arena_options;
      options.source = source;
      if (source == transfer::memory_source::ucx &&
          (options.pages == transfer::page_preference::gigantic_1g ||
           options.pages == transfer::page_preference::hugetlb_2m)) {
        options.pages = transfer::page_preference::automatic;
      }
      bool chosen = source == arena_options.source;
      try {
        transfer::arena probe(context, placement.zone_of_process(0), options);
        probe.grow();
        for (const auto& line : probe.describe_segments()) {
          fmt::print("  {} {}\n", chosen ? "*" : " ", line);
        }
      } catch (const seriema::error& e) {
        fmt::print("  {} {} source: {}\n", chosen ? "*" : " ",
                   source == transfer::memory_source::ucx ? "ucx" : "self", e.what());
      }
    }
    fmt::print("  (* = SERIEMA_MEMORY_SOURCE in effect)\n");
  }
  fmt::print("\n");
  print_settings(false);
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

// Placement of MxPxT jobs on NUMA zones, cores and PUs: checking a job against the topology,
// the zones of its processes, one plan per machine shape (placement_planner.cpp), the lookups,
// and binding through hwloc (topology_hwloc.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <limits>
#include <map>
#include <memory>
#include <seriema/base/error.hpp>
#include <seriema/fabric/placement.hpp>
#include <utility>

#include "placement/placement_net_devices.hpp"
#include "placement/placement_planner.hpp"
#include "placement/placement_text.hpp"
#include "placement/topology_hwloc.hpp"

namespace seriema::fabric {

using detail::counted;
using detail::join;

// -----------------------------------------------------------------------------------------------
// machine_topology

int machine_topology::core_count() const noexcept {
  std::size_t n = 0;
  for (const auto& z : zones) n += z.cores.size();
  return static_cast<int>(n);
}

int machine_topology::pu_count() const noexcept {
  std::size_t n = 0;
  for (const auto& z : zones) {
    for (const auto& core : z.cores) n += core.size();
  }
  return static_cast<int>(n);
}

machine_topology machine_topology::uniform(int zone_count, int cores_per_zone, int pus_per_core) {
  if (zone_count < 1 || cores_per_zone < 1 || pus_per_core < 1) {
    throw error(fmt::format("machine_topology::uniform({}, {}, {}): every count must be positive",
                            zone_count, cores_per_zone, pus_per_core));
  }
  machine_topology out;
  const int total_cores = zone_count * cores_per_zone;
  for (int z = 0; z < zone_count; ++z) {
    zone zone_info{z, 0, {}};
    for (int c = 0; c < cores_per_zone; ++c) {
      const int core = z * cores_per_zone + c;
      std::vector<int> pus;
      for (int s = 0; s < pus_per_core; ++s) pus.push_back(s * total_cores + core);
      zone_info.cores.push_back(std::move(pus));
    }
    out.zones.push_back(std::move(zone_info));
  }
  out.description = detail::topology_counts(out);
  return out;
}

void machine_topology::add_net_device(std::string name, net_device_kind kind,
                                      int zone_os_index) {
  net_devices.push_back({std::move(name), kind, zone_os_index});
  try {
    detail::check_net_devices(*this);
  } catch (...) {
    net_devices.pop_back();
    throw;
  }
  description = detail::topology_counts(*this);
}


// -----------------------------------------------------------------------------------------------
// placement

namespace detail {

// Everything a placement knows (shared, immutable once built: copies of a placement share it).
struct placement_state {
  int machines = 0;
  int processes = 0;
  int threads_per_process = 0;
  bool bind = true;
  std::string header;
  std::vector<thread_location> locations;     // by global thread id
  std::vector<int> machine_of_process;        // by global rank
  std::vector<int> zone_of_process;           // by global rank: zone OS index
  std::vector<std::vector<int>> process_pus;  // by global rank: ascending PU OS indexes
  std::vector<std::vector<std::string>> net_devices;  // by global rank: UCX device names
  std::string net_device_rule;
  bool oversubscribed = false;
  std::vector<std::string> warnings;
};

}  // namespace detail

struct placement::impl : detail::placement_state {};

namespace {

// Throws naming the problem when the job cannot be placed on `topology` at all; returns the
// job's process count (thread ids are 32-bit: processes x threads must fit).
long long check_job(const machine_topology& topology, const std::vector<int>& processes_on_machine,
                    int threads_per_process) {
  if (processes_on_machine.empty()) {
    throw config_error("placement: a job needs at least one machine; got no machines");
  }
  for (std::size_t m = 0; m < processes_on_machine.size(); ++m) {
    if (processes_on_machine[m] < 1) {
      throw config_error(
          fmt::format("placement: machine {} has {} processes; every machine needs at least one", m,
                      processes_on_machine[m]));
    }
  }
  if (threads_per_process < 1) {
    throw config_error(
        fmt::format("placement: {} threads per process; every process needs at least one thread",
                    threads_per_process));
  }
  if (topology.zones.empty()) {
    throw error(
        "placement: the topology has no NUMA zone; build it with machine_topology::detect()");
  }
  for (const auto& zone : topology.zones) {
    if (zone.cores.empty()) {
      throw error(fmt::format("placement: zone {} of the topology has no cores", zone.os_index));
    }
    for (const auto& core : zone.cores) {
      if (core.empty()) {
        throw error(fmt::format("placement: a core of zone {} has no PUs", zone.os_index));
      }
      for (int pu : core) {
        if (pu < 0) throw error(fmt::format("placement: negative PU number {}", pu));
      }
    }
  }
  long long total_processes = 0;
  for (int n : processes_on_machine) total_processes += n;
  const long long total_threads = total_processes * threads_per_process;
  if (total_processes > std::numeric_limits<int>::max() ||
      total_threads > static_cast<long long>(std::numeric_limits<thread_id>::max())) {
    throw config_error(fmt::format(
        "placement: {} processes x {} threads do not fit in 32-bit thread ids; use fewer threads",
        total_processes, threads_per_process));
  }
  return total_processes;
}

// The zones the user asked for (SERIEMA_PROCESS_ZONES) as indexes into topology.zones, checked
// against the topology and the job: one zone for all, or one per process of every machine.
std::vector<int> requested_zones(const machine_topology& topology, const placement_options& options,
                                 const std::vector<int>& processes_on_machine) {
  std::vector<int> requested;
  if (options.process_zones.empty()) return requested;
  const std::string setting = fmt::format("SERIEMA_PROCESS_ZONES={}", join(options.process_zones));
  for (int os : options.process_zones) {
    auto it = std::find_if(topology.zones.begin(), topology.zones.end(),
                           [os](const machine_topology::zone& z) { return z.os_index == os; });
    if (it == topology.zones.end()) {
      throw config_error(fmt::format("{}: {}", setting, detail::zone_choices(topology)));
    }
    requested.push_back(static_cast<int>(it - topology.zones.begin()));
  }
  for (std::size_t m = 0; m < processes_on_machine.size(); ++m) {
    if (requested.size() != 1 &&
        requested.size() != static_cast<std::size_t>(processes_on_machine[m])) {
      throw config_error(fmt::format(
          "{}: {} listed for {} on machine {}; list one zone per process of a machine, or a "
          "single zone for all",
          setting, counted(static_cast<long long>(requested.size()), "zone", "zones"),
          counted(processes_on_machine[m], "process", "processes"), m));
    }
  }
  return requested;
}

// The zone (index) of each of a machine's `local` processes: as requested, else spread evenly.
std::vector<int> zones_of_local_processes(int local, const std::vector<int>& requested,
                                          int zone_count) {
  std::vector<int> zone_index(static_cast<std::size_t>(local));
  for (int i = 0; i < local; ++i) {
    zone_index[static_cast<std::size_t>(i)] =
        requested.empty() ? static_cast<int>(static_cast<long long>(i) * zone_count / local)
        : requested.size() == 1 ? requested.front()
                                : requested[static_cast<std::size_t>(i)];
  }
  return zone_index;
}

// One plan per machine shape (process count): machines with the same count get the same one.
struct job_plans {
  std::map<int, detail::machine_plan> by_count;
  std::map<int, std::vector<std::vector<std::string>>> net_devices;  // per local process
  std::map<int, std::vector<int>> machines_with;  // process count -> machines, for the notes
  std::vector<int> count_order;                   // process counts in order of first use
};

// Records where process `rank`, the `local`-th of machine `machine`, and its threads run.
void place_process(detail::placement_state& state, const machine_topology& topology,
                   const detail::machine_plan& plan,
                   const std::vector<std::vector<std::string>>& net_devices, int machine,
                   int local, int rank) {
  const auto r = static_cast<std::size_t>(rank);
  const auto l = static_cast<std::size_t>(local);
  const int threads = state.threads_per_process;
  const int zone = topology.zones[static_cast<std::size_t>(plan.zone_index[l])].os_index;
  state.machine_of_process[r] = machine;
  state.zone_of_process[r] = zone;
  const auto& pus = plan.thread_pus[l];
  for (int t = 0; t < threads; ++t) {
    state.locations[r * static_cast<std::size_t>(threads) + static_cast<std::size_t>(t)] = {
        machine, rank, t, zone, pus[static_cast<std::size_t>(t)]};
  }
  std::vector<int> sorted = pus;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  state.process_pus[r] = std::move(sorted);
  state.net_devices[r] = net_devices[l];
}

// The warnings of every machine shape's plan, labelled with its machines, and the header line.
void describe_job(detail::placement_state& state, const machine_topology& topology,
                  const job_plans& plans, const std::vector<int>& processes_on_machine) {
  std::vector<std::string> zone_lists;
  const bool one_shape = plans.count_order.size() == 1;
  for (int local : plans.count_order) {
    const detail::machine_plan& plan = plans.by_count.at(local);
    state.oversubscribed = state.oversubscribed || plan.oversubscribed;
    const std::string label = detail::machines_label(plans.machines_with.at(local));
    for (const auto& note : plan.notes) {
      state.warnings.push_back(fmt::format("{} ({})", note, label));
    }
    std::vector<int> zones;
    for (int z : plan.zone_index) {
      zones.push_back(topology.zones[static_cast<std::size_t>(z)].os_index);
    }
    zone_lists.push_back(one_shape ? join(zones) : fmt::format("{} ({})", join(zones), label));
  }
  const int threads = state.threads_per_process;
  const std::string job =
      one_shape ? job_shape{state.machines, plans.count_order.front(), threads}.to_string()
                : fmt::format("({})x{}", join(processes_on_machine, "+"), threads);
  std::string zones_text;
  for (std::size_t i = 0; i < zone_lists.size(); ++i) {
    zones_text += (i == 0 ? "" : "; ") + zone_lists[i];
  }
  state.header = fmt::format(
      "job {}: {}, {}, {}; zones: {}", job, counted(state.machines, "machine", "machines"),
      counted(state.processes, "process", "processes"),
      counted(static_cast<long long>(state.locations.size()), "thread", "threads"), zones_text);
}

// The network devices of a machine's processes, from the zones its plan gave them.
std::vector<std::vector<std::string>> local_net_devices(const machine_topology& topology,
                                                        const detail::machine_plan& plan,
                                                        const placement_options& options) {
  std::vector<int> zones;
  for (int z : plan.zone_index) {
    zones.push_back(topology.zones[static_cast<std::size_t>(z)].os_index);
  }
  return detail::choose_net_devices(topology, zones, options);
}

}  // namespace

placement::placement(const machine_topology& topology, const job_shape& shape,
                     const placement_options& options)
    : placement(topology,
                std::vector<int>(static_cast<std::size_t>(std::max(shape.machines, 0)),
                                 shape.processes_per_machine),
                shape.threads_per_process, options) {}

placement::placement(const machine_topology& topology, std::vector<int> processes_on_machine,
                     int threads_per_process, const placement_options& options) {
  const long long total_processes = check_job(topology, processes_on_machine, threads_per_process);
  const std::vector<int> requested = requested_zones(topology, options, processes_on_machine);
  detail::check_net_devices(topology);
  auto state = std::make_shared<impl>();
  state->net_device_rule = detail::net_device_rule(topology, options);
  state->machines = static_cast<int>(processes_on_machine.size());
  state->processes = static_cast<int>(total_processes);
  state->threads_per_process = threads_per_process;
  state->bind = options.bind;
  const auto total_threads = static_cast<std::size_t>(total_processes * threads_per_process);
  state->locations.resize(total_threads);
  state->machine_of_process.resize(static_cast<std::size_t>(total_processes));
  state->zone_of_process.resize(static_cast<std::size_t>(total_processes));
  state->process_pus.resize(static_cast<std::size_t>(total_processes));
  state->net_devices.resize(static_cast<std::size_t>(total_processes));

  const detail::planner plan_maker(topology, options.hyperthreads);
  job_plans plans;
  int rank = 0;
  for (int m = 0; m < state->machines; ++m) {
    const int local = processes_on_machine[static_cast<std::size_t>(m)];
    auto [it, inserted] = plans.by_count.try_emplace(local);
    if (inserted) {
      const int zone_count = static_cast<int>(topology.zones.size());
      it->second = plan_maker.plan(zones_of_local_processes(local, requested, zone_count),
                                   threads_per_process);
      plans.net_devices[local] = local_net_devices(topology, it->second, options);
      plans.count_order.push_back(local);
    }
    plans.machines_with[local].push_back(m);
    for (int i = 0; i < local; ++i, ++rank) {
      place_process(*state, topology, it->second, plans.net_devices[local], m, i, rank);
    }
  }
  describe_job(*state, topology, plans, processes_on_machine);
  impl_ = std::move(state);
}

int placement::machine_count() const noexcept {
  return impl_->machines;
}
int placement::process_count() const noexcept {
  return impl_->processes;
}
int placement::threads_per_process() const noexcept {
  return impl_->threads_per_process;
}
thread_id placement::thread_count() const noexcept {
  return static_cast<thread_id>(impl_->locations.size());
}

thread_id placement::global_id(int process, int local_thread) const noexcept {
  assert(process >= 0 && process < impl_->processes);
  assert(local_thread >= 0 && local_thread < impl_->threads_per_process);
  return static_cast<thread_id>(process) * static_cast<thread_id>(impl_->threads_per_process) +
         static_cast<thread_id>(local_thread);
}

const thread_location& placement::locate(thread_id id) const noexcept {
  assert(id < impl_->locations.size());
  return impl_->locations[id];
}

int placement::machine_of_process(int process) const noexcept {
  assert(process >= 0 && process < impl_->processes);
  return impl_->machine_of_process[static_cast<std::size_t>(process)];
}

int placement::zone_of_process(int process) const noexcept {
  assert(process >= 0 && process < impl_->processes);
  return impl_->zone_of_process[static_cast<std::size_t>(process)];
}

const std::vector<int>& placement::process_pus(int process) const noexcept {
  assert(process >= 0 && process < impl_->processes);
  return impl_->process_pus[static_cast<std::size_t>(process)];
}

const std::vector<std::string>& placement::net_devices(int process) const noexcept {
  assert(process >= 0 && process < impl_->processes);
  return impl_->net_devices[static_cast<std::size_t>(process)];
}

const std::string& placement::net_device_rule() const noexcept {
  return impl_->net_device_rule;
}

bool placement::oversubscribed() const noexcept {
  return impl_->oversubscribed;
}

const std::vector<std::string>& placement::warnings() const noexcept {
  return impl_->warnings;
}

std::string placement::describe() const {
  std::string out = impl_->header;
  out += '\n';
  for (std::size_t id = 0; id < impl_->locations.size(); ++id) {
    const thread_location& at = impl_->locations[id];
    out += fmt::format("thread {}: machine {}, process {}, zone {}, pu {}\n", id, at.machine,
                       at.process, at.zone, at.pu);
  }
  out += fmt::format("net devices: {}\n", impl_->net_device_rule);
  for (std::size_t p = 0; p < impl_->net_devices.size(); ++p) {
    const auto& names = impl_->net_devices[p];
    if (names.empty()) continue;
    std::string list;
    for (const auto& name : names) list += (list.empty() ? "" : ",") + name;
    out += fmt::format("process {}: net devices {}\n", p, list);
  }
  return out;
}

void placement::bind_process(int process) const {
  if (!impl_->bind) return;
  if (process < 0 || process >= impl_->processes) {
    throw error(fmt::format("bind_process({}): the job has processes 0..{}", process,
                            impl_->processes - 1));
  }
  const auto p = static_cast<std::size_t>(process);
  detail::bind_process_to(process, impl_->process_pus[p], impl_->zone_of_process[p]);
}

void placement::pin_thread(thread_id id) const {
  if (!impl_->bind) return;
  if (id >= impl_->locations.size()) {
    throw error(
        fmt::format("pin_thread({}): the job has threads 0..{}", id, impl_->locations.size() - 1));
  }
  detail::pin_thread_to(id, impl_->locations[id].pu);
}

}  // namespace seriema::fabric

// Placement of MxPxT jobs on NUMA zones, cores and PUs (a pure computation on a topology), plus
// detection of this machine and binding of processes/threads through one process-wide hwloc
// topology.
#include <fmt/format.h>
#include <hwloc.h>

#include <algorithm>
#include <cassert>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <limits>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <seriema/base/error.hpp>
#include <seriema/base/settings.hpp>
#include <seriema/fabric/detail/settings.hpp>
#include <seriema/fabric/placement.hpp>
#include <system_error>
#include <utility>

namespace seriema::fabric {
namespace {

// ---------------------------------------------------------------------------------------------
// Small text helpers.

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

std::string join(const std::vector<int>& values, std::string_view separator = ",") {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i != 0) out += separator;
    out += std::to_string(values[i]);
  }
  return out;
}

// Parses a positive decimal int with nothing around it; nullopt otherwise (sign, junk, overflow).
std::optional<int> parse_positive(std::string_view text) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text.front()))) return std::nullopt;
  int value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || ptr != text.data() + text.size() || value < 1) return std::nullopt;
  return value;
}

std::string errno_text(int err) {
  return std::generic_category().message(err);
}

std::string topology_counts(const machine_topology& topology) {
  return fmt::format(
      "{}, {}, {}", counted(static_cast<long long>(topology.zones.size()), "zone", "zones"),
      counted(topology.core_count(), "core", "cores"), counted(topology.pu_count(), "PU", "PUs"));
}

// ---------------------------------------------------------------------------------------------
// The process-wide hwloc topology used by detect() and for binding. Loaded on first use
// (thread-safe static initialization) and never destroyed, because threads may still pin
// themselves while static destructors run. hwloc allows concurrent read-only use and binding.

class hwloc_session {
 public:
  hwloc_session() {
    if (hwloc_topology_init(&topology_) != 0) {
      throw error(fmt::format("hwloc_topology_init failed: {}; check that hwloc can run here",
                              errno_text(errno)));
    }
    if (hwloc_topology_load(topology_) != 0) {
      int err = errno;
      hwloc_topology_destroy(topology_);
      throw error(fmt::format(
          "hwloc_topology_load failed: {}; check that /sys and /proc are readable (or unset "
          "HWLOC_XMLFILE)",
          errno_text(err)));
    }
  }
  hwloc_session(const hwloc_session&) = delete;
  hwloc_session& operator=(const hwloc_session&) = delete;
  ~hwloc_session() = default;  // never destroyed, see above

  [[nodiscard]] hwloc_topology_t get() const noexcept { return topology_; }

 private:
  hwloc_topology_t topology_ = nullptr;
};

hwloc_topology_t shared_topology() {
  static const hwloc_session* const session = new hwloc_session();
  return session->get();
}

struct bitmap_deleter {
  void operator()(hwloc_bitmap_s* bitmap) const noexcept { hwloc_bitmap_free(bitmap); }
};
using bitmap_ptr = std::unique_ptr<hwloc_bitmap_s, bitmap_deleter>;

bitmap_ptr make_bitmap() {
  hwloc_bitmap_t bitmap = hwloc_bitmap_alloc();
  if (bitmap == nullptr) throw std::bad_alloc();
  return bitmap_ptr(bitmap);
}

bitmap_ptr make_cpuset(const std::vector<int>& pus) {
  bitmap_ptr set = make_bitmap();
  for (int pu : pus) hwloc_bitmap_set(set.get(), static_cast<unsigned>(pu));
  return set;
}

// ---------------------------------------------------------------------------------------------
// The placement of one machine's processes (every machine with the same process count gets the
// same one).

struct machine_plan {
  std::vector<int> zone_index;               // per local process: index into topology.zones
  std::vector<std::vector<int>> thread_pus;  // per local process: PU of each thread
  bool oversubscribed = false;
  std::vector<std::string> notes;  // warnings without the "(machine m)" suffix
};

class planner {
 public:
  planner(const machine_topology& topology, hyperthread_policy policy)
      : topology_(topology), avoid_(policy == hyperthread_policy::avoid) {
    int max_pu = 0;
    zone_cores_.resize(topology.zones.size());
    for (std::size_t z = 0; z < topology.zones.size(); ++z) {
      for (const auto& pus : topology.zones[z].cores) {
        zone_cores_[z].push_back(static_cast<int>(cores_.size()));
        cores_.push_back({static_cast<int>(z), pus});
        for (int pu : pus) max_pu = std::max(max_pu, pu);
      }
    }
    pu_zone_.assign(static_cast<std::size_t>(max_pu) + 1, -1);
    for (std::size_t c = 0; c < cores_.size(); ++c) {
      for (int pu : cores_[c].pus) {
        pu_zone_[static_cast<std::size_t>(pu)] = cores_[c].zone;
      }
    }
    // Slot order of a zone: the order in which its PUs are handed out. avoid: the first PU of
    // every core, then the second PU of every core, ...; use: core by core.
    zone_slots_.resize(topology.zones.size());
    for (std::size_t z = 0; z < zone_cores_.size(); ++z) {
      std::size_t max_siblings = 0;
      for (int c : zone_cores_[z]) max_siblings = std::max(max_siblings, cores_[c].pus.size());
      if (avoid_) {
        for (std::size_t s = 0; s < max_siblings; ++s) {
          for (int c : zone_cores_[z]) {
            if (s < cores_[c].pus.size()) zone_slots_[z].push_back(cores_[c].pus[s]);
          }
        }
      } else {
        for (int c : zone_cores_[z]) {
          for (int pu : cores_[c].pus) zone_slots_[z].push_back(pu);
        }
      }
    }
  }

  machine_plan plan(const std::vector<int>& zone_index, int threads) const {
    const std::size_t zone_count = topology_.zones.size();
    const std::size_t need = static_cast<std::size_t>(threads);
    std::vector<process_state> procs(zone_index.size());
    for (std::size_t p = 0; p < procs.size(); ++p) procs[p].zone = zone_index[p];
    std::vector<int> core_owner(cores_.size(), -1);
    std::vector<char> pu_used(pu_zone_.size(), 0);

    auto add_pu = [&](process_state& proc, int pu) {
      proc.pus.push_back(pu);
      pu_used[static_cast<std::size_t>(pu)] = 1;
    };
    auto take_core = [&](std::size_t p, int c) {
      process_state& proc = procs[p];
      core_owner[static_cast<std::size_t>(c)] = static_cast<int>(p);
      proc.cores.push_back(c);
      for (int pu : cores_[static_cast<std::size_t>(c)].pus) {
        if (proc.pus.size() >= need) break;
        add_pu(proc, pu);
        if (avoid_) break;  // one PU per core until every core is used
      }
    };

    // 1. Cores of the process's own zone; processes sharing a zone split its cores into
    //    contiguous disjoint blocks (the first C % k processes get one more core).
    std::vector<std::size_t> next_free(zone_count, 0);  // zone's cores before this are owned
    for (std::size_t z = 0; z < zone_count; ++z) {
      std::vector<std::size_t> members;
      for (std::size_t p = 0; p < procs.size(); ++p) {
        if (static_cast<std::size_t>(procs[p].zone) == z) members.push_back(p);
      }
      if (members.empty()) continue;
      const std::size_t cores = zone_cores_[z].size();
      for (std::size_t j = 0; j < members.size(); ++j) {
        std::size_t share = cores / members.size() + (j < cores % members.size() ? 1 : 0);
        for (std::size_t taken = 0;
             taken < share && procs[members[j]].pus.size() < need && next_free[z] < cores;
             ++taken) {
          take_core(members[j], zone_cores_[z][next_free[z]++]);
        }
      }
    }

    // 2. Free cores of other zones, nearest zone number first (cyclically), one core per
    //    process per round so that spilling processes share fairly.
    for (bool progress = true; progress;) {
      progress = false;
      for (std::size_t p = 0; p < procs.size(); ++p) {
        if (procs[p].pus.size() >= need) continue;
        for (std::size_t d = 1; d < zone_count; ++d) {
          std::size_t z = (static_cast<std::size_t>(procs[p].zone) + d) % zone_count;
          if (next_free[z] < zone_cores_[z].size()) {
            take_core(p, zone_cores_[z][next_free[z]++]);
            progress = true;
            break;
          }
        }
      }
    }

    // 3. (avoid) Hyperthread siblings of the cores each process took, so that no two
    //    processes share a physical core.
    if (avoid_) {
      for (auto& proc : procs) {
        for (std::size_t s = 1; proc.pus.size() < need; ++s) {
          bool any = false;
          for (int c : proc.cores) {
            const auto& pus = cores_[static_cast<std::size_t>(c)].pus;
            if (s >= pus.size()) continue;
            any = true;
            if (proc.pus.size() < need && !pu_used[static_cast<std::size_t>(pus[s])]) {
              add_pu(proc, pus[s]);
            }
          }
          if (!any) break;
        }
      }
    }

    // 4. Any PU still unused (siblings of cores whose owner needed fewer threads), own zone
    //    first, round robin over the processes that still need PUs.
    std::vector<std::size_t> slot_cursor(zone_count, 0);
    for (bool progress = true; progress;) {
      progress = false;
      for (auto& proc : procs) {
        if (proc.pus.size() >= need) continue;
        for (std::size_t d = 0; d < zone_count; ++d) {
          std::size_t z = (static_cast<std::size_t>(proc.zone) + d) % zone_count;
          const auto& slots = zone_slots_[z];
          std::size_t& cursor = slot_cursor[z];
          while (cursor < slots.size() && pu_used[static_cast<std::size_t>(slots[cursor])]) {
            ++cursor;
          }
          if (cursor < slots.size()) {
            add_pu(proc, slots[cursor]);
            progress = true;
            break;
          }
        }
      }
    }

    // 5. Threads take their process's PUs in order and wrap around when there are more threads
    //    than PUs (a process left without any PU wraps around its zone's PUs).
    machine_plan out;
    out.zone_index = zone_index;
    for (const auto& proc : procs) {
      const std::vector<int>& pool =
          proc.pus.empty() ? zone_slots_[static_cast<std::size_t>(proc.zone)] : proc.pus;
      std::vector<int> thread_pus(need);
      for (std::size_t t = 0; t < need; ++t) thread_pus[t] = pool[t % pool.size()];
      out.thread_pus.push_back(std::move(thread_pus));
    }
    add_notes(out, threads);
    return out;
  }

 private:
  struct core_info {
    int zone;
    std::vector<int> pus;
  };
  struct process_state {
    int zone = 0;
    std::vector<int> cores;  // owned cores, in the order taken
    std::vector<int> pus;    // PUs for its threads, in thread order
  };

  void add_notes(machine_plan& out, int threads) const {
    std::vector<int> load(pu_zone_.size(), 0);
    for (const auto& thread_pus : out.thread_pus) {
      for (int pu : thread_pus) ++load[static_cast<std::size_t>(pu)];
    }
    for (std::size_t z = 0; z < topology_.zones.size(); ++z) {
      long long on_zone = 0;
      bool over = false;
      for (int pu : zone_slots_[z]) {
        on_zone += load[static_cast<std::size_t>(pu)];
        over = over || load[static_cast<std::size_t>(pu)] > 1;
      }
      if (over) {
        out.oversubscribed = true;
        out.notes.push_back(
            fmt::format("oversubscribed: {} threads on {} of zone {}", on_zone,
                        counted(static_cast<long long>(zone_slots_[z].size()), "PU", "PUs"),
                        topology_.zones[z].os_index));
      }
    }
    long long shared_cores = 0;
    long long threads_on_shared = 0;
    for (const auto& core : cores_) {
      int busy_pus = 0;
      long long on_core = 0;
      for (int pu : core.pus) {
        busy_pus += load[static_cast<std::size_t>(pu)] > 0 ? 1 : 0;
        on_core += load[static_cast<std::size_t>(pu)];
      }
      if (busy_pus > 1) {
        ++shared_cores;
        threads_on_shared += on_core;
      }
    }
    if (shared_cores > 0) {
      out.notes.push_back(fmt::format("hyperthreads in use: {} on {}, more than one PU per core",
                                      counted(threads_on_shared, "thread", "threads"),
                                      counted(shared_cores, "core", "cores")));
    }
    for (std::size_t p = 0; p < out.thread_pus.size(); ++p) {
      const int zone = out.zone_index[p];
      std::vector<int> elsewhere;  // zones (OS index) holding some of its threads
      long long away = 0;
      for (int pu : out.thread_pus[p]) {
        int z = pu_zone_[static_cast<std::size_t>(pu)];
        if (z == zone) continue;
        ++away;
        int os = topology_.zones[static_cast<std::size_t>(z)].os_index;
        if (std::find(elsewhere.begin(), elsewhere.end(), os) == elsewhere.end()) {
          elsewhere.push_back(os);
        }
      }
      if (away > 0) {
        int os = topology_.zones[static_cast<std::size_t>(zone)].os_index;
        out.notes.push_back(fmt::format(
            "local process {} (zone {}): {} of {} threads run on cores of zone {}; its memory "
            "stays in zone {}",
            p, os, away, threads, join(elsewhere), os));
      }
    }
  }

  const machine_topology& topology_;
  bool avoid_;
  std::vector<core_info> cores_;              // all cores of the machine, zone by zone
  std::vector<std::vector<int>> zone_cores_;  // per zone: indexes into cores_
  std::vector<std::vector<int>> zone_slots_;  // per zone: PUs in hand-out order
  std::vector<int> pu_zone_;                  // PU OS index -> zone index (-1: none)
};

// "machine 3", "machines 0-3", "machines 0,2,5".
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

}  // namespace

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

machine_topology machine_topology::detect() {
  hwloc_topology_t topology = shared_topology();
  machine_topology out;
  std::vector<hwloc_obj_t> nodes;
  const int node_count = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < node_count; ++i) {
    hwloc_obj_t node =
        hwloc_get_obj_by_type(topology, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    nodes.push_back(node);
    out.zones.push_back({static_cast<int>(node->os_index), node->attr->numanode.local_memory, {}});
  }
  if (out.zones.empty()) {  // hwloc 2 always reports one, but be safe: no NUMA = one zone
    out.zones.push_back({0, hwloc_get_root_obj(topology)->total_memory, {}});
  }
  // Some virtual machines expose no Core objects: then every PU counts as a core.
  const hwloc_obj_type_t core_type =
      hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  const int core_count = hwloc_get_nbobjs_by_type(topology, core_type);
  for (int i = 0; i < core_count; ++i) {
    hwloc_obj_t core = hwloc_get_obj_by_type(topology, core_type, static_cast<unsigned>(i));
    std::vector<int> pus;
    for (hwloc_obj_t pu = nullptr; (pu = hwloc_get_next_obj_inside_cpuset_by_type(
                                        topology, core->cpuset, HWLOC_OBJ_PU, pu)) != nullptr;) {
      pus.push_back(static_cast<int>(pu->os_index));
    }
    if (pus.empty()) continue;
    std::size_t zone = 0;
    for (std::size_t z = 0; z < nodes.size(); ++z) {
      if (hwloc_bitmap_intersects(nodes[z]->cpuset, core->cpuset)) {
        zone = z;
        break;
      }
    }
    out.zones[zone].cores.push_back(std::move(pus));
  }
  // Memory-only NUMA nodes (HBM, CXL) have no cores to run threads on: leave them out.
  std::erase_if(out.zones, [](const zone& z) { return z.cores.empty(); });
  if (out.zones.empty()) {
    throw error("hwloc found no usable PU on this machine; check the process's cgroup cpuset");
  }
  out.description = topology_counts(out);
  return out;
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
  out.description = topology_counts(out);
  return out;
}

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

placement_options placement_options::from_environment() {
  static constexpr std::string_view hyperthread_choices[] = {"avoid", "use"};
  static constexpr std::string_view bind_choices[] = {"yes", "none"};
  placement_options options;
  options.hyperthreads = config::get_choice("SERIEMA_HYPERTHREADS", hyperthread_choices) == 1
                             ? hyperthread_policy::use
                             : hyperthread_policy::avoid;
  options.bind = config::get_choice("SERIEMA_BIND", bind_choices) == 0;
  if (auto zones = config::raw("SERIEMA_PROCESS_ZONES")) {
    options.process_zones = parse_process_zones(*zones);
  }
  return options;
}

// -----------------------------------------------------------------------------------------------
// placement

struct placement::impl {
  int machines = 0;
  int processes = 0;
  int threads_per_process = 0;
  bool bind = true;
  std::string header;
  std::vector<thread_location> locations;     // by global thread id
  std::vector<int> machine_of_process;        // by global rank
  std::vector<int> zone_of_process;           // by global rank: zone OS index
  std::vector<std::vector<int>> process_pus;  // by global rank: ascending PU OS indexes
  bool oversubscribed = false;
  std::vector<std::string> warnings;
};

placement::placement(const machine_topology& topology, const job_shape& shape,
                     const placement_options& options)
    : placement(topology,
                std::vector<int>(static_cast<std::size_t>(std::max(shape.machines, 0)),
                                 shape.processes_per_machine),
                shape.threads_per_process, options) {}

placement::placement(const machine_topology& topology, std::vector<int> processes_on_machine,
                     int threads_per_process, const placement_options& options) {
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

  // Zones requested by the user, validated against the topology.
  std::vector<int> requested;  // zone indexes
  if (!options.process_zones.empty()) {
    const std::string setting =
        fmt::format("SERIEMA_PROCESS_ZONES={}", join(options.process_zones));
    for (int os : options.process_zones) {
      auto it = std::find_if(topology.zones.begin(), topology.zones.end(),
                             [os](const machine_topology::zone& z) { return z.os_index == os; });
      if (it == topology.zones.end()) {
        throw config_error(fmt::format("{}: {}", setting, zone_choices(topology)));
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
  }

  auto state = std::make_shared<impl>();
  state->machines = static_cast<int>(processes_on_machine.size());
  state->processes = static_cast<int>(total_processes);
  state->threads_per_process = threads_per_process;
  state->bind = options.bind;
  state->locations.resize(static_cast<std::size_t>(total_threads));
  state->machine_of_process.resize(static_cast<std::size_t>(total_processes));
  state->zone_of_process.resize(static_cast<std::size_t>(total_processes));
  state->process_pus.resize(static_cast<std::size_t>(total_processes));

  // Machines with the same process count get the same plan: compute it once per count.
  const planner plan_maker(topology, options.hyperthreads);
  std::map<int, machine_plan> plans;
  std::map<int, std::vector<int>> machines_with;  // process count -> machines, for the notes
  std::vector<int> shape_order;                   // process counts in order of first use
  const int zone_count = static_cast<int>(topology.zones.size());
  int rank = 0;
  for (int m = 0; m < state->machines; ++m) {
    const int local = processes_on_machine[static_cast<std::size_t>(m)];
    auto [it, inserted] = plans.try_emplace(local);
    if (inserted) {
      std::vector<int> zone_index(static_cast<std::size_t>(local));
      for (int i = 0; i < local; ++i) {
        zone_index[static_cast<std::size_t>(i)] =
            requested.empty() ? static_cast<int>(static_cast<long long>(i) * zone_count / local)
            : requested.size() == 1 ? requested.front()
                                    : requested[static_cast<std::size_t>(i)];
      }
      it->second = plan_maker.plan(zone_index, threads_per_process);
      shape_order.push_back(local);
    }
    machines_with[local].push_back(m);
    const machine_plan& plan = it->second;
    for (int i = 0; i < local; ++i, ++rank) {
      const auto r = static_cast<std::size_t>(rank);
      const int zone =
          topology.zones[static_cast<std::size_t>(plan.zone_index[static_cast<std::size_t>(i)])]
              .os_index;
      state->machine_of_process[r] = m;
      state->zone_of_process[r] = zone;
      const auto& pus = plan.thread_pus[static_cast<std::size_t>(i)];
      for (int t = 0; t < threads_per_process; ++t) {
        state->locations[r * static_cast<std::size_t>(threads_per_process) +
                         static_cast<std::size_t>(t)] = {m, rank, t, zone,
                                                         pus[static_cast<std::size_t>(t)]};
      }
      std::vector<int> sorted = pus;
      std::sort(sorted.begin(), sorted.end());
      sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
      state->process_pus[r] = std::move(sorted);
    }
  }

  std::vector<std::string> zone_lists;
  for (int local : shape_order) {
    const machine_plan& plan = plans[local];
    state->oversubscribed = state->oversubscribed || plan.oversubscribed;
    const std::string label = machines_label(machines_with[local]);
    for (const auto& note : plan.notes)
      state->warnings.push_back(fmt::format("{} ({})", note, label));
    std::vector<int> zones;
    for (int z : plan.zone_index)
      zones.push_back(topology.zones[static_cast<std::size_t>(z)].os_index);
    zone_lists.push_back(shape_order.size() == 1 ? join(zones)
                                                 : fmt::format("{} ({})", join(zones), label));
  }
  std::string job;
  if (shape_order.size() == 1) {
    job = job_shape{state->machines, shape_order.front(), threads_per_process}.to_string();
  } else {
    job = fmt::format("({})x{}", join(processes_on_machine, "+"), threads_per_process);
  }
  std::string zones_text;
  for (std::size_t i = 0; i < zone_lists.size(); ++i) {
    zones_text += (i == 0 ? "" : "; ") + zone_lists[i];
  }
  state->header = fmt::format("job {}: {}, {}, {}; zones: {}", job,
                              counted(state->machines, "machine", "machines"),
                              counted(state->processes, "process", "processes"),
                              counted(total_threads, "thread", "threads"), zones_text);
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
  return out;
}

void placement::bind_process(int process) const {
  if (!impl_->bind) return;
  if (process < 0 || process >= impl_->processes) {
    throw error(fmt::format("bind_process({}): the job has processes 0..{}", process,
                            impl_->processes - 1));
  }
  hwloc_topology_t topology = shared_topology();
  const std::vector<int>& pus = impl_->process_pus[static_cast<std::size_t>(process)];
  bitmap_ptr cpuset = make_cpuset(pus);
  if (!hwloc_bitmap_isincluded(cpuset.get(), hwloc_topology_get_allowed_cpuset(topology))) {
    throw error(fmt::format(
        "bind_process({}): PUs {} are not all usable on this machine ({}); compute the placement "
        "from machine_topology::detect() or set SERIEMA_BIND=none",
        process, join(pus), machine_topology::detect().description));
  }
  if (hwloc_set_cpubind(topology, cpuset.get(), HWLOC_CPUBIND_PROCESS) != 0) {
    const int err = errno;
    throw error(fmt::format(
        "bind_process({}): binding to PUs {} failed: {}; set SERIEMA_BIND=none to run unbound",
        process, join(pus), errno_text(err)));
  }
  // Memory: a one-zone machine has nothing to choose, so membind is skipped there (containers
  // often forbid it). On a NUMA machine a refusal is an error: silent remote memory is the very
  // slowdown placement exists to avoid.
  if (hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_NUMANODE) <= 1) return;
  const int zone = impl_->zone_of_process[static_cast<std::size_t>(process)];
  if (hwloc_get_numanode_obj_by_os_index(topology, static_cast<unsigned>(zone)) == nullptr) {
    throw error(fmt::format(
        "bind_process({}): NUMA zone {} does not exist on this machine; compute the placement "
        "from machine_topology::detect() or set SERIEMA_BIND=none",
        process, zone));
  }
  const hwloc_topology_support* support = hwloc_topology_get_support(topology);
  if (support == nullptr || support->membind == nullptr ||
      (!support->membind->set_thisproc_membind && !support->membind->set_thisthread_membind) ||
      !support->membind->bind_membind) {
    throw error(fmt::format(
        "bind_process({}): this system does not support binding memory to NUMA zone {}; set "
        "SERIEMA_BIND=none to run unbound",
        process, zone));
  }
  bitmap_ptr nodeset = make_bitmap();
  hwloc_bitmap_only(nodeset.get(), static_cast<unsigned>(zone));
  if (hwloc_set_membind(topology, nodeset.get(), HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_BYNODESET) !=
      0) {
    const int err = errno;
    throw error(fmt::format(
        "bind_process({}): binding memory to NUMA zone {} failed: {}; set SERIEMA_BIND=none to "
        "run unbound",
        process, zone, errno_text(err)));
  }
}

void placement::pin_thread(thread_id id) const {
  if (!impl_->bind) return;
  if (id >= impl_->locations.size()) {
    throw error(
        fmt::format("pin_thread({}): the job has threads 0..{}", id, impl_->locations.size() - 1));
  }
  const int pu = impl_->locations[id].pu;
  hwloc_topology_t topology = shared_topology();
  bitmap_ptr cpuset = make_cpuset({pu});
  if (!hwloc_bitmap_isincluded(cpuset.get(), hwloc_topology_get_allowed_cpuset(topology))) {
    throw error(fmt::format(
        "pin_thread({}): PU {} is not usable on this machine; compute the placement from "
        "machine_topology::detect() or set SERIEMA_BIND=none",
        id, pu));
  }
  if (hwloc_set_cpubind(topology, cpuset.get(), HWLOC_CPUBIND_THREAD) != 0) {
    const int err = errno;
    throw error(
        fmt::format("pin_thread({}): pinning to PU {} failed: {}; set SERIEMA_BIND=none "
                    "to run unpinned",
                    id, pu, errno_text(err)));
  }
}

}  // namespace seriema::fabric

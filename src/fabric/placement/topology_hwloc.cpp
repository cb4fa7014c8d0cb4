// This machine through one process-wide hwloc topology: detecting zones, cores, PUs and network
// devices, and binding processes and threads.
#include "placement/topology_hwloc.hpp"

#include <fmt/format.h>
#include <hwloc.h>
#include <ifaddrs.h>
#include <sys/socket.h>
#include <net/if.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <new>
#include <seriema/base/error.hpp>
#include <string_view>
#include <system_error>

#include "placement/placement_text.hpp"

namespace seriema::fabric {
namespace {

using detail::join;
using detail::topology_counts;

std::string errno_text(int err) {
  return std::generic_category().message(err);
}


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
    // I/O objects too, for the network devices (PCI devices and their OS devices only; bridges
    // are kept where they carry locality). Without this hwloc reports no device at all.
    hwloc_topology_set_io_types_filter(topology_, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
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

// Interface names that are up, running, not loopback and have an IP address: what UCX's tcp
// transport can use (a bond's slaves, for instance, have no address and are left out).
std::vector<std::string> usable_interfaces() {
  std::vector<std::string> names;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return names;  // then no interface is offered: UCX chooses
  for (const ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr) continue;
    const int family = entry->ifa_addr->sa_family;
    const unsigned flags = entry->ifa_flags;
    if ((family != AF_INET && family != AF_INET6) || (flags & IFF_UP) == 0 ||
        (flags & IFF_RUNNING) == 0 || (flags & IFF_LOOPBACK) != 0) {
      continue;
    }
    if (std::find(names.begin(), names.end(), entry->ifa_name) == names.end()) {
      names.emplace_back(entry->ifa_name);
    }
  }
  ::freeifaddrs(list);
  return names;
}

// The zone (OS index among `zones`) an I/O object is attached to: the only zone in the nodeset of
// its nearest non-I/O ancestor; -1 when that covers several zones or none.
int zone_of_io_object(hwloc_topology_t topology, hwloc_obj_t object,
                      const std::vector<machine_topology::zone>& zones) {
  hwloc_obj_t ancestor = hwloc_get_non_io_ancestor_obj(topology, object);
  if (ancestor == nullptr || ancestor->nodeset == nullptr) return -1;
  int found = -1;
  for (const auto& zone : zones) {
    if (!hwloc_bitmap_isset(ancestor->nodeset, static_cast<unsigned>(zone.os_index))) continue;
    if (found >= 0) return -1;
    found = zone.os_index;
  }
  return found;
}

// The active ports of an RDMA device, from hwloc's "Port<N>State" infos (4 = ACTIVE), named as
// UCX names them ("mlx5_0:1").
std::vector<std::string> active_ports(hwloc_obj_t device) {
  std::vector<std::string> ports;
  for (unsigned port = 1;; ++port) {
    const char* state =
        hwloc_obj_get_info_by_name(device, fmt::format("Port{}State", port).c_str());
    if (state == nullptr) break;
    if (std::string_view(state) == "4") ports.push_back(fmt::format("{}:{}", device->name, port));
  }
  return ports;
}

// The usable network devices hwloc reports: interfaces UCX's tcp can use, active RDMA ports.
void add_net_devices(hwloc_topology_t topology, machine_topology& out) {
  const std::vector<std::string> interfaces = usable_interfaces();
  for (hwloc_obj_t os = nullptr; (os = hwloc_get_next_osdev(topology, os)) != nullptr;) {
    if (os->name == nullptr) continue;
    const int zone = zone_of_io_object(topology, os, out.zones);
    if (os->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK) {
      if (std::find(interfaces.begin(), interfaces.end(), os->name) == interfaces.end()) continue;
      out.net_devices.push_back({os->name, net_device_kind::network, zone});
    } else if (os->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) {
      for (auto& port : active_ports(os)) {
        out.net_devices.push_back({std::move(port), net_device_kind::openfabrics, zone});
      }
    }
  }
}

}  // namespace

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
  add_net_devices(topology, out);
  out.description = topology_counts(out);
  return out;
}

namespace detail {

void bind_process_to(int process, const std::vector<int>& pus, int zone) {
  hwloc_topology_t topology = shared_topology();
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

void pin_thread_to(thread_id id, int pu) {
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

}  // namespace detail
}  // namespace seriema::fabric

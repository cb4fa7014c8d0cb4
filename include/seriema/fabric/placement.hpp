// Topology (hwloc) and placement of a job described as machines x processes-per-machine x
// threads-per-process (the paper's MxPxT): processes bound to NUMA zones, threads pinned to
// cores, a global id for every long-lived thread with O(1) lookup of machine/process/zone, and
// the network devices (NICs) each process restricts UCX to: those nearest its zone.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>
#include <seriema/fabric/detail/settings.hpp>

namespace seriema::fabric {

/// Job-wide id of a long-lived thread, 0..thread_count()-1 (process by process).
using thread_id = std::uint32_t;

/// The kind of a network device, as hwloc classifies its OS device.
enum class net_device_kind {
  network,      ///< a network interface (hwloc "network"); UCX's tcp names it like the OS: "eth0"
  openfabrics,  ///< one port of an RDMA device (hwloc "openfabrics"); UCX names it "mlx5_0:1"
};

/// What this machine looks like (hwloc). Cheap to copy.
struct machine_topology {
  /// One NUMA zone: its memory and its cores.
  struct zone {
    int os_index = 0;  ///< NUMA node number as the OS names it
    std::uint64_t memory_bytes = 0;  ///< memory attached to the zone
    /// Per physical core: the OS indexes of its PUs (hyperthreads).
    std::vector<std::vector<int>> cores;
  };
  /// One usable network device: an interface that is up and running, or an active RDMA port.
  struct net_device {
    std::string name;  ///< as UCX_NET_DEVICES names it: "eth0", "mlx5_0:1"
    net_device_kind kind = net_device_kind::network;  ///< interface or RDMA port
    int zone = -1;  ///< OS index of the NUMA zone it is attached to; -1: unknown or several
  };
  std::vector<zone> zones;  ///< at least one (a machine without NUMA = one zone)
  std::vector<net_device> net_devices;  ///< usable network devices, in hwloc's order (may be none)
  std::string description;  ///< e.g. "1 zone, 2 cores, 2 PUs, 1 network device"

  /// This machine, from the process-wide hwloc topology (loaded once). Only PUs and NUMA nodes
  /// the process may use (cgroup cpusets) are listed; memory-only NUMA nodes are left out.
  /// Throws seriema::error if hwloc fails.
  static machine_topology detect();
  /// A synthetic machine (tests, dry runs): zone z has OS index z; PU OS indexes are numbered
  /// the way Linux usually does on x86, first PUs of all cores 0..C-1, then the siblings.
  static machine_topology uniform(int zone_count, int cores_per_zone, int pus_per_core);
  /// Adds a network device attached to zone `zone_os_index` (an OS index of `zones`, or -1 for
  /// unknown locality) and updates the description; for synthetic machines. Throws error when
  /// the name is empty or the zone does not exist.
  void add_net_device(std::string name, net_device_kind kind, int zone_os_index);

  [[nodiscard]] int core_count() const noexcept;  ///< physical cores over all zones
  [[nodiscard]] int pu_count() const noexcept;    ///< PUs (hyperthreads) over all zones
};

/// "T", "PxT" or "MxPxT" (paper notation; omitted prefixes are 1). Throws config_error.
struct job_shape {
  int machines = 1;               ///< M
  int processes_per_machine = 1;  ///< P
  int threads_per_process = 1;    ///< T
  static job_shape parse(std::string_view text);  ///< "T", "PxT" or "MxPxT"; throws config_error
  [[nodiscard]] std::string to_string() const;  ///< always "MxPxT", e.g. "1x2x4"
  friend bool operator==(const job_shape&, const job_shape&) = default;
};

/// Whether threads take hyperthread siblings: avoid (only after every core has a thread) or use.
enum class hyperthread_policy { avoid, use };

/// Which network devices processes restrict UCX to (SERIEMA_NET_DEVICES).
struct net_device_selection {
  /// What SERIEMA_NET_DEVICES asks for.
  enum class policy {
    automatic,  ///< "auto": the devices nearest each process's zone (see placement)
    none,       ///< "none": leave the choice to UCX
    list,       ///< a comma list: these devices, for every process
  };
  policy mode = policy::automatic;  ///< auto, none or a list
  std::vector<std::string> names;   ///< with policy::list: UCX device names, e.g. "mlx5_0:1"
  /// "auto" (or empty), "none", or a comma list of UCX device names ("mlx5_0:1,eth0"). Throws
  /// config_error naming SERIEMA_NET_DEVICES on an empty item or a character UCX names never hold.
  static net_device_selection parse(std::string_view text);
};

/// How processes and threads are placed (SERIEMA_HYPERTHREADS, SERIEMA_PROCESS_ZONES,
/// SERIEMA_BIND, SERIEMA_NET_DEVICES).
struct placement_options {
  hyperthread_policy hyperthreads = hyperthread_policy::avoid;  ///< SERIEMA_HYPERTHREADS
  /// Zone (OS index) for each local process; empty = spread local processes evenly over zones.
  /// One entry applies to every local process; otherwise one entry per local process.
  std::vector<int> process_zones;
  bool bind = true;  ///< false: compute the placement but never bind/pin (SERIEMA_BIND=none)
  net_device_selection net_devices;  ///< SERIEMA_NET_DEVICES
  /// UCX_NET_DEVICES as the user set it ("" = unset). When set, seriema leaves UCX's device
  /// choice alone (and says so); naming devices in SERIEMA_NET_DEVICES too is refused.
  std::string user_ucx_net_devices;

  /// From SERIEMA_HYPERTHREADS (avoid|use), SERIEMA_PROCESS_ZONES (auto | comma list of zone
  /// numbers), SERIEMA_BIND (yes|none), SERIEMA_NET_DEVICES (auto | none | comma list) and
  /// UCX_NET_DEVICES. Throws config_error naming every bad setting, one line each.
  static placement_options from_environment();
  /// "auto" (or empty) -> {}, "0,1" -> {0, 1}. Throws config_error naming SERIEMA_PROCESS_ZONES.
  static std::vector<int> parse_process_zones(std::string_view text);
};

/// Where one thread of the job runs.
struct thread_location {
  int machine = 0;       ///< machine index (0..machine_count() - 1)
  int process = 0;       ///< global process rank
  int local_thread = 0;  ///< index among the process's threads
  int zone = 0;          ///< NUMA zone (OS index) of the process
  int pu = -1;           ///< OS index of the PU the thread is pinned to
};

/// The whole job's placement, computed identically in every process (pure function of its
/// inputs), so any process can locate any thread. Thread-safety: immutable after construction.
///
/// Rules, per machine: local process i of P goes to zone i*Z/P (or options.process_zones[i]).
/// Its threads take cores of its zone (one PU per core; processes sharing a zone split the cores
/// into disjoint blocks), then free cores of the other zones (nearest zone number first, like the
/// paper's configuration 16 spanning both zones), then hyperthread siblings of the cores it took,
/// then any PU left; beyond that they wrap around onto the same PUs (oversubscription, warned).
/// With hyperthreads=use a core gives all its PUs at once, so threads fill PUs core by core.
///
/// Network devices (SERIEMA_NET_DEVICES=auto), per machine and per device kind (RDMA ports first,
/// then interfaces): a process's candidates are the devices of its own zone; when its zone has
/// none, the devices of unknown locality; when there are none either, every device of the kind.
/// Processes with the same candidates share them out: with n candidates among k processes, the
/// j-th process takes candidate j mod n when n <= k, else the candidates c with c mod k == j (so
/// every candidate is used and none is shared without need). A list in SERIEMA_NET_DEVICES goes to
/// every process unchanged; none, a user-set UCX_NET_DEVICES, or a machine without known devices
/// leave every list empty (UCX chooses).
class placement {
 public:
  /// processes_on_machine[m] = number of processes on machine m (ranks are numbered machine by
  /// machine: machine 0's processes first). All machines are assumed to look like `topology`.
  /// Throws config_error when the options ask for zones that do not exist or the shape is empty.
  placement(const machine_topology& topology, std::vector<int> processes_on_machine,
            int threads_per_process, const placement_options& options);
  /// The same for `shape` (every machine runs shape.processes_per_machine processes).
  placement(const machine_topology& topology, const job_shape& shape,
            const placement_options& options);

  [[nodiscard]] int machine_count() const noexcept;        ///< machines in the job
  [[nodiscard]] int process_count() const noexcept;        ///< processes in the job
  [[nodiscard]] int threads_per_process() const noexcept;  ///< worker threads per process
  [[nodiscard]] thread_id thread_count() const noexcept;   ///< worker threads in the job

  /// The job-wide id of thread `local_thread` of process `process`.
  [[nodiscard]] thread_id global_id(int process, int local_thread) const noexcept;
  [[nodiscard]] const thread_location& locate(thread_id id) const noexcept;  ///< O(1)
  [[nodiscard]] int machine_of_process(int process) const noexcept;  ///< machine of a process
  [[nodiscard]] int zone_of_process(int process) const noexcept;  ///< NUMA zone of a process
  /// PUs the process is bound to (the union of its threads' PUs), ascending.
  [[nodiscard]] const std::vector<int>& process_pus(int process) const noexcept;
  /// The network devices (UCX_NET_DEVICES names) the process restricts UCX to; empty: UCX
  /// chooses (see the class comment and net_device_rule()).
  [[nodiscard]] const std::vector<std::string>& net_devices(int process) const noexcept;
  /// How the network devices were chosen, e.g. "nearest to each process's zone
  /// (SERIEMA_NET_DEVICES=auto)" or "UCX_NET_DEVICES=eth0 set by the user: left to UCX".
  [[nodiscard]] const std::string& net_device_rule() const noexcept;

  /// True when some PU has more than one thread of the job on it (allowed, but reported).
  [[nodiscard]] bool oversubscribed() const noexcept;
  /// Human-readable notes (oversubscription, hyperthreads in use, threads outside their
  /// process's zone), one per line.
  [[nodiscard]] const std::vector<std::string>& warnings() const noexcept;
  /// A header line ("job 1x2x2: 1 machine, 2 processes, 4 threads; zones: 0,0"), one line per
  /// thread ("thread 3: machine 0, process 1, zone 0, pu 1"), the network device rule ("net
  /// devices: ...") and one line per process with devices ("process 1: net devices mlx5_1:1").
  [[nodiscard]] std::string describe() const;

  /// Binds the calling process's CPUs to its PUs and its memory to its zone (no-op when
  /// options.bind is false). Call it before starting threads: on Linux the memory policy is per
  /// thread and inherited by threads created afterwards. Membind is skipped on a one-zone
  /// machine. Throws seriema::error when hwloc refuses.
  void bind_process(int process) const;
  /// Pins the calling thread to its PU (no-op when options.bind is false). Throws seriema::error.
  void pin_thread(thread_id id) const;

 private:
  struct impl;
  std::shared_ptr<const impl> impl_;
};

}  // namespace seriema::fabric

// Topology (hwloc) and placement of a job described as machines x processes-per-machine x
// threads-per-process (the paper's MxPxT): processes bound to NUMA zones, threads pinned to
// cores, a global id for every long-lived thread with O(1) lookup of machine/process/zone.
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

/// What this machine looks like (hwloc). Cheap to copy.
struct machine_topology {
  /// One NUMA zone: its memory and its cores.
  struct zone {
    int os_index = 0;  ///< NUMA node number as the OS names it
    std::uint64_t memory_bytes = 0;  ///< memory attached to the zone
    /// Per physical core: the OS indexes of its PUs (hyperthreads).
    std::vector<std::vector<int>> cores;
  };
  std::vector<zone> zones;  ///< at least one (a machine without NUMA = one zone)
  std::string description;  ///< e.g. "1 zone, 2 cores, 2 PUs"

  /// This machine, from the process-wide hwloc topology (loaded once). Only PUs and NUMA nodes
  /// the process may use (cgroup cpusets) are listed; memory-only NUMA nodes are left out.
  /// Throws seriema::error if hwloc fails.
  static machine_topology detect();
  /// A synthetic machine (tests, dry runs): zone z has OS index z; PU OS indexes are numbered
  /// the way Linux usually does on x86, first PUs of all cores 0..C-1, then the siblings.
  static machine_topology uniform(int zone_count, int cores_per_zone, int pus_per_core);

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

/// How processes and threads are placed (SERIEMA_HYPERTHREADS, SERIEMA_PROCESS_ZONES,
/// SERIEMA_BIND).
struct placement_options {
  hyperthread_policy hyperthreads = hyperthread_policy::avoid;  ///< SERIEMA_HYPERTHREADS
  /// Zone (OS index) for each local process; empty = spread local processes evenly over zones.
  /// One entry applies to every local process; otherwise one entry per local process.
  std::vector<int> process_zones;
  bool bind = true;  ///< false: compute the placement but never bind/pin (SERIEMA_BIND=none)

  /// From SERIEMA_HYPERTHREADS (avoid|use), SERIEMA_PROCESS_ZONES (auto | comma list of zone
  /// numbers), SERIEMA_BIND (yes|none). Throws config_error naming the setting.
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

  /// True when some PU has more than one thread of the job on it (allowed, but reported).
  [[nodiscard]] bool oversubscribed() const noexcept;
  /// Human-readable notes (oversubscription, hyperthreads in use, threads outside their
  /// process's zone), one per line.
  [[nodiscard]] const std::vector<std::string>& warnings() const noexcept;
  /// A header line ("job 1x2x2: 1 machine, 2 processes, 4 threads; zones: 0,0") then one line per
  /// thread ("thread 3: machine 0, process 1, zone 0, pu 1").
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

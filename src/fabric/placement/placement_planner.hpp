// The pure placement planner: which PU each thread of each process of one machine gets, given
// the machine's topology and the zone of each process (no hwloc, no system calls).
#pragma once

#include <seriema/fabric/placement.hpp>
#include <string>
#include <vector>

namespace seriema::fabric::detail {

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
  // `topology` must outlive the planner.
  planner(const machine_topology& topology, hyperthread_policy policy);

  // Processes (zone_index: each one's zone, an index into topology.zones) of `threads` threads:
  // 1. each takes cores of its own zone (processes sharing a zone split its cores into
  //    contiguous disjoint blocks); 2. then free cores of other zones, nearest first, one core
  //    per process per round; 3. (avoid) then hyperthread siblings of its own cores; 4. then
  //    any PU still unused, own zone first; 5. threads take their process's PUs in order,
  //    wrapping around when there are more threads than PUs.
  [[nodiscard]] machine_plan plan(const std::vector<int>& zone_index, int threads) const;

 private:
  struct core_info {
    int zone;
    std::vector<int> pus;
  };
  class assignment;  // one plan() in progress (placement_planner.cpp)

  void add_notes(machine_plan& out, int threads) const;

  const machine_topology& topology_;
  bool avoid_;
  std::vector<core_info> cores_;              // all cores of the machine, zone by zone
  std::vector<std::vector<int>> zone_cores_;  // per zone: indexes into cores_
  std::vector<std::vector<int>> zone_slots_;  // per zone: PUs in hand-out order
  std::vector<int> pu_zone_;                  // PU OS index -> zone index (-1: none)
};

}  // namespace seriema::fabric::detail

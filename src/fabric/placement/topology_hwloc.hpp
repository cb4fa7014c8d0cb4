// This machine through hwloc: binding a process to its PUs and NUMA zone, pinning a thread to
// its PU (machine_topology::detect, in topology_hwloc.cpp, reads the topology the same way).
#pragma once

#include <seriema/fabric/placement.hpp>
#include <vector>

namespace seriema::fabric::detail {

// Binds the calling process to `pus` and, on a NUMA machine, its memory to `zone`. Throws
// seriema::error naming the process and the fix (SERIEMA_BIND=none) when the system refuses.
void bind_process_to(int process, const std::vector<int>& pus, int zone);
// Pins the calling thread (thread `id` of the job) to `pu`; throws like bind_process_to.
void pin_thread_to(thread_id id, int pu);

}  // namespace seriema::fabric::detail

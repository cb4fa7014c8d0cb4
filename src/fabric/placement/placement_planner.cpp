// The pure placement planner (see placement_planner.hpp for the five steps of a plan).
#include "placement/placement_planner.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "placement/placement_text.hpp"

namespace seriema::fabric::detail {

planner::planner(const machine_topology& topology, hyperthread_policy policy)
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

// The state of one plan(): which PUs each process has taken so far. Each step is one member.
class planner::assignment {
 public:
  assignment(const planner& planner, const std::vector<int>& zone_index, int threads)
      : p_(planner),
        need_(static_cast<std::size_t>(threads)),
        procs_(zone_index.size()),
        pu_used_(planner.pu_zone_.size(), 0),
        next_free_(planner.topology_.zones.size(), 0) {
    for (std::size_t p = 0; p < procs_.size(); ++p) procs_[p].zone = zone_index[p];
  }

  // 1. Cores of the process's own zone; processes sharing a zone split its cores into
  //    contiguous disjoint blocks (the first C % k processes get one more core).
  void take_own_zone_cores() {
    for (std::size_t z = 0; z < next_free_.size(); ++z) {
      std::vector<std::size_t> members;
      for (std::size_t p = 0; p < procs_.size(); ++p) {
        if (static_cast<std::size_t>(procs_[p].zone) == z) members.push_back(p);
      }
      if (members.empty()) continue;
      const std::size_t cores = p_.zone_cores_[z].size();
      for (std::size_t j = 0; j < members.size(); ++j) {
        std::size_t share = cores / members.size() + (j < cores % members.size() ? 1 : 0);
        for (std::size_t taken = 0;
             taken < share && procs_[members[j]].pus.size() < need_ && next_free_[z] < cores;
             ++taken) {
          take_core(members[j], p_.zone_cores_[z][next_free_[z]++]);
        }
      }
    }
  }

  // 2. Free cores of other zones, nearest zone number first (cyclically), one core per
  //    process per round so that spilling processes share fairly.
  void spill_to_other_zones() {
    const std::size_t zone_count = next_free_.size();
    for (bool progress = true; progress;) {
      progress = false;
      for (std::size_t p = 0; p < procs_.size(); ++p) {
        if (procs_[p].pus.size() >= need_) continue;
        for (std::size_t d = 1; d < zone_count; ++d) {
          std::size_t z = (static_cast<std::size_t>(procs_[p].zone) + d) % zone_count;
          if (next_free_[z] < p_.zone_cores_[z].size()) {
            take_core(p, p_.zone_cores_[z][next_free_[z]++]);
            progress = true;
            break;
          }
        }
      }
    }
  }

  // 3. (avoid) Hyperthread siblings of the cores each process took, so that no two processes
  //    share a physical core.
  void add_own_siblings() {
    for (auto& proc : procs_) {
      for (std::size_t s = 1; proc.pus.size() < need_; ++s) {
        bool any = false;
        for (int c : proc.cores) {
          const auto& pus = p_.cores_[static_cast<std::size_t>(c)].pus;
          if (s >= pus.size()) continue;
          any = true;
          if (proc.pus.size() < need_ && !pu_used_[static_cast<std::size_t>(pus[s])]) {
            add_pu(proc, pus[s]);
          }
        }
        if (!any) break;
      }
    }
  }

  // 4. Any PU still unused (siblings of cores whose owner needed fewer threads), own zone
  //    first, round robin over the processes that still need PUs.
  void fill_unused_pus() {
    const std::size_t zone_count = next_free_.size();
    std::vector<std::size_t> slot_cursor(zone_count, 0);
    for (bool progress = true; progress;) {
      progress = false;
      for (auto& proc : procs_) {
        if (proc.pus.size() >= need_) continue;
        for (std::size_t d = 0; d < zone_count; ++d) {
          std::size_t z = (static_cast<std::size_t>(proc.zone) + d) % zone_count;
          const auto& slots = p_.zone_slots_[z];
          std::size_t& cursor = slot_cursor[z];
          while (cursor < slots.size() && pu_used_[static_cast<std::size_t>(slots[cursor])]) {
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
  }

  // 5. Threads take their process's PUs in order and wrap around when there are more threads
  //    than PUs (a process left without any PU wraps around its zone's PUs).
  [[nodiscard]] std::vector<std::vector<int>> thread_pus() const {
    std::vector<std::vector<int>> out;
    for (const auto& proc : procs_) {
      const std::vector<int>& pool =
          proc.pus.empty() ? p_.zone_slots_[static_cast<std::size_t>(proc.zone)] : proc.pus;
      std::vector<int> pus(need_);
      for (std::size_t t = 0; t < need_; ++t) pus[t] = pool[t % pool.size()];
      out.push_back(std::move(pus));
    }
    return out;
  }

 private:
  struct process_state {
    int zone = 0;
    std::vector<int> cores;  // owned cores, in the order taken
    std::vector<int> pus;    // PUs for its threads, in thread order
  };

  void add_pu(process_state& proc, int pu) {
    proc.pus.push_back(pu);
    pu_used_[static_cast<std::size_t>(pu)] = 1;
  }

  void take_core(std::size_t p, int c) {
    process_state& proc = procs_[p];
    proc.cores.push_back(c);
    for (int pu : p_.cores_[static_cast<std::size_t>(c)].pus) {
      if (proc.pus.size() >= need_) break;
      add_pu(proc, pu);
      if (p_.avoid_) break;  // one PU per core until every core is used
    }
  }

  const planner& p_;
  std::size_t need_;
  std::vector<process_state> procs_;
  std::vector<char> pu_used_;
  std::vector<std::size_t> next_free_;  // per zone: its cores before this are owned
};

machine_plan planner::plan(const std::vector<int>& zone_index, int threads) const {
  assignment a(*this, zone_index, threads);
  a.take_own_zone_cores();
  a.spill_to_other_zones();
  if (avoid_) a.add_own_siblings();
  a.fill_unused_pus();
  machine_plan out;
  out.zone_index = zone_index;
  out.thread_pus = a.thread_pus();
  add_notes(out, threads);
  return out;
}

void planner::add_notes(machine_plan& out, int threads) const {
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

}  // namespace seriema::fabric::detail

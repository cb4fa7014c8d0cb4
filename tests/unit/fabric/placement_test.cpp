// Tests for job shapes, placement options and the placement of MxPxT jobs on synthetic
// topologies (the paper's 2 zones x 8 cores x 2 PUs machine, a 2-core VM), plus detection and
// binding on the real machine.
#include <gtest/gtest.h>
#include <hwloc.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <seriema/base/error.hpp>
#include <seriema/fabric/placement.hpp>
#include <set>
#include <string>
#include <vector>

namespace seriema::fabric {
namespace {

// ------------------------------------------------------------------------------------------
// job_shape

TEST(JobShape, ParsesPaperNotation) {
  EXPECT_EQ(job_shape::parse("8"), (job_shape{1, 1, 8}));
  EXPECT_EQ(job_shape::parse("2x4"), (job_shape{1, 2, 4}));
  EXPECT_EQ(job_shape::parse("4x2x8"), (job_shape{4, 2, 8}));
  EXPECT_EQ(job_shape::parse(" 3X2x16 "), (job_shape{3, 2, 16}));
}

TEST(JobShape, ToStringRoundTrips) {
  EXPECT_EQ(job_shape::parse("2x4").to_string(), "1x2x4");
  EXPECT_EQ(job_shape::parse("16").to_string(), "1x1x16");
  for (const char* text : {"1", "2x4", "3x2x8"}) {
    job_shape shape = job_shape::parse(text);
    EXPECT_EQ(job_shape::parse(shape.to_string()), shape);
  }
}

TEST(JobShape, RejectsMalformedText) {
  for (const char* text : {"0", "2x", "x2", "1x2x3x4", "-1", "2x-3", "+2", "abc", "", "2x0", "2xx3",
                           "2 x 3", "99999999999", "1.5", "2x4junk"}) {
    EXPECT_THROW(job_shape::parse(text), config_error) << text;
  }
  try {
    job_shape::parse("2xx3");
    FAIL() << "2xx3 was accepted";
  } catch (const config_error& e) {
    EXPECT_STREQ(e.what(), "placement '2xx3': expected T, PxT or MxPxT with positive integers");
  }
}

// ------------------------------------------------------------------------------------------
// placement_options

// Sets an environment variable for the scope of a test and restores the previous state.
class scoped_env {
 public:
  scoped_env(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    ::setenv(name, value, 1);
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;
  ~scoped_env() {
    if (had_) {
      ::setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_;
  std::string old_;
  bool had_ = false;
};

TEST(PlacementOptions, DefaultsWhenUnset) {
  ::unsetenv("SERIEMA_HYPERTHREADS");
  ::unsetenv("SERIEMA_PROCESS_ZONES");
  ::unsetenv("SERIEMA_BIND");
  placement_options options = placement_options::from_environment();
  EXPECT_EQ(options.hyperthreads, hyperthread_policy::avoid);
  EXPECT_TRUE(options.process_zones.empty());
  EXPECT_TRUE(options.bind);
}

TEST(PlacementOptions, ReadsTheEnvironment) {
  scoped_env ht("SERIEMA_HYPERTHREADS", "use");
  scoped_env zones("SERIEMA_PROCESS_ZONES", "1, 0");
  scoped_env bind("SERIEMA_BIND", "none");
  placement_options options = placement_options::from_environment();
  EXPECT_EQ(options.hyperthreads, hyperthread_policy::use);
  EXPECT_EQ(options.process_zones, (std::vector<int>{1, 0}));
  EXPECT_FALSE(options.bind);
}

TEST(PlacementOptions, AutoMeansSpread) {
  scoped_env zones("SERIEMA_PROCESS_ZONES", "auto");
  EXPECT_TRUE(placement_options::from_environment().process_zones.empty());
  EXPECT_EQ(placement_options::parse_process_zones("3"), (std::vector<int>{3}));
}

TEST(PlacementOptions, MalformedZoneListsNameTheSetting) {
  for (const char* text : {"0,,1", "a", "0,", ",1", "-1", "1;2", "0,1x"}) {
    scoped_env zones("SERIEMA_PROCESS_ZONES", text);
    try {
      (void)placement_options::from_environment();
      ADD_FAILURE() << text << " was accepted";
    } catch (const config_error& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("SERIEMA_PROCESS_ZONES=") + text +
                    ": expected auto or a comma list of NUMA zone numbers such as 0,1");
    }
  }
}

TEST(PlacementOptions, BadChoicesNameTheSetting) {
  {
    scoped_env ht("SERIEMA_HYPERTHREADS", "sometimes");
    try {
      (void)placement_options::from_environment();
      ADD_FAILURE() << "accepted";
    } catch (const config_error& e) {
      EXPECT_NE(std::string(e.what()).find("SERIEMA_HYPERTHREADS"), std::string::npos);
    }
  }
  scoped_env bind("SERIEMA_BIND", "maybe");
  EXPECT_THROW((void)placement_options::from_environment(), config_error);
}

// ------------------------------------------------------------------------------------------
// Placement on the paper's machine: 2 NUMA zones x 8 cores x 2 hyperthreads. uniform() numbers
// PUs like Linux on x86: core g (0..15) has PUs g and 16 + g; cores 0..7 are zone 0.

constexpr int paper_cores = 16;
int core_of(int pu) {
  return pu % paper_cores;
}
int zone_of_pu(int pu) {
  return core_of(pu) / 8;
}

placement make(const machine_topology& topology, const char* shape,
               placement_options options = {}) {
  return placement(topology, job_shape::parse(shape), options);
}

std::vector<int> pus_of_process(const placement& p, int process) {
  std::vector<int> pus;
  for (int t = 0; t < p.threads_per_process(); ++t)
    pus.push_back(p.locate(p.global_id(process, t)).pu);
  return pus;
}

bool has_warning(const placement& p, const std::string& part) {
  return std::any_of(p.warnings().begin(), p.warnings().end(),
                     [&](const std::string& w) { return w.find(part) != std::string::npos; });
}

TEST(PaperMachine, SingleProcessUpToEightStaysInZoneZeroOnDistinctCores) {
  const machine_topology topology = machine_topology::uniform(2, 8, 2);
  for (const char* shape : {"1", "2", "4", "8"}) {
    placement p = make(topology, shape);
    std::set<int> cores;
    for (int pu : pus_of_process(p, 0)) {
      EXPECT_EQ(zone_of_pu(pu), 0) << shape;
      EXPECT_LT(pu, paper_cores) << "a hyperthread sibling was used for " << shape;
      cores.insert(core_of(pu));
    }
    EXPECT_EQ(static_cast<int>(cores.size()), p.threads_per_process()) << shape;
    EXPECT_EQ(p.zone_of_process(0), 0);
    EXPECT_FALSE(p.oversubscribed());
    EXPECT_TRUE(p.warnings().empty()) << shape;
  }
}

TEST(PaperMachine, SixteenSpansBothZonesWithoutHyperthreads) {
  placement p = make(machine_topology::uniform(2, 8, 2), "16");
  std::set<int> cores;
  int in_zone[2] = {0, 0};
  for (int pu : pus_of_process(p, 0)) {
    EXPECT_LT(pu, paper_cores);
    cores.insert(core_of(pu));
    ++in_zone[zone_of_pu(pu)];
  }
  EXPECT_EQ(cores.size(), 16u);
  EXPECT_EQ(in_zone[0], 8);
  EXPECT_EQ(in_zone[1], 8);
  EXPECT_EQ(p.zone_of_process(0), 0);
  EXPECT_FALSE(p.oversubscribed());
  EXPECT_FALSE(has_warning(p, "hyperthreads"));
  EXPECT_TRUE(has_warning(p, "local process 0 (zone 0): 8 of 16 threads run on cores of zone 1"));
}

TEST(PaperMachine, ThirtyTwoUsesHyperthreadsSixteenPerZone) {
  placement p = make(machine_topology::uniform(2, 8, 2), "32");
  std::set<int> pus;
  int in_zone[2] = {0, 0};
  for (int pu : pus_of_process(p, 0)) {
    pus.insert(pu);
    ++in_zone[zone_of_pu(pu)];
  }
  EXPECT_EQ(pus.size(), 32u);
  EXPECT_EQ(in_zone[0], 16);
  EXPECT_EQ(in_zone[1], 16);
  EXPECT_FALSE(p.oversubscribed());
  EXPECT_TRUE(has_warning(p, "hyperthreads in use: 32 threads on 16 cores"));
}

TEST(PaperMachine, TwoProcessesGetTheirOwnZoneAndDisjointCores) {
  for (const char* shape : {"2x4", "2x8"}) {
    placement p = make(machine_topology::uniform(2, 8, 2), shape);
    EXPECT_EQ(p.zone_of_process(0), 0);
    EXPECT_EQ(p.zone_of_process(1), 1);
    std::set<int> cores;
    for (int process = 0; process < 2; ++process) {
      for (int pu : pus_of_process(p, process)) {
        EXPECT_EQ(zone_of_pu(pu), process) << shape;
        EXPECT_LT(pu, paper_cores) << shape;
        cores.insert(core_of(pu));
      }
    }
    EXPECT_EQ(static_cast<int>(cores.size()), 2 * p.threads_per_process()) << shape;
    EXPECT_TRUE(p.warnings().empty()) << shape;
  }
}

TEST(PaperMachine, TwoBySixteenUsesHyperthreadsInOwnZoneAndWarns) {
  placement p = make(machine_topology::uniform(2, 8, 2), "2x16");
  std::set<int> all;
  for (int process = 0; process < 2; ++process) {
    std::set<int> pus;
    for (int pu : pus_of_process(p, process)) {
      EXPECT_EQ(zone_of_pu(pu), process);
      pus.insert(pu);
      all.insert(pu);
    }
    EXPECT_EQ(pus.size(), 16u);
  }
  EXPECT_EQ(all.size(), 32u);
  EXPECT_FALSE(p.oversubscribed());
  EXPECT_TRUE(has_warning(p, "hyperthreads in use"));
  EXPECT_FALSE(has_warning(p, "run on cores of zone"));
}

TEST(PaperMachine, MoreThreadsThanPusOversubscribesAndWarns) {
  placement p = make(machine_topology::uniform(2, 8, 2), "2x17");
  EXPECT_TRUE(p.oversubscribed());
  EXPECT_TRUE(has_warning(p, "oversubscribed: 17 threads on 16 PUs of zone 0 (machine 0)"));
  EXPECT_TRUE(has_warning(p, "oversubscribed: 17 threads on 16 PUs of zone 1 (machine 0)"));
}

TEST(PaperMachine, ProcessesSharingAZoneGetDisjointCores) {
  placement_options options;
  options.process_zones = {0};
  placement p = make(machine_topology::uniform(2, 8, 2), "2x4", options);
  std::set<int> cores;
  for (int process = 0; process < 2; ++process) {
    EXPECT_EQ(p.zone_of_process(process), 0);
    for (int pu : pus_of_process(p, process)) {
      EXPECT_EQ(zone_of_pu(pu), 0);
      cores.insert(core_of(pu));
    }
  }
  EXPECT_EQ(cores.size(), 8u);
  EXPECT_TRUE(p.warnings().empty());
}

TEST(PaperMachine, FourProcessesSpreadTwoPerZone) {
  placement p = make(machine_topology::uniform(2, 8, 2), "4x4");
  const int expected_zone[] = {0, 0, 1, 1};
  std::set<int> cores;
  for (int process = 0; process < 4; ++process) {
    EXPECT_EQ(p.zone_of_process(process), expected_zone[process]);
    for (int pu : pus_of_process(p, process)) {
      EXPECT_EQ(zone_of_pu(pu), expected_zone[process]);
      cores.insert(core_of(pu));
    }
  }
  EXPECT_EQ(cores.size(), 16u);
}

TEST(PaperMachine, ExplicitZonesPerProcess) {
  placement_options options;
  options.process_zones = {1, 0};
  placement p = make(machine_topology::uniform(2, 8, 2), "2x2", options);
  EXPECT_EQ(p.zone_of_process(0), 1);
  EXPECT_EQ(p.zone_of_process(1), 0);
  for (int pu : pus_of_process(p, 0)) EXPECT_EQ(zone_of_pu(pu), 1);
  for (int pu : pus_of_process(p, 1)) EXPECT_EQ(zone_of_pu(pu), 0);
  EXPECT_EQ(p.locate(0).zone, 1);
}

TEST(PaperMachine, UseHyperthreadsFillsPusCoreByCore) {
  placement_options options;
  options.hyperthreads = hyperthread_policy::use;
  placement p = make(machine_topology::uniform(2, 8, 2), "4", options);
  EXPECT_EQ(pus_of_process(p, 0), (std::vector<int>{0, 16, 1, 17}));
  EXPECT_TRUE(has_warning(p, "hyperthreads in use: 4 threads on 2 cores"));
  EXPECT_FALSE(p.oversubscribed());
}

TEST(PaperMachine, AvoidPinsOnePuPerCoreInOrder) {
  placement p = make(machine_topology::uniform(2, 8, 2), "4");
  EXPECT_EQ(pus_of_process(p, 0), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(p.process_pus(0), (std::vector<int>{0, 1, 2, 3}));
}

// ------------------------------------------------------------------------------------------
// Placement on a small VM like the build machine: 1 zone x 2 cores x 1 PU.

TEST(SmallMachine, TwoThreadsOnTwoCores) {
  placement p = make(machine_topology::uniform(1, 2, 1), "2");
  EXPECT_EQ(pus_of_process(p, 0), (std::vector<int>{0, 1}));
  EXPECT_TRUE(p.warnings().empty());
}

TEST(SmallMachine, TwoProcessesShareTheZoneOnDisjointCores) {
  placement p = make(machine_topology::uniform(1, 2, 1), "2x1");
  EXPECT_EQ(p.process_pus(0), (std::vector<int>{0}));
  EXPECT_EQ(p.process_pus(1), (std::vector<int>{1}));
  EXPECT_FALSE(p.oversubscribed());
}

TEST(SmallMachine, OversubscriptionWrapsAroundAndWarns) {
  placement p = make(machine_topology::uniform(1, 2, 1), "6");
  EXPECT_EQ(pus_of_process(p, 0), (std::vector<int>{0, 1, 0, 1, 0, 1}));
  EXPECT_TRUE(p.oversubscribed());
  ASSERT_EQ(p.warnings().size(), 1u);
  EXPECT_EQ(p.warnings()[0], "oversubscribed: 6 threads on 2 PUs of zone 0 (machine 0)");
}

TEST(SmallMachine, ProcessWithoutACoreOfItsOwnStillGetsAPu) {
  placement p = make(machine_topology::uniform(1, 1, 1), "3x1");
  for (int process = 0; process < 3; ++process)
    EXPECT_EQ(p.process_pus(process), (std::vector<int>{0}));
  EXPECT_TRUE(p.oversubscribed());
}

TEST(SmallMachine, DescribeListsEveryThread) {
  placement p = make(machine_topology::uniform(1, 2, 1), "1x2x2");
  const std::string text = p.describe();
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "job 1x2x2: 1 machine, 2 processes, 4 threads; zones: 0,0");
  EXPECT_NE(text.find("\nthread 0: machine 0, process 0, zone 0, pu 0\n"), std::string::npos);
  EXPECT_NE(text.find("\nthread 3: machine 0, process 1, zone 0, pu 1\n"), std::string::npos);
  // Header, 4 threads, and the network device rule (no device on this synthetic machine).
  EXPECT_NE(text.find("\nnet devices: left to UCX: hwloc reports no usable network device\n"),
            std::string::npos);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 6);
}

TEST(SmallMachine, ZoneThatDoesNotExistIsRejected) {
  placement_options options;
  options.process_zones = {3};
  try {
    make(machine_topology::uniform(1, 2, 1), "2", options);
    FAIL() << "zone 3 was accepted";
  } catch (const config_error& e) {
    EXPECT_STREQ(e.what(),
                 "SERIEMA_PROCESS_ZONES=3: this machine has 1 NUMA zone (0); choose zones in 0..0");
  }
}

TEST(SmallMachine, ZoneListOfTheWrongLengthIsRejected) {
  placement_options options;
  options.process_zones = {0, 0, 0};
  try {
    make(machine_topology::uniform(1, 2, 1), "2x1", options);
    FAIL() << "3 zones for 2 processes were accepted";
  } catch (const config_error& e) {
    EXPECT_STREQ(e.what(),
                 "SERIEMA_PROCESS_ZONES=0,0,0: 3 zones listed for 2 processes on machine 0; list "
                 "one zone per process of a machine, or a single zone for all");
  }
}

TEST(SmallMachine, EmptyShapesAreRejected) {
  const machine_topology topology = machine_topology::uniform(1, 2, 1);
  EXPECT_THROW(placement(topology, std::vector<int>{}, 1, {}), config_error);
  EXPECT_THROW(placement(topology, std::vector<int>{1, 0}, 1, {}), config_error);
  EXPECT_THROW(placement(topology, std::vector<int>{1}, 0, {}), config_error);
}

// ------------------------------------------------------------------------------------------
// Global ids and lookups.

TEST(Placement, LocateRoundTripsForEveryId) {
  placement p = make(machine_topology::uniform(2, 4, 2), "3x2x5");
  ASSERT_EQ(p.machine_count(), 3);
  ASSERT_EQ(p.process_count(), 6);
  ASSERT_EQ(p.thread_count(), 30u);
  for (thread_id id = 0; id < p.thread_count(); ++id) {
    const thread_location& at = p.locate(id);
    EXPECT_EQ(p.global_id(at.process, at.local_thread), id);
    EXPECT_EQ(at.machine, at.process / 2);  // ranks numbered machine by machine
    EXPECT_EQ(p.machine_of_process(at.process), at.machine);
    EXPECT_EQ(p.zone_of_process(at.process), at.zone);
    EXPECT_EQ(at.zone, at.process % 2);
    const auto& pus = p.process_pus(at.process);
    EXPECT_TRUE(std::binary_search(pus.begin(), pus.end(), at.pu));
  }
}

TEST(Placement, MachinesMayHoldDifferentProcessCounts) {
  placement p(machine_topology::uniform(2, 4, 1), std::vector<int>{2, 1}, 3, {});
  EXPECT_EQ(p.process_count(), 3);
  EXPECT_EQ(p.machine_of_process(0), 0);
  EXPECT_EQ(p.machine_of_process(1), 0);
  EXPECT_EQ(p.machine_of_process(2), 1);
  EXPECT_EQ(p.zone_of_process(1), 1);
  EXPECT_EQ(p.zone_of_process(2), 0);
  EXPECT_EQ(p.locate(p.global_id(2, 2)).machine, 1);
  const std::string text = p.describe();
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "job (2+1)x3: 2 machines, 3 processes, 9 threads; zones: 0,1 (machine 0); 0 "
            "(machine 1)");
}

TEST(Placement, WarningsNameEveryMachineAlike) {
  placement p = make(machine_topology::uniform(1, 2, 1), "4x1x3");
  ASSERT_EQ(p.warnings().size(), 1u);
  EXPECT_EQ(p.warnings()[0], "oversubscribed: 3 threads on 2 PUs of zone 0 (machines 0-3)");
}

// ------------------------------------------------------------------------------------------
// The real machine.

std::set<int> affinity_of_this_thread() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(set), &set), 0);
  std::set<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.insert(cpu);
  }
  return cpus;
}

// Restores the calling thread's CPU affinity and memory policy when the test ends.
class affinity_guard {
 public:
  affinity_guard() {
    CPU_ZERO(&saved_);
    ok_ = sched_getaffinity(0, sizeof(saved_), &saved_) == 0;
  }
  affinity_guard(const affinity_guard&) = delete;
  affinity_guard& operator=(const affinity_guard&) = delete;
  ~affinity_guard() {
    if (ok_) sched_setaffinity(0, sizeof(saved_), &saved_);
    hwloc_topology_t topology = nullptr;
    if (hwloc_topology_init(&topology) == 0) {
      if (hwloc_topology_load(topology) == 0) {
        hwloc_set_membind(topology, hwloc_topology_get_complete_nodeset(topology),
                          HWLOC_MEMBIND_DEFAULT, HWLOC_MEMBIND_BYNODESET);
      }
      hwloc_topology_destroy(topology);
    }
  }

 private:
  cpu_set_t saved_;
  bool ok_ = false;
};

TEST(RealMachine, DetectFindsZonesAndCores) {
  machine_topology topology = machine_topology::detect();
  ASSERT_GE(topology.zones.size(), 1u);
  EXPECT_GE(topology.core_count(), 1);
  EXPECT_GE(topology.pu_count(), topology.core_count());
  EXPECT_FALSE(topology.description.empty());
  std::set<int> pus;
  for (const auto& zone : topology.zones) {
    for (const auto& core : zone.cores) {
      ASSERT_FALSE(core.empty());
      for (int pu : core) EXPECT_TRUE(pus.insert(pu).second) << "PU " << pu << " listed twice";
    }
  }
  std::cout << "this machine: " << topology.description << "\n";
}

TEST(RealMachine, BindProcessAndPinThread) {
  affinity_guard guard;
  const machine_topology topology = machine_topology::detect();
  const int threads = std::min(2, topology.core_count());
  placement p(topology, std::vector<int>{1}, threads, {});
  p.bind_process(0);
  const auto& expected = p.process_pus(0);
  EXPECT_EQ(affinity_of_this_thread(), std::set<int>(expected.begin(), expected.end()));
  for (int t = 0; t < threads; ++t) {
    const thread_id id = p.global_id(0, t);
    p.pin_thread(id);
    EXPECT_EQ(affinity_of_this_thread(), std::set<int>{p.locate(id).pu});
  }
}

TEST(RealMachine, BindNoneLeavesAffinityAlone) {
  affinity_guard guard;
  const std::set<int> before = affinity_of_this_thread();
  placement_options options;
  options.bind = false;
  placement p(machine_topology::detect(), std::vector<int>{1}, 1, options);
  p.bind_process(0);
  p.pin_thread(0);
  EXPECT_EQ(affinity_of_this_thread(), before);
}

TEST(RealMachine, BindingToAPuThatDoesNotExistThrows) {
  affinity_guard guard;
  const std::set<int> before = affinity_of_this_thread();
  machine_topology fake;
  fake.zones.push_back({0, 0, {{100000}}});
  placement p(fake, std::vector<int>{1}, 1, {});
  EXPECT_THROW(p.bind_process(0), seriema::error);
  EXPECT_THROW(p.pin_thread(0), seriema::error);
  EXPECT_EQ(affinity_of_this_thread(), before);
}

}  // namespace
}  // namespace seriema::fabric

// Shared spaces across the worker threads of one or several processes: a write released before
// a barrier is read after it everywhere (message passing, producer/consumer with reads served by
// the last releaser), several writers of one block keep every byte (false sharing), homes
// migrate and come back, allocations never overlap; a mutex's hand-over carries what was written
// under it (counters and logs, also when the notices overflow a record), acquire/release atomics
// pass messages without a barrier, a read without an acquire may be stale; the litmus tests
// release consistency must pass (load buffering, write-to-read causality through a chain of
// hand-overs and through a standalone acquire, read-read coherence) and one it may fail (store
// buffering); logical leases held, renewed and expired by hand-overs' floors; parallel_for covers
// its range once; a fault-driven space needs no spans, and a fault outside it ends the process
// as without it; and bad input is refused before anything moves (out-of-range spans, mutexes
// and atomics, full spaces, bad or mismatched options, an unlock by a thread without the lock).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <atomic>
#include <new>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <seriema/base/error.hpp>
#include <seriema/dsm/space.hpp>
#include <seriema/fabric/runtime.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <cstdlib>
#include <stdexcept>
#include <tuple>
#include <string>
#include <vector>

#include "support/mp_main.hpp"

using namespace seriema;
using fabric::thread_context;

namespace {

constexpr auto phase = std::chrono::seconds(60);

fabric::deadline_clock::time_point phase_end() { return fabric::deadline_clock::now() + phase; }

// The protocol every test's space uses: TEST_DSM_PROTOCOL=fixed runs the suite on the
// fixed-home baseline (tests.cmake), else the seed's floating home.
bool fixed_home() {
  const char* p = std::getenv("TEST_DSM_PROTOCOL");
  return p != nullptr && std::string(p) == "fixed";
}

dsm::space_options small_space() {
  dsm::space_options o;
  o.bytes = std::size_t{1} << 20;
  o.block_bytes = 4096;
  o.protocol = fixed_home() ? dsm::coherence_protocol::fixed_home
                            : dsm::coherence_protocol::floating_home;
  return o;
}

std::uint8_t byte_of(std::uint64_t writer, std::uint64_t round, std::uint64_t i) {
  return static_cast<std::uint8_t>(writer * 37 + round * 101 + i * 13 + 1);
}

// Every worker writes the bytes i of a 5-block array with i % workers == its turn (the turn
// rotates each round, so every block has every worker among its writers and its home moves),
// then after the barrier every worker checks every byte.
TEST(Dsm, FalseSharingKeepsEveryWritersBytes) {
  dsm::space sp(test::rt(), small_space(), phase_end());
  const std::size_t n = 5 * sp.block_bytes() + 123;
  auto* shared = reinterpret_cast<std::uint8_t*>(sp.base());
  test::rt().run([&](thread_context& me) {
    const std::uint64_t workers = me.thread_count();
    for (std::uint64_t round = 0; round < 12; ++round) {
      const std::span<std::uint8_t> mine = sp.write(me, shared, n);
      for (std::size_t i = 0; i < n; ++i) {
        if ((i + round) % workers == me.id()) mine[i] = byte_of(me.id(), round, i);
      }
      sp.barrier(me, phase_end());
      const std::span<const std::uint8_t> all = sp.read(me, shared, n);
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t writer = (i + round) % workers;
        ASSERT_EQ(all[i], byte_of(writer, round, i)) << "round " << round << " byte " << i;
      }
      sp.barrier(me, phase_end());
    }
  });
  // Job-wide: a process that released every block last in every round merged the others'
  // bytes at its release and never needs a fetch; the earlier releasers do.
  const std::vector<dsm::space_counters> all = test::allgather_value(sp.counters());
  dsm::space_counters sum;
  for (const auto& c : all) {
    sum.migrations += c.migrations;
    sum.invalidations += c.invalidations;
    sum.fetches += c.fetches;
    sum.releases += c.releases;
  }
  if (test::rt().size() > 1) {
    EXPECT_GT(sum.migrations, 0u);
    EXPECT_GT(sum.invalidations, 0u);
    EXPECT_GT(sum.fetches, 0u);
  }
  EXPECT_GT(sum.releases, 0u);
}

// Round r: worker r % workers produces 3 blocks and an unaligned tail; after the barrier every
// other worker consumes them. The producer is the last releaser, so reads are fast reads.
TEST(Dsm, ConsumersReadWhatTheProducerReleased) {
  dsm::space sp(test::rt(), small_space(), phase_end());
  const std::size_t n = 3 * sp.block_bytes() / 8 + 50;
  auto* shared = reinterpret_cast<std::uint64_t*>(sp.base() + 8 * sp.block_bytes());
  test::rt().run([&](thread_context& me) {
    const std::uint64_t workers = me.thread_count();
    for (std::uint64_t round = 0; round < 16; ++round) {
      if (round % workers == me.id()) {
        const std::span<std::uint64_t> out = sp.write(me, shared, n);
        for (std::size_t i = 0; i < n; ++i) out[i] = round * 1000003 + i;
      }
      sp.barrier(me, phase_end());
      const std::span<const std::uint64_t> in = sp.read(me, shared, n);
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(in[i], round * 1000003 + i) << "round " << round << " word " << i;
      }
      sp.barrier(me, phase_end());
    }
  });
  const dsm::space_counters c = sp.counters();
  if (test::rt().size() > 1 && !fixed_home()) {
    // Every fetch follows a barrier whose notice names the producer, which is alive and has not
    // released the block since: each is served by one get from it.
    EXPECT_GT(c.fetches, 0u);
    EXPECT_GE(c.fast_reads * 10, c.fetches * 9) << c.fast_reads << " of " << c.fetches;
  }
  if (test::rt().size() > 1 && fixed_home()) {  // every read from the block's fixed home
    EXPECT_GT(c.fetches, 0u);
    EXPECT_EQ(c.home_reads, c.fetches);
    EXPECT_EQ(c.fast_reads, 0u);
  }
}

// The fixed-home baseline: worker 0 rewrites two blocks each round, homed at the first and the
// last process; only worker 1 reads them. Releases by a process that is not the home put the
// merged block there; the directory keeps the processes that stopped reading out of the
// barriers' notices (in a floating-home space every process hears of every release).
TEST(Dsm, AFixedHomeTellsOnlyItsSharers) {
  dsm::space_options o = small_space();
  o.protocol = dsm::coherence_protocol::fixed_home;
  dsm::space sp(test::rt(), o, phase_end());
  const auto processes = static_cast<std::size_t>(test::rt().size());
  constexpr std::size_t n = 600;  // words: in block `first` and the next
  const std::size_t first = 4 * processes - 1;
  auto* data = reinterpret_cast<std::uint64_t*>(sp.base() + (first + 1) * sp.block_bytes() -
                                                8 * (n / 2));
  constexpr std::uint64_t rounds = 10;
  test::rt().run([&](thread_context& me) {
    for (std::uint64_t r = 0; r < rounds; ++r) {
      if (me.id() == 0) {
        const std::span<std::uint64_t> out = sp.write(me, data, n);
        for (std::size_t i = 0; i < n; ++i) out[i] = r * 131 + i;
      }
      sp.barrier(me, phase_end());
      if (me.id() == 1 % me.thread_count()) {
        const std::span<const std::uint64_t> in = sp.read(me, data, n);
        for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(in[i], r * 131 + i) << "round " << r;
      }
      sp.barrier(me, phase_end());
    }
  });
  const dsm::space_counters c = sp.counters();
  EXPECT_EQ(c.migrations + c.local_merges, c.releases);
  EXPECT_EQ(c.fast_reads, 0u);
  const auto rank = static_cast<std::size_t>(test::rt().rank());
  const auto threads = static_cast<std::size_t>(test::rt().options().threads_per_process);
  const bool writes = rank == 0;
  const bool reads = (1 % (processes * threads)) / threads == rank;
  if (processes > 1 && writes) {
    EXPECT_EQ(c.home_writes, rounds);  // block `first` + 1 is homed at rank 0, `first` is not
  }
  if (processes > 1 && !writes && !reads) {
    // Told once of each block (everyone holds every block at first), never again.
    EXPECT_LE(c.barrier_notices, 2u);
    EXPECT_EQ(c.directory_updates, 2u);  // left each block's sharers, once
  }
  if (processes > 1 && reads && !writes) {
    EXPECT_GE(c.barrier_notices, 2 * rounds);
    EXPECT_EQ(c.home_reads, c.fetches);
  }
}

// Store buffering, the litmus test release consistency may fail: two workers in different
// processes each write their flag and release it, then read the other's flag without an
// acquire. Both may read 0, and here both do (a copy changes only at an acquire); after a
// barrier both read 1.
TEST(Dsm, StoreBufferingMayReadBothZerosWithoutAnAcquire) {
  dsm::space sp(test::rt(), small_space(), phase_end());
  auto* flags = reinterpret_cast<std::uint64_t*>(sp.base() + 13 * sp.block_bytes());
  test::rt().run([&](thread_context& me) {
    const fabric::thread_id last = me.thread_count() - 1;
    const bool elsewhere = test::rt().size() > 1;  // worker 0 and the last in different processes
    const bool player = me.id() == 0 || me.id() == last;
    const std::size_t mine = me.id() == 0 ? 0 : 512;  // different blocks
    const std::size_t theirs = 512 - mine;
    if (player) {
      ASSERT_EQ(sp.read(me, flags + theirs, 1)[0], 0u);
    }
    sp.barrier(me, phase_end());
    if (player && elsewhere) {
      sp.write(me, flags + mine, 1)[0] = 1;
      sp.release(me, phase_end());
      EXPECT_EQ(sp.read(me, flags + theirs, 1)[0], 0u) << "a copy changed without an acquire";
    }
    sp.barrier(me, phase_end());
    if (player && elsewhere) {
      EXPECT_EQ(sp.read(me, flags + theirs, 1)[0], 1u);
    }
    sp.barrier(me, phase_end());
  });
}

// Load buffering, which release consistency must pass: worker 0 reads x and then writes y = 1,
// the last worker reads y and then writes x = 1, each then releases. Neither read may see the
// other's write (a write is seen elsewhere only after its release, which follows the read), so
// both reading 1 would be a violation; each records what it read, and after the barrier both
// ones are visible everywhere.
TEST(Dsm, LoadBufferingNeverReadsBothWrites) {
  dsm::space sp(test::rt(), small_space(), phase_end());
  auto* x = reinterpret_cast<std::uint64_t*>(sp.base() + 14 * sp.block_bytes());
  auto* y = reinterpret_cast<std::uint64_t*>(sp.base() + 15 * sp.block_bytes() + 8);
  auto* seen = reinterpret_cast<std::uint64_t*>(sp.base() + 16 * sp.block_bytes());
  test::rt().run([&](thread_context& me) {
    const fabric::thread_id last = me.thread_count() - 1;
    // Threads of one process share the copies: there the two would race on plain memory.
    const bool elsewhere = test::rt().size() > 1;
    for (std::uint64_t round = 1; round <= 6; ++round) {
      if (elsewhere && (me.id() == 0 || me.id() == last)) {
        std::uint64_t* in = me.id() == 0 ? x : y;
        std::uint64_t* out = me.id() == 0 ? y : x;
        const std::uint64_t got = sp.read(me, in, 1)[0];
        sp.write(me, out, 1)[0] = round;
        sp.write(me, seen + (me.id() == 0 ? 0 : 1), 1)[0] = got;
        sp.release(me, phase_end());
      }
      sp.barrier(me, phase_end());
      const std::span<const std::uint64_t> both = sp.read(me, seen, 2);
      EXPECT_FALSE(both[0] == round && both[1] == round)
          << "round " << round << ": both reads saw the other's write";
      EXPECT_EQ(sp.read(me, x, 1)[0], elsewhere ? round : 0);
      EXPECT_EQ(sp.read(me, y, 1)[0], elsewhere ? round : 0);
      sp.barrier(me, phase_end());
    }
  });
}

// Write-to-read causality, which release consistency must pass: worker 0 writes x and
// store_release()s atomic 0; a middle worker load_acquire()s it (never reading x) and
// store_release()s atomic 1; the last worker load_acquire()s atomic 1 and must read x. Across
// processes x's write notice reaches the last worker only inside the middle one's hand-over
// (notices merged transitively). What the last worker read is the copy the next round's notice
// must drop; atomic 2 says it read x, so that worker 0 (maybe sharing its process's copy) writes
// again only then.
TEST(Dsm, WriteToReadCausalityPassesThroughAChainOfHandOvers) {
  dsm::space sp(test::rt(), small_space(), phase_end());
  auto* x = reinterpret_cast<std::uint64_t*>(sp.base() + 9 * sp.block_bytes() + 8);
  test::rt().run([&](thread_context& me) {
    const fabric::thread_id last = me.thread_count() - 1;
    const fabric::thread_id middle = last / 2;
    const auto await = [&](std::size_t atomic, std::uint64_t value) {
      while (sp.load_acquire(me, atomic, phase_end()) != value) (void)me.poll();
    };
    if (me.id() == last) {
      ASSERT_EQ(sp.read(me, x, 1)[0], 0u);  // a copy the first notice must drop
    }
    sp.barrier(me, phase_end());
    for (std::uint64_t round = 1; round <= 5; ++round) {
      if (me.id() == 0) {
        await(2, round - 1);
        sp.write(me, x, 1)[0] = round;
        sp.store_release(me, 0, round, phase_end());
      }
      if (me.id() == middle) {
        await(0, round);
        sp.store_release(me, 1, round, phase_end());
      }
      if (me.id() == last) {
        await(1, round);
        EXPECT_EQ(sp.read(me, x, 1)[0], round) << "round " << round;
        sp.store_release(me, 2, round, phase_end());
      }
    }
    sp.barrier(me, phase_end());
  });
  const dsm::space_counters c = sp.counters();
  if (test::rt().rank() == test::rt().size() - 1 && test::rt().size() > 2) {
    EXPECT_GT(c.handover_notices, 0u);
    EXPECT_GT(c.invalidations, 0u);
  }
}

// Read-read coherence, which release consistency must pass: worker 0 writes x = 1, 2, ... 40,
// releasing each; the last worker, in another process, acquires (standalone acquire()) and reads
// x again and again. What it reads never goes back to an older value, and it reaches 40.
TEST(Dsm, ReadsOfOneWordNeverGoBackInTime) {
  dsm::space sp(test::rt(), small_space(), phase_end());
  auto* x = reinterpret_cast<std::uint64_t*>(sp.base() + 17 * sp.block_bytes() + 16);
  constexpr std::uint64_t writes = 40;
  test::rt().run([&](thread_context& me) {
    const fabric::thread_id last = me.thread_count() - 1;
    // Threads of one process share x's copy: a reader there would race the writer's stores.
    const bool elsewhere = test::rt().size() > 1;
    if (elsewhere && me.id() == 0) {
      for (std::uint64_t i = 1; i <= writes; ++i) {
        sp.write(me, x, 1)[0] = i;
        sp.release(me, phase_end());
      }
    }
    if (elsewhere && me.id() == last) {
      std::uint64_t newest = 0;
      const auto end = phase_end();
      while (newest < writes && fabric::deadline_clock::now() < end) {
        sp.acquire(me, end);
        const std::uint64_t now = sp.read(me, x, 1)[0];
        ASSERT_GE(now, newest) << "x went back from " << newest << " to " << now;
        newest = now;
      }
      EXPECT_EQ(newest, writes);
    }
    sp.barrier(me, phase_end());
    EXPECT_EQ(sp.read(me, x, 1)[0], elsewhere ? writes : 0);
    sp.barrier(me, phase_end());
  });
}

// Message passing: a flag and the data it guards, written by one worker and released; after the
// barrier, whoever sees the flag sees the data. Then the data moves on round the ring of workers
// (each adds its id), so each block's home travels through every process.
TEST(Dsm, AValuePassedRoundTheRingAccumulates) {
  dsm::space sp(test::rt(), small_space(), phase_end());
  auto* value = reinterpret_cast<std::uint64_t*>(sp.base() + 3 * sp.block_bytes() + 40);
  test::rt().run([&](thread_context& me) {
    const std::uint64_t workers = me.thread_count();
    std::uint64_t expected = 0;
    for (std::uint64_t turn = 0; turn < 3 * workers; ++turn) {
      const std::uint64_t holder = turn % workers;
      if (holder == me.id()) {
        const std::span<std::uint64_t> v = sp.write(me, value, 2);
        ASSERT_EQ(v[0], expected) << "turn " << turn;
        v[0] += holder + 1;
        v[1] = turn + 1;  // the flag
      }
      expected += holder + 1;
      sp.barrier(me, phase_end());
      const std::span<const std::uint64_t> v = sp.read(me, value, 2);
      ASSERT_EQ(v[1], turn + 1);
      ASSERT_EQ(v[0], expected);
      // Threads of a process share the copy: every read ends before the next write.
      sp.barrier(me, phase_end());
    }
  });
}

// Every worker allocates irregular pieces and fills them with its id; after a barrier each finds
// its pieces intact (an overlap would have merged another worker's bytes into them).
TEST(Dsm, AllocationsNeverOverlap) {
  dsm::space sp(test::rt(), small_space(), phase_end());
  test::rt().run([&](thread_context& me) {
    std::vector<std::span<std::uint8_t>> pieces;
    for (std::size_t k = 0; k < 20; ++k) {
      const std::size_t n = 1 + (me.id() * 977 + k * 7919) % 3000;
      auto* p = sp.allocate<std::uint8_t>(me, n);
      ASSERT_TRUE(sp.contains(p, n));
      const std::span<std::uint8_t> w = sp.write(me, p, n);
      for (auto& b : w) {
        ASSERT_EQ(b, 0u) << "fresh allocations are zero";
        b = static_cast<std::uint8_t>(me.id() + 1);
      }
      pieces.push_back(w);
    }
    auto* words = sp.allocate<std::uint64_t>(me, 3);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(words) % alignof(std::uint64_t), 0u);
    sp.barrier(me, phase_end());
    for (const auto& piece : pieces) {
      for (std::uint8_t b : sp.read(me, piece.data(), piece.size())) {
        ASSERT_EQ(b, me.id() + 1);
      }
    }
    sp.barrier(me, phase_end());
  });
}

// Every worker takes the one mutex 12 times and appends its id to a log (in other blocks than
// the count) at the count's position: a hand-over that lost a release would lose an increment
// or overwrite an entry. `notices` = 1 makes every hand-over of a critical section that wrote
// two blocks overflow: into its newest notice and a floor (leases), or "everything" (lease 0,
// or a fixed home).
void mutex_protected_log(std::size_t notices, std::uint32_t lease) {
  dsm::space_options o = small_space();
  o.handover_notices = notices;
  o.lease = lease;
  dsm::space sp(test::rt(), o, phase_end());
  constexpr std::uint64_t per_worker = 12;
  auto* count = reinterpret_cast<std::uint64_t*>(sp.base() + 2 * sp.block_bytes() + 8);
  auto* log = reinterpret_cast<std::uint64_t*>(sp.base() + 5 * sp.block_bytes() - 16);
  test::rt().run([&](thread_context& me) {
    const std::uint64_t workers = me.thread_count();
    for (std::uint64_t k = 0; k < per_worker; ++k) {
      sp.lock(me, 3, phase_end());
      const std::uint64_t at = sp.write(me, count, 1)[0]++;
      ASSERT_LT(at, workers * per_worker);
      const std::span<std::uint64_t> entries = sp.write(me, log, workers * per_worker);
      ASSERT_EQ(entries[at], 0u) << "entry " << at << " written twice";
      entries[at] = me.id() + 1;
      sp.unlock(me, 3, phase_end());
    }
    sp.barrier(me, phase_end());
    ASSERT_EQ(sp.read(me, count, 1)[0], workers * per_worker);
    std::vector<std::uint64_t> by_worker(workers);
    for (std::uint64_t e : sp.read(me, log, workers * per_worker)) {
      ASSERT_GE(e, 1u);
      ASSERT_LE(e, workers);
      ++by_worker[e - 1];
    }
    for (std::uint64_t w = 0; w < workers; ++w) EXPECT_EQ(by_worker[w], per_worker) << w;
    sp.barrier(me, phase_end());
  });
  dsm::space_counters sum;
  for (const auto& c : test::allgather_value(sp.counters())) {
    sum.acquires += c.acquires;
    sum.handovers += c.handovers;
    sum.handover_notices += c.handover_notices;
    sum.handover_overflows += c.handover_overflows;
    sum.lease_expiries += c.lease_expiries;
  }
  const std::uint64_t workers = test::rt().size() * test::rt().options().threads_per_process;
  EXPECT_EQ(sum.acquires, workers * per_worker);
  EXPECT_EQ(sum.handovers, workers * per_worker);
  if (test::rt().size() > 1 && notices > 1) {
    EXPECT_GT(sum.handover_notices, 0u);
  }
  const bool leases = lease > 0 && !fixed_home();
  if (test::rt().size() > 1 && notices == 1) {
    EXPECT_EQ(sum.handover_overflows > 0, !leases);
    EXPECT_EQ(sum.lease_expiries > 0, leases);
  }
}

TEST(Dsm, AMutexHandsOverWhatWasWrittenUnderIt) { mutex_protected_log(512, 10); }

TEST(Dsm, AMutexWhoseNoticesOverflowHandsOverTheNewestAndAFloor) { mutex_protected_log(1, 10); }

TEST(Dsm, AMutexWhoseNoticesOverflowWithoutLeasesHandsEverythingOver) {
  mutex_protected_log(1, 0);
}

std::atomic<int> lease_step{0};

// Logical leases (floating home, one notice per hand-over, lease 10): worker 0 (P0) and the last
// worker (P1), in different processes, take mutex 0 in turns (a call says whose turn it is):
//  1. P1 writes X and Y: its record keeps one notice and the floor 1;
//  2. P0 acquires the floor: every copy it holds expired; A, B and C are read again by renewing
//     their leases at their managers, to 1 + 10, without a get (none changed);
//  3. P1 writes A and B, whose leases push their versions past 11: the record keeps one of them
//     and the floor 12;
//  4. P0: every copy expired again; A and B read P1's values, one through its notice and the
//     other only because its lease ended (its renewal finds a newer version and fetches it); C's
//     lease is renewed (to 22), no get;
//  5. P1 writes X and Y again (versions 13): floor 13;
//  6. P0: C's lease reaches past the floor, so C is read with no word to anyone.
TEST(Dsm, LeasesKeepCopiesThroughFloorsAndExpireBeforeNewerWrites) {
  if (fixed_home() || test::rt().size() == 1) {
    GTEST_SKIP() << "leases need a floating home and two processes";
  }
  dsm::space_options o = small_space();
  o.handover_notices = 1;
  dsm::space sp(test::rt(), o, phase_end());
  const auto word = [&](std::size_t block) {
    return reinterpret_cast<std::uint64_t*>(sp.base() + block * sp.block_bytes() + 24);
  };
  std::uint64_t* a = word(20);
  std::uint64_t* b = word(21);
  std::uint64_t* c = word(22);
  std::uint64_t* x = word(23);
  std::uint64_t* y = word(24);
  lease_step = 0;
  test::rt().run([&](thread_context& me) {
    const fabric::thread_id last = me.thread_count() - 1;
    if (me.id() != 0 && me.id() != last) {
      sp.barrier(me, phase_end());
      return;
    }
    const fabric::thread_id other = me.id() == 0 ? last : 0;
    // turn(k, work): waits for step k, runs work(counters before the lock) under mutex 0, then
    // hands step k + 1 over.
    const auto turn = [&](int k, auto&& work) {
      ASSERT_TRUE(me.wait_until([&] { return lease_step.load() == k; }, phase_end()));
      const dsm::space_counters before = sp.counters();
      sp.lock(me, 0, phase_end());
      work(before);
      sp.unlock(me, 0, phase_end());
      const int next = k + 1;
      ASSERT_EQ(me.call(other, [next] { lease_step = next; }), fabric::call_status::ok);
    };
    const auto delta = [&](const dsm::space_counters& before) {
      const dsm::space_counters now = sp.counters();
      return std::tuple{now.fetches - before.fetches, now.lease_renewals - before.lease_renewals,
                        now.leases_held - before.leases_held,
                        now.lease_expiries - before.lease_expiries};
    };
    if (me.id() == last) {
      turn(0, [&](const auto&) { sp.write(me, x, 1)[0] = sp.write(me, y, 1)[0] = 1; });
      turn(2, [&](const auto&) { sp.write(me, a, 1)[0] = sp.write(me, b, 1)[0] = 2; });
      turn(4, [&](const auto&) { sp.write(me, x, 1)[0] = sp.write(me, y, 1)[0] = 3; });
    } else {
      turn(1, [&](const dsm::space_counters& before) {
        EXPECT_EQ(sp.read(me, a, 1)[0] + sp.read(me, b, 1)[0] + sp.read(me, c, 1)[0], 0u);
        const auto [fetches, renewals, held, expiries] = delta(before);
        EXPECT_GT(expiries, 0u);
        EXPECT_EQ(renewals, 3u);
        EXPECT_EQ(fetches, 0u);
      });
      turn(3, [&](const dsm::space_counters& before) {
        EXPECT_EQ(sp.read(me, a, 1)[0], 2u);
        EXPECT_EQ(sp.read(me, b, 1)[0], 2u);
        EXPECT_EQ(sp.read(me, c, 1)[0], 0u);
        const auto [fetches, renewals, held, expiries] = delta(before);
        EXPECT_EQ(fetches, 2u) << "A and B, whose versions changed";
        EXPECT_EQ(renewals, 1u) << "C";
      });
      turn(5, [&](const dsm::space_counters& before) {
        EXPECT_EQ(sp.read(me, c, 1)[0], 0u);
        EXPECT_EQ(sp.read(me, x, 1)[0], 3u);
        const auto [fetches, renewals, held, expiries] = delta(before);
        EXPECT_GE(held, 1u) << "C's lease reaches past the floor";
        EXPECT_EQ(renewals + fetches, 1u) << "X, and nothing for C";
      });
    }
    sp.barrier(me, phase_end());
  });
}

// Round r: worker r % W writes 3 blocks and a tail, then store_release(0, r + 1); the others
// spin on load_acquire(0) until they see it, check every word, and count themselves in with
// compare_exchange_acquire on atomic 1; the next producer waits (load_acquire) for all of them.
// No barrier until the end.
TEST(Dsm, AtomicsPassMessagesWithoutABarrier) {
  dsm::space sp(test::rt(), small_space(), phase_end());
  const std::size_t n = 3 * sp.block_bytes() / 8 + 21;
  auto* data = reinterpret_cast<std::uint64_t*>(sp.base() + 11 * sp.block_bytes() + 64);
  test::rt().run([&](thread_context& me) {
    const std::uint64_t workers = me.thread_count();
    constexpr std::uint64_t rounds = 8;
    for (std::uint64_t r = 0; r < rounds; ++r) {
      if (r % workers == me.id()) {
        while (sp.load_acquire(me, 1, phase_end()) != r * (workers - 1)) (void)me.poll();
        const std::span<std::uint64_t> out = sp.write(me, data, n);
        for (std::size_t i = 0; i < n; ++i) out[i] = r * 7919 + i;
        sp.store_release(me, 0, r + 1, phase_end());
        continue;
      }
      while (sp.load_acquire(me, 0, phase_end()) != r + 1) (void)me.poll();
      const std::span<const std::uint64_t> in = sp.read(me, data, n);
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(in[i], r * 7919 + i) << "round " << r;
      std::uint64_t seen = 0;
      while (!sp.compare_exchange_acquire(me, 1, seen, seen + 1, phase_end())) {
      }
    }
    sp.barrier(me, phase_end());
    EXPECT_EQ(sp.load_acquire(me, 1, phase_end()), rounds * (workers - 1));
    EXPECT_EQ(sp.load_acquire(me, 0, phase_end()), rounds);
    sp.barrier(me, phase_end());
  });
}

// Plain loads and stores through pointers into a fault-driven space: every worker stores its
// bytes of 4 blocks (false sharing), every byte is loaded back after the barrier; then a
// counter under a mutex is incremented with ++.
TEST(Dsm, FaultDrivenAccessNeedsNoSpans) {
  dsm::space_options o = small_space();
  o.fault_driven = true;
  dsm::space sp(test::rt(), o, phase_end());
  const std::size_t n = 3 * sp.block_bytes() + 77;
  auto* shared = reinterpret_cast<std::uint8_t*>(sp.base() + sp.block_bytes() + 5);
  auto* count = reinterpret_cast<std::uint64_t*>(sp.base() + 10 * sp.block_bytes());
  test::rt().run([&](thread_context& me) {
    const std::uint64_t workers = me.thread_count();
    for (std::uint64_t round = 0; round < 4; ++round) {
      for (std::size_t i = 0; i < n; ++i) {
        if ((i + round) % workers == me.id()) shared[i] = byte_of(me.id(), round, i);
      }
      sp.barrier(me, phase_end());
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(shared[i], byte_of((i + round) % workers, round, i)) << round << " " << i;
      }
      sp.barrier(me, phase_end());
    }
    for (int k = 0; k < 10; ++k) {
      sp.lock(me, 1, phase_end());
      ++*count;
      sp.unlock(me, 1, phase_end());
    }
    sp.barrier(me, phase_end());
    EXPECT_EQ(*count, workers * 10);
    sp.barrier(me, phase_end());
  });
  dsm::space_counters sum;
  for (const auto& c : test::allgather_value(sp.counters())) {
    sum.faults += c.faults;
    sum.fetches += c.fetches;
    sum.twins += c.twins;
  }
  EXPECT_GT(sum.faults, 0u);
  EXPECT_GT(sum.twins, 0u);
  if (test::rt().size() > 1) {
    EXPECT_GT(sum.fetches, 0u);
  }
}

// How a child process that stores through a null pointer ends (its status from waitpid).
int status_of_a_null_store() {
  const pid_t child = fork();
  if (child == 0) {
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    volatile int* volatile nowhere = nullptr;
    *nowhere = 1;
    _exit(42);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return status;
}

// A fault outside every space goes to the handler that was there before (UCX's, a sanitizer's,
// the default): a null store ends the process as it did before the fault-driven space existed.
TEST(Dsm, AFaultOutsideTheSpaceEndsAsWithoutIt) {
  const bool forks = test::rt().rank() == 0;
  const int before = forks ? status_of_a_null_store() : 0;
  dsm::space_options o = small_space();
  o.fault_driven = true;
  dsm::space sp(test::rt(), o, phase_end());  // collective
  if (!forks) return;
  const int during = status_of_a_null_store();
  ASSERT_FALSE(WIFEXITED(before) && WEXITSTATUS(before) == 42) << "the null store did not fault";
  EXPECT_EQ(during, before) << "before: " << (WIFSIGNALED(before) ? "signal " : "exit ")
                            << (WIFSIGNALED(before) ? WTERMSIG(before) : WEXITSTATUS(before))
                            << ", with the space: "
                            << (WIFSIGNALED(during) ? "signal " : "exit ")
                            << (WIFSIGNALED(during) ? WTERMSIG(during) : WEXITSTATUS(during));
}

std::atomic<bool> released_elsewhere{false};

// Message passing with and without the acquire: the first worker writes x, releases it and
// tells the last worker by a call (no acquire). What the last worker then reads is allowed to
// be stale under release consistency, and is whenever it sits in another process (its copy
// stays valid until an acquire); after a standalone acquire, and after load_acquire of the
// atomic stored after the release, it must read the new value.
TEST(Dsm, AReadWithoutAnAcquireMayBeStaleAndOneAfterItIsNot) {
  dsm::space sp(test::rt(), small_space(), phase_end());
  auto* x = reinterpret_cast<std::uint64_t*>(sp.base() + 7 * sp.block_bytes() + 200);
  released_elsewhere = false;
  test::rt().run([&](thread_context& me) {
    const fabric::thread_id last = me.thread_count() - 1;
    const bool elsewhere = test::rt().size() > 1;  // worker 0 and the last in different processes
    if (me.id() == 0 || me.id() == last) {
      ASSERT_EQ(sp.read(me, x, 1)[0], 0u);
    }
    sp.barrier(me, phase_end());
    if (me.id() == 0) {
      sp.write(me, x, 1)[0] = 42;
      sp.release(me, phase_end());
      ASSERT_EQ(me.call(last, [] { released_elsewhere = true; }), fabric::call_status::ok);
      sp.store_release(me, 2, 1, phase_end());
    } else if (me.id() == last) {
      ASSERT_TRUE(me.wait_until([] { return released_elsewhere.load(); }, phase_end()));
      const std::uint64_t unsynchronized = sp.read(me, x, 1)[0];
      if (elsewhere) {
        EXPECT_EQ(unsynchronized, 0u) << "a copy was dropped without an acquire";
      }
      sp.acquire(me, phase_end());  // the release completed before the call was sent
      EXPECT_EQ(sp.read(me, x, 1)[0], 42u);
      while (sp.load_acquire(me, 2, phase_end()) != 1) (void)me.poll();
      EXPECT_EQ(sp.read(me, x, 1)[0], 42u);
    }
    sp.barrier(me, phase_end());
  });
}

std::atomic<bool> x_released{false};

// Causality through a standalone acquire: worker 0 writes x and releases (no synchronization
// object), then tells the middle worker by a call; the middle worker acquire()s (x's release is
// in worker 0's release log) and store_release()s atomic 0 without touching x; the last worker
// load_acquire()s it and must read x: the middle worker's hand-over passes on what its acquire
// learnt.
TEST(Dsm, AStandaloneAcquirePassesWhatItLearntOn) {
  dsm::space sp(test::rt(), small_space(), phase_end());
  auto* x = reinterpret_cast<std::uint64_t*>(sp.base() + 25 * sp.block_bytes() + 32);
  x_released = false;
  test::rt().run([&](thread_context& me) {
    const fabric::thread_id last = me.thread_count() - 1;
    const fabric::thread_id middle = last / 2;
    if (me.id() == last) {
      ASSERT_EQ(sp.read(me, x, 1)[0], 0u);  // a copy only x's notice can drop
    }
    sp.barrier(me, phase_end());
    if (me.id() == 0) {
      sp.write(me, x, 1)[0] = 7;
      sp.release(me, phase_end());
      ASSERT_EQ(me.call(middle, [] { x_released = true; }), fabric::call_status::ok);
    }
    if (me.id() == middle) {
      ASSERT_TRUE(me.wait_until([] { return x_released.load(); }, phase_end()));
      sp.acquire(me, phase_end());
      sp.store_release(me, 0, 1, phase_end());
    }
    if (me.id() == last) {
      while (sp.load_acquire(me, 0, phase_end()) != 1) (void)me.poll();
      EXPECT_EQ(sp.read(me, x, 1)[0], 7u);
    }
    sp.barrier(me, phase_end());
  });
}

// Every worker runs its slice of [5, 5 + n): each index's word is written once, by one worker,
// and the slices' sizes add up to n.
TEST(Dsm, ParallelForCoversItsRangeOnce) {
  dsm::space sp(test::rt(), small_space(), phase_end());
  constexpr std::size_t n = 3001;
  auto* squares = reinterpret_cast<std::uint64_t*>(sp.base());
  auto* ran = reinterpret_cast<std::uint64_t*>(sp.base() + 9 * sp.block_bytes());
  test::rt().run([&](thread_context& me) {
    std::uint64_t mine = 0;
    sp.parallel_for(me, 5, 5 + n, [&](std::size_t i) {
      sp.write(me, squares + i, 1)[0] = i * i + 1;
      ++mine;
    }, phase_end());
    sp.write(me, ran + me.id(), 1)[0] = mine;
    sp.barrier(me, phase_end());
    const std::span<const std::uint64_t> all = sp.read(me, squares, 5 + n + 1);
    for (std::size_t i = 0; i < all.size(); ++i) {
      ASSERT_EQ(all[i], i >= 5 && i < 5 + n ? i * i + 1 : 0) << i;
    }
    std::uint64_t total = 0;
    for (std::uint64_t c : sp.read(me, ran, me.thread_count())) total += c;
    EXPECT_EQ(total, n);
    sp.barrier(me, phase_end());
  });
}

// Spans, mutexes and atomics outside the space, an unlock without the lock, a space that is
// full, and bad or mismatched options are refused before anything moves; the space still works
// after them.
TEST(Dsm, BadInputIsRefused) {
  const int rank = test::rt().rank();
  dsm::space_options bad = small_space();
  bad.block_bytes = 3000;
  EXPECT_THROW(dsm::space(test::rt(), bad, phase_end()), config_error);
  bad = small_space();
  bad.bytes = bad.block_bytes * 3 + 1;
  EXPECT_THROW(dsm::space(test::rt(), bad, phase_end()), config_error);
  bad = small_space();
  bad.handover_notices = 0;
  EXPECT_THROW(dsm::space(test::rt(), bad, phase_end()), config_error);
  bad = small_space();
  bad.mutexes = std::size_t{1} << 20;
  EXPECT_THROW(dsm::space(test::rt(), bad, phase_end()), config_error);
  bad = small_space();
  bad.lease = (1u << 20) + 1;
  EXPECT_THROW(dsm::space(test::rt(), bad, phase_end()), config_error);
  for (int field = 0; field < 2 && test::rt().size() > 1; ++field) {
    dsm::space_options mismatched = small_space();
    if (rank == 1 && field == 0) mismatched.bytes *= 2;
    if (rank == 1 && field == 1) mismatched.lease = 3;
    try {
      dsm::space refused(test::rt(), mismatched, phase_end());
      ADD_FAILURE() << "a space of mismatched options was created";
    } catch (const config_error& e) {
      EXPECT_NE(std::string(e.what()).find("equal space_options"), std::string::npos) << e.what();
    }
  }
  dsm::space sp(test::rt(), small_space(), phase_end());
  test::rt().run([&](thread_context& me) {
    auto* first = reinterpret_cast<std::uint8_t*>(sp.base());
    EXPECT_THROW((void)sp.read(me, first - 1, 2), std::out_of_range);
    EXPECT_THROW((void)sp.write(me, first + sp.size() - 4, 5), std::out_of_range);
    std::uint64_t outside = 0;
    EXPECT_THROW((void)sp.write(me, &outside, 1), std::out_of_range);
    EXPECT_THROW(sp.lock(me, 64), std::out_of_range);
    EXPECT_THROW((void)sp.load_acquire(me, 64), std::out_of_range);
    EXPECT_THROW(sp.unlock(me, 0), std::logic_error);
    EXPECT_THROW((void)sp.allocate<std::uint8_t>(me, sp.size() + 1), std::bad_alloc);
    sp.barrier(me, phase_end());
    if (me.id() == 0) {
      // The cursor may have moved for others' allocations: fill what is left, then one more.
      EXPECT_THROW(
          {
            for (int i = 0; i < 100; ++i) (void)sp.allocate<std::uint8_t>(me, sp.size() / 64);
          },
          std::bad_alloc);
    }
    if (me.id() == me.thread_count() - 1) sp.write(me, first + sp.size() - 1, 1)[0] = 7;
    sp.barrier(me, phase_end());
    EXPECT_EQ(sp.read(me, first + sp.size() - 1, 1)[0], 7u);
    sp.barrier(me, phase_end());
  });
}

}  // namespace

int main(int argc, char** argv) { return seriema::test::run_all_tests(argc, argv); }

// Shared spaces across the worker threads of one or several processes: a write released before
// a barrier is read after it everywhere (message passing, producer/consumer with reads served by
// the last releaser), several writers of one block keep every byte (false sharing), homes
// migrate and come back, allocations never overlap, and bad input is refused before anything
// moves (out-of-range spans, full spaces, bad or mismatched options).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <new>
#include <seriema/base/error.hpp>
#include <seriema/dsm/space.hpp>
#include <seriema/fabric/runtime.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <stdexcept>
#include <vector>

#include "support/mp_main.hpp"

using namespace seriema;
using fabric::thread_context;

namespace {

constexpr auto phase = std::chrono::seconds(60);

fabric::deadline_clock::time_point phase_end() { return fabric::deadline_clock::now() + phase; }

dsm::space_options small_space() {
  dsm::space_options o;
  o.bytes = std::size_t{1} << 20;
  o.block_bytes = 4096;
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
  if (test::rt().size() > 1) {
    // Every fetch follows a barrier whose notice names the producer, which is alive and has not
    // released the block since: each is served by one get from it.
    EXPECT_GT(c.fetches, 0u);
    EXPECT_GE(c.fast_reads * 10, c.fetches * 9) << c.fast_reads << " of " << c.fetches;
  }
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
      sp.barrier(me, phase_end());  // threads of a process share the copy: read before the next write
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

// Spans outside the space, a space that is full, and bad or mismatched options are refused
// before anything moves; the space still works after them.
TEST(Dsm, BadInputIsRefused) {
  const int rank = test::rt().rank();
  dsm::space_options bad = small_space();
  bad.block_bytes = 3000;
  EXPECT_THROW(dsm::space(test::rt(), bad, phase_end()), config_error);
  bad = small_space();
  bad.bytes = bad.block_bytes * 3 + 1;
  EXPECT_THROW(dsm::space(test::rt(), bad, phase_end()), config_error);
  if (test::rt().size() > 1) {
    dsm::space_options mismatched = small_space();
    if (rank == 1) mismatched.bytes *= 2;
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

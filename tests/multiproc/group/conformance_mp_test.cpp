// The transport conformance suite: the properties the group's protocol (and the pipe's) assume of
// every path a push may take, checked on the path this configuration gives each pair of workers
// (direct stores on one machine; put + fence + put or one write message across machines, as
// SERIEMA_REMOTE_PUBLISH says): the reader never sees a flag before the data published with it;
// consecutive pushes of one word arrive in order; 64-bit words are never torn; remote atomics
// lose no update while puts write the neighbouring word; and (SERIEMA_REMOTE_NOTICES) consumption
// notices of calls arrive. Every worker pushes into the next one's region while checking its own.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <seriema/fabric/detail/region_publisher.hpp>
#include <seriema/fabric/remote_atomic.hpp>
#include <seriema/fabric/runtime.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/invoke/invoke.hpp>
#include <seriema/invoke/synchronizer.hpp>
#include <seriema/transfer/ucx.hpp>
#include <string>
#include <vector>

#include "support/mp_main.hpp"

using namespace seriema;
using fabric::thread_context;
using fabric::detail::publish_status;

namespace {

constexpr auto phase = std::chrono::seconds(60);
constexpr std::size_t block_words = 512;  // 4 KiB: several cache lines, several put fragments
constexpr std::uint64_t data_offset = 0;
constexpr std::uint64_t flag_offset = 8 * block_words;            // F: published after D
constexpr std::uint64_t torn_offset = flag_offset + 64;           // T: words v | v << 32
constexpr std::uint64_t torn_flag_offset = torn_offset + 8 * block_words;
constexpr std::uint64_t atomic_offset = torn_flag_offset + 64;    // A: remote atomic adds
constexpr std::uint64_t neighbour_offset = atomic_offset + 8;     // B: puts, same cache line
constexpr std::uint64_t region_bytes = neighbour_offset + 64;
constexpr std::uint64_t pushes = 3000;
constexpr std::uint64_t adds_every = 8;

// The next worker's region, as it announced it (set by its call).
thread_local transfer::remote_memory_locator next_region;
thread_local bool next_region_known = false;

std::uint64_t load(const std::byte* region, std::uint64_t offset) {
  return std::atomic_ref<const std::uint64_t>(
             *reinterpret_cast<const std::uint64_t*>(region + offset))
      .load(std::memory_order_acquire);
}

fabric::detail::publish_route route_of(thread_context& me) {
  const char* publish = std::getenv("SERIEMA_REMOTE_PUBLISH");
  const std::string choice = publish == nullptr ? "auto" : publish;
  const bool by_put =
      choice == "put" || (choice == "auto" && me.rt().context().network_rdma());
  return {true, by_put};
}

// What the reader of one region found.
struct verdict {
  std::uint64_t flag_before_data = 0;  // a data word older than the flag read before it
  std::uint64_t flag_went_back = 0;    // a later push of the flag seen before an earlier one
  std::uint64_t torn = 0;              // a word whose halves differ
  std::uint64_t last_flag = 0;
  std::uint64_t checks = 0;
  void check(const std::byte* region) {
    const std::uint64_t flag = load(region, flag_offset);
    if (flag < last_flag) ++flag_went_back;
    if (flag > last_flag) {
      for (std::size_t w = 0; w < block_words; ++w) {
        if (load(region, data_offset + 8 * w) < flag) ++flag_before_data;
      }
      last_flag = flag;
    }
    for (std::size_t w = 0; w < block_words; ++w) {
      const std::uint64_t word = load(region, torn_offset + 8 * w);
      if ((word >> 32) != (word & 0xFFFF'FFFFu)) ++torn;
    }
    ++checks;
  }
};

void conformance(thread_context& me) {
  fabric::runtime& rt = me.rt();
  transfer::registered_buffer mine =
      rt.service_allocate(rt.placement().locate(me.id()).zone, region_bytes);
  ASSERT_TRUE(mine);
  auto* region = static_cast<std::byte*>(mine.data);
  std::memset(region, 0, mine.size);
  next_region_known = false;
  me.quiesce(phase);
  const auto locator = transfer::remote_memory_locator::make(rt.rank(), mine);
  const fabric::thread_id previous = (me.id() + me.thread_count() - 1) % me.thread_count();
  ASSERT_EQ(me.call(previous,
                    [locator] {
                      next_region = locator;
                      next_region_known = true;
                    }),
            fabric::call_status::ok);
  ASSERT_TRUE(me.wait_until([] { return next_region_known; }, fabric::deadline_clock::now() + phase));
  {
    fabric::detail::region_publisher out(me, next_region, route_of(me), 64);
    fabric::remote_atomic counter(me, next_region, atomic_offset);
    // Sources stay untouched until their publication completed: one per publisher cell.
    std::vector<std::array<std::uint64_t, block_words>> data(64), torn(64);
    verdict seen;
    std::uint64_t adds = 0;
    const auto deadline = fabric::deadline_clock::now() + phase;
    for (std::uint64_t v = 1; v <= pushes; ++v) {
      ASSERT_LT(fabric::deadline_clock::now(), deadline);
      auto& d = data[v % 64];
      d.fill(v);
      auto& t = torn[v % 64];
      t.fill(v | (v << 32));
      ASSERT_EQ(out.publish({reinterpret_cast<const std::byte*>(d.data()), sizeof d}, data_offset,
                            flag_offset, v),
                publish_status::ok);
      ASSERT_EQ(out.publish({reinterpret_cast<const std::byte*>(t.data()), sizeof t}, torn_offset,
                            torn_flag_offset, v),
                publish_status::ok);
      if (v % adds_every == 0) {
        ASSERT_EQ(counter.add(1, deadline), fabric::outcome::done);
        ++adds;
        ASSERT_EQ(out.publish({}, 0, neighbour_offset, v), publish_status::ok);
      }
      seen.check(region);
      me.poll();
    }
    ASSERT_TRUE(out.drain(deadline));
    // Every push of the previous worker arrived: its last flag, its adds, its last put.
    ASSERT_TRUE(me.wait_until(
        [&] {
          seen.check(region);
          return load(region, flag_offset) == pushes && load(region, torn_flag_offset) == pushes;
        },
        deadline));
    EXPECT_EQ(seen.flag_before_data, 0u) << "a flag was seen before its data";
    EXPECT_EQ(seen.flag_went_back, 0u) << "pushes of one word arrived out of order";
    EXPECT_EQ(seen.torn, 0u) << "64-bit words were torn";
    me.quiesce(phase);  // every atomic of the previous worker completed
    EXPECT_EQ(load(region, atomic_offset), adds) << "an atomic add was lost beside puts";
    EXPECT_EQ(load(region, neighbour_offset), pushes - pushes % adds_every);
    EXPECT_GT(seen.checks, pushes / 2);
  }
  me.quiesce(phase);
  EXPECT_TRUE(rt.service_free(reinterpret_cast<std::uint64_t>(mine.data), mine.size));
}

TEST(Conformance, FlagsDataWordsAndAtomicsOnEveryPath) {
  test::rt().run([](thread_context& me) {
    if (me.thread_count() < 2) GTEST_SKIP() << "needs two workers";
    conformance(me);
  });
}

// Consumption notices (SERIEMA_REMOTE_NOTICES: atomics or messages) of one-sided calls: a
// synchronizer counted down when the next worker ran each call.
thread_local std::uint64_t calls_run = 0;

TEST(Conformance, ConsumptionNoticesArrive) {
  test::rt().run([](thread_context& me) {
    if (me.thread_count() < 2) GTEST_SKIP() << "needs two workers";
    calls_run = 0;
    me.quiesce(phase);
    const fabric::thread_id next = (me.id() + 1) % me.thread_count();
    constexpr std::uint64_t calls = 2000;
    invoke::synchronizer sync(me, calls);
    for (std::uint64_t i = 0; i < calls; ++i) {
      ASSERT_EQ((invoke::call<invoke::channel::write, invoke::policy::retry>(
                    me, next, [] { ++calls_run; }, sync)),
                fabric::call_status::ok);
    }
    EXPECT_EQ(sync.wait_for(phase), fabric::outcome::done);
    me.quiesce(phase);
    EXPECT_EQ(calls_run, calls);
  });
}

}  // namespace

int main(int argc, char** argv) { return seriema::test::run_all_tests(argc, argv); }

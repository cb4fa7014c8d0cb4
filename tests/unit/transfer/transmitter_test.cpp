// Transmitter: two threads share one transmitter for 1 M puts (TEST_TRANSMITTER_PUTS per thread
// where a run repeats another's volume) whose source units come from circular allocators; a unit
// may be recycled only when its put has landed, which the test checks by content at the
// destination every time a unit comes back.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <seriema/base/error.hpp>
#include <seriema/transfer/allocators.hpp>
#include <seriema/transfer/arena.hpp>
#include <seriema/transfer/transmitter.hpp>
#include <thread>
#include <unordered_map>

using namespace seriema::transfer;

namespace {

struct two_workers {
  ucx_context context{context_options{}};
  ucx_worker sender{context, worker_sharing::multi_thread};
  ucx_worker receiver{context, worker_sharing::single_thread};
  ucx_endpoint endpoint{sender, receiver.address(), "receiver"};
  arena memory{context, -1, [] {
                 arena_options o;
                 o.segment_size = std::size_t{8} << 20;
                 return o;
               }()};
  // The receiving worker must be progressed for wireup (and for puts over transports that need
  // the target's help). This thread is the only one touching it.
  std::atomic<bool> stop{false};
  std::thread receiver_progress{[this] {
    int idle = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      if (!receiver.progress() && ++idle > 64) {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
        idle = 0;
      }
    }
  }};
  ~two_workers() {
    stop = true;
    receiver_progress.join();
  }
};

// A remote_memory for all of `block`, as seen from the sender (no direct mapping).
remote_memory remote_view(two_workers& w, const memory_block& block) {
  return remote_memory(w.endpoint, remote_memory_locator::make(0, *block.segment, block.data, block.size),
                       false);
}

void fill(std::byte* p, std::size_t n, std::uint64_t seed) {
  for (std::size_t i = 0; i < n; i += 8) {
    std::uint64_t v = seed * 0x9E3779B97F4A7C15ull + i;
    std::memcpy(p + i, &v, 8);
  }
}

// Puts per thread in the recycling test: `usual`, or TEST_TRANSMITTER_PUTS (tests/CMakeLists.txt
// lowers it for the tcp run, whose puts each cost a loopback tcp write).
std::uint64_t puts_per_thread_or_environment(std::uint64_t usual) {
  const char* text = std::getenv("TEST_TRANSMITTER_PUTS");
  return text != nullptr && std::atoi(text) > 0 ? static_cast<std::uint64_t>(std::atoi(text))
                                                 : usual;
}

}  // namespace

TEST(Transmitter, TwoThreadsManyPutsRecycleOnlyCompletedUnits) {
  two_workers w;
  memory_block target = w.memory.allocate_block();
  ASSERT_NE(target.data, nullptr);
  std::memset(target.data, 0, target.size);
  remote_memory_locator locator = remote_memory_locator::make(0, *target.segment, target.data, target.size);
  remote_memory remote(w.endpoint, locator, /*allow_direct=*/false);
  transmitter tx(w.endpoint, transmitter_options{32, true});

  constexpr std::size_t unit = 256;
  constexpr std::size_t max_units = 64;
  constexpr std::size_t slots_per_thread = block_size / unit / 2;  // 4096 > max_units
  const std::uint64_t puts_per_thread = puts_per_thread_or_environment(500'000);
  static_assert(slots_per_thread > max_units);
  std::atomic<std::uint64_t> recycled_checked{0}, mismatches{0}, post_errors{0};

  auto run = [&](int thread) {
    circular_allocator_config cfg;
    cfg.unit_size = unit;
    cfg.initial_units = 8;
    cfg.max_units = max_units;
    cfg.growth = growth_policy::exponential;
    circular_allocator units(w.memory, cfg);
    // unit address -> sequence number of the put that last used it
    std::unordered_map<const std::byte*, std::uint64_t> last_use;
    for (std::uint64_t seq = 0; seq < puts_per_thread; ++seq) {
      registered_buffer buffer = units.allocate();
      while (!buffer) {  // ring full of in-flight units: make completions happen
        tx.request_completion();
        tx.progress();
        buffer = units.allocate();
      }
      auto it = last_use.find(buffer.data);
      if (it != last_use.end()) {
        // Recycled: the put that last used this unit must be visible at its destination.
        std::uint64_t old = it->second;
        std::size_t slot = static_cast<std::size_t>(thread) * slots_per_thread + old % slots_per_thread;
        if (std::memcmp(target.data + slot * unit, buffer.data, unit) != 0) mismatches.fetch_add(1);
        recycled_checked.fetch_add(1);
      }
      fill(buffer.data, unit, (static_cast<std::uint64_t>(thread) << 40) | seq);
      std::size_t slot = static_cast<std::size_t>(thread) * slots_per_thread + seq % slots_per_thread;
      if (tx.put(buffer, unit, remote, slot * unit) != op_status::ok) post_errors.fetch_add(1);
      last_use[buffer.data] = seq;
    }
    if (tx.flush() != op_status::ok) post_errors.fetch_add(1);
  };
  std::thread a(run, 0), b(run, 1);
  a.join();
  b.join();
  EXPECT_EQ(post_errors.load(), 0u);
  EXPECT_EQ(mismatches.load(), 0u);
  // Nearly every put reused a unit (rings hold at most 64 units each).
  EXPECT_GT(recycled_checked.load(), 2u * puts_per_thread - 2 * max_units - 1);
  EXPECT_EQ(tx.operations_posted(), 2u * puts_per_thread);
  EXPECT_GE(tx.completions_requested(), 2u * puts_per_thread / 32);
  w.memory.release_block(target);
}

TEST(Transmitter, ManualModeCompletesOnlyOnRequest) {
  two_workers w;
  memory_block target = w.memory.allocate_block();
  remote_memory remote = remote_view(w, target);
  transmitter tx(w.endpoint, transmitter_options{4, false});
  std::uint64_t value = 42;
  unit_tags tags;
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(tx.put(std::as_bytes(std::span(&value, 1)), remote, 0, &tags), op_status::ok);
  }
  EXPECT_EQ(tx.completions_requested(), 0u);  // manual: no automatic tickets
  for (int i = 0; i < 1000; ++i) tx.progress();
  EXPECT_FALSE(tags.all_complete()) << "a tag completed with no completion requested";
  tx.request_completion();
  while (!tags.all_complete()) tx.progress();
  std::uint64_t landed = 0;
  std::memcpy(&landed, target.data, 8);
  EXPECT_EQ(landed, 42u);
  w.memory.release_block(target);
}

TEST(Transmitter, TagsOrderAndBounds) {
  two_workers w;
  memory_block target = w.memory.allocate_block();
  remote_memory remote = remote_view(w, target);
  transmitter tx(w.endpoint, transmitter_options{1, true});  // S = 1: every op asks
  std::byte byte{1};
  completion_tag before = tx.current_tag();
  ASSERT_EQ(tx.put(std::span(&byte, 1), remote, target.size - 1), op_status::ok);
  EXPECT_EQ(tx.completions_requested(), 1u);
  EXPECT_EQ(tx.wait(before), op_status::ok);
  EXPECT_EQ(tx.put(std::span(&byte, 1), remote, target.size), op_status::out_of_range);
  EXPECT_EQ(tx.get(std::span(&byte, 1), remote, ~std::uint64_t{0}), op_status::out_of_range);
  EXPECT_EQ(tx.flush(), op_status::ok);
  EXPECT_EQ(target.data[target.size - 1], std::byte{1});
  // Locators refuse ranges outside their segment and slice with overflow-safe bounds.
  auto locator = remote_memory_locator::make(0, *target.segment, target.data, target.size);
  EXPECT_FALSE(locator.slice(1, target.size).has_value());
  EXPECT_FALSE(locator.slice(~std::uint64_t{0}, 2).has_value());
  ASSERT_TRUE(locator.slice(8, 16).has_value());
  EXPECT_EQ(locator.slice(8, 16)->address, locator.address + 8);
  EXPECT_THROW((void)remote_memory_locator::make(0, *target.segment, target.data - 1, 8),
               seriema::error);
  w.memory.release_block(target);
}

TEST(Transmitter, WaitClaimsATicketWhenNoneCoversTheTag) {
  // Automatic mode asks for completion only every S posts; a lone get followed by
  // wait(current_tag()) must still complete (it used to spin forever).
  two_workers w;
  memory_block target = w.memory.allocate_block();
  std::memset(target.data, 0x7b, 64);
  remote_memory remote = remote_view(w, target);
  transmitter tx(w.endpoint, transmitter_options{64, true});
  std::array<std::byte, 64> local{};
  ASSERT_EQ(tx.get(local, remote, 0), op_status::ok);
  EXPECT_EQ(tx.completions_requested(), 0u);
  EXPECT_EQ(tx.wait(tx.current_tag()), op_status::ok);
  EXPECT_EQ(local[63], std::byte{0x7b});
  w.memory.release_block(target);
}

TEST(Transmitter, RefusesAUnitTaggedByTooManyTransmitters) {
  two_workers w;
  memory_block target = w.memory.allocate_block();
  remote_memory remote = remote_view(w, target);
  std::vector<std::unique_ptr<transmitter>> txs;
  for (int i = 0; i <= unit_tags::max_transmitters; ++i) {
    txs.push_back(std::make_unique<transmitter>(w.endpoint, transmitter_options{1000, false}));
  }
  unit_tags tags;
  std::byte byte{1};
  for (int i = 0; i < unit_tags::max_transmitters; ++i) {
    ASSERT_EQ(txs[i]->put(std::span(&byte, 1), remote, 0, &tags), op_status::ok);
  }
  // A fifth transmitter would leave the unit untagged: refused before posting anything.
  EXPECT_EQ(txs.back()->put(std::span(&byte, 1), remote, 0, &tags), op_status::tags_full);
  EXPECT_EQ(txs.back()->operations_posted(), 0u);
  for (auto& tx : txs) EXPECT_EQ(tx->flush(), op_status::ok);
  EXPECT_TRUE(tags.all_complete());
  w.memory.release_block(target);
}

// FIFO per (sender thread, destination thread) for one-sided calls that handlers make with
// policy::retry_async while the rings are full, queued and growing (docs/messenger.md,
// "Invariants"): every thread floods a relay (thread 0) with calls; the relay's handler numbers
// a call for every thread, per destination, right before making it, so each destination must
// run the relay's calls in number order. The receivers are slow (they sleep in the handler now
// and then), so the relay's tiny rings fill, its calls queue, and its drains grow the rings,
// whose waits poll and run more relay handlers in the middle of a call.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <seriema/invoke/invoke.hpp>
#include <thread>

#include "support/invoke_checks.hpp"
#include "support/mp_main.hpp"

using namespace seriema;
using fabric::thread_context;
using invoke::call_status;
using invoke::channel;

using test::env_count;
using test::inbox;
using test::inbox_of;
using test::max_local_threads;
using test::max_threads;
using test::reset_inboxes;
using test::threads;

namespace {

constexpr fabric::thread_id relay = 0;

// Small chunks, one per allocation, rings of up to 512: a ring grows at almost every chunk it
// fills (the receivers lag), and each growth waits for the allocation, polling.
invoke::messenger_options small_growing_ring() {
  invoke::messenger_options o;
  o.chunk_size = 8192;
  o.chunks_per_allocation = 1;
  o.max_chunks = 512;
  o.staging_size = 8192;
  return o;
}

// The relay's next number per destination, per local thread (only the relay's is used).
std::array<std::array<std::uint64_t, max_threads>, max_local_threads> next_number;
// What the relay's messengers saw (the relay's process only).
invoke::messenger_counters relay_sent;

// Run at each destination: the relay's calls must come in number order. A number other than the
// next one counts as wrong once; the count goes on from the larger of the two.
struct numbered {
  std::uint64_t number;
  std::array<std::uint64_t, 7> payload;  // 64-byte closure, as the sequencer benchmark's
  void operator()(thread_context& self) const {
    inbox& box = inbox_of(self);
    std::uint64_t& next = box.next_seq[relay];
    if (number != next || payload[0] != number) ++box.wrong;
    next = std::max(next, number + 1);
    ++box.calls;
    // A slow receiver: the relay's rings to it fill up.
    if (box.calls % 64 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
};

// Run at the relay: one numbered call to every thread, each numbered right before it is made.
struct to_relay {
  std::array<std::uint64_t, 8> payload;
  void operator()(thread_context& self) const {
    auto& numbers = next_number[static_cast<std::size_t>(
        test::rt().placement().locate(self.id()).local_thread)];
    for (fabric::thread_id t = 0; t < self.thread_count(); ++t) {
      const std::uint64_t n = numbers[t]++;
      const numbered out{n, {n, payload[0], 0, 0, 0, 0, 0}};
      if (invoke::call<channel::write, invoke::policy::retry_async>(self, t, out) !=
          call_status::ok) {
        ++inbox_of(self).wrong;
      }
    }
  }
};

}  // namespace

TEST(InvokeFifo, RetryAsyncCallsFromHandlersKeepTheirOrderWhileRingsAreFull) {
  reset_inboxes();
  next_number = {};
  relay_sent = {};
  auto& rt = test::rt();
  const std::uint64_t per_sender = env_count("TEST_FIFO_RELAYED", 20000);
  const std::uint64_t total = per_sender * threads();  // numbered calls each thread receives
  rt.run([&](thread_context& ctx) {
    invoke::channels_of(ctx).set_options(small_growing_ring());
    for (std::uint64_t i = 0; i < per_sender; ++i) {
      const to_relay call{{i, ctx.id(), 0, 0, 0, 0, 0, 0}};
      call_status st;
      while ((st = invoke::call(ctx, relay, call)) == call_status::full) ctx.poll();
      ASSERT_EQ(st, call_status::ok);
    }
    const auto deadline = fabric::deadline_clock::now() + std::chrono::seconds(120);
    ASSERT_TRUE(ctx.wait_until([&] { return inbox_of(ctx).calls >= total; }, deadline))
        << "thread " << ctx.id() << " ran " << inbox_of(ctx).calls << " of " << total;
    if (ctx.id() == relay) {
      for (fabric::thread_id t = 0; t < ctx.thread_count(); ++t) {
        const invoke::messenger_counters c = invoke::channels_of(ctx).to(t).counters();
        relay_sent.exceeding += c.exceeding;
        relay_sent.chunks_grown += c.chunks_grown;
        relay_sent.full += c.full;
      }
    }
  });
  for (int t = 0; t < rt.options().threads_per_process; ++t) {
    EXPECT_EQ(test::inboxes[t].calls, total) << "local thread " << t;
    EXPECT_EQ(test::inboxes[t].wrong, 0u)
        << "local thread " << t << ": calls of the relay run out of order (or failed)";
  }
  if (test::inbox_here(relay) != nullptr) {
    // The test is about full rings: the relay's calls must have queued and its rings grown.
    std::printf("relay: %llu calls queued, %llu found the ring full, %llu chunks grown\n",
                static_cast<unsigned long long>(relay_sent.exceeding),
                static_cast<unsigned long long>(relay_sent.full),
                static_cast<unsigned long long>(relay_sent.chunks_grown));
    EXPECT_GT(relay_sent.exceeding, 0u);
    EXPECT_GT(relay_sent.chunks_grown, threads());
  }
}

int main(int argc, char** argv) { return seriema::test::run_all_tests(argc, argv); }

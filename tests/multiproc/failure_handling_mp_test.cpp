// Failure handling that every rank survives (docs/failures.md), between threads of one or
// several processes: a call_return naming a function the receiver does not know fails as not
// executed; sizes at, around and far beyond each limit are refused before anything is sent;
// waits end at their deadline (a late reply is dropped) and slots can be cancelled; calls that
// handlers make after their thread's body returned are delivered (trad too); a handler that
// throws after its body ended is reported by run() without stopping the job; finalize() from
// inside run() is refused.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <seriema/base/error.hpp>
#include <seriema/invoke/invoke.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/invoke_checks.hpp"
#include "support/mp_main.hpp"
#include "support/process_control.hpp"

using namespace seriema;
using test::stop_process;
using fabric::outcome;
using fabric::thread_context;
using invoke::call_status;
using invoke::channel;

namespace {

constexpr fabric::function_id unregistered = 0x7eadbeef;

fabric::thread_id next_of(const thread_context& ctx) { return (ctx.id() + 1) % ctx.thread_count(); }

// A one-sided call_return record naming `function`, published as it is: what a sender whose
// build registers a function the receiver's does not would write.
call_status one_sided_raw_call_return(thread_context& ctx, fabric::thread_id dest,
                                      fabric::function_id function,
                                      fabric::return_slot<std::uint64_t>& slot) {
  auto [index, generation] = ctx.open_reply_for(slot, dest);
  const std::uint64_t closure = 42;
  const invoke::wire::reply_extra extra{index, generation};
  const std::size_t size = invoke::wire::record_size(sizeof closure, 0, invoke::wire::flag_reply);
  std::vector<std::byte> record(size);
  invoke::detail::serialize_record(record.data(), size, function,
                                   std::as_bytes(std::span(&closure, 1)), invoke::wire::flag_reply,
                                   std::as_bytes(std::span(&extra, 1)), {});
  return invoke::channels_of(ctx).to(dest).publish_raw_for_testing(record, 1);
}

}  // namespace

TEST(FailureHandling, UnknownFunctionFailsTheCallersSlotAsNotExecuted) {
  test::rt().run([](thread_context& ctx) {
    const fabric::thread_id dest = next_of(ctx);
    const std::uint64_t closure = 42;
    fabric::return_slot<std::uint64_t> sent, written;
    ASSERT_EQ(ctx.call_return_raw_for_testing(dest, unregistered,
                                              std::as_bytes(std::span(&closure, 1)), sent),
              call_status::ok);
    ASSERT_EQ(one_sided_raw_call_return(ctx, dest, unregistered, written), call_status::ok);
    EXPECT_EQ(ctx.wait_for(sent, std::chrono::seconds(60)), outcome::not_executed)
        << sent.describe();
    EXPECT_EQ(ctx.wait_for(written, std::chrono::seconds(60)), outcome::not_executed)
        << written.describe();
    EXPECT_NE(sent.describe().find("not executed"), std::string::npos) << sent.describe();
  });
  EXPECT_GT(test::rt().counters().rejected_unknown_function.load(), 0u);
}

namespace {
std::atomic<std::uint64_t> buffers_received{0};
std::atomic<std::uint64_t> bytes_received{0};
}  // namespace

// The largest buffer accepted, one byte less, and one byte more, 2^32 + 8 and SIZE_MAX:
// the last three are refused (too_large) before anything is written or sent, and the
// destination runs exactly the two that fit. The huge spans are never read.
template <channel C>
void sizes_at_the_limit(std::size_t limit) {
  buffers_received = 0;
  bytes_received = 0;
  std::vector<std::byte> data(limit + 1, std::byte{7});
  test::rt().run([&](thread_context& ctx) {
    if (ctx.id() != 0) return;
    const fabric::thread_id dest = ctx.thread_count() - 1;
    auto record_it = [](std::span<std::byte> buffer) {
      buffers_received.fetch_add(1);
      bytes_received.fetch_add(buffer.size());
    };
    auto send = [&](std::size_t size) {
      const std::span<const std::byte> buffer(data.data(), size);
      return invoke::call_buffer<C, invoke::policy::retry>(ctx, dest, record_it, buffer);
    };
    EXPECT_EQ(send(limit - 1), call_status::ok);
    EXPECT_EQ(send(limit), call_status::ok);
    const call_status refused = send(limit + 1);
    EXPECT_EQ(refused, call_status::too_large);
    // The refusal names the setting that limits this path, not another path's.
    const std::string why = invoke::describe(ctx, refused, C);
    if constexpr (C == channel::send) {
      EXPECT_NE(why.find(fmt::format("SERIEMA_SEND_LIMIT ({} bytes", limit + 1)),
                std::string::npos)
          << why;
      EXPECT_EQ(why.find("SERIEMA_CHUNK_SIZE"), std::string::npos) << why;
    } else {
      EXPECT_NE(why.find(fmt::format("({} bytes with its header",
                                     invoke::messenger_options::from_environment().max_record())),
                std::string::npos)
          << why;
      EXPECT_NE(why.find("SERIEMA_CHUNK_SIZE="), std::string::npos) << why;
      EXPECT_NE(why.find("SERIEMA_STAGING_SIZE="), std::string::npos) << why;
      EXPECT_EQ(why.find("SERIEMA_SEND_LIMIT"), std::string::npos) << why;
    }
    // The status's own text covers every path.
    const std::string text = fabric::to_string(refused);
    for (const char* setting :
         {"SERIEMA_SEND_LIMIT", "SERIEMA_CHUNK_SIZE", "SERIEMA_STAGING_SIZE"}) {
      EXPECT_NE(text.find(setting), std::string::npos) << text;
    }
    const std::span<const std::byte> beyond_32_bits(data.data(), (std::size_t{1} << 32) + 8);
    EXPECT_EQ((invoke::call_buffer<C>(ctx, dest, record_it, beyond_32_bits)),
              call_status::too_large);
    const std::span<const std::byte> everything(data.data(),
                                                std::numeric_limits<std::size_t>::max());
    EXPECT_EQ((invoke::call_buffer<C>(ctx, dest, record_it, everything)), call_status::too_large);
  });
  const std::uint64_t runs = test::rt().allreduce_sum(buffers_received.load());
  const std::uint64_t bytes = test::rt().allreduce_sum(bytes_received.load());
  EXPECT_EQ(runs, 2u);
  EXPECT_EQ(bytes, 2 * limit - 1);
}

TEST(FailureHandling, SendSizesAroundTheLimitAndFarBeyondIt) {
  // The closure (an empty lambda) is one byte; closure + buffer <= SERIEMA_SEND_LIMIT.
  sizes_at_the_limit<channel::send>(test::rt().options().send_limit - 1);
}

TEST(FailureHandling, OneSidedSizesAroundTheLimitAndFarBeyondIt) {
  // A record is header + closure (1 byte) + buffer, aligned to 8: the largest buffer that fits
  // max_record, and one byte more makes the record 8 bytes larger.
  const std::size_t max_record = invoke::messenger_options::from_environment().max_record();
  sizes_at_the_limit<channel::write>(max_record - sizeof(invoke::wire::record_header) - 1);
}

// A destination that does not poll for a while: a wait with a deadline ends as
// deadline_exceeded, cancel() ends a slot at once, the late replies are dropped (never written
// into the ended slots), and later calls to the same thread work.
template <channel C>
void deadlines_and_cancel() {
  test::rt().run([](thread_context& ctx) {
    const fabric::thread_id sleeper = ctx.thread_count() - 1;
    if (ctx.id() == sleeper) {
      // Busy without polling for longer than every deadline below.
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      return;
    }
    if (ctx.id() != 0) return;
    auto value = [](thread_context&) { return std::uint64_t{77}; };
    fabric::return_slot<std::uint64_t> timed, cancelled, scoped;
    ASSERT_EQ((invoke::call_return<C>(ctx, sleeper, value, timed)), call_status::ok);
    ASSERT_EQ((invoke::call_return<C>(ctx, sleeper, value, cancelled)), call_status::ok);
    ASSERT_EQ((invoke::call_return<C>(ctx, sleeper, value, scoped)), call_status::ok);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(ctx.wait_for(timed, std::chrono::milliseconds(200)), outcome::deadline_exceeded);
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(200));
    cancelled.cancel();
    EXPECT_EQ(cancelled.result(), outcome::cancelled);
    {
      thread_context::deadline_scope bounded(ctx, std::chrono::milliseconds(100));
      EXPECT_EQ(ctx.wait_for(scoped), outcome::deadline_exceeded);
    }
    fabric::return_slot<std::uint64_t> later;
    ASSERT_EQ((invoke::call_return<C>(ctx, sleeper, value, later)), call_status::ok);
    EXPECT_EQ(ctx.wait_for(later, std::chrono::seconds(60)), outcome::done) << later.describe();
    EXPECT_EQ(later.value(), 77u);
    EXPECT_EQ(timed.result(), outcome::deadline_exceeded) << "a late reply changed an ended slot";
    EXPECT_EQ(cancelled.result(), outcome::cancelled);
  });
}

TEST(FailureHandling, DeadlinesAndCancelSend) { deadlines_and_cancel<channel::send>(); }
TEST(FailureHandling, DeadlinesAndCancelWrite) { deadlines_and_cancel<channel::write>(); }

TEST(FailureHandling, ASynchronizerWaitEndsAtItsDeadline) {
  test::rt().run([](thread_context& ctx) {
    invoke::synchronizer never(ctx, 1);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(never.wait_for(std::chrono::milliseconds(100)), outcome::deadline_exceeded);
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100));
    EXPECT_EQ(never.remaining(), 1u);
  });
}

namespace {
std::atomic<std::uint64_t> callbacks{0};
}  // namespace

// Thread A's body returns at once; thread B (same process) calls A, and the function A runs
// in its post-body serving loop calls B back on channel C. B waits for the callback: before
// the serving loop flushed, a trad callback stayed batched and B waited for ever.
template <channel C>
void calls_from_handlers_after_the_body() {
  callbacks = 0;
  auto& rt = test::rt();
  const fabric::thread_id a = rt.placement().global_id(rt.rank(), 0);
  const fabric::thread_id b = rt.placement().global_id(rt.rank(), 1);
  std::atomic<bool> delivered{true};
  rt.run([&](thread_context& ctx) {
    if (ctx.id() != b) return;
    const std::uint64_t before = callbacks.load();
    ASSERT_EQ(ctx.call(a,
                       [b](thread_context& self) {
                         (void)invoke::call<C>(self, b, [] { callbacks.fetch_add(1); });
                       }),
              call_status::ok);
    delivered = ctx.wait_until([&] { return callbacks.load() > before; },
                               fabric::deadline_clock::now() + std::chrono::seconds(30));
  });
  EXPECT_TRUE(delivered.load()) << "the callback from a handler after the body never arrived";
}

TEST(FailureHandling, TradCallsFromHandlersAfterTheBodyAreDelivered) {
  calls_from_handlers_after_the_body<channel::trad>();
}
TEST(FailureHandling, WriteCallsFromHandlersAfterTheBodyAreDelivered) {
  calls_from_handlers_after_the_body<channel::write>();
}

// A function that throws on a thread whose body returned: the thread keeps serving (a later
// call_return to it completes) and run() rethrows the exception on that thread's rank, after
// the job went quiet.
TEST(FailureHandling, AHandlerThrowingAfterTheBodyIsReportedAndServingGoesOn) {
  auto& rt = test::rt();
  const fabric::thread_id a = 0;  // on rank 0
  std::atomic<bool> answered{true};
  std::string thrown;
  try {
    rt.run([&](thread_context& ctx) {
      if (ctx.id() != ctx.thread_count() - 1) return;
      ASSERT_EQ(ctx.call(a, [](thread_context&) { throw std::runtime_error("boom after body"); }),
                call_status::ok);
      fabric::return_slot<int> slot;
      ASSERT_EQ(ctx.call_return(a, [](thread_context&) { return 5; }, slot), call_status::ok);
      answered = ctx.wait_for(slot, std::chrono::seconds(30)) == outcome::done;
    });
  } catch (const std::runtime_error& e) {
    thrown = e.what();
  }
  EXPECT_TRUE(answered.load());
  EXPECT_EQ(thrown, rt.rank() == 0 ? "boom after body" : "");
}

// A stalled peer (SIGSTOP: alive to UCX, answering nothing): call_returns with a 2 s deadline
// end as deadline_exceeded by 3 s on every channel, the peer is not declared dead, and once it
// is resumed (SIGCONT) new calls to it work and the late replies leave the ended slots alone.
template <channel C>
void stalled_peer() {
  auto& rt = test::rt();
  if (rt.size() < 2) GTEST_SKIP() << "needs 2 processes";
  const std::vector<int> pids = test::allgather_value<int>(static_cast<int>(getpid()));
  const fabric::thread_id stalled = rt.placement().global_id(1, 0);
  rt.run([&](thread_context& ctx) {
    if (ctx.id() != 0) return;
    auto answer = [](thread_context&) { return std::uint64_t{5}; };
    fabric::return_slot<std::uint64_t> warm;  // connections are set up before the stall
    ASSERT_EQ((invoke::call_return<C>(ctx, stalled, answer, warm)), call_status::ok);
    ASSERT_EQ(ctx.wait_for(warm, std::chrono::seconds(60)), outcome::done);
    ASSERT_TRUE(stop_process(pids[1])) << "rank 1 (pid " << pids[1] << ") did not stop";
    fabric::return_slot<std::uint64_t> slots[3];
    const auto start = std::chrono::steady_clock::now();
    for (auto& slot : slots) {
      ASSERT_EQ((invoke::call_return<C>(ctx, stalled, answer, slot)), call_status::ok);
    }
    const auto deadline = fabric::deadline_clock::now() + std::chrono::seconds(2);
    for (auto& slot : slots) EXPECT_EQ(ctx.wait_for(slot, deadline), outcome::deadline_exceeded);
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(waited, 3.0) << "calls to a stalled peer ended " << waited << " s after they began";
    EXPECT_FALSE(rt.peer_failed(1)) << "a stalled peer was declared dead";
    ASSERT_EQ(::kill(pids[1], SIGCONT), 0);
    fabric::return_slot<std::uint64_t> after;
    ASSERT_EQ((invoke::call_return<C>(ctx, stalled, answer, after)), call_status::ok);
    EXPECT_EQ(ctx.wait_for(after, std::chrono::seconds(60)), outcome::done) << after.describe();
    EXPECT_EQ(after.value(), 5u);
    for (auto& slot : slots) EXPECT_EQ(slot.result(), outcome::deadline_exceeded);
  });
}

TEST(FailureHandling, AStalledPeerFailsCallsByTheirDeadlineSend) { stalled_peer<channel::send>(); }
TEST(FailureHandling, AStalledPeerFailsCallsByTheirDeadlineWrite) { stalled_peer<channel::write>(); }

TEST(FailureHandling, FinalizeInsideRunIsRefused) {
  std::atomic<int> refused{0};
  test::rt().run([&](thread_context& ctx) {
    try {
      ctx.rt().finalize();
    } catch (const error& e) {
      if (std::string(e.what()).find("inside run()") != std::string::npos) refused.fetch_add(1);
    }
  });
  EXPECT_EQ(refused.load(), test::rt().options().threads_per_process);
}

int main(int argc, char** argv) { return seriema::test::run_all_tests(argc, argv); }

// Threads that are not runtime::run's workers, attached with runtime::attach (shm, tcp, two
// emulated machines): short-lived threads that come and go while workers' calls flow call every
// worker and get their replies; attached threads of different processes call each other outside
// run(); a call to a slot nobody holds is run by the helpers, one to a slot never attached is
// refused; slots run out and come back; the limits (one-sided calls, synchronizers) are refused.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <seriema/base/error.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/invoke/invoke.hpp>
#include <thread>
#include <vector>

#include "support/mp_main.hpp"

using namespace seriema;
using fabric::call_status;
using fabric::outcome;
using fabric::thread_context;
using fabric::thread_id;

namespace {

constexpr auto generous = std::chrono::seconds(60);  // waits that only a bug would exhaust

fabric::deadline_clock::time_point generous_deadline() {
  return fabric::deadline_clock::now() + generous;
}

// Counts kept per process, written by calls that run here (any thread: atomics).
std::atomic<std::uint64_t> calls_from_attached{0};  // calls whose sender was an attached thread
std::atomic<std::uint64_t> calls_from_workers{0};
std::atomic<std::uint64_t> calls_on_attached{0};    // calls run on an attached slot's context
std::atomic<std::uint64_t> wrong_runner{0};         // a call ran on another thread than addressed

// What a callee returns for argument x: who it is and what it got, so the caller can check both.
std::uint64_t answer(thread_id callee, std::uint64_t x) { return callee * 1'000'000 + x * 3; }

// One short-lived thread: attaches, calls every worker of the job `rounds` times with
// call_return (checking each value) and once with a plain call, then detaches.
void short_lived_caller(int rounds, std::atomic<std::uint64_t>& failures) {
  auto attached = test::rt().attach(generous_deadline());
  thread_context& ctx = attached.context();
  if (ctx.id() != attached.id() || !test::rt().is_attached_id(ctx.id())) failures += 1;
  const thread_id me = ctx.id();
  for (int r = 0; r < rounds; ++r) {
    for (thread_id dest = 0; dest < ctx.thread_count(); ++dest) {
      const std::uint64_t x = me * 100 + static_cast<std::uint64_t>(r);
      fabric::return_slot<std::uint64_t> slot;
      if (ctx.call_return(dest, [x, dest](thread_context& self) {
            if (self.id() != dest) wrong_runner += 1;
            calls_from_attached += 1;
            return answer(self.id(), x);
          }, slot) != call_status::ok) {
        failures += 1;
        continue;
      }
      if (ctx.wait_for(slot, generous_deadline()) != outcome::done ||
          slot.value() != answer(dest, x)) {
        failures += 1;
      }
    }
  }
  for (thread_id dest = 0; dest < ctx.thread_count(); ++dest) {
    if (ctx.call(dest, [](thread_context&) { calls_from_attached += 1; }) != call_status::ok) {
      failures += 1;
    }
  }
}

void reset_counts() {
  calls_from_attached = 0;
  calls_from_workers = 0;
  calls_on_attached = 0;
  wrong_runner = 0;
}

}  // namespace

// Runs first: no slot has been attached yet anywhere, so calls to slot ids are refused.
TEST(Attach, CallsToASlotNeverAttachedAreRefused) {
  auto& rt = test::rt();
  ASSERT_GE(rt.options().attach_slots, 2);
  rt.run([&](thread_context& ctx) {
    if (rt.placement().locate(ctx.id()).local_thread != 0) return;
    for (int rank = 0; rank < rt.size(); ++rank) {
      const thread_id slot_id = rt.attached_id(rank, rt.options().attach_slots - 1);
      fabric::return_slot<int> slot;
      const call_status status = ctx.call_return(slot_id, [](thread_context&) { return 1; }, slot);
      if (rank == rt.rank()) {
        EXPECT_EQ(status, call_status::bad_destination);  // known here without a message
        continue;
      }
      ASSERT_EQ(status, call_status::ok);
      EXPECT_EQ(ctx.wait_for(slot, generous_deadline()), outcome::not_executed) << slot.describe();
    }
    // Ids past the last slot name nothing.
    const thread_id past = rt.attached_id(rt.size() - 1, rt.options().attach_slots - 1) + 1;
    EXPECT_FALSE(rt.is_attached_id(past));
    EXPECT_EQ(ctx.call(past, [](thread_context&) {}), call_status::bad_destination);
  });
}

TEST(Attach, ShortLivedThreadsComeAndGoWhileCallsFlow) {
  reset_counts();
  auto& rt = test::rt();
  constexpr int generations = 3;
  // Generations overlap: up to 9 threads want the 4 default slots at once, so attaches also
  // wait for slots given back.
  constexpr int threads_per_generation = 3;
  constexpr int rounds = 4;
  std::atomic<std::uint64_t> failures{0};
  rt.run([&](thread_context& ctx) {
    const bool spawner = rt.placement().locate(ctx.id()).local_thread == 0;
    std::atomic<int> finished{0};
    std::vector<std::thread> spawned;
    if (spawner) {
      for (int g = 0; g < generations; ++g) {
        for (int t = 0; t < threads_per_generation; ++t) {
          spawned.emplace_back([&] {
            short_lived_caller(rounds, failures);
            finished += 1;
          });
        }
        // Worker-to-worker calls keep flowing while the attached threads call.
        for (thread_id dest = 0; dest < ctx.thread_count(); ++dest) {
          EXPECT_EQ(ctx.call(dest, [](thread_context&) { calls_from_workers += 1; }),
                    call_status::ok);
        }
        ctx.poll();
      }
    }
    // Serve (the attached threads call this thread too) until this process's are done.
    EXPECT_TRUE(ctx.wait_until(
        [&] { return finished.load() == static_cast<int>(spawned.size()); }, generous_deadline()));
    for (auto& t : spawned) t.join();
  });
  EXPECT_EQ(failures.load(), 0u);
  EXPECT_EQ(wrong_runner.load(), 0u);
  EXPECT_EQ(rt.attached_threads(), 0);
  // Every attached thread of the job called every worker rounds + 1 times.
  const std::uint64_t attached_total =
      std::uint64_t{generations} * threads_per_generation * static_cast<std::uint64_t>(rt.size());
  EXPECT_EQ(rt.allreduce_sum(calls_from_attached.load()),
            attached_total * (rounds + 1) * rt.placement().thread_count());
  EXPECT_EQ(rt.allreduce_sum(calls_from_workers.load()),
            std::uint64_t{generations} * static_cast<std::uint64_t>(rt.size()) *
                rt.placement().thread_count());
}

// Outside run(): each process's main thread attaches and calls the attached thread of the next
// process (call_return), serving the call the previous process sends it; a call to a worker
// waits for the next run(), which runs it.
TEST(Attach, AttachedThreadsCallEachOtherOutsideRun) {
  reset_counts();
  auto& rt = test::rt();
  rt.barrier();  // every process is outside run() before anyone calls
  {
    auto attached = rt.attach();
    thread_context& ctx = attached.context();
    EXPECT_EQ(attached.id(), rt.attached_id(rt.rank(), attached.slot()));
    const int next = (rt.rank() + 1) % rt.size();
    // Every process attaches from the same state, so they all got the same slot.
    const thread_id peer = rt.attached_id(next, attached.slot());
    fabric::return_slot<std::uint64_t> slot;
    ASSERT_EQ(ctx.call_return(peer, [peer](thread_context& self) {
                if (self.id() != peer) wrong_runner += 1;
                calls_on_attached += 1;
                return answer(self.id(), 7);
              }, slot),
              call_status::ok);
    EXPECT_EQ(ctx.wait_for(slot, generous_deadline()), outcome::done) << slot.describe();
    EXPECT_EQ(slot.value(), answer(peer, 7));
    // The previous process's call to us: served by our waits (it may come after our reply).
    EXPECT_TRUE(ctx.wait_until([] { return calls_on_attached.load() == 1; }, generous_deadline()));
    // To a worker of the next process: it waits in that worker's queue for the next run().
    ASSERT_EQ(ctx.call(rt.placement().global_id(next, 0),
                       [](thread_context&) { calls_from_attached += 1; }),
              call_status::ok);
    ctx.flush_endpoints();
  }
  rt.barrier();
  EXPECT_EQ(calls_from_attached.load(), 0u);  // no run yet: not run
  rt.run([](thread_context&) {});
  EXPECT_EQ(calls_from_attached.load(), 1u);
  EXPECT_EQ(wrong_runner.load(), 0u);
}

// A call to a slot nobody holds (its holder detached) is run during run() by a helper thread,
// on the slot's context, and run() ends.
TEST(Attach, CallsToADetachedSlotRunOnTheHelpers) {
  reset_counts();
  auto& rt = test::rt();
  ASSERT_GE(rt.options().helper_threads, 1);
  { auto attached = rt.attach(); }  // slot 0 of every process has been attached (earlier too)
  rt.run([&](thread_context& ctx) {
    if (rt.placement().locate(ctx.id()).local_thread != 0) return;
    for (int rank = 0; rank < rt.size(); ++rank) {
      const thread_id slot_id = rt.attached_id(rank, 0);
      fabric::return_slot<std::uint64_t> slot;
      ASSERT_EQ(ctx.call_return(slot_id, [slot_id](thread_context& self) {
                  if (self.id() != slot_id) wrong_runner += 1;
                  calls_on_attached += 1;
                  return answer(self.id(), 1);
                }, slot),
                call_status::ok);
      EXPECT_EQ(ctx.wait_for(slot, generous_deadline()), outcome::done) << slot.describe();
      EXPECT_EQ(slot.value(), answer(slot_id, 1));
    }
  });
  EXPECT_EQ(wrong_runner.load(), 0u);
  EXPECT_EQ(rt.allreduce_sum(calls_on_attached.load()),
            static_cast<std::uint64_t>(rt.size()) * static_cast<std::uint64_t>(rt.size()));
}

TEST(Attach, SlotsRunOutAndComeBack) {
  auto& rt = test::rt();
  const int slots = rt.options().attach_slots;
  std::vector<fabric::attached_thread> held;
  held.reserve(static_cast<std::size_t>(slots));
  for (int s = 0; s < slots; ++s) held.push_back(rt.attach());
  EXPECT_EQ(rt.attached_threads(), slots);
  try {
    (void)rt.attach();
    ADD_FAILURE() << "attach() with every slot held did not throw";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("SERIEMA_ATTACH_SLOTS"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)rt.attach(fabric::deadline_clock::now() + std::chrono::milliseconds(20)),
               deadline_error);
  // finalize() is refused while threads are attached (and does nothing).
  EXPECT_THROW(rt.finalize(), error);
  {
    held.pop_back();  // gives the last slot back: the next attach takes it
    auto again = rt.attach(generous_deadline());
    EXPECT_EQ(again.slot(), slots - 1);
  }
  held.clear();
  EXPECT_EQ(rt.attached_threads(), 0);
  // A waiting attach from another thread, served when this one gives its slots back.
  for (int s = 0; s < slots; ++s) held.push_back(rt.attach());
  std::atomic<bool> got{false};
  std::thread giver([&] {
    auto attached = rt.attach(generous_deadline());
    got = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(got.load());
  held.clear();
  giver.join();
  EXPECT_TRUE(got.load());
  EXPECT_EQ(rt.attached_threads(), 0);
  rt.barrier();
}

// What attached threads cannot do is refused with a message, not hung or run wrongly.
TEST(Attach, OneSidedAndSynchronizersAreRefused) {
  auto& rt = test::rt();
  {
    auto attached = rt.attach();
    try {
      (void)invoke::call<invoke::channel::write>(attached.context(), 0, [](thread_context&) {});
      ADD_FAILURE() << "a one-sided call from an attached thread did not throw";
    } catch (const error& e) {
      EXPECT_NE(std::string(e.what()).find("attached thread"), std::string::npos) << e.what();
    }
  }
  rt.run([&](thread_context& ctx) {
    const thread_id slot_id = rt.attached_id(rt.rank(), 0);
    EXPECT_EQ(invoke::call<invoke::channel::write>(ctx, slot_id, [](thread_context&) {}),
              call_status::bad_destination);
    invoke::synchronizer sync(ctx, 1);
    EXPECT_EQ((invoke::call<invoke::channel::send, invoke::policy::fail, invoke::notify_on::consume>(
                  ctx, slot_id, [](thread_context&) {}, sync)),
              call_status::bad_destination);
  });
}

int main(int argc, char** argv) { return seriema::test::run_all_tests(argc, argv); }

// Worker-callable quiescence (thread_context::quiesce) across threads of one or several
// processes: after it, every call sent before it anywhere has run, the calls those calls made
// too, batched (trad) ones and deferred replies and spawned tasks included; it is refused where
// it cannot work (an attached thread, outside run()).
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <seriema/invoke/invoke.hpp>
#include <thread>

#include "support/invoke_checks.hpp"
#include "support/mp_main.hpp"

using namespace seriema;
using fabric::thread_context;
using invoke::channel;
using seriema::task;

namespace {

constexpr int phases = 3;
constexpr std::uint64_t calls_per_thread = 3000;

// Per local thread and phase: calls that arrived directly, and onward calls they made.
struct counts {
  std::array<std::uint64_t, phases> direct{};
  std::array<std::uint64_t, phases> onward{};
};
std::array<counts, test::max_local_threads> received;

std::size_t local(const thread_context& me) {
  return static_cast<std::size_t>(test::rt().placement().locate(me.id()).local_thread);
}

// Where call k of thread `from` in phase `p` goes, and where its onward call goes.
fabric::thread_id direct_destination(std::uint64_t from, std::uint64_t k, std::uint64_t p,
                                     std::uint64_t threads) {
  return static_cast<fabric::thread_id>((from * 7919 + k * 104729 + p * 31) % threads);
}
fabric::thread_id onward_destination(std::uint64_t from, std::uint64_t k, std::uint64_t p,
                                     std::uint64_t threads) {
  return static_cast<fabric::thread_id>((from * 13 + k * 7 + p * 5 + 1) % threads);
}

// What thread `me` must have received in phase `p` once the job is quiet.
counts expected_for(fabric::thread_id me, std::uint64_t threads) {
  counts out;
  for (std::uint64_t p = 0; p < phases; ++p) {
    for (std::uint64_t from = 0; from < threads; ++from) {
      for (std::uint64_t k = 0; k < calls_per_thread; ++k) {
        if (direct_destination(from, k, p, threads) == me) ++out.direct[p];
        if (onward_destination(from, k, p, threads) == me) ++out.onward[p];
      }
    }
  }
  return out;
}

// Phases of batched calls that each call onward; after each phase's quiesce, every thread has
// exactly the calls of that phase (a call of a later phase cannot have run yet: the caller sends
// it only after its own quiesce returned, and this thread runs calls only when it polls).
TEST(Quiesce, EveryCallAndTheCallsItMadeRanBeforeItReturns) {
  received = {};
  std::atomic<int> right{0};
  test::rt().run([&](thread_context& me) {
    const std::uint64_t threads = me.thread_count();
    const counts expected = expected_for(me.id(), threads);
    for (std::uint64_t p = 0; p < phases; ++p) {
      invoke::aggregator<channel::trad> batch(me);
      for (std::uint64_t k = 0; k < calls_per_thread; ++k) {
        const std::uint64_t from = me.id();
        (void)batch.call<invoke::policy::retry>(
            direct_destination(from, k, p, threads), [from, k, p](thread_context& self) {
              ++received[local(self)].direct[p];
              (void)invoke::call<channel::write, invoke::policy::retry_async>(
                  self, onward_destination(from, k, p, self.thread_count()),
                  [p](thread_context& next) { ++received[local(next)].onward[p]; });
            });
      }
      // No flush: quiesce publishes what the aggregator batched.
      me.quiesce(std::chrono::seconds(120));
      const counts& got = received[local(me)];
      EXPECT_EQ(got.direct[p], expected.direct[p]) << "thread " << me.id() << " phase " << p;
      EXPECT_EQ(got.onward[p], expected.onward[p]) << "thread " << me.id() << " phase " << p;
      if (got.direct[p] == expected.direct[p] && got.onward[p] == expected.onward[p]) ++right;
    }
  });
  EXPECT_EQ(right.load(), phases * test::rt().options().threads_per_process);
}

// A spawned task that awaits a deferred reply and then calls on, and a deferred reply still in
// progress: quiesce waits for both.
std::array<std::atomic<std::uint64_t>, test::max_local_threads> after_await{};

task<std::uint64_t> slow_answer(thread_context& self) {
  // The callee's own wait: a call to itself, answered in a later poll.
  co_return co_await invoke::call_return<channel::send>(self, self.id(), [] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return std::uint64_t{7};
  });
}

task<> await_then_call(thread_context& me) {
  const fabric::thread_id next = (me.id() + 1) % me.thread_count();
  const std::uint64_t v = co_await invoke::call_return<channel::write, invoke::policy::retry>(
      me, next, [](thread_context& self) { return slow_answer(self); });
  (void)invoke::call<channel::write, invoke::policy::retry>(me, next, [v](thread_context& self) {
    after_await[local(self)] += v;
  });
}

TEST(Quiesce, SpawnedTasksAndDeferredRepliesFinishBeforeItReturns) {
  for (auto& a : after_await) a = 0;
  std::atomic<int> right{0};
  test::rt().run([&](thread_context& me) {
    auto done = invoke::spawn(me, await_then_call(me));
    me.quiesce(std::chrono::seconds(60));
    // The previous thread's task awaited its reply and called this thread: it ran.
    EXPECT_EQ(after_await[local(me)].load(), 7u) << "thread " << me.id();
    EXPECT_TRUE(done.ready());
    if (after_await[local(me)].load() == 7u && done.ready()) ++right;
    done.get();
  });
  EXPECT_EQ(right.load(), test::rt().options().threads_per_process);
}

// Only run()'s workers may call it.
// Workers already in quiesce keep answering: thread 0 reaches it late, after asking every other
// worker for a value. The last worker of each other process to arrive leads its process's
// job-wide rounds and waits there for thread 0's process; it must still run thread 0's calls
// (before, it did not: thread 0 waited for a reply that the leader would only send after
// thread 0 had joined, and the job stalled until the deadline).
TEST(Quiesce, WorkersInsideItAnswerAWorkerThatHasNotArrived) {
  test::rt().run([&](thread_context& me) {
    if (me.id() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the others are inside
      for (fabric::thread_id t = 1; t < me.thread_count(); ++t) {
        auto answer = invoke::call_return<channel::send>(
            me, t, [](thread_context& self) { return std::uint64_t{self.id()} * 3; });
        EXPECT_EQ(answer.get(), std::uint64_t{t} * 3);
      }
    }
    me.quiesce(std::chrono::seconds(30));
  });
}

// A worker already in quiesce (a follower: not the last of its process to arrive) answers late
// thread 0 with a deferred reply that asks the next worker through channel::trad: the batched
// call is published when the follower goes idle (before, it stayed batched until its process's
// leader started a round, which waited for thread 0, which waited for the reply: found by
// containers::disjoint_set's find).
TEST(Quiesce, AFollowerPublishesWhatItsHandlersBatched) {
  test::rt().run([&](thread_context& me) {
    if (me.id() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the others are inside
      for (fabric::thread_id t = 1; t < me.thread_count(); ++t) {
        auto answer = invoke::call_return<channel::send>(
            me, t, [](thread_context& self) -> task<std::uint64_t> {
              const fabric::thread_id next = (self.id() + 1) % self.thread_count();
              co_return 1 + co_await invoke::call_return<channel::trad>(
                                self, next, [](thread_context& s) { return std::uint64_t{s.id()}; });
            });
        EXPECT_EQ(answer.get(), 1 + std::uint64_t{(t + 1) % me.thread_count()});
      }
    }
    me.quiesce(std::chrono::seconds(30));
  });
}

// Quiesces back to back, nothing sent: each must end. A follower that read the leader's round
// counter after arriving (preempted between the two) missed the leader's first round and never
// answered it, and both waited for ever (found by bench/containers: a barrier, then the next
// container's constructor). More workers than cores make that window likely.
TEST(Quiesce, BackToBackQuiescesEnd) {
  test::rt().run([&](thread_context& me) {
    for (int k = 0; k < 2000; ++k) me.quiesce(std::chrono::seconds(20));
  });
}

TEST(Quiesce, AnAttachedThreadIsRefused) {
  std::atomic<bool> refused{false};
  test::rt().run([&](thread_context& me) {
    if (test::rt().placement().locate(me.id()).local_thread != 0) return;
    std::atomic<bool> finished{false};
    std::thread other([&] {
      auto attached = test::rt().attach();
      try {
        attached.context().quiesce(std::chrono::seconds(1));
      } catch (const seriema::error& e) {
        refused = std::string(e.what()).find("only run()'s workers") != std::string::npos;
      }
      finished = true;
    });
    me.wait_until([&] { return finished.load(); });
    other.join();
  });
  EXPECT_TRUE(refused.load());
}

}  // namespace

int main(int argc, char** argv) { return seriema::test::run_all_tests(argc, argv); }

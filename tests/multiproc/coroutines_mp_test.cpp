// Coroutines across threads of one or several processes: a distributed linked list walked with
// co_await, functions that answer with a deferred reply (a task that asks another thread, a
// future returned as it is), exceptions and failure outcomes through co_await, spawned tasks,
// run() bodies that are coroutines, and a call naming a function the destination lacks.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <seriema/invoke/invoke.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/invoke_checks.hpp"
#include "support/mp_main.hpp"
#include "support/skewed_value.hpp"

using namespace seriema;
using test::skewed;
using fabric::outcome;
using fabric::thread_context;
using invoke::call_status;
using invoke::channel;
using seriema::task;

namespace {

// One node of a list spread over every thread of the job: node k lives on thread k % T, at
// index k / T of that thread's array, and its next node is k + 1.
struct node_ref {
  fabric::thread_id owner = 0;
  std::uint32_t index = 0;
  bool valid = false;
};
struct list_node {
  std::uint64_t value = 0;
  node_ref next;
};
constexpr std::uint32_t nodes_per_thread = 16;
std::array<std::array<list_node, nodes_per_thread>, test::max_local_threads> local_nodes;

std::uint32_t local_index(const thread_context& me) {
  return static_cast<std::uint32_t>(test::rt().placement().locate(me.id()).local_thread);
}

void build_list(thread_context& me) {
  const std::uint32_t threads = me.thread_count();
  const std::uint64_t total = std::uint64_t{threads} * nodes_per_thread;
  for (std::uint32_t i = 0; i < nodes_per_thread; ++i) {
    const std::uint64_t k = std::uint64_t{i} * threads + me.id();
    list_node& n = local_nodes[local_index(me)][i];
    n.value = k * k;
    if (k + 1 < total) {
      n.next = {static_cast<fabric::thread_id>((k + 1) % threads),
                static_cast<std::uint32_t>((k + 1) / threads), true};
    } else {
      n.next = {};
    }
  }
}

// Walks the list from its head: one co_await call_return per hop, no nested poll.
task<std::uint64_t> sum_list(thread_context& me) {
  std::uint64_t sum = 0;
  node_ref at{0, 0, true};
  while (at.valid) {
    const list_node n = co_await invoke::call_return<channel::write, invoke::policy::retry>(
        me, at.owner, [at](thread_context& self) { return local_nodes[local_index(self)][at.index]; });
    sum += n.value;
    at = n.next;
  }
  co_return sum;
}

TEST(Coroutines, ALinkedStructureWalkedWithCoAwait) {
  test::rt().run([](thread_context& me) { build_list(me); });
  const std::uint64_t total = std::uint64_t{test::threads()} * nodes_per_thread;
  std::uint64_t expected = 0;
  for (std::uint64_t k = 0; k < total; ++k) expected += k * k;
  std::atomic<int> right{0};
  // The body itself is a coroutine.
  auto body = [&](thread_context& me) -> task<> {
    const std::uint64_t sum = co_await sum_list(me);
    EXPECT_EQ(sum, expected);
    if (sum == expected) ++right;
  };
  test::rt().run(body);
  EXPECT_EQ(right.load(), test::rt().options().threads_per_process);
  // With a deadline on the run's end the task is driven all the same (not dropped undriven as
  // a std::function<void(thread_context&)> would drop it).
  test::rt().run(body, std::chrono::seconds(60));
  EXPECT_EQ(right.load(), 2 * test::rt().options().threads_per_process);
}

// A service: thread `me` asks the next thread, whose handler asks the one after it and answers
// once that answer came (a deferred reply), without holding its stack meanwhile.
task<std::string> ask_onward(thread_context& self, std::string question) {
  const fabric::thread_id onward = (self.id() + 1) % self.thread_count();
  std::string answer = co_await invoke::call_return<channel::send>(
      self, onward,
      [](thread_context& s, const std::string& q) { return q + " -> " + std::to_string(s.id()); },
      question);
  co_return std::to_string(self.id()) + " asked: " + answer;
}

TEST(Coroutines, AHandlerAnswersWithADeferredReply) {
  const std::uint64_t started = test::rt().counters().deferred_started.load();
  test::rt().run([&](thread_context& me) {
    const fabric::thread_id dest = (me.id() + 1) % me.thread_count();
    const fabric::thread_id onward = (dest + 1) % me.thread_count();
    auto reply = invoke::call_return<channel::write, invoke::policy::retry>(
        me, dest,
        [](thread_context& self, const std::string& q) { return ask_onward(self, q); },
        std::string("q") + std::to_string(me.id()));
    EXPECT_EQ(reply.get(), std::to_string(dest) + " asked: q" + std::to_string(me.id()) +
                               " -> " + std::to_string(onward));
    // A handler that returns a future as it is: the reply follows it.
    auto relayed = invoke::call_return<channel::send>(me, dest, [](thread_context& self) {
      return invoke::call_return<channel::send>(
          self, (self.id() + 1) % self.thread_count(),
          [](thread_context& s) { return std::vector<int>{int(s.id()), 1, 2}; });
    });
    const std::vector<int> v = relayed.get();
    ASSERT_EQ(v.size(), 3u);
    EXPECT_EQ(v[0], static_cast<int>(onward));
  });
  // Each deferred reply (and the task it spawned) was counted started and finished.
  EXPECT_GE(test::rt().counters().deferred_started.load() - started,
            static_cast<std::uint64_t>(2 * test::rt().options().threads_per_process));
  EXPECT_EQ(test::rt().counters().deferred_started.load(),
            test::rt().counters().deferred_finished.load());
}

// Exceptions and failure outcomes through co_await, in coroutines of the calling thread.
task<int> failures_through_co_await(thread_context& me) {
  int caught = 0;
  const fabric::thread_id dest = (me.id() + 1) % me.thread_count();
  try {
    (void)co_await invoke::call_return<channel::send>(me, dest, []() -> int {
      throw std::out_of_range("key 17");
    });
  } catch (const std::out_of_range& e) {
    if (std::string(e.what()) == "key 17") caught |= 1;
  }
  // A coroutine callee that throws after its own co_await.
  try {
    (void)co_await invoke::call_return<channel::write, invoke::policy::retry>(
        me, dest, [](thread_context& self) -> task<int> {
          (void)co_await invoke::call_return<channel::send>(self, self.id(), [] { return 1; });
          throw std::invalid_argument("after a co_await");
        });
  } catch (const std::invalid_argument&) {
    caught |= 2;
  }
  // Never sent.
  try {
    (void)co_await invoke::call_return<channel::send>(me, 0x7fff0000u, [] { return 1; });
  } catch (const invoke::not_executed_error& e) {
    if (e.status() == call_status::bad_destination) caught |= 4;
  }
  // Cancelled before it was awaited. The callee takes its time: a reply that came before
  // cancel() would end the future done (cancel leaves an ended future as it is).
  auto cancelled = invoke::call_return<channel::send>(me, dest, [] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return 3;
  });
  cancelled.cancel();
  try {
    (void)co_await cancelled;
  } catch (const invoke::cancelled_error&) {
    caught |= 8;
  }
  // A function the destination does not know: not executed.
  auto& table = invoke::detail::futures_of(me);
  fabric::thread_context::opened_reply opened;
  auto unknown = invoke::detail::open_reply_future<int>(table, dest, opened);
  const std::uint64_t closure = 0;
  invoke::detail::note_sent(
      unknown, me.call_with_reply_raw_for_testing(
                   dest, 0x7654321u, std::as_bytes(std::span(&closure, 1)), opened.index,
                   opened.generation));
  try {
    (void)co_await unknown;
  } catch (const invoke::not_executed_error& e) {
    if (e.status() == call_status::ok) caught |= 16;
  }
  // A result whose bytes do not deserialize into the caller's type.
  try {
    (void)co_await invoke::call_return<channel::send>(me, dest, [] { return skewed{5, "x"}; });
  } catch (const invoke::not_executed_error&) {
    caught |= 32;
  }
  co_return caught;
}

TEST(Coroutines, ExceptionsAndOutcomesThroughCoAwait) {
  std::atomic<int> all{0};
  test::rt().run([&](thread_context& me) -> task<> {
    const int caught = co_await failures_through_co_await(me);
    EXPECT_EQ(caught, 63) << "bit i: case i of failures_through_co_await was seen";
    if (caught == 63) ++all;
  });
  EXPECT_EQ(all.load(), test::rt().options().threads_per_process);
}

// A stalled callee: the awaited future ends by its deadline.
TEST(Coroutines, AStalledCalleeEndsTheAwaitAtItsDeadline) {
  test::rt().run([&](thread_context& me) -> task<> {
    if (me.id() != 0) co_return;  // thread 1 makes no calls: it only stalls in thread 0's call
    bool timed_out = false;
    try {
      (void)co_await invoke::with_deadline(
          invoke::call_return<channel::send>(me, 1, [] {
            std::this_thread::sleep_for(std::chrono::milliseconds(400));
            return 1;
          }),
          std::chrono::milliseconds(30));
    } catch (const invoke::deadline_exceeded_error& e) {
      timed_out = e.outcome() == outcome::deadline_exceeded;
    }
    EXPECT_TRUE(timed_out);
  });
}

// Spawned tasks run concurrently on one thread; when_all gathers them.
task<std::uint64_t> squares_from(thread_context& me, std::uint64_t first) {
  std::uint64_t sum = 0;
  for (std::uint64_t i = first; i < first + 4; ++i) {
    sum += co_await invoke::call_return<channel::trad, invoke::policy::retry>(
        me, static_cast<fabric::thread_id>(i % me.thread_count()), [i] { return i * i; });
  }
  co_return sum;
}

TEST(Coroutines, SpawnedTasksGatheredWithWhenAll) {
  test::rt().run([&](thread_context& me) {
    std::vector<invoke::future<std::uint64_t>> tasks;
    for (std::uint64_t t = 0; t < 8; ++t) tasks.push_back(invoke::spawn(me, squares_from(me, t * 4)));
    const std::vector<std::uint64_t> sums = invoke::when_all(me, std::move(tasks)).get();
    std::uint64_t total = 0;
    for (std::uint64_t s : sums) total += s;
    std::uint64_t expected = 0;
    for (std::uint64_t i = 0; i < 32; ++i) expected += i * i;
    EXPECT_EQ(total, expected);
    // A spawned task that throws: its future carries the exception.
    auto failing = invoke::spawn(me, [](thread_context& self) -> task<int> {
      (void)co_await invoke::call_return<channel::send>(self, self.id(), [] { return 0; });
      throw std::length_error("spawned");
    }(me));
    EXPECT_THROW((void)failing.get(), std::length_error);
  });
}

}  // namespace

int main(int argc, char** argv) { return seriema::test::run_all_tests(argc, argv); }

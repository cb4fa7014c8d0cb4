// Shutdown with calls in flight, on both sides, twice (docs/failures.md, "Shutdown"): every
// thread sends calls on every channel to every other thread of the job and returns from its
// body without waiting for them. run() must end only once each of those calls ran exactly once,
// each reply that has a live slot arrived exactly once, and the notices of a synchronizer
// destroyed with calls in flight never land on the synchronizer made after it; and it must end
// within 5 s of the last body's return. The same again in a second run (the first's late
// traffic must not reach it), then finalize() twice and the runtime's destruction, each within
// 5 s. Run under ASan by the sanitizer pass: replies to abandoned slots must touch no freed
// memory. A watchdog turns a hang into a message with every thread's stack.
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/invoke.hpp>
#include <string>
#include <vector>

#include "support/mp_main.hpp"
#include "support/report_failure.hpp"

using namespace seriema;
using fabric::outcome;
using fabric::thread_context;
using invoke::call_status;
using invoke::channel;
using invoke::notify_on;
using test::fail;

namespace {

constexpr int one_way_per_destination = 100;  // per channel
constexpr int returns_per_destination = 20;   // per channel, with slots that outlive the body
constexpr int abandoned_per_destination = 10; // per channel, slots destroyed with the body
constexpr int noticed_per_destination = 20;   // consumption-notified, synchronizer destroyed
constexpr auto shutdown_limit = std::chrono::seconds(5);

std::atomic<std::uint64_t> executed{0};  // calls run in this process
std::atomic<std::uint64_t> sent{0};      // calls this process's threads sent (status ok)

// The slots of one thread's call_returns that outlive its body, with the value each must get.
struct kept_replies {
  std::deque<fabric::return_slot<std::uint64_t>> slots;
  std::vector<std::uint64_t> expected;
};

void count(call_status status, const char* what) {
  if (status == call_status::ok) {
    sent.fetch_add(1, std::memory_order_relaxed);
  } else {
    fail("{}: not sent: {}", what, fabric::to_string(status));
  }
}

template <channel C>
void send_all(thread_context& ctx, fabric::thread_id dest, kept_replies& kept) {
  using retry = invoke::policy::retry;
  for (int i = 0; i < one_way_per_destination; ++i) {
    count(invoke::call<C, retry>(ctx, dest, [](thread_context&) { executed.fetch_add(1); }),
          "call");
  }
  for (int i = 0; i < returns_per_destination; ++i) {
    const std::uint64_t v = (std::uint64_t{ctx.id()} << 32) | (dest << 16) | std::uint64_t(i);
    auto& slot = kept.slots.emplace_back();
    kept.expected.push_back(v + 1);
    count(invoke::call_return<C, retry>(
              ctx, dest,
              [v](thread_context&) {
                executed.fetch_add(1);
                return v + 1;
              },
              slot),
          "call_return");
  }
  fabric::return_slot<std::uint64_t> abandoned[abandoned_per_destination];
  for (auto& slot : abandoned) {
    count(invoke::call_return<C, retry>(
              ctx, dest,
              [](thread_context&) {
                executed.fetch_add(1);
                return std::uint64_t{7};
              },
              slot),
          "call_return (abandoned)");
  }
}

// A synchronizer destroyed with its consumption notices in flight, then one made after it: the
// late notices must not count for the second (its word would be the first's, reused).
void notices_do_not_leak(thread_context& ctx, fabric::thread_id dest) {
  using retry = invoke::policy::retry;
  {
    invoke::synchronizer first(ctx, noticed_per_destination);
    for (int i = 0; i < noticed_per_destination; ++i) {
      count(invoke::call<channel::write, retry, notify_on::consume>(
                ctx, dest, [](thread_context&) { executed.fetch_add(1); }, first),
            "noticed call");
    }
  }
  invoke::synchronizer second(ctx, 2);
  for (int i = 0; i < 2; ++i) {
    count(invoke::call<channel::send, retry, notify_on::consume>(
              ctx, dest, [](thread_context&) { executed.fetch_add(1); }, second),
          "second synchronizer's call");
  }
  if (second.wait_for(std::chrono::seconds(60)) != outcome::done) {
    fail("thread {}: the second synchronizer did not complete", ctx.id());
    return;
  }
  // Whatever the first's notices would do to this word, they do by the time its calls ran:
  // serve until every notice of the first synchronizer could have come.
  (void)ctx.wait_until([] { return false; },
                       fabric::deadline_clock::now() + std::chrono::milliseconds(200));
  if (second.remaining() != 0) {
    fail("thread {}: a destroyed synchronizer's notices reached the next one (remaining {})",
         ctx.id(), second.remaining());
  }
}

void one_round(fabric::runtime& rt, int round) {
  const int threads = rt.options().threads_per_process;
  std::vector<kept_replies> kept(static_cast<std::size_t>(threads * rt.size()));  // by thread id
  std::atomic<int> bodies_left{threads};
  std::mutex last_return_mutex;
  std::chrono::steady_clock::time_point last_return{};
  const std::uint64_t sent_before = sent.load();
  const std::uint64_t executed_before = executed.load();
  rt.run([&](thread_context& ctx) {
    kept_replies& mine = kept[ctx.id()];
    const auto n = static_cast<fabric::thread_id>(ctx.thread_count());
    for (fabric::thread_id step = 1; step < n; ++step) {
      const fabric::thread_id dest = (ctx.id() + step) % n;
      notices_do_not_leak(ctx, dest);
      send_all<channel::send>(ctx, dest, mine);
      send_all<channel::write>(ctx, dest, mine);
      send_all<channel::trad>(ctx, dest, mine);
      send_all<channel::ovfl>(ctx, dest, mine);
    }
    // Returns with all of it in flight (trad batches unpublished, calls queued at receivers).
    std::lock_guard lock(last_return_mutex);
    last_return = std::chrono::steady_clock::now();
    bodies_left.fetch_sub(1);
  });
  const auto ended = std::chrono::steady_clock::now();
  if (ended - last_return > shutdown_limit) {
    fail("round {}: run() ended {:.2f} s after the last body returned", round,
         std::chrono::duration<double>(ended - last_return).count());
  }
  const std::uint64_t job_sent = rt.allreduce_sum(sent.load() - sent_before);
  const std::uint64_t job_executed = rt.allreduce_sum(executed.load() - executed_before);
  if (job_sent == 0 || job_sent != job_executed) {
    fail("round {}: the job sent {} calls and ran {}", round, job_sent, job_executed);
  }
  std::size_t wrong = 0;
  for (const kept_replies& k : kept) {
    for (std::size_t i = 0; i < k.slots.size(); ++i) {
      if (k.slots[i].result() != outcome::done || k.slots[i].value() != k.expected[i]) {
        if (wrong++ < 3) fail("round {}: {}", round, k.slots[i].describe());
      }
    }
  }
  if (wrong > 0) fail("round {}: {} replies missing or wrong", round, wrong);
  fmt::print("rank {}: round {}: {} calls sent by the job, each ran once; run() ended {:.3f} s "
             "after the last body returned\n",
             rt.rank(), round, job_sent,
             std::chrono::duration<double>(ended - last_return).count());
}

template <class F>
void within_limit(const char* what, F step) {
  const auto start = std::chrono::steady_clock::now();
  step();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (took > std::chrono::duration<double>(shutdown_limit).count()) {
    fail("{} took {:.2f} s", what, took);
  }
}

}  // namespace

int main() {
  try {
    auto rt = std::make_unique<fabric::runtime>();
    test::hang_watchdog watchdog(rt->rank(), std::chrono::seconds(120));
    for (int round = 1; round <= 2; ++round) {
      watchdog.enter(fmt::format("shutdown round {}", round));
      one_round(*rt, round);
    }
    watchdog.enter("finalize() twice and the runtime's destruction");
    within_limit("finalize()", [&] { rt->finalize(); });
    within_limit("a second finalize()", [&] { rt->finalize(); });
    const int rank = rt->rank();
    within_limit("the runtime's destruction", [&] { rt.reset(); });
    watchdog.leave();
    fmt::print("rank {}: exiting with status {}\n", rank, test::failures.load() == 0 ? 0 : 1);
    return test::failures.load() == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "FAILED: shutdown test: {}\n", e.what());
    return 1;
  }
}

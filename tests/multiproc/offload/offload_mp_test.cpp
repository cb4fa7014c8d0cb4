// The offload engine across processes, with each method (sleep, spin, direct, delegate): 64
// plain threads per process, none attached, make puts, gets, atomics, calls and call_returns
// to every process at once, and the totals are checked job-wide; refusals (full, out of range,
// bad destinations) queue nothing; a call_return's exception comes back; destroying an engine
// with a request pending ends it cancelled.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <fmt/format.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <optional>
#include <seriema/fabric/thread_context.hpp>
#include <boost/fiber/all.hpp>
#include <seriema/invoke/task.hpp>
#include <seriema/offload/engine.hpp>
#include <seriema/offload/fibers.hpp>
#include <seriema/offload/interop.hpp>
#include <stdexcept>
#include <thread>
#include <vector>

#include "support/mp_main.hpp"

using namespace seriema;
using fabric::outcome;
using fabric::thread_context;
using fabric::thread_id;

namespace {

constexpr int requesters = 64;
constexpr int rounds = 8;
constexpr std::size_t block_words = 4;  // each requester's block, written word by word
constexpr std::size_t max_processes = 4;
// A counter, then one word per requester, then one block per requester of each process.
constexpr std::size_t words_per_process =
    1 + requesters + max_processes * requesters * block_words;

std::atomic<std::uint64_t> calls_run{0};  // calls that ran here (any worker)

fabric::deadline_clock::time_point soon(int seconds = 60) {
  return fabric::deadline_clock::now() + std::chrono::seconds(seconds);
}

// Every process's array of words, allocated in its own memory and known to all.
std::vector<transfer::remote_memory_locator> arrays_of_every_process() {
  auto attached = test::rt().attach(soon());
  const auto mine = attached.context().allocate_remote(attached.id(),
                                                       words_per_process * sizeof(std::uint64_t));
  return test::allgather_value(mine);
}

// One requester: for each round and each process q, writes its word in q's array, reads it
// back, adds 1 to q's counter, calls a worker of q and asks one for twice a number.
void requester(offload::engine& e, const std::vector<offload::region>& regions, int t,
               std::atomic<int>& failures) {
  const int me = test::rt().rank();
  const int processes = test::rt().size();
  const thread_id workers = test::rt().placement().thread_count();
  for (int round = 0; round < rounds; ++round) {
    for (int q = 0; q < processes; ++q) {
      const std::uint64_t value = (std::uint64_t(me) << 32) | (std::uint64_t(t) << 16) | round;
      const std::uint64_t offset = (1 + std::uint64_t(t)) * 8;
      auto put = e.put(std::as_bytes(std::span(&value, 1)), regions[q], offset);
      if (put.wait(soon()) != outcome::done) ++failures;
      auto added = e.fetch_add(regions[q], 0, 1);
      const thread_id dest = static_cast<thread_id>((t + round + q) % workers);
      auto called = e.call(dest, [] { calls_run += 1; });
      auto doubled = e.call_return(dest, [value] { return value * 2; });
      if (added.wait(soon()) != outcome::done || called.wait(soon()) != outcome::done) ++failures;
      if (doubled.get() != value * 2) ++failures;
      // Adjacent words from adjacent local words, none waited for before the last: the
      // executor may post them as one operation (engine_counters::coalesced); the block must
      // read back whole either way.
      const std::uint64_t block =
          (1 + requesters + (std::uint64_t(me) * requesters + t) * block_words) * 8;
      std::array<std::uint64_t, block_words> out{}, in{};
      std::vector<offload::future<void>> parts;
      for (std::size_t w = 0; w < block_words; ++w) {
        out[w] = value + w;
        parts.push_back(e.put(std::as_bytes(std::span(&out[w], 1)), regions[q], block + w * 8));
      }
      for (auto& part : parts) {
        if (part.wait(soon()) != outcome::done) ++failures;
      }
      parts.clear();
      for (std::size_t w = 0; w < block_words; ++w) {
        parts.push_back(
            e.get(std::as_writable_bytes(std::span(&in[w], 1)), regions[q], block + w * 8));
      }
      for (auto& part : parts) {
        if (part.wait(soon()) != outcome::done) ++failures;
      }
      if (in != out) ++failures;
    }
  }
}

// Zeroes this process's array (memory from an earlier test may be handed out again), then
// waits for every process to have done so.
void zero_my_array(offload::engine& e, offload::region mine) {
  static const std::vector<std::uint64_t> zeros(words_per_process, 0);
  auto zeroed = e.put(std::as_bytes(std::span(zeros)), mine, 0);
  EXPECT_EQ(zeroed.wait(soon()), outcome::done);
  test::rt().barrier();
}

void run_suite(offload::method mode) {
  SCOPED_TRACE(offload::to_string(mode));
  auto& rt = test::rt();
  ASSERT_LE(rt.size(), static_cast<int>(max_processes));
  calls_run = 0;
  const auto arrays = arrays_of_every_process();
  offload::engine_options options;
  options.mode = mode;
  options.executors = 2;
  offload::engine e(rt, options);
  std::vector<offload::region> regions;
  for (const auto& a : arrays) regions.push_back(e.add_region(a));
  zero_my_array(e, regions[static_cast<std::size_t>(rt.rank())]);
  std::atomic<int> failures{0};
  std::atomic<int> finished{0};
  rt.run([&](thread_context& ctx) {
    if (ctx.id() != rt.placement().global_id(rt.rank(), 0)) return;
    std::vector<std::thread> pool;
    for (int t = 0; t < requesters; ++t) {
      pool.emplace_back([&, t] {
        requester(e, regions, t, failures);
        finished += 1;
      });
    }
    EXPECT_TRUE(ctx.wait_until([&] { return finished.load() == requesters; }, soon(240)));
    for (auto& thread : pool) thread.join();
  });
  EXPECT_EQ(failures.load(), 0);
  // Every requester of every process added 1 to this process's counter once per round, and
  // its word here holds its last round's value; every call ran once.
  auto attached = rt.attach(soon());
  const auto& mine = arrays[static_cast<std::size_t>(rt.rank())];
  std::vector<std::uint64_t> words(words_per_process);
  auto got = e.get(std::as_writable_bytes(std::span(words)), regions[rt.rank()], 0);
  ASSERT_EQ(got.wait(soon()), outcome::done);
  EXPECT_EQ(words[0], std::uint64_t(rt.size()) * requesters * rounds);
  const auto sums = test::allgather_value(calls_run.load());
  std::uint64_t total = 0;
  for (auto s : sums) total += s;
  EXPECT_EQ(total, std::uint64_t(rt.size()) * rt.size() * requesters * rounds);
  const auto counters = e.counters();
  EXPECT_GE(counters.requests, std::uint64_t(requesters) * rounds * rt.size() * 4);
  EXPECT_LE(counters.endpoints, std::uint64_t(options.executors) * rt.size());
  (void)mine;
  attached.context().free_remote(mine);
  rt.barrier();
}

}  // namespace

TEST(Offload, SixtyFourPlainThreadsMakeEveryKindOfRequestWithEachMethod) {
  for (auto mode : {offload::method::sleep, offload::method::spin, offload::method::direct,
                    offload::method::delegate}) {
    run_suite(mode);
  }
}

// A worker's coroutine co_awaits offload futures (they end in the worker's polls), and a
// combinator takes them, with an executor and with delegation. The sleeping engine first and the
// delegating one after it (its lane's context is the first one's, the slot kept) is also the
// regression test of a future that ended inside the co_await's watch (a delegating lane is
// driven by the look that watch takes): it was queued to fire twice and the second firing
// called a cleared continuation.
invoke::task<std::uint64_t> ask_twice(thread_context& me, offload::engine& e, thread_id dest,
                                      std::uint64_t x) {
  const std::uint64_t once = co_await offload::on(me, e.call_return(dest, [x] { return x + 1; }));
  const std::uint64_t twice =
      co_await offload::on(me, e.call_return(dest, [once] { return once + 1; }));
  co_return twice;
}

TEST(Offload, CoroutinesAwaitOffloadFutures) {
  auto& rt = test::rt();
  const thread_id workers = rt.placement().thread_count();
  for (auto mode : {offload::method::sleep, offload::method::delegate}) {
    SCOPED_TRACE(offload::to_string(mode));
    offload::engine_options options;
    options.mode = mode;
    offload::engine e(rt, options);
    rt.run([&](thread_context& me) -> invoke::task<> {
      const thread_id dest = (me.id() + 1) % workers;
      EXPECT_EQ(co_await ask_twice(me, e, dest, me.id() * 10), me.id() * 10 + 2);
      auto both = invoke::when_all(offload::on(me, e.call_return(dest, [] { return 5; })),
                                   offload::on(me, e.call_return(dest, [] { return 7; })));
      const auto [five, seven] = co_await std::move(both);
      EXPECT_EQ(five + seven, 12);
      auto threw = offload::on(me, e.call_return(dest, []() -> int {
        throw std::runtime_error("from the callee");
      }));
      EXPECT_THROW((void)co_await std::move(threw), std::exception);
    });
  }
  rt.barrier();
}

// 256 Boost.Fiber fibers per process (64 on each of 4 OS threads), none attached, each making
// calls and call_returns through the engine: a waiting fiber yields to the others of its thread.
TEST(Offload, FibersMakeRequestsAndYieldWhileTheyWait) {
  auto& rt = test::rt();
  constexpr int os_threads = 4;
  constexpr int fibers_per_thread = 64;
  constexpr int requests_per_fiber = 4;
  calls_run = 0;
  offload::engine e(rt);
  const thread_id workers = rt.placement().thread_count();
  std::atomic<int> failures{0};
  std::atomic<int> finished{0};
  rt.run([&](thread_context& ctx) {
    if (ctx.id() != rt.placement().global_id(rt.rank(), 0)) return;
    std::vector<std::thread> threads;
    for (int o = 0; o < os_threads; ++o) {
      threads.emplace_back([&, o] {
        offload::fiber_waits yield_to_fibers;
        std::vector<boost::fibers::fiber> fibers;
        for (int f = 0; f < fibers_per_thread; ++f) {
          fibers.emplace_back([&, o, f] {
            for (int i = 0; i < requests_per_fiber; ++i) {
              const thread_id dest = static_cast<thread_id>((o + f + i) % workers);
              const std::uint64_t x = std::uint64_t(o) * 1000 + f * 10 + i;
              auto called = e.call(dest, [] { calls_run += 1; });
              if (e.call_return(dest, [x] { return x * 3; }).get() != x * 3) ++failures;
              if (called.wait(soon()) != outcome::done) ++failures;
            }
          });
        }
        for (auto& fiber : fibers) fiber.join();
        finished += 1;
      });
    }
    EXPECT_TRUE(ctx.wait_until([&] { return finished.load() == os_threads; }, soon(120)));
    for (auto& thread : threads) thread.join();
  });
  EXPECT_EQ(failures.load(), 0);
  const auto sums = test::allgather_value(calls_run.load());
  std::uint64_t total = 0;
  for (auto s : sums) total += s;
  EXPECT_EQ(total, std::uint64_t(rt.size()) * os_threads * fibers_per_thread * requests_per_fiber);
}

// Gets, then puts, of scattered words, many in flight: each get must read its own word and each
// put land in its own, whether the executor posts them one by one, as one operation per
// adjacent run, or (where transfers travel as messages: tcp) as one gathered call per batch
// (engine_counters::gathered says how many were).
TEST(Offload, ScatteredTransfersReachTheirOwnWords) {
  auto& rt = test::rt();
  const auto arrays = arrays_of_every_process();
  offload::engine e(rt);
  std::vector<offload::region> regions;
  for (const auto& a : arrays) regions.push_back(e.add_region(a));
  const auto pattern = [](int process, std::uint64_t word) {
    return (std::uint64_t(process) << 48) ^ (word * 0x9E3779B97F4A7C15ull);
  };
  std::vector<std::uint64_t> mine(words_per_process);
  for (std::size_t w = 0; w < mine.size(); ++w) mine[w] = pattern(rt.rank(), w);
  ASSERT_EQ(e.put(std::as_bytes(std::span(mine)), regions[static_cast<std::size_t>(rt.rank())], 0)
                .wait(soon()),
            outcome::done);
  rt.barrier();
  const int next = (rt.rank() + 1) % rt.size();
  constexpr std::size_t gets = 512;
  static_assert(gets <= words_per_process);
  std::vector<std::uint64_t> got(gets), words(gets), put_back(gets), put_words(gets);
  std::vector<offload::future<void>> pending;
  rt.run([&](thread_context& ctx) {
    if (ctx.id() != rt.placement().global_id(rt.rank(), 0)) return;
    std::atomic<bool> done{false};
    std::thread reader([&] {
      for (std::size_t i = 0; i < gets; ++i) {
        words[i] = (i * 7919 + 13) % words_per_process;
        pending.push_back(e.get(std::as_writable_bytes(std::span(&got[i], 1)),
                                regions[static_cast<std::size_t>(next)], words[i] * 8));
      }
      for (auto& f : pending) EXPECT_EQ(f.wait(soon()), outcome::done);
      pending.clear();
      // Puts of the complement of what was read, to distinct words (i < gets <= words).
      for (std::size_t i = 0; i < gets; ++i) {
        put_back[i] = ~got[i];
        put_words[i] = (i * 613 + 5) % words_per_process;
        pending.push_back(e.put(std::as_bytes(std::span(&put_back[i], 1)),
                                regions[static_cast<std::size_t>(next)], put_words[i] * 8));
      }
      for (auto& f : pending) EXPECT_EQ(f.wait(soon()), outcome::done);
      done = true;
    });
    EXPECT_TRUE(ctx.wait_until([&] { return done.load(); }, soon()));  // serves the gathers
    reader.join();
  });
  for (std::size_t i = 0; i < gets; ++i) ASSERT_EQ(got[i], pattern(next, words[i])) << i;
  // Every put landed: read the whole array of the next process back.
  std::vector<std::uint64_t> after(words_per_process);
  // (Over tcp the next process serves this get from its barrier below, or its executor.)
  ASSERT_EQ(e.get(std::as_writable_bytes(std::span(after)),
                  regions[static_cast<std::size_t>(next)], 0)
                .wait(soon()),
            outcome::done);
  for (std::size_t i = 0; i < gets; ++i) ASSERT_EQ(after[put_words[i]], put_back[i]) << i;
  const auto c = e.counters();
  if (rt.rank() == 0) {
    fmt::print("scattered transfers: {} gathered, {} coalesced, {} batches\n", c.gathered,
               c.coalesced, c.batches);
  }
  rt.barrier();
}

// Refused requests queue nothing and say why; a full pool refuses at once, or after
// wait_when_full.
TEST(Offload, RefusalsQueueNothing) {
  auto& rt = test::rt();
  const auto arrays = arrays_of_every_process();
  offload::engine_options options;
  options.max_requests = 4;
  options.wait_when_full = std::chrono::milliseconds(20);
  offload::engine e(rt, options);
  const auto r = e.add_region(arrays[static_cast<std::size_t>(rt.rank())]);
  zero_my_array(e, r);
  std::uint64_t word = 7;
  auto outside = e.put(std::as_bytes(std::span(&word, 1)), r, words_per_process * 8);
  EXPECT_EQ(outside.status(), offload::request_status::out_of_range);
  EXPECT_EQ(outside.result(), outcome::not_executed);
  EXPECT_THROW(outside.get(), invoke::not_executed_error);
  EXPECT_EQ(e.fetch_add(r, 4, 1).status(), offload::request_status::out_of_range);
  EXPECT_EQ(e.call(1u << 30, [] {}).status(), offload::request_status::bad_destination);
  EXPECT_EQ(e.fetch_add(offload::region{}, 0, 1).status(),
            offload::request_status::bad_destination);
  EXPECT_EQ(e.counters().requests, 1u);  // the zeroing put
  std::vector<offload::future<std::uint64_t>> held;
  for (int i = 0; i < 4; ++i) held.push_back(e.fetch_add(r, 0, 1));
  for (auto& f : held) EXPECT_EQ(f.wait(soon()), outcome::done);
  // Four futures hold the four records: the fifth request is refused after waiting.
  auto refused = e.fetch_add(r, 0, 1);
  EXPECT_EQ(refused.status(), offload::request_status::full);
  held.clear();
  auto accepted = e.fetch_add(r, 0, 1);
  EXPECT_EQ(accepted.status(), offload::request_status::ok);
  EXPECT_EQ(accepted.get(), 4u);
  EXPECT_EQ(e.counters().refused_full, 1u);
  rt.barrier();
}

// A call_return's exception comes back to the requester; values of other types too.
TEST(Offload, ExceptionsAndValuesComeBack) {
  auto& rt = test::rt();
  offload::engine e(rt);
  const thread_id workers = rt.placement().thread_count();
  rt.run([&](thread_context& ctx) {
    if (ctx.id() != rt.placement().global_id(rt.rank(), 0)) return;
    std::atomic<bool> done{false};
    std::thread outsider([&] {
      const thread_id dest = static_cast<thread_id>((ctx.id() + 1) % workers);
      auto threw = e.call_return(dest, []() -> int { throw std::runtime_error("no such key"); });
      try {
        (void)threw.get();
        ADD_FAILURE() << "the exception did not come back";
      } catch (const std::exception& caught) {
        EXPECT_NE(std::string(caught.what()).find("no such key"), std::string::npos);
      }
      struct pair { std::uint64_t a, b; };
      auto both = e.call_return(dest, [](thread_context& self) {
        return pair{self.id(), 42};
      });
      const pair got = both.get();
      EXPECT_EQ(got.a, dest);
      EXPECT_EQ(got.b, 42u);
      done = true;
    });
    EXPECT_TRUE(ctx.wait_until([&] { return done.load(); }, soon()));  // serving the calls
    outsider.join();
  });
  rt.barrier();
}

// Calls and call_buffers to one thread, made faster than an executor sends them, travel
// several to a message (engine_options::bundle_bytes; with 0, one each) and still run once
// each, in each requester's order, with their own buffers; a call that throws inside a bundle
// stops none of the others, and every such exception leaves a poll of the destination; a call
// that waits inside (its nested polls) lets the next one of its requester run meanwhile, as
// lone calls would (here it waits for that next call).
namespace bundling {
constexpr int senders = 8;
constexpr std::uint64_t calls_each = 400;
constexpr std::uint64_t throw_every = 50;
std::array<std::atomic<std::uint64_t>, senders> next_expected{};  // by sending thread
std::atomic<std::uint64_t> received{0}, out_of_order{0}, wrong_buffers{0}, stalled{0};
std::atomic<bool> next_one_ran{false};
constexpr std::uint64_t waiting_seq = 100;  // sender 0's call that waits for its next one

void take(int sender, std::uint64_t seq) {
  received += 1;
  if (sender == 0 && seq == waiting_seq + 1) next_one_ran = true;
  if (next_expected[static_cast<std::size_t>(sender)].exchange(seq + 1) != seq) out_of_order += 1;
  if (seq % throw_every == throw_every - 1) {
    throw std::runtime_error(fmt::format("bundled call threw: {} {}", sender, seq));
  }
}

// The poll that caught the exception of (sender, seq): one per call, in each sender's order.
void caught_exception(const std::runtime_error& thrown, std::array<std::uint64_t, senders>& last,
                      std::uint64_t& caught) {
  int sender = -1;
  unsigned long long seq = 0;
  ASSERT_EQ(std::sscanf(thrown.what(), "bundled call threw: %d %llu", &sender, &seq), 2)
      << thrown.what();
  ASSERT_TRUE(sender >= 0 && sender < senders);
  auto& previous = last[static_cast<std::size_t>(sender)];
  EXPECT_TRUE(previous == ~std::uint64_t{0} || seq > previous) << thrown.what();
  previous = seq;
  ++caught;
}

void send_all(offload::engine& e, thread_id dest, int sender, std::atomic<int>& failures) {
  std::vector<offload::future<void>> sent;
  sent.reserve(calls_each);
  std::vector<std::uint64_t> payloads(calls_each);  // each untouched until its future ended
  for (std::uint64_t seq = 0; seq < calls_each; ++seq) {
    if (sender == 0 && seq == waiting_seq) {
      sent.push_back(e.call(dest, [](thread_context& self) {
        take(0, waiting_seq);
        if (!self.wait_until([] { return next_one_ran.load(); }, soon(30))) stalled += 1;
      }));
    } else if (seq % 2 == 0) {
      sent.push_back(e.call(dest, [sender, seq] { take(sender, seq); }));
    } else {
      std::uint64_t& payload = payloads[seq];
      payload = seq * 3 + 1;
      sent.push_back(e.call_buffer(
          dest,
          [sender, seq](std::span<std::byte> bytes) {
            std::uint64_t got = 0;
            if (bytes.size() == sizeof got) std::memcpy(&got, bytes.data(), sizeof got);
            if (got != seq * 3 + 1) wrong_buffers += 1;
            take(sender, seq);
          },
          std::as_bytes(std::span(&payload, 1))));
    }
  }
  for (auto& f : sent) {
    if (f.wait(soon()) != outcome::done) ++failures;
  }
}

void run_case(std::size_t bundle_bytes) {
  SCOPED_TRACE(fmt::format("bundle_bytes = {}", bundle_bytes));
  auto& rt = test::rt();
  for (auto& n : next_expected) n = 0;
  received = 0;
  out_of_order = 0;
  wrong_buffers = 0;
  stalled = 0;
  next_one_ran = false;
  offload::engine_options options = offload::engine_options::from_environment();
  options.bundle_bytes = bundle_bytes;
  offload::engine e(rt, options);
  // Each process sends to worker 0 of the next one, so each worker 0 hears one process.
  const thread_id dest = rt.placement().global_id((rt.rank() + 1) % rt.size(), 0);
  const std::uint64_t expected = senders * calls_each;
  std::atomic<int> failures{0};
  std::uint64_t caught = 0;
  std::array<std::uint64_t, senders> last_thrown;
  last_thrown.fill(~std::uint64_t{0});
  rt.run([&](thread_context& ctx) {
    if (ctx.id() != rt.placement().global_id(rt.rank(), 0)) return;
    std::vector<std::thread> pool;
    for (int t = 0; t < senders; ++t) {
      pool.emplace_back([&, t] { send_all(e, dest, t, failures); });
    }
    const auto deadline = soon(120);
    while ((received.load() < expected || caught < expected / throw_every) &&
           fabric::deadline_clock::now() < deadline) {
      try {
        (void)ctx.poll();
      } catch (const std::runtime_error& thrown) {
        caught_exception(thrown, last_thrown, caught);
      }
    }
    for (auto& thread : pool) thread.join();
  });
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(received.load(), expected);
  EXPECT_EQ(caught, expected / throw_every);
  EXPECT_EQ(out_of_order.load(), 0u);
  EXPECT_EQ(wrong_buffers.load(), 0u);
  EXPECT_EQ(stalled.load(), 0u);
  // Whether calls were bundled depends on how fast the executor took them (a batch holds what
  // was queued meanwhile); bundles_when_queued shows that they are.
  if (bundle_bytes == 0 || options.mode == offload::method::direct) {
    EXPECT_EQ(e.counters().bundles, 0u);
  }
  rt.barrier();
}

// 64 calls queued in a burst while the executor sleeps: it wakes (a futex, tens of
// microseconds) to a queue of several, whose batch goes as a bundle (all to one thread).
void bundles_when_queued() {
  auto& rt = test::rt();
  offload::engine_options options;
  options.mode = offload::method::sleep;
  offload::engine e(rt, options);
  const thread_id dest = rt.placement().global_id((rt.rank() + 1) % rt.size(), 0);
  received = 0;  // before this process's run(): the calls it receives run inside it
  rt.run([&](thread_context& ctx) {
    if (ctx.id() != rt.placement().global_id(rt.rank(), 0)) return;
    const auto deadline = soon();
    while (e.counters().sleeps == 0 && fabric::deadline_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_GE(e.counters().sleeps, 1u);
    std::vector<offload::future<void>> sent;
    sent.reserve(64);
    for (std::uint64_t seq = 0; seq < 64; ++seq) {
      sent.push_back(e.call(dest, [seq] { received += seq; }));
    }
    for (auto& f : sent) EXPECT_EQ(f.wait(soon()), outcome::done);
  });
  EXPECT_GE(e.counters().bundles, 1u);
  EXPECT_EQ(received.load(), 63u * 64u / 2u);  // run() ended once every call ran
  rt.barrier();
}
}  // namespace bundling

TEST(Offload, CallsToOneThreadShareMessagesAndKeepTheirOrder) {
  if (test::rt().size() < 2) GTEST_SKIP() << "needs a second process";
  bundling::run_case(offload::engine_options{}.bundle_bytes);
  bundling::run_case(128);  // 3 or 4 calls a bundle: full bundles are sent within a batch
  bundling::run_case(0);
  bundling::bundles_when_queued();
}

// An exception inside an executor (here: a call sent to the lane's own id that throws, run in
// the lane's poll) reaches no requester: it is counted and logged, and the engine goes on.
TEST(Offload, AnExecutorsExceptionReachesNoRequester) {
  auto& rt = test::rt();
  offload::engine e(rt);
  const thread_id lane = e.lane_ids().at(0);
  const thread_id workers = rt.placement().thread_count();
  rt.run([&](thread_context& ctx) {
    if (ctx.id() != rt.placement().global_id(rt.rank(), 0)) return;
    std::atomic<bool> done{false};
    std::thread outsider([&] {
      auto thrown = e.call(lane, [] { throw std::runtime_error("thrown in the executor"); });
      EXPECT_EQ(thrown.wait(soon()), outcome::done);  // sent: it is the lane's to run
      const auto deadline = soon();
      while (e.counters().executor_errors == 0 && fabric::deadline_clock::now() < deadline) {
        e.progress();  // a delegating engine's lane runs when someone drives it
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      EXPECT_EQ(e.counters().executor_errors, 1u);
      const thread_id dest = static_cast<thread_id>((ctx.id() + 1) % workers);
      EXPECT_EQ(e.call_return(dest, [] { return 11; }).get(), 11);
      done = true;
    });
    EXPECT_TRUE(ctx.wait_until([&] { return done.load(); }, soon()));
    outsider.join();
  });
  rt.barrier();
}

// Outside run() a worker runs no calls, so a call_return to another process's worker stays
// pending; destroying the engine ends it cancelled, and the future says so afterwards.
TEST(Offload, DestroyingTheEngineCancelsWhatIsPending) {
  auto& rt = test::rt();
  if (rt.size() < 2) GTEST_SKIP() << "needs a second process";
  std::optional<offload::future<int>> pending;
  {
    offload::engine e(rt);
    const thread_id other = rt.placement().global_id((rt.rank() + 1) % rt.size(), 0);
    pending.emplace(e.call_return(other, [] { return 1; }));
    EXPECT_EQ(pending->wait(std::chrono::milliseconds(50)), outcome::deadline_exceeded);
    pending.emplace(e.call_return(other, [] { return 2; }));
  }
  EXPECT_EQ(pending->result(), outcome::cancelled);
  EXPECT_THROW((void)pending->get(), invoke::cancelled_error);
  rt.barrier();
  rt.run([](thread_context&) {});  // the calls run now; their replies are dropped
}

// One-sided calls through the engine (invoke::channel write, trad and ovfl): 8 plain threads
// per process, none attached, make calls, call_buffers and call_returns on the channel to every
// worker of every process; each runs once, with its own buffer and value, in its requester's
// order at its destination; a consumption-notified call (call_consumed, on the channel and
// send-based) has run when its future is done; a fresh run() gets fresh channels (each channel
// is a run of its own here). A one-sided call to an attached thread is refused, and one made
// outside run() ends not_executed saying why.
namespace one_sided {
constexpr int senders = 8;
constexpr std::uint64_t calls_each = 24;  // per sender and destination: 8 of each kind
constexpr std::uint64_t consumed_each = 2;  // then: one call_consumed<C>, one send-based
constexpr std::size_t max_threads = 8;

std::atomic<std::uint64_t> ran{0};
std::atomic<std::uint64_t> ran_late{0};  // fire-and-forget calls made as the body returns
constexpr std::uint64_t late_each = 8;   // per sender and destination
std::atomic<std::uint64_t> out_of_order{0};
std::atomic<std::uint64_t> bad_buffer{0};
// Per destination thread (its own entries only), sender process and sender: the next sequence.
std::array<std::array<std::array<std::uint64_t, senders>, max_processes>, max_threads> next{};

struct tag {
  std::uint32_t process;
  std::uint32_t sender;
  std::uint64_t seq;
};

void take(thread_context& self, tag t) {
  std::uint64_t& expected = next[self.id()][t.process][t.sender];
  if (t.seq != expected) ++out_of_order;
  expected = t.seq + 1;
  ++ran;
}

// Calls whose futures are dropped at once, made just before the body returns: the run still
// ends only once they ran (each is work of the run until the executor wrote it).
template <invoke::channel C>
void fire_and_forget(offload::engine& e) {
  const thread_id workers = test::rt().placement().thread_count();
  for (std::uint64_t k = 0; k < late_each; ++k) {
    for (thread_id dest = 0; dest < workers; ++dest) {
      (void)e.call<C>(dest, [] { ran_late.fetch_add(1, std::memory_order_relaxed); });
    }
  }
  // A delegating engine has no executor: what waits for room is sent when someone drives it.
  if (e.options().mode == offload::method::delegate) {
    EXPECT_TRUE(e.quiet(soon()));
  }
}

template <invoke::channel C>
void send_all(offload::engine& e, int sender, std::atomic<int>& failures) {
  const auto me = static_cast<std::uint32_t>(test::rt().rank());
  const thread_id workers = test::rt().placement().thread_count();
  for (thread_id dest = 0; dest < workers; ++dest) {
    std::vector<offload::future<void>> sent;
    std::vector<offload::future<std::uint64_t>> asked;
    for (std::uint64_t seq = 0; seq < calls_each; seq += 3) {
      const tag t{me, static_cast<std::uint32_t>(sender), seq};
      sent.push_back(e.call<C>(dest, [t](thread_context& self) { take(self, t); }));
      const std::array<std::uint64_t, 2> bytes{seq, ~seq};
      const tag u{me, t.sender, seq + 1};
      sent.push_back(e.call_buffer<C>(
          dest,
          [u](thread_context& self, std::span<std::byte> buffer) {
            std::array<std::uint64_t, 2> got{};
            if (buffer.size() == sizeof got) std::memcpy(got.data(), buffer.data(), sizeof got);
            if (got[0] != u.seq - 1 || got[1] != ~(u.seq - 1)) ++bad_buffer;
            take(self, u);
          },
          std::as_bytes(std::span(bytes))));
      // The buffer is copied once the call is written: wait before the array goes.
      if (sent.back().wait(soon()) != outcome::done) ++failures;
      const tag v{me, t.sender, seq + 2};
      asked.push_back(e.call_return<C>(dest, [v](thread_context& self) {
        take(self, v);
        return v.seq * 2;
      }));
    }
    for (auto& f : sent) {
      if (f.wait(soon()) != outcome::done) ++failures;
    }
    for (std::size_t i = 0; i < asked.size(); ++i) {
      if (asked[i].wait(soon(30)) != outcome::done || asked[i].get() != (3 * i + 2) * 2) {
        ++failures;
      }
    }
    // Consumption-notified, on the channel and send-based: once the future is done the call
    // has run there, so a question asked after it sees its sequence number taken.
    for (std::uint64_t seq = calls_each; seq < calls_each + consumed_each; ++seq) {
      const tag t{me, static_cast<std::uint32_t>(sender), seq};
      auto consumed = seq == calls_each
                     ? e.call_consumed<C>(dest, [t](thread_context& self) { take(self, t); })
                     : e.call_consumed(dest, [t](thread_context& self) { take(self, t); });
      if (consumed.wait(soon(30)) != outcome::done) ++failures;
      auto seen = e.call_return(dest, [t](thread_context& self) {
        return next[self.id()][t.process][t.sender];
      });
      if (seen.wait(soon(30)) != outcome::done || seen.get() != seq + 1) ++failures;
    }
  }
}

template <invoke::channel C>
void run_case(offload::engine& e) {
  SCOPED_TRACE(invoke::to_string(C));
  auto& rt = test::rt();
  ran = 0;
  ran_late = 0;
  out_of_order = 0;
  bad_buffer = 0;
  for (auto& per_dest : next) {
    for (auto& per_process : per_dest) per_process.fill(0);
  }
  const std::uint64_t written_before = e.counters().one_sided;
  std::atomic<int> failures{0};
  std::atomic<int> finished{0};
  rt.run([&](thread_context& ctx) {
    if (ctx.id() != rt.placement().global_id(rt.rank(), 0)) return;
    std::vector<std::thread> pool;
    for (int s = 0; s < senders; ++s) {
      pool.emplace_back([&, s] {
        send_all<C>(e, s, failures);
        fire_and_forget<C>(e);
        finished += 1;
      });
    }
    EXPECT_TRUE(ctx.wait_until([&] { return finished.load() == senders; }, soon(120)));
    for (auto& thread : pool) thread.join();
  });
  std::uint64_t late = 0;
  for (auto n : test::allgather_value(ran_late.load())) late += n;
  EXPECT_EQ(late, std::uint64_t(senders) * rt.placement().thread_count() * late_each *
                      std::uint64_t(rt.size()));
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(out_of_order.load(), 0u);
  EXPECT_EQ(bad_buffer.load(), 0u);
  const std::uint64_t pairs = std::uint64_t(senders) * rt.placement().thread_count();
  EXPECT_EQ(e.counters().one_sided - written_before, pairs * (calls_each + 1 + late_each));
  std::uint64_t total = 0;
  for (auto n : test::allgather_value(ran.load())) total += n;
  EXPECT_EQ(total, pairs * (calls_each + consumed_each) * std::uint64_t(rt.size()));
}
}  // namespace one_sided

TEST(Offload, OneSidedCallsGoThroughTheEngineOnEveryChannel) {
  auto& rt = test::rt();
  ASSERT_LE(rt.placement().thread_count(), one_sided::max_threads);
  for (auto mode : {offload::method::sleep, offload::method::direct, offload::method::delegate}) {
    SCOPED_TRACE(offload::to_string(mode));
    offload::engine_options options;
    options.mode = mode;
    offload::engine e(rt, options);
    one_sided::run_case<invoke::channel::write>(e);
    one_sided::run_case<invoke::channel::trad>(e);
    one_sided::run_case<invoke::channel::ovfl>(e);
    const thread_id lane = e.lane_ids().at(0);
    EXPECT_EQ(e.call<invoke::channel::write>(lane, [] {}).status(),
              offload::request_status::bad_destination);
    auto outside = e.call<invoke::channel::write>(0, [] {});
    EXPECT_EQ(outside.wait(soon()), outcome::not_executed);
    try {
      outside.get();
      ADD_FAILURE() << "a one-sided call outside run() did not fail";
    } catch (const std::exception& refused) {
      EXPECT_NE(std::string(refused.what()).find("not in a run"), std::string::npos)
          << refused.what();
    }
    rt.barrier();
  }
}

int main(int argc, char** argv) { return seriema::test::run_all_tests(argc, argv); }

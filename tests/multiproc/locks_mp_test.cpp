// Remote atomics and the distributed lock across processes under contention (shm, tcp, two
// emulated machines): concurrent fetch_add sums exactly, compare_exchange/exchange/load/store
// semantics, a non-atomic remote counter incremented by get/put under the lock ends exact with
// tickets granted in increasing order (also with a 4-slot ring that fills and wraps), a short
// deadline abandons a wait and the release skips it, and short deadlines under contention leave
// the lock working.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <seriema/fabric/distributed_lock.hpp>
#include <seriema/fabric/remote_atomic.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/transfer/transmitter.hpp>
#include <seriema/transfer/ucx.hpp>

#include "support/mp_main.hpp"

using namespace seriema;
using fabric::outcome;
using fabric::thread_context;

namespace {

constexpr int max_local_threads = 16;
constexpr auto generous = std::chrono::seconds(60);  // waits that only a bug would exhaust

// What thread 0 hands every other thread at the start of a test: the shared memory and lock.
struct shared_setup {
  transfer::remote_memory_locator words;  // 64 words of registered memory
  fabric::distributed_lock_descriptor lock;
};
std::array<shared_setup, max_local_threads> setups;
std::array<std::atomic<bool>, max_local_threads> setup_arrived;

int local_index(thread_context& ctx) {
  return test::rt().placement().locate(ctx.id()).local_thread;
}

// Thread 0 makes the setup (words in the zone of the job's last thread, in another process when
// there are several; the lock at `lock_home`) and sends it to every thread; every thread returns
// its copy.
shared_setup share_setup(thread_context& ctx, std::uint32_t slots, fabric::thread_id lock_home) {
  const int me = local_index(ctx);
  if (ctx.id() == 0) {
    shared_setup setup;
    setup.words = ctx.allocate_remote(ctx.thread_count() - 1, 64 * 8);
    for (std::uint64_t word = 0; word < 16; ++word) {  // fresh memory is not zeroed
      EXPECT_EQ(fabric::remote_atomic(ctx, setup.words, word * 8).store(0), outcome::done);
    }
    setup.lock = fabric::distributed_lock::create(ctx, lock_home, slots);
    for (fabric::thread_id dest = 1; dest < ctx.thread_count(); ++dest) {
      EXPECT_EQ(ctx.call(dest,
                         [setup](thread_context& self) {
                           const int at = local_index(self);
                           setups[static_cast<std::size_t>(at)] = setup;
                           setup_arrived[static_cast<std::size_t>(at)].store(true);
                         }),
                fabric::call_status::ok);
    }
    return setup;
  }
  auto& arrived = setup_arrived[static_cast<std::size_t>(me)];
  EXPECT_TRUE(
      ctx.wait_until([&] { return arrived.load(); }, fabric::deadline_clock::now() + generous));
  arrived.store(false);
  return setups[static_cast<std::size_t>(me)];
}

// Every thread adds 1 to word `word` when it is done; then waits until all did, so that what
// they wrote is final (the words' memory is read after this by thread 0).
void all_done(thread_context& ctx, const transfer::remote_memory_locator& words,
              std::uint64_t word) {
  fabric::remote_atomic done(ctx, words, word * 8);
  ASSERT_EQ(done.add(1), outcome::done);
  const auto deadline = fabric::deadline_clock::now() + generous;
  for (;;) {
    const fabric::atomic_result seen = done.load();
    ASSERT_TRUE(seen.ok()) << fabric::to_string(seen.how);
    if (seen.value >= ctx.thread_count()) return;
    ASSERT_LT(fabric::deadline_clock::now(), deadline) << "threads never finished";
    ctx.poll();
  }
}

// Non-atomic get and put of one remote word (what the lock protects), each waited for while
// serving calls (over tcp the owner's process must progress too).
class plain_word {
 public:
  plain_word(thread_context& ctx, const transfer::remote_memory_locator& words, std::uint64_t word)
      : ctx_(ctx),
        endpoint_(ctx.endpoint_to(words.process)),
        memory_(endpoint_, words, false),
        tx_(endpoint_, {}),
        offset_(word * 8) {}
  std::uint64_t get() {
    std::uint64_t value = 0;
    EXPECT_EQ(tx_.get({reinterpret_cast<std::byte*>(&value), 8}, memory_, offset_),
              transfer::op_status::ok);
    complete();
    return value;
  }
  void put(std::uint64_t value) {
    EXPECT_EQ(tx_.put({reinterpret_cast<const std::byte*>(&value), 8}, memory_, offset_),
              transfer::op_status::ok);
    complete();  // before the lock is released: the next holder must read it
  }

 private:
  void complete() {
    const transfer::completion_tag tag = tx_.current_tag();
    tx_.request_completion();
    ASSERT_TRUE(ctx_.wait_until([&] { return tag.is_complete() || endpoint_.failed(); },
                                fabric::deadline_clock::now() + generous));
    ASSERT_FALSE(tx_.failed());
  }
  thread_context& ctx_;
  transfer::ucx_endpoint& endpoint_;
  transfer::remote_memory memory_;
  transfer::transmitter tx_;
  std::uint64_t offset_;
};

// Words of the shared block (8 bytes each).
constexpr std::uint64_t counter_word = 0;
constexpr std::uint64_t last_ticket_word = 1;
constexpr std::uint64_t done_word = 2;
constexpr std::uint64_t sum_word = 3;
constexpr std::uint64_t fetched_sum_word = 4;
constexpr std::uint64_t cas_word = 5;
constexpr std::uint64_t winners_word = 6;
constexpr std::uint64_t successes_word = 7;
constexpr std::uint64_t flag_word = 8;

fabric::thread_id last_thread(thread_context& ctx) { return ctx.thread_count() - 1; }

// Critical sections per thread in the lock tests: `usual`, or LOCKS_MP_ROUNDS where a run with
// many threads on few cores must stay within its time (locks.cmake sets it for 4 processes).
std::uint64_t rounds_or_environment(std::uint64_t usual) {
  const char* text = std::getenv("LOCKS_MP_ROUNDS");
  return text != nullptr && std::atoi(text) > 0 ? static_cast<std::uint64_t>(std::atoi(text))
                                                 : usual;
}

}  // namespace

TEST(RemoteAtomic, ConcurrentFetchAddFromEveryThreadSumsExactly) {
  constexpr std::uint64_t adds = 300;
  test::rt().run([&](thread_context& ctx) {
    const shared_setup setup = share_setup(ctx, 4, last_thread(ctx));
    fabric::remote_atomic sum(ctx, setup.words, sum_word * 8);
    fabric::remote_atomic fetched_sum(ctx, setup.words, fetched_sum_word * 8);
    std::uint64_t previous = 0, mine = 0;
    const auto started = std::chrono::steady_clock::now();
    for (std::uint64_t i = 0; i < adds; ++i) {
      const fabric::atomic_result got = sum.fetch_add(1);
      ASSERT_TRUE(got.ok()) << fabric::to_string(got.how);
      if (i > 0) {
        EXPECT_GT(got.value, previous) << "fetch_add went backwards";
      }
      previous = got.value;
      mine += got.value;
    }
    const auto spent = std::chrono::steady_clock::now() - started;
    ASSERT_EQ(fetched_sum.add(mine), outcome::done);
    all_done(ctx, setup.words, done_word);
    if (ctx.id() != 0) return;
    std::printf("fetch_add under contention: %.1f us per operation on thread 0 (%u threads)\n",
                std::chrono::duration<double, std::micro>(spent).count() / adds,
                ctx.thread_count());
    const std::uint64_t total = adds * ctx.thread_count();
    EXPECT_EQ(sum.load().value, total);
    // Every value 0..total-1 was fetched exactly once iff the fetched values sum to this.
    EXPECT_EQ(fetched_sum.load().value, total * (total - 1) / 2);
  });
}

TEST(RemoteAtomic, CompareExchangeExchangeLoadStore) {
  test::rt().run([&](thread_context& ctx) {
    const shared_setup setup = share_setup(ctx, 4, last_thread(ctx));
    fabric::remote_atomic cas(ctx, setup.words, cas_word * 8);
    fabric::remote_atomic winners(ctx, setup.words, winners_word * 8);
    // Election: every thread tries 0 -> id + 1; exactly one succeeds.
    const fabric::atomic_result tried = cas.compare_exchange(0, ctx.id() + 1);
    ASSERT_TRUE(tried.ok());
    if (tried.value == 0) {
      ASSERT_EQ(winners.add(1 + (std::uint64_t{ctx.id()} << 32)), outcome::done);
    }
    all_done(ctx, setup.words, done_word);
    if (ctx.id() != 0) return;
    const std::uint64_t won = winners.load().value;
    EXPECT_EQ(won & 0xffffffff, 1u) << "exactly one CAS from 0 must succeed";
    EXPECT_EQ(cas.load().value, (won >> 32) + 1) << "the word holds the winner's value";
    // A CAS with the wrong expected value changes nothing and returns what is there.
    const std::uint64_t now = cas.load().value;
    const fabric::atomic_result failed = cas.compare_exchange(now + 100, 7);
    EXPECT_TRUE(failed.ok());
    EXPECT_EQ(failed.value, now);
    EXPECT_EQ(cas.load().value, now);
    EXPECT_EQ(cas.exchange(42).value, now);
    EXPECT_EQ(cas.store(43), outcome::done);
    EXPECT_EQ(cas.load().value, 43u);
    EXPECT_EQ(cas.compare_exchange(43, 44).value, 43u);
    EXPECT_EQ(cas.load().value, 44u);
    EXPECT_THROW(fabric::remote_atomic(ctx, setup.words, 4), seriema::error);       // unaligned
    EXPECT_THROW(fabric::remote_atomic(ctx, setup.words, 64 * 8), seriema::error);  // outside
  });
}

namespace {

// Every thread takes the lock `rounds` times and increments the plain counter by get/put inside;
// tickets must come in increasing order (FIFO), the counter must end exact.
void count_under_lock(std::uint32_t slots, std::uint64_t rounds) {
  std::atomic<int> order_errors{0};
  test::rt().run([&](thread_context& ctx) {
    const shared_setup setup = share_setup(ctx, slots, last_thread(ctx));
    fabric::distributed_lock lock(ctx, setup.lock);
    plain_word counter(ctx, setup.words, counter_word);
    plain_word last_ticket(ctx, setup.words, last_ticket_word);
    const auto started = std::chrono::steady_clock::now();
    for (std::uint64_t i = 0; i < rounds; ++i) {
      fabric::distributed_lock::guard held(lock, fabric::deadline_clock::now() + generous);
      ASSERT_TRUE(held.owns_lock()) << fabric::to_string(held.result());
      const std::uint64_t last = last_ticket.get();  // (ticket + 1) of the previous holder
      if (last != 0 && lock.ticket() != static_cast<std::uint32_t>(last)) ++order_errors;
      last_ticket.put(std::uint64_t{lock.ticket()} + 1);
      counter.put(counter.get() + 1);
    }
    const auto spent = std::chrono::steady_clock::now() - started;
    all_done(ctx, setup.words, done_word);
    if (ctx.id() != 0) return;
    EXPECT_EQ(counter.get(), rounds * ctx.thread_count());
    std::printf("lock (%u slots): %.1f us per critical section, job-wide (%u threads)\n", slots,
                std::chrono::duration<double, std::micro>(spent).count() /
                    static_cast<double>(rounds * ctx.thread_count()),
                ctx.thread_count());
    fabric::distributed_lock::destroy(ctx, setup.lock);
  });
  EXPECT_EQ(order_errors.load(), 0) << "a ticket was granted out of order";
}

}  // namespace

TEST(DistributedLock, CounterUnderContentionIsExactAndTicketsAreFifo) {
  count_under_lock(fabric::distributed_lock::default_slots, rounds_or_environment(150));
}

// Fewer slots than threads: the queue fills (enqueue waits) and every slot is reused many times.
TEST(DistributedLock, FourSlotRingFillsAndWrapsAndStaysExact) {
  count_under_lock(4, rounds_or_environment(100));
}

TEST(DistributedLock, ShortDeadlineAbandonsAndTheReleaseSkipsIt) {
  test::rt().run([&](thread_context& ctx) {
    const shared_setup setup = share_setup(ctx, 8, last_thread(ctx));
    const fabric::thread_id holder = 0, waiter = last_thread(ctx);
    fabric::distributed_lock lock(ctx, setup.lock);
    fabric::remote_atomic flag(ctx, setup.words, flag_word * 8);
    auto wait_flag = [&](std::uint64_t value) {
      const auto deadline = fabric::deadline_clock::now() + generous;
      while (flag.load().value != value) {
        ASSERT_LT(fabric::deadline_clock::now(), deadline);
        ctx.poll();
      }
    };
    if (ctx.id() == holder) {
      ASSERT_EQ(lock.acquire(), outcome::done);
      ASSERT_EQ(flag.store(1), outcome::done);  // the waiter may try now
      wait_flag(2);                             // the waiter gave up
      ASSERT_EQ(lock.release(), outcome::done);
      EXPECT_EQ(lock.skipped(), 1u) << "the release must skip the abandoned ticket";
    } else if (ctx.id() == waiter) {
      wait_flag(1);
      const auto started = fabric::deadline_clock::now();
      EXPECT_EQ(lock.acquire_for(std::chrono::milliseconds(100)), outcome::deadline_exceeded);
      EXPECT_GE(fabric::deadline_clock::now() - started, std::chrono::milliseconds(100));
      EXPECT_FALSE(lock.held());
      EXPECT_EQ(lock.abandoned(), 1u);
      ASSERT_EQ(flag.store(2), outcome::done);
    }
    all_done(ctx, setup.words, done_word);
    // The lock still works for everyone, the waiter included.
    fabric::distributed_lock::guard held(lock, fabric::deadline_clock::now() + generous);
    EXPECT_TRUE(held.owns_lock()) << fabric::to_string(held.result());
  });
}

TEST(DistributedLock, ShortDeadlinesUnderContentionKeepTheLockWorking) {
  constexpr int attempts = 150;
  test::rt().run([&](thread_context& ctx) {
    const shared_setup setup = share_setup(ctx, 8, last_thread(ctx));
    fabric::distributed_lock lock(ctx, setup.lock);
    plain_word counter(ctx, setup.words, counter_word);
    fabric::remote_atomic successes(ctx, setup.words, successes_word * 8);
    std::uint64_t mine = 0;
    for (int i = 0; i < attempts; ++i) {
      // 0.2 .. 2 ms: some acquires win, others abandon while tickets ahead of them are served.
      const auto timeout = std::chrono::microseconds(200 + 200 * ((ctx.id() + i) % 10));
      const outcome how = lock.acquire_for(timeout);
      if (how == outcome::done) {
        counter.put(counter.get() + 1);
        ++mine;
        ASSERT_EQ(lock.release(), outcome::done);
      } else {
        ASSERT_EQ(how, outcome::deadline_exceeded);
      }
    }
    ASSERT_EQ(successes.add(mine), outcome::done);
    {
      fabric::distributed_lock::guard held(lock, fabric::deadline_clock::now() + generous);
      ASSERT_TRUE(held.owns_lock()) << "the lock must work after abandonments: "
                                    << fabric::to_string(held.result());
      counter.put(counter.get() + 1);
    }
    all_done(ctx, setup.words, done_word);
    if (ctx.id() != 0) return;
    EXPECT_EQ(counter.get(), successes.load().value + ctx.thread_count());
    std::printf("short deadlines: %llu of %d acquires won on thread 0 (abandoned %llu, skipped "
                "%llu)\n",
                static_cast<unsigned long long>(mine), attempts,
                static_cast<unsigned long long>(lock.abandoned()),
                static_cast<unsigned long long>(lock.skipped()));
  });
}

int main(int argc, char** argv) { return seriema::test::run_all_tests(argc, argv); }

// One-sided remote invocation (Messenger, aggregators) between threads of several processes
// (shm, tcp, emulated machines): every primitive in every mode, FIFO order over many calls,
// all-to-all stress with checksums, backpressure under each full-buffer policy with ring growth
// checked for symmetry, and corrupt records rejected while good calls keep running.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <seriema/base/settings.hpp>
#include <seriema/invoke/invoke.hpp>
#include <seriema/fabric/detail/messages.hpp>
#include <seriema/transfer/arena.hpp>
#include <seriema/transfer/ucx.hpp>
#include <thread>

#include "support/invoke_checks.hpp"
#include "support/mp_main.hpp"

using namespace seriema;
using fabric::thread_context;
using invoke::call_status;
using invoke::channel;

using test::checksum;
using test::env_count;
using test::fill_pattern;
using test::inbox;
using test::inbox_of;
using test::inboxes;
using test::max_local_threads;
using test::max_threads;
using test::reset_inboxes;
using test::threads;

namespace {

// Every primitive from every thread to every thread (itself included), in mode C.
template <channel C>
void every_primitive() {
  reset_inboxes();
  auto& rt = test::rt();
  std::array<std::atomic<std::uint64_t>, max_local_threads> returns_ok{};
  rt.run([&](thread_context& ctx) {
    const std::uint32_t me = ctx.id();
    std::vector<std::byte> buffer(300);
    for (fabric::thread_id dest = 0; dest < ctx.thread_count(); ++dest) {
      const std::uint64_t token = 7000 + dest;
      ASSERT_EQ((invoke::call<C, invoke::policy::retry>(ctx, dest,
                                                       [me, dest, token](thread_context& self) {
                                                         inbox& box = inbox_of(self);
                                                         if (self.id() != dest || token != 7000 + dest) ++box.wrong;
                                                         box.source_sum += me;
                                                         ++box.calls;
                                                       })),
                call_status::ok);
      fill_pattern(buffer, me * 1000 + dest);
      const std::uint64_t sum = checksum(buffer);
      ASSERT_EQ((invoke::call_buffer<C, invoke::policy::retry>(
                    ctx, dest,
                    [dest, sum](thread_context& self, std::span<std::byte> got) {
                      inbox& box = inbox_of(self);
                      if (self.id() != dest || got.size() != 300 || checksum(got) != sum) ++box.wrong;
                      box.bytes += got.size();
                      ++box.calls;
                    },
                    buffer)),
                call_status::ok);
    }
    // call_return to every thread: the value comes back into the caller's slot.
    std::size_t local = static_cast<std::size_t>(test::rt().placement().locate(me).local_thread);
    for (fabric::thread_id dest = 0; dest < ctx.thread_count(); ++dest) {
      invoke::return_slot<std::uint64_t> slot;
      const std::uint64_t x = 3 * me + 1;
      ASSERT_EQ((invoke::call_return<C, invoke::policy::retry>(
                    ctx, dest, [x](thread_context& self) { return x * 1000 + self.id(); }, slot)),
                call_status::ok);
      ctx.wait_for(slot);
      ASSERT_TRUE(slot.ready());
      EXPECT_EQ(slot.value(), x * 1000 + dest);
      if (slot.value() == x * 1000 + dest) returns_ok[local] += 1;
    }
  });
  std::uint64_t all_ids = 0;
  for (fabric::thread_id t = 0; t < threads(); ++t) all_ids += t;
  for (int t = 0; t < rt.options().threads_per_process; ++t) {
    EXPECT_EQ(inboxes[t].calls, 2 * threads()) << "local thread " << t;
    EXPECT_EQ(inboxes[t].source_sum, all_ids);
    EXPECT_EQ(inboxes[t].bytes, 300 * threads());
    EXPECT_EQ(inboxes[t].wrong, 0u);
    EXPECT_EQ(returns_ok[t].load(), threads());
  }
}

}  // namespace

TEST(InvokeOneSided, EveryPrimitiveWrite) { every_primitive<channel::write>(); }
TEST(InvokeOneSided, EveryPrimitiveTrad) { every_primitive<channel::trad>(); }
TEST(InvokeOneSided, EveryPrimitiveOvfl) { every_primitive<channel::ovfl>(); }
TEST(InvokeOneSided, EveryPrimitiveAdaptive) { every_primitive<channel::adaptive>(); }
TEST(InvokeOneSided, EveryPrimitiveSend) { every_primitive<channel::send>(); }

namespace {

// Checks that calls arrive in the order of their sequence numbers (one sender).
void expect_next(thread_context& self, std::uint64_t seq) {
  inbox& box = inbox_of(self);
  if (box.next_seq[0] != seq) ++box.wrong;
  box.next_seq[0] = seq + 1;
  ++box.calls;
}

// One sender (global thread 0) to the last thread of the last process: `count` calls carrying
// sequence numbers; the receiver checks the order.
template <channel C, class Policy>
void fifo(std::uint64_t count) {
  reset_inboxes();
  auto& rt = test::rt();
  const fabric::thread_id receiver = threads() - 1;
  rt.run([&](thread_context& ctx) {
    if (ctx.id() != 0) return;
    for (std::uint64_t seq = 0; seq < count; ++seq) {
      call_status st = invoke::call<C, Policy>(
          ctx, receiver, [seq](thread_context& self) { expect_next(self, seq); });
      ASSERT_EQ(st, call_status::ok) << "call " << seq;
    }
  });
  if (const test::inbox* got = test::inbox_here(receiver)) {
    EXPECT_EQ(got->calls, count);
    EXPECT_EQ(got->wrong, 0u);
    EXPECT_EQ(got->next_seq[0], count);
  }
}

}  // namespace

namespace {

// A closure of exactly N bytes (N need not be a multiple of 8) whose bytes follow from its
// sequence number; the sender stores the bytes one by one just before each call, as a caller
// filling its captures does (the copy into the ring reads them in pieces: record_copy.hpp).
template <std::size_t N>
struct sized_closure {
  std::array<unsigned char, N> bytes;
  static unsigned char expected(std::size_t i, std::uint64_t seq) {
    return static_cast<unsigned char>(seq * 131 + i * 7 + N);
  }
  void fill(std::uint64_t seq) {
    for (std::size_t i = 0; i < N; ++i) bytes[i] = expected(i, seq);
  }
  // Whether every byte is the one fill(seq) stored.
  [[nodiscard]] bool intact(std::uint64_t seq) const {
    for (std::size_t i = 0; i < N; ++i) {
      if (bytes[i] != expected(i, seq)) return false;
    }
    return true;
  }
};

// Calls of closure size N in mode C from thread 0 to the last thread: plain calls (checked at
// the destination), call_returns (the value echoes the sequence number when the bytes were
// intact) and calls with a consume notice (their extras travel after the closure).
template <channel C, std::size_t N>
void sized_calls(thread_context& ctx, fabric::thread_id dest, std::uint64_t count) {
  static_assert(sizeof(sized_closure<N>) == N);
  struct plain {
    sized_closure<N> c;
    std::uint64_t seq;
    void operator()(thread_context& self) const {
      if (!c.intact(seq)) ++inbox_of(self).wrong;
      ++inbox_of(self).calls;
      inbox_of(self).bytes += N;
    }
  };
  struct echo {
    sized_closure<N> c;
    std::uint32_t seq;  // a 4-byte field next to the bytes
    std::uint64_t operator()() const { return c.intact(seq) ? seq : ~std::uint64_t{0}; }
  };
  invoke::synchronizer consumed(ctx, count);
  for (std::uint64_t seq = 0; seq < count; ++seq) {
    plain p{};
    p.c.fill(seq);
    p.seq = seq;
    ASSERT_EQ((invoke::call<C, invoke::policy::retry>(ctx, dest, p)), call_status::ok);
    ASSERT_EQ((invoke::call<C, invoke::policy::retry, invoke::notify_on::consume>(ctx, dest, p,
                                                                                 consumed)),
              call_status::ok);
    if (seq % 16 == 0) {
      echo e{};
      e.c.fill(seq);
      e.seq = static_cast<std::uint32_t>(seq);
      invoke::return_slot<std::uint64_t> slot;
      ASSERT_EQ((invoke::call_return<C, invoke::policy::retry>(ctx, dest, e, slot)),
                call_status::ok);
      ctx.wait_for(slot);
      ASSERT_TRUE(slot.ready());
      EXPECT_EQ(slot.value(), seq) << N << "-byte closure";
    }
  }
  EXPECT_TRUE(consumed.wait());
}

template <channel C>
void closures_of_every_size() {
  reset_inboxes();
  auto& rt = test::rt();
  const fabric::thread_id dest = threads() - 1;
  constexpr std::uint64_t count = 200;
  rt.run([&](thread_context& ctx) {
    if (ctx.id() != 0) return;
    sized_calls<C, 1>(ctx, dest, count);
    sized_calls<C, 4>(ctx, dest, count);
    sized_calls<C, 7>(ctx, dest, count);
    sized_calls<C, 12>(ctx, dest, count);
    sized_calls<C, 20>(ctx, dest, count);
    sized_calls<C, 61>(ctx, dest, count);
    sized_calls<C, 64>(ctx, dest, count);
    sized_calls<C, 100>(ctx, dest, count);
    sized_calls<C, 256>(ctx, dest, count);
  });
  if (const test::inbox* got = test::inbox_here(dest)) {
    EXPECT_EQ(got->wrong, 0u);
    EXPECT_EQ(got->calls, 2 * count * 9);
    EXPECT_EQ(got->bytes, 2 * count * (1 + 4 + 7 + 12 + 20 + 61 + 64 + 100 + 256));
  }
}

}  // namespace

TEST(InvokeOneSided, ClosuresOfEverySizeWrite) { closures_of_every_size<channel::write>(); }
TEST(InvokeOneSided, ClosuresOfEverySizeTrad) { closures_of_every_size<channel::trad>(); }
TEST(InvokeOneSided, ClosuresOfEverySizeOvfl) { closures_of_every_size<channel::ovfl>(); }
TEST(InvokeOneSided, ClosuresOfEverySizeAdaptive) { closures_of_every_size<channel::adaptive>(); }

TEST(InvokeOneSided, FifoWrite) { fifo<channel::write, invoke::policy::retry>(env_count("TEST_FIFO_CALLS", 1000000)); }
TEST(InvokeOneSided, FifoTrad) { fifo<channel::trad, invoke::policy::retry>(env_count("TEST_FIFO_CALLS", 1000000)); }
TEST(InvokeOneSided, FifoOvfl) { fifo<channel::ovfl, invoke::policy::retry>(env_count("TEST_FIFO_CALLS", 1000000)); }
TEST(InvokeOneSided, FifoAdaptive) { fifo<channel::adaptive, invoke::policy::retry>(env_count("TEST_FIFO_CALLS", 1000000)); }

namespace {

// The receiver (checked by its process) ran more than `at_least` calls, every one in order.
void expect_ran_in_order(fabric::thread_id receiver, std::uint64_t at_least) {
  if (const test::inbox* got = test::inbox_here(receiver)) {
    EXPECT_EQ(got->wrong, 0u);
    EXPECT_EQ(got->next_seq[0], got->calls);
    EXPECT_GT(got->calls, at_least);
  }
}

struct run_call {  // 8-byte closure: stride 8
  std::uint64_t seq;
  void operator()(thread_context& self) const { expect_next(self, seq); }
};
struct padded_run_call {  // 20-byte closure: each copy in a record is padded to 24
  sized_closure<12> c;
  std::uint64_t seq;
  void operator()(thread_context& self) const {
    if (!c.intact(seq)) ++inbox_of(self).wrong;
    expect_next(self, seq);
  }
};
static_assert(sizeof(padded_run_call) == 24);

struct thrown_on_purpose {
  std::uint64_t seq;
};
constexpr bool throws_at(std::uint64_t seq) { return seq % 97 == 13; }

}  // namespace

// Trad calls of one function without extras or buffer join one record (wire::flag_repeated):
// runs of two functions, broken by calls that cannot join (a buffer, a consume notice, another
// function), all arrive once and in order, and most calls were joined.
TEST(InvokeOneSided, TradRunsOfOneFunctionShareRecords) {
  reset_inboxes();
  auto& rt = test::rt();
  const fabric::thread_id sender = 0;
  const fabric::thread_id receiver = threads() - 1;
  constexpr std::uint64_t rounds = 400;
  std::uint64_t total = 0;
  invoke::messenger_counters sent{};
  rt.run([&](thread_context& ctx) {
    if (ctx.id() != sender) return;
    invoke::synchronizer consumed(ctx, rounds / 5);
    std::uint64_t seq = 0;
    // A call of another function first: the counters are read from after it on.
    ASSERT_EQ((invoke::call<channel::write>(ctx, receiver, [](thread_context&) {})),
              call_status::ok);
    const invoke::messenger_counters before = invoke::channels_of(ctx).to(receiver).counters();
    auto plain = [&](const auto& f) {
      ASSERT_EQ((invoke::call<channel::trad, invoke::policy::retry>(ctx, receiver, f)),
                call_status::ok);
      ++seq;
    };
    const std::vector<std::byte> buffer(24, std::byte{5});
    for (std::uint64_t round = 0; round < rounds; ++round) {
      for (std::uint64_t i = 0; i <= round % 40; ++i) plain(run_call{seq});
      for (std::uint64_t i = 0; i < round % 7; ++i) {
        padded_run_call p{};
        p.c.fill(seq);
        p.seq = seq;
        plain(p);
      }
      ASSERT_EQ((invoke::call_buffer<channel::trad, invoke::policy::retry>(
                    ctx, receiver,
                    [s = seq](thread_context& self, std::span<std::byte> got) {
                      if (got.size() != 24 || got[23] != std::byte{5}) ++inbox_of(self).wrong;
                      expect_next(self, s);
                    },
                    buffer)),
                call_status::ok);
      ++seq;
      if (round % 5 == 0) {
        ASSERT_EQ((invoke::call<channel::trad, invoke::policy::retry,
                                invoke::notify_on::consume>(ctx, receiver, run_call{seq},
                                                            consumed)),
                  call_status::ok);
        ++seq;
      }
    }
    EXPECT_TRUE(consumed.wait());
    total = seq;
    sent = invoke::channels_of(ctx).to(receiver).counters().since(before);
  });
  if (rt.rank() == rt.placement().locate(sender).process) {
    EXPECT_EQ(sent.calls, total);
    // Joins fail only after a publish (every 4 KiB), on a chunk change and at the first call
    // of a run, so far more than half of the calls join (about 85 %).
    EXPECT_GT(sent.repeated, total / 2);
    EXPECT_LT(sent.repeated, total);
  }
  expect_ran_in_order(receiver, rounds * 20);
}

// channel::adaptive clocks itself on the receiver: a call to a receiver that ran everything
// published to it is published at once (mapped rings: no flush, no poll; a trad call would wait
// for its batch), and the calls made while the receiver is still busy with an earlier publish
// (it sleeps in the first call) wait in one batch, published when the sender flushes. On a
// staged ring (another machine) adaptive cannot see the receiver and batches as trad.
TEST(InvokeOneSided, AdaptivePublishesAtOnceWhenIdleAndBatchesWhenBusy) {
  reset_inboxes();
  auto& rt = test::rt();
  const fabric::thread_id sender = 0;
  const fabric::thread_id receiver = threads() - 1;
  if (receiver == sender) return;
  bool direct = false, published_at_once = false;
  std::uint64_t burst_publishes = 0, burst_calls = 0;
  rt.run([&](thread_context& ctx) {
    if (ctx.id() != sender) return;
    auto& to = invoke::channels_of(ctx).to(receiver);
    auto round_trip = [&] {
      auto done = invoke::call_return<channel::adaptive>(ctx, receiver, [] { return 1; });
      ASSERT_EQ(done.get(), 1);
    };
    round_trip();  // the ring exists and the receiver has run everything
    direct = to.direct();
    // Idle receiver: within 2 s (the receiver's consumed word follows its poll), a call is
    // published by the call itself.
    for (int attempt = 0; attempt < 200 && !published_at_once; ++attempt) {
      const std::uint64_t before = to.counters().publishes;
      ASSERT_EQ((invoke::call<channel::adaptive>(ctx, receiver, [](thread_context&) {})), call_status::ok);
      published_at_once = to.counters().publishes == before + 1;
      if (!published_at_once) {
        invoke::channels_of(ctx).flush(ctx);
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    round_trip();
    // Busy receiver: the first call sleeps there for 200 ms; the 100 after it batch.
    const invoke::messenger_counters before = to.counters();
    ASSERT_EQ((invoke::call<channel::adaptive>(ctx, receiver, [] {
                std::this_thread::sleep_for(std::chrono::milliseconds(200));
              })),
              call_status::ok);
    for (int i = 0; i < 100; ++i) {
      ASSERT_EQ((invoke::call<channel::adaptive>(ctx, receiver, [](thread_context&) {})), call_status::ok);
    }
    const invoke::messenger_counters during = to.counters().since(before);
    burst_publishes = during.publishes;
    burst_calls = during.calls;
    round_trip();  // everything ran
  });
  if (rt.rank() == rt.placement().locate(sender).process) {
    EXPECT_EQ(burst_calls, 101u);
    if (direct) {
      EXPECT_TRUE(published_at_once);
      EXPECT_EQ(burst_publishes, 1u) << "the first call alone goes at once";
    } else {
      EXPECT_FALSE(published_at_once);
      EXPECT_EQ(burst_publishes, 0u);
    }
  }
}

// Calls through aggregator_to (a copy of the join window kept by the caller) interleaved with
// every other way of writing to the same messenger: free calls of the same function (they move
// the write offset under the copy), a second aggregator_to and an overflow one to the same
// destination, flushes (they close the window), another function, call_buffer and call_return.
// Every call runs once and in order: a copy used after any of these would overwrite a closure
// or append to a published record.
template <channel Mode>
void aggregator_to_keeps_order() {
  reset_inboxes();
  auto& rt = test::rt();
  const fabric::thread_id sender = 0;
  const fabric::thread_id receiver = threads() - 1;
  constexpr std::uint64_t rounds = 400;
  std::uint64_t total = 0;
  invoke::messenger_counters sent{};
  rt.run([&](thread_context& ctx) {
    if (ctx.id() != sender) return;
    invoke::aggregator<Mode> agg(ctx);
    invoke::aggregator_to<Mode> to = agg.to(receiver);
    invoke::aggregator_to<Mode> other(ctx, receiver);
    invoke::aggregator_to<channel::ovfl> overflow(ctx, receiver);
    EXPECT_EQ(to.destination(), receiver);
    std::uint64_t seq = 0;
    ASSERT_EQ((invoke::call<channel::write>(ctx, receiver, [](thread_context&) {})),
              call_status::ok);
    const invoke::messenger_counters before = invoke::channels_of(ctx).to(receiver).counters();
    auto through = [&](invoke::aggregator_to<Mode>& a) {
      ASSERT_EQ(a.template call<invoke::policy::retry>(run_call{seq}), call_status::ok);
      ++seq;
    };
    const std::vector<std::byte> buffer(16, std::byte{9});
    for (std::uint64_t round = 0; round < rounds; ++round) {
      for (std::uint64_t i = 0; i <= round % 50; ++i) through(to);
      switch (round % 8) {
        case 0:  // the same function, not through the copy: the write offset moves under it
          ASSERT_EQ((invoke::call<Mode, invoke::policy::retry>(ctx, receiver,
                                                                       run_call{seq})),
                    call_status::ok);
          ++seq;
          break;
        case 1:  // another copy of the same window
          for (std::uint64_t i = 0; i < round % 13; ++i) through(other);
          break;
        case 2:  // a flush of this destination: the window closes at the same write offset
          to.flush();
          break;
        case 3:  // a flush of the thread's aggregators
          agg.flush();
          break;
        case 4: {  // another function through the copy
          padded_run_call p{};
          p.c.fill(seq);
          p.seq = seq;
          ASSERT_EQ(to.template call<invoke::policy::retry>(p), call_status::ok);
          ++seq;
          break;
        }
        case 5:
          ASSERT_EQ(to.template call_buffer<invoke::policy::retry>(
                        [s = seq](thread_context& self, std::span<std::byte> got) {
                          if (got.size() != 16 || got[15] != std::byte{9}) ++inbox_of(self).wrong;
                          expect_next(self, s);
                        },
                        buffer),
                    call_status::ok);
          ++seq;
          break;
        case 6:
          ASSERT_EQ(overflow.template call<invoke::policy::retry>(run_call{seq}), call_status::ok);
          ++seq;
          break;
        default: {
          invoke::return_slot<std::uint64_t> slot;
          ASSERT_EQ(to.template call_return<invoke::policy::retry>(
                        [s = seq](thread_context& self) {
                          expect_next(self, s);
                          return s;
                        },
                        slot),
                    call_status::ok);
          ++seq;
          // Bounded: a reply lost to a broken record fails the test instead of hanging it.
          const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
          ctx.wait_until(
              [&] { return slot.done() || std::chrono::steady_clock::now() > deadline; });
          ASSERT_TRUE(slot.ready()) << "no reply to call " << seq - 1;
          EXPECT_EQ(slot.value(), seq - 1);
          break;
        }
      }
      through(to);  // right after the other writer
    }
    to.flush();
    total = seq;
    sent = invoke::channels_of(ctx).to(receiver).counters().since(before);
    EXPECT_THROW((invoke::aggregator_to<Mode>(ctx, ctx.thread_count())), error);
  });
  if (rt.rank() == rt.placement().locate(sender).process) {
    EXPECT_EQ(sent.calls, total);
    // Runs through the copy join (adaptive: less often, as a batch's first call may go alone).
    EXPECT_GT(sent.repeated, Mode == channel::trad ? total / 2 : 0);
  }
  expect_ran_in_order(receiver, rounds * 25);
}
TEST(InvokeOneSided, AggregatorToKeepsOrderWithEveryOtherWriter) {
  aggregator_to_keeps_order<channel::trad>();
}
TEST(InvokeOneSided, AdaptiveAggregatorToKeepsOrderWithEveryOtherWriter) {
  aggregator_to_keeps_order<channel::adaptive>();
}

// A function that throws inside a repeated record: the exception leaves the poll that ran it,
// and the next poll resumes the record after that call. Every call runs once, in order, and
// each throw is seen once (a record resumed from its start would rerun calls; one that skipped
// the rest would lose them).
TEST(InvokeOneSided, ThrowInARepeatedRecordResumesAfterTheCall) {
  reset_inboxes();
  auto& rt = test::rt();
  const fabric::thread_id sender = 0;
  const fabric::thread_id receiver = threads() - 1;
  constexpr std::uint64_t count = 20000;
  std::uint64_t caught = 0, caught_wrong = 0, repeated = 0;
  rt.run([&](thread_context& ctx) {
    if (ctx.id() == receiver) {
      test::poll_catching<thrown_on_purpose>(
          ctx, [&] { return inbox_of(ctx).next_seq[0] >= count; },  // the last call ran
          [&](const thrown_on_purpose& thrown) {
            ++caught;
            if (!throws_at(thrown.seq)) ++caught_wrong;
          });
      return;
    }
    if (ctx.id() != sender) return;
    for (std::uint64_t seq = 0; seq < count; ++seq) {
      ASSERT_EQ((invoke::call<channel::trad, invoke::policy::retry>(
                    ctx, receiver,
                    [seq](thread_context& self) {
                      // A call run again is counted wrong and does not throw again.
                      const bool first_run = inbox_of(self).next_seq[0] == seq;
                      expect_next(self, seq);
                      if (throws_at(seq) && first_run) throw thrown_on_purpose{seq};
                    })),
                call_status::ok);
    }
    // The receiver waits in its body for every call: publish the last batch now.
    invoke::aggregator<channel::trad>(ctx).flush();
    repeated = invoke::channels_of(ctx).to(receiver).counters().repeated;
  });
  if (rt.rank() == rt.placement().locate(sender).process) {
    EXPECT_GT(repeated, count / 2);  // the throws happened inside repeated records
  }
  if (const test::inbox* got = test::inbox_here(receiver)) {
    std::uint64_t expected_throws = 0;
    for (std::uint64_t seq = 0; seq < count; ++seq) expected_throws += throws_at(seq) ? 1 : 0;
    EXPECT_EQ(got->calls, count);
    EXPECT_EQ(got->wrong, 0u);
    EXPECT_EQ(got->next_seq[0], count);
    EXPECT_EQ(caught, expected_throws);
    EXPECT_EQ(caught_wrong, 0u);
  }
}

namespace {

// A call_return whose function throws, in mode C: the caller's slot fails (it does not wait for
// ever), the exception leaves one of the destination's polls exactly once, and both threads go
// on: the next call_return brings its value back, and run() ends (the thrown call was counted
// as consumed). Every other thread sends one at once, so throws also happen in polls nested in
// the destination's own waits (setting up the messengers its replies go through), which must
// neither abandon those replies nor lose the exceptions.
template <channel C>
void throwing_call_return() {
  reset_inboxes();
  auto& rt = test::rt();
  const fabric::thread_id receiver = threads() - 1;
  const std::uint64_t senders = threads() - 1;
  std::atomic<std::uint64_t> failed_slots{0}, values_back{0}, wrong{0}, caught{0};
  rt.run([&](thread_context& ctx) {
    if (ctx.id() == receiver) {
      // Until every second call ran and every throw came out of a poll here (a throw in a
      // poll nested in this thread's waits, e.g. a reply's messenger setup, comes out later).
      test::poll_catching<thrown_on_purpose>(
          ctx, [&] { return inbox_of(ctx).calls >= senders && caught >= senders; },
          [&](const thrown_on_purpose& thrown) {
            if (thrown.seq != 7) ++wrong;
            ++caught;
          });
      return;
    }
    invoke::return_slot<std::uint64_t> thrower, value;
    ASSERT_EQ((invoke::call_return<C, invoke::policy::retry>(
                  ctx, receiver,
                  [](thread_context&) -> std::uint64_t { throw thrown_on_purpose{7}; }, thrower)),
              call_status::ok);
    ctx.wait_for(thrower);
    if (thrower.failed()) ++failed_slots;
    const std::uint64_t me = ctx.id();
    ASSERT_EQ((invoke::call_return<C, invoke::policy::retry>(
                  ctx, receiver,
                  [me](thread_context& self) {
                    ++inbox_of(self).calls;
                    return me * 10 + 1;
                  },
                  value)),
              call_status::ok);
    ctx.wait_for(value);
    if (value.ready() && value.value() == me * 10 + 1) ++values_back;
  });
  std::uint64_t local_senders = 0;
  for (fabric::thread_id t = 0; t < threads(); ++t) {
    if (t != receiver && rt.is_local(t)) ++local_senders;
  }
  EXPECT_EQ(failed_slots.load(), local_senders) << "a throwing call_return did not fail its slot";
  EXPECT_EQ(values_back.load(), local_senders);
  if (rt.is_local(receiver)) {
    EXPECT_EQ(caught.load(), senders) << "the destination's poll did not see every throw";
    EXPECT_EQ(wrong.load(), 0u);
  }
}

}  // namespace

TEST(InvokeOneSided, ThrowingCallReturnFailsTheSlotWrite) { throwing_call_return<channel::write>(); }
TEST(InvokeOneSided, ThrowingCallReturnFailsTheSlotTrad) { throwing_call_return<channel::trad>(); }
TEST(InvokeOneSided, ThrowingCallReturnFailsTheSlotSend) { throwing_call_return<channel::send>(); }

// All-to-all: every thread sends calls of random sizes (8 B .. 4 KiB of buffer) with checksums
// and per-pair sequence numbers to random threads, mixing the one-sided modes.
TEST(InvokeOneSided, AllToAllStress) {
  reset_inboxes();
  auto& rt = test::rt();
  const std::uint64_t total = env_count("TEST_STRESS_CALLS", 4000000);
  const std::uint64_t per_thread = total / threads();
  std::array<std::array<std::uint64_t, max_threads>, max_local_threads> sent_to{};
  rt.run([&](thread_context& ctx) {
    const std::uint32_t me = ctx.id();
    const auto local = test::rt().placement().locate(me).local_thread;
    std::mt19937_64 rng(me * 7919 + 17);
    std::vector<std::byte> buffer(4096);
    std::array<std::uint64_t, max_threads> seq{};
    for (std::uint64_t i = 0; i < per_thread; ++i) {
      const fabric::thread_id dest = static_cast<fabric::thread_id>(rng() % ctx.thread_count());
      const std::size_t size = 8 + rng() % (4096 - 8 + 1);
      std::span<std::byte> payload(buffer.data(), size);
      fill_pattern(payload.first(std::min<std::size_t>(size, 64)), i);
      const std::uint64_t sum = checksum(payload);
      const std::uint64_t s = seq[dest]++;
      auto f = [me, s, sum, size](thread_context& self, std::span<std::byte> got) {
        inbox& box = inbox_of(self);
        if (got.size() != size || checksum(got) != sum || box.next_seq[me] != s) ++box.wrong;
        box.next_seq[me] = s + 1;
        box.bytes += got.size();
        ++box.calls;
      };
      call_status st;
      switch (i % 3) {
        case 0:
          st = invoke::call_buffer<channel::write, invoke::policy::retry>(ctx, dest, f, payload);
          break;
        case 1:
          st = invoke::call_buffer<channel::trad, invoke::policy::retry>(ctx, dest, f, payload);
          break;
        default:
          st = invoke::call_buffer<channel::ovfl, invoke::policy::retry>(ctx, dest, f, payload);
          break;
      }
      ASSERT_EQ(st, call_status::ok);
      ++sent_to[local][dest];
      if ((i & 255) == 0) ctx.poll();
    }
  });
  // Sum what every thread sent to each thread over the job; compare with what arrived.
  std::array<std::uint64_t, max_threads> sent_here{};
  for (int t = 0; t < rt.options().threads_per_process; ++t) {
    for (std::size_t d = 0; d < threads(); ++d) sent_here[d] += sent_to[t][d];
  }
  auto all = test::allgather_value(sent_here);
  std::uint64_t grand_total = 0;
  for (int t = 0; t < rt.options().threads_per_process; ++t) {
    fabric::thread_id me = rt.placement().global_id(rt.rank(), t);
    std::uint64_t expected = 0;
    for (const auto& per_rank : all) expected += per_rank[me];
    EXPECT_EQ(inboxes[t].calls, expected) << "thread " << me << ": lost or duplicated calls";
    EXPECT_EQ(inboxes[t].wrong, 0u) << "thread " << me << ": bad checksum or order";
  }
  for (const auto& per_rank : all) {
    for (std::size_t d = 0; d < threads(); ++d) grand_total += per_rank[d];
  }
  EXPECT_EQ(grand_total, per_thread * threads());
}

namespace {

// Backpressure options: tiny chunks, one per allocation, at most 3 per ring.
invoke::messenger_options tiny_ring() {
  invoke::messenger_options o;
  o.chunk_size = 8192;
  o.chunks_per_allocation = 1;
  o.max_chunks = 3;
  o.flush_size = 1024;
  o.staging_size = 8192;
  return o;
}

struct ring_view {
  std::uint32_t chunks = 0;
  std::array<std::uint64_t, 8> addresses{};
};

}  // namespace

// The receiver does not poll for a while: fail returns full, retry blocks then completes,
// retry_async queues and completes in order; the ring grows to its maximum and both sides list
// the same chunks in the same order.
TEST(InvokeOneSided, BackpressurePoliciesAndSymmetricGrowth) {
  reset_inboxes();
  auto& rt = test::rt();
  const fabric::thread_id sender = 0;
  const fabric::thread_id receiver = threads() - 1;
  std::atomic<bool> saw_full{false};
  std::atomic<std::uint64_t> sent_ok{0};
  ring_view sender_view, receiver_view;
  const int sleep_ms = 1500;
  rt.run([&](thread_context& ctx) {
    invoke::channels_of(ctx).set_options(tiny_ring());
    if (ctx.id() == receiver) {
      // Not polling: chunks fill up. (Another thread of the process serves the allocations.)
      std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
      ctx.wait_until([&] { return inbox_of(ctx).calls >= 3 * 2000; });
      // Ring as the receiver sees it.
      invoke::inbound_channel* in = invoke::channels_of(ctx).inbound_from(sender);
      ASSERT_NE(in, nullptr);
      auto addresses = in->chunk_addresses();
      receiver_view.chunks = static_cast<std::uint32_t>(addresses.size());
      for (std::size_t i = 0; i < addresses.size() && i < 8; ++i) receiver_view.addresses[i] = addresses[i];
      return;
    }
    if (ctx.id() != sender) return;
    std::vector<std::byte> payload(200);
    std::uint64_t seq = 0;
    auto f = [](std::uint64_t s) {
      return [s](thread_context& self, std::span<std::byte>) { expect_next(self, s); };
    };
    // 1. fail: write until the ring (3 chunks of 8 KiB) is full.
    for (int i = 0; i < 2000; ++i) {
      call_status st = invoke::call_buffer<channel::write, invoke::policy::fail>(ctx, receiver, f(seq), payload);
      if (st == call_status::full) {
        saw_full = true;
        continue;
      }
      ASSERT_EQ(st, call_status::ok);
      ++seq;
    }
    sent_ok = seq;
    const std::uint64_t failed = 2000 - seq;
    // 2. retry: blocks until the receiver wakes, then completes.
    for (std::uint64_t i = 0; i < 2000 + failed; ++i) {
      ASSERT_EQ((invoke::call_buffer<channel::write, invoke::policy::retry>(ctx, receiver, f(seq), payload)),
                call_status::ok);
      ++seq;
    }
    // 3. retry_async: returns at once (queued), completes in order later.
    for (int i = 0; i < 2000; ++i) {
      ASSERT_EQ((invoke::call_buffer<channel::write, invoke::policy::retry_async>(ctx, receiver, f(seq), payload)),
                call_status::ok);
      ++seq;
    }
    invoke::messenger& m = invoke::channels_of(ctx).to(receiver);
    auto addresses = m.chunk_addresses();
    sender_view.chunks = static_cast<std::uint32_t>(addresses.size());
    for (std::size_t i = 0; i < addresses.size() && i < 8; ++i) sender_view.addresses[i] = addresses[i];
  });
  EXPECT_TRUE(saw_full.load() || rt.placement().locate(sender).process != rt.rank());
  auto senders = test::allgather_value(sender_view);
  auto receivers = test::allgather_value(receiver_view);
  const auto& s = senders[static_cast<std::size_t>(rt.placement().locate(sender).process)];
  const auto& r = receivers[static_cast<std::size_t>(rt.placement().locate(receiver).process)];
  EXPECT_EQ(s.chunks, 3u) << "the ring grew to its maximum";
  EXPECT_EQ(s.chunks, r.chunks);
  EXPECT_EQ(s.addresses, r.addresses) << "sender and receiver rings hold the same chunks in the same order";
  if (const test::inbox* got = test::inbox_here(receiver)) {
    EXPECT_EQ(got->calls, 6000u);
    EXPECT_EQ(got->wrong, 0u);
  }
}

namespace {

// What the sender saw of one messenger after its queue drained (gathered to every process).
struct queue_paths {
  std::uint64_t exceeding = 0;
  std::uint64_t uncopied = 0;
  std::uint64_t copied = 0;
  std::uint64_t direct_copies = 0;
  std::uint64_t left_queued = 0;
  bool direct = false;
  bool seen = false;
};

queue_paths paths_of(const invoke::messenger& m) {
  const invoke::messenger_counters c = m.counters();
  return {c.exceeding, c.exceeding_uncopied, c.exceeding_copied, c.exceeding_direct,
          m.queued_bytes(), m.direct(), true};
}

}  // namespace

// Queued records (ovfl calls and write calls with retry_async, while the receiver does not poll
// and its small ring is full) run once, in order, with their buffers intact; and the counters
// say how they left: from the registered queue itself with no copy on the remote path, copied
// into staging under SERIEMA_EXCEEDING_COPY=always, copied into the mapped chunk on the same
// machine (that copy is the transfer).
TEST(InvokeOneSided, QueuedRecordsLeaveFromTheQueueUncopied) {
  reset_inboxes();
  auto& rt = test::rt();
  if (threads() < 3) GTEST_SKIP() << "needs 3 threads";
  const fabric::thread_id sender = 0;
  const std::array<fabric::thread_id, 2> receivers{threads() - 1, threads() - 2};
  const std::array<invoke::exceeding_copy, 2> copies{invoke::exceeding_copy::automatic,
                                                     invoke::exceeding_copy::always};
  constexpr std::uint64_t calls = 3000;
  std::array<queue_paths, 2> seen{};
  // Set on receiver i's process once the sender's channel to it exists: the receiver stops
  // polling only then (the channel's setup needs a thread of its process to serve it, and with
  // 2 threads per process both may be receivers).
  // The receiver answers (`sleeping`, on the sender's process) and stops polling; the sender
  // sends only once both answered, so the calls find the receivers asleep.
  static std::array<std::atomic<bool>, 2> may_sleep, sleeping;
  for (std::size_t i = 0; i < 2; ++i) may_sleep[i] = sleeping[i] = false;
  rt.run([&](thread_context& ctx) {
    for (std::size_t i = 0; i < 2; ++i) {
      if (ctx.id() != receivers[i]) continue;
      ctx.wait_until([&] { return may_sleep[i].load(); });
      ASSERT_EQ(ctx.call(sender, [i](thread_context&) { sleeping[i] = true; }), call_status::ok);
      // Not polling for a while: the ring (3 chunks of 8 KiB) fills and later calls queue.
      std::this_thread::sleep_for(std::chrono::milliseconds(1000));
      // Bounded: calls lost on the way (a ring the receiver adopted shorter than the sender's)
      // fail the test here instead of hanging it.
      EXPECT_TRUE(ctx.wait_until([&] { return inbox_of(ctx).calls >= calls; },
                                 std::chrono::steady_clock::now() + std::chrono::seconds(60)))
          << "receiver " << ctx.id() << " ran " << inbox_of(ctx).calls << " of " << calls
          << " calls";
    }
    if (ctx.id() != sender) return;
    for (std::size_t i = 0; i < 2; ++i) {
      invoke::messenger_options o = tiny_ring();
      // The whole ring at setup: growing it later needs a thread of the receivers' process to
      // serve the allocation, and with 2 threads per process both receivers may be asleep (the
      // growth would wait for them and the ring never fill).
      o.chunks_per_allocation = o.max_chunks;
      o.copy_exceeding = copies[i];
      invoke::channels_of(ctx).set_options(o);  // for the messenger made next
      invoke::channels_of(ctx).to(receivers[i]).setup();
      ASSERT_EQ(ctx.call(receivers[i], [i](thread_context&) { may_sleep[i] = true; }),
                call_status::ok);
    }
    ASSERT_TRUE(ctx.wait_until([&] { return sleeping[0].load() && sleeping[1].load(); },
                               std::chrono::steady_clock::now() + std::chrono::seconds(60)));
    std::vector<std::byte> payload(200);
    for (std::size_t i = 0; i < 2; ++i) {
      for (std::uint64_t seq = 0; seq < calls; ++seq) {
        fill_pattern(payload, seq);
        auto f = [seq, sum = checksum(payload)](thread_context& self, std::span<std::byte> got) {
          if (got.size() != 200 || checksum(got) != sum) ++inbox_of(self).wrong;
          expect_next(self, seq);
        };
        const call_status st =
            seq % 2 == 0
                ? invoke::call_buffer<channel::ovfl, invoke::policy::fail>(ctx, receivers[i], f,
                                                                          payload)
                : invoke::call_buffer<channel::write, invoke::policy::retry_async>(
                      ctx, receivers[i], f, payload);
        ASSERT_EQ(st, call_status::ok) << "call " << seq;
      }
    }
    invoke::channels& mine = invoke::channels_of(ctx);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    ctx.wait_until([&] {
      return (mine.to(receivers[0]).queued_bytes() == 0 &&
              mine.to(receivers[1]).queued_bytes() == 0) ||
             std::chrono::steady_clock::now() > deadline;
    });
    for (std::size_t i = 0; i < 2; ++i) seen[i] = paths_of(mine.to(receivers[i]));
  });
  const auto gathered = test::allgather_value(seen);
  const auto& s = gathered[static_cast<std::size_t>(rt.placement().locate(sender).process)];
  for (std::size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(i == 0 ? "SERIEMA_EXCEEDING_COPY=auto" : "SERIEMA_EXCEEDING_COPY=always");
    ASSERT_TRUE(s[i].seen);
    EXPECT_EQ(s[i].left_queued, 0u);
    EXPECT_GT(s[i].exceeding, 0u) << "the ring was full: calls went through the queue";
    EXPECT_EQ(s[i].uncopied + s[i].copied + s[i].direct_copies, s[i].exceeding);
    if (s[i].direct) {
      EXPECT_EQ(s[i].direct_copies, s[i].exceeding);
    } else if (copies[i] == invoke::exceeding_copy::automatic) {
      EXPECT_EQ(s[i].uncopied, s[i].exceeding) << "sent from the queue without a copy";
      EXPECT_EQ(s[i].copied, 0u);
    } else {
      EXPECT_EQ(s[i].copied, s[i].exceeding) << "copied into staging first";
      EXPECT_EQ(s[i].uncopied, 0u);
    }
    if (const test::inbox* got = test::inbox_here(receivers[i])) {
      EXPECT_EQ(got->calls, calls);
      EXPECT_EQ(got->wrong, 0u);
      EXPECT_EQ(got->next_seq[0], calls);
    }
  }
}

namespace {

struct counted_function {
  std::uint64_t value;
  void operator()(thread_context& self) const {
    inbox& box = inbox_of(self);
    box.bytes += value;
    ++box.calls;
  }
};

}  // namespace

// Corrupt records written into a chunk are rejected and counted; good calls keep running.
TEST(InvokeOneSided, CorruptRecordsAreRejectedAndCounted) {
  reset_inboxes();
  auto& rt = test::rt();
  const fabric::thread_id sender = 0;
  const fabric::thread_id receiver = threads() - 1;
  invoke::receive_counters seen{};
  rt.run([&](thread_context& ctx) {
    if (ctx.id() == receiver) {
      ctx.wait_until([&] { return inbox_of(ctx).calls >= 5; });
      seen = invoke::channels_of(ctx).received();
      return;
    }
    if (ctx.id() != sender) return;
    invoke::messenger& m = invoke::channels_of(ctx).to(receiver);
    ASSERT_EQ(invoke::call<channel::write>(ctx, receiver, counted_function{1}), call_status::ok);
    const fabric::function_id good_id = fabric::function_wrapper<counted_function, fabric::plain_shape>::id;
    auto record = [&](std::uint32_t function, std::uint32_t size, std::uint32_t closure) {
      std::vector<std::byte> bytes(32, std::byte{0});
      invoke::wire::record_header h{function, size, closure, 0, 0, 0};
      std::memcpy(bytes.data(), &h, sizeof h);
      return bytes;
    };
    // Each corrupt record is published alone and the sender waits until the receiver counted
    // it: a malformed record drops the rest of its published range, which must not hide the next.
    auto wait_counts = [&](std::uint64_t malformed, std::uint64_t unknown, std::uint64_t bad) {
      for (;;) {
        fabric::return_slot<invoke::receive_counters> counts;
        ASSERT_EQ(ctx.call_return(receiver,
                                  [](thread_context& self) {
                                    return invoke::channels_of(self).received();
                                  },
                                  counts),
                  call_status::ok);
        ctx.wait_for(counts);
        const auto& c = counts.value();
        if (c.rejected_malformed == malformed && c.rejected_unknown_function == unknown &&
            c.rejected_record == bad) {
          return;
        }
        ASSERT_LE(c.rejected_malformed, malformed);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    };
    // A length that is not a multiple of 8 (malformed: the rest of the range is dropped).
    ASSERT_EQ(m.publish_raw_for_testing(record(good_id, 12, 8), 1), call_status::ok);
    wait_counts(1, 0, 0);
    // A length past the published range (malformed).
    ASSERT_EQ(m.publish_raw_for_testing(record(good_id, 4096, 8), 1), call_status::ok);
    wait_counts(2, 0, 0);
    // An unknown function id (skipped).
    ASSERT_EQ(m.publish_raw_for_testing(record(0x7eadbeef, 32, 8), 1), call_status::ok);
    wait_counts(2, 1, 0);
    // A closure size that does not match the function (skipped).
    ASSERT_EQ(m.publish_raw_for_testing(record(good_id, 32, 4), 1), call_status::ok);
    wait_counts(2, 1, 1);
    // Repeated records (wire::flag_repeated): `repeat` 8-byte closures after the header.
    auto repeated = [&](std::uint32_t function, std::uint32_t repeat, std::uint32_t closures,
                        std::uint32_t flags, std::uint32_t buffer) {
      std::vector<std::byte> bytes(24 + 8 * std::size_t{closures}, std::byte{0});
      invoke::wire::record_header h{function, static_cast<std::uint32_t>(bytes.size()), 8,
                                    buffer, invoke::wire::flag_repeated | flags, repeat};
      std::memcpy(bytes.data(), &h, sizeof h);
      for (std::uint32_t i = 0; i < closures; ++i) {
        const std::uint64_t value = 100 * (i + 1);
        std::memcpy(bytes.data() + 24 + 8 * i, &value, 8);
      }
      return bytes;
    };
    // A count of 0; a count the size disagrees with; a reply extra; a buffer (each skipped, and
    // one message: the count is not trusted).
    ASSERT_EQ(m.publish_raw_for_testing(repeated(good_id, 0, 1, 0, 0), 1), call_status::ok);
    wait_counts(2, 1, 2);
    ASSERT_EQ(m.publish_raw_for_testing(repeated(good_id, 2, 3, 0, 0), 1), call_status::ok);
    wait_counts(2, 1, 3);
    ASSERT_EQ(m.publish_raw_for_testing(repeated(good_id, 2, 2, invoke::wire::flag_reply, 0), 1),
              call_status::ok);
    wait_counts(2, 1, 4);
    ASSERT_EQ(m.publish_raw_for_testing(repeated(good_id, 2, 2, 0, 8), 1), call_status::ok);
    wait_counts(2, 1, 5);
    // Well framed, of an unknown function: skipped, and consumed as its 3 calls.
    ASSERT_EQ(m.publish_raw_for_testing(repeated(0x7eadbeef, 3, 3, 0, 0), 3), call_status::ok);
    wait_counts(2, 2, 5);
    // A good one: 3 calls (100 + 200 + 300).
    ASSERT_EQ(m.publish_raw_for_testing(repeated(good_id, 3, 3, 0, 0), 3), call_status::ok);
    // A published offset past the chunk: the receiver must see it before the next good publish.
    ASSERT_EQ(m.publish_word_for_testing(invoke::wire::make_published(
                  std::uint64_t{1} << 31, 1, false, false)),
              call_status::ok);
    wait_counts(3, 2, 5);
    ASSERT_EQ(invoke::call<channel::write>(ctx, receiver, counted_function{10}), call_status::ok);
  });
  if (const test::inbox* got = test::inbox_here(receiver)) {
    EXPECT_EQ(got->calls, 5u);
    EXPECT_EQ(got->bytes, 611u);
    EXPECT_EQ(seen.rejected_malformed, 3u);
    EXPECT_EQ(seen.rejected_unknown_function, 2u);
    EXPECT_EQ(seen.rejected_record, 5u);
  }
}

// Calls to a thread on another machine are published the way SERIEMA_REMOTE_PUBLISH says: one
// write message under auto (these transports have no RDMA) or message, puts under put.
TEST(InvokeOneSided, RemotePublishFollowsTheSetting) {
  auto& rt = test::rt();
  const invoke::remote_publish setting = invoke::messenger_options::from_environment().publish_remote;
  const bool expect_message =
      setting == invoke::remote_publish::message ||
      (setting == invoke::remote_publish::automatic && !rt.context().network_rdma());
  rt.run([&](thread_context& ctx) {
    for (fabric::thread_id dest = 0; dest < ctx.thread_count(); ++dest) {
      ASSERT_EQ(invoke::call<channel::write>(ctx, dest, counted_function{1}), call_status::ok);
      const invoke::messenger& m = invoke::channels_of(ctx).to(dest);
      const int process = rt.placement().locate(dest).process;
      if (m.direct()) {
        EXPECT_TRUE(rt.same_machine(process));
        EXPECT_FALSE(m.publishes_by_message());
      } else {
        EXPECT_EQ(m.publishes_by_message(), expect_message)
            << "to thread " << dest;
      }
    }
  });
}

// What a sender's trad calls to `receiver` published: the sender's counters from after a first
// write call (which makes the messenger) to the end of `calls(ctx, to)`, and the flush size and
// staging unit in force. Counted on the sender's process only (flush is 0 elsewhere).
struct published_batches {
  invoke::messenger_counters sent{};
  std::uint64_t flush = 0;
  std::uint64_t unit = 0;
  bool by_message = false;  // the messenger publishes with write messages
};
template <class Calls>
published_batches count_batches(fabric::thread_id sender, fabric::thread_id receiver,
                                Calls calls) {
  published_batches seen;
  test::rt().run([&](thread_context& ctx) {
    if (ctx.id() != sender) return;
    ASSERT_EQ((invoke::call<channel::write>(ctx, receiver, [](thread_context&) {})),
              call_status::ok);
    invoke::messenger& m = invoke::channels_of(ctx).to(receiver);
    const invoke::messenger_counters before = m.counters();
    seen.flush = invoke::channels_of(ctx).options().flush_size_for(m.publishes_by_message());
    seen.unit = invoke::channels_of(ctx).options().staging_size;
    seen.by_message = m.publishes_by_message();
    invoke::aggregator_to<channel::trad> to(ctx, receiver);
    calls(ctx, to);
    to.flush();
    seen.sent = m.counters().since(before);
  });
  return seen;
}

// A run of trad calls is published in batches of the flush size: SERIEMA_FLUSH_SIZE when set,
// else 4 KiB to a mapped ring (or by put) and 32 KiB where batches travel as write messages.
// The batches are counted from the sender's counters: every publish but the last carries at
// least the flush size, and none carries a closure more.
TEST(InvokeOneSided, TradBatchesFollowTheFlushSize) {
  reset_inboxes();
  auto& rt = test::rt();
  const fabric::thread_id sender = 0;
  const fabric::thread_id receiver = threads() - 1;
  constexpr std::uint64_t calls = 100000;
  const published_batches seen = count_batches(
      sender, receiver, [](thread_context&, invoke::aggregator_to<channel::trad>& to) {
        for (std::uint64_t seq = 0; seq < calls; ++seq) {
          ASSERT_EQ(to.call<invoke::policy::retry>(run_call{seq}), call_status::ok);
        }
      });
  if (rt.rank() == rt.placement().locate(sender).process) {
    ASSERT_GT(seen.flush, 0u);
    const std::optional<std::string> setting = seriema::config::raw("SERIEMA_FLUSH_SIZE");
    if (setting) {
      EXPECT_EQ(seen.flush, seriema::config::parse_bytes("SERIEMA_FLUSH_SIZE", *setting));
    } else {
      EXPECT_EQ(seen.flush, seen.by_message ? 32768u : 4096u);
    }
    const invoke::messenger_counters& sent = seen.sent;
    EXPECT_EQ(sent.calls, calls);
    // Early publishes: a full ring's retry, a staging unit's end (staged path), a chunk's end
    // (2 MiB chunks hold this run twice over: at most one).
    EXPECT_GE(sent.publishes, sent.bytes / (seen.flush + sizeof(run_call)));
    EXPECT_LE(sent.publishes, sent.bytes / seen.flush + 2 + sent.full + sent.bytes / seen.unit);
  }
  expect_ran_in_order(receiver, calls - 1);
}

// A thread whose deadline passes while the destination's process grants its first chunks (or
// more of them) keeps that request: the grant is taken by a later call, never asked for again
// (the receiver adopts the first grant of a batch, so a second request's chunks would be written
// where nobody reads, and the run could never end). Every call waits under a deadline already
// passed: the first ones find no ring and return at once, and all that were sent run, in order.
TEST(InvokeOneSided, AGrantThatMissedItsDeadlineIsTakenByALaterCall) {
  reset_inboxes();
  auto& rt = test::rt();
  const fabric::thread_id receiver = threads() - 1;
  constexpr std::uint64_t calls = 2000;
  std::uint64_t missed = 0;
  rt.run([&](thread_context& ctx) {
    if (ctx.id() != 0) return;
    std::uint64_t sent = 0;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (sent < calls && std::chrono::steady_clock::now() < give_up) {
      call_status status;
      {
        const thread_context::deadline_scope passed(ctx, fabric::deadline_clock::now());
        status = invoke::call<channel::write, invoke::policy::retry>(ctx, receiver,
                                                                     run_call{sent});
      }
      if (status == call_status::ok) {
        ++sent;
      } else {
        ASSERT_TRUE(status == call_status::deadline_exceeded || status == call_status::full)
            << invoke::describe(ctx, status, channel::write);
        ++missed;
        ctx.poll();
      }
    }
    EXPECT_EQ(sent, calls);
  });
  if (rt.rank() == 0 && rt.placement().locate(receiver).process != 0) {
    // Another process grants: the first call cannot have had its ring. (In one process the
    // sender's own poll serves the request at once.)
    EXPECT_GT(missed, 0u);
  }
  expect_ran_in_order(receiver, calls - 1);
}

// A write call publishes itself without restarting the trad batches' flush limit
// (messenger::note_published): the trad batch after it is due where the limit was left, early,
// and its publish restarts the limit, so the batches after it follow the flush size again.
// Rounds of one write call and a run of trad calls through one aggregator: at most one early
// publish a round, where a limit that was never restarted would publish every trad call.
TEST(InvokeOneSided, TradBatchesFollowTheFlushSizeBetweenWriteCalls) {
  reset_inboxes();
  auto& rt = test::rt();
  const fabric::thread_id sender = 0;
  const fabric::thread_id receiver = threads() - 1;
  constexpr std::uint64_t rounds = 8;
  constexpr std::uint64_t per_round = 20000;
  const published_batches seen = count_batches(
      sender, receiver, [&](thread_context& ctx, invoke::aggregator_to<channel::trad>& to) {
        std::uint64_t seq = 0;
        for (std::uint64_t round = 0; round < rounds; ++round) {
          ASSERT_EQ((invoke::call<channel::write>(ctx, receiver, [](thread_context&) {})),
                    call_status::ok);
          for (std::uint64_t k = 0; k < per_round; ++k) {
            ASSERT_EQ(to.call<invoke::policy::retry>(run_call{seq++}), call_status::ok);
          }
        }
      });
  if (rt.rank() == rt.placement().locate(sender).process) {
    ASSERT_GT(seen.flush, 0u);
    const invoke::messenger_counters& sent = seen.sent;
    EXPECT_EQ(sent.calls, rounds * (per_round + 1));
    // Each round: its write call's publish and at most one early trad publish; then batches of
    // the flush size, with the early publishes of TradBatchesFollowTheFlushSize.
    EXPECT_GE(sent.publishes, sent.bytes / (seen.flush + sizeof(run_call)));
    EXPECT_LE(sent.publishes,
              2 * rounds + sent.bytes / seen.flush + 2 + sent.full + sent.bytes / seen.unit);
  }
  expect_ran_in_order(receiver, rounds * per_round - 1);
}

// Write messages (fabric::am_id_write) land only in a live allocation of the receiving process's
// allocation service, exactly as allocated and in range; anything else is counted and dropped.
TEST(InvokeOneSided, ForgedWriteMessagesAreRejected) {
  auto& rt = test::rt();
  if (rt.size() < 2) GTEST_SKIP() << "needs 2 processes";
  const fabric::thread_id target = rt.options().threads_per_process;  // first thread of rank 1
  struct outcome {
    std::uint64_t rejected;
    std::uint64_t word;
    std::uint64_t data;
    std::uint64_t untouched;
  };
  outcome seen{};
  rt.run([&](thread_context& ctx) {
    if (ctx.id() != 0) return;
    const transfer::remote_memory_locator area = ctx.allocate_remote(target, 4096);
    transfer::ucx_endpoint& endpoint = ctx.endpoint_to(area.process);
    fabric::return_slot<outcome> before;
    auto read_back = [address = area.address](thread_context& self) {
      const auto* words = reinterpret_cast<const std::uint64_t*>(address);
      return outcome{self.rt().counters().rejected_writes.load(), words[0], words[8], words[9]};
    };
    ASSERT_EQ(ctx.call_return(target, read_back, before), call_status::ok);
    ctx.wait_for(before);
    const std::uint64_t payload = 0x5eed'1234'abcd'0042;
    auto send = [&](const fabric::write_message& m, std::size_t length) {
      ucp_request_param_t param{};
      void* request = ucp_am_send_nbx(endpoint.handle(), fabric::am_id_write, &m, sizeof m,
                                      &payload, length, &param);
      while (request != nullptr && !UCS_PTR_IS_ERR(request) &&
             ucp_request_check_status(request) == UCS_INPROGRESS) {
        (void)ctx.poll();
      }
      ASSERT_FALSE(UCS_PTR_IS_ERR(request));
      if (request != nullptr) ucp_request_free(request);
    };
    const std::uint64_t base = area.address, size = area.size;
    send({base + 64, size - 64, 64, 0, 1}, 8);       // not an allocation's start
    send({base, size + 64, 64, 0, 2}, 8);            // not its size
    send({base, size, size - 4, 0, 3}, 8);           // payload past the end
    send({base, size, 64, size - 4, 4}, 8);          // word past the end
    send({base, size, 64, 4, 5}, 8);                 // unaligned word
    send({base, size, ~std::uint64_t{0} - 2, 0, 6}, 8);  // offset overflow
    send({base, size, 64, 0, 77}, 8);                // good: data at 64, then word 77
    // Messages of one endpoint arrive in order: the call runs after all seven were handled.
    fabric::return_slot<outcome> after;
    ASSERT_EQ(ctx.call_return(target, read_back, after), call_status::ok);
    ctx.wait_for(after);
    seen = after.value();
    seen.rejected -= before.value().rejected;
    seen.untouched = seen.untouched == before.value().untouched ? 0 : 1;  // word 9: never a target
    ctx.free_remote(area);
  });
  if (rt.rank() == 0) {
    EXPECT_EQ(seen.rejected, 6u);
    EXPECT_EQ(seen.word, 77u);
    EXPECT_EQ(seen.data, 0x5eed'1234'abcd'0042u);
    EXPECT_EQ(seen.untouched, 0u) << "a rejected write changed memory";
  }
}

namespace {

// Every thread broadcasts once (plain and with a buffer): each thread runs each broadcast
// exactly once.
template <channel C>
void broadcast_everywhere() {
  reset_inboxes();
  auto& rt = test::rt();
  rt.run([](thread_context& ctx) {
    const std::uint32_t root = ctx.id();
    invoke::broadcast<C>(ctx, [root](thread_context& self) {
      inbox& box = inbox_of(self);
      ++box.next_seq[root];
      ++box.calls;
    });
    std::vector<std::byte> buffer(100);
    fill_pattern(buffer, root);
    const std::uint64_t sum = checksum(buffer);
    invoke::broadcast_buffer<C>(ctx,
                                [root, sum](thread_context& self, std::span<std::byte> got) {
                                  inbox& box = inbox_of(self);
                                  if (checksum(got) != sum) ++box.wrong;
                                  box.source_sum += root;
                                  box.bytes += got.size();
                                },
                                buffer);
  });
  std::uint64_t all_ids = 0;
  for (fabric::thread_id t = 0; t < threads(); ++t) all_ids += t;
  for (int t = 0; t < rt.options().threads_per_process; ++t) {
    EXPECT_EQ(inboxes[t].calls, threads()) << "local thread " << t;
    for (fabric::thread_id root = 0; root < threads(); ++root) {
      EXPECT_EQ(inboxes[t].next_seq[root], 1u) << "broadcast from " << root << " ran "
                                                << inboxes[t].next_seq[root] << " times";
    }
    EXPECT_EQ(inboxes[t].source_sum, all_ids);
    EXPECT_EQ(inboxes[t].bytes, 100 * threads());
    EXPECT_EQ(inboxes[t].wrong, 0u);
  }
}

}  // namespace

TEST(InvokeOneSided, BroadcastWrite) { broadcast_everywhere<channel::write>(); }
TEST(InvokeOneSided, BroadcastTrad) { broadcast_everywhere<channel::trad>(); }
TEST(InvokeOneSided, BroadcastSend) { broadcast_everywhere<channel::send>(); }

// call_buffer's put and get variants: the buffer reaches the destination through a remote write
// into memory allocated near it, or a remote read of the caller's registered memory.
TEST(InvokeOneSided, CallBufferPutAndGetVariants) {
  reset_inboxes();
  auto& rt = test::rt();
  rt.run([](thread_context& ctx) {
    const std::uint32_t me = ctx.id();
    const fabric::thread_id dest = (me + 1) % ctx.thread_count();
    std::vector<std::byte> data(5000);
    fill_pattern(data, me);
    const std::uint64_t sum = checksum(data);
    auto check = [dest, sum](thread_context& self, std::span<std::byte> got) {
      inbox& box = inbox_of(self);
      if (self.id() != dest || got.size() != 5000 || checksum(got) != sum) ++box.wrong;
      box.bytes += got.size();
      ++box.calls;
    };
    // Put variant: into memory allocated in the destination's zone.
    transfer::remote_memory_locator target = ctx.allocate_remote(dest, data.size());
    ASSERT_EQ((invoke::call_buffer<channel::write, invoke::policy::retry>(ctx, dest, check, data, target)),
              call_status::ok);
    // Get variant: the destination reads our registered copy.
    transfer::remote_memory_locator origin = ctx.allocate_remote(me, data.size());
    std::memcpy(reinterpret_cast<void*>(origin.address), data.data(), data.size());
    ASSERT_EQ((invoke::call_buffer_get<channel::write, invoke::policy::retry>(ctx, dest, check, origin)),
              call_status::ok);
    // Wait until both ran (the destination reports back), then give the memory back.
    fabric::return_slot<std::uint64_t> done;
    for (;;) {
      ASSERT_EQ(ctx.call_return(dest, [](thread_context& self) { return inbox_of(self).calls; }, done),
                call_status::ok);
      ctx.wait_for(done);
      if (done.value() >= 2) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ctx.free_remote(target);
    ctx.free_remote(origin);
  });
  for (int t = 0; t < rt.options().threads_per_process; ++t) {
    EXPECT_EQ(inboxes[t].calls, 2u) << "local thread " << t;
    EXPECT_EQ(inboxes[t].bytes, 10000u);
    EXPECT_EQ(inboxes[t].wrong, 0u);
  }
}

int main(int argc, char** argv) { return seriema::test::run_all_tests(argc, argv); }

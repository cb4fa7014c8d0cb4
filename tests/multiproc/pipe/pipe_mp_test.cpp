// Remote pipes across the worker threads of one or several processes: every worker writes to the
// next and reads from the previous (a ring), irregular sizes 8 B - 64 KiB checked in order and
// byte for byte, for every fit policy and write protocol; a duplex ping-pong; a slow reader; the
// order of buffers written out of their allocation order, and short writes; the pull direction
// (rstage, rpost, rget) and its refusals; the waits as futures; and every refusal
// (zero size, too large, exhausted, stale, not this pipe's, closed, options that disagree, a
// writer gone before its reader came).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <seriema/base/error.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/pipe/pipe.hpp>
#include <thread>
#include <tuple>
#include <vector>

#include "ring.hpp"
#include "support/mp_main.hpp"

using namespace seriema;
using fabric::thread_context;
using pipe::pipe_status;
using transfer::fit_policy;

namespace {

using test::next_of;
using test::phase_deadline;
using test::previous_of;

// The sizes a writer sends: log-uniform in [8, max_size], from a seed both ends know.
class size_stream {
 public:
  size_stream(std::uint64_t seed, std::size_t max_size) : random_(seed), max_(max_size) {}
  std::size_t next() {
    const double lg = std::uniform_real_distribution<double>(std::log(8.0),
                                                             std::log(double(max_)))(random_);
    return std::max<std::size_t>(8, static_cast<std::size_t>(std::exp(lg)));
  }

 private:
  std::mt19937_64 random_;
  std::size_t max_;
};

// Byte i of buffer `sequence` of a writer.
std::byte content(std::uint64_t writer, std::uint64_t sequence, std::size_t i) {
  return static_cast<std::byte>((writer * 131 + sequence * 31 + i * 7 + (i >> 8)) & 0xff);
}

void fill(std::span<std::byte> bytes, std::uint64_t writer, std::uint64_t sequence) {
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = content(writer, sequence, i);
}

bool matches(std::span<const std::byte> bytes, std::uint64_t writer, std::uint64_t sequence) {
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] != content(writer, sequence, i)) return false;
  }
  return true;
}

struct stream_plan {
  pipe::pipe_options options;
  std::uint64_t count = 200;
  std::size_t max_size = 64 * 1024;
  int slow_reader_every = 0;  ///< sleep 1 ms every this many reads (0: never)
};

// This worker writes plan.count buffers to the next worker and reads as many from the previous,
// in one loop (so that no worker waits for another in turn), checking every byte in order; then
// closes its writer and reads on until its reader says closed.
void stream_ring(thread_context& me, const stream_plan& plan, std::uint64_t seed) {
  pipe::duplex ends = pipe::duplex::open(me, next_of(me), previous_of(me), plan.options,
                                         fabric::deadline_clock::now() + phase_deadline);
  size_stream sizes_out(seed * 1000 + me.id(), plan.max_size);
  size_stream sizes_in(seed * 1000 + previous_of(me), plan.max_size);
  std::uint64_t written = 0, read = 0;
  std::size_t pending_size = sizes_out.next();
  const auto deadline = fabric::deadline_clock::now() + phase_deadline;
  pipe_status last = pipe_status::ok;
  while (written < plan.count || last != pipe_status::closed) {
    ASSERT_LT(fabric::deadline_clock::now(), deadline) << "written " << written << " read " << read;
    if (written < plan.count) {
      pipe::reservation r = ends.out.rmalloc(pending_size);
      if (r) {
        fill(ends.out.rmem(r.buffer), me.id(), written);
        ASSERT_EQ(ends.out.rwrite(r.buffer), pipe_status::ok);
        if (++written < plan.count) pending_size = sizes_out.next();
        if (written == plan.count) ends.out.close();
      } else {
        ASSERT_EQ(r.status, pipe_status::exhausted);
      }
    }
    pipe::read_result got = ends.in.rread();
    last = got.status;
    if (!got) {
      ASSERT_TRUE(got.status == pipe_status::empty || got.status == pipe_status::closed)
          << pipe::to_string(got.status);
      continue;
    }
    ASSERT_EQ(got.buffer.size, sizes_in.next()) << "buffer " << read;
    ASSERT_TRUE(matches(ends.in.rmem(got.buffer), previous_of(me), read)) << "buffer " << read;
    ASSERT_EQ(ends.in.rfree(got.buffer), pipe_status::ok);
    ++read;
    if (plan.slow_reader_every != 0 && read % plan.slow_reader_every == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  EXPECT_EQ(written, plan.count);
  EXPECT_EQ(read, plan.count);
  EXPECT_EQ(ends.out.counters().buffers, plan.count);
  EXPECT_EQ(ends.in.counters().buffers, plan.count);
  EXPECT_EQ(ends.in.counters().rejected_slots, 0u);
  EXPECT_EQ(ends.out.counters().rejected_releases, 0u);
  me.quiesce(phase_deadline);  // every ring pipe done before the next variant opens
}

class PipeStreams : public ::testing::TestWithParam<std::tuple<fit_policy, pipe::write_protocol>> {
};

TEST_P(PipeStreams, IrregularSizesArriveInOrder) {
  stream_plan plan;
  plan.options.fit = std::get<0>(GetParam());
  plan.options.protocol = std::get<1>(GetParam());
  plan.options.heap_bytes = 512 * 1024;
  plan.options.width = 64;
  const auto seed = static_cast<std::uint64_t>(plan.options.fit) * 10 +
                    static_cast<std::uint64_t>(plan.options.protocol);
  test::rt().run([&](thread_context& me) { stream_ring(me, plan, seed); });
}

INSTANTIATE_TEST_SUITE_P(
    EveryPolicyAndProtocol, PipeStreams,
    ::testing::Combine(::testing::Values(fit_policy::next_fit, fit_policy::best_fit,
                                         fit_policy::worst_fit, fit_policy::first_fit),
                       ::testing::Values(pipe::write_protocol::automatic,
                                         pipe::write_protocol::one_operation,
                                         pipe::write_protocol::data_then_flag)));

TEST(Pipe, SlowReaderSmallHeapWrapsAndWaits) {
  for (fit_policy fit : {fit_policy::next_fit, fit_policy::best_fit}) {
    stream_plan plan;
    plan.options.fit = fit;
    plan.options.heap_bytes = 160 * 1024;  // a few 64 KiB buffers: the heap wraps and fills
    plan.options.width = 16;
    plan.count = 300;
    plan.slow_reader_every = 16;
    test::rt().run([&](thread_context& me) { stream_ring(me, plan, 100 + unsigned(fit)); });
  }
}

// Workers 2k and 2k + 1 echo 200 buffers of 8 - 256 B to each other over one duplex.
void ping_pong(thread_context& me, fabric::thread_id peer) {
  const auto deadline = fabric::deadline_clock::now() + phase_deadline;
  pipe::duplex ends = pipe::duplex::open(me, peer, {}, deadline);
  const bool starts = me.id() % 2 == 0;
  for (std::uint64_t round = 0; round < 200; ++round) {
    const std::size_t size = 8 + round % 249;
    if (starts) {
      pipe::reservation r = ends.out.rmalloc(size, deadline);
      ASSERT_TRUE(r) << pipe::to_string(r.status);
      fill(ends.out.rmem(r.buffer), me.id(), round);
      ASSERT_EQ(ends.out.rwrite(r.buffer), pipe_status::ok);
    }
    pipe::read_result got = ends.in.rread(deadline);
    ASSERT_TRUE(got) << pipe::to_string(got.status) << " in round " << round;
    ASSERT_EQ(got.buffer.size, size);
    ASSERT_TRUE(matches(ends.in.rmem(got.buffer), starts ? me.id() : peer, round));
    if (!starts) {  // echo the same bytes back
      pipe::reservation r = ends.out.rmalloc(size, deadline);
      ASSERT_TRUE(r) << pipe::to_string(r.status);
      std::memcpy(ends.out.rmem(r.buffer).data(), ends.in.rmem(got.buffer).data(), size);
      ASSERT_EQ(ends.out.rwrite(r.buffer), pipe_status::ok);
    }
    ASSERT_EQ(ends.in.rfree(got.buffer), pipe_status::ok);
  }
}

TEST(Pipe, DuplexPingPong) {
  test::rt().run([&](thread_context& me) {
    const fabric::thread_id peer = me.id() ^ 1u;
    if (peer < me.thread_count()) ping_pong(me, peer);  // else an odd worker out
    me.quiesce(phase_deadline);
  });
}

// Every refusal of a writer and a reader, each with nothing sent.
void refusals(thread_context& me) {
  pipe::pipe_options options;
  options.heap_bytes = 64 * 1024;
  options.width = 8;
  const auto deadline = fabric::deadline_clock::now() + phase_deadline;
  pipe::duplex a = pipe::duplex::open(me, next_of(me), previous_of(me), options, deadline);
  pipe::duplex b = pipe::duplex::open(me, next_of(me), previous_of(me), options, deadline);

  EXPECT_EQ(a.out.rmalloc(0).status, pipe_status::zero_size);
  EXPECT_EQ(a.out.rmalloc(options.heap_bytes).status, pipe_status::too_large);
  // The width (8) runs out before the heap: nothing is read on the other side yet.
  std::vector<pipe::rbuffer> held;
  for (int i = 0; i < 8; ++i) {
    pipe::reservation r = a.out.rmalloc(1000);
    ASSERT_TRUE(r) << i << ": " << pipe::to_string(r.status);
    held.push_back(r.buffer);
  }
  EXPECT_EQ(a.out.rmalloc(8).status, pipe_status::exhausted);
  EXPECT_EQ(a.out.rmalloc(8, fabric::deadline_clock::now() + std::chrono::milliseconds(20)).status,
            pipe_status::exhausted);
  EXPECT_EQ(a.out.live_buffers(), 8u);
  // A buffer of pipe b handed to pipe a's writer, and a forged one.
  pipe::reservation other = b.out.rmalloc(64);
  ASSERT_TRUE(other);
  EXPECT_EQ(a.out.rwrite(other.buffer), pipe_status::not_owner);
  EXPECT_TRUE(a.out.rmem(other.buffer).empty());
  pipe::rbuffer forged = held[0];
  forged.size += 1;
  EXPECT_EQ(a.out.rwrite(forged), pipe_status::not_owner);
  fill(a.out.rmem(held[0]), me.id(), 0);
  EXPECT_EQ(a.out.rwrite(held[0]), pipe_status::ok);
  EXPECT_EQ(a.out.rwrite(held[0]), pipe_status::stale);  // written already
  EXPECT_TRUE(a.out.rmem(held[0]).empty());

  pipe::read_result got = a.in.rread(deadline);
  ASSERT_TRUE(got) << pipe::to_string(got.status);
  EXPECT_TRUE(matches(a.in.rmem(got.buffer), previous_of(me), 0));
  EXPECT_EQ(a.in.rread().status, pipe_status::empty);
  EXPECT_EQ(b.in.rfree(got.buffer), pipe_status::not_owner);
  EXPECT_EQ(a.in.rfree(got.buffer), pipe_status::ok);
  EXPECT_EQ(a.in.rfree(got.buffer), pipe_status::stale);  // freed already
  EXPECT_TRUE(a.in.rmem(got.buffer).empty());
  a.in.flush_releases();

  me.quiesce(phase_deadline);
  a.out.close();
  a.out.close();  // idempotent
  EXPECT_EQ(a.out.rmalloc(8).status, pipe_status::closed);
  EXPECT_EQ(a.out.rwrite(held[1]), pipe_status::closed);
  // The writer before closed after one write: that was read, so the stream has ended.
  EXPECT_EQ(a.in.rread(deadline).status, pipe_status::closed);
  a.in.close();
  EXPECT_EQ(a.in.rread().status, pipe_status::closed);
  me.quiesce(phase_deadline);
}

// Next fit publishes in allocation order (a buffer written early waits for the older ones); the
// other policies in write order. A buffer may be written shorter than its room.
void write_orders(thread_context& me, fit_policy fit) {
  pipe::pipe_options options;
  options.fit = fit;
  const auto deadline = fabric::deadline_clock::now() + phase_deadline;
  pipe::duplex ends = pipe::duplex::open(me, next_of(me), previous_of(me), options, deadline);
  pipe::reservation a = ends.out.rmalloc(100), b = ends.out.rmalloc(200), c = ends.out.rmalloc(50);
  ASSERT_TRUE(a && b && c);
  fill(ends.out.rmem(a.buffer), me.id(), 0);
  fill(ends.out.rmem(b.buffer), me.id(), 1);
  fill(ends.out.rmem(c.buffer), me.id(), 2);
  EXPECT_EQ(ends.out.rwrite(a.buffer, 0), pipe_status::not_owner);
  EXPECT_EQ(ends.out.rwrite(a.buffer, 101), pipe_status::not_owner);
  ASSERT_EQ(ends.out.rwrite(c.buffer), pipe_status::ok);  // next fit: queued behind a and b
  ASSERT_EQ(ends.out.rwrite(a.buffer, 10), pipe_status::ok);
  EXPECT_EQ(ends.out.rwrite(c.buffer), pipe_status::stale);
  me.quiesce(phase_deadline);

  const bool in_allocation_order = fit == fit_policy::next_fit;
  auto expect_next = [&](std::uint64_t sequence, std::size_t size) {
    pipe::read_result got = ends.in.rread(deadline);
    ASSERT_TRUE(got) << pipe::to_string(got.status);
    EXPECT_EQ(got.buffer.size, size) << "buffer " << sequence;
    EXPECT_TRUE(matches(ends.in.rmem(got.buffer), previous_of(me), sequence));
    EXPECT_EQ(ends.in.rfree(got.buffer), pipe_status::ok);
  };
  if (in_allocation_order) {
    expect_next(0, 10);
    EXPECT_EQ(ends.in.rread().status, pipe_status::empty);  // c waits for b
  } else {
    expect_next(2, 50);
    expect_next(0, 10);
  }
  me.quiesce(phase_deadline);
  ASSERT_EQ(ends.out.rwrite(b.buffer), pipe_status::ok);
  expect_next(1, 200);
  if (in_allocation_order) expect_next(2, 50);
  EXPECT_EQ(ends.in.rread().status, pipe_status::empty);
  EXPECT_EQ(ends.out.counters().buffers, 3u);
  EXPECT_EQ(ends.out.counters().bytes, 260u);
  EXPECT_EQ(ends.in.counters().buffers, 3u);
  me.quiesce(phase_deadline);
}

TEST(Pipe, NextFitReadsInAllocationOrderTheOthersInWriteOrder) {
  for (fit_policy fit : {fit_policy::next_fit, fit_policy::best_fit}) {
    test::rt().run([&](thread_context& me) { write_orders(me, fit); });
  }
}

// The pull direction: every worker stages and posts irregular buffers to the next, and pulls
// those of the previous into its own memory (rget, or rget_async driven by the thread's polls),
// in one loop; then the end of the stream.
void pull_ring(thread_context& me, fit_policy fit, pipe::write_protocol protocol, bool by_future) {
  pipe::pipe_options options;
  options.fit = fit;
  options.protocol = protocol;
  options.heap_bytes = 4096;
  options.pull_heap_bytes = 256 * 1024;
  options.width = 16;
  const auto deadline = fabric::deadline_clock::now() + phase_deadline;
  pipe::duplex ends = pipe::duplex::open(me, next_of(me), previous_of(me), options, deadline);
  constexpr std::uint64_t count = 150;
  size_stream sizes_out(7000 + me.id(), 32 * 1024), sizes_in(7000 + previous_of(me), 32 * 1024);
  std::vector<std::byte> into(32 * 1024);
  std::uint64_t posted = 0, pulled = 0;
  std::size_t pending_size = sizes_out.next();
  pipe_status last = pipe_status::ok;
  std::optional<invoke::future<pipe::get_result>> pulling;
  while (posted < count || last != pipe_status::closed) {
    ASSERT_LT(fabric::deadline_clock::now(), deadline) << "posted " << posted << " pulled " << pulled;
    if (posted < count) {
      pipe::reservation r = ends.out.rstage(pending_size);
      if (r) {
        fill(ends.out.rmem(r.buffer), me.id(), posted);
        ASSERT_EQ(ends.out.rpost(r.buffer), pipe_status::ok);
        if (++posted < count) pending_size = sizes_out.next();
        if (posted == count) ends.out.close();
      } else {
        ASSERT_EQ(r.status, pipe_status::exhausted);
      }
    }
    pipe::get_result got;
    if (by_future) {
      if (!pulling) pulling.emplace(ends.in.rget_async(into, deadline));
      if (!pulling->ready()) {
        (void)me.poll();
        continue;
      }
      got = pulling->get();
      pulling.reset();
    } else {
      got = ends.in.rget(into);
    }
    last = got.status;
    if (!got) {
      ASSERT_TRUE(last == pipe_status::empty || last == pipe_status::closed) << pipe::to_string(last);
      continue;
    }
    ASSERT_EQ(got.size, sizes_in.next()) << "post " << pulled;
    ASSERT_TRUE(matches(std::span(into).first(got.size), previous_of(me), pulled)) << pulled;
    ++pulled;
  }
  EXPECT_EQ(pulled, count);
  me.quiesce(phase_deadline);
}

TEST(Pipe, PullDirectionDeliversInPostOrder) {
  for (fit_policy fit : {fit_policy::next_fit, fit_policy::best_fit}) {
    for (auto protocol : {pipe::write_protocol::automatic, pipe::write_protocol::data_then_flag}) {
      // Half of them pull through rget_async.
      const bool by_future =
          (fit == fit_policy::best_fit) != (protocol == pipe::write_protocol::automatic);
      test::rt().run([&](thread_context& me) { pull_ring(me, fit, protocol, by_future); });
    }
  }
}

TEST(Pipe, PullRefusals) {
  test::rt().run([&](thread_context& me) {
    pipe::pipe_options options;
    options.pull_heap_bytes = 64 * 1024;
    const auto deadline = fabric::deadline_clock::now() + phase_deadline;
    pipe::duplex ends = pipe::duplex::open(me, next_of(me), previous_of(me), options, deadline);
    EXPECT_EQ(ends.out.rstage(0).status, pipe_status::zero_size);
    EXPECT_EQ(ends.out.rstage(options.pull_heap_bytes).status, pipe_status::too_large);
    pipe::reservation staged = ends.out.rstage(1000);
    pipe::reservation pushed = ends.out.rmalloc(8);
    ASSERT_TRUE(staged && pushed);
    EXPECT_EQ(ends.out.rpost(pushed.buffer), pipe_status::not_owner);
    EXPECT_EQ(ends.out.rwrite(staged.buffer), pipe_status::not_owner);
    fill(ends.out.rmem(staged.buffer), me.id(), 9);
    ASSERT_EQ(ends.out.rpost(staged.buffer), pipe_status::ok);
    EXPECT_EQ(ends.out.rpost(staged.buffer), pipe_status::stale);
    std::vector<std::byte> small(999), enough(1000);
    pipe::get_result got;
    {
      const auto until = fabric::deadline_clock::now() + phase_deadline;
      me.wait_until([&] { return (got = ends.in.rget(small)).status != pipe_status::empty; }, until);
    }
    EXPECT_EQ(got.status, pipe_status::too_large);
    EXPECT_EQ(got.size, 1000u);
    got = ends.in.rget(enough, deadline);  // nothing was consumed by the refusal
    ASSERT_TRUE(got) << pipe::to_string(got.status);
    EXPECT_TRUE(matches(enough, previous_of(me), 9));
    // Nothing more is posted: the future ends by its deadline; on a pipe without a pull heap
    // it ends closed at once.
    const auto soon = fabric::deadline_clock::now() + std::chrono::milliseconds(50);
    EXPECT_EQ(ends.in.rget_async(enough, soon).get().status, pipe_status::deadline_exceeded);
    pipe::duplex plain = pipe::duplex::open(me, next_of(me), previous_of(me), {}, deadline);
    EXPECT_EQ(plain.out.rstage(8).status, pipe_status::closed);  // opened without a pull heap
    EXPECT_EQ(plain.in.rget(enough).status, pipe_status::closed);
    EXPECT_EQ(plain.in.rget_async(enough, deadline).get().status, pipe_status::closed);
    me.quiesce(phase_deadline);
  });
}

// The waits as futures: rread_async made before the write it waits for, rmalloc_async, a then
// chain, the deadline, an end closed under a pending future.
void futures_of_waits(thread_context& me) {
  pipe::pipe_options options;
  options.width = 2;
  const auto deadline = fabric::deadline_clock::now() + phase_deadline;
  pipe::duplex ends = pipe::duplex::open(me, next_of(me), previous_of(me), options, deadline);
  invoke::future<pipe::read_result> next = ends.in.rread_async(deadline);
  pipe::reservation r = ends.out.rmalloc_async(100, deadline).get();
  ASSERT_TRUE(r) << pipe::to_string(r.status);
  fill(ends.out.rmem(r.buffer), me.id(), 0);
  ASSERT_EQ(ends.out.rwrite(r.buffer), pipe_status::ok);
  const pipe::read_result got = next.get();
  ASSERT_TRUE(got) << pipe::to_string(got.status);
  EXPECT_TRUE(matches(ends.in.rmem(got.buffer), previous_of(me), 0));
  // Nothing more is written: the deadline ends the wait, through a continuation.
  const auto soon = fabric::deadline_clock::now() + std::chrono::milliseconds(50);
  EXPECT_EQ(ends.in.rread_async(soon).then([](pipe::read_result x) { return x.status; }).get(),
            pipe_status::deadline_exceeded);
  // The width (2) is full while the buffer above is not freed and a second one is held.
  ASSERT_TRUE(ends.out.rmalloc(8));
  EXPECT_EQ(ends.out.rmalloc_async(8, soon).get().status, pipe_status::exhausted);
  me.quiesce(phase_deadline);
  invoke::future<pipe::read_result> orphan = ends.in.rread_async(deadline);
  ends.in.close();
  EXPECT_EQ(orphan.get().status, pipe_status::closed);
  me.quiesce(phase_deadline);
}

TEST(Pipe, FuturesOfTheWaits) {
  test::rt().run([&](thread_context& me) { futures_of_waits(me); });
}

TEST(Pipe, EveryRefusalLeavesThePipeUsable) {
  test::rt().run([&](thread_context& me) { refusals(me); });
}

TEST(Pipe, OpenRefusesOptionsThatDisagreeAndBadOnes) {
  test::rt().run([&](thread_context& me) {
    pipe::pipe_options mine;
    mine.width = me.id() == 0 ? 32 : 64;  // thread 0 and its neighbours disagree
    const auto deadline = fabric::deadline_clock::now() + phase_deadline;
    const bool disagrees = me.id() == 0 || next_of(me) == 0 || previous_of(me) == 0;
    if (disagrees) {
      EXPECT_THROW((void)pipe::duplex::open(me, next_of(me), previous_of(me), mine, deadline),
                   error);
    } else {
      EXPECT_NO_THROW((void)pipe::duplex::open(me, next_of(me), previous_of(me), mine, deadline));
    }
    pipe::pipe_options bad;
    bad.width = 48;  // not a power of two
    EXPECT_THROW((void)pipe::writer::open(me, next_of(me), bad, deadline), config_error);
    bad = {};
    bad.heap_bytes = 2 << 20;  // with the ring, more than one allocation
    EXPECT_THROW((void)pipe::reader::open(me, previous_of(me), bad, deadline), config_error);
    EXPECT_THROW((void)pipe::writer::open(me, me.id(), {}, deadline), error);
    EXPECT_THROW((void)pipe::writer::open(me, me.thread_count() + 5, {}, deadline), error);
    me.quiesce(phase_deadline);
  });
}

TEST(Pipe, AReaderThatComesLateFindsTheWriterGone) {
  test::rt().run([&](thread_context& me) {
    // Every worker's writer gives up before the next worker opens its reader.
    EXPECT_THROW((void)pipe::writer::open(me, next_of(me), {},
                                          fabric::deadline_clock::now() +
                                              std::chrono::milliseconds(100)),
                 deadline_error);
    me.quiesce(phase_deadline);
    pipe::reader late = pipe::reader::open(me, previous_of(me), {},
                                           fabric::deadline_clock::now() + phase_deadline);
    EXPECT_EQ(late.rread(fabric::deadline_clock::now() + phase_deadline).status,
              pipe_status::closed);
    me.quiesce(phase_deadline);
  });
}

}  // namespace

int main(int argc, char** argv) { return seriema::test::run_all_tests(argc, argv); }

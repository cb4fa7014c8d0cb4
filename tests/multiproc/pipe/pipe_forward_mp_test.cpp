// Redirection and reduction pipes across the worker threads of one or several processes: a buffer
// forwarded around a ring of workers (in place to a next hop on the same machine, copied to one
// elsewhere), checked byte for byte where it started, with the counters saying which way each
// hop went and every forwarded buffer coming back to its heap; and k writers reduced into one
// reader element by element, every round checked against the sum computed here, a round whose
// contributions differ in size refused.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/pipe/pipe.hpp>
#include <vector>

#include "ring.hpp"
#include "support/mp_main.hpp"

using namespace seriema;
using fabric::thread_context;
using pipe::pipe_status;

namespace {

using test::next_of;
using test::phase_deadline;
using test::previous_of;

// Size of buffer `sequence` of the stream: 8 B .. 8 KiB, from a seed every worker knows.
std::size_t size_of(std::uint64_t sequence) {
  std::mt19937_64 random(sequence * 7919 + 17);
  return 8 + random() % (8 * 1024 - 8);
}

std::byte content(std::uint64_t sequence, std::size_t i) {
  return static_cast<std::byte>((sequence * 31 + i * 7 + (i >> 8)) & 0xff);
}

// After every worker closed its ends: each region comes back (a lent buffer's holds it until
// then), on every worker.
void expect_no_region_kept(thread_context& me) {
  me.quiesce(phase_deadline);
  EXPECT_TRUE(me.wait_until([&] { return pipe::regions_awaiting_peers(me) == 0; },
                            fabric::deadline_clock::now() + phase_deadline))
      << pipe::regions_awaiting_peers(me) << " regions kept";
  me.quiesce(phase_deadline);
}

// Worker 0 writes `count` buffers to worker 1; every other worker forwards what it reads to the
// next (the last back to worker 0), which checks them in order. The heaps are small, so the
// stream goes on only if every forwarded buffer comes back to the heap it was written in.
void forward_ring(thread_context& me, std::uint64_t count, const pipe::pipe_options& options) {
  const auto deadline = fabric::deadline_clock::now() + phase_deadline;
  pipe::duplex ends = pipe::duplex::open(me, next_of(me), previous_of(me), options, deadline);
  const bool origin = me.id() == 0;
  const bool direct = ends.out.direct();  // (closing forgets it)
  std::uint64_t written = 0, seen = 0;
  pipe_status last = pipe_status::ok;
  while (last != pipe_status::closed) {
    ASSERT_LT(fabric::deadline_clock::now(), deadline) << "written " << written << " seen " << seen;
    if (origin && written < count) {
      const pipe::reservation r = ends.out.rmalloc(size_of(written));
      if (r) {
        std::span<std::byte> bytes = ends.out.rmem(r.buffer);
        for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = content(written, i);
        ASSERT_EQ(ends.out.rwrite(r.buffer), pipe_status::ok);
        if (++written == count) ends.out.close();
      }
    }
    const pipe::read_result got = ends.in.rread();
    last = got.status;
    if (!got) {
      ASSERT_TRUE(last == pipe_status::empty || last == pipe_status::closed)
          << pipe::to_string(last);
      continue;
    }
    ASSERT_EQ(got.buffer.size, size_of(seen)) << "buffer " << seen;
    if (origin) {
      const std::span<const std::byte> bytes = ends.in.rmem(got.buffer);
      for (std::size_t i = 0; i < bytes.size(); ++i) {
        ASSERT_EQ(bytes[i], content(seen, i)) << "buffer " << seen << " byte " << i;
      }
      ASSERT_EQ(ends.in.rfree(got.buffer), pipe_status::ok);
    } else {
      // Odd workers forward through the future (its polls try until there is room).
      const pipe_status forwarded =
          me.id() % 2 == 1 ? ends.out.rforward_async(ends.in, got.buffer, deadline).get()
                           : ends.out.rforward(ends.in, got.buffer, deadline);
      ASSERT_EQ(forwarded, pipe_status::ok) << "buffer " << seen;
      // Forwarded: the buffer is the next hop's now.
      EXPECT_EQ(ends.out.rforward(ends.in, got.buffer), pipe_status::stale);
      EXPECT_EQ(ends.in.rfree(got.buffer), pipe_status::stale);
      EXPECT_TRUE(ends.in.rmem(got.buffer).empty());
    }
    ++seen;
  }
  if (!origin) ends.out.close();
  EXPECT_EQ(seen, count);
  // A hop forwards in place when its next hop maps its memory (on this machine, over a
  // transport that maps: then the pipe is direct) and the buffer lies in its own heap (one
  // forwarded to it in place is copied on).
  const std::uint64_t redirected = ends.in.counters().redirected;
  EXPECT_TRUE(redirected == 0 || redirected == count) << redirected;
  if (!origin) {
    const bool in_place = direct && redirected == 0;
    EXPECT_EQ(ends.out.counters().forwarded, in_place ? count : 0);
  }
  if (me.id() == 1) {
    EXPECT_EQ(redirected, 0u);  // worker 0 writes, never forwards
  }
  EXPECT_EQ(ends.in.counters().rejected_slots, 0u);
  EXPECT_EQ(ends.out.counters().rejected_releases, 0u);
  ends.out.close();
  ends.in.close();
  expect_no_region_kept(me);
}

TEST(PipeForward, BuffersGoRoundTheRingInPlaceOrCopied) {
  for (transfer::fit_policy fit : {transfer::fit_policy::next_fit, transfer::fit_policy::best_fit}) {
    pipe::pipe_options options;
    options.fit = fit;
    options.heap_bytes = 48 * 1024;  // a few buffers: the heaps wrap many times
    options.width = 16;
    test::rt().run([&](thread_context& me) { forward_ring(me, 400, options); });
  }
}

TEST(PipeForward, RefusesBuffersThatAreNotLiveInTheSource) {
  test::rt().run([&](thread_context& me) {
    const auto deadline = fabric::deadline_clock::now() + phase_deadline;
    pipe::duplex a = pipe::duplex::open(me, next_of(me), previous_of(me), {}, deadline);
    pipe::duplex b = pipe::duplex::open(me, next_of(me), previous_of(me), {}, deadline);
    const pipe::reservation r = a.out.rmalloc(64);
    ASSERT_TRUE(r);
    std::memset(a.out.rmem(r.buffer).data(), 1, 64);
    ASSERT_EQ(a.out.rwrite(r.buffer), pipe_status::ok);
    const pipe::read_result got = a.in.rread(deadline);
    ASSERT_TRUE(got) << pipe::to_string(got.status);
    EXPECT_EQ(b.out.rforward(b.in, got.buffer), pipe_status::not_owner);  // a's, not b's
    pipe::rbuffer forged = got.buffer;
    forged.offset += 64;
    EXPECT_EQ(b.out.rforward(a.in, forged), pipe_status::stale);
    ASSERT_EQ(a.in.rfree(got.buffer), pipe_status::ok);
    EXPECT_EQ(b.out.rforward(a.in, got.buffer), pipe_status::stale);  // freed already
    b.out.close();
    const pipe::read_result more = a.in.rread();  // nothing else was written
    EXPECT_EQ(more.status, pipe_status::empty);
    me.quiesce(phase_deadline);
  });
}

// A buffer forwarded in place outlives the pipe it came from: worker 1 forwards worker 0's
// buffer to worker 2, then both ends of the pipe 0 -> 1 close and worker 1 opens and closes more
// pipes (fresh regions, which must not reuse the held one); worker 2 then reads the buffer intact.
// Once it freed it, no region is kept anywhere.
void forward_outlives_its_pipe(thread_context& me) {
  const auto deadline = fabric::deadline_clock::now() + phase_deadline;
  constexpr std::size_t size = 3000;
  std::optional<pipe::writer> out;
  std::optional<pipe::reader> in;
  if (me.id() == 0) out = pipe::writer::open(me, 1, {}, deadline);
  if (me.id() == 1) in = pipe::reader::open(me, 0, {}, deadline);
  std::optional<pipe::writer> onward;
  std::optional<pipe::reader> last;
  if (me.id() == 1) onward = pipe::writer::open(me, 2, {}, deadline);
  if (me.id() == 2) last = pipe::reader::open(me, 1, {}, deadline);
  if (me.id() == 0) {
    const pipe::reservation r = out->rmalloc(size, deadline);
    ASSERT_TRUE(r);
    std::span<std::byte> bytes = out->rmem(r.buffer);
    for (std::size_t i = 0; i < size; ++i) bytes[i] = content(77, i);
    ASSERT_EQ(out->rwrite(r.buffer), pipe_status::ok);
    out->close();
  }
  if (me.id() == 1) {
    const pipe::read_result got = in->rread(deadline);
    ASSERT_TRUE(got) << pipe::to_string(got.status);
    ASSERT_EQ(onward->rforward(*in, got.buffer, deadline), pipe_status::ok);
    in->close();
  }
  me.quiesce(phase_deadline);
  for (int round = 0; round < 4; ++round) {  // fresh regions on every worker
    pipe::duplex churn = pipe::duplex::open(me, next_of(me), previous_of(me), {}, deadline);
    const pipe::reservation r = churn.out.rmalloc(size, deadline);
    ASSERT_TRUE(r);
    std::memset(churn.out.rmem(r.buffer).data(), 0xee, size);
    ASSERT_EQ(churn.out.rwrite(r.buffer), pipe_status::ok);
    const pipe::read_result got = churn.in.rread(deadline);
    ASSERT_TRUE(got) << pipe::to_string(got.status);
    me.quiesce(phase_deadline);
  }
  if (me.id() == 2) {
    const pipe::read_result got = last->rread(deadline);
    ASSERT_TRUE(got) << pipe::to_string(got.status);
    const std::span<const std::byte> bytes = last->rmem(got.buffer);
    ASSERT_EQ(bytes.size(), size);
    for (std::size_t i = 0; i < size; ++i) ASSERT_EQ(bytes[i], content(77, i)) << "byte " << i;
    ASSERT_EQ(last->rfree(got.buffer), pipe_status::ok);
    last->close();
  }
  if (me.id() == 1) onward->close();
  expect_no_region_kept(me);
}

TEST(PipeForward, AForwardedBufferOutlivesThePipeItCameFrom) {
  test::rt().run([&](thread_context& me) { forward_outlives_its_pipe(me); });
}

// Round r of writer w: size_of(r) / 8 values (writer, round, index).
std::int64_t contribution(std::uint64_t writer, std::uint64_t round, std::size_t i) {
  return static_cast<std::int64_t>(writer * 1'000'003 + round * 1009 + i) * (writer % 2 ? -1 : 1);
}

// Worker 0 reduces every other worker's rounds (odd ones through rreduce_async); round
// `bad_round` of the last writer is one element short, so that round is refused as a whole.
void reduce_rounds(thread_context& me, std::uint64_t rounds, std::uint64_t bad_round) {
  const auto deadline = fabric::deadline_clock::now() + phase_deadline;
  const fabric::thread_id last = me.thread_count() - 1;
  if (me.id() != 0) {
    pipe::writer out = pipe::writer::open(me, 0, {}, deadline);
    for (std::uint64_t round = 0; round < rounds; ++round) {
      std::size_t n = size_of(round) / 8 + 1;
      if (round == bad_round && me.id() == last && last > 1) --n;  // (one writer: no mismatch)
      const pipe::reservation r = out.rmalloc(n * 8, deadline);
      ASSERT_TRUE(r) << pipe::to_string(r.status);
      auto* values = reinterpret_cast<std::int64_t*>(out.rmem(r.buffer).data());
      for (std::size_t i = 0; i < n; ++i) values[i] = contribution(me.id(), round, i);
      ASSERT_EQ(out.rwrite(r.buffer), pipe_status::ok);
    }
    out.close();
    me.quiesce(phase_deadline);
    return;
  }
  std::vector<fabric::thread_id> writers;
  for (fabric::thread_id w = 1; w < me.thread_count(); ++w) writers.push_back(w);
  pipe::reduction_reader sum = pipe::reduction_reader::open(me, writers, {}, deadline);
  for (std::uint64_t round = 0; round < rounds; ++round) {
    // Odd rounds through the future.
    const pipe::read_result got =
        round % 2 == 1 ? sum.rreduce_async<std::int64_t>(std::plus<>{}, deadline).get()
                       : sum.rreduce<std::int64_t>(std::plus<>{}, deadline);
    if (round == bad_round && writers.size() > 1) {
      ASSERT_EQ(got.status, pipe_status::mismatch);
      continue;
    }
    ASSERT_TRUE(got) << pipe::to_string(got.status) << " in round " << round;
    const std::size_t n = size_of(round) / 8 + 1;
    ASSERT_EQ(got.buffer.size, n * 8);
    const auto* values = reinterpret_cast<const std::int64_t*>(sum.rmem(got.buffer).data());
    for (std::size_t i = 0; i < n; ++i) {
      std::int64_t expected = 0;
      for (fabric::thread_id w : writers) expected += contribution(w, round, i);
      ASSERT_EQ(values[i], expected) << "round " << round << " element " << i;
    }
    ASSERT_EQ(sum.rfree(got.buffer), pipe_status::ok);
  }
  EXPECT_EQ(sum.rreduce<std::int64_t>(std::plus<>{}, deadline).status, pipe_status::closed);
  EXPECT_EQ(sum.rreduce<std::int64_t>(std::plus<>{}).status, pipe_status::closed);
  EXPECT_EQ(sum.rreduce_async<std::int64_t>(std::plus<>{}, deadline).get().status,
            pipe_status::closed);
  for (std::size_t w = 0; w < sum.writers(); ++w) {
    EXPECT_EQ(sum.end(w).counters().buffers, rounds);
  }
  sum.close();
  me.quiesce(phase_deadline);
}

TEST(PipeReduction, RoundsAreCombinedInPlaceAndMismatchesRefused) {
  test::rt().run([&](thread_context& me) { reduce_rounds(me, 300, 57); });
}

TEST(PipeReduction, OpenRefusesNoWriters) {
  test::rt().run([&](thread_context& me) {
    EXPECT_THROW((void)pipe::reduction_reader::open(me, {}), config_error);
    me.quiesce(phase_deadline);
  });
}

}  // namespace

int main(int argc, char** argv) { return seriema::test::run_all_tests(argc, argv); }

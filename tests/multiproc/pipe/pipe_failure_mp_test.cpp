// Pipes whose peer dies or stalls: 3 processes x 1 thread, pipes 0 -> 1 (next fit), 1 -> 2 (best
// fit) and 0 -> 2 (live). After some traffic rank 1 kills itself ("dead") or stops ("stalled").
// Dead: rank 0's writer to it ends rmalloc (waiting for room), rmalloc and rwrite with
// peer_failed; rank 2 reads what rank 1 published before dying, then its rread ends peer_failed;
// both within keepalive + 1 s of the death; the pipe 0 -> 2 goes on; closing the dead pipes'
// ends keeps no region. Stalled: rank 2's rread and rank 0's rmalloc given deadlines end by them
// (deadline_exceeded, exhausted); rank 0 then kills rank 1. Dead also forwards: rank 2 forwards
// the buffers of a pipe 0 -> 2 to rank 1 (in place when it maps rank 2's memory), which reads
// them and dies holding them; they come back to rank 0's heap (its next writes need the room)
// and rank 2's next rforward to rank 1 ends peer_failed. Run by pipe_failure_test.sh under
// seriema-run --on-failure wait.
#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <optional>
#include <seriema/fabric/runtime.hpp>
#include <seriema/pipe/pipe.hpp>
#include <signal.h>
#include <string>
#include <thread>
#include <unistd.h>

#include "support/broken_job.hpp"
#include "support/report_failure.hpp"

using namespace seriema;
using fabric::thread_context;
using pipe::pipe_status;
using test::fail;

namespace {

constexpr std::uint64_t before_death = 5;  // buffers rank 1 writes to rank 2 before it goes
constexpr auto open_deadline = std::chrono::seconds(30);

pipe::pipe_options small(transfer::fit_policy fit) {
  pipe::pipe_options o;
  o.heap_bytes = 64 * 1024;
  o.width = 8;
  o.fit = fit;
  return o;
}

// The forwarded stream: a heap of 16 KiB holds only these three 4 KiB buffers.
constexpr std::uint64_t forwarded_count = 3;
pipe::pipe_options forward_options() {
  pipe::pipe_options o;
  o.heap_bytes = 16 * 1024;
  o.width = 4;
  return o;
}

void write_forwarded(pipe::writer& out, std::uint64_t first) {
  for (std::uint64_t i = first; i < first + forwarded_count; ++i) {
    pipe::reservation r = out.rmalloc(4096, fabric::deadline_clock::now() + open_deadline);
    if (!r) return fail("rank 0: forwarded stream: rmalloc {}: '{}'", i, pipe::to_string(r.status));
    std::memset(out.rmem(r.buffer).data(), static_cast<int>(i + 1), 4096);
    if (out.rwrite(r.buffer) != pipe_status::ok) return fail("rank 0: forwarded stream: rwrite");
  }
}

// Rank 2 forwards the first three buffers of rank 0's stream to rank 1, which dies holding them.
void forward_to_doomed(pipe::reader& in, pipe::writer& out) {
  for (std::uint64_t i = 0; i < forwarded_count; ++i) {
    const auto deadline = fabric::deadline_clock::now() + open_deadline;
    const pipe::read_result r = in.rread(deadline);
    if (!r) return fail("rank 2: forwarded stream: rread {}: '{}'", i, pipe::to_string(r.status));
    if (const auto st = out.rforward(in, r.buffer, deadline); st != pipe_status::ok) {
      return fail("rank 2: rforward {} to rank 1: '{}'", i, pipe::to_string(st));
    }
  }
}

// Rank 2, once rank 1 is dead: rank 0's next three buffers came (they needed the room of the
// forwarded ones), and a forward to the dead rank is refused.
void forwards_after_death(pipe::reader& in, pipe::writer& out) {
  for (std::uint64_t i = forwarded_count; i < 2 * forwarded_count; ++i) {
    const pipe::read_result r = in.rread(fabric::deadline_clock::now() + open_deadline);
    if (!r || in.rmem(r.buffer)[4095] != static_cast<std::byte>(i + 1)) {
      return fail("rank 2: forwarded stream: buffer {} after the death: '{}'", i,
                  pipe::to_string(r.status));
    }
    if (i + 1 < 2 * forwarded_count) {
      (void)in.rfree(r.buffer);
      continue;
    }
    const pipe_status st = out.rforward(in, r.buffer);
    if (st != pipe_status::peer_failed) {
      fail("rank 2: rforward to the dead rank 1: '{}'", pipe::to_string(st));
    }
    if (in.rfree(r.buffer) != pipe_status::ok) fail("rank 2: the refused forward kept the buffer");
    fmt::print("rank 2: dead forward target: {} buffer(s) forwarded in place came back; rforward "
               "ended {}\n",
               out.counters().forwarded, pipe::to_string(st));
  }
}

double seconds_since(const std::string& death_file) {
  double died = 0;
  std::ifstream(death_file) >> died;
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return died > 0 ? now - died : -1;
}

// Rank 0: its writer to the dead rank 1 fills the heap, then waits for room: the wait ends
// peer_failed once rank 1 is known dead; rmalloc and rwrite are then refused. Its live pipe to
// rank 2 carries 10 buffers.
void writer_side(pipe::writer& to_dead, pipe::writer& to_live,
                 const std::string& death_file) {
  pipe::rbuffer held{};
  for (;;) {
    pipe::reservation r = to_dead.rmalloc(4096);
    if (!r) break;
    held = r.buffer;
  }
  const pipe::reservation waited = to_dead.rmalloc(
      4096, fabric::deadline_clock::now() + std::chrono::seconds(30));
  const double after = seconds_since(death_file);
  if (waited.status != pipe_status::peer_failed) {
    fail("rank 0: rmalloc waiting on the dead reader ended '{}'", pipe::to_string(waited.status));
  }
  if (const auto st = to_dead.rmalloc(8).status; st != pipe_status::peer_failed) {
    fail("rank 0: rmalloc after the death: '{}'", pipe::to_string(st));
  }
  // (Nothing was allocated when the death was known before the heap filled.)
  if (const auto st = to_dead.rwrite(held); held.end != 0 && st != pipe_status::peer_failed) {
    fail("rank 0: rwrite after the death: '{}'", pipe::to_string(st));
  }
  for (std::uint64_t i = 0; i < 10; ++i) {
    pipe::reservation r = to_live.rmalloc(64, fabric::deadline_clock::now() + open_deadline);
    if (!r) return fail("rank 0: live rmalloc: '{}'", pipe::to_string(r.status));
    std::memcpy(to_live.rmem(r.buffer).data(), &i, sizeof i);
    if (to_live.rwrite(r.buffer) != pipe_status::ok) return fail("rank 0: live rwrite");
  }
  fmt::print("rank 0: dead reader: rmalloc ended {} {:.2f} s after the death\n",
             pipe::to_string(waited.status), after);
}

// Rank 2: reads what rank 1 published before it died, then rread ends peer_failed; its live
// pipe from rank 0 still delivers every buffer in order.
void reader_side(pipe::reader& from_dead, pipe::reader& from_live,
                 const std::string& death_file) {
  std::uint64_t got = 0;
  pipe::read_result r;
  while ((r = from_dead.rread(fabric::deadline_clock::now() + std::chrono::seconds(30)))) {
    ++got;
    (void)from_dead.rfree(r.buffer);
  }
  const double after = seconds_since(death_file);
  if (r.status != pipe_status::peer_failed) {
    fail("rank 2: rread from the dead writer ended '{}'", pipe::to_string(r.status));
  }
  if (got != before_death) fail("rank 2: read {} of the {} buffers written", got, before_death);
  for (std::uint64_t i = 0; i < 10; ++i) {
    pipe::read_result live = from_live.rread(fabric::deadline_clock::now() + open_deadline);
    std::uint64_t value = ~0ull;
    if (live) std::memcpy(&value, from_live.rmem(live.buffer).data(), sizeof value);
    if (!live || value != i) return fail("rank 2: live buffer {} lost or wrong", i);
    (void)from_live.rfree(live.buffer);
  }
  fmt::print("rank 2: dead writer: rread ended {} {:.2f} s after the death, after {} buffers\n",
             pipe::to_string(r.status), after, got);
}

// Stalled rank 1: the waits end by their deadlines. Then rank 2 says it is done and rank 0 kills
// rank 1, so that run()'s end fails at once instead of waiting for a stopped rank.
void stalled_side(thread_context& me, pipe::writer* to_stalled, pipe::reader* from_stalled,
                  const std::string& marker) {
  const auto soon = [] { return fabric::deadline_clock::now() + std::chrono::milliseconds(300); };
  if (to_stalled != nullptr) {
    while (to_stalled->rmalloc(4096)) {
    }
    const auto st = to_stalled->rmalloc(4096, soon()).status;
    if (st != pipe_status::exhausted) fail("rank 0: rmalloc on a stalled reader: '{}'",
                                           pipe::to_string(st));
    fmt::print("rank 0: stalled reader: rmalloc ended {}\n", pipe::to_string(st));
  } else {
    pipe::read_result r;
    while ((r = from_stalled->rread(soon()))) (void)from_stalled->rfree(r.buffer);
    if (r.status != pipe_status::deadline_exceeded) {
      fail("rank 2: rread from a stalled writer: '{}'", pipe::to_string(r.status));
    }
    fmt::print("rank 2: stalled writer: rread ended {}\n", pipe::to_string(r.status));
  }
  test::kill_stalled_rank1(static_cast<int>(me.id()), marker + ".rank2-checked",
                           marker + ".rank1-pid");
}

void body(thread_context& me, bool stalled, const std::string& marker) {
  const auto deadline = fabric::deadline_clock::now() + open_deadline;
  const std::string death_file = marker + ".death";
  if (me.id() == 1) {
    pipe::reader in = pipe::reader::open(me, 0, small(transfer::fit_policy::next_fit), deadline);
    pipe::writer out = pipe::writer::open(me, 2, small(transfer::fit_policy::best_fit), deadline);
    for (std::uint64_t i = 0; i < before_death; ++i) {
      pipe::reservation r = out.rmalloc(100, deadline);
      if (!r || out.rwrite(r.buffer) != pipe_status::ok) fail("rank 1: a write before its end");
    }
    std::optional<pipe::reader> forwarded;
    if (!stalled) {  // reads the forwarded buffers and dies holding them (its end open)
      forwarded = pipe::reader::open(me, 2, forward_options(), deadline);
      for (std::uint64_t i = 0; i < forwarded_count; ++i) {
        const pipe::read_result r = forwarded->rread(deadline);
        if (!r || forwarded->rmem(r.buffer)[0] != static_cast<std::byte>(i + 1)) {
          fail("rank 1: forwarded buffer {}: '{}'", i, pipe::to_string(r.status));
        }
      }
    }
    me.flush_endpoints();
    if (stalled) {
      std::ofstream(marker + ".rank1-pid") << ::getpid() << "\n";
      std::raise(SIGSTOP);
    }
    std::ofstream(death_file) << fmt::format(
        "{:.6f}\n",
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
    std::raise(SIGKILL);
  }
  if (me.id() == 0) {
    pipe::writer to_1 = pipe::writer::open(me, 1, small(transfer::fit_policy::next_fit), deadline);
    pipe::writer to_2 = pipe::writer::open(me, 2, {}, deadline);
    if (stalled) {
      stalled_side(me, &to_1, nullptr, marker);
    } else {
      pipe::writer forwarded = pipe::writer::open(me, 2, forward_options(), deadline);
      write_forwarded(forwarded, 0);
      writer_side(to_1, to_2, death_file);
      write_forwarded(forwarded, forwarded_count);  // needs the room of the forwarded ones
      fmt::print("rank 0: dead forward target: the forwarded buffers came back\n");
    }
    to_1.close();
    to_2.close();
  } else {
    pipe::reader from_1 =
        pipe::reader::open(me, 1, small(transfer::fit_policy::best_fit), deadline);
    pipe::reader from_0 = pipe::reader::open(me, 0, {}, deadline);
    if (stalled) {
      stalled_side(me, nullptr, &from_1, marker);
    } else {
      pipe::reader forwarded_in = pipe::reader::open(me, 0, forward_options(), deadline);
      pipe::writer forwarded_out = pipe::writer::open(me, 1, forward_options(), deadline);
      forward_to_doomed(forwarded_in, forwarded_out);
      reader_side(from_1, from_0, death_file);
      forwards_after_death(forwarded_in, forwarded_out);
    }
    from_1.close();
    from_0.close();
  }
  if (!stalled) {
    // The dead pipe's region is freed at once; the live one's once its peer closed too.
    const auto until = fabric::deadline_clock::now() + std::chrono::seconds(10);
    me.wait_until([&] { return pipe::regions_awaiting_peers(me) == 0; }, until);
    if (const std::size_t kept = pipe::regions_awaiting_peers(me); kept != 0) {
      fail("rank {}: {} pipe region(s) still kept after every peer closed or died", me.id(), kept);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  return test::three_rank_failure_main(argc, argv, "pipe_failure_mp_test", body);
}

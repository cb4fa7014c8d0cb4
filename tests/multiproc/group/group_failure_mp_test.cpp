// A group member whose process dies or stalls mid-stream (3 ranks x 1 thread, run by
// group_failure_test.sh): all three stream messages; rank 1 dies (SIGKILL) or stops (SIGSTOP)
// after its 60th send. The survivors suspect it (a dead process at once, a silent row after
// suspect_after_ms), wedge, agree on the ragged trim and install view 1 of {0, 2}: each must
// have delivered exactly the same messages of view 0 (compared by a hash through a call, not the
// group), see rank 1's later messages nowhere, learn how many of its own were dropped (its
// ordered call among them ends not_executed), and go on delivering in the new view. Every third
// message is a large one (64 – 400 KiB, down the chain of pushes that rank 1 is part of), so the
// failure finds large messages in that chain (those not yet at both survivors are trimmed with
// the rest), and every message delivered, before or after the change, is checked intact.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <seriema/fabric/runtime.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/group/group.hpp>
#include <seriema/invoke/invoke.hpp>
#include <string>
#include <vector>

#include "support/broken_job.hpp"

using namespace seriema;
using fabric::thread_context;
using group::group_status;
using test::fail;

namespace {

constexpr std::uint64_t rank1_sends = 60;
constexpr std::uint64_t after_change = 30;
constexpr std::size_t small_size = 64;

// The size of a thread's i-th send: every third one large (above max_message), 64 KiB to 400
// KiB: several blocks of the chain.
std::size_t size_of_send(std::uint64_t i) {
  return i % 3 == 2 ? (64 << 10) + (i % 7) * (56 << 10) + i : small_size;
}
// Byte b of a thread's i-th send. Its first 8 bytes hold i: message numbers restart nowhere but
// skip the dropped sends, so the receiver learns i from the message itself.
std::byte content(fabric::thread_id thread, std::uint64_t i, std::size_t b) {
  return static_cast<std::byte>((thread * 131 + i * 31 + b * 7) & 0xff);
}
void fill_send(fabric::thread_id thread, std::uint64_t i, std::span<std::byte> room) {
  std::memcpy(room.data(), &i, sizeof i);
  for (std::size_t b = sizeof i; b < room.size(); ++b) room[b] = content(thread, i, b);
}
bool intact(const group::message& m) {
  std::uint64_t i = 0;
  if (m.payload.size() < sizeof i) return false;
  std::memcpy(&i, m.payload.data(), sizeof i);
  if (m.payload.size() != size_of_send(i)) return false;
  for (std::size_t b = sizeof i; b < m.payload.size(); ++b) {
    if (m.payload[b] != content(m.thread, i, b)) return false;
  }
  return true;
}

// What a survivor delivered: a hash of (sender, index) in order, per view.
struct seen {
  std::uint64_t hash[2] = {1469598103934665603ull, 1469598103934665603ull};
  std::uint64_t count[2] = {0, 0};
  std::uint64_t large[2] = {0, 0};
  std::uint64_t from_rank1 = 0;
};
thread_local seen log_of_thread;
thread_local std::uint32_t current_view = 0;

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void body(thread_context& me, bool stalled, const std::string& marker) {
  const auto deadline = fabric::deadline_clock::now() + std::chrono::seconds(60);
  const std::vector<fabric::thread_id> members = {0, 1, 2};
  group::group_options options;
  options.max_message = 128;
  options.window = 8;
  options.suspect_after_ms = 1000;
  options.max_large_message = 512 << 10;
  seen& log = log_of_thread;
  group::group g = group::group::create(me, members, options, deadline,
                                        [&](const group::message& m) {
                                          const std::uint32_t v = current_view;
                                          for (std::uint64_t w : {std::uint64_t{m.sender}, m.index}) {
                                            log.hash[v] = (log.hash[v] ^ w) * 1099511628211ull;
                                          }
                                          ++log.count[v];
                                          if (m.payload.size() > small_size) ++log.large[v];
                                          if (m.thread == 1) ++log.from_rank1;
                                          if (!intact(m)) {
                                            fail("rank {}: message {} of thread {} damaged",
                                                 me.id(), m.index, m.thread);
                                          }
                                          if (v == 1 && m.thread == 1) fail("rank 1 in view 1");
                                        });
  double changed_at = 0;
  group::view installed;
  std::uint64_t pushed_at_change = 0;  // large bytes this member passed on in view 0
  g.on_view_change([&](const group::view& v) {
    changed_at = seconds_now();
    installed = v;
    current_view = v.id;
    pushed_at_change = g.counters().large_pushed_bytes;
  });
  std::uint64_t sends = 0;  // this thread's sends that were accepted
  std::uint64_t large_bytes_in_view1 = 0;
  const auto fill = [&](std::span<std::byte> room) { fill_send(me.id(), sends, room); };
  const auto send = [&](bool wait) {  // waits until the deadline for room, or never
    const std::size_t n = size_of_send(sends);
    const group_status st = wait ? g.send(n, fill, deadline) : g.send(n, fill);
    if (st == group_status::ok) {
      ++sends;
      if (current_view == 1 && n > small_size) large_bytes_in_view1 += n;
    }
    return st;
  };
  if (me.id() == 1) {
    while (sends < rank1_sends) {
      if (send(true) != group_status::ok) fail("rank 1: send {}", sends);
    }
    me.flush_endpoints();
    if (stalled) {
      std::ofstream(marker + ".rank1-pid") << ::getpid() << "\n";
      std::ofstream(marker + ".death") << fmt::format("{:.6f}\n", seconds_now());
      std::raise(SIGSTOP);
    }
    std::ofstream(marker + ".death") << fmt::format("{:.6f}\n", seconds_now());
    std::raise(SIGKILL);
  }
  // Survivors: stream until the view changes (sends find the window full while it changes).
  const char* how = stalled ? "stalled" : "dead";
  auto last_call = invoke::make_ready_future(me);
  bool called = false;
  while (g.counters().views == 0) {
    if (fabric::deadline_clock::now() > deadline) fail("rank {}: no view change", me.id());
    const group_status st = send(false);
    if (st != group_status::ok && st != group_status::full) {
      fail("rank {}: send: {}", me.id(), group::to_string(st));
    }
    if (sends >= 40 && !called) {
      last_call = g.ordered_call([] {});
      called = true;
    }
    me.poll();
  }
  double died = 0;
  std::ifstream(marker + ".death") >> died;
  if (installed.members != std::vector<fabric::thread_id>{0, 2} ||
      installed.removed != std::vector<fabric::thread_id>{1}) {
    fail("rank {}: view {} has {} members", me.id(), installed.id, installed.members.size());
  }
  fmt::print("rank {}: {} view change: view {} of members 0 and 2, {:.0f} ms after rank 1 went; "
             "{} of its messages dropped, {} delivered in view 0 ({} of rank 1, {} large)\n",
             me.id(), how, installed.id, 1000 * (changed_at - died), installed.trimmed,
             log.count[0], log.from_rank1, log.large[0]);
  if (last_call.wait(deadline) == fabric::outcome::pending) fail("rank {}: call pending", me.id());
  // The new view delivers: each survivor sends after_change more.
  for (std::uint64_t i = 0; i < after_change; ++i) {
    if (send(true) != group_status::ok) fail("rank {}: send in view 1", me.id());
  }
  if (!me.wait_until([&] { return log.count[1] >= 2 * after_change; }, deadline)) {
    fail("rank {}: {} delivered in view 1 of {}", me.id(), log.count[1], 2 * after_change);
  }
  // With two members, each passes on its own large messages only (each chain ends at the
  // other), and nothing of view 0's travels again. (The case settle_large_chain exists for, a
  // relay whose successor changed, needs three survivors: this test cannot make it happen.)
  const std::uint64_t pushed_in_view1 = g.counters().large_pushed_bytes - pushed_at_change;
  if (pushed_in_view1 != large_bytes_in_view1) {
    fail("rank {}: passed on {} large bytes in view 1, sent {}", me.id(), pushed_in_view1,
         large_bytes_in_view1);
  }
  // after_change sends of each survivor hold after_change / 3 large ones, or one more.
  if (log.large[0] == 0 || log.large[1] < 2 * (after_change / 3)) {
    fail("rank {}: {} large messages delivered in view 0, {} in view 1", me.id(), log.large[0],
         log.large[1]);
  }
  // Identical view-0 prefix: rank 0 asks rank 2 (a call, not the group).
  if (me.id() == 0) {
    auto theirs = invoke::call_return(me, 2, [] {
      return std::array<std::uint64_t, 2>{log_of_thread.hash[0], log_of_thread.count[0]};
    });
    if (theirs.wait(deadline) != fabric::outcome::done) fail("rank 0: rank 2's hash");
    const auto got = theirs.get();
    if (got[0] != log.hash[0] || got[1] != log.count[0]) {
      fail("rank 0: view 0 delivered {} here, {} at rank 2, or in another order", log.count[0],
           got[1]);
    }
    fmt::print("rank 0: {} prefix: both survivors delivered the same {} messages of view 0\n", how,
               log.count[0]);
    std::ofstream(marker + ".compared") << "done\n";
  } else {
    const auto until = fabric::deadline_clock::now() + std::chrono::seconds(30);
    me.wait_until([&] { return static_cast<bool>(std::ifstream(marker + ".compared")); }, until);
  }
  g.close();
  if (stalled) {  // so that run()'s end fails at once instead of waiting for the stopped rank
    test::kill_stalled_rank1(static_cast<int>(me.id()), marker + ".rank2-checked",
                             marker + ".rank1-pid");
  }
}

}  // namespace

int main(int argc, char** argv) {
  return test::three_rank_failure_main(argc, argv, "group_failure_mp_test", body);
}

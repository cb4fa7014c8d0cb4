// A group member whose process dies or stalls mid-stream (3 ranks x 1 thread, run by
// group_failure_test.sh): all three stream messages; rank 1 dies (SIGKILL) or stops (SIGSTOP)
// after its 60th send. The survivors suspect it (a dead process at once, a silent row after
// suspect_after_ms), wedge, agree on the ragged trim and install view 1 of {0, 2}: each must
// have delivered exactly the same messages of view 0 (compared by a hash through a call, not the
// group), see rank 1's later messages nowhere, learn how many of its own were dropped (its
// ordered call among them ends not_executed), and go on delivering in the new view.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
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

// What a survivor delivered: a hash of (sender, index) in order, per view.
struct seen {
  std::uint64_t hash[2] = {1469598103934665603ull, 1469598103934665603ull};
  std::uint64_t count[2] = {0, 0};
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
  seen& log = log_of_thread;
  group::group g = group::group::create(me, members, options, deadline,
                                        [&](const group::message& m) {
                                          const std::uint32_t v = current_view;
                                          for (std::uint64_t w : {std::uint64_t{m.sender}, m.index}) {
                                            log.hash[v] = (log.hash[v] ^ w) * 1099511628211ull;
                                          }
                                          ++log.count[v];
                                          if (m.thread == 1) ++log.from_rank1;
                                          if (v == 1 && m.thread == 1) fail("rank 1 in view 1");
                                        });
  double changed_at = 0;
  group::view installed;
  g.on_view_change([&](const group::view& v) {
    changed_at = seconds_now();
    installed = v;
    current_view = v.id;
  });
  const auto fill = [&](std::span<std::byte> room) { std::memset(room.data(), int(me.id()), room.size()); };
  if (me.id() == 1) {
    for (std::uint64_t i = 0; i < rank1_sends; ++i) {
      if (g.send(64, fill, deadline) != group_status::ok) fail("rank 1: send {}", i);
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
  std::uint64_t sent = 0;
  while (g.counters().views == 0) {
    if (fabric::deadline_clock::now() > deadline) fail("rank {}: no view change", me.id());
    const group_status st = g.send(64, fill);
    if (st == group_status::ok) {
      ++sent;
    } else if (st != group_status::full) {
      fail("rank {}: send: {}", me.id(), group::to_string(st));
    }
    if (sent == 40) last_call = g.ordered_call([] {});
    me.poll();
  }
  double died = 0;
  std::ifstream(marker + ".death") >> died;
  if (installed.members != std::vector<fabric::thread_id>{0, 2} ||
      installed.removed != std::vector<fabric::thread_id>{1}) {
    fail("rank {}: view {} has {} members", me.id(), installed.id, installed.members.size());
  }
  fmt::print("rank {}: {} view change: view {} of members 0 and 2, {:.0f} ms after rank 1 went; "
             "{} of its messages dropped, {} delivered in view 0 ({} of rank 1)\n",
             me.id(), how, installed.id, 1000 * (changed_at - died), installed.trimmed,
             log.count[0], log.from_rank1);
  if (last_call.wait(deadline) == fabric::outcome::pending) fail("rank {}: call pending", me.id());
  // The new view delivers: each survivor sends after_change more.
  for (std::uint64_t i = 0; i < after_change; ++i) {
    if (g.send(64, fill, deadline) != group_status::ok) fail("rank {}: send in view 1", me.id());
  }
  if (!me.wait_until([&] { return log.count[1] >= 2 * after_change; }, deadline)) {
    fail("rank {}: {} delivered in view 1 of {}", me.id(), log.count[1], 2 * after_change);
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

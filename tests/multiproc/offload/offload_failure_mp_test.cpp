// Offload requests to a process that dies or stalls: 3 processes x 1 thread. Ranks 0 and 2 (the
// survivors) each hold an engine and memory on rank 1 and on each other; rank 1 tells them it is
// ready, then kills itself ("dead") or stops ("stalled").
// Dead: a burst of puts, gets, fetch_adds, calls and call_returns to rank 1 from a plain thread
// ends, every request, with an outcome (none pending, none past its wait's deadline) within a
// few seconds; once rank 1 is known dead every new request to it ends not_executed at once; and
// requests to the other survivor still end done.
// Stalled: requests to rank 1 end by their waits' deadline (call_returns never done; transfers
// may be done over shm, where rank 1's memory is reached without it), and the executor, whose
// sends to rank 1 wait at most transport_wait, serves the other survivor: its requests end done.
// Run by offload_failure_test.sh under seriema-run --on-failure wait.
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <fstream>
#include <map>
#include <seriema/fabric/runtime.hpp>
#include <seriema/offload/engine.hpp>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "support/broken_job.hpp"
#include "support/report_failure.hpp"

using namespace seriema;
using fabric::deadline_clock;
using fabric::outcome;
using fabric::thread_context;
using test::fail;

namespace {

std::atomic<int> allocated{0};        // rank 1: survivors that have their memory on it
std::atomic<bool> rank1_ready{false};  // survivors: rank 1 is about to die or stop
std::atomic<int> calls_here{0};

deadline_clock::time_point in(std::chrono::milliseconds d) { return deadline_clock::now() + d; }

struct burst_result {
  std::map<outcome, int> ends;  // every request's
  int returned_done = 0;        // call_returns that ended with their value
  double seconds = 0.0;
};

// Makes `rounds` x 5 requests to thread `dest` (and memory `r`), then waits for them (all by
// one deadline, `wait_for` from the start).
burst_result burst(offload::engine& e, offload::region r, fabric::thread_id dest, int rounds,
                   std::chrono::milliseconds wait_for) {
  std::vector<std::uint64_t> words(static_cast<std::size_t>(rounds), 0);
  std::vector<offload::future<void>> plain;
  std::vector<offload::future<std::uint64_t>> fetched;
  std::vector<offload::future<int>> returned;
  const auto start = deadline_clock::now();
  const auto deadline = start + wait_for;
  for (int i = 0; i < rounds; ++i) {
    auto word = std::as_writable_bytes(std::span(&words[static_cast<std::size_t>(i)], 1));
    plain.push_back(e.put(word, r, static_cast<std::uint64_t>(i) * 8));
    plain.push_back(e.get(word, r, static_cast<std::uint64_t>(i) * 8));
    fetched.push_back(e.fetch_add(r, 0, 1));
    plain.push_back(e.call(dest, [] { calls_here += 1; }));
    returned.push_back(e.call_return(dest, [i] { return i; }));
  }
  burst_result out;
  const auto finish = [&](auto& f) { return out.ends[f.wait(deadline)] += 1; };
  for (auto& f : plain) finish(f);
  for (auto& f : fetched) finish(f);
  for (auto& f : returned) {
    finish(f);
    if (f.result() == outcome::done) out.returned_done += 1;
  }
  out.seconds = std::chrono::duration<double>(deadline_clock::now() - start).count();
  return out;
}

std::string summary(const burst_result& b) {
  std::string text;
  for (const auto& [how, count] : b.ends) {
    text += fmt::format("{} {}, ", fabric::to_string(how), count);
  }
  return fmt::format("{}in {:.2f} s", text, b.seconds);
}

// Runs `work` on a plain thread while `me` keeps serving the calls sent to it.
template <class F>
void on_plain_thread(thread_context& me, F work) {
  std::atomic<bool> done{false};
  std::thread plain([&] {
    work();
    done = true;
  });
  if (!me.wait_until([&] { return done.load(); }, in(std::chrono::seconds(60)))) {
    fail("rank {}: the requests did not end within 60 s", me.id());
  }
  plain.join();
}

void rank1(thread_context& me, bool stalled, const std::string& marker) {
  if (!me.wait_until([] { return allocated.load() == 2; }, in(std::chrono::seconds(30)))) {
    return fail("rank 1: the survivors never allocated");
  }
  test::tell_survivors_then_leave(me, [] { rank1_ready = true; }, stalled, marker);
}

void survivor(thread_context& me, bool stalled, const std::string& marker) {
  const fabric::thread_id other = me.id() == 0 ? 2 : 0;
  const auto on1 = me.allocate_remote(1, 4096);
  const auto on_other = me.allocate_remote(other, 4096);
  if (me.call(1, [] { allocated += 1; }) != fabric::call_status::ok) fail("rank 1 unreachable");
  offload::engine e(me.rt());
  const offload::region r1 = e.add_region(on1);
  const offload::region r_other = e.add_region(on_other);
  if (!me.wait_until([] { return rank1_ready.load(); }, in(std::chrono::seconds(30)))) {
    return fail("rank {}: rank 1 never said it was ready", me.id());
  }
  on_plain_thread(me, [&] {
    const auto wait_for = stalled ? std::chrono::milliseconds(500) : std::chrono::seconds(30);
    const burst_result to1 = burst(e, r1, 1, 20, wait_for);
    fmt::print("rank {}: {} burst: {}\n", me.id(), stalled ? "stalled" : "dead", summary(to1));
    const int pending = to1.ends.count(outcome::pending) ? to1.ends.at(outcome::pending) : 0;
    const int late =
        to1.ends.count(outcome::deadline_exceeded) ? to1.ends.at(outcome::deadline_exceeded) : 0;
    if (pending != 0) fail("rank {}: {} requests to rank 1 never ended", me.id(), pending);
    // A stopped rank runs nothing (its one-sided memory may still be reached over shm).
    if (stalled && to1.returned_done != 0) {
      fail("rank {}: {} call_returns answered by a stopped rank", me.id(), to1.returned_done);
    }
    if (!stalled && late != 0) fail("rank {}: {} requests waited past 30 s", me.id(), late);
    if (!stalled) {
      const burst_result after = burst(e, r1, 1, 4, std::chrono::seconds(30));
      fmt::print("rank {}: dead after: {}\n", me.id(), summary(after));
      if (after.ends.size() != 1 || !after.ends.count(outcome::not_executed)) {
        fail("rank {}: requests to rank 1, known dead, did not all end not_executed", me.id());
      }
    }
    const burst_result to_other = burst(e, r_other, other, 20, std::chrono::seconds(30));
    fmt::print("rank {}: {} other: {}\n", me.id(), stalled ? "stalled" : "dead",
               summary(to_other));
    if (to_other.ends.size() != 1 || !to_other.ends.count(outcome::done)) {
      fail("rank {}: requests to rank {} did not all end done", me.id(), other);
    }
  });
  // Each survivor keeps serving until the other is done with it (its calls and gets here).
  std::ofstream(fmt::format("{}.rank{}-done", marker, me.id())) << "done\n";
  const std::string theirs = fmt::format("{}.rank{}-done", marker, other);
  if (!me.wait_until([&] { return static_cast<bool>(std::ifstream(theirs)); },
                     in(std::chrono::seconds(30)))) {
    fail("rank {}: rank {} never finished", me.id(), other);
  }
  if (stalled) {
    test::kill_stalled_rank1(static_cast<int>(me.id()), marker + ".rank2-checked",
                             marker + ".rank1-pid");
  }
}

void body(thread_context& me, bool stalled, const std::string& marker) {
  if (me.id() == 1) return rank1(me, stalled, marker);
  survivor(me, stalled, marker);
}

}  // namespace

int main(int argc, char** argv) {
  return test::three_rank_failure_main(argc, argv, "offload_failure_mp_test", body);
}

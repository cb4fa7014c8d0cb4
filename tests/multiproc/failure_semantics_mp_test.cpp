// Failure semantics across real processes (3 ranks x 1 thread; run by failure_semantics_test.sh):
// (modes future and coroutine: the same through futures and co_await, see rank0_future_body)
// rank 0 has 10 000 call_returns in flight to rank 1 (send-based or one-sided, argv[1]); rank 1
// runs them, writing one marker line per call, and kills itself (SIGKILL) inside call #k, after
// its marker line and before replying. Rank 0 checks that every slot ends exactly once: the
// calls before k done with their values, call k "may have executed" and the marker shows it ran
// once, nothing after k done (sent: may have executed; never sent: not executed), within the
// keepalive plus a second of the death; a new call to rank 1 fails at once. Meanwhile rank 2
// keeps calling rank 0 and must go on succeeding after the death. Then run() must end on both
// survivors with an error naming rank 1. Mode "sender" (dead_sender_body): a sender dies with
// calls published and a batch unpublished; the receiver runs exactly the published ones and
// frees the dead sender's chunks.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>
#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/invoke.hpp>
#include <seriema/transfer/arena.hpp>
#include <seriema/transfer/ucx.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/broken_job.hpp"
#include "support/report_failure.hpp"
#include "support/transports.hpp"

using namespace seriema;
using test::fail;
using test::tcp_only;
using test::failures;
using fabric::outcome;
using fabric::thread_context;
using invoke::call_status;
using invoke::channel;

namespace {

constexpr std::uint64_t in_flight = 10000;
constexpr std::uint64_t dies_in = 99;  // the 100th call
const char* marker_path = nullptr;


std::int64_t realtime_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Rank 1: one marker line per call run ("<index> <realtime ns>"), written before the call
// returns, so the line of call k is on disk before the process dies.
std::uint64_t run_call(std::uint64_t index) {
  const int fd = ::open(marker_path, O_WRONLY | O_APPEND | O_CREAT, 0600);
  const std::string line = fmt::format("{} {}\n", index, realtime_ns());
  if (fd < 0 || ::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    std::abort();
  }
  ::close(fd);
  if (index == dies_in) std::raise(SIGKILL);  // ran, and dies before its reply
  return index * 3 + 1;
}

// Set on rank 2 by a call from rank 0 once rank 0 has checked every slot after the death.
std::atomic<int> phase{0};
std::atomic<bool> rank2_confirmed{false};  // rank 0: rank 2 succeeded 100 times after the death

void rank2_body(thread_context& ctx) {
  std::uint64_t after = 0;
  std::uint64_t total = 0;
  // Calls rank 0 until 100 of them succeeded after the death was noticed, then tells rank 0
  // and stops calling (rank 0 stops serving once its run() ended).
  while (after < 100) {
    fabric::return_slot<std::uint64_t> slot;
    const std::uint64_t x = total;
    if (ctx.call_return(0, [x](thread_context&) { return x + 7; }, slot) != call_status::ok) {
      fail("rank 2: a call to rank 0 was not sent");
      return;
    }
    // Generous: rank 0 does not poll while it issues its 10 000 calls (slow under sanitizers).
    const outcome got = ctx.wait_for(slot, std::chrono::seconds(60));
    if (got != outcome::done || slot.value() != x + 7) {
      fail("rank 2: call {} to rank 0: {}", total, slot.describe());
      return;
    }
    ++total;
    if (phase.load() == 1) ++after;
  }
  (void)ctx.call(0, [](thread_context&) { rank2_confirmed = true; });
  fmt::print("rank 2: {} calls to rank 0 succeeded, {} of them after rank 1's death\n", total,
             after);
}

template <class Slot>
call_status issue(thread_context& ctx, const std::string& mode, std::uint64_t i, Slot& slot) {
  auto f = [i](thread_context&) { return run_call(i); };
  if (mode == "send") return ctx.call_return(1, f, slot);
  return invoke::call_return<channel::write, invoke::policy::retry_async>(ctx, 1, f, slot);
}

// Reads rank 1's marker: which calls ran (each at most once), and when call k ran.
std::int64_t check_marker() {
  std::ifstream in(marker_path);
  std::multiset<std::uint64_t> ran;
  std::uint64_t index = 0;
  std::int64_t when = 0;
  std::int64_t death = 0;
  while (in >> index >> when) {
    ran.insert(index);
    if (index == dies_in) death = when;
  }
  if (ran.count(dies_in) != 1) fail("call {} ran {} times (marker)", dies_in, ran.count(dies_in));
  for (std::uint64_t i : ran) {
    if (ran.count(i) != 1) fail("call {} ran {} times", i, ran.count(i));
    if (i > dies_in) fail("call {} ran after the callee died", i);
  }
  return death;
}

void rank0_body(thread_context& ctx, const std::string& mode) {
  auto slots = std::make_unique<fabric::return_slot<std::uint64_t>[]>(in_flight);
  std::uint64_t unsent = 0;
  for (std::uint64_t i = 0; i < in_flight; ++i) {
    const call_status st = issue(ctx, mode, i, slots[i]);
    if (st == call_status::ok) continue;
    ++unsent;
    if (st != call_status::peer_failed) fail("call {} returned '{}'", i, fabric::to_string(st));
    if (slots[i].result() != outcome::not_executed) {
      fail("call {} was not sent, and its slot says '{}'", i, to_string(slots[i].result()));
    }
  }
  std::uint64_t count[7] = {};
  for (std::uint64_t i = 0; i < in_flight; ++i) {
    const outcome got = ctx.wait_for(slots[i], std::chrono::seconds(30));
    ++count[static_cast<int>(got)];
    // Before the death: done with its value. Over tcp a reply the callee sent just before it
    // died may still have been in its UCX queue, never to leave: then "may have executed".
    const bool lost_reply = tcp_only() && got == outcome::may_have_executed;
    if (i < dies_in && !lost_reply && (got != outcome::done || slots[i].value() != i * 3 + 1)) {
      fail("call {} (before the death): {}", i, slots[i].describe());
    }
    if (i == dies_in && got != outcome::may_have_executed) {
      fail("call {} (the one the callee died in): {}", i, slots[i].describe());
    }
    if (i > dies_in && got != outcome::may_have_executed && got != outcome::not_executed) {
      fail("call {} (after the death): {}", i, slots[i].describe());
    }
  }
  const std::int64_t ended = realtime_ns();
  const std::int64_t death = check_marker();
  const double seconds = static_cast<double>(ended - death) / 1e9;
  const double keepalive = static_cast<double>(ctx.rt().options().ucx.keepalive_ms) / 1000.0;
  fmt::print("rank 0: {} {} call_returns: {} done, {} may have executed, {} not executed "
             "({} never sent), {} other; the last ended {:.2f} s after the callee died "
             "(keepalive {:.1f} s)\n",
             in_flight, mode, count[1], count[4], count[3], unsent,
             in_flight - count[1] - count[4] - count[3], seconds, keepalive);
  if (seconds > keepalive + 1.0) fail("slots ended {:.2f} s after the death", seconds);

  fabric::return_slot<std::uint64_t> late;
  const call_status st = issue(ctx, mode, in_flight, late);
  if (st != call_status::peer_failed || late.result() != outcome::not_executed) {
    fail("a new call to the dead rank returned '{}', its slot '{}'", fabric::to_string(st),
         to_string(late.result()));
  }
  (void)ctx.call(2, [](thread_context&) { phase = 1; });
  if (!ctx.wait_until([] { return rank2_confirmed.load(); }, fabric::deadline_clock::now() +
                                                                  std::chrono::seconds(20))) {
    fail("rank 2 did not confirm 100 successful calls after the death");
  }
}

// Mode "future" / "coroutine": the same 10 000 calls as call_returns giving futures, send-based
// and waited for one by one ("future"), or one-sided and each awaited by a coroutine of its own
// spawned on rank 0's thread ("coroutine"). Each ends as a slot would, and get() / the co_await
// throws the outcome's error type: may_have_executed_error for the call the callee died in,
// never a value after it. (One channel per mode: calls keep their order within a channel.)
invoke::future<std::uint64_t> issue_future(thread_context& ctx, std::uint64_t i, bool send) {
  auto f = [i](thread_context&) { return run_call(i); };
  if (send) return invoke::call_return<channel::send>(ctx, 1, f);
  return invoke::call_return<channel::write, invoke::policy::retry_async>(ctx, 1, f);
}

// What the i-th call ended with, as get() reported it.
outcome outcome_of_get(invoke::future<std::uint64_t>& f, std::uint64_t i) {
  try {
    if (f.get() != i * 3 + 1) fail("call {}: a wrong value", i);
    return outcome::done;
  } catch (const invoke::may_have_executed_error&) {
    return outcome::may_have_executed;
  } catch (const invoke::not_executed_error&) {
    return outcome::not_executed;
  } catch (const std::exception& e) {
    fail("call {}: {}", i, e.what());
    return outcome::pending;
  }
}

seriema::task<outcome> await_call(thread_context& ctx, std::uint64_t i) {
  try {
    if (co_await issue_future(ctx, i, false) != i * 3 + 1) fail("call {}: a wrong value", i);
    co_return outcome::done;
  } catch (const invoke::may_have_executed_error&) {
    co_return outcome::may_have_executed;
  } catch (const invoke::not_executed_error&) {
    co_return outcome::not_executed;
  } catch (const std::exception& e) {
    fail("call {}: {}", i, e.what());
  }
  co_return outcome::pending;
}

void check_call_outcome(std::uint64_t i, outcome got) {
  const bool lost_reply = tcp_only() && got == outcome::may_have_executed;
  if (i < dies_in && !lost_reply && got != outcome::done) {
    fail("call {} (before the death): {}", i, to_string(got));
  }
  if (i == dies_in && got != outcome::may_have_executed) {
    fail("call {} (the one the callee died in): {}", i, to_string(got));
  }
  if (i > dies_in && got != outcome::may_have_executed && got != outcome::not_executed) {
    fail("call {} (after the death): {}", i, to_string(got));
  }
}

void rank0_future_body(thread_context& ctx, const std::string& mode) {
  std::vector<outcome> got(in_flight, outcome::pending);
  if (mode == "future") {
    std::vector<invoke::future<std::uint64_t>> futures;
    futures.reserve(in_flight);
    for (std::uint64_t i = 0; i < in_flight; ++i) futures.push_back(issue_future(ctx, i, true));
    for (std::uint64_t i = 0; i < in_flight; ++i) {
      futures[i] = invoke::with_deadline(std::move(futures[i]), std::chrono::seconds(30));
      got[i] = outcome_of_get(futures[i], i);
    }
  } else {
    std::vector<invoke::future<outcome>> tasks;
    tasks.reserve(in_flight);
    for (std::uint64_t i = 0; i < in_flight; ++i) {
      tasks.push_back(invoke::spawn(ctx, await_call(ctx, i)));
    }
    auto all = invoke::with_deadline(invoke::when_all(ctx, std::move(tasks)),
                                     std::chrono::seconds(60));
    got = all.get();
  }
  std::uint64_t count[7] = {};
  for (std::uint64_t i = 0; i < in_flight; ++i) {
    check_call_outcome(i, got[i]);
    ++count[static_cast<int>(got[i])];
  }
  const std::int64_t ended = realtime_ns();
  const double seconds = static_cast<double>(ended - check_marker()) / 1e9;
  const double keepalive = static_cast<double>(ctx.rt().options().ucx.keepalive_ms) / 1000.0;
  fmt::print("rank 0: {} {} call_returns: {} done, {} may have executed, {} not executed, {} "
             "other; the last ended {:.2f} s after the callee died (keepalive {:.1f} s)\n",
             in_flight, mode, count[1], count[4], count[3],
             in_flight - count[1] - count[4] - count[3], seconds, keepalive);
  if (seconds > keepalive + 1.0) fail("futures ended {:.2f} s after the death", seconds);
  (void)ctx.call(2, [](thread_context&) { phase = 1; });
  if (!ctx.wait_until([] { return rank2_confirmed.load(); }, fabric::deadline_clock::now() +
                                                                  std::chrono::seconds(20))) {
    fail("rank 2 did not confirm 100 successful calls after the death");
  }
}

// Mode "sender": rank 1 publishes `published` one-sided calls to rank 0, waits until rank 0 says
// it ran them (seriema-run tells rank 0 of the death within milliseconds, and calls of a dead
// sender not run yet are dropped), writes `unpublished` more into a trad batch that is never
// published, and dies. Rank 0 must run exactly the published ones (never a call of the
// unpublished batch), and free the chunks rank 1 held in its zone once it noticed the death.
constexpr std::uint64_t published = 1000;
constexpr std::uint64_t unpublished = 500;
std::atomic<std::uint64_t> ran_from_sender{0};
std::atomic<bool> sender_may_die{false};  // rank 1: rank 0 ran every published call

void dead_sender_body(thread_context& ctx) {
  invoke::messenger_options options = invoke::channels_of(ctx).options();
  options.flush_size = std::size_t{1} << 20;  // the trad batch below stays unpublished
  invoke::channels_of(ctx).set_options(options);
  if (ctx.id() == 1) {
    fabric::return_slot<int> warm;  // rank 0 has an endpoint to us: it will see the death
    (void)ctx.call_return(0, [](thread_context&) { return 1; }, warm);
    (void)ctx.wait_for(warm, std::chrono::seconds(30));
    for (std::uint64_t i = 0; i < published; ++i) {
      (void)invoke::call<channel::write, invoke::policy::retry>(
          ctx, 0, [](thread_context&) { ran_from_sender.fetch_add(1); });
    }
    (void)ctx.endpoint_to(0).flush_blocking();  // over tcp: out of this process before it dies
    if (!ctx.wait_until([] { return sender_may_die.load(); },
                        fabric::deadline_clock::now() + std::chrono::seconds(30))) {
      fail("rank 0 did not say that it ran the published calls");
    }
    for (std::uint64_t i = 0; i < unpublished; ++i) {
      (void)invoke::call<channel::trad, invoke::policy::retry>(
          ctx, 0, [](thread_context&) { ran_from_sender.fetch_add(1000000); });
    }
    std::raise(SIGKILL);
  }
  if (ctx.id() != 0) return;
  fabric::return_slot<int> warm;
  (void)ctx.call_return(1, [](thread_context&) { return 1; }, warm);
  (void)ctx.wait_for(warm, std::chrono::seconds(30));
  if (!ctx.wait_until([] { return ran_from_sender.load() >= published; },
                      fabric::deadline_clock::now() + std::chrono::seconds(30))) {
    fail("rank 0 ran {} of the {} published calls", ran_from_sender.load(), published);
  }
  (void)ctx.call(1, [](thread_context&) { sender_may_die.store(true); });
  if (!ctx.wait_until([&] { return ctx.rt().peer_failed(1); },
                      fabric::deadline_clock::now() + std::chrono::seconds(20))) {
    fail("rank 0 did not notice rank 1's death");
  }
  // None of the batch may run, also not from these polls.
  (void)ctx.wait_until([] { return false; },
                       fabric::deadline_clock::now() + std::chrono::milliseconds(200));
  const auto& received = invoke::channels_of(ctx).received();
  fmt::print("rank 0: ran {} calls of the dead sender ({} published, {} unpublished); {} of its "
             "chunks freed\n",
             ran_from_sender.load(), published, unpublished, received.chunks_reclaimed);
  // Never a call of the unpublished batch, and each published call once.
  const std::uint64_t ran = ran_from_sender.load();
  if (ran >= 1000000) fail("ran {} calls of the unpublished batch", ran / 1000000);
  if (ran != published) fail("ran {} published calls", ran);
  if (received.chunks_reclaimed == 0 || invoke::channels_of(ctx).inbound_from(1) != nullptr) {
    fail("the dead sender's chunks were not freed");
  }
}

// Mode "unpublished": rank 0 writes trad call_returns to rank 1 into a batch it does not publish
// (a large flush size, and no poll of its thread until the death is known), rank 1 is killed,
// and only then rank 0 waits: every one of them must end not_executed (a receiver reads nothing
// past a published word), and none ran.
constexpr std::uint64_t unpublished_batch = 200;
constexpr std::uint64_t unpublished_first = 1000000;  // marker indexes of the batch

void unpublished_body(thread_context& ctx) {
  if (ctx.id() == 1) {
    (void)ctx.wait_until([] { return false; },
                         fabric::deadline_clock::now() + std::chrono::seconds(60));
    fail("rank 1 is still alive");
  }
  if (ctx.id() != 0) return;
  invoke::messenger_options options = invoke::channels_of(ctx).options();
  options.flush_size = std::size_t{1} << 20;  // the batch below stays unpublished
  invoke::channels_of(ctx).set_options(options);
  fabric::return_slot<std::uint64_t> warm;  // the trad channel's chunks exist before the batch
  if (invoke::call_return<channel::trad>(ctx, 1, [](thread_context&) { return std::uint64_t{1}; },
                                         warm) != call_status::ok ||
      ctx.wait_for(warm, std::chrono::seconds(30)) != outcome::done) {
    fail("warm-up call: {}", warm.describe());
    return;
  }
  auto slots = std::make_unique<fabric::return_slot<std::uint64_t>[]>(unpublished_batch);
  for (std::uint64_t i = 0; i < unpublished_batch; ++i) {
    auto f = [i](thread_context&) { return run_call(unpublished_first + i); };
    const call_status st = invoke::call_return<channel::trad>(ctx, 1, f, slots[i]);
    if (st != call_status::ok) fail("batch call {} returned '{}'", i, fabric::to_string(st));
  }
  (void)ctx.call(1, [](thread_context&) { std::raise(SIGKILL); });  // send-based: goes now
  // Progress UCX without polling the thread (an idle poll would publish the batch) until the
  // death is known.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!ctx.rt().peer_failed(1) && std::chrono::steady_clock::now() < until) {
    ctx.worker().progress();
    ctx.rt().progress_shared();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!ctx.rt().peer_failed(1)) fail("rank 0 did not notice rank 1's death");
  std::uint64_t count[7] = {};
  for (std::uint64_t i = 0; i < unpublished_batch; ++i) {
    const outcome got = ctx.wait_for(slots[i], std::chrono::seconds(10));
    ++count[static_cast<int>(got)];
    if (got != outcome::not_executed) fail("unpublished call {}: {}", i, slots[i].describe());
  }
  std::ifstream in(marker_path);
  std::uint64_t index = 0;
  std::int64_t when = 0;
  while (in >> index >> when) {
    if (index >= unpublished_first) fail("unpublished call {} ran", index - unpublished_first);
  }
  fmt::print("rank 0: {} unpublished trad call_returns: {} not executed, {} may have executed, "
             "{} other\n",
             unpublished_batch, count[3], count[4], unpublished_batch - count[3] - count[4]);
}

}  // namespace

int main(int argc, char** argv) {
  const std::set<std::string> modes{"send", "write", "sender", "unpublished", "future",
                                    "coroutine"};
  if (argc != 3 || modes.count(argv[1]) == 0) {
    fmt::print(stderr, "usage: failure_semantics_mp_test send|write|sender|unpublished|future|"
                       "coroutine <marker file>\n");
    return 2;
  }
  const std::string mode = argv[1];
  marker_path = argv[2];
  try {
    fabric::runtime rt;
    if (rt.size() != 3 || rt.options().threads_per_process != 1) {
      fmt::print(stderr, "failure semantics test: needs 3 processes x 1 thread\n");
      return 2;
    }
    std::string ended = "returned normally";
    try {
      rt.run([&](thread_context& ctx) {
        if (mode == "sender") {
          dead_sender_body(ctx);
          return;
        }
        if (mode == "unpublished") {
          unpublished_body(ctx);
          return;
        }
        if (ctx.id() == 0 && (mode == "future" || mode == "coroutine")) {
          rank0_future_body(ctx, mode);
        } else if (ctx.id() == 0) {
          rank0_body(ctx, mode);
        }
        if (ctx.id() == 2) rank2_body(ctx);
        if (ctx.id() == 1) {
          // Serve rank 0's calls until call k kills this process (bounded, should it not).
          (void)ctx.wait_until([] { return false; },
                               fabric::deadline_clock::now() + std::chrono::seconds(60));
          fail("rank 1 is still alive");
        }
      });
    } catch (const std::exception& e) {
      ended = e.what();
    }
    fmt::print("rank {}: run ended: {}\n", rt.rank(), ended);
    if (ended.find("rank 1") == std::string::npos) fail("run() did not name the dead rank 1");
    test::leave_broken_job(rt, marker_path);
  } catch (const std::exception& e) {
    fmt::print(stderr, "failure semantics test: {}\n", e.what());
    return 1;
  }
}

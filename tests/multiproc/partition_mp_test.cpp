// A network partition between two ranks (each in its own network namespace, run by
// partition_test.sh): rank 0 asks the script to cut the link, then call_returns to rank 1 with a
// 2 s deadline (send-based and one-sided) must end as deadline_exceeded by 3 s, rank 1 must not
// be declared dead, and once the script healed the link new calls must succeed. The script and
// rank 0 talk through files in the directory given as argv[1].
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/invoke.hpp>
#include <string>
#include <vector>
#include <span>
#include <algorithm>
#include <thread>

#include "support/report_failure.hpp"

using namespace seriema;
using test::fail;
using test::failures;
using fabric::outcome;
using fabric::thread_context;
using invoke::call_status;

namespace {

std::atomic<bool> stop{false};
std::atomic<std::uint64_t> load_received{0};  // rank 1: load calls that ran
std::string control;

struct load_result {
  std::uint64_t ok = 0;
  std::uint64_t queued = 0;  // queued_at_deadline: may still run
};

std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * 4096;
}

// Send-based calls with 64 KiB buffers, each under a 2 s deadline, across the cut link until
// three of them did not get through: the TCP socket fills, UCX queues a send, and that one and
// every later one must return by its deadline + 1 s (UCX 1.13 cannot cancel the queued send:
// seriema leaves it to UCX with its own copy) without the memory growing.
load_result load_across_partition(thread_context& ctx) {
  constexpr std::size_t load_bytes = 64 * 1024;
  const std::vector<std::byte> payload(load_bytes, std::byte{7});
  auto count = [](thread_context&, std::span<const std::byte> data) {
    if (data.size() == load_bytes) load_received.fetch_add(1);
  };
  load_result result;
  const std::size_t rss_before = resident_bytes();
  int refused = 0;
  for (int i = 0; i < 100000 && refused < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    call_status st;
    {
      thread_context::deadline_scope within(ctx, std::chrono::seconds(2));
      st = invoke::call_buffer<invoke::channel::send>(ctx, 1, count, std::span(payload));
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (seconds > 3.0) fail("load: call {} returned {} after {:.2f} s", i, fabric::to_string(st), seconds);
    if (st == call_status::ok) {
      ++result.ok;
      continue;
    }
    ++refused;
    if (st == call_status::queued_at_deadline) {
      ++result.queued;
    } else if (st != call_status::deadline_exceeded) {
      fail("load: call {}: {}", i, fabric::to_string(st));
    }
    fmt::print("rank 0: load: call {} ended {} after {:.2f} s\n", i, fabric::to_string(st), seconds);
  }
  if (refused < 3) fail("load: 100000 calls of 64 KiB went through a cut link");
  if (result.queued > 1) fail("load: {} calls queued past their deadline (at most 1)", result.queued);
  const std::size_t grown = resident_bytes() - std::min(rss_before, resident_bytes());
  if (grown > 64u << 20) fail("load: resident memory grew by {} MiB", grown >> 20);
  fmt::print("rank 0: load: {} calls sent, {} queued, memory grew {} KiB\n", result.ok, result.queued,
             grown >> 10);
  return result;
}


// Writes control/<request> and waits (serving calls) until the script wrote control/<done>.
bool ask_script(thread_context& ctx, const std::string& request, const std::string& done) {
  std::ofstream(control + "/" + request) << "\n";
  return ctx.wait_until([&] { return std::filesystem::exists(control + "/" + done); },
                        fabric::deadline_clock::now() + std::chrono::seconds(30));
}

template <invoke::channel C>
void calls_across(thread_context& ctx, const char* name, const char* when, bool partitioned) {
  auto answer = [](thread_context&) { return std::uint64_t{11}; };
  fabric::return_slot<std::uint64_t> slots[3];
  const auto start = std::chrono::steady_clock::now();
  for (auto& slot : slots) {
    const call_status st = invoke::call_return<C>(ctx, 1, answer, slot);
    if (st != call_status::ok) fail("{}: a call was not sent: {}", name, fabric::to_string(st));
  }
  const auto deadline =
      fabric::deadline_clock::now() + (partitioned ? std::chrono::seconds(2) : std::chrono::seconds(30));
  for (auto& slot : slots) {
    const outcome got = ctx.wait_for(slot, deadline);
    if (got != (partitioned ? outcome::deadline_exceeded : outcome::done)) {
      fail("{} {}: {}", name, when, slot.describe());
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("rank 0: {} {}: 3 call_returns ended in {:.2f} s\n", name, when, seconds);
  if (partitioned && seconds > 3.0) fail("{}: ended {:.2f} s after the calls", name, seconds);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fmt::print(stderr, "usage: partition_mp_test <control directory>\n");
    return 2;
  }
  control = argv[1];
  try {
    fabric::runtime rt;
    if (rt.size() != 2 || rt.options().threads_per_process != 1) {
      fmt::print(stderr, "partition test: needs 2 processes x 1 thread\n");
      return 2;
    }
    rt.run([&](thread_context& ctx) {
      if (ctx.id() == 1) {
        (void)ctx.wait_until([] { return stop.load(); },
                             fabric::deadline_clock::now() + std::chrono::seconds(120));
        return;
      }
      calls_across<invoke::channel::send>(ctx, "send", "before the partition", false);
      calls_across<invoke::channel::write>(ctx, "write", "before the partition", false);
      if (!ask_script(ctx, "partition", "partitioned")) fail("the script did not partition");
      calls_across<invoke::channel::send>(ctx, "send", "across the partition", true);
      calls_across<invoke::channel::write>(ctx, "write", "across the partition", true);
      const load_result load = load_across_partition(ctx);
      if (rt.peer_failed(1)) fail("rank 1 was declared dead during the partition");
      if (!ask_script(ctx, "heal", "healed")) fail("the script did not heal the partition");
      calls_across<invoke::channel::send>(ctx, "send", "after the heal", false);
      calls_across<invoke::channel::write>(ctx, "write", "after the heal", false);
      // Every load call sent, and the one left queued, ran once the link carried them.
      fabric::return_slot<std::uint64_t> received;
      if (ctx.call_return(1, [](thread_context&) { return load_received.load(); }, received) !=
              call_status::ok ||
          ctx.wait_for(received, std::chrono::seconds(30)) != outcome::done) {
        fail("after the heal: cannot ask rank 1 what it received: {}", received.describe());
      } else if (received.value() != load.ok + load.queued) {
        fail("after the heal: rank 1 ran {} load calls, {} were sent and {} queued",
             received.value(), load.ok, load.queued);
      }
      (void)ctx.call(1, [](thread_context&) { stop = true; });
    });
    rt.finalize();
    fmt::print("rank {}: exiting with status {}\n", rt.rank(), failures.load() == 0 ? 0 : 1);
    return failures.load() == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "partition test: {}\n", e.what());
    return 1;
  }
}

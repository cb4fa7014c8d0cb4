// Broadcasts: every thread of the job runs a function once, over a binary tree of calls rooted at
// the caller: plain, with a copy of a buffer, with the buffer put by RDMA into memory near each
// thread (put variant), and with each thread reading the root's buffer (get variant); a
// synchronizer tells the root when every thread ran its broadcast.
//   SERIEMA_THREADS=2 seriema-run -n 2 -- ./broadcast
#include <fmt/format.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/invoke.hpp>
#include <span>
#include <vector>

using seriema::fabric::thread_context;
namespace invoke = seriema::invoke;
using invoke::channel;

namespace {
std::atomic<std::uint64_t> hello_runs{0};   // broadcasts run by this process's threads
std::atomic<std::uint64_t> buffer_runs{0};  // broadcast_buffer runs with the right bytes
std::atomic<std::uint64_t> put_runs{0};     // put variant: the bytes were in the thread's target
std::atomic<std::uint64_t> get_runs{0};     // get variant: the thread read the root's bytes
std::atomic<std::uint64_t> failures{0};     // a status or a wait that was not ok
constexpr std::array<std::byte, 3> config{std::byte{4}, std::byte{2}, std::byte{42}};
bool is_config(std::span<const std::byte> got) {
  return got.size() == config.size() && std::memcmp(got.data(), config.data(), config.size()) == 0;
}
}  // namespace

int main() try {
  seriema::fabric::runtime rt;
  rt.run([](thread_context& me) {
    if (me.id() != 0) return;  // thread 0 broadcasts; the others only receive
    // Each hop forwards to two children of a binary tree rooted here, then runs the function.
    invoke::broadcast<channel::write>(me, [](thread_context& self) {
      fmt::print("thread {} (process {}) got the broadcast\n", self.id(), self.process());
      ++hello_runs;
    });
    // The buffer travels inside every hop's call.
    invoke::broadcast_buffer<channel::trad>(me, [](std::span<std::byte> got) {
      if (is_config(got)) ++buffer_runs;
    }, config);

    // Put variant: one target per thread, registered memory in that thread's NUMA zone; each
    // hop puts the bytes into its children's targets before calling them. The synchronizer
    // counts the broadcast as one call, done once every thread ran it (notify_on::consume, the
    // default).
    std::vector<seriema::transfer::remote_memory_locator> targets;
    for (seriema::fabric::thread_id t = 0; t < me.thread_count(); ++t) {
      targets.push_back(me.allocate_remote(t, config.size()));
    }
    invoke::synchronizer all_put(me, 1);
    if (invoke::broadcast_buffer(me, [](std::span<std::byte> got) {
          if (is_config(got)) ++put_runs;
        }, config, targets, all_put) != invoke::call_status::ok || !all_put.wait()) {
      ++failures;
    }
    for (const auto& target : targets) me.free_remote(target);

    // Get variant: every thread reads the bytes from this thread's registered memory, which must
    // stay as it is until the synchronizer says every thread ran f.
    auto origin = me.allocate_remote(me.id(), config.size());
    std::memcpy(reinterpret_cast<void*>(origin.address), config.data(), config.size());
    invoke::synchronizer all_read(me, 1);
    invoke::broadcast_buffer_get(me, [](std::span<std::byte> got) {
      if (is_config(got)) ++get_runs;
    }, origin, all_read);
    if (!all_read.wait()) ++failures;
    me.free_remote(origin);
  });
  // run() returned: every hop of every broadcast ran.
  const std::uint64_t threads = rt.placement().thread_count();
  const std::uint64_t hellos = rt.allreduce_sum(hello_runs.load());
  const std::uint64_t buffers = rt.allreduce_sum(buffer_runs.load());
  const std::uint64_t puts = rt.allreduce_sum(put_runs.load());
  const std::uint64_t gets = rt.allreduce_sum(get_runs.load());
  const std::uint64_t failed = rt.allreduce_sum(failures.load());
  const bool ok = hellos == threads && buffers == threads && puts == threads && gets == threads &&
                  failed == 0;
  if (rt.rank() == 0) {
    fmt::print("broadcast: {} threads; ran {} plain, {} with the buffer, {} put, {} get: {}\n",
               threads, hellos, buffers, puts, gets, ok ? "ok" : "FAILED");
  }
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  fmt::print(stderr, "broadcast: {}\n", e.what());
  return 1;
}

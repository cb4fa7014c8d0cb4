// Broadcasts: every thread of the job runs a function (and gets a buffer) once, over a tree.
//   SERIEMA_THREADS=2 seriema-run -n 2 -- ./broadcast
#include <fmt/format.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/invoke.hpp>
#include <span>

using seriema::fabric::thread_context;
namespace invoke = seriema::invoke;
using invoke::channel;

namespace {
std::atomic<std::uint64_t> hello_runs{0};   // broadcasts run by this process's threads
std::atomic<std::uint64_t> buffer_runs{0};  // broadcast_buffer runs with the right bytes
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
    const std::array<std::byte, 3> config{std::byte{4}, std::byte{2}, std::byte{42}};
    invoke::broadcast_buffer<channel::trad>(me, [](std::span<std::byte> got) {
      if (got.size() == 3 && got[2] == std::byte{42}) ++buffer_runs;
    }, config);
  });
  // run() returned: every hop of both broadcasts ran.
  const std::uint64_t threads = rt.placement().thread_count();
  const std::uint64_t hellos = rt.allreduce_sum(hello_runs.load());
  const std::uint64_t buffers = rt.allreduce_sum(buffer_runs.load());
  const bool ok = hellos == threads && buffers == threads;
  if (rt.rank() == 0) {
    fmt::print("broadcast: {} threads, {} ran the broadcast, {} the buffer broadcast: {}\n",
               threads, hellos, buffers, ok ? "ok" : "FAILED");
  }
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  fmt::print(stderr, "broadcast: {}\n", e.what());
  return 1;
}

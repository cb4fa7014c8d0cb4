// Synchronizers with the buffer variants: put a buffer near the destination, let it read one of
// ours, and learn when calls were consumed; then let a helper finish queued calls.
//   SERIEMA_THREADS=2 seriema-run -n 2 -- ./synchronizers
#include <fmt/format.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/invoke.hpp>
#include <span>
#include <vector>

using seriema::fabric::thread_context;
namespace invoke = seriema::invoke;
using invoke::call_status;
using invoke::channel;

namespace {
std::atomic<std::uint64_t> failures{0};
void check(bool good) {
  if (!good) ++failures;
}
std::uint64_t sum_of(std::span<const std::byte> bytes) {
  return std::accumulate(bytes.begin(), bytes.end(), std::uint64_t{0},
                         [](std::uint64_t s, std::byte b) { return s + std::to_integer<int>(b); });
}
}  // namespace

int main() try {
  seriema::fabric::runtime rt;
  rt.run([](thread_context& me) {
    const auto next = (me.id() + 1) % me.thread_count();
    std::vector<std::byte> data(4096, std::byte{3});
    const std::uint64_t expected = sum_of(data);
    auto verify = [expected](std::span<std::byte> got) { check(sum_of(got) == expected); };

    // Put variant: the bytes go into memory allocated in `next`'s NUMA zone, then the call.
    auto near_next = me.allocate_remote(next, data.size());
    check(invoke::call_buffer<channel::write>(me, next, verify, data, near_next) == call_status::ok);

    // Get variant: `next` reads our registered copy. The synchronizer counts the two reads down
    // when they were consumed (the default for a synchronizer: the call ran; notify_on::transmit
    // as a template argument counts it once sent instead); until then our copy must not change.
    auto ours = me.allocate_remote(me.id(), data.size());
    std::memcpy(reinterpret_cast<void*>(ours.address), data.data(), data.size());
    invoke::synchronizer reads(me, 2);
    check(invoke::call_buffer_get(me, next, verify, ours, reads) == call_status::ok);
    check(invoke::call_buffer_get_async<channel::write>(me, next, verify, ours, reads) ==
          call_status::ok);
    check(reads.wait());  // serves incoming calls while it waits
    fmt::print("thread {}: both reads of its buffer are done\n", me.id());

    // retry_async queues calls the ring has no room for; inside a helped_section this thread
    // computes while a helper thread sends them on and runs the calls addressed to it.
    invoke::synchronizer done(me, 10000);
    for (int i = 0; i < 10000; ++i) {
      check(invoke::call<channel::write, invoke::policy::retry_async>(me, next, [] {}, done) ==
            call_status::ok);
    }
    {
      seriema::fabric::helped_section computing(me);
      while (!done.done()) {
        // ... work that does not touch `me` ...
      }
    }
    me.free_remote(near_next);
    me.free_remote(ours);
  });
  const std::uint64_t failed = rt.allreduce_sum(failures.load());
  if (rt.rank() == 0) fmt::print("synchronizers: {}\n", failed == 0 ? "ok" : "FAILED");
  return failed == 0 ? 0 : 1;
} catch (const std::exception& e) {
  fmt::print(stderr, "synchronizers: {}\n", e.what());
  return 1;
}

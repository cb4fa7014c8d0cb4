// Demo: every thread of every process adds to one counter in remote memory under a distributed
// lock (load and store inside the critical section, so only the lock keeps it exact), and to a
// per-process tally under a local critical_section; thread 0 creates both and checks the sums.
//   SERIEMA_THREADS=2 seriema-run -n 2 -- ./distributed_lock
#include <fmt/format.h>

#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <seriema/base/critical_section.hpp>
#include <seriema/fabric/distributed_lock.hpp>
#include <seriema/fabric/remote_atomic.hpp>
#include <seriema/fabric/runtime.hpp>

using namespace seriema;
using fabric::thread_context;

namespace {

constexpr int rounds = 200;

// What thread 0 sends every other thread: the lock and the counter's memory.
struct shared_state {
  fabric::distributed_lock_descriptor lock;
  transfer::remote_memory_locator counter;
};

// Per local thread: the shared state, written by the call thread 0 sends it (which runs on that
// thread), then flagged.
constexpr int max_threads = 256;
std::array<shared_state, max_threads> received;
std::array<bool, max_threads> arrived{};
critical_section tally_lock;   // the local tally's section (RTM where the CPU has it)
long tally = 0;                // this process's critical sections, under tally_lock

void add_under_lock(thread_context& me, const shared_state& state) {
  fabric::distributed_lock lock(me, state.lock);
  fabric::remote_atomic counter(me, state.counter, 0);
  const auto deadline = fabric::deadline_clock::now() + std::chrono::seconds(60);
  for (int i = 0; i < rounds; ++i) {
    fabric::distributed_lock::guard held(lock, deadline);
    if (!held.owns_lock()) throw error(fmt::format("acquire: {}", to_string(held.result())));
    const fabric::atomic_result seen = counter.load();   // read ...
    if (!seen.ok() || counter.store(seen.value + 1) != fabric::outcome::done) {  // ... then write
      throw error("the counter could not be updated");
    }
    std::lock_guard local(tally_lock);
    ++tally;
  }
}

}  // namespace

int main() try {
  fabric::runtime rt;
  std::atomic<bool> ok{true};
  rt.run([&](thread_context& me) {
    if (me.id() == 0) {
      shared_state state{fabric::distributed_lock::create(me, me.thread_count() - 1),
                         me.allocate_remote(me.thread_count() - 1, 64)};
      if (fabric::remote_atomic(me, state.counter, 0).store(0) != fabric::outcome::done) {
        throw error("the counter could not be cleared");
      }
      for (fabric::thread_id t = 1; t < me.thread_count(); ++t) {
        (void)me.call(t, [state](thread_context& self) {
          const int local = self.rt().placement().locate(self.id()).local_thread;
          received[static_cast<std::size_t>(local)] = state;
          arrived[static_cast<std::size_t>(local)] = true;
        });
      }
      add_under_lock(me, state);
      // Wait until every thread added (the counter reaches its total), then check.
      fabric::remote_atomic counter(me, state.counter, 0);
      const std::uint64_t total = std::uint64_t{me.thread_count()} * rounds;
      me.wait_until([&] { return counter.load().value == total; },
                    fabric::deadline_clock::now() + std::chrono::seconds(60));
      const std::uint64_t got = counter.load().value;
      fmt::print("counter {} of {} expected ({} threads x {} rounds); critical sections here "
                 "run as: {}\n",
                 got, total, me.thread_count(), rounds, to_string(tally_lock.path()));
      if (got != total) ok = false;
      return;
    }
    const auto local = static_cast<std::size_t>(rt.placement().locate(me.id()).local_thread);
    if (!me.wait_until([&] { return arrived[local]; },
                       fabric::deadline_clock::now() + std::chrono::seconds(60))) {
      throw error("the shared state never came");
    }
    add_under_lock(me, received[local]);
  });
  fmt::print("rank {}: {} critical sections in this process\n", rt.rank(), tally);
  rt.finalize();
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  fmt::print(stderr, "distributed_lock: {}\n", e.what());
  return 1;
}

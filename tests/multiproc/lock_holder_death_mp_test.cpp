// A distributed lock's holder dies: 3 processes x 1 thread; rank 0 is the lock's home, rank 1
// takes the lock, hands rank 2 a word of its own memory and kills itself (SIGKILL) while holding
// it. Rank 2's acquire must end deadline_exceeded at its 2 s deadline (not hang), an atomic on the
// dead rank's word must fail (not_executed or may_have_executed) within the keepalive, and the
// home must still answer atomics. Run by lock_holder_death_test.sh, which checks the lines.
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <seriema/fabric/distributed_lock.hpp>
#include <seriema/fabric/remote_atomic.hpp>
#include <seriema/fabric/runtime.hpp>

using namespace seriema;
using fabric::outcome;
using fabric::thread_context;

namespace {

// Rank 2's thread: what the others sent it.
struct notes {
  fabric::distributed_lock_descriptor lock;
  transfer::remote_memory_locator dying_word;
  bool have_lock = false;
  bool held_elsewhere = false;
};
std::atomic<bool> waiter_done{false};  // rank 0's thread: rank 2 has finished (the home stays up)
notes received;

int status = 0;

template <class... T>
void fail(fmt::format_string<T...> format, T&&... args) {
  fmt::print("rank 2: FAILED: {}\n", fmt::format(format, std::forward<T>(args)...));
  status = 1;
}

double seconds_since(fabric::deadline_clock::time_point start) {
  return std::chrono::duration<double>(fabric::deadline_clock::now() - start).count();
}

void home(thread_context& me) {
  const fabric::distributed_lock_descriptor lock = fabric::distributed_lock::create(me, 0);
  for (fabric::thread_id t : {1u, 2u}) {
    (void)me.call(t, [lock] {
      received.lock = lock;
      received.have_lock = true;
    });
  }
  // The home must outlive the waiter's checks (a run body that returns would meet the dead
  // rank in run()'s final round, and this process would leave).
  me.wait_until([] { return waiter_done.load(); },
                fabric::deadline_clock::now() + std::chrono::seconds(90));
}

void holder(thread_context& me) {
  me.wait_until([] { return received.have_lock; });
  fabric::distributed_lock lock(me, received.lock);
  if (lock.acquire() != outcome::done) std::_Exit(3);
  const transfer::remote_memory_locator mine = me.allocate_remote(1, 64);
  (void)me.call(2, [mine] {
    received.dying_word = mine;
    received.held_elsewhere = true;
  });
  me.flush_endpoints();  // the note is on its way
  std::raise(SIGKILL);    // dies holding the lock
}

void waiter(thread_context& me) {
  me.wait_until([] { return received.have_lock && received.held_elsewhere; });
  fabric::distributed_lock lock(me, received.lock);
  auto start = fabric::deadline_clock::now();
  const outcome how = lock.acquire_for(std::chrono::seconds(2));
  fmt::print("rank 2: acquire while the holder is dead ended {} after {:.2f} s\n",
             fabric::to_string(how), seconds_since(start));
  if (how != outcome::deadline_exceeded) fail("expected deadline exceeded");
  fabric::remote_atomic at_home(me, received.lock.memory, 0);
  if (!at_home.load(fabric::deadline_clock::now() + std::chrono::seconds(5)).ok()) {
    fail("the home stopped answering");
  }
  // The dead rank's word: fails once the death is noticed (keepalive), whatever the transport.
  start = fabric::deadline_clock::now();
  outcome dead = outcome::done;
  while (dead == outcome::done && seconds_since(start) < 30) {
    try {
      fabric::remote_atomic word(me, received.dying_word, 0);
      dead = word.fetch_add(1, fabric::deadline_clock::now() + std::chrono::seconds(1)).how;
    } catch (const seriema::error& e) {
      fmt::print("rank 2: the dead rank's word is refused: {}\n", e.what());
      dead = outcome::not_executed;
    }
  }
  fmt::print("rank 2: atomic on the dead rank ended {} after {:.2f} s\n", fabric::to_string(dead),
             seconds_since(start));
  if (dead == outcome::done) fail("an atomic on the dead rank kept succeeding");
  (void)me.call(0, [] { waiter_done = true; });
  me.flush_endpoints();
}

}  // namespace

int main() {
  try {
    fabric::runtime rt;
    if (rt.size() != 3 || rt.options().threads_per_process != 1) {
      fmt::print(stderr, "lock holder death test: needs 3 processes x 1 thread\n");
      return 2;
    }
    try {
      rt.run([&](thread_context& me) {
        if (me.id() == 0) home(me);
        if (me.id() == 1) holder(me);
        if (me.id() == 2) waiter(me);
      });
    } catch (const std::exception& e) {
      // run()'s final quiescence round cannot include the dead rank: expected here.
      fmt::print("rank {}: run ended with: {}\n", rt.rank(), e.what());
    }
    fmt::print("rank {}: exiting with status {}\n", rt.rank(), status);
    std::fflush(stdout);
    std::_Exit(status);  // the job is broken (a rank died): no collective shutdown
  } catch (const std::exception& e) {
    fmt::print(stderr, "lock holder death test: {}\n", e.what());
    return 1;
  }
}

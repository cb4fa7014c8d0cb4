// A plain std::thread pool of 64 threads, none attached to the runtime, that fills an array in
// the next process's memory with puts and then asks that process for sums of it with
// call_return, all through an offload::engine: the threads hand their requests to the engine's
// executor, which posts them on its own endpoints and ends each request's future.
//   SERIEMA_THREADS=2 seriema-run -n 2 -- ./offload_pool
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <seriema/fabric/runtime.hpp>
#include <seriema/offload/engine.hpp>
#include <span>
#include <thread>
#include <vector>

using seriema::fabric::thread_context;
using seriema::fabric::thread_id;
namespace offload = seriema::offload;

constexpr int pool_threads = 64;
constexpr std::size_t words_per_thread = 32;
constexpr std::size_t words = pool_threads * words_per_thread;

// What pool thread t writes into word i of its slice.
std::uint64_t value_of(int t, std::size_t i) { return std::uint64_t(t) * 1000 + i; }

// Every process's array (filled in by the calls that announce them).
std::vector<seriema::transfer::remote_memory_locator> arrays;
std::atomic<int> announced{0};

int main() {
  seriema::fabric::runtime rt;
  arrays.resize(static_cast<std::size_t>(rt.size()));
  std::atomic<int> wrong{0};
  // One executor thread (holding one of the process's attach slots), asleep when there is
  // nothing to do; destroyed before finalize().
  std::optional<offload::engine> made(std::in_place, rt);
  offload::engine& engine = *made;

  rt.run([&](thread_context& ctx) {
    const thread_id first = rt.placement().global_id(rt.rank(), 0);
    if (ctx.id() == first) {
      // This process's array, announced to the first worker of every process.
      const auto mine = ctx.allocate_remote(ctx.id(), words * sizeof(std::uint64_t));
      const int rank = rt.rank();
      for (int p = 0; p < rt.size(); ++p) {
        (void)ctx.call(rt.placement().global_id(p, 0), [mine, rank] {
          arrays[static_cast<std::size_t>(rank)] = mine;
          announced += 1;
        });
      }
      ctx.wait_until([&] { return announced.load() == rt.size(); });
      const int next = (rt.rank() + 1) % rt.size();
      const offload::region target = engine.add_region(arrays[static_cast<std::size_t>(next)]);
      const thread_id owner = rt.placement().global_id(next, 0);

      std::atomic<int> finished{0};
      std::vector<std::thread> pool;
      for (int t = 0; t < pool_threads; ++t) {
        pool.emplace_back([&, t] {
          // Puts of this thread's slice: one request per word, all in flight at once.
          std::vector<std::uint64_t> mine_to_put(words_per_thread);
          std::vector<offload::future<void>> puts;
          for (std::size_t i = 0; i < words_per_thread; ++i) {
            mine_to_put[i] = value_of(t, i);
            puts.push_back(engine.put(std::as_bytes(std::span(&mine_to_put[i], 1)), target,
                                      (t * words_per_thread + i) * sizeof(std::uint64_t)));
          }
          for (auto& put : puts) put.get();  // throws if a put failed
          // The slice's sum, computed by the array's owner thread where the array lives.
          const std::uint64_t base = arrays[static_cast<std::size_t>(next)].address;
          const std::uint64_t sum = engine.call_return(owner, [base, t] {
            const auto* slice = reinterpret_cast<const std::uint64_t*>(base) +
                                t * words_per_thread;
            std::uint64_t s = 0;
            for (std::size_t i = 0; i < words_per_thread; ++i) s += slice[i];
            return s;
          }).get();
          std::uint64_t expected = 0;
          for (std::size_t i = 0; i < words_per_thread; ++i) expected += value_of(t, i);
          if (sum != expected) wrong += 1;
          finished += 1;
        });
      }
      ctx.wait_until([&] { return finished.load() == pool_threads; });  // serves the sums
      for (auto& thread : pool) thread.join();
      fmt::print("rank {}: {} threads wrote {} words into rank {} and read back {} sums: {}\n",
                 rt.rank(), pool_threads, words, next, pool_threads,
                 wrong.load() == 0 ? "all right" : "WRONG");
      const auto counters = engine.counters();
      fmt::print("rank {}: {} requests, {} batches, {} endpoint(s), executor slept {} times\n",
                 rt.rank(), counters.requests, counters.batches, counters.endpoints,
                 counters.sleeps);
      ctx.quiesce();  // every process is done with every array
      ctx.free_remote(arrays[static_cast<std::size_t>(rt.rank())]);
    } else {
      ctx.quiesce();
    }
  });
  made.reset();
  rt.finalize();
  return wrong.load() == 0 ? 0 : 1;
}

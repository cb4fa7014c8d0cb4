// A distributed linked list walked with co_await: node k of the list lives on thread k % T, and
// a coroutine follows the links with one call_return per hop. The calling thread serves calls
// while the coroutine waits: no nested poll, no extra thread. The body of run() is itself a
// coroutine.
//   SERIEMA_THREADS=2 seriema-run -n 2 -- ./coroutine_walk
#include <fmt/format.h>

#include <array>
#include <atomic>
#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/invoke.hpp>

namespace invoke = seriema::invoke;
using seriema::task;
using seriema::fabric::thread_context;
using seriema::fabric::thread_id;

namespace {

// A link: which thread holds the node, and where in that thread's nodes.
struct link {
  thread_id owner = 0;
  std::uint32_t index = 0;
  bool end = true;
};
struct node {
  std::uint64_t value = 0;
  link next;
};

constexpr std::uint32_t nodes_per_thread = 8;
constexpr std::size_t max_local_threads = 64;
// Each thread's nodes, by its index in this process (written by the owner before the walk).
std::array<std::array<node, nodes_per_thread>, max_local_threads> nodes;

std::size_t local(const thread_context& me) {
  return static_cast<std::size_t>(me.rt().placement().locate(me.id()).local_thread);
}

// Node k holds k * k and links to node k + 1.
void build(thread_context& me) {
  const std::uint64_t threads = me.thread_count();
  const std::uint64_t total = threads * nodes_per_thread;
  for (std::uint32_t i = 0; i < nodes_per_thread; ++i) {
    const std::uint64_t k = i * threads + me.id();
    const std::uint64_t n = k + 1;
    nodes[local(me)][i] = {k * k, {static_cast<thread_id>(n % threads),
                                   static_cast<std::uint32_t>(n / threads), n == total}};
  }
}

task<std::uint64_t> sum_of_list(thread_context& me) {
  std::uint64_t sum = 0;
  for (link at{0, 0, false}; !at.end;) {
    const node n = co_await invoke::call_return(
        me, at.owner, [at](thread_context& self) { return nodes[local(self)][at.index]; });
    sum += n.value;
    at = n.next;
  }
  co_return sum;
}

}  // namespace

int main() try {
  seriema::fabric::runtime rt;
  if (rt.options().threads_per_process > static_cast<int>(max_local_threads)) return 2;
  rt.run([](thread_context& me) { build(me); });
  std::atomic<int> wrong{0};
  rt.run([&](thread_context& me) -> task<> {
    const std::uint64_t sum = co_await sum_of_list(me);
    std::uint64_t expected = 0;
    for (std::uint64_t k = 0; k < std::uint64_t{me.thread_count()} * nodes_per_thread; ++k) {
      expected += k * k;
    }
    fmt::print("thread {} walked the list: sum of squares {} ({})\n", me.id(), sum,
               sum == expected ? "right" : "WRONG");
    if (sum != expected) ++wrong;
  });
  return wrong == 0 ? 0 : 1;
} catch (const std::exception& e) {
  fmt::print(stderr, "coroutine_walk: {}\n", e.what());
  return 1;
}

// A service whose handler answers with a deferred reply: thread 0 keeps a directory of names,
// every other thread runs a front desk that, asked for a name, asks the directory and answers
// once the directory did. The front desk's handler is a coroutine: while it waits, its thread
// is free to serve other calls (no nested poll), and its reply goes when the coroutine ends.
//   SERIEMA_THREADS=2 seriema-run -n 2 -- ./deferred_reply
#include <fmt/format.h>

#include <atomic>
#include <map>
#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/invoke.hpp>
#include <string>

namespace invoke = seriema::invoke;
using seriema::task;
using seriema::fabric::thread_context;
using seriema::fabric::thread_id;

namespace {

constexpr thread_id directory = 0;

// Thread 0's directory (only thread 0 reads it: calls to thread 0 run there).
std::string lookup(std::uint64_t key) {
  static const std::map<std::uint64_t, std::string> names{
      {1, "Ada"}, {2, "Grace"}, {3, "Barbara"}, {4, "Frances"}};
  auto at = names.find(key % 4 + 1);
  return at->second;
}

// A front desk's handler: asks the directory, then answers with a greeting.
task<std::string> front_desk(thread_context& self, std::uint64_t key) {
  const std::string name = co_await invoke::call_return(
      self, directory, [](std::uint64_t k) { return lookup(k); }, key);
  co_return fmt::format("front desk {} says: hello, {}", self.id(), name);
}

}  // namespace

int main() try {
  seriema::fabric::runtime rt;
  std::atomic<int> wrong{0};
  rt.run([&](thread_context& me) {
    if (me.thread_count() < 2) return;
    // Ask the front desk of the next thread that is not the directory.
    thread_id desk = (me.id() + 1) % me.thread_count();
    if (desk == directory) desk = (desk + 1) % me.thread_count();
    if (desk == directory) return;
    const std::uint64_t key = me.id();
    auto greeting = invoke::call_return(
        me, desk, [](thread_context& self, std::uint64_t k) { return front_desk(self, k); }, key);
    const std::string text = greeting.get();
    fmt::print("thread {} asked front desk {}: \"{}\"\n", me.id(), desk, text);
    if (text != fmt::format("front desk {} says: hello, {}", desk, lookup(key))) ++wrong;
  });
  return wrong == 0 ? 0 : 1;
} catch (const std::exception& e) {
  fmt::print(stderr, "deferred_reply: {}\n", e.what());
  return 1;
}

// Futures in a few lines: every thread asks the next one (possibly in another process) for a
// value of any type, here a std::vector<std::string>, gathers 16 answers with when_all, and
// catches an exception thrown by the called function (a std::out_of_range, thrown again here).
//   SERIEMA_THREADS=2 seriema-run -n 2 -- ./futures
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/invoke.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace invoke = seriema::invoke;
using seriema::fabric::thread_context;

int main() try {
  seriema::fabric::runtime rt;
  int failures = 0;  // counted by every thread; checked by the process at the end
  std::mutex failures_mutex;
  auto fail = [&](const std::string& what) {
    std::lock_guard lock(failures_mutex);
    fmt::print(stderr, "futures: {}\n", what);
    ++failures;
  };
  rt.run([&](thread_context& me) {
    const auto next = (me.id() + 1) % me.thread_count();
    // A value of any type cereal serializes comes back; get() waits, serving calls meanwhile.
    auto names = invoke::call_return(me, next, [](thread_context& self) {
      return std::vector<std::string>{"thread " + std::to_string(self.id()),
                                      "process " + std::to_string(self.process())};
    });
    const std::vector<std::string> got = names.get();
    fmt::print("thread {} asked thread {}: {}\n", me.id(), next, got);
    if (got.at(0) != "thread " + std::to_string(next)) fail("a wrong answer");

    // 16 questions in flight at once, gathered in order.
    std::vector<seriema::future<int>> squares;
    for (int i = 0; i < 16; ++i) {
      squares.push_back(invoke::call_return(me, (me.id() + i) % me.thread_count(),
                                            [](int x) { return x * x; }, i));
    }
    const std::vector<int> values = invoke::when_all(me, std::move(squares)).get();
    if (values.at(15) != 225) fail("a wrong square");

    // The called function's exception is thrown here, as the type it had there.
    auto lookup = invoke::call_return(me, next, [](thread_context&, const std::string& key) {
      const std::vector<int> table{1, 2, 3};
      return table.at(key.size());  // out of range for long keys
    }, std::string("a long key"));
    try {
      (void)lookup.get();
      fail("no exception");
    } catch (const std::out_of_range& e) {
      const auto* origin = invoke::origin_of(e);
      fmt::print("thread {} caught std::out_of_range from thread {}: {}\n", me.id(),
                 origin != nullptr ? origin->origin_thread() : next, e.what());
    }
  });
  return failures == 0 ? 0 : 1;
} catch (const std::exception& e) {
  fmt::print(stderr, "futures: {}\n", e.what());
  return 1;
}

// Send-based remote invocation in a few lines: every thread greets the next thread (possibly in
// another process) and asks it a question with call_return.
//   SERIEMA_THREADS=2 seriema-run -n 2 -- ./send_calls
#include <fmt/format.h>

#include <seriema/fabric/runtime.hpp>

using seriema::fabric::thread_context;

int main() try {
  seriema::fabric::runtime rt;
  rt.run([](thread_context& me) {
    auto next = (me.id() + 1) % me.thread_count();
    auto from = me.id();
    // Runs on thread `next` when it polls; the capture travels with the call.
    (void)me.call(next, [from](thread_context& self) {
      fmt::print("thread {} (process {}) got a greeting from thread {}\n", self.id(),
                 self.process(), from);
    });
    seriema::fabric::return_slot<int> answer;
    auto status = me.call_return(next, [](thread_context& self) { return self.process() * 100; },
                                 answer);
    if (status != seriema::fabric::call_status::ok) {
      fmt::print(stderr, "call_return failed: {}\n", to_string(status));
      return;
    }
    me.wait_for(answer);  // keeps serving incoming calls while waiting
    fmt::print("thread {}: thread {} says its process times 100 is {}\n", me.id(), next,
               answer.value());
  });
} catch (const std::exception& e) {
  fmt::print(stderr, "send_calls: {}\n", e.what());
  return 1;
}

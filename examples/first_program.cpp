// The README's first program: every thread asks the next one (possibly in another process) for a
// greeting with co_await, for a square through a future, and sends it a call.
//   SERIEMA_THREADS=2 seriema-run -n 2 -- ./first_program
#include <cstdio>
#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/invoke.hpp>
namespace invoke = seriema::invoke;
using seriema::fabric::thread_context;

int main() {
  seriema::fabric::runtime rt;                       // bootstrap + placement from the environment
  rt.run([](thread_context& me) -> seriema::task<> { // on every worker thread of every process
    auto next = (me.id() + 1) % me.thread_count();
    // `next` runs the lambda when it polls; its value, of any type, comes back
    std::string hello = co_await invoke::call_return(me, next, [](thread_context& self) {
      return "hello from thread " + std::to_string(self.id());
    });
    auto squared = invoke::call_return(me, next, [](int x) { return x * x; }, 12);  // a future
    int value = squared.get();                       // waits, serving calls meanwhile
    std::printf("thread %u: %s; 12 x 12 = %d\n", me.id(), hello.c_str(), value);
    (void)invoke::call(me, next, [] { /* fire and forget: runs on thread `next` */ });
  });                                                // returns when every call has run
}

// One-sided remote invocation: calls written into the next thread's Messenger chunks, then batches.
//   SERIEMA_THREADS=2 seriema-run -n 2 -- ./one_sided_calls
#include <fmt/format.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/invoke.hpp>
#include <span>

using seriema::fabric::thread_context;
namespace invoke = seriema::invoke;
using invoke::call_status;
using invoke::channel;

namespace {
constexpr std::uint64_t batch = 1000;
std::atomic<std::uint64_t> calls_run{0};  // calls run by this process's threads
std::atomic<std::uint64_t> failures{0};   // calls refused by the sender, or wrong answers
void check(call_status status) {
  if (status != call_status::ok) ++failures;
}
}  // namespace

int main() try {
  seriema::fabric::runtime rt;
  rt.run([](thread_context& me) {
    const auto next = (me.id() + 1) % me.thread_count();
    const auto from = me.id();
    // write: the record goes into a chunk of `next`'s memory and is published at once.
    check(invoke::call<channel::write>(me, next, [from](thread_context& self) {
      fmt::print("thread {} (process {}) ran a one-sided call from thread {}\n", self.id(),
                 self.process(), from);
      ++calls_run;
    }));
    const std::array<std::byte, 4> bytes{std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}};
    check(invoke::call_buffer<channel::write>(
        me, next, [](std::span<std::byte> got) { calls_run += got.size() == 4 ? 1 : 0; }, bytes));
    seriema::fabric::return_slot<std::uint64_t> answer;
    check(invoke::call_return<channel::write>(
        me, next,
        [](thread_context& self) {
          ++calls_run;
          return std::uint64_t{self.id()};
        },
        answer));
    me.wait_for(answer);  // keeps running incoming calls while waiting
    if (!answer.ready() || answer.value() != next) ++failures;
    // trad: records are batched and published every SERIEMA_FLUSH_SIZE bytes, or on flush().
    invoke::aggregator<channel::trad> aggregator(me);
    for (std::uint64_t i = 0; i < batch; ++i) {
      check(aggregator.call<invoke::policy::retry>(next, [] { ++calls_run; }));
    }
    aggregator.flush();
    // The same batch through an aggregator made for `next`: no lookup of the messenger per
    // call, and the batch's write position stays in registers (keep it a local of the loop).
    invoke::aggregator_to<channel::trad> to_next = aggregator.to(next);
    for (std::uint64_t i = 0; i < batch; ++i) {
      check(to_next.call<invoke::policy::retry>([] { ++calls_run; }));
    }
    to_next.flush();
  });
  // run() returned: every call of the job has run. Sum over the processes.
  const std::uint64_t threads = rt.placement().thread_count();
  const std::uint64_t expected = threads * (3 + 2 * batch);
  const std::uint64_t ran = rt.allreduce_sum(calls_run.load());
  const std::uint64_t failed = rt.allreduce_sum(failures.load());
  const bool ok = failed == 0 && ran == expected;
  if (rt.rank() == 0) {
    fmt::print("one_sided_calls: {} threads ran {} of {} calls, {} failures: {}\n", threads, ran,
               expected, failed, ok ? "ok" : "FAILED");
  }
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  fmt::print(stderr, "one_sided_calls: {}\n", e.what());
  return 1;
}

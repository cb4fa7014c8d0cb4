// Asking every worker of the job the same question (a container's size, its parts for a
// gather): one send-based call_return per worker, all in flight at once, waited for together.
#pragma once

#include <seriema/fabric/thread_context.hpp>
#include <seriema/invoke/invoke.hpp>
#include <type_traits>
#include <utility>
#include <vector>

namespace seriema::containers::detail {

/// ask(worker's context) run on every worker, the answers in worker order; waited for by
/// `deadline` (throws the first failure in worker order as future::get does). `ask` is a remote
/// closure (trivially copyable, no pointers into this process).
template <class Ask>
auto ask_every_worker(fabric::thread_context& self, Ask ask,
                      fabric::deadline_clock::time_point deadline) {
  using R = std::invoke_result_t<Ask&, fabric::thread_context&>;
  std::vector<invoke::future<R>> answers;
  answers.reserve(self.thread_count());
  for (fabric::thread_id t = 0; t < self.thread_count(); ++t) {
    answers.push_back(invoke::call_return<invoke::channel::send>(self, t, ask));
  }
  auto all = invoke::when_all(self, std::move(answers));
  (void)all.wait(deadline);
  return all.get();
}

}  // namespace seriema::containers::detail

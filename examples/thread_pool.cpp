// A thread pool whose tasks call remote functions: each task attaches its pool thread to the
// runtime (runtime::attach), asks a worker thread somewhere in the job for a value with
// call_return, waits for it and detaches. The pool knows nothing of seriema.
//   SERIEMA_THREADS=2 seriema-run -n 2 -- ./thread_pool
#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <mutex>
#include <queue>
#include <seriema/base/error.hpp>
#include <seriema/fabric/runtime.hpp>
#include <thread>
#include <vector>

using seriema::fabric::thread_context;

// The simplest pool: a queue of tasks and threads that take them until the pool ends.
class thread_pool {
 public:
  explicit thread_pool(int threads) {
    for (int t = 0; t < threads; ++t) threads_.emplace_back([this] { work(); });
  }
  ~thread_pool() {
    {
      std::lock_guard lock(mutex_);
      ending_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }
  template <class F>
  std::future<std::invoke_result_t<F>> submit(F task) {
    auto packaged = std::make_shared<std::packaged_task<std::invoke_result_t<F>()>>(std::move(task));
    auto result = packaged->get_future();
    {
      std::lock_guard lock(mutex_);
      tasks_.push([packaged] { (*packaged)(); });
    }
    wake_.notify_one();
    return result;
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return ending_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop();
      }
      task();
    }
  }
  std::mutex mutex_;
  std::condition_variable wake_;
  std::queue<std::function<void()>> tasks_;
  bool ending_ = false;
  std::vector<std::thread> threads_;
};

// What worker `worker` answers for `task` (the caller checks it).
std::uint64_t expected_answer(std::uint64_t task, std::uint32_t worker) {
  return task * task + worker;
}

int main() try {
  seriema::fabric::runtime rt;
  thread_pool pool(3);
  constexpr std::uint64_t tasks = 12;
  rt.run([&](thread_context& me) {
    // One thread per process hands the pool its tasks; the other workers only serve calls.
    if (me.id() != rt.placement().global_id(rt.rank(), 0)) return;
    std::vector<std::future<std::uint64_t>> answers;
    for (std::uint64_t task = 0; task < tasks; ++task) {
      answers.push_back(pool.submit([&rt, task] {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        auto attached = rt.attach(deadline);  // waits for a free slot if all are held
        thread_context& ctx = attached.context();
        const auto worker = static_cast<std::uint32_t>(task % ctx.thread_count());
        seriema::fabric::return_slot<std::uint64_t> slot;
        auto status = ctx.call_return(
            worker, [task](thread_context& self) { return expected_answer(task, self.id()); },
            slot);
        if (status != seriema::fabric::call_status::ok) {
          throw seriema::error(fmt::format("task {}: {}", task, to_string(status)));
        }
        if (ctx.wait_for(slot, deadline) != seriema::fabric::outcome::done) {
          throw seriema::error(slot.describe());
        }
        if (slot.value() != expected_answer(task, worker)) {
          throw seriema::error(fmt::format("task {}: wrong answer {}", task, slot.value()));
        }
        return slot.value();
      }));
    }
    // The pool's tasks call this thread too: serve while waiting for them.
    const bool all_ready = me.wait_until([&] {
      for (auto& answer : answers) {
        if (answer.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return false;
      }
      return true;
    }, std::chrono::steady_clock::now() + std::chrono::seconds(60));
    if (!all_ready) throw seriema::error("the pool's tasks did not finish within 60 s");
    std::uint64_t sum = 0;
    for (auto& answer : answers) sum += answer.get();  // rethrows what a task threw
    fmt::print("process {}: {} pool tasks called remote workers; their answers sum to {}\n",
               rt.rank(), tasks, sum);
  });
} catch (const std::exception& e) {
  fmt::print(stderr, "thread_pool: {}\n", e.what());
  return 1;
}

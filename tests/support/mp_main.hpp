// Shared main() for multi-process GoogleTest programs: one runtime per process, tests run in
// the same order on every rank (collective tests), exit status non-zero if any rank failed.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <seriema/fabric/runtime.hpp>
#include <seriema/transfer/remote_memory.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/transports.hpp"

namespace seriema::test {

inline fabric::runtime*& the_runtime() {
  static fabric::runtime* instance = nullptr;
  return instance;
}
inline fabric::runtime& rt() { return *the_runtime(); }

// Allgather of a trivially copyable value through the bootstrap.
template <class T>
std::vector<T> allgather_value(const T& mine) {
  static_assert(std::is_trivially_copyable_v<T>);
  auto blobs = rt().allgather(std::as_bytes(std::span(&mine, 1)));
  std::vector<T> out(blobs.size());
  for (std::size_t r = 0; r < blobs.size(); ++r) {
    if (blobs[r].size() != sizeof(T)) throw std::runtime_error("allgather_value: size mismatch");
    std::memcpy(&out[r], blobs[r].data(), sizeof(T));
  }
  return out;
}

// Polls `ctx` until done() holds; every exception of type E that a poll throws (a call run
// there threw it) goes to caught(e), and polling goes on.
template <class E, class Done, class Caught>
void poll_catching(fabric::thread_context& ctx, Done done, Caught caught) {
  while (!done()) {
    try {
      ctx.poll();
    } catch (const E& thrown) {
      caught(thrown);
    }
  }
}

// On ranks other than 0: prints only failed assertions, each prefixed with the rank (rank 0
// prints the usual progress and its own failures).
class failure_printer : public ::testing::EmptyTestEventListener {
 public:
  explicit failure_printer(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    fmt::print(stderr, "rank {}: {}:{}: Failure\n{}\n", rank_,
               result.file_name() ? result.file_name() : "?", result.line_number(),
               result.message());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed()) {
      fmt::print(stderr, "rank {}: [  FAILED  ] {}.{}\n", rank_, info.test_suite_name(),
                 info.name());
    }
  }

 private:
  int rank_;
};

// Names a hung test instead of leaving it to ctest's timeout, which kills the ranks with
// nothing said: when one test (or the final runtime.finalize()) has run for longer than
// TEST_HANG_SECONDS (default 240, under the 300 s ctest gives a test program; 0 turns
// the watchdog off), the rank prints the test's name and every thread's stack (with gdb, when
// installed) to stderr and aborts. The watchdog thread only reads what the listener wrote
// under the mutex.
class hang_watchdog {
 public:
  hang_watchdog(int rank, std::chrono::seconds limit) : rank_(rank), limit_(limit) {
    if (limit_.count() > 0) thread_ = std::thread([this] { watch(); });
  }
  ~hang_watchdog() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  hang_watchdog(const hang_watchdog&) = delete;
  hang_watchdog& operator=(const hang_watchdog&) = delete;

  static std::chrono::seconds limit_from_environment() {
    const char* text = std::getenv("TEST_HANG_SECONDS");
    if (text == nullptr || *text == '\0') return std::chrono::seconds(240);
    char* end = nullptr;
    long value = std::strtol(text, &end, 10);
    if (*end != '\0' || value < 0) {
      throw std::runtime_error(fmt::format(
          "TEST_HANG_SECONDS={}: expected whole seconds (0 turns the watchdog off)",
          text));
    }
    return std::chrono::seconds(value);
  }

  // What runs now (empty: nothing being watched).
  void enter(std::string what) {
    std::lock_guard lock(mutex_);
    running_ = std::move(what);
    started_ = std::chrono::steady_clock::now();
  }
  void leave() { enter({}); }

  class listener : public ::testing::EmptyTestEventListener {
   public:
    explicit listener(hang_watchdog& watchdog) : watchdog_(watchdog) {}
    void OnTestStart(const ::testing::TestInfo& info) override {
      watchdog_.enter(fmt::format("{}.{}", info.test_suite_name(), info.name()));
    }
    void OnTestEnd(const ::testing::TestInfo&) override { watchdog_.leave(); }

   private:
    hang_watchdog& watchdog_;
  };

 private:
  void watch() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      wake_.wait_for(lock, std::chrono::seconds(1));
      if (running_.empty() || std::chrono::steady_clock::now() - started_ < limit_) continue;
      fmt::print(stderr, "rank {}: {} has run for more than {} s (TEST_HANG_SECONDS); "
                 "the stacks of its threads follow, then it aborts\n",
                 rank_, running_, limit_.count());
      std::fflush(stderr);
      if (std::system("command -v gdb >/dev/null 2>&1") == 0) {
        // gdb is our child attaching to us: allow it where Yama restricts ptrace to ancestors.
        (void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
        std::string command = fmt::format(
            "gdb -p {} -batch -nx -q -ex 'thread apply all bt' 1>&2 2>/dev/null </dev/null",
            getpid());
        (void)std::system(command.c_str());
      } else {
        fmt::print(stderr, "rank {}: (gdb is not installed: no stacks)\n", rank_);
      }
      std::abort();
    }
  }

  const int rank_;
  const std::chrono::seconds limit_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::string running_;
  std::chrono::steady_clock::time_point started_{};
  std::thread thread_;
};

inline int run_all_tests(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int status = 1;
  try {
    fabric::runtime runtime;
    the_runtime() = &runtime;
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    if (runtime.rank() != 0) {
      // Only rank 0 prints the progress lines; every rank prints its failures (failure_printer).
      delete listeners.Release(listeners.default_result_printer());
      listeners.Append(new failure_printer(runtime.rank()));
    }
    hang_watchdog watchdog(runtime.rank(), hang_watchdog::limit_from_environment());
    auto* watching = new hang_watchdog::listener(watchdog);
    listeners.Append(watching);
    status = RUN_ALL_TESTS();
    delete listeners.Release(watching);
    watchdog.enter("runtime.finalize()");
    runtime.finalize();
    watchdog.leave();
    the_runtime() = nullptr;
    if (status != 0) fmt::print(stderr, "rank {}: some tests failed\n", runtime.rank());
  } catch (const std::exception& e) {
    fmt::print(stderr, "seriema test: {}\n", e.what());
    return 1;
  }
  return status;
}

}  // namespace seriema::test

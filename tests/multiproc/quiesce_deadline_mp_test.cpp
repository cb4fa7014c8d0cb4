// quiesce() ends by its deadline when a rank does not come (2 ranks x 1 thread): rank 1 computes
// for 3 s without polling before it calls quiesce; rank 0's quiesce(1 s) throws deadline_error
// within a second or so of its deadline, and rank 1's later quiesce(1 s) ends by its own. Then
// run() reports the broken collectives on both, and finalize() is refused. Each rank exits 0 when
// it saw exactly that.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <seriema/fabric/runtime.hpp>
#include <string>
#include <thread>

using namespace seriema;
using fabric::thread_context;

int main() {
  int failures = 0;
  auto fail = [&](const std::string& what) {
    fmt::print(stderr, "FAILED: {}\n", what);
    ++failures;
  };
  try {
    fabric::runtime rt;
    if (rt.size() != 2 || rt.options().threads_per_process != 1) {
      fmt::print(stderr, "quiesce_deadline_mp_test: needs 2 processes x 1 thread\n");
      return 2;
    }
    std::string run_end = "returned normally";
    try {
      rt.run([&](thread_context& me) {
        if (rt.rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(3));
        const auto start = std::chrono::steady_clock::now();
        try {
          me.quiesce(std::chrono::seconds(1));
          fail("quiesce returned");
        } catch (const deadline_error& e) {
          const double took =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          fmt::print("rank {}: quiesce ended after {:.2f} s: {}\n", rt.rank(), took, e.what());
          if (took > 10) fail(fmt::format("quiesce ended {:.2f} s after it started", took));
        }
      });
    } catch (const std::exception& e) {
      run_end = e.what();
    }
    fmt::print("rank {}: run ended: {}\n", rt.rank(), run_end);
    if (run_end == "returned normally") fail("run() did not report the broken collectives");
    // Rank 1 ends its own quiesce by its deadline (at about 4 s) while rank 0 is still here.
    if (rt.rank() == 0) std::this_thread::sleep_for(std::chrono::seconds(5));
    try {
      rt.finalize();  // its barrier is refused (the collectives are broken); the launcher is told
    } catch (const std::exception& e) {
      fmt::print("rank {}: finalize: {}\n", rt.rank(), e.what());
    }
    fmt::print("rank {}: exiting with status {}\n", rt.rank(), failures == 0 ? 0 : 1);
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "quiesce_deadline_mp_test: {}\n", e.what());
    return 1;
  }
}

// Shared main() for multi-process GoogleTest programs: one runtime per process, tests run in
// the same order on every rank (collective tests), exit status non-zero if any rank failed.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <seriema/fabric/runtime.hpp>
#include <seriema/transfer/remote_memory.hpp>
#include <vector>

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

inline int run_all_tests(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int status = 1;
  try {
    fabric::runtime runtime;
    the_runtime() = &runtime;
    if (runtime.rank() != 0) {
      // Only rank 0 prints the progress lines; every rank prints its failures (failure_printer).
      auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
      delete listeners.Release(listeners.default_result_printer());
      listeners.Append(new failure_printer(runtime.rank()));
    }
    status = RUN_ALL_TESTS();
    runtime.finalize();
    the_runtime() = nullptr;
    if (status != 0) fmt::print(stderr, "rank {}: some tests failed\n", runtime.rank());
  } catch (const std::exception& e) {
    fmt::print(stderr, "seriema test: {}\n", e.what());
    return 1;
  }
  return status;
}

}  // namespace seriema::test

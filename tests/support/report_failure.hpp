// For multi-process test programs that are not GoogleTest (a rank dies, so no collective end):
// fail(...) prints "FAILED: ..." (what the driving scripts look for) and counts it.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <utility>

namespace seriema::test {

inline std::atomic<int> failures{0};

template <class... T>
void fail(fmt::format_string<T...> format, T&&... args) {
  fmt::print(stderr, "FAILED: {}\n", fmt::format(format, std::forward<T>(args)...));
  failures.fetch_add(1);
}

}  // namespace seriema::test

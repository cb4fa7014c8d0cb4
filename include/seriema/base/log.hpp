// How the library tells the user something: one line `seriema[rank.thread] level: text` on
// stderr, written with one write(2) so that lines of concurrent threads and processes do not mix.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string_view>
#include <utility>

namespace seriema::log {

/// Severity of a line; printed after the prefix.
enum class level {
  info,     ///< progress and facts worth knowing
  warning,  ///< something is off but the job goes on
  error     ///< something failed
};
/// The level's name ("warning"), or "unknown".
const char* to_string(level l) noexcept;

/// This process's rank in the prefix; -1 (the default) leaves it out. Set by fabric::runtime
/// once the bootstrap knows it. Thread-safe.
void set_rank(int rank) noexcept;
/// The calling thread's job-wide thread id in the prefix; -1 (the default) leaves it out. Set by
/// fabric::thread_context for the thread it belongs to.
void set_thread(std::int64_t thread) noexcept;

/// The prefix for the calling thread: "seriema[3.12] warning: ", "seriema[3] error: " (no thread),
/// "seriema info: " (no rank).
[[nodiscard]] std::string prefix(level l);

/// Writes prefix + text + '\n' to stderr. Never throws: a line that cannot be built is dropped.
/// Async-signal-unsafe (it allocates); not for signal handlers.
void write(level l, std::string_view text) noexcept;

/// Formats with fmt and writes an info line. Never throws: a line that cannot be built is dropped.
template <class... Args>
void info(fmt::format_string<Args...> format, Args&&... args) noexcept {
  try {
    write(level::info, fmt::format(format, std::forward<Args>(args)...));
  } catch (...) {  // formatting ran out of memory: nothing to say it with
  }
}

/// Formats with fmt and writes a warning line. Never throws, as info().
template <class... Args>
void warning(fmt::format_string<Args...> format, Args&&... args) noexcept {
  try {
    write(level::warning, fmt::format(format, std::forward<Args>(args)...));
  } catch (...) {
  }
}

/// Formats with fmt and writes an error line. Never throws, as info().
template <class... Args>
void error(fmt::format_string<Args...> format, Args&&... args) noexcept {
  try {
    write(level::error, fmt::format(format, std::forward<Args>(args)...));
  } catch (...) {
  }
}

}  // namespace seriema::log

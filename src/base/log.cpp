// The library's log lines: the prefix (rank and thread of the caller) and one write per line.
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <seriema/base/enum_names.hpp>
#include <seriema/base/log.hpp>
#include <string>

namespace seriema::log {
namespace {

std::atomic<int> process_rank{-1};
thread_local std::int64_t thread_id = -1;

}  // namespace

const char* to_string(level l) noexcept {
  static constexpr enum_name_entry<level> names[] = {
      {level::info, "info"}, {level::warning, "warning"}, {level::error, "error"}};
  return name_in(names, l);
}

void set_rank(int rank) noexcept { process_rank.store(rank, std::memory_order_relaxed); }

void set_thread(std::int64_t thread) noexcept { thread_id = thread; }

std::string prefix(level l) {
  const int rank = process_rank.load(std::memory_order_relaxed);
  if (rank < 0) return fmt::format("seriema {}: ", to_string(l));
  if (thread_id < 0) return fmt::format("seriema[{}] {}: ", rank, to_string(l));
  return fmt::format("seriema[{}.{}] {}: ", rank, thread_id, to_string(l));
}

void write(level l, std::string_view text) noexcept {
  try {
    std::string line = prefix(l);
    line.append(text);
    line.push_back('\n');
    const char* data = line.data();
    std::size_t left = line.size();
    while (left > 0) {
      const ssize_t n = ::write(STDERR_FILENO, data, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      data += n;
      left -= static_cast<std::size_t>(n);
    }
  } catch (...) {  // out of memory building the line: drop it
  }
}

}  // namespace seriema::log

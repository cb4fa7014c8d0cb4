// What invoke-layer multi-process tests record on the receiving side (per-thread inboxes) and
// the byte patterns / checksums they send, shared by the test programs.
#pragma once

#include <array>
#include <cstdint>
#include <cstdlib>
#include <seriema/fabric/thread_context.hpp>
#include <span>

#include "support/mp_main.hpp"

namespace seriema::test {

inline constexpr int max_local_threads = 16;
inline constexpr std::size_t max_threads = 64;

// Per local thread: what arrived. Written only by the thread itself (calls run on it); read by
// the main thread after run() returned.
struct inbox {
  std::uint64_t calls = 0;
  std::uint64_t wrong = 0;  // wrong thread, captures, buffer or order
  std::uint64_t source_sum = 0;
  std::uint64_t bytes = 0;
  std::array<std::uint64_t, max_threads> next_seq{};  // FIFO: next sequence number per sender
};
inline std::array<inbox, max_local_threads> inboxes;

inline inbox& inbox_of(fabric::thread_context& ctx) {
  return inboxes[static_cast<std::size_t>(rt().placement().locate(ctx.id()).local_thread)];
}
inline void reset_inboxes() { inboxes = {}; }
// The inbox of thread `id` when it runs in this process, else null (the checks of a receiver
// are made by the process it lives in).
inline const inbox* inbox_here(fabric::thread_id id) {
  const auto where = rt().placement().locate(id);
  if (where.process != rt().rank()) return nullptr;
  return &inboxes[static_cast<std::size_t>(where.local_thread)];
}

// A count from the environment (the sanitizer passes shrink volume tests), else `fallback`.
inline std::uint64_t env_count(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v == nullptr ? fallback : std::strtoull(v, nullptr, 10);
}

inline std::uint64_t checksum(std::span<const std::byte> bytes) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::byte b : bytes) h = (h ^ static_cast<std::uint64_t>(b)) * 1099511628211ull;
  return h;
}

inline void fill_pattern(std::span<std::byte> bytes, std::uint64_t seed) {
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& b : bytes) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<std::byte>(x);
  }
}

inline fabric::thread_id threads() { return rt().placement().thread_count(); }

}  // namespace seriema::test

// Local critical sections with hardware lock elision: a small lock that runs its sections as
// RTM transactions (Intel TSX) where the CPU has them, and takes a plain lock word otherwise.
//
// Design and invariants:
//  * The lock word `locked_` is the only state threads share. It is written only outside
//    transactions (by a thread on the fallback path: 0 -> 1 by exchange, 1 -> 0 by store).
//  * A transactional lock() starts a transaction and reads `locked_` inside it: the word is then
//    in the transaction's read set, so a thread taking the fallback lock later aborts every
//    section running speculatively, and a section never runs speculatively while the word is
//    held (it aborts explicitly instead). Either way, two sections never overlap in effect.
//  * unlock() ends the transaction when the thread is inside one (_xtest), else releases the
//    word. lock() and unlock() are out of line (src/base/critical_section.cpp, the only TU built
//    with -mrtm): an abort resumes in lock() with the stack as it was at _xbegin (RTM discards
//    every write of the transaction, the caller's frame included), the same pattern glibc's
//    elided mutexes use.
//  * After `max_attempts` aborts (or an abort RTM says a retry will not help: a capacity abort,
//    a system call inside the section) the thread takes the fallback lock; so progress never
//    depends on a transaction succeeding.
//  * Whether RTM is used is decided once per process from cpuid (leaf 7, EBX bit 11) and may be
//    turned off per critical_section (use_rtm = false). path() says which is in effect.
//  * Counters (commits, aborts, fallback acquisitions) are updated outside transactions only
//    (a counter written inside one would conflict every section with every other).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace seriema {

/// How critical_section sections run.
enum class critical_path : std::uint8_t {
  transactional,  ///< RTM transactions, the fallback lock after repeated aborts
  fallback_lock,  ///< the plain lock word only (no RTM on this CPU, or turned off)
};
/// "transactional (RTM)" or "fallback lock", or "unknown".
const char* to_string(critical_path path) noexcept;

/// True when this CPU executes RTM transactions (cpuid leaf 7, EBX bit 11; always false on
/// other architectures or when the library was built without RTM support). Decided once.
[[nodiscard]] bool cpu_has_rtm() noexcept;

/// A local (one process) lock whose sections run as hardware transactions where the CPU has RTM
/// (lock elision: sections that touch different data run in parallel), and under a plain lock
/// word otherwise or after repeated aborts. BasicLockable: use it with std::lock_guard or
/// std::unique_lock. Sections must not do I/O or system calls if they want to stay
/// transactional (those abort to the fallback lock, which is still correct).
/// Thread-safety: every member may be called by any thread; lock/unlock pairs on one thread.
class critical_section {
 public:
  /// Aborts a thread tolerates before taking the fallback lock (default).
  static constexpr unsigned default_max_attempts = 8;

  /// use_rtm: false forces the fallback lock even where the CPU has RTM (tests, measurements).
  explicit critical_section(bool use_rtm = true,
                            unsigned max_attempts = default_max_attempts) noexcept;
  critical_section(const critical_section&) = delete;
  critical_section& operator=(const critical_section&) = delete;

  /// Enters the section: a transaction, or the fallback lock (waiting for its holder, another
  /// thread of this process in its own section, as std::mutex does).
  void lock() noexcept;
  /// Enters the section unless the fallback lock stays held by another thread until `deadline`;
  /// returns whether it entered.
  [[nodiscard]] bool try_lock_until(std::chrono::steady_clock::time_point deadline) noexcept;
  /// Leaves the section entered by this thread's lock() or successful try_lock_until().
  void unlock() noexcept;

  /// Which path sections take (fixed at construction).
  [[nodiscard]] critical_path path() const noexcept { return path_; }
  /// Sections that committed as transactions (relaxed read).
  [[nodiscard]] std::uint64_t commits() const noexcept {
    return commits_.load(std::memory_order_relaxed);
  }
  /// Transactions that aborted (each retried or ended on the fallback lock; relaxed read).
  [[nodiscard]] std::uint64_t aborts() const noexcept {
    return aborts_.load(std::memory_order_relaxed);
  }
  /// Sections that ran under the fallback lock (relaxed read).
  [[nodiscard]] std::uint64_t fallbacks() const noexcept {
    return fallbacks_.load(std::memory_order_relaxed);
  }

 private:
  /// Tries transactions (waiting for a fallback holder at most until `deadline`); true when one
  /// runs now (the caller is inside it).
  bool enter_transaction(std::chrono::steady_clock::time_point deadline) noexcept;
  /// Takes the fallback word, giving up at `deadline`; true when taken.
  bool acquire_fallback(std::chrono::steady_clock::time_point deadline) noexcept;

  alignas(64) std::atomic<std::uint32_t> locked_{0};  ///< the fallback lock word (1: held)
  critical_path path_;
  unsigned max_attempts_;
  alignas(64) std::atomic<std::uint64_t> commits_{0};
  std::atomic<std::uint64_t> aborts_{0};
  std::atomic<std::uint64_t> fallbacks_{0};
};

}  // namespace seriema

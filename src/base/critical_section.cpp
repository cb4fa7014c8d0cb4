// critical_section: RTM lock elision with a fallback lock word (invariants in the header). The
// only file built with -mrtm (CMakeLists.txt); the RTM instructions run only after cpuid said the
// CPU has them.
#include <seriema/base/critical_section.hpp>
#include <seriema/base/enum_names.hpp>
#include <thread>

#if defined(__x86_64__) && defined(__RTM__)
#include <cpuid.h>
#include <immintrin.h>
#define SERIEMA_HAVE_RTM 1
#else
#define SERIEMA_HAVE_RTM 0
#endif

namespace seriema {

namespace {

#if SERIEMA_HAVE_RTM
/// The explicit abort code of a transaction that found the fallback word held.
constexpr unsigned lock_held_abort = 0xff;

bool detect_rtm() noexcept {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return false;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  return (ebx & (1u << 11)) != 0;  // CPUID.(EAX=7,ECX=0):EBX.RTM[bit 11]
}
#endif

/// Waits a little between looks at a held word: pause first, then leave the core.
void back_off(unsigned& spins) noexcept {
  if (++spins < 64) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
    return;
  }
  std::this_thread::yield();
}

}  // namespace

const char* to_string(critical_path path) noexcept {
  static constexpr enum_name_entry<critical_path> names[] = {
      {critical_path::transactional, "transactional (RTM)"},
      {critical_path::fallback_lock, "fallback lock"},
  };
  return name_in(names, path);
}

bool cpu_has_rtm() noexcept {
#if SERIEMA_HAVE_RTM
  static const bool has = detect_rtm();
  return has;
#else
  return false;
#endif
}

critical_section::critical_section(bool use_rtm, unsigned max_attempts) noexcept
    : path_(use_rtm && cpu_has_rtm() ? critical_path::transactional
                                     : critical_path::fallback_lock),
      max_attempts_(max_attempts) {}

bool critical_section::enter_transaction(std::chrono::steady_clock::time_point deadline) noexcept {
#if SERIEMA_HAVE_RTM
  for (unsigned attempt = 0; attempt < max_attempts_; ++attempt) {
    const unsigned status = _xbegin();
    if (status == _XBEGIN_STARTED) {
      // Inside the transaction: the word joins the read set; a holder means we must not run.
      if (locked_.load(std::memory_order_relaxed) == 0) return true;
      _xabort(lock_held_abort);
    }
    // Aborted: every write since _xbegin is gone; we run here again, outside the transaction.
    aborts_.fetch_add(1, std::memory_order_relaxed);
    if ((status & _XABORT_EXPLICIT) != 0 && _XABORT_CODE(status) == lock_held_abort) {
      unsigned spins = 0;
      while (locked_.load(std::memory_order_acquire) != 0) {
        if (spins >= 64 && std::chrono::steady_clock::now() >= deadline) return false;
        back_off(spins);
      }
      continue;
    }
    if ((status & _XABORT_RETRY) == 0) break;  // capacity, system call...: retrying won't help
  }
#else
  (void)deadline;
#endif
  return false;
}

bool critical_section::acquire_fallback(std::chrono::steady_clock::time_point deadline) noexcept {
  unsigned spins = 0;
  for (;;) {
    // Test, then test-and-set: waiters read the word and do not bounce its cache line.
    if (locked_.load(std::memory_order_relaxed) == 0 &&
        locked_.exchange(1, std::memory_order_acquire) == 0) {
      fallbacks_.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
    if (spins >= 64 && std::chrono::steady_clock::now() >= deadline) return false;
    back_off(spins);
  }
}

void critical_section::lock() noexcept {
  (void)try_lock_until(std::chrono::steady_clock::time_point::max());
}

bool critical_section::try_lock_until(std::chrono::steady_clock::time_point deadline) noexcept {
  if (path_ == critical_path::transactional && enter_transaction(deadline)) return true;
  return acquire_fallback(deadline);
}

void critical_section::unlock() noexcept {
#if SERIEMA_HAVE_RTM
  if (path_ == critical_path::transactional && _xtest() != 0) {
    _xend();
    commits_.fetch_add(1, std::memory_order_relaxed);  // after _xend: outside the transaction
    return;
  }
#endif
  locked_.store(0, std::memory_order_release);
}

}  // namespace seriema

// Synchronizers: counting semaphores a caller names in its calls and waits on, decremented when
// each call was transmitted or consumed (paper Table 1), and the choice between the two.
#pragma once

#include <chrono>
#include <cstdint>
#include <seriema/fabric/outcome.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <vector>

namespace seriema::invoke {

using fabric::thread_context;
using fabric::thread_id;


/// When a synchronizer is decremented for a call.
enum class notify_on : std::uint8_t {
  transmit,  ///< the call left the caller's hands: its captures and buffer may be reused
  consume,   ///< the destination ran it (one-sided: a remote atomic on the counter)
};

/// A counting semaphore in the calling thread's registered feedback area: started at `count`,
/// decremented once per call that names it. Owner: the thread that created it; it must outlive
/// the calls that name it.
class synchronizer {
 public:
  /// A synchronizer of `self` expecting `count` calls. Throws seriema::error when the thread's
  /// feedback area has no free word.
  synchronizer(thread_context& self, std::uint64_t count);
  ~synchronizer();
  synchronizer(const synchronizer&) = delete;
  synchronizer& operator=(const synchronizer&) = delete;

  [[nodiscard]] std::uint64_t remaining() const noexcept;  ///< calls not reported yet
  [[nodiscard]] bool done() const noexcept { return remaining() == 0; }  ///< every call reported
  /// Polls (serving calls, publishing batches) until the count reaches zero (done), a process
  /// that a consumption-notified call named here went to dies first (may_have_executed: the
  /// calls still counted will never be reported), or the deadline in force passes
  /// (deadline_exceeded; `deadline`, a deadline_scope, SERIEMA_TIMEOUT). The count stays as it
  /// is: remaining() says how many calls were not reported.
  fabric::outcome wait_until(fabric::deadline_clock::time_point deadline = fabric::no_deadline);
  /// wait_until with a deadline `timeout` from now.
  template <class Rep, class Period>
  fabric::outcome wait_for(std::chrono::duration<Rep, Period> timeout) {
    return wait_until(fabric::deadline_clock::now() +
                      std::chrono::duration_cast<fabric::deadline_clock::duration>(timeout));
  }
  /// wait_until() == done.
  bool wait() { return wait_until() == fabric::outcome::done; }
  /// Where it stands, without polling: done (every call reported), may_have_executed (a
  /// process a consumption-notified call went to died first), else pending. For a thread that
  /// polls on its own (an offload executor watching its requests).
  [[nodiscard]] fabric::outcome status() const noexcept;
  /// Adds `n` expected calls (a reusable synchronizer).
  void add(std::uint64_t n) noexcept;

  /// @cond INTERNAL
  // used by the primitives
  [[nodiscard]] std::uint32_t word() const noexcept { return word_; }
  void decrement() noexcept;
  /// A call naming this synchronizer for its consumption went to thread `dest`: a wait ends
  /// when that thread's process dies.
  void note_target(thread_id dest);
  /// @endcond

 private:
  [[nodiscard]] bool a_target_failed() const noexcept;
  thread_context& self_;
  std::uint32_t word_;
  /// Processes a consumption-notified call went to: bit p of target_processes_ for p < 64, and
  /// more_target_processes_[p - 64] beyond (allocated only when such a process is named).
  std::uint64_t target_processes_ = 0;
  std::vector<bool> more_target_processes_;
};


}  // namespace seriema::invoke

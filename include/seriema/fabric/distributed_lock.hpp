// A distributed lock: a fair (FIFO) queue lock on remote atomics, whose words live in registered
// memory of one thread's zone (its home), usable by every thread of the job, with a deadline on
// acquire that abandons the wait without breaking the queue.
//
// Protocol (an array queue lock after Anderson, with abandonment;
// src/fabric/atomics/distributed_lock.cpp)
//  * Memory (home's registered memory, 64 + 64 * slots bytes, words 64 bytes apart):
//    word Q at offset 0 holds next (low 32 bits: the next ticket to issue) and served (high 32
//    bits: how many tickets have finished); slot i at offset 64 + 64 * i holds the state of the
//    ticket t with t % slots == i, as (t << 2) | state, state one of waiting, granted,
//    abandoned. Tickets count modulo 2^32; `slots` is a power of two, so t % slots is the same
//    before and after the wrap.
//  * Slot ownership: slot t % slots holds (t, .) from the moment ticket t - slots finished until
//    ticket t finishes. Initially slot i holds (i, waiting), except slot 0, (0, granted): the
//    free lock is granted in advance to the next ticket.
//  * Enqueue: read Q, then CAS Q from (served, next) to (served, next + 1) if next - served <
//    slots (else the queue is full: wait, re-read). At most `slots` tickets are unfinished, so
//    ticket next's slot already holds (next, .) when it is issued.
//  * Wait: read the slot until it is (t, granted): the lock is held with ticket t. At the
//    deadline, CAS the slot (t, waiting) -> (t, abandoned); if that CAS finds (t, granted) the
//    grant won the race and acquire returns done, holding the lock (the caller asked for the
//    lock, and it came before the abandonment took effect).
//  * Release of ticket h (only the holder; h is the lowest unfinished ticket): (1) CAS slot h
//    (h, granted or abandoned) -> (h + slots, waiting), handing the slot to the ticket that will
//    use it next; (2) add 1 to served (so ticket h + slots may now be issued: its slot is
//    ready); (3) CAS slot h + 1 (h + 1, waiting) -> (h + 1, granted). If step 3 finds
//    (h + 1, abandoned), that waiter left: the releaser finishes ticket h + 1 itself (steps 1-3
//    with h + 1), and so on. Step 3 may grant a ticket not issued yet: whoever takes it next
//    finds its slot granted. The skipping is not bounded by `slots` (each finished ticket lets a
//    new one be issued, which may be abandoned too), but every turn finishes a ticket and a
//    ticket not issued yet is always waiting, so it ends once acquirers stop leaving faster than
//    the releaser skips them.
//  * Only two parties ever write a slot while it belongs to ticket t: the waiter t (waiting ->
//    abandoned) and the holder of t - 1 (waiting -> granted); both CAS from waiting, so exactly
//    one wins. Only the holder writes Q's served half; enqueuers change Q's next half by CAS.
//  * Steps whose result the queue depends on (the enqueue CAS once posted, the abandonment CAS,
//    the release) wait up to protocol_grace for their completion even past the caller's
//    deadline (a healthy link answers within microseconds; a step whose answer is lost could
//    leave a ticket nobody finishes). A step still unanswered then, or the home's process dying,
//    leaves the lock unusable: logged once per handle, and every later wait on it ends at its
//    deadline. A holder that dies makes every waiter end at its deadline (deadline_exceeded),
//    never hang.
#pragma once

#include <chrono>
#include <cstdint>
#include <seriema/fabric/outcome.hpp>
#include <seriema/fabric/placement.hpp>
#include <seriema/fabric/remote_atomic.hpp>
#include <seriema/transfer/remote_memory.hpp>
#include <type_traits>

namespace seriema::fabric {

class thread_context;

/// Where a distributed lock lives: its memory and its number of slots. Trivially copyable: send
/// it to the threads that use the lock in a call's captures (or a broadcast).
struct distributed_lock_descriptor {
  transfer::remote_memory_locator memory;  ///< the lock's words, in its home thread's zone
  std::uint32_t slots = 0;                 ///< at most this many tickets queue at once
  /// True for a descriptor made by distributed_lock::create.
  [[nodiscard]] bool valid() const noexcept { return memory.valid() && slots != 0; }
};
static_assert(std::is_trivially_copyable_v<distributed_lock_descriptor>,
              "a lock descriptor travels in call captures");

/// One thread's handle on a distributed lock (protocol at the top of distributed_lock.hpp):
/// FIFO among acquirers, acquire with a deadline (abandoned waits are skipped by the releaser),
/// waits that serve calls. Make one per thread from the shared descriptor.
/// Thread-safety: the thread that made it only. Errors: acquire and release return an outcome;
/// create, destroy and the constructor throw seriema::error.
class distributed_lock {
 public:
  /// Slots of a lock made by create() without a count: up to 64 tickets queue at once.
  static constexpr std::uint32_t default_slots = 64;
  /// How long a protocol step may wait past the caller's deadline for its answer.
  static constexpr std::chrono::seconds protocol_grace{10};

  /// Allocates and initializes a free lock in the zone of thread `home` (any process); waits,
  /// serving calls. `slots`: a power of two, 2..2^20. Throws seriema::error (bad slot count,
  /// allocation or initialization failed).
  static distributed_lock_descriptor create(thread_context& ctx, thread_id home,
                                            std::uint32_t slots = default_slots);
  /// Frees the lock's memory (no thread may use it any more). Throws seriema::error when the
  /// free cannot be sent.
  static void destroy(thread_context& ctx, const distributed_lock_descriptor& lock);

  /// This thread's handle on `lock`. Throws seriema::error for an invalid descriptor or a dead
  /// home process.
  distributed_lock(thread_context& ctx, const distributed_lock_descriptor& lock);
  /// Releases the lock if this handle still holds it (a failure is logged, never thrown).
  ~distributed_lock();
  distributed_lock(const distributed_lock&) = delete;
  distributed_lock& operator=(const distributed_lock&) = delete;

  /// Waits (serving calls) until this thread holds the lock, at most until the deadline in
  /// force. done: held (held() is true). deadline_exceeded: not held; the wait was abandoned
  /// (the queue stays intact). may_have_executed / not_executed: the home's process failed; not
  /// held. Must not be called while held().
  [[nodiscard]] outcome acquire(deadline_clock::time_point deadline = no_deadline);
  /// acquire with a deadline `timeout` from now.
  template <class Rep, class Period>
  [[nodiscard]] outcome acquire_for(std::chrono::duration<Rep, Period> timeout) {
    return acquire(deadline_clock::now() +
                   std::chrono::duration_cast<deadline_clock::duration>(timeout));
  }
  /// Hands the lock to the next waiter (skipping abandoned tickets). done, or the failure of a
  /// step (the lock is then unusable, see the protocol). Only while held().
  outcome release();

  /// Whether this handle holds the lock now.
  [[nodiscard]] bool held() const noexcept { return held_; }
  /// The ticket the lock is held with (meaningful while held(); tickets are granted in
  /// increasing order, modulo 2^32).
  [[nodiscard]] std::uint32_t ticket() const noexcept { return ticket_; }
  /// Acquires of this handle that ended by abandoning their ticket (deadline).
  [[nodiscard]] std::uint64_t abandoned() const noexcept { return abandoned_; }
  /// Abandoned tickets of any thread that this handle's releases skipped.
  [[nodiscard]] std::uint64_t skipped() const noexcept { return skipped_; }
  /// The descriptor this handle was made from.
  [[nodiscard]] const distributed_lock_descriptor& descriptor() const noexcept {
    return descriptor_;
  }

  /// Holds the lock for a scope: acquires in the constructor (with a deadline), releases in the
  /// destructor when it was acquired. Check owns_lock() (or result()) before using what the
  /// lock protects.
  class guard {
   public:
    /// Acquires `lock` by `deadline` (the deadline in force when no_deadline).
    explicit guard(distributed_lock& lock, deadline_clock::time_point deadline = no_deadline)
        : lock_(lock), result_(lock.acquire(deadline)) {}
    ~guard() {
      if (result_ == outcome::done && lock_.held()) (void)lock_.release();
    }
    guard(const guard&) = delete;
    guard& operator=(const guard&) = delete;
    /// Whether the acquire succeeded (the lock is held for this scope).
    [[nodiscard]] bool owns_lock() const noexcept { return result_ == outcome::done; }
    /// How the acquire ended.
    [[nodiscard]] outcome result() const noexcept { return result_; }

   private:
    distributed_lock& lock_;
    outcome result_;
  };

 private:
  outcome enqueue(deadline_clock::time_point deadline);
  outcome wait_for_grant(deadline_clock::time_point deadline);
  outcome abandon();
  outcome finish_ticket(std::uint32_t ticket, std::uint64_t state);
  atomic_result step(detail::atomic_op op, std::uint64_t offset, std::uint64_t operand,
                     std::uint64_t compare);
  void report_broken(const char* step_name, outcome how);

  distributed_lock_descriptor descriptor_;
  detail::remote_words words_;
  std::uint32_t ticket_ = 0;
  bool held_ = false;
  bool reported_broken_ = false;
  std::uint64_t abandoned_ = 0;
  std::uint64_t skipped_ = 0;
};

}  // namespace seriema::fabric

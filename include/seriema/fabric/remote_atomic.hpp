// Remote atomic helpers: a thread's handle on one 64-bit word of registered memory anywhere in
// the job (a remote_memory_locator and an offset), with fetch_add, add, compare_exchange,
// exchange, load and store that each end with an outcome under a deadline, serving calls while
// they wait.
//
// How an operation runs (src/fabric/atomics/remote_atomic.cpp):
//  * It is a UCX atomic posted by the thread's transmitter to the word's process (one per
//    thread and process, created on first use, kept with the thread's endpoints), followed by a
//    flush ticket; the thread then waits with thread_context::wait_until until the ticket
//    completes, so it keeps running its calls and progressing the process worker (over tcp the
//    owner's process must progress for the atomic to happen, and that owner may be waiting on
//    us). No allocation: the rkey is unpacked once, when the handle is made.
//  * Every access is an atomic of UCX, never a plain load/store through a mapped pointer, even
//    when the owner is on this machine: UCX keeps its atomics atomic with each other whatever
//    transport each initiator uses (CPU atomics over shm, the target's progress over tcp, the
//    NIC over RDMA), which a CPU access mixed with NIC atomics would not be. load() is a
//    fetch_add of 0 and store() an exchange for that reason.
//  * A fetching atomic's old value lands in a reply word of the thread (not the caller's
//    stack), which stays claimed until the operation completes even when the wait gave up:
//    a late reply never writes freed memory.
//  * Outcomes: done (the value is in atomic_result::value); deadline_exceeded (the operation
//    was posted and had not completed at the deadline: it may still take effect);
//    may_have_executed (the owner's process died or its endpoint failed after the post);
//    not_executed (refused before anything was posted: the owner is known dead, UCX refused
//    the post, or every reply word of the thread is held by operations still in flight after
//    their deadlines).
#pragma once

#include <cstdint>
#include <seriema/fabric/outcome.hpp>
#include <seriema/transfer/remote_memory.hpp>

namespace seriema::transfer {
class transmitter;
}

namespace seriema::fabric {

class thread_context;

/// How a remote atomic ended and, when it ended done, the word's value before it.
struct atomic_result {
  outcome how = outcome::pending;  ///< done, deadline_exceeded, may_have_executed, not_executed
  std::uint64_t value = 0;         ///< the old value (fetching operations; done only)
  /// True when the operation took effect and `value` is meaningful.
  [[nodiscard]] bool ok() const noexcept { return how == outcome::done; }
};

/// @cond INTERNAL
namespace detail {
/// The UCX atomic an operation posts.
enum class atomic_op : std::uint8_t { add, fetch_add, compare_swap, swap };

/// A thread's resolved view of a locator's memory (rkey unpacked on the thread's endpoint to
/// the owner) and the blocking atomics on its words. Owner thread only.
class remote_words {
 public:
  /// Resolves `memory` on `ctx`'s endpoint to its owner. Throws seriema::error for an invalid
  /// locator or a dead owner, ucx_error when the rkey cannot be unpacked.
  remote_words(thread_context& ctx, const transfer::remote_memory_locator& memory);
  /// Posts `op` on the word at `offset` (8-byte aligned, inside the memory; checked by the
  /// caller) and waits for it, serving calls, until `deadline`; with in_force (the default)
  /// the earlier deadline in force (deadline_scope, SERIEMA_TIMEOUT) ends the wait too. A
  /// protocol step that must learn its result (distributed_lock) passes in_force = false and a
  /// bounded deadline of its own.
  atomic_result execute(atomic_op op, std::uint64_t offset, std::uint64_t operand,
                        std::uint64_t compare, deadline_clock::time_point deadline,
                        bool in_force = true);
  /// Whether [offset, offset + 8) is an aligned word of the memory.
  [[nodiscard]] bool holds_word(std::uint64_t offset) const noexcept;
  [[nodiscard]] const transfer::remote_memory_locator& locator() const noexcept {
    return memory_.locator();
  }
  [[nodiscard]] thread_context& context() const noexcept { return *ctx_; }

 private:
  thread_context* ctx_;
  transfer::transmitter* transmitter_;
  transfer::remote_memory memory_;
};
}  // namespace detail
/// @endcond

/// A thread's handle on one 64-bit word of registered memory in any process (`memory` from
/// thread_context::allocate_remote, or a locator a peer sent): atomic operations on it that
/// each wait, serving calls, until they completed or the deadline (argument, deadline_scope,
/// SERIEMA_TIMEOUT: the earliest) passed. The protocol and the outcomes are described at the top
/// of remote_atomic.hpp. Make one per thread from the shared locator; the handle is cheap to
/// use (no allocation per operation) and costs one rkey unpack to make.
/// Thread-safety: the thread that made it only. Errors: operations report their own failures in
/// the outcome (they do not throw for them); the constructor throws seriema::error. A call that
/// throws while an operation waits does not end the wait: its exception leaves the thread's next
/// outer poll (thread_context::deferring_scope).
class remote_atomic {
 public:
  /// The word at `offset` of `memory`. Throws seriema::error when the word is not 8-byte
  /// aligned or not inside the memory, or the locator is invalid or its owner dead.
  remote_atomic(thread_context& ctx, const transfer::remote_memory_locator& memory,
                std::uint64_t offset);

  /// Adds `value`; result.value is the word before.
  [[nodiscard]] atomic_result fetch_add(std::uint64_t value,
                                        deadline_clock::time_point deadline = no_deadline);
  /// Adds `value`, waiting until the addition took effect (nothing fetched).
  [[nodiscard]] outcome add(std::uint64_t value,
                            deadline_clock::time_point deadline = no_deadline);
  /// Stores `desired` if the word equals `expected`; result.value is the word before, so the
  /// exchange happened iff result.ok() && result.value == expected.
  [[nodiscard]] atomic_result compare_exchange(
      std::uint64_t expected, std::uint64_t desired,
      deadline_clock::time_point deadline = no_deadline);
  /// Stores `value`; result.value is the word before.
  [[nodiscard]] atomic_result exchange(std::uint64_t value,
                                       deadline_clock::time_point deadline = no_deadline);
  /// Reads the word (atomically with other initiators' atomics: a fetch_add of 0).
  [[nodiscard]] atomic_result load(deadline_clock::time_point deadline = no_deadline);
  /// Writes the word (atomically with other initiators' atomics: an exchange).
  [[nodiscard]] outcome store(std::uint64_t value,
                              deadline_clock::time_point deadline = no_deadline);

  /// The memory the word is in, and the word's offset inside it.
  [[nodiscard]] const transfer::remote_memory_locator& memory() const noexcept {
    return words_.locator();
  }
  /// Byte offset of the word inside memory().
  [[nodiscard]] std::uint64_t offset() const noexcept { return offset_; }

 private:
  detail::remote_words words_;
  std::uint64_t offset_;
};

}  // namespace seriema::fabric

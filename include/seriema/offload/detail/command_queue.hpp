// The bounded multi-producer, single-consumer queue between requesters and one executor, with
// the seed's sleep bit in its tail counter: a requester pays one compare-and-swap and no system
// call while the executor is awake, and wakes it (a futex) only when it saw it asleep.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <thread>

namespace seriema::offload::detail {

// Words and who writes them:
//  * tail_ = (claimed << 1) | awake. Requesters claim entry `claimed` with a CAS that adds one
//    and sets `awake`; the executor clears `awake` with a CAS only while the queue is empty
//    (claimed == head_), and sets it again itself when it stays up. Every change of tail_ is a
//    CAS or fetch_or on the one word, so a requester that claims an entry after the executor
//    decided to sleep sees awake == 0 and wakes it (no lost wake-up), and a requester that saw
//    awake == 1 knows the executor will look at the queue again before it can sleep (its CAS
//    to sleep would fail on the changed count).
//  * head_: the next entry the consumer takes; written by the consumer only (release, after it
//    is done with the entry), read by requesters to refuse a claim when the queue is full.
//  * Entry i holds claim c (c mod N == i); its `sequence` is c + 1 once the requester wrote it
//    (release), so the consumer reads a complete entry (acquire) and never an older claim's.
//    A claim is refused while claimed - head_ == N, so an entry is never rewritten before the
//    consumer let it go.
template <class Payload>
class command_queue {
 public:
  // `entries` must be a power of two (the engine checks its options).
  explicit command_queue(std::size_t entries)
      : mask_(entries - 1), slots_(std::make_unique<slot[]>(entries)) {}

  struct claim_result {
    bool claimed = false;     // false: the queue was full, nothing was claimed
    bool was_asleep = false;  // the executor had cleared `awake`: the caller wakes it
  };

  // Claims the next entry, writes payload `p` into it and commits it.
  claim_result push(const Payload& p) noexcept {
    std::uint64_t tail = tail_.load(std::memory_order_relaxed);
    for (;;) {
      const std::uint64_t claim = tail >> 1;
      const std::uint64_t head = head_.load(std::memory_order_acquire);
      if (head > claim) {  // `tail` is stale: others claimed and the consumer took them since
        tail = tail_.load(std::memory_order_relaxed);
        continue;
      }
      if (claim - head > mask_) return {};
      if (tail_.compare_exchange_weak(tail, ((claim + 1) << 1) | 1, std::memory_order_seq_cst,
                                      std::memory_order_relaxed)) {
        slot& s = slots_[claim & mask_];
        s.payload = p;
        s.sequence.store(claim + 1, std::memory_order_release);
        return {true, (tail & 1) == 0};
      }
    }
  }

  // Consumer: the next committed entry, or null when none is (the queue is empty or its next
  // claim is still being written). Give it back with pop() before the next front().
  Payload* front() noexcept {
    slot& s = slots_[head_value_ & mask_];
    if (s.sequence.load(std::memory_order_acquire) != head_value_ + 1) return nullptr;
    return &s.payload;
  }
  void pop() noexcept { head_.store(++head_value_, std::memory_order_release); }

  // Whether an entry was claimed that the consumer has not taken (any thread; seq_cst, so the
  // delegation protocol's "unlock, then look" pairs with the requesters' "claim, then lock").
  [[nodiscard]] bool has_claims() const noexcept {
    return (tail_.load(std::memory_order_seq_cst) >> 1) != head_.load(std::memory_order_seq_cst);
  }
  // Entries claimed and not taken yet (statistics).
  [[nodiscard]] std::uint64_t depth() const noexcept {
    return (tail_.load(std::memory_order_relaxed) >> 1) - head_.load(std::memory_order_relaxed);
  }

  // Consumer: clears `awake` if nothing is claimed; returns whether it did (`slept` is then
  // the tail word it cleared it in). The caller then re-checks what else may need it and
  // either wakes itself (stay_awake) or waits with wait_while_asleep(slept).
  bool try_sleep(std::uint64_t& slept) noexcept {
    std::uint64_t tail = tail_.load(std::memory_order_seq_cst);
    if ((tail >> 1) != head_value_ || (tail & 1) == 0) return false;
    slept = tail & ~std::uint64_t{1};
    return tail_.compare_exchange_strong(tail, slept, std::memory_order_seq_cst);
  }
  void stay_awake() noexcept { tail_.fetch_or(1, std::memory_order_seq_cst); }
  // Blocks (a futex) until the tail word is no longer `slept`: a claim or a wake changed it.
  void wait_while_asleep(std::uint64_t slept) noexcept {
    tail_.wait(slept, std::memory_order_seq_cst);
  }
  // Anyone: sets `awake` and wakes the executor if it had cleared it (a kick without a claim:
  // direct injection's in-flight work, the engine's stop). Returns whether it was asleep.
  bool wake() noexcept {
    const bool was_asleep = (tail_.fetch_or(1, std::memory_order_seq_cst) & 1) == 0;
    if (was_asleep) tail_.notify_one();
    return was_asleep;
  }
  // Whether the executor cleared `awake` (seq_cst: read after raising in_flight, see
  // lane::executor_loop).
  [[nodiscard]] bool asleep() const noexcept {
    return (tail_.load(std::memory_order_seq_cst) & 1) == 0;
  }
  // A requester that claimed with was_asleep wakes the executor with this.
  void notify() noexcept { tail_.notify_one(); }

 private:
  struct slot {
    std::atomic<std::uint64_t> sequence{0};
    Payload payload{};
  };
  const std::uint64_t mask_;
  std::unique_ptr<slot[]> slots_;
  std::uint64_t head_value_ = 0;  // consumer's copy of head_
  alignas(64) std::atomic<std::uint64_t> head_{0};
  alignas(64) std::atomic<std::uint64_t> tail_{1};  // awake at start
};

}  // namespace seriema::offload::detail

// A request's record (how it ends, its value, who still holds it) and the engine's fixed pool
// of records, shared by the requester's future and the executor that carries the request out.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <seriema/fabric/outcome.hpp>
#include <seriema/fabric/placement.hpp>
#include <seriema/transfer/completion.hpp>

namespace seriema::offload::detail {

// Ownership: a record is held by the requester's future and by the engine until the request
// ended (two holders); the last to let go gives it back to the pool. `state` goes from pending
// to one outcome exactly once, by CAS: the executor ends it (after writing `value` or
// `failure`, release), or the future's wait ends it deadline_exceeded first, in which case the
// executor's later end changes nothing. Fields below `state` are written by the executor
// before it ends the record and read by the requester after it saw the end (acquire).
struct alignas(64) request_record {
  static constexpr std::size_t value_capacity = 64;   // a call_return's value, an old word
  static constexpr std::size_t future_capacity = 16;  // the executor's invoke::future<R>

  std::atomic<std::uint8_t> state{0};    // fabric::outcome; 0 = pending
  std::atomic<std::uint8_t> holders{0};  // future + engine while pending
  std::uint16_t lane = 0;                // the lane carrying it (delegation drives that lane)
  std::uint32_t index = 0;               // in the pool
  std::atomic<std::uint32_t> next_free{0};  // pool free list (valid while free)
  fabric::thread_id destination = 0;     // thread called, or the memory's process for transfers
  int process = -1;
  // Executor's: the next record in the same in-flight list, the flush that completes a
  // transfer, and for a call_return the check that reads the executor's future.
  request_record* next = nullptr;
  transfer::completion_tag tag{};
  bool (*check)(request_record&) = nullptr;
  void (*cancel)(request_record&) noexcept = nullptr;
  void (*destroy_value)(request_record&) noexcept = nullptr;
  std::exception_ptr failure;
  alignas(16) std::byte value[value_capacity]{};
  alignas(8) std::byte pending_future[future_capacity]{};

  // The state while the executor writes the value or failure (read as pending).
  static constexpr std::uint8_t ending = 0xff;

  [[nodiscard]] fabric::outcome result() const noexcept {
    const std::uint8_t s = state.load(std::memory_order_acquire);
    return s == ending ? fabric::outcome::pending : static_cast<fabric::outcome>(s);
  }
  // Executor: takes the right to end the record (false: the future ended it first); then it
  // writes the value or failure and publishes the outcome.
  bool claim() noexcept {
    std::uint8_t pending = 0;
    return state.compare_exchange_strong(pending, ending, std::memory_order_acquire,
                                         std::memory_order_relaxed);
  }
  void publish(fabric::outcome how) noexcept {
    state.store(static_cast<std::uint8_t>(how), std::memory_order_release);
  }
  // Ends the record with `how` and nothing else unless it ended (or is ending) already.
  bool end(fabric::outcome how) noexcept {
    std::uint8_t pending = 0;
    return state.compare_exchange_strong(pending, static_cast<std::uint8_t>(how),
                                         std::memory_order_acq_rel, std::memory_order_acquire);
  }
};

// A fixed array of records and a lock-free free list (Treiber stack whose head carries a tag in
// its high half against ABA: a record popped and pushed back between another thread's load and
// CAS changes the tag). No allocation after construction.
class request_pool {
 public:
  explicit request_pool(std::size_t capacity)
      : records_(std::make_unique<request_record[]>(capacity)), capacity_(capacity) {
    for (std::size_t i = 0; i < capacity; ++i) {
      records_[i].index = static_cast<std::uint32_t>(i);
      records_[i].next_free.store(static_cast<std::uint32_t>(i + 1), std::memory_order_relaxed);
    }
    head_.store(0, std::memory_order_relaxed);  // tag 0, index 0; index == capacity: empty
  }

  // A free record with two holders, or null when every record is in use.
  request_record* take() noexcept {
    std::uint64_t head = head_.load(std::memory_order_acquire);
    for (;;) {
      const auto index = static_cast<std::uint32_t>(head);
      if (index >= capacity_) return nullptr;
      // A stale read (the record was taken meanwhile) fails the CAS below: the tag changed.
      const std::uint32_t next = records_[index].next_free.load(std::memory_order_relaxed);
      const std::uint64_t tag = (head >> 32) + 1;
      if (head_.compare_exchange_weak(head, (tag << 32) | next, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
        request_record& r = records_[index];
        r.state.store(0, std::memory_order_relaxed);
        r.holders.store(2, std::memory_order_relaxed);
        in_use_.fetch_add(1, std::memory_order_relaxed);
        return &r;
      }
    }
  }

  // One holder lets go; the last gives the record back. Returns true when that left the pool
  // with no record in use and its owner's hold gone (release_owner): the caller deletes it.
  bool release(request_record& r) noexcept {
    if (r.holders.fetch_sub(1, std::memory_order_acq_rel) != 1) return false;
    if (r.destroy_value != nullptr) r.destroy_value(r);
    r.destroy_value = nullptr;
    r.failure = nullptr;
    r.check = nullptr;
    r.cancel = nullptr;
    r.next = nullptr;
    r.tag = {};
    std::uint64_t head = head_.load(std::memory_order_relaxed);
    for (;;) {
      r.next_free.store(static_cast<std::uint32_t>(head), std::memory_order_relaxed);
      const std::uint64_t tag = (head >> 32) + 1;
      if (head_.compare_exchange_weak(head, (tag << 32) | r.index, std::memory_order_acq_rel,
                                      std::memory_order_relaxed)) {
        break;
      }
    }
    return in_use_.fetch_sub(1, std::memory_order_acq_rel) == 1;
  }
  // The engine's own hold (counted in in_use_ from the start, so records let go while it lives
  // never empty the count). Returns true when nothing else holds the pool: delete it.
  bool release_owner() noexcept { return in_use_.fetch_sub(1, std::memory_order_acq_rel) == 1; }

  // Records in use (the owner's hold not counted while it lasts).
  [[nodiscard]] std::size_t in_use() const noexcept {
    return in_use_.load(std::memory_order_relaxed) - 1;
  }
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }

 private:
  std::unique_ptr<request_record[]> records_;
  std::size_t capacity_;
  alignas(64) std::atomic<std::uint64_t> head_{0};
  alignas(64) std::atomic<std::size_t> in_use_{1};  // records taken, plus the owner's hold
};

}  // namespace seriema::offload::detail

namespace seriema::offload {
class engine;
}

namespace seriema::offload::detail {

// What futures share with their engine. It outlives the engine while futures still hold
// records (they stay readable); whichever of the engine and those futures lets go last deletes
// it (request_pool::release / release_owner say who). A transfer UCX never completed keeps its
// record, and then the pool, for good: UCX may still write into it.
struct engine_core {
  explicit engine_core(std::size_t records) : pool(records) {}
  request_pool pool;
  std::atomic<engine*> live{nullptr};  // null once the engine's destruction began
  // Threads inside the engine through a future's turn or a submission (engine_use): the
  // destructor clears `live`, then waits for none (each side seq_cst: a user that raised the
  // count before `live` was cleared is waited for; one after sees it cleared).
  std::atomic<int> users{0};
  std::chrono::milliseconds get_timeout{0};
};

// Counts the calling thread among the engine's users while it lives (engine_core::users).
class engine_use {
 public:
  explicit engine_use(engine_core& core) noexcept : core_(core) {
    core_.users.fetch_add(1, std::memory_order_seq_cst);
  }
  ~engine_use() { core_.users.fetch_sub(1, std::memory_order_release); }
  engine_use(const engine_use&) = delete;
  engine_use& operator=(const engine_use&) = delete;
  // The engine, or null once its destruction began.
  [[nodiscard]] engine* live() const noexcept {
    return core_.live.load(std::memory_order_seq_cst);
  }

 private:
  engine_core& core_;
};

}  // namespace seriema::offload::detail

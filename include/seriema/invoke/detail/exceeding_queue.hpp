// The messenger's local queue: records that found no room in the ring (overflow aggregation,
// retry_async, replies), kept in FIFO order until drain() moves them into the ring. Its members
// are defined in src/invoke/messenger_send.cpp, with the queue path that inlines them.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <seriema/transfer/completion.hpp>
#include <seriema/transfer/memory.hpp>
#include <span>
#include <vector>

namespace seriema::invoke {

// Locally queued records (overflow aggregation, RetryAsync, replies that found no room), in
// FIFO order, as complete wire records laid end to end in pages. Pages are heap memory, or,
// once use_registered() was called (a messenger to another machine), registered pages carved
// from blocks of the thread's arena, so that a run of records goes out from the queue itself
// (put or write message) with no second copy. A registered page that was read by a put or a
// send carries the transmitter's completion tags: once popped it is reused only when they are
// all complete (the transfer finished reading it). Owner thread only.
class exceeding_queue {
 public:
  exceeding_queue() = default;
  ~exceeding_queue();
  exceeding_queue(const exceeding_queue&) = delete;
  exceeding_queue& operator=(const exceeding_queue&) = delete;

  // From now on pages of `page_size` bytes come from `source` (at most `max_bytes` of it;
  // records larger than a page, and pages past the cap or when the source is exhausted, go to
  // heap pages). `source` must outlive the queue.
  void use_registered(transfer::block_source& source, std::size_t page_size,
                      std::size_t max_bytes);
  [[nodiscard]] bool empty() const noexcept { return pages_.empty(); }
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
  // Space for a record of `size` bytes at the tail; commit() makes it part of the queue.
  std::byte* reserve(std::size_t size);
  void commit(std::size_t size) noexcept;
  // Space for a record of `size` bytes ahead of every queued record, in a heap page of its own
  // (a rare path: a call that must go before records queued while it waited); commit_front()
  // makes it the oldest record.
  std::byte* reserve_front(std::size_t size);
  void commit_front(std::size_t size) noexcept;
  // The oldest record (its header says its size); pop() removes it.
  [[nodiscard]] std::span<const std::byte> front() const noexcept;
  void pop() noexcept;
  void clear() noexcept;

  // Whole records at the front of the queue, contiguous in one registered page.
  struct run {
    std::span<const std::byte> bytes;
    std::size_t records = 0;
    transfer::unit_tags* tags = nullptr;  // the page's: tag every transfer that reads `bytes`
  };
  // Whether the oldest record lies in a registered page (else it must be copied to be sent).
  [[nodiscard]] bool front_registered() const noexcept { return pages_.front().tags != nullptr; }
  // The longest run of records at the front, in its page, of at most `limit` bytes (no records
  // when the oldest is larger). Precondition: front_registered().
  [[nodiscard]] run front_run(std::size_t limit) const noexcept;
  // Removes the run's records; true when that emptied (and retired) their page.
  bool pop_run(const run& r) noexcept;

 private:
  static constexpr std::size_t heap_page_size = 64 * 1024;
  struct page {
    std::byte* data = nullptr;
    std::size_t capacity = 0;
    std::size_t head = 0;                 // first unread byte
    std::size_t tail = 0;                 // end of committed records
    std::unique_ptr<std::byte[]> heap;    // a heap page owns its bytes
    transfer::unit_tags* tags = nullptr;  // a registered page's completion tags (else null)
  };
  // A page for a record of `size` bytes: a registered one when possible, else a heap one.
  page take_page(std::size_t size);
  bool take_registered_page(page& out);
  bool carve_block();
  // Puts an emptied page aside: a registered one is reused once its tags are complete.
  void retire(page&& p) noexcept;

  std::deque<page> pages_;
  std::size_t bytes_ = 0;
  transfer::block_source* source_ = nullptr;  // null: heap pages only
  std::size_t page_size_ = 0;                 // bytes of a registered page
  std::size_t max_blocks_ = 0;                // blocks the queue may take from source_
  std::vector<transfer::memory_block> blocks_;
  std::deque<transfer::unit_tags> tags_;  // one per registered page; a deque keeps them in place
  std::vector<page> spare_;               // registered pages never handed out yet
  std::deque<page> retired_;              // emptied registered pages, in retirement order
};

}  // namespace seriema::invoke

// The messenger's local queue (exceeding_queue): FIFO records across pages, runs of whole
// records within one registered page, and a page's reuse only once the transfers that read it
// completed (its tags); heap pages when no registered page may be taken.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <seriema/invoke/detail/exceeding_queue.hpp>
#include <seriema/invoke/detail/record_copy.hpp>
#include <seriema/invoke/detail/wire.hpp>
#include <seriema/transfer/heap_block_source.hpp>
#include <vector>

namespace {

using seriema::invoke::exceeding_queue;
using seriema::transfer::block_size;
using seriema::transfer::completion_counter;
using seriema::transfer::heap_block_source;
namespace wire = seriema::invoke::wire;

constexpr std::size_t page = 64 * 1024;

// Queues one record whose closure is `closure_size` bytes of `seq`; returns its size.
std::size_t push(exceeding_queue& q, std::uint32_t seq, std::size_t closure_size) {
  std::vector<std::byte> closure(closure_size, static_cast<std::byte>(seq & 0xFF));
  const std::size_t size = wire::record_size(closure.size(), 0, 0);
  std::byte* p = q.reserve(size);
  seriema::invoke::detail::serialize_record(p, size, seq, closure, 0, {}, {});
  q.commit(size);
  return size;
}

// The function id of the record at `p` (push stores the sequence number there).
std::uint32_t seq_at(const std::byte* p) {
  wire::record_header h;
  std::memcpy(&h, p, sizeof h);
  return h.function;
}

TEST(ExceedingQueue, HeapPagesKeepFifoOrder) {
  exceeding_queue q;
  std::size_t total = 0;
  for (std::uint32_t i = 0; i < 5000; ++i) total += push(q, i, 8 + (i % 37) * 8);
  EXPECT_EQ(q.bytes(), total);
  for (std::uint32_t i = 0; i < 5000; ++i) {
    ASSERT_FALSE(q.empty());
    EXPECT_FALSE(q.front_registered());
    ASSERT_EQ(seq_at(q.front().data()), i);
    q.pop();
  }
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.bytes(), 0u);
}

TEST(ExceedingQueue, RunsAreWholeRecordsOfOnePageInOrder) {
  heap_block_source source;
  exceeding_queue q;
  q.use_registered(source, page, block_size);
  for (std::uint32_t i = 0; i < 3000; ++i) push(q, i, 8 + (i % 5) * 40);
  std::uint32_t next = 0;
  while (!q.empty()) {
    ASSERT_TRUE(q.front_registered());
    const exceeding_queue::run r = q.front_run(1000);
    ASSERT_GT(r.records, 0u);
    ASSERT_NE(r.tags, nullptr);
    EXPECT_LE(r.bytes.size(), 1000u);
    // The run is the next r.records records, back to back.
    std::size_t at = 0;
    for (std::size_t k = 0; k < r.records; ++k) {
      ASSERT_EQ(seq_at(r.bytes.data() + at), next++);
      wire::record_header h;
      std::memcpy(&h, r.bytes.data() + at, sizeof h);
      at += h.size;
    }
    EXPECT_EQ(at, r.bytes.size());
    q.pop_run(r);
  }
  EXPECT_EQ(next, 3000u);
}

// Fills one page (as many records of `closure_size` as fit); returns the records pushed.
std::uint32_t fill_page(exceeding_queue& q, std::uint32_t first, std::size_t closure_size) {
  const std::size_t size = wire::record_size(closure_size, 0, 0);
  const std::uint32_t n = static_cast<std::uint32_t>(page / size);
  for (std::uint32_t i = 0; i < n; ++i) push(q, first + i, closure_size);
  return n;
}

TEST(ExceedingQueue, PageIsReusedOnlyOnceItsTransfersCompleted) {
  heap_block_source source;
  exceeding_queue q;
  q.use_registered(source, page, block_size);  // one block: 32 pages
  constexpr std::size_t closure = 1000;
  // Page 0: sent (tagged with a ticket not yet complete) and emptied.
  std::uint32_t seq = fill_page(q, 0, closure);
  completion_counter counter;
  exceeding_queue::run r = q.front_run(page);
  const std::byte* first_page = r.bytes.data();
  ASSERT_TRUE(r.tags->add({&counter, 0}));
  ASSERT_TRUE(q.pop_run(r)) << "the page emptied";
  // The other 31 pages of the block, then one more: the retired page is still being read, the
  // cap (one block) is reached, so that page is heap memory.
  for (int p = 0; p < 31; ++p) seq += fill_page(q, seq, closure);
  push(q, seq++, closure);
  // Drain the 31 registered pages without tagging them (untagged pages count as complete).
  for (int p = 0; p < 31; ++p) {
    ASSERT_TRUE(q.front_registered());
    r = q.front_run(page);
    EXPECT_NE(r.bytes.data(), first_page);
    ASSERT_TRUE(q.pop_run(r));
  }
  EXPECT_FALSE(q.front_registered()) << "past the cap, with the retired page busy: heap";
  q.pop();
  // Page 0 still being read: a new page does not reuse it, nor the pages retired after it
  // (retired pages are reused in retirement order, the order their tickets complete in).
  push(q, seq++, closure);
  EXPECT_NE(q.front().data(), first_page);
  q.pop();
  // The flush covering ticket 0 completed: page 0 may be written again.
  counter.completed_tickets.store(1);
  push(q, seq++, closure);
  EXPECT_EQ(q.front().data(), first_page);
}

TEST(ExceedingQueue, HeapPagesWhenNoRegisteredPageFits) {
  heap_block_source exhausted(0);
  exceeding_queue q;
  q.use_registered(exhausted, page, block_size);
  push(q, 1, 8);
  EXPECT_FALSE(q.front_registered()) << "the source has no block";
  q.pop();
  heap_block_source source;
  exceeding_queue big;
  big.use_registered(source, page, block_size);
  push(big, 2, page);  // larger than a page
  EXPECT_FALSE(big.front_registered());
  EXPECT_EQ(seq_at(big.front().data()), 2u);
  big.pop();
  push(big, 3, 8);
  EXPECT_TRUE(big.front_registered());
}

}  // namespace

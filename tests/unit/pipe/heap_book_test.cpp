// The writer's book of the reader's heap: next fit wraps as a circular heap freed from its oldest
// end (out-of-order releases wait for it), the width bounds live buffers, stale entry names are
// refused, and best / worst / first fit reuse freed ranges through the general allocator.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <seriema/pipe/detail/heap_book.hpp>
#include <vector>

using namespace seriema::pipe::detail;
using seriema::transfer::fit_policy;

namespace {

struct aligned_heap {
  explicit aligned_heap(std::size_t n)
      : bytes(static_cast<std::byte*>(std::aligned_alloc(64, n)), &std::free) {}
  std::unique_ptr<std::byte, decltype(&std::free)> bytes;
};

// A written entry, as rwrite leaves it.
void write(heap_book& book, std::uint32_t entry) { book.find(entry)->state = entry_state::written; }

TEST(PipeHeapBook, NextFitWrapsAndFreesFromTheOldestEnd) {
  heap_book book(1024, 16, fit_policy::next_fit, nullptr);
  auto a = book.allocate(384);
  auto b = book.allocate(384);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->offset, 0u);
  EXPECT_EQ(b->offset, 384u);
  EXPECT_FALSE(book.allocate(384));  // 256 left at the end, and [0, 384) is live
  write(book, a->entry);
  write(book, b->entry);
  EXPECT_TRUE(book.release(a->entry));
  auto c = book.allocate(384);  // wraps to the start
  ASSERT_TRUE(c);
  EXPECT_EQ(c->offset, 0u);
  EXPECT_FALSE(book.allocate(64));  // the gap [384, 384) before b is empty
  write(book, c->entry);
  EXPECT_TRUE(book.release(b->entry));
  // c wrapped from 768: [768, 1024) holds the reader's wrap marker until c is released, so only
  // [384, 768) is free.
  EXPECT_FALSE(book.allocate(640));
  auto d = book.allocate(384);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->offset, 384u);
  EXPECT_EQ(book.find(c->entry)->holds_from, 768u);
  EXPECT_EQ(book.find(d->entry)->follows, 384u);
  write(book, d->entry);
  EXPECT_TRUE(book.release(c->entry));
  auto e = book.allocate(256);  // after d, up to the end
  ASSERT_TRUE(e);
  EXPECT_EQ(e->offset, 768u);
  EXPECT_EQ(book.peak_end(), 1024u);
}

TEST(PipeHeapBook, NextFitOutOfOrderReleaseWaitsForTheOldest) {
  heap_book book(1024, 16, fit_policy::next_fit, nullptr);
  std::vector<heap_book::grant> g;
  for (int i = 0; i < 4; ++i) {
    g.push_back(*book.allocate(256));
    write(book, g.back().entry);
  }
  EXPECT_TRUE(book.release(g[1].entry));
  EXPECT_TRUE(book.release(g[2].entry));
  EXPECT_FALSE(book.allocate(64));  // g[0] still holds the oldest end
  EXPECT_TRUE(book.release(g[0].entry));
  auto next = book.allocate(768);  // g[0..2] coalesced
  ASSERT_TRUE(next);
  EXPECT_EQ(next->offset, 0u);
}

TEST(PipeHeapBook, WidthBoundsLiveBuffersAndStaleNamesAreRefused) {
  for (fit_policy fit : {fit_policy::next_fit, fit_policy::best_fit}) {
    aligned_heap heap(8192);
    heap_book book(8192, 4, fit, heap.bytes.get());
    std::vector<heap_book::grant> g;
    for (int i = 0; i < 4; ++i) g.push_back(*book.allocate(64));
    EXPECT_FALSE(book.allocate(64)) << "width";
    EXPECT_EQ(book.live(), 4u);
    EXPECT_FALSE(book.release(g[0].entry)) << "allocated, not written";
    write(book, g[0].entry);
    EXPECT_TRUE(book.release(g[0].entry));
    EXPECT_FALSE(book.release(g[0].entry)) << "double release";
    auto again = book.allocate(64);
    ASSERT_TRUE(again);
    EXPECT_EQ(book.find(g[0].entry), nullptr) << "the old name of a reused entry";
    EXPECT_FALSE(book.release(0xffff)) << "an index past the width";
  }
}

TEST(PipeHeapBook, BestFitReusesTheSmallestHoleAndWorstTheLargest) {
  for (fit_policy fit : {fit_policy::best_fit, fit_policy::worst_fit, fit_policy::first_fit}) {
    aligned_heap heap(4096);
    heap_book book(4096, 16, fit, heap.bytes.get());
    // Holes of 128 (at 0) and 512 (at 192), separated by live buffers.
    auto h1 = *book.allocate(128);
    auto keep1 = *book.allocate(64);
    auto h2 = *book.allocate(512);
    auto keep2 = *book.allocate(64);
    write(book, h1.entry);
    write(book, h2.entry);
    ASSERT_TRUE(book.release(h1.entry));
    ASSERT_TRUE(book.release(h2.entry));
    auto g = book.allocate(128);
    ASSERT_TRUE(g);
    if (fit == fit_policy::best_fit || fit == fit_policy::first_fit) {
      EXPECT_EQ(g->offset, 0u);
    } else {  // the largest free range: the rest of the heap after keep2
      EXPECT_EQ(g->offset, 768u);
    }
    (void)keep1;
    (void)keep2;
    EXPECT_EQ(book.live_bytes(), 64u + 64u + 128u);
  }
}

}  // namespace

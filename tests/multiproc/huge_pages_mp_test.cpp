// Arena pages across processes (run by huge_pages_test.sh with and without reserved 2 MiB pages,
// over shm, tcp and two emulated machines): each rank's segments are on the pages it was told to
// expect (--expect-pages=2m|fallback), same-machine peers map them directly, and puts, gets and
// one-sided calls through them work.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstring>
#include <seriema/invoke/invoke.hpp>
#include <seriema/transfer/arena.hpp>
#include <seriema/transfer/transmitter.hpp>
#include <string>
#include <string_view>

#include "support/invoke_checks.hpp"
#include "support/mp_main.hpp"
#include "support/published_block.hpp"

using namespace seriema;
using transfer::op_status;
using test::publish_block;

namespace {

std::string expected_pages;  // "2m" or "fallback"; set from the command line before the tests

std::byte pattern(int writer, std::size_t i) {
  return static_cast<std::byte>((writer * 37 + static_cast<int>(i) * 11 + 3) & 0xff);
}


}  // namespace

TEST(HugePagesMp, SegmentsAreOnTheExpectedPages) {
  auto& rt = test::rt();
  auto published = publish_block();
  const transfer::registered_segment& segment = *published.block.segment;
  // The script greps this line: which pages each rank's arena obtained.
  fmt::print("rank {}: arena segment: {} (kernel page {} KiB), {}; not larger because: {}\n",
             rt.rank(), transfer::to_string(segment.pages), segment.page_size >> 10,
             segment.ucx_allocated ? "shm-mappable" : "private", segment.page_note);
  // Over tcp alone UCX has no shm domain and allocates private memory (no direct access).
  EXPECT_EQ(segment.ucx_allocated, !test::tcp_only()) << "shm-mappable unless UCX_TLS is tcp";
  if (expected_pages == "2m") {
    EXPECT_EQ(segment.pages, transfer::page_kind::hugetlb_2m);
    EXPECT_EQ(segment.page_size, std::size_t{2} << 20);
    EXPECT_EQ(transfer::kernel_page_size_of(published.block.data), std::size_t{2} << 20);
  } else {
    EXPECT_TRUE(segment.pages == transfer::page_kind::transparent_huge ||
                segment.pages == transfer::page_kind::normal)
        << transfer::to_string(segment.pages);
    EXPECT_EQ(segment.page_size, std::size_t{4096});
    EXPECT_NE(segment.page_note.find("2 MiB: "), std::string::npos)
        << "the fallback must say why there are no 2 MiB pages: " << segment.page_note;
  }
  rt.barrier();
  rt.local_arena().release_block(published.block);
}

TEST(HugePagesMp, SameMachinePeersMapTheSegmentDirectly) {
  auto& rt = test::rt();
  auto published = publish_block();
  for (int r = 0; r < rt.size(); ++r) {
    if (r == rt.rank()) continue;
    auto remote = rt.resolve(published.all[static_cast<std::size_t>(r)]);
    if (!rt.same_machine(r) || test::tcp_only()) {
      EXPECT_EQ(remote.direct(), nullptr) << "rank " << r;
      continue;
    }
    ASSERT_NE(remote.direct(), nullptr) << "rank " << r << ": no direct mapping of its segment";
    // Write our slot straight into the peer's huge-page memory; the peer checks it below.
    std::byte* slot = remote.direct() + static_cast<std::size_t>(rt.rank()) * 4096;
    for (std::size_t i = 0; i < 4096; ++i) slot[i] = pattern(rt.rank(), i);
  }
  rt.barrier();
  for (int w = 0; w < rt.size(); ++w) {
    if (w == rt.rank() || !rt.same_machine(w) || test::tcp_only()) continue;
    const std::byte* slot = published.block.data + static_cast<std::size_t>(w) * 4096;
    std::size_t bad = 0;
    for (std::size_t i = 0; i < 4096; ++i) bad += slot[i] != pattern(w, i);
    EXPECT_EQ(bad, 0u) << "slot written directly by rank " << w;
  }
  rt.barrier();
  rt.local_arena().release_block(published.block);
}

TEST(HugePagesMp, PutThenGetRoundTripsThroughThePeersSegment) {
  auto& rt = test::rt();
  auto published = publish_block();
  const int peer = (rt.rank() + 1) % rt.size();
  transfer::transmitter tx(rt.endpoint(peer), transfer::transmitter_options{8, true});
  auto remote = rt.resolve(published.all[static_cast<std::size_t>(peer)]);
  // Spread over the whole 2 MiB block (one huge page): 64 pieces of 1 KiB, 32 KiB apart.
  std::vector<std::byte> source(1024), back(1024);
  for (std::size_t piece = 0; piece < 64; ++piece) {
    for (std::size_t i = 0; i < source.size(); ++i) source[i] = pattern(rt.rank() + 100, i + piece);
    ASSERT_EQ(tx.put(source, remote, piece * 32768), op_status::ok);
  }
  ASSERT_EQ(tx.flush(), op_status::ok);
  std::size_t bad = 0;
  for (std::size_t piece = 0; piece < 64; ++piece) {
    transfer::unit_tags tags;
    ASSERT_EQ(tx.get(back, remote, piece * 32768, &tags), op_status::ok);
    tx.request_completion();
    while (!tags.all_complete()) tx.progress();
    for (std::size_t i = 0; i < back.size(); ++i) {
      bad += back[i] != pattern(rt.rank() + 100, i + piece);
    }
  }
  EXPECT_EQ(bad, 0u);
  rt.barrier();
  rt.local_arena().release_block(published.block);
}

TEST(HugePagesMp, OneSidedCallsRunThroughArenaChunks) {
  test::reset_inboxes();
  auto& rt = test::rt();
  rt.run([](fabric::thread_context& ctx) {
    const std::uint32_t me = ctx.id();
    for (int round = 0; round < 100; ++round) {
      for (fabric::thread_id dest = 0; dest < ctx.thread_count(); ++dest) {
        ASSERT_EQ((invoke::call<invoke::channel::write, invoke::policy::retry>(
                      ctx, dest,
                      [me](fabric::thread_context& self) {
                        test::inbox& box = test::inbox_of(self);
                        box.source_sum += me;
                        ++box.calls;
                      })),
                  invoke::call_status::ok);
      }
    }
  });
  std::uint64_t all_ids = 0;
  for (fabric::thread_id t = 0; t < test::threads(); ++t) all_ids += t;
  for (int t = 0; t < rt.options().threads_per_process; ++t) {
    EXPECT_EQ(test::inboxes[t].calls, 100 * test::threads()) << "local thread " << t;
    EXPECT_EQ(test::inboxes[t].source_sum, 100 * all_ids);
  }
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg(argv[i]);
    if (arg.starts_with("--expect-pages=")) expected_pages = arg.substr(15);
  }
  if (expected_pages != "2m" && expected_pages != "fallback") {
    fmt::print(stderr, "huge_pages_mp_test: give --expect-pages=2m or --expect-pages=fallback\n");
    return 2;
  }
  return seriema::test::run_all_tests(argc, argv);
}

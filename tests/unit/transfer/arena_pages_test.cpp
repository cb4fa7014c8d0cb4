// Arena pages with the default (UCX) source, in one process: what SERIEMA_PAGES tells UCX, what
// each segment records (the kernel's page size, shm-mappable, why not larger pages), and the
// explicit choices UCX cannot provide refused with the reason. The reserved-pages case across
// processes is tests/multiproc/huge_pages_test.sh.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <seriema/base/error.hpp>
#include <seriema/transfer/arena.hpp>
#include <string>

using namespace seriema;
using namespace seriema::transfer;

namespace {

std::size_t default_huge_page_kib() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (line.rfind("Hugepagesize:", 0) == 0) return std::stoul(line.substr(13));
  }
  return 0;
}

std::size_t free_2m_pages() {
  std::ifstream f("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages");
  std::size_t pages = 0;
  f >> pages;
  return pages;
}

arena_options ucx_options(page_preference pages) {
  arena_options options;
  options.source = memory_source::ucx;
  options.pages = pages;
  options.segment_size = std::size_t{4} << 20;
  return options;
}

}  // namespace

TEST(ArenaPages, NormalTurnsUcxHugetlbOffAndGetsBasePages) {
  context_options options;
  options.pages = page_preference::normal;
  ucx_context context(options);
  EXPECT_FALSE(context.hugetlb().allowed);
  EXPECT_NE(context.hugetlb().described.find("SERIEMA_PAGES=normal"), std::string::npos)
      << context.hugetlb().described;
  arena normal(context, -1, ucx_options(page_preference::normal));
  const registered_segment& segment = normal.grow();
  EXPECT_EQ(segment.pages, page_kind::normal);
  EXPECT_EQ(segment.page_size, 4096u);
  EXPECT_EQ(kernel_page_size_of(segment.base), 4096u);
  EXPECT_TRUE(segment.ucx_allocated) << "UCX's SysV/POSIX shared memory, mappable by peers";
  EXPECT_TRUE(segment.page_note.empty()) << segment.page_note;
}

TEST(ArenaPages, AutomaticRecordsWhatTheKernelGaveAndWhy) {
  ucx_context context{context_options{}};
  EXPECT_TRUE(context.hugetlb().allowed);
  const bool enough_2m = default_huge_page_kib() == 2048 && free_2m_pages() >= 2;
  arena automatic(context, -1, ucx_options(page_preference::automatic));
  const registered_segment& segment = automatic.grow();
  EXPECT_TRUE(segment.ucx_allocated);
  EXPECT_EQ(kernel_page_size_of(segment.base), segment.page_size);
  // 1 GiB pages need 1 GiB segments (and, from UCX, 1 GiB default pages): always explained here.
  EXPECT_NE(segment.page_note.find("1 GiB: "), std::string::npos) << segment.page_note;
  if (enough_2m) {
    EXPECT_EQ(segment.pages, page_kind::hugetlb_2m) << segment.page_note;
    EXPECT_EQ(segment.page_size, std::size_t{2} << 20);
  } else {
    EXPECT_NE(segment.pages, page_kind::hugetlb_2m);
    EXPECT_EQ(segment.page_size, 4096u);
    EXPECT_NE(segment.page_note.find("2 MiB: "), std::string::npos) << segment.page_note;
  }
  ASSERT_EQ(automatic.describe_segments().size(), 1u);
  EXPECT_NE(automatic.describe_segments()[0].find(to_string(segment.pages)), std::string::npos);
}

TEST(ArenaPages, ExplicitPagesUcxCannotProvideAreRefusedWithTheReason) {
  if (default_huge_page_kib() == 1024 * 1024) GTEST_SKIP() << "1 GiB is the default size here";
  auto options = ucx_options(page_preference::gigantic_1g);
  options.segment_size = std::size_t{1} << 30;
  try {
    options.validate();
    FAIL() << "SERIEMA_PAGES=1g with the ucx source must be refused here";
  } catch (const config_error& e) {
    EXPECT_NE(std::string(e.what()).find("default huge page size"), std::string::npos) << e.what();
  }
  options.source = memory_source::self;  // our own mmap can ask for 1 GiB pages
  EXPECT_NO_THROW(options.validate());
}

// SERIEMA_PAGES=1g with a 4 MiB segment from UCX contradicts two things at once: the segment
// size, and (where 1 GiB is not the default huge page size) what UCX can allocate. Both lines
// come in the one error, not one per start.
TEST(ArenaPages, EveryContradictionIsReportedAtOnce) {
  if (default_huge_page_kib() == 1024 * 1024) GTEST_SKIP() << "1 GiB is the default size here";
  auto options = ucx_options(page_preference::gigantic_1g);
  options.limit = std::size_t{2} << 20;  // and a limit below one segment
  try {
    options.validate();
    FAIL() << "SERIEMA_PAGES=1g with 4 MiB UCX segments must be refused";
  } catch (const config_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("SERIEMA_ARENA_LIMIT=2097152: smaller than one segment"),
              std::string::npos)
        << what;
    EXPECT_NE(
        what.find("\nSERIEMA_PAGES=1g: SERIEMA_SEGMENT_SIZE (4 MiB) must be a multiple of 1G"),
        std::string::npos)
        << what;
    EXPECT_NE(what.find("\nSERIEMA_PAGES=1g with SERIEMA_MEMORY_SOURCE=ucx"), std::string::npos)
        << what;
    EXPECT_EQ(std::count(what.begin(), what.end(), '\n'), 2) << what;  // three lines
  }
}

TEST(ArenaPages, Explicit2mFailsWithTheReasonWhenNoPagesAreFree) {
  if (free_2m_pages() != 0) GTEST_SKIP() << "2 MiB pages are free here";
  if (default_huge_page_kib() != 2048) GTEST_SKIP() << "2 MiB is not the default size here";
  ucx_context context{context_options{}};
  arena explicit_2m(context, -1, ucx_options(page_preference::hugetlb_2m));
  try {
    (void)explicit_2m.grow();
    FAIL() << "SERIEMA_PAGES=2m without free 2 MiB pages must fail";
  } catch (const seriema::error& e) {
    EXPECT_NE(std::string(e.what()).find("2 MiB: 0 free"), std::string::npos) << e.what();
  }
  EXPECT_EQ(explicit_2m.bytes_obtained(), 0u) << "the refused segment must not stay mapped";
}

TEST(ArenaPages, HugetlbModeTheUserSetIsKept) {
  ASSERT_EQ(setenv("UCX_SYSV_HUGETLB_MODE", "n", 1), 0);
  context_options options;
  options.pages = page_preference::automatic;
  ucx_context context(options);
  unsetenv("UCX_SYSV_HUGETLB_MODE");
  EXPECT_FALSE(context.hugetlb().allowed);
  EXPECT_NE(context.hugetlb().described.find("UCX_SYSV_HUGETLB_MODE=n (set by the user"),
            std::string::npos)
      << context.hugetlb().described;
  arena automatic(context, -1, ucx_options(page_preference::automatic));
  EXPECT_EQ(automatic.grow().page_size, 4096u);
}

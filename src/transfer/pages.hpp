// Probes behind the arenas' page cascade: what the kernel gave a mapping (/proc/self/smaps),
// which huge pages this machine offers (/proc/meminfo, /sys/kernel/mm), and why a segment did
// not get larger pages. Private to the transfer layer; setup path only (reads files).
#pragma once

#include <cstddef>
#include <string>

#include <seriema/transfer/memory.hpp>
#include <seriema/transfer/options.hpp>
#include <seriema/transfer/ucx.hpp>

namespace seriema::transfer::detail {

inline constexpr std::size_t two_mib = std::size_t{2} << 20;
inline constexpr std::size_t one_gib = std::size_t{1} << 30;

/// What /proc/self/smaps says about the mapping that contains an address.
struct mapping_facts {
  std::size_t kernel_page_size = 0;  ///< KernelPageSize; 0 when the address is not mapped
  bool shared_memory = false;        ///< SysV segment or /dev/shm file: peers can attach it
  bool thp_advised = false;          ///< VmFlags "hg" (madvise(MADV_HUGEPAGE) applied)
  std::string backing;               ///< the mapping's path ("/SYSV00000000 (deleted)"), or ""
};
mapping_facts probe_mapping(const void* address);

/// The kernel's default huge page size (Hugepagesize in /proc/meminfo), or 0 without huge pages.
/// SysV SHM_HUGETLB segments, which UCX allocates, always use this size.
std::size_t default_huge_page_size();
/// Free pages of `page_size` in /sys/kernel/mm/hugepages (0 when that size does not exist).
std::size_t free_huge_pages(std::size_t page_size);
/// True when madvise(MADV_HUGEPAGE) can give transparent huge pages to shared memory
/// (shmem_enabled is always, within_size, advise or force) or, with `shared` false, to anonymous
/// memory (enabled is always or madvise).
bool transparent_huge_pages_possible(bool shared);
/// The first line of a sysfs/procfs file, or "(unavailable)".
std::string first_line_of(const char* path);

/// For a UCX-allocated segment that obtained `got` under preference `want`: why the larger
/// kinds the preference allows were not obtained ("" when the first choice was). `ucx_mode` is
/// the UCX hugetlb mode of the context (ucx_context::hugetlb()).
std::string why_not_larger_pages(page_kind got, page_preference want, std::size_t segment_size,
                                 const ucx_hugetlb& ucx_mode);

/// SERIEMA_PAGES (throws config_error naming it when it is not a known choice).
page_preference pages_from_environment();

/// Throws config_error when UCX cannot provide `want` at all on this machine (explicit 1g or 2m
/// pages in another size than the default huge page size; thp without shared-memory THP).
void check_ucx_can_provide(page_preference want);

}  // namespace seriema::transfer::detail

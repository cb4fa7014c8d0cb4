// Probes behind the arenas' page cascade: smaps facts of a mapping, the machine's huge page
// reservations and THP modes, and the explanation of why a UCX segment got smaller pages.
#include "pages.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <seriema/base/error.hpp>
#include <seriema/base/settings.hpp>
#include <sstream>

namespace seriema::transfer::detail {

std::string first_line_of(const char* path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line.empty() ? "(unavailable)" : line;
}

namespace {

// "7f..-7f.. rw-s 00000000 00:01 8126467   /SYSV00000000 (deleted)": range and path of a header.
bool parse_mapping_header(const std::string& line, std::uintptr_t& lo, std::uintptr_t& hi,
                          std::string& path) {
  if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) != 2 || line.find('-') >= 17) return false;
  std::istringstream fields(line);
  std::string skip;
  for (int i = 0; i < 5; ++i) fields >> skip;  // range, perms, offset, device, inode
  std::getline(fields >> std::ws, path);
  return true;
}

std::size_t kib_field(const std::string& line, std::size_t name_length) {
  std::istringstream fields(line.substr(name_length));
  std::size_t kib = 0;
  fields >> kib;
  return kib * 1024;
}

}  // namespace

mapping_facts probe_mapping(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  const auto target = reinterpret_cast<std::uintptr_t>(address);
  mapping_facts facts;
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    std::uintptr_t lo = 0, hi = 0;
    std::string path;
    if (parse_mapping_header(line, lo, hi, path)) {
      if (inside) break;  // the mapping's fields are over
      inside = target >= lo && target < hi;
      if (inside) {
        facts.backing = path;
        facts.shared_memory = path.starts_with("/SYSV") || path.starts_with("/dev/shm/");
      }
    } else if (inside && line.starts_with("KernelPageSize:")) {
      facts.kernel_page_size = kib_field(line, 15);
    } else if (inside && line.starts_with("VmFlags:")) {
      facts.thp_advised = (line + " ").find(" hg ") != std::string::npos;
    }
  }
  return facts;
}

std::size_t default_huge_page_size() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (line.starts_with("Hugepagesize:")) return kib_field(line, 13);
  }
  return 0;
}

std::size_t free_huge_pages(std::size_t page_size) {
  const std::string path =
      fmt::format("/sys/kernel/mm/hugepages/hugepages-{}kB/free_hugepages", page_size >> 10);
  std::ifstream f(path);
  std::size_t pages = 0;
  f >> pages;
  return pages;
}

bool transparent_huge_pages_possible(bool shared) {
  const std::string mode =
      first_line_of(shared ? "/sys/kernel/mm/transparent_hugepage/shmem_enabled"
                           : "/sys/kernel/mm/transparent_hugepage/enabled");
  for (const char* yes : {"[always]", "[madvise]", "[advise]", "[within_size]", "[force]"}) {
    if (mode.find(yes) != std::string::npos) return true;
  }
  return false;
}

namespace {

std::string why_not_1g(std::size_t segment_size) {
  const std::size_t default_size = default_huge_page_size();
  if (default_size != one_gib) {
    return fmt::format(
        "1 GiB: UCX 1.13 allocates hugetlb shared memory (SysV SHM_HUGETLB) only in the default "
        "huge page size, {} KiB here (boot with default_hugepagesz=1G)",
        default_size >> 10);
  }
  if (segment_size % one_gib != 0) return "1 GiB: SERIEMA_SEGMENT_SIZE is not a multiple of 1G";
  return fmt::format("1 GiB: {} free, the segment needs {}", free_huge_pages(one_gib),
                     segment_size / one_gib);
}

std::string why_not_2m(std::size_t segment_size, const ucx_hugetlb& ucx_mode) {
  const std::size_t default_size = default_huge_page_size();
  if (!ucx_mode.allowed) return fmt::format("2 MiB: UCX hugetlb mode is {}", ucx_mode.described);
  if (default_size != two_mib) {
    return fmt::format("2 MiB: UCX uses the default huge page size ({} KiB) only",
                       default_size >> 10);
  }
  const std::size_t free = free_huge_pages(two_mib);
  if (free < segment_size / two_mib) {
    return fmt::format("2 MiB: {} free, the segment needs {} (reserve them in "
                       "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages)",
                       free, segment_size / two_mib);
  }
  return "2 MiB: shmget(SHM_HUGETLB) refused although pages are free (the user needs "
         "CAP_IPC_LOCK or the group in /proc/sys/vm/hugetlb_shm_group)";
}

std::string why_not_thp() {
  return fmt::format("THP: off for shared memory (/sys/kernel/mm/transparent_hugepage/"
                     "shmem_enabled: {})",
                     first_line_of("/sys/kernel/mm/transparent_hugepage/shmem_enabled"));
}

}  // namespace

std::string why_not_larger_pages(page_kind got, page_preference want, std::size_t segment_size,
                                 const ucx_hugetlb& ucx_mode) {
  const bool automatic = want == page_preference::automatic;
  std::string reasons;
  auto add = [&reasons](const std::string& reason) {
    reasons += (reasons.empty() ? "" : "; ") + reason;
  };
  if (got != page_kind::gigantic_1g && (automatic || want == page_preference::gigantic_1g)) {
    add(why_not_1g(segment_size));
  }
  if ((got == page_kind::transparent_huge || got == page_kind::normal) &&
      (automatic || want == page_preference::hugetlb_2m)) {
    add(why_not_2m(segment_size, ucx_mode));
  }
  if (got == page_kind::normal && (automatic || want == page_preference::transparent_huge)) {
    add(why_not_thp());
  }
  return reasons;
}

page_preference pages_from_environment() {
  static constexpr std::string_view choices[] = {"auto", "1g", "2m", "thp", "normal"};
  return static_cast<page_preference>(config::get_choice("SERIEMA_PAGES", choices));
}

void check_ucx_can_provide(page_preference want) {
  const std::size_t default_size = default_huge_page_size();
  const bool hugetlb = want == page_preference::gigantic_1g || want == page_preference::hugetlb_2m;
  const std::size_t wanted_size = want == page_preference::gigantic_1g ? one_gib : two_mib;
  if (hugetlb && default_size != wanted_size) {
    throw config_error(fmt::format(
        "SERIEMA_PAGES={} with SERIEMA_MEMORY_SOURCE=ucx: UCX 1.13 allocates hugetlb shared "
        "memory only in the default huge page size ({} KiB here, Hugepagesize in /proc/meminfo); "
        "boot with default_hugepagesz={}, or use SERIEMA_MEMORY_SOURCE=self (no same-machine "
        "direct access)",
        want == page_preference::gigantic_1g ? "1g" : "2m", default_size >> 10,
        want == page_preference::gigantic_1g ? "1G" : "2M"));
  }
  if (want == page_preference::transparent_huge && !transparent_huge_pages_possible(true)) {
    throw config_error(fmt::format(
        "SERIEMA_PAGES=thp with SERIEMA_MEMORY_SOURCE=ucx: transparent huge pages are off for "
        "shared memory (/sys/kernel/mm/transparent_hugepage/shmem_enabled: {}; set it to advise)",
        first_line_of("/sys/kernel/mm/transparent_hugepage/shmem_enabled")));
  }
}

}  // namespace seriema::transfer::detail

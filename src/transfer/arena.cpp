// Registered arenas: segment allocation with the page-size cascade, NUMA binding before first
// touch, one UCX registration per segment, and the block free list.
#include <fmt/format.h>
#include <hwloc.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <seriema/base/enum_names.hpp>
#include <seriema/base/error.hpp>
#include <seriema/base/log.hpp>
#include <seriema/base/settings.hpp>
#include <seriema/transfer/arena.hpp>
#include <seriema/transfer/detail/settings.hpp>
#include "pages.hpp"
#include <sstream>

#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#ifndef MAP_HUGE_1GB
#define MAP_HUGE_1GB (30 << MAP_HUGE_SHIFT)
#endif
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << MAP_HUGE_SHIFT)
#endif

namespace seriema::transfer {

const char* to_string(page_kind kind) noexcept {
  static constexpr enum_name_entry<page_kind> names[] = {
      {page_kind::gigantic_1g, "1 GiB hugetlb"},
      {page_kind::hugetlb_2m, "2 MiB hugetlb"},
      {page_kind::transparent_huge, "transparent huge pages (madvise)"},
      {page_kind::normal, "normal pages"},
  };
  return name_in(names, kind);
}

arena_options arena_options::from_environment() {
  // Every setting is read even when one is bad, so that one message names every problem.
  config::problems found;
  arena_options options;
  static constexpr std::string_view sources[] = {"ucx", "self"};
  found.check([&] {
    options.source = config::get_choice("SERIEMA_MEMORY_SOURCE", sources) == 0
                         ? memory_source::ucx
                         : memory_source::self;
  });
  found.check([&] { options.pages = detail::pages_from_environment(); });
  found.check([&] { options.segment_size = config::get_bytes("SERIEMA_SEGMENT_SIZE"); });
  found.check([&] { options.limit = config::get_bytes("SERIEMA_ARENA_LIMIT"); });
  // Contradictions between values, once every value parsed (a default standing in for a bad
  // value would make them up).
  if (found.empty()) found.check([&] { options.validate(); });
  found.throw_if_any();
  return options;
}

void arena_options::validate() const {
  config::problems found;
  if (segment_size == 0 || segment_size % block_size != 0) {
    found.add(fmt::format(
        "SERIEMA_SEGMENT_SIZE={}: must be a positive multiple of 2M (the block size)", segment_size));
  }
  if (limit != 0 && limit < segment_size) {
    found.add(fmt::format("SERIEMA_ARENA_LIMIT={}: smaller than one segment ({} bytes)", limit,
                          segment_size));
  }
  if (pages == page_preference::gigantic_1g && segment_size % detail::one_gib != 0) {
    found.add(fmt::format(
        "SERIEMA_PAGES=1g: SERIEMA_SEGMENT_SIZE ({} MiB) must be a multiple of 1G",
        segment_size >> 20));
  }
  if (source == memory_source::ucx) found.check([&] { detail::check_ucx_can_provide(pages); });
  found.throw_if_any();
}

std::size_t kernel_page_size_of(const void* address) {
  return detail::probe_mapping(address).kernel_page_size;
}

namespace {

// One hwloc topology for memory binding, loaded on first use (thread-safe static init).
hwloc_topology_t binding_topology() {
  static hwloc_topology_t topology = [] {
    hwloc_topology_t t = nullptr;
    if (hwloc_topology_init(&t) != 0 || hwloc_topology_load(t) != 0) {
      throw error("hwloc: cannot load the machine topology");
    }
    return t;
  }();
  return topology;
}

// Binds [base, base+size) to NUMA node `zone` before it is touched. A machine with one NUMA
// node needs no binding. Returns false when hwloc refuses (reported by the caller).
bool bind_to_zone(void* base, std::size_t size, int zone) {
  if (zone < 0) return true;
  hwloc_topology_t topology = binding_topology();
  if (hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_NUMANODE) <= 1) return true;
  hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(topology, static_cast<unsigned>(zone));
  if (node == nullptr) return false;
  return hwloc_set_area_membind(topology, base, size, node->nodeset, HWLOC_MEMBIND_BIND,
                                HWLOC_MEMBIND_BYNODESET | HWLOC_MEMBIND_STRICT) == 0;
}

// While alive, the calling thread allocates (first-touches) in NUMA node `zone`: UCX may touch
// pages while it allocates and registers them (RDMA registration pins), before any binding of
// the area could apply. Does nothing on one-node machines or when zone < 0.
class scoped_thread_membind {
 public:
  explicit scoped_thread_membind(int zone) {
    if (zone < 0) return;
    topology_ = binding_topology();
    if (hwloc_get_nbobjs_by_type(topology_, HWLOC_OBJ_NUMANODE) <= 1) return;
    hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(topology_, static_cast<unsigned>(zone));
    if (node == nullptr) return;
    previous_ = hwloc_bitmap_alloc();
    if (hwloc_get_membind(topology_, previous_, &previous_policy_,
                          HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET) != 0) {
      hwloc_bitmap_free(previous_);
      previous_ = nullptr;
      return;
    }
    active_ = hwloc_set_membind(topology_, node->nodeset, HWLOC_MEMBIND_BIND,
                                HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET) == 0;
  }
  ~scoped_thread_membind() {
    if (active_) {
      (void)hwloc_set_membind(topology_, previous_, previous_policy_,
                              HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET);
    }
    if (previous_ != nullptr) hwloc_bitmap_free(previous_);
  }
  scoped_thread_membind(const scoped_thread_membind&) = delete;
  scoped_thread_membind& operator=(const scoped_thread_membind&) = delete;

 private:
  hwloc_topology_t topology_ = nullptr;
  hwloc_bitmap_t previous_ = nullptr;
  hwloc_membind_policy_t previous_policy_ = HWLOC_MEMBIND_DEFAULT;
  bool active_ = false;
};

page_kind kind_from_page_size(std::size_t page_size, bool thp_advised) {
  if (page_size >= (std::size_t{1} << 30)) return page_kind::gigantic_1g;
  if (page_size >= (std::size_t{2} << 20)) return page_kind::hugetlb_2m;
  return thp_advised ? page_kind::transparent_huge : page_kind::normal;
}

}  // namespace

arena::arena(ucx_context& context, int zone, const arena_options& options)
    : context_(context), zone_(zone), options_(options) {
  options_.validate();
}

arena::~arena() {
  for (auto& segment : segments_) {
    if (segment.memh != nullptr) ucp_mem_unmap(context_.handle(), segment.memh);
    if (!segment.ucx_allocated && segment.base != nullptr) munmap(segment.base, segment.size);
  }
}

void arena::map_ucx_allocated(registered_segment& segment) {
  ucp_mem_h memh = nullptr;
  ucs_status_t status;
  {
    scoped_thread_membind in_zone(zone_);
    status = map_ucx_allocated_memory(context_, segment.size, &memh, &segment.base);
  }
  if (status != UCS_OK) {
    throw ucx_error(fmt::format(
        "arena (zone {}): UCX could not allocate a {} MiB registered segment: {} (is /dev/shm "
        "large enough? lower SERIEMA_SEGMENT_SIZE or set SERIEMA_MEMORY_SOURCE=self)",
        zone_, segment.size >> 20, ucs_status_string(status)));
  }
  segment.memh = memh;
  segment.ucx_allocated = true;
  try {
    // Also bind the area itself (pages not touched yet follow it).
    if (!bind_to_zone(segment.base, segment.size, zone_)) {
      throw error(fmt::format("arena: cannot bind a UCX segment to NUMA zone {} (hwloc: {})",
                              zone_, std::strerror(errno)));
    }
    record_ucx_pages(segment);
  } catch (...) {
    ucp_mem_unmap(context_.handle(), memh);
    segment.memh = nullptr;
    throw;
  }
}

// What the kernel gave UCX's allocation, recorded as it is: the page size from smaps, THP only
// where madvise applies to such memory here, and whether it is a shared segment of UCX's shm
// domains at all (UCX falls back to private memory when they fail: no direct access then).
void arena::record_ucx_pages(registered_segment& segment) {
  const detail::mapping_facts facts = detail::probe_mapping(segment.base);
  // Without UCX's shm domains (UCX_TLS without sm) ALLOC_PRIO's later methods give private
  // memory (also a private SysV hugetlb segment: "huge"): no peer can map it, as expected.
  segment.ucx_allocated = facts.shared_memory && context_.shared_memory_domains();
  if (!segment.ucx_allocated && context_.shared_memory_domains()) {
    log::warning("arena (zone {}): UCX allocated the segment as private memory ({}); peers on "
                 "this machine reach it by put/get only, not directly (check UCX_ALLOC_PRIO)",
                 zone_, facts.backing.empty() ? "anonymous" : facts.backing);
  }
  segment.page_size = facts.kernel_page_size != 0 ? facts.kernel_page_size : 4096;
  segment.pages = kind_from_page_size(segment.page_size, false);
  const auto want = options_.pages;
  if (segment.pages == page_kind::normal &&
      (want == page_preference::automatic || want == page_preference::transparent_huge) &&
      detail::transparent_huge_pages_possible(facts.shared_memory) &&
      madvise(segment.base, segment.size, MADV_HUGEPAGE) == 0) {
    segment.pages = page_kind::transparent_huge;
  }
  segment.page_note =
      detail::why_not_larger_pages(segment.pages, want, segment.size, context_.hugetlb());
  const bool explicit_missed =
      (want == page_preference::gigantic_1g && segment.pages != page_kind::gigantic_1g) ||
      (want == page_preference::hugetlb_2m && segment.pages != page_kind::hugetlb_2m) ||
      (want == page_preference::transparent_huge && segment.pages != page_kind::transparent_huge);
  if (explicit_missed) {
    constexpr const char* asked[] = {"auto", "1g", "2m", "thp", "normal"};
    throw error(fmt::format("arena (zone {}): SERIEMA_PAGES={}, but UCX's segment got {}: {}",
                            zone_, asked[static_cast<int>(want)], to_string(segment.pages),
                            segment.page_note));
  }
}

void arena::map_self_allocated(registered_segment& segment) {
  const std::size_t size = segment.size;
  const auto want = options_.pages;
  void* base = MAP_FAILED;
  page_kind kind = page_kind::normal;
  auto try_map = [&](int extra_flags) {
    return mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | extra_flags,
                -1, 0);
  };
  const bool automatic = want == page_preference::automatic;
  std::string refused;
  if ((automatic && size % (std::size_t{1} << 30) == 0) || want == page_preference::gigantic_1g) {
    base = try_map(MAP_HUGETLB | MAP_HUGE_1GB);
    if (base != MAP_FAILED) kind = page_kind::gigantic_1g;
    else refused += fmt::format("1 GiB: {}", std::strerror(errno));
  }
  if (base == MAP_FAILED && (automatic || want == page_preference::hugetlb_2m)) {
    base = try_map(MAP_HUGETLB | MAP_HUGE_2MB);
    if (base != MAP_FAILED) kind = page_kind::hugetlb_2m;
    else refused += fmt::format("{}2 MiB: {}", refused.empty() ? "" : "; ", std::strerror(errno));
  }
  if (base == MAP_FAILED && !automatic && want != page_preference::transparent_huge &&
      want != page_preference::normal) {
    throw error(fmt::format("SERIEMA_PAGES: the requested huge pages are not available ({}); "
                            "reserve them in /sys/kernel/mm/hugepages/ or use SERIEMA_PAGES=auto",
                            refused));
  }
  if (base == MAP_FAILED) {
    base = try_map(0);
    if (base == MAP_FAILED) {
      throw error(fmt::format("arena (zone {}): mmap of {} MiB failed: {}", zone_, size >> 20,
                              std::strerror(errno)));
    }
    kind = page_kind::normal;
    if ((automatic || want == page_preference::transparent_huge) &&
        detail::transparent_huge_pages_possible(false) &&
        madvise(base, size, MADV_HUGEPAGE) == 0) {
      kind = page_kind::transparent_huge;
    } else if (want == page_preference::transparent_huge) {
      munmap(base, size);
      throw error("SERIEMA_PAGES=thp: transparent huge pages are disabled on this machine "
                  "(/sys/kernel/mm/transparent_hugepage/enabled)");
    }
  }
  segment.base = static_cast<std::byte*>(base);
  segment.pages = kind;
  segment.page_note = refused;
  // The kernel page size of a mapping; transparent huge pages are 4 KiB pages the kernel may
  // back with 2 MiB ones (reported as their own kind).
  segment.page_size = kind == page_kind::gigantic_1g  ? (std::size_t{1} << 30)
                      : kind == page_kind::hugetlb_2m ? (std::size_t{2} << 20)
                                                      : 4096;
  if (!bind_to_zone(base, size, zone_)) {
    munmap(base, size);
    throw error(fmt::format("arena: cannot bind memory to NUMA zone {}", zone_));
  }
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  params.address = base;
  params.length = size;
  ucs_status_t status = ucp_mem_map(context_.handle(), &params, &segment.memh);
  if (status != UCS_OK) {
    munmap(base, size);
    check_ucx(status, "ucp_mem_map (registering an arena segment)");
  }
}

const registered_segment& arena::grow_locked() {
  if (options_.limit != 0 && bytes_obtained_ + options_.segment_size > options_.limit) {
    throw error(fmt::format("arena (zone {}): limit of {} bytes reached (SERIEMA_ARENA_LIMIT)",
                            zone_, options_.limit));
  }
  registered_segment segment;
  segment.size = options_.segment_size;
  segment.numa_zone = zone_;
  if (options_.source == memory_source::ucx) {
    map_ucx_allocated(segment);
  } else {
    map_self_allocated(segment);
  }
  try {
    segment.packed_rkey = pack_rkey(context_, segment.memh);
  } catch (...) {
    ucp_mem_unmap(context_.handle(), segment.memh);
    if (!segment.ucx_allocated) munmap(segment.base, segment.size);
    throw;
  }

  segments_.push_back(std::move(segment));
  const registered_segment& added = segments_.back();
  bytes_obtained_ += added.size;
  // Hand out blocks from the low addresses first (pushed in reverse onto the stack).
  for (std::size_t offset = added.size; offset >= block_size; offset -= block_size) {
    free_blocks_.push_back({added.base + offset - block_size, block_size, &added});
  }
  return added;
}

const registered_segment& arena::grow() {
  std::lock_guard lock(mutex_);
  return grow_locked();
}

memory_block arena::allocate_block() {
  std::lock_guard lock(mutex_);
  if (free_blocks_.empty()) {
    if (options_.limit != 0 && bytes_obtained_ + options_.segment_size > options_.limit) {
      return {};
    }
    grow_locked();
  }
  memory_block block = free_blocks_.back();
  free_blocks_.pop_back();
  return block;
}

void arena::release_block(memory_block block) {
  if (block.data == nullptr) return;
  std::lock_guard lock(mutex_);
  // A foreign or misaligned block would later be handed out twice: refuse it loudly.
  bool ours = false;
  for (const auto& segment : segments_) {
    if (&segment == block.segment && segment.contains(block.data, block_size) &&
        static_cast<std::size_t>(block.data - segment.base) % block_size == 0) {
      ours = true;
      break;
    }
  }
  if (!ours || block.size != block_size) {
    log::error("arena (zone {}): release_block of a block it never handed out ({}); ignored",
               zone_, static_cast<void*>(block.data));
    return;
  }
  free_blocks_.push_back(block);
}

const registered_segment* arena::segment_of(const void* p, std::size_t n) const {
  std::lock_guard lock(mutex_);
  for (const auto& segment : segments_) {
    if (segment.contains(p, n)) return &segment;
  }
  return nullptr;
}

std::size_t arena::bytes_obtained() const {
  std::lock_guard lock(mutex_);
  return bytes_obtained_;
}

std::vector<std::string> arena::describe_segments() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  for (const auto& s : segments_) {
    out.push_back(fmt::format(
        "{} MiB at {}, {} (kernel page {} KiB), zone {}, {}{}{}", s.size >> 20,
        static_cast<const void*>(s.base), to_string(s.pages), s.page_size >> 10, s.numa_zone,
        s.ucx_allocated ? "UCX-allocated shared memory (shm-mappable)"
                        : "private memory, registered (put/get only)",
        s.page_note.empty() ? "" : "; larger pages not obtained: ", s.page_note));
  }
  return out;
}

}  // namespace seriema::transfer

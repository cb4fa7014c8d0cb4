// The transfer layer's options a runtime is built with (the UCX context's peer-error handling,
// the arenas' memory source and pages): plain values, readable without UCX's headers.
#pragma once

#include <cstddef>
#include <string>
#include <vector>
#include <seriema/transfer/detail/settings.hpp>

namespace seriema::transfer {

/// Which pages an arena asks for (SERIEMA_PAGES). With memory_source::ucx, hugetlb pages come
/// from UCX's SysV segments, which use the kernel's default huge page size only (docs/running.md).
enum class page_preference {
  /// The cascade: 1 GiB pages (when segment_size is a multiple of 1 GiB), else 2 MiB hugetlb,
  /// else transparent huge pages, else normal pages.
  automatic,
  gigantic_1g,       ///< 1 GiB hugetlb pages only (segment_size a multiple of 1 GiB)
  hugetlb_2m,        ///< 2 MiB hugetlb pages only
  transparent_huge,  ///< normal mapping with transparent huge pages; fails when THP is disabled
  normal             ///< base pages only
};

/// Where an arena's segments come from.
enum class memory_source {
  ucx,   ///< ucp_mem_map(ALLOCATE): a shm segment same-machine peers can map (ucp_rkey_ptr)
  self,  ///< our own mmap with the page cascade, then registered: put/get/atomics only
};

/// How the UCX context is set up (see ucx_context).
struct context_options {
  /// Endpoints report a dead peer as an error (UCP_ERR_HANDLING_MODE_PEER). Needs shm error
  /// handling, which the context turns on (POSIX_ERROR_HANDLING / SYSV_ERROR_HANDLING) unless the
  /// user set those UCX variables. Default: SERIEMA_PEER_ERRORS.
  bool peer_errors = true;
  /// UCX keepalive interval in ms (how fast a dead peer is detected). Default: SERIEMA_KEEPALIVE.
  long keepalive_ms = 1000;
  /// The pages UCX-allocated memory may use: automatic, 1g and 2m let UCX try hugetlb shared
  /// memory (its MM_HUGETLB_MODE=try); thp and normal turn it off (=n). A UCX_*_HUGETLB_MODE the
  /// user set wins (reported by ucx_context::hugetlb()). Default: SERIEMA_PAGES.
  page_preference pages = page_preference::automatic;
  /// Network devices (UCX_NET_DEVICES names) to restrict UCX to; empty: UCX chooses. Ignored
  /// when the user set UCX_NET_DEVICES. The runtime fills it from its placement
  /// (SERIEMA_NET_DEVICES); from_environment() leaves it empty.
  std::vector<std::string> net_devices;
  /// From SERIEMA_PEER_ERRORS, SERIEMA_KEEPALIVE and SERIEMA_PAGES. Throws config_error naming
  /// every bad setting, one line each.
  static context_options from_environment();
};

/// How an arena obtains its segments.
struct arena_options {
  memory_source source = memory_source::ucx;           ///< who allocates the memory
  page_preference pages = page_preference::automatic;  ///< which pages to ask for
  std::size_t segment_size = std::size_t{64} << 20;  ///< multiple of block_size
  std::size_t limit = 0;                             ///< max bytes obtained; 0 = no cap
  /// From SERIEMA_MEMORY_SOURCE, SERIEMA_PAGES, SERIEMA_SEGMENT_SIZE, SERIEMA_ARENA_LIMIT.
  /// Throws config_error naming every bad setting, one line each, and then every contradiction
  /// (validate()).
  static arena_options from_environment();
  /// Throws config_error for a bad size or limit, and, for memory_source::ucx, for pages UCX
  /// cannot provide on this machine (hugetlb of another size than the default, thp without
  /// shared-memory THP).
  void validate() const;
};

}  // namespace seriema::transfer

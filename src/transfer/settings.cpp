// The transfer layer's SERIEMA_* settings (registered memory, pages, UCX endpoints).
#include <seriema/transfer/detail/settings.hpp>
#include <seriema/transfer/options.hpp>
#include <seriema/transfer/transmitter.hpp>

namespace seriema::transfer::detail {
namespace {

constexpr config::setting table[] = {
    // transfer: registered memory
    {"SERIEMA_PAGES", "auto",
     "page kind for arena segments: auto (1g, else 2m, else thp, else normal), 1g, 2m, thp, "
     "normal; with SERIEMA_MEMORY_SOURCE=ucx hugetlb pages are the default huge page size only"},
    {"SERIEMA_MEMORY_SOURCE", "ucx",
     "who allocates arena segments: ucx (shm-mappable, same-machine peers get direct pointers; "
     "huge pages per SERIEMA_PAGES) or self (mmap with SERIEMA_PAGES, registered; put/get only)"},
    {"SERIEMA_SEGMENT_SIZE", "64M", "bytes per arena segment (multiple of 2M), registered once"},
    {"SERIEMA_ARENA_LIMIT", "0", "cap on bytes one zone's arena may obtain (0 = no cap)"},
    {"SERIEMA_COMPLETION_INTERVAL", "64",
     "S: a transmitter asks for completion on every S-th operation (selective completion)"},
    // transfer: UCX endpoints
    {"SERIEMA_PEER_ERRORS", "yes",
     "yes: endpoints report a dead peer as an error (UCX peer error handling); no: do not"},
    {"SERIEMA_KEEPALIVE", "1s", "UCX keepalive interval: how fast a dead peer is detected"},
};

}  // namespace

std::span<const config::setting> settings() noexcept { return table; }

void validate_settings(config::problems& found) {
  found.check([] { (void)context_options::from_environment(); });
  found.check([] { (void)arena_options::from_environment(); });
  found.check([] { (void)transmitter_options::from_environment(); });
}

}  // namespace seriema::transfer::detail

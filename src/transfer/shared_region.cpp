// shared_region: one UCX-allocated (ucp_mem_map ALLOCATE) mapping and its packed rkey.
#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <seriema/base/error.hpp>
#include <seriema/transfer/shared_region.hpp>

namespace seriema::transfer {

shared_region::shared_region(ucx_context& context, std::size_t size, const char* purpose)
    : context_(context), size_(size) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  segment_.size = (size + page - 1) / page * page;
  if (segment_.size == 0) segment_.size = page;
  ucs_status_t status =
      map_ucx_allocated_memory(context_, segment_.size, &segment_.memh, &segment_.base);
  if (status != UCS_OK) {
    throw ucx_error(fmt::format("UCX could not allocate the {} bytes of {}: {} (is /dev/shm full?)",
                                segment_.size, purpose, ucs_status_string(status)));
  }
  segment_.ucx_allocated = true;
  try {
    segment_.packed_rkey = pack_rkey(context_, segment_.memh);
  } catch (...) {
    ucp_mem_unmap(context_.handle(), segment_.memh);
    throw;
  }
  std::memset(segment_.base, 0, segment_.size);
}

shared_region::~shared_region() { ucp_mem_unmap(context_.handle(), segment_.memh); }

}  // namespace seriema::transfer

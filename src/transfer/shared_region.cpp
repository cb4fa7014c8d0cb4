// shared_region: one UCX-allocated (ucp_mem_map ALLOCATE) mapping and its packed rkey.
#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <seriema/transfer/error.hpp>
#include <seriema/transfer/shared_region.hpp>

namespace seriema::transfer {

shared_region::shared_region(ucx_context& context, std::size_t size, const char* purpose)
    : context_(context), size_(size) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  segment_.size = (size + page - 1) / page * page;
  if (segment_.size == 0) segment_.size = page;
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  params.length = segment_.size;
  params.flags = UCP_MEM_MAP_ALLOCATE;
  ucp_mem_h memh = nullptr;
  ucs_status_t status = ucp_mem_map(context_.handle(), &params, &memh);
  if (status != UCS_OK) {
    throw ucx_error(fmt::format("UCX could not allocate the {} bytes of {}: {} (is /dev/shm full?)",
                                segment_.size, purpose, ucs_status_string(status)));
  }
  segment_.memh = memh;
  segment_.ucx_allocated = true;
  ucp_mem_attr_t attr{};
  attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
  void* packed = nullptr;
  std::size_t packed_size = 0;
  status = ucp_mem_query(memh, &attr);
  if (status == UCS_OK) status = ucp_rkey_pack(context_.handle(), memh, &packed, &packed_size);
  if (status != UCS_OK) {
    ucp_mem_unmap(context_.handle(), memh);
    check_ucx(status, "shared_region: ucp_mem_query / ucp_rkey_pack");
  }
  segment_.base = static_cast<std::byte*>(attr.address);
  auto* rkey = static_cast<const std::byte*>(packed);
  segment_.packed_rkey.assign(rkey, rkey + packed_size);
  ucp_rkey_buffer_release(packed);
  std::memset(segment_.base, 0, segment_.size);
}

shared_region::~shared_region() { ucp_mem_unmap(context_.handle(), segment_.memh); }

}  // namespace seriema::transfer

// The allocation service's side of messenger growth: chunks allocated in the receiver's zone,
// their setup headers written, and their entries in the receiver's incoming memory map.
#include "chunk_service.hpp"

#include <cstring>
#include <seriema/fabric/detail/thread_state.hpp>
#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/detail/wire.hpp>

namespace seriema::invoke::detail {

chunk_grant grant_chunks(fabric::thread_context& server, const chunk_request& request) {
  chunk_grant out{};
  fabric::runtime& host = server.rt();
  // Channels exist between workers only (attached threads have none).
  if (!host.is_local(request.receiver) || host.is_attached_id(request.receiver) ||
      request.count > messenger_options::max_chunks_per_allocation) {
    return out;
  }
  const int zone = host.placement().locate(request.receiver).zone;
  transfer::registered_buffer got[messenger_options::max_chunks_per_allocation];
  for (std::uint32_t i = 0; i < request.count; ++i) {
    got[i] = host.service_allocate(zone, static_cast<std::size_t>(request.chunk_size));
    if (!got[i]) {
      for (std::uint32_t j = 0; j < i; ++j) {
        (void)host.service_free(reinterpret_cast<std::uint64_t>(got[j].data), got[j].size);
      }
      return out;
    }
    std::memset(got[i].data, 0, wire::chunk_header_size);
    auto* header = reinterpret_cast<wire::chunk_header*>(got[i].data);
    header->setup.magic = wire::chunk_magic;
    header->setup.sender = request.sender;
    header->setup.receiver = request.receiver;
    header->setup.batch = request.batch;
    header->setup.run = request.run;
    header->setup.capacity = request.chunk_size - wire::chunk_header_size;
    header->setup.feedback = request.feedback;
    out.chunks[i] = transfer::remote_memory_locator::make(host.rank(), got[i]);
  }
  // The whole batch in one grant: the receiver adopts all of it or none at a poll, so its ring
  // matches the sender's (which adds the chunks together).
  fabric::granted_memory batch[messenger_options::max_chunks_per_allocation];
  for (std::uint32_t i = 0; i < request.count; ++i) {
    batch[i] = {request.sender, request.run, request.batch, got[i]};
  }
  host.local_state(request.receiver).grant({batch, request.count});
  out.count = request.count;
  return out;
}

}  // namespace seriema::invoke::detail

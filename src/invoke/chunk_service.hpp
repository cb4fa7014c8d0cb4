// The receiver's side of a messenger's growth: the allocation service's answer to a sender
// that asks the destination's process for chunks (the sender's side is messenger::grow).
#pragma once

#include <cstdint>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/invoke/channel.hpp>
#include <seriema/transfer/remote_memory.hpp>

namespace seriema::invoke::detail {

// What the allocation service returns: up to max_chunks_per_allocation chunk locators.
struct chunk_grant {
  std::uint32_t count = 0;
  std::uint32_t reserved = 0;
  transfer::remote_memory_locator chunks[messenger_options::max_chunks_per_allocation];
};

// What a sender asks the destination's process for: `count` chunks of `chunk_size` bytes in
// `receiver`'s zone, with their setup header filled in. Trivially copyable: it travels as the
// capture of the service call.
struct chunk_request {
  std::uint32_t sender;
  std::uint32_t receiver;
  std::uint32_t batch;
  std::uint32_t count;
  std::uint64_t run;
  std::uint64_t chunk_size;
  transfer::remote_memory_locator feedback;
};

// The receiver's side of messenger::grow, run by the destination process's service (the
// receiving thread is not involved): allocates the chunks in the receiver's zone, all or none,
// writes each one's setup header before anyone can know the chunk (its locator is not out yet),
// and enters them into the receiver's incoming memory map, in order, before the reply leaves.
chunk_grant grant_chunks(fabric::thread_context& server, const chunk_request& request);

// A sender's chunk request in flight (messenger::pending_grant_): its reply slot, which the
// reply table points at (so it stays on the heap until the answer came or the messenger went),
// and the number of chunks it asked for.
struct pending_grant {
  fabric::return_slot<chunk_grant> reply;
  std::uint32_t count = 0;
};

}  // namespace seriema::invoke::detail

// The messenger's ring growth (paper §4.4.1): the first chunks (setup), and more chunks asked
// of the destination's process by no-setup service calls, adopted and spliced in after the
// current one, with the way to publish into them chosen on the first ones. The receiver's side
// of a grant is chunk_service.cpp; docs/messenger.md has the invariants.
#include <fmt/format.h>

#include <seriema/base/error.hpp>
#include <seriema/transfer/arena.hpp>
#include <seriema/transfer/ucx.hpp>
#include <seriema/base/log.hpp>
#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/detail/settings.hpp>
#include <seriema/invoke/detail/messenger.hpp>
#include <seriema/invoke/detail/publish_choice.hpp>

#include "chunk_service.hpp"

namespace seriema::invoke {

namespace {

using detail::chunk_grant;
using detail::chunk_request;
using detail::grant_chunks;

}  // namespace

void messenger::setup() {
  if (!ring_.empty()) return;
  busy_ = true;
  space why;
  bool ok = advance_chunk(true, why);
  busy_ = false;
  if (!ok) {
    throw error(fmt::format("messenger to thread {}: {}", destination_,
                            failed_ ? "its process failed" : "could not allocate chunks"));
  }
}

bool messenger::grow() {
  const messenger_options& options = owner_.options();
  auto count = static_cast<std::uint32_t>(
      std::min<std::size_t>(options.chunks_per_allocation, options.max_chunks - ring_.size()));
  if (count == 0 && !pending_grant_) return false;
  chunk_grant grant;
  if (!request_chunks(count, grant)) return false;
  if (grant.count != count) {
    warn_no_memory(count);
    return false;
  }
  ++batches_;
  adopt_chunks(grant, count);
  return true;
}

bool messenger::request_chunks(std::uint32_t& count, chunk_grant& grant) {
  thread_context& self = owner_.self();
  if (!pending_grant_) {
    const chunk_request request{self.id(),
                                destination_,
                                batches_,
                                count,
                                owner_.run_epoch(),
                                owner_.options().chunk_size,
                                owner_.feedback_locator()};
    auto asked = std::make_unique<detail::pending_grant>();
    asked->count = count;
    // No-setup service call on the destination's process: the receiving thread is not involved.
    fabric::call_status status = self.service_call_return(
        destination_process_,
        [request](thread_context& server) { return grant_chunks(server, request); },
        asked->reply);
    if (!fabric::reached_transport(status)) {
      if (status == fabric::call_status::peer_failed) fail_all();
      return false;
    }
    // Sent, or queued in UCX at the deadline (it goes once the link carries it): pending.
    pending_grant_ = std::move(asked);
  }
  count = pending_grant_->count;
  fabric::return_slot<chunk_grant>& reply = pending_grant_->reply;
  {
    // Not abandoned half-way by a call that throws meanwhile (the grant would be lost).
    thread_context::deferring_scope waiting(self);
    self.wait_until(
        [&] { return reply.done() || self.endpoint_to(destination_process_).failed(); });
  }
  const bool peer_gone = self.rt().peer_failed(destination_process_) ||
                         self.endpoint_to(destination_process_).failed();
  if (!reply.done() && !peer_gone) {
    // The deadline in force passed first: no chunks this time, and the request stays pending
    // (its answer is taken by the next growth). The call's policy decides what "full" means.
    return false;
  }
  const bool granted = reply.ready();
  const bool expired = reply.done() && reply.result() == fabric::outcome::deadline_exceeded;
  if (granted) grant = reply.value();
  pending_grant_.reset();
  if (!granted && !expired) fail_all();
  return granted;
}

void messenger::warn_no_memory(std::uint32_t count) {
  // The destination's process is out of registered memory: the calls wait (queued, or refused
  // as full) until a ring frees room, which for a first ring never comes. Say so once per
  // messenger instead of leaving a silent stall.
  if (warned_no_memory_) return;
  warned_no_memory_ = true;
  log::warning("thread {}: rank {} has no registered memory for {} more chunk(s) of {} bytes for "
               "calls to thread {} (ring of {} chunk(s)); calls to it wait for room "
               "(SERIEMA_ARENA_LIMIT, SERIEMA_CHUNK_SIZE, SERIEMA_MAX_CHUNKS)",
               owner_.self().id(), destination_process_, count, owner_.options().chunk_size,
               destination_, ring_.size());
}

void messenger::adopt_chunks(const chunk_grant& grant, std::uint32_t count) {
  thread_context& self = owner_.self();
  const std::uint64_t chunk_size = owner_.options().chunk_size;
  transfer::ucx_endpoint& endpoint = self.endpoint_to(destination_process_);
  const bool same_machine = self.rt().same_machine(destination_process_);
  std::vector<slot> fresh(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    slot& s = fresh[i];
    s.locator = grant.chunks[i];
    s.remote = std::make_unique<transfer::remote_memory>(endpoint, s.locator, same_machine);
    s.capacity = chunk_size - wire::chunk_header_size;
    if (s.remote->direct() != nullptr) {
      s.direct_word = reinterpret_cast<std::uint64_t*>(s.remote->direct());
      s.direct_data = s.remote->direct() + wire::chunk_header_size;
    }
  }
  if (ring_.empty()) choose_publishing(fresh[0].direct_data != nullptr, endpoint);
  for (const slot& s : fresh) {
    if ((s.direct_data != nullptr) != direct_) {
      throw error(fmt::format("messenger to thread {}: chunks of one ring must all be mappable "
                              "or all not (memory sources differ?)", destination_));
    }
  }
  counters_.chunks_grown += count;
  const std::size_t position = ring_.empty() ? 0 : current_ + 1;
  ring_.insert(ring_.begin() + static_cast<std::ptrdiff_t>(position),
               std::make_move_iterator(fresh.begin()), std::make_move_iterator(fresh.end()));
}

void messenger::choose_publishing(bool direct, transfer::ucx_endpoint& endpoint) {
  const messenger_options& options = owner_.options();
  fabric::runtime& rt = owner_.self().rt();
  direct_ = direct;
  by_message_ =
      !direct_ && !detail::publishes_by_put(options.publish_remote, rt.context().network_rdma());
  if (direct_) return;
  transfer::transmitter_options topts = transfer::transmitter_options::from_environment();
  transmitter_ = std::make_unique<transfer::transmitter>(endpoint, topts);
  transfer::circular_allocator_config sconfig;
  sconfig.unit_size = options.staging_size;
  sconfig.initial_units = 2;
  sconfig.max_bytes = std::max<std::size_t>(16 * options.staging_size, std::size_t{8} << 20);
  staging_ = std::make_unique<transfer::circular_allocator>(rt.local_arena(), sconfig);
  if (options.copy_exceeding == exceeding_copy::automatic) {
    // Pages at least as large as any record (max_record < staging_size); the registered memory
    // the queue may take is its limit (SERIEMA_EXCEEDING_LIMIT) plus one block for the records
    // queued past it without a limit (replies, calls made inside a wait).
    queue_.use_registered(rt.local_arena(),
                          std::max<std::size_t>(std::size_t{64} << 10, options.staging_size),
                          options.exceeding_limit + transfer::block_size);
  }
}

}  // namespace seriema::invoke

// region_publisher: data then its word into a peer's region, by stores, put + fence + put, or one
// write message (the three paths of docs/pipes.md, "Publication").
#include <seriema/fabric/detail/region_publisher.hpp>

#include <ucp/api/ucp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <seriema/fabric/runtime.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/transfer/ucx.hpp>

namespace seriema::fabric::detail {

const char* to_string(publish_path path) noexcept {
  switch (path) {
    case publish_path::direct:
      return "direct stores";
    case publish_path::put:
      return "put, fence, put";
    case publish_path::message:
      return "write message";
  }
  return "unknown";
}

namespace {

transfer::remote_memory resolve(thread_context& ctx, const transfer::remote_memory_locator& region,
                                publish_route route) {
  const bool allow_direct = route.allow_direct && ctx.rt().same_machine(region.process);
  return transfer::remote_memory(ctx.endpoint_to(region.process), region, allow_direct);
}

publish_status from_op(transfer::op_status status) noexcept {
  switch (status) {
    case transfer::op_status::ok:
      return publish_status::ok;
    case transfer::op_status::peer_failed:
      return publish_status::peer_failed;
    default:
      return publish_status::error;
  }
}

}  // namespace

region_publisher::region_publisher(thread_context& ctx,
                                   const transfer::remote_memory_locator& region,
                                   publish_route route, std::uint32_t cells)
    : ctx_(ctx),
      process_(region.process),
      path_(publish_path::message),
      region_(resolve(ctx, region, route)),
      cells_(std::max<std::uint32_t>(cells, 64)) {
  if (region_.direct() != nullptr) {
    path_ = publish_path::direct;
    direct_ = region_.direct();
    return;
  }
  path_ = route.by_put ? publish_path::put : publish_path::message;
  transmitter_ = std::make_unique<transfer::transmitter>(
      region_.endpoint(), transfer::transmitter_options::from_environment());
}

region_publisher::~region_publisher() {
  (void)drain(deadline_clock::now() + std::chrono::seconds(5));
}

bool region_publisher::peer_dead() const noexcept {
  return ctx_.rt().peer_failed(process_) || region_.endpoint().failed() ||
         (transmitter_ && transmitter_->failed());
}

bool region_publisher::wait_for(transfer::completion_tag tag,
                                deadline_clock::time_point deadline) {
  if (tag.is_complete()) return true;
  transmitter_->request_completion();
  ctx_.wait_until([&] { return tag.is_complete() || peer_dead(); }, deadline);
  return tag.is_complete() && !transmitter_->failed();
}

bool region_publisher::drain(deadline_clock::time_point deadline) {
  if (!transmitter_) return true;
  // Called from close paths: a call that throws meanwhile leaves the thread's next outer poll.
  thread_context::deferring_scope keep_exceptions(ctx_);
  return wait_for(transmitter_->current_tag(), deadline);
}

publish_status region_publisher::fetch(std::span<std::byte> into, std::uint64_t offset,
                                       deadline_clock::time_point deadline) {
  if (peer_dead()) return publish_status::peer_failed;
  if (path_ == publish_path::direct) {
    std::memcpy(into.data(), direct_ + offset, into.size());
    return publish_status::ok;
  }
  const transfer::op_status posted = transmitter_->get(into, region_, offset);
  if (posted != transfer::op_status::ok) return from_op(posted);
  if (wait_for(transmitter_->current_tag(), deadline)) return publish_status::ok;
  return peer_dead() ? publish_status::peer_failed : publish_status::deadline_exceeded;
}

publish_status region_publisher::start_fetch(std::span<std::byte> into, std::uint64_t offset,
                                             transfer::completion_tag& in_flight) {
  if (peer_dead()) return publish_status::peer_failed;
  in_flight = {};
  if (path_ == publish_path::direct) {
    std::memcpy(into.data(), direct_ + offset, into.size());
    return publish_status::ok;
  }
  const transfer::op_status posted = transmitter_->get(into, region_, offset);
  if (posted != transfer::op_status::ok) return from_op(posted);
  in_flight = transmitter_->current_tag();
  transmitter_->request_completion();
  return publish_status::ok;
}

bool region_publisher::free_cells(std::size_t publications) const noexcept {
  if (path_ == publish_path::direct) return true;
  for (std::size_t i = 0; i < publications && i < cells_.size(); ++i) {
    if (!cells_[(next_cell_ + i) % cells_.size()].in_flight.is_complete()) return false;
  }
  return true;
}

publish_status region_publisher::fetch_state(
    const transfer::completion_tag& in_flight) const noexcept {
  if (in_flight.is_complete()) {
    return transmitter_ && transmitter_->failed() ? publish_status::peer_failed
                                                  : publish_status::ok;
  }
  return peer_dead() ? publish_status::peer_failed : publish_status::pending;
}

publish_status region_publisher::publish(std::span<const std::byte> data,
                                         std::uint64_t data_offset, std::uint64_t word_offset,
                                         std::uint64_t word) {
  if (peer_dead()) return publish_status::peer_failed;
  if (path_ == publish_path::direct) {
    if (!data.empty() && data.data() != direct_ + data_offset) {
      std::memcpy(direct_ + data_offset, data.data(), data.size());
    }
    // The data is in place before the word that publishes it (the reader loads it acquire).
    std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(direct_ + word_offset))
        .store(word, std::memory_order_release);
    return publish_status::ok;
  }
  cell& c = cells_[next_cell_];
  next_cell_ = next_cell_ + 1 == cells_.size() ? 0 : next_cell_ + 1;
  if (!wait_for(c.in_flight, ctx_.deadline_in_force())) {
    return peer_dead() ? publish_status::peer_failed : publish_status::deadline_exceeded;
  }
  transfer::op_status status;
  if (path_ == publish_path::message) {
    c.header = {region_.address(), region_.size(), data_offset, word_offset, word};
    status = transmitter_->send(am_id_write,
                                {reinterpret_cast<const std::byte*>(&c.header), sizeof c.header},
                                data);
  } else {
    if (!data.empty()) {
      status = transmitter_->put(data, region_, data_offset);
      if (status != transfer::op_status::ok) return from_op(status);
      // The data lands before the word that publishes it (UCX orders puts across the fence).
      ucp_worker_fence(ctx_.worker().handle());
    }
    c.word = word;
    status = transmitter_->put({reinterpret_cast<const std::byte*>(&c.word), sizeof c.word},
                               region_, word_offset);
  }
  c.in_flight = transmitter_->current_tag();
  // Completion asked for twice per lap of the cells, so a cell is rarely still in flight when
  // its turn comes again (no round trip on the publishing path).
  if (next_cell_ % (cells_.size() / 2) == 0) transmitter_->request_completion();
  return from_op(status);
}

}  // namespace seriema::fabric::detail

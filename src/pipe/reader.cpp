// The reading end: rread validating the next buffer (polled in place for next fit, or found
// through the notification ring) against the heap, rmem in place, rfree handing allocation
// entries back to the writer (deferred or immediate).
#include <fmt/format.h>

#include <atomic>
#include <cstring>
#include <seriema/base/error.hpp>
#include <seriema/base/log.hpp>
#include <seriema/fabric/runtime.hpp>

#include "ends.hpp"
#include "rendezvous.hpp"

namespace seriema::pipe::detail {

namespace {

bool deferred(const pipe_options& options) noexcept {
  if (options.release == release_mode::automatic) {
    return options.fit == transfer::fit_policy::next_fit;
  }
  return options.release == release_mode::deferred;
}

}  // namespace

reader_state::reader_state(fabric::thread_context& ctx, fabric::thread_id writer,
                           const pipe_options& options)
    : options_(options),
      open_(begin_open(ctx, writer, options, role::reader,
                       region_layout{options.width, options.heap_bytes, options.pull_heap_bytes}
                           .reader_bytes())),
      layout_{options.width, options.heap_bytes, options.pull_heap_bytes},
      id_(open_.layer->next_end_id()),
      heap_offset_(layout_.heap_offset()),
      held_(options.width),
      releases_(layout_.release_slots()),
      in_place_(options.fit == transfer::fit_policy::next_fit) {
  batch_ = !deferred(options)         ? 1u
           : options.release_batch != 0 ? options.release_batch
                                        : std::max<std::uint32_t>(1, options.width / 4);
  open_.layer->add(this);
}

reader_state::~reader_state() {
  close();
  open_.layer->remove(this);
}

void reader_state::finish(fabric::deadline_clock::time_point deadline) {
  const hello peer = end_open(open_, role::reader, deadline);
  try {
    if (peer.region.size < layout_.writer_bytes()) {
      throw error(fmt::format("pipe: the writer's release area {} is too small",
                              peer.region.to_string()));
    }
    publisher_ =
        std::make_unique<publisher>(*open_.ctx, peer.region, options_.protocol, options_.width);
    writer_closed_ = open_.layer->peer_closed(open_.key, role::writer, &writer_totals_);
  } catch (...) {
    close();
    throw;
  }
  finished_ = true;
}

std::span<const std::byte> reader_state::heap() const noexcept {
  return {open_.region.data + heap_offset_, options_.heap_bytes};
}

pipe_status reader_state::no_buffer(bool pulling, bool may_poll) {
  if (may_poll) (void)flush_releases();  // the writer may be waiting for room
  // Writes from another machine land through this process's progress (the next rread sees
  // them); stores from this machine need none, so a spinning reader polls only now and then (a
  // poll takes longer than the store it would wait for: every poll in the loop adds to latency).
  if (may_poll && (publisher_->path() != publish_path::direct || (++idle_reads_ & 31) == 0)) {
    (void)open_.ctx->poll();
  }
  // After the poll: the writer's close notice may have come in it.
  const bool all_seen = pulling ? gets_ >= writer_totals_.posts : read_ >= writer_totals_.writes;
  if (writer_closed_ && all_seen) return pipe_status::closed;
  if (open_.ctx->rt().peer_failed(open_.peer_process)) return pipe_status::peer_failed;
  return pipe_status::empty;
}

std::uint64_t reader_state::load_word(std::uint64_t heap_offset) const noexcept {
  return std::atomic_ref<const std::uint64_t>(
             *reinterpret_cast<const std::uint64_t*>(open_.region.data + heap_offset_ +
                                                      heap_offset))
      .load(std::memory_order_acquire);
}

slot_view reader_state::next_in_place() noexcept {
  const std::uint32_t expected = tag_of(read_);
  for (int hops = 0; hops < 2; ++hops) {  // at most one wrap marker per write
    if (options_.heap_bytes - position_ < header_size) position_ = 0;
    const slot_view view = decode_in_place(load_word(position_), position_, expected, heap());
    if (view.state != slot_state::wrap) return view;
    position_ = 0;
  }
  return {slot_state::invalid, 0, 0, 0, 0};  // a marker at the start: not what a writer writes
}

slot_view reader_state::next_in_ring() noexcept {
  const std::uint64_t slot = read_ & (options_.width - 1);
  const std::uint64_t word =
      std::atomic_ref<const std::uint64_t>(
          *reinterpret_cast<const std::uint64_t*>(open_.region.data + slot * 8))
          .load(std::memory_order_acquire);
  const std::uint32_t previous = read_ >= options_.width ? tag_of(read_ - options_.width) : 0;
  return decode_slot(word, tag_of(read_), previous, heap(),
                     [this](std::uint64_t offset) { return load_word(offset); });
}

reader_state::placed reader_state::place(const slot_view& view, held_buffer& h) {
  std::byte* payload = open_.region.data + heap_offset_ + view.offset + header_size;
  h = {view.offset + header_size, payload, view.size, tag_of(read_), view.entry, true, false};
  if (!view.redirect) return placed::buffer;
  h.live = false;
  if (view.size == source_record_size) {
    add_source(std::span<const std::byte, source_record_size>(payload, source_record_size));
    return placed::source;
  }
  const std::span<const std::byte, redirect_descriptor_size> descriptor(payload,
                                                                        redirect_descriptor_size);
  const std::uint32_t source = redirect_source(descriptor);
  const bool known = source != 0 && source <= sources_.size() && sources_[source - 1].base;
  const redirect_view r =
      decode_redirect(descriptor, known ? sources_[source - 1].memory->size() : 0);
  if (r.source == 0) return placed::invalid;
  h = {r.offset, sources_[source - 1].base + r.offset, r.size, h.tag, h.entry, true, true};
  return placed::buffer;
}

void reader_state::advance(const slot_view& view) noexcept {
  if (in_place_) position_ = view.offset + view.granules * heap_granule;
  ++read_;
}

read_result reader_state::rread(bool may_poll) {
  if (closed_ || !finished_) return {{}, pipe_status::closed};
  for (;;) {
    slot_view view = in_place_ ? next_in_place() : next_in_ring();
    if (view.state == slot_state::ready) {
      held_buffer& h = held_[read_ & (options_.width - 1)];
      const placed what = place(view, h);
      if (what == placed::source) {  // a source record is the writer's only: its room goes back
        advance(view);
        queue_release(view.entry);
        continue;
      }
      if (what == placed::buffer) {
        advance(view);
        ++counters_.buffers;
        counters_.bytes += h.size;
        if (h.redirected) ++counters_.redirected;
        return {{h.offset, h.size, h.tag, id_}, pipe_status::ok};
      }
      view.state = slot_state::invalid;
    }
    if (view.state == slot_state::invalid && last_rejected_ != read_) {
      last_rejected_ = read_;
      if (counters_.rejected_slots++ == 0) {
        log::error("pipe {} -> {}: write {} at heap offset {} does not describe a buffer of the "
                   "heap; it is not used (later ones are only counted)",
                   open_.key.writer, open_.key.reader, read_, view.offset);
      }
    }
    return {{}, no_buffer(false, may_poll)};
  }
}

read_result reader_state::rread(fabric::deadline_clock::time_point deadline) {
  read_result r = rread();
  if (r.status != pipe_status::empty) return r;
  fabric::thread_context& ctx = *open_.ctx;
  const bool came =
      ctx.wait_until([&] { return (r = rread()).status != pipe_status::empty; },
                     ctx.deadline_in_force(deadline));
  if (!came) r.status = pipe_status::deadline_exceeded;
  return r;
}

const reader_state::held_buffer* reader_state::live_buffer(const rbuffer& b) const noexcept {
  if (b.end != id_ || b.ticket == 0) return nullptr;
  const held_buffer& h = held_[(b.ticket - 1) & (options_.width - 1)];
  if (!h.live || h.tag != b.ticket || h.offset != b.offset || h.size != b.size) return nullptr;
  return &h;
}

std::span<std::byte> reader_state::rmem(const rbuffer& b) const noexcept {
  const held_buffer* h = closed_ ? nullptr : live_buffer(b);
  if (h == nullptr) return {};
  return {h->payload, static_cast<std::size_t>(h->size)};
}

pipe_status reader_state::rfree(const rbuffer& b, bool may_wait) {
  if (b.end != id_) return pipe_status::not_owner;
  if (closed_) return pipe_status::closed;
  auto* h = const_cast<held_buffer*>(live_buffer(b));
  if (h == nullptr) return pipe_status::stale;
  h->live = false;
  if (may_wait) return release(h->entry);
  queue_release(h->entry);
  flush_if_free();
  return pipe_status::ok;
}

void reader_state::queue_release(std::uint32_t entry) noexcept {
  releases_[released_ & (releases_.size() - 1)] = release_entry(entry);
  ++released_;
  ++unpublished_;
  ++counters_.releases;
}

pipe_status reader_state::release(std::uint32_t entry) {
  queue_release(entry);
  return flush_if_due();
}

slot_view reader_state::next_post() {
  const std::uint64_t slot_at = layout_.pull_ring_offset() + (gets_ & (options_.width - 1)) * 16;
  const std::uint64_t flag =
      std::atomic_ref<const std::uint64_t>(
          *reinterpret_cast<const std::uint64_t*>(open_.region.data + slot_at + 8))
          .load(std::memory_order_acquire);
  std::uint64_t descriptor;
  std::memcpy(&descriptor, open_.region.data + slot_at, sizeof descriptor);
  const slot_view view = decode_pull(flag, descriptor, tag_of(gets_), options_.pull_heap_bytes);
  if (view.state == slot_state::invalid) {
    if (last_rejected_ != ~gets_ && counters_.rejected_slots++ == 0) {
      log::error("pipe {} -> {}: post {} does not describe a buffer of the exposed heap; it is "
                 "not used (later ones are only counted)",
                 open_.key.writer, open_.key.reader, gets_);
    }
    last_rejected_ = ~gets_;
  }
  return view;
}

get_result reader_state::pulled(const slot_view& view, bool may_publish) {
  ++gets_;
  ++counters_.buffers;
  counters_.bytes += view.size;
  // Pulled: a hand-back that fails (the writer died meanwhile) does not undo that.
  if (may_publish) {
    (void)release(view.entry | pull_entry_bit);
    return {static_cast<std::size_t>(view.size), pipe_status::ok};
  }
  // Inside a poll: published only when that cannot wait (a hand-back takes at most two
  // publications), else by the next flush.
  queue_release(view.entry | pull_entry_bit);
  flush_if_free();
  return {static_cast<std::size_t>(view.size), pipe_status::ok};
}

get_result reader_state::rget(std::span<std::byte> into) {
  if (closed_ || !finished_ || options_.pull_heap_bytes == 0) return {0, pipe_status::closed};
  const slot_view view = next_post();
  if (view.state == slot_state::empty) return {0, no_buffer(true, true)};
  if (view.state != slot_state::ready) return {0, pipe_status::empty};
  const auto size = static_cast<std::size_t>(view.size);
  if (into.size() < size) return {size, pipe_status::too_large};
  const pipe_status fetched =
      publisher_->fetch(into.first(size), layout_.exposed_offset() + view.offset + header_size,
                        open_.ctx->deadline_in_force());
  if (fetched != pipe_status::ok) return {0, fetched};
  return pulled(view, true);
}

get_result reader_state::rget_step(std::span<std::byte> into, pull_ticket& ticket) {
  if (closed_ || !finished_ || options_.pull_heap_bytes == 0) return {0, pipe_status::closed};
  if (ticket.active && ticket.post != gets_) {  // pulled since: start over, once its get landed
    if (publisher_->fetch_state(ticket.tag) == pipe_status::empty) return {0, pipe_status::empty};
    ticket.active = false;
  }
  if (!ticket.active) {
    const slot_view view = next_post();
    if (view.state == slot_state::empty) return {0, no_buffer(true, false)};
    if (view.state != slot_state::ready) return {0, pipe_status::empty};
    const auto size = static_cast<std::size_t>(view.size);
    if (into.size() < size) return {size, pipe_status::too_large};
    const pipe_status started = publisher_->start_fetch(
        into.first(size), layout_.exposed_offset() + view.offset + header_size, ticket.tag);
    if (started != pipe_status::ok) return {0, started};
    ticket.active = true;
    ticket.post = gets_;
    ticket.view = view;
  }
  const pipe_status landed = publisher_->fetch_state(ticket.tag);
  if (landed == pipe_status::empty) return {0, pipe_status::empty};
  ticket.active = false;
  if (landed != pipe_status::ok) return {0, landed};
  return pulled(ticket.view, false);
}

get_result reader_state::rget(std::span<std::byte> into,
                              fabric::deadline_clock::time_point deadline) {
  get_result r = rget(into);
  if (r.status != pipe_status::empty) return r;
  fabric::thread_context& ctx = *open_.ctx;
  const bool came = ctx.wait_until([&] { return (r = rget(into)).status != pipe_status::empty; },
                                   ctx.deadline_in_force(deadline));
  if (!came) r.status = pipe_status::deadline_exceeded;
  return r;
}

pipe_status reader_state::flush_releases() {
  // A publication that waits for a cell polls, and the poll's idle flush comes back here.
  if (unpublished_ == 0 || !publisher_ || flushing_) return pipe_status::ok;
  flushing_ = true;
  const pipe_status status = hand_back();
  flushing_ = false;
  if (status == pipe_status::ok) ++counters_.hand_backs;
  return status;
}

pipe_status reader_state::hand_back() {
  // The entries not handed back yet, in at most two runs of the ring (it may wrap), each
  // published with the count it brings the writer to.
  const std::uint64_t slots = releases_.size();
  std::uint64_t first = released_ - unpublished_;
  while (first != released_) {
    const std::uint64_t start = first & (slots - 1);
    const std::uint64_t run = std::min(released_ - first, slots - start);
    const pipe_status status = publisher_->publish(
        {reinterpret_cast<const std::byte*>(releases_.data() + start),
         static_cast<std::size_t>(run * 8)},
        release_entries_offset + start * 8, 0, first + run);
    if (status != pipe_status::ok) return status;
    first += run;
    unpublished_ -= run;
  }
  return pipe_status::ok;
}

lendable_buffer reader_state::lend_check(const rbuffer& b) const noexcept {
  if (b.end != id_) return {pipe_status::not_owner, {}, false, 0, 0};
  if (closed_) return {pipe_status::closed, {}, false, 0, 0};
  const held_buffer* h = live_buffer(b);
  if (h == nullptr) return {pipe_status::stale, {}, false, 0, 0};
  return {pipe_status::ok,
          {h->payload, static_cast<std::size_t>(h->size)},
          h->redirected,
          static_cast<std::uint64_t>(h->payload - open_.region.data),
          h->entry};
}

void reader_state::lend(const rbuffer& b) noexcept {
  const_cast<held_buffer*>(live_buffer(b))->live = false;
  ++lent_;
}

void reader_state::unlend(const rbuffer& b) noexcept {
  held_[(b.ticket - 1) & (options_.width - 1)].live = true;
  --lent_;
}

void reader_state::return_lent(std::uint32_t entry) noexcept {
  --lent_;
  if (!closed_) queue_release(entry);  // else given up with the end, as its other buffers
}

pipe_status reader_state::flush_if_due() {
  return unpublished_ >= batch_ ? flush_releases() : pipe_status::ok;
}

transfer::remote_memory_locator reader_state::region_locator() const {
  return transfer::remote_memory_locator::make(open_.ctx->rt().rank(), open_.region);
}

void reader_state::add_source(std::span<const std::byte, source_record_size> record) {
  std::uint64_t index;
  transfer::remote_memory_locator region;
  static_assert(sizeof index + sizeof region == source_record_size);
  std::memcpy(&index, record.data(), sizeof index);
  std::memcpy(&region, record.data() + sizeof index, sizeof region);
  // A source is the forwarding writer's own memory, numbered in order, announced once, no
  // larger than one allocation; anything else is refused (its redirects are then invalid).
  const bool acceptable = index == sources_.size() + 1 && index <= max_redirect_sources &&
                          region.process == open_.peer_process && region.valid() &&
                          region.rkey_size <= region.packed_rkey.size() &&
                          region.size <= transfer::block_size;
  if (!acceptable) {
    if (counters_.rejected_slots++ == 0) {
      log::error("pipe {} -> {}: a source record ({}, number {}) is not one this pipe's writer "
                 "sends; it is not used (later rejections are only counted)",
                 open_.key.writer, open_.key.reader, region.to_string(), index);
    }
    return;
  }
  source_region& s = sources_.emplace_back();
  try {  // the writer's endpoint: it exists (the pipe publishes through it)
    s.memory = std::make_unique<transfer::remote_memory>(open_.ctx->endpoint_to(region.process),
                                                         region, true);
    s.base = s.memory->direct();
  } catch (const std::exception&) {  // a locator that does not resolve: no mapping
  }
  if (s.base == nullptr) {
    s.memory.reset();
    log::error("pipe {} -> {}: source {} of redirect records ({}) cannot be mapped here; the "
               "buffers it names are not used",
               open_.key.writer, open_.key.reader, index, region.to_string());
  }
}

void reader_state::close() noexcept {
  if (closed_) return;
  if (finished_) {
    try {
      (void)flush_releases();
    } catch (...) {  // a call run while waiting for room threw: the releases are given up
    }
  }
  closed_ = true;
  *alive_ = false;
  publisher_.reset();
  open_.layer->account(role::reader, counters_);
  if (open_.region) close_end(open_, role::reader, {});
}

}  // namespace seriema::pipe::detail

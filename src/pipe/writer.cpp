// The writing end: rmalloc in the book of the reader's heap (no round trip), rmem over the heap's
// view, rwrite publishing header, payload and flag (in place, or through the notification ring),
// and the releases the reader hands back.
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <seriema/base/error.hpp>
#include <seriema/fabric/runtime.hpp>

#include "ends.hpp"
#include "rendezvous.hpp"

namespace seriema::pipe::detail {

namespace {

/// Header word 1's used bytes, with the redirect bit of a redirect record.
std::uint64_t used_word(const heap_book::record& r) noexcept {
  return r.used | (r.redirect ? redirect_bit : 0);
}

}  // namespace

writer_state::writer_state(fabric::thread_context& ctx, fabric::thread_id reader,
                           const pipe_options& options)
    : options_(options),
      open_(begin_open(ctx, reader, options, role::writer,
                       region_layout{options.width, options.heap_bytes, options.pull_heap_bytes}
                           .writer_bytes())),
      layout_{options.width, options.heap_bytes, options.pull_heap_bytes},
      id_(open_.layer->next_end_id()),
      pull_id_(open_.layer->next_end_id()) {
  open_.layer->add(this);
}

writer_state::~writer_state() {
  close();
  open_.layer->remove(this);
}

void writer_state::finish(fabric::deadline_clock::time_point deadline) {
  const hello peer = end_open(open_, role::writer, deadline);
  fabric::thread_context& ctx = *open_.ctx;
  try {
    heap_offset_ = layout_.heap_offset();
    if (peer.region.size < layout_.reader_bytes()) {
      throw error(fmt::format("pipe: the reader's region {} is smaller than its ring and heap",
                              peer.region.to_string()));
    }
    publisher_ = std::make_unique<publisher>(ctx, peer.region, options_.protocol, options_.width);
    if (publisher_->direct() != nullptr) {
      view_ = publisher_->direct() + heap_offset_;
    } else {
      const int zone = ctx.rt().placement().locate(ctx.id()).zone;
      shadow_ = ctx.rt().service_allocate(zone, options_.heap_bytes);
      if (!shadow_) throw error("pipe: no memory for the writer's copy of the heap");
      view_ = shadow_.data;
    }
    book_ = std::make_unique<heap_book>(options_.heap_bytes, options_.width, options_.fit, view_);
    if (options_.pull_heap_bytes != 0) {
      pull_book_ = std::make_unique<heap_book>(options_.pull_heap_bytes, options_.width,
                                               options_.fit, exposed());
      pull_descriptors_.resize(options_.width);
    }
    forwards_.resize(options_.width);
    ring_order_.resize(options_.width);
    by_reference_ = publisher_->path() == publish_path::direct;
    stream_totals unused;
    peer_closed_ = open_.layer->peer_closed(open_.key, role::reader, &unused);
  } catch (...) {
    close();
    throw;
  }
  finished_ = true;
}

pipe_status writer_state::refusal() const noexcept {
  if (closed_ || peer_closed_) return pipe_status::closed;
  if (open_.ctx->rt().peer_failed(open_.peer_process)) return pipe_status::peer_failed;
  return pipe_status::ok;
}

std::size_t writer_state::collect_releases() {
  std::size_t settled = 0;
  read_releases(open_.region.data, layout_.release_slots(), releases_seen_,
                [&](bool decoded, std::uint32_t entry) {
    heap_book* book = (entry & pull_entry_bit) != 0 ? pull_book_.get() : book_.get();
    if (!decoded || book == nullptr || !book->release(entry & ~pull_entry_bit)) {
      ++counters_.rejected_releases;
      return;
    }
    ++counters_.releases;
    if (book != book_.get() || lent_out_ == 0) return;
    forward_note& note = forwards_[heap_book::index_of(entry)];
    if (note.from_end == 0 || note.record != entry) return;
    open_.layer->settle(*open_.ctx, note);
    note = {};
    --lent_out_;
    ++settled;
  });
  return settled;
}

reservation writer_state::try_allocate(std::size_t n) {
  if (const pipe_status refused = refusal(); refused != pipe_status::ok) return {{}, refused};
  if (n == 0) return {{}, pipe_status::zero_size};
  const std::uint64_t bytes = heap_bytes_for(n);
  if (n > options_.heap_bytes || bytes > options_.heap_bytes) return {{}, pipe_status::too_large};
  collect_releases();
  const auto granted = book_->allocate(bytes);
  if (!granted) return {{}, pipe_status::exhausted};
  book_->find(granted->entry)->payload = n;
  counters_.peak_heap_bytes = book_->peak_end();
  counters_.peak_live_bytes = book_->peak_live_bytes();
  return {{granted->offset + header_size, n, granted->entry, id_}, pipe_status::ok};
}

bool writer_state::poll_for_room() {
  ++counters_.exhausted;
  // Releases from another machine land through this process's progress (from this machine they
  // are stores: poll only now and then, as the reader does).
  return (publisher_->path() != publish_path::direct || (++idle_allocations_ & 31) == 0) &&
         open_.ctx->poll() != 0;
}

reservation writer_state::rmalloc(std::size_t n) {
  const reservation r = try_allocate(n);
  if (r.status != pipe_status::exhausted) return r;
  return poll_for_room() ? try_allocate(n) : r;  // once more when the poll did something
}

reservation writer_state::allocate_for_forward(std::size_t n) {
  // No poll between a granted allocation and its rwrite: the forwarded buffer checked before
  // stays as it was (a poll runs calls), and no allocation is left unwritten.
  const reservation r = try_allocate(n);
  if (r.status == pipe_status::exhausted && !in_poll_) (void)poll_for_room();
  return r;
}

reservation writer_state::rmalloc(std::size_t n, fabric::deadline_clock::time_point deadline) {
  reservation r = try_allocate(n);
  if (r.status != pipe_status::exhausted) return r;
  ++counters_.exhausted;
  fabric::thread_context& ctx = *open_.ctx;
  ctx.wait_until([&] { return (r = try_allocate(n)).status != pipe_status::exhausted; },
                 ctx.deadline_in_force(deadline));
  return r;
}

heap_book::record* writer_state::live_record(const rbuffer& b) noexcept {
  heap_book* book = b.end == id_ ? book_.get() : b.end == pull_id_ ? pull_book_.get() : nullptr;
  if (book == nullptr) return nullptr;
  heap_book::record* r = book->find(b.ticket);
  if (r == nullptr || r->offset + header_size != b.offset || r->payload != b.size) return nullptr;
  return r;
}

std::span<std::byte> writer_state::rmem(const rbuffer& b) noexcept {
  heap_book::record* r = live_record(b);
  if (r == nullptr || r->state != entry_state::allocated || closed_) return {};
  return {(b.end == id_ ? view_ : exposed()) + b.offset, static_cast<std::size_t>(b.size)};
}

pipe_status writer_state::rwrite(const rbuffer& b, std::size_t used) {
  if (b.end != id_ || used == 0 || used > b.size) return pipe_status::not_owner;
  if (closed_) return pipe_status::closed;
  heap_book::record* r = book_ ? book_->find(b.ticket) : nullptr;
  if (r == nullptr || r->state != entry_state::allocated) return pipe_status::stale;
  if (r->offset + header_size != b.offset || r->payload != b.size) return pipe_status::not_owner;
  if (const pipe_status refused = refusal(); refused != pipe_status::ok) return refused;
  r->used = used;
  // Next fit: buffers go out in allocation order (this one may wait for older ones); the other
  // policies: in rwrite order.
  r->state = entry_state::queued;
  if (options_.fit != transfer::fit_policy::next_fit) {
    ring_order_[ring_queued_++ & (options_.width - 1)] = b.ticket;
  }
  return publish_queued();
}

void writer_state::written(heap_book::record& r) noexcept {
  r.state = entry_state::written;
  ++writes_;
  ++counters_.buffers;
  counters_.bytes += r.used;
}

pipe_status writer_state::publish_in_ring(heap_book::record& r) {
  const std::uint32_t tag = tag_of(writes_);
  const std::uint64_t words[2] = {header_word0(tag, r.bytes / heap_granule),
                                  header_word1(used_word(r), book_->name_of(r))};
  std::memcpy(view_ + r.offset, words, sizeof words);
  const std::uint64_t slot = writes_ & (options_.width - 1);
  return publisher_->publish({view_ + r.offset, header_size + r.used}, heap_offset_ + r.offset,
                             slot * 8, slot_word(tag, r.offset));
}

pipe_status writer_state::publish_queued() {
  // A publication that waits for a cell polls, and the poll may come back here (the thread's
  // flush, a call that writes): the outer loop publishes what is queued, in order, once.
  if (publishing_) return pipe_status::ok;
  publishing_ = true;
  const pipe_status status = publish_in_order();
  publishing_ = false;
  return status;
}

pipe_status writer_state::publish_in_order() {
  return options_.fit == transfer::fit_policy::next_fit ? publish_in_place()
                                                        : publish_in_rwrite_order();
}

pipe_status writer_state::publish_in_rwrite_order() {
  // At most `width` records are queued (each is a live allocation): the ring never overflows.
  while (ring_published_ != ring_queued_) {
    if (in_poll_ && !publisher_->free_cells(1)) break;
    heap_book::record* r = book_->find(ring_order_[ring_published_ & (options_.width - 1)]);
    const pipe_status status = publish_in_ring(*r);
    if (status != pipe_status::ok) return status;
    written(*r);
    ++ring_published_;
  }
  return pipe_status::ok;
}

pipe_status writer_state::publish_in_place() {
  while (heap_book::record* r = book_->at_sequence(writes_)) {
    if (r->state != entry_state::queued) break;
    // Inside a poll a record goes out only when its publications (a wrap marker, the record)
    // cannot wait; the rest stay queued for the next rwrite or the thread's flush.
    if (in_poll_ && !publisher_->free_cells(2)) break;
    const std::uint32_t tag = tag_of(writes_);
    // The reader looks where the previous buffer ended (at the start when under 16 bytes were
    // left there); a buffer that wrapped elsewhere leaves it a marker pointing to the start.
    const std::uint64_t expected =
        options_.heap_bytes - r->follows < header_size ? 0 : r->follows;
    if (r->offset != expected) {
      const pipe_status marked =
          publisher_->publish({}, 0, heap_offset_ + expected, header_word0(tag, 0));
      if (marked != pipe_status::ok) return marked;
    }
    const std::uint64_t word1 = header_word1(used_word(*r), book_->name_of(*r));
    std::memcpy(view_ + r->offset + 8, &word1, sizeof word1);
    const pipe_status status = publisher_->publish(
        {view_ + r->offset + 8, 8 + r->used}, heap_offset_ + r->offset + 8,
        heap_offset_ + r->offset, header_word0(tag, r->bytes / heap_granule));
    if (status != pipe_status::ok) return status;
    written(*r);
  }
  return pipe_status::ok;
}

std::byte* writer_state::exposed() const noexcept {
  return open_.region.data + layout_.exposed_offset();
}

reservation writer_state::rstage(std::size_t n) {
  if (!pull_book_) return {{}, pipe_status::closed};
  if (const pipe_status refused = refusal(); refused != pipe_status::ok) return {{}, refused};
  if (n == 0) return {{}, pipe_status::zero_size};
  const std::uint64_t bytes = heap_bytes_for(n);
  if (n > options_.pull_heap_bytes || bytes > options_.pull_heap_bytes) {
    return {{}, pipe_status::too_large};
  }
  collect_releases();
  const auto granted = pull_book_->allocate(bytes);
  if (!granted) {
    ++counters_.exhausted;
    (void)open_.ctx->poll();  // hand-backs from another machine land through it
    return {{}, pipe_status::exhausted};
  }
  pull_book_->find(granted->entry)->payload = n;
  return {{granted->offset + header_size, n, granted->entry, pull_id_}, pipe_status::ok};
}

pipe_status writer_state::rpost(const rbuffer& b) {
  if (b.end != pull_id_) return pipe_status::not_owner;
  if (closed_) return pipe_status::closed;
  heap_book::record* r = pull_book_->find(b.ticket);
  if (r == nullptr || r->state != entry_state::allocated) return pipe_status::stale;
  if (r->offset + header_size != b.offset || r->payload != b.size) return pipe_status::not_owner;
  if (const pipe_status refused = refusal(); refused != pipe_status::ok) return refused;
  // The descriptor, then the flag (the post's tag and the entry the reader hands back).
  const std::uint64_t slot = posts_ & (options_.width - 1);
  pull_descriptors_[slot] = pull_descriptor(r->offset, b.size);
  const pipe_status status = publisher_->publish(
      {reinterpret_cast<const std::byte*>(&pull_descriptors_[slot]), 8},
      layout_.pull_ring_offset() + slot * 16, layout_.pull_ring_offset() + slot * 16 + 8,
      header_word0(tag_of(posts_), 0) | b.ticket);
  if (status != pipe_status::ok) return status;
  r->state = entry_state::written;
  ++posts_;
  ++counters_.buffers;
  counters_.bytes += b.size;
  return pipe_status::ok;
}

// --- forwarding (redirection pipes) ---

pipe_status writer_state::rforward(reader_state& from, const rbuffer& b, bool in_poll) {
  if (&from.context() != open_.ctx) return pipe_status::not_owner;
  if (closed_) return pipe_status::closed;
  const lendable_buffer lent = from.lend_check(b);
  if (lent.status != pipe_status::ok) return lent.status;
  if (const pipe_status refused = refusal(); refused != pipe_status::ok) return refused;
  collect_releases();
  // The forwards just taken back, on to their writer (once a batch is due).
  if (in_poll) {
    from.flush_if_free();
  } else {
    (void)from.flush_if_due();
  }
  // Inside a poll nothing may wait for a cell: a source record and the buffer, each with a wrap
  // marker, take at most four publications.
  if (in_poll && !publisher_->free_cells(4)) return pipe_status::exhausted;
  struct poll_scope {  // in_poll_ for the forward's publications, whatever way it ends
    bool& flag;
    ~poll_scope() { flag = false; }
  } scope{in_poll_ = in_poll};
  announced a;
  if (by_reference_ && !lent.redirected) a = announce(from.region_locator());
  if (a.status == pipe_status::ok) {
    a.status = a.source != 0 ? forward_in_place(from, b, lent, a.source)
                             : forward_copy(from, b, lent.payload);
  }
  return a.status;
}

pipe_status writer_state::rforward(reader_state& from, const rbuffer& b,
                                   fabric::deadline_clock::time_point deadline) {
  pipe_status status = rforward(from, b, false);
  if (status != pipe_status::exhausted) return status;
  fabric::thread_context& ctx = *open_.ctx;
  ctx.wait_until([&] { return (status = rforward(from, b, false)) != pipe_status::exhausted; },
                 ctx.deadline_in_force(deadline));
  return status;
}

writer_state::announced writer_state::announce(const transfer::remote_memory_locator& region) {
  for (std::size_t i = 0; i < sources_.size(); ++i) {
    const transfer::remote_memory_locator& known = sources_[i];
    if (known.process == region.process && known.address == region.address &&
        known.size == region.size && known.rkey_size == region.rkey_size &&
        std::memcmp(known.packed_rkey.data(), region.packed_rkey.data(), region.rkey_size) == 0) {
      return {pipe_status::ok, static_cast<std::uint32_t>(i + 1)};
    }
  }
  if (sources_.size() >= max_redirect_sources) return {pipe_status::ok, 0};  // copied then
  // A source record, in order before every redirect record that names it.
  const reservation r = allocate_for_forward(source_record_size);
  if (!r) return {r.status, 0};
  const std::uint64_t source = sources_.size() + 1;
  static_assert(sizeof source + sizeof region == source_record_size);
  std::memcpy(view_ + r.buffer.offset, &source, sizeof source);
  std::memcpy(view_ + r.buffer.offset + sizeof source, &region, sizeof region);
  book_->find(r.buffer.ticket)->redirect = true;
  const pipe_status status = rwrite(r.buffer, source_record_size);
  if (status != pipe_status::ok && book_->find(r.buffer.ticket)->state == entry_state::allocated) {
    return {status, 0};  // refused before it was queued: the number stays free
  }
  sources_.push_back(region);
  return {status, static_cast<std::uint32_t>(source)};
}

pipe_status writer_state::forward_copy(reader_state& from, const rbuffer& b,
                                       std::span<const std::byte> data) {
  const reservation r = allocate_for_forward(data.size());
  if (!r) return r.status;
  std::memcpy(view_ + r.buffer.offset, data.data(), data.size());
  const pipe_status status = rwrite(r.buffer, data.size());
  // Queued (next fit: it goes out with the next publication) counts as passed on.
  if (status == pipe_status::ok ||
      book_->find(r.buffer.ticket)->state != entry_state::allocated) {
    (void)from.rfree(b, !in_poll_);
  }
  return status;
}

pipe_status writer_state::forward_in_place(reader_state& from, const rbuffer& b,
                                           const lendable_buffer& lent,
                                           std::uint32_t source) {
  const reservation r = allocate_for_forward(redirect_descriptor_size);
  if (!r) return r.status;
  encode_redirect(std::span<std::byte, redirect_descriptor_size>(view_ + r.buffer.offset,
                                                                 redirect_descriptor_size),
                  source, lent.offset, lent.payload.size());
  book_->find(r.buffer.ticket)->redirect = true;
  // Lent before the write goes out: the reader may free the record at once.
  const std::uint32_t index = heap_book::index_of(r.buffer.ticket);
  forwards_[index] = {r.buffer.ticket, from.id(), from.key(), lent.entry};
  open_.layer->hold(from.key());
  from.lend(b);
  ++lent_out_;
  const pipe_status status = rwrite(r.buffer, redirect_descriptor_size);
  if (status == pipe_status::ok) ++counters_.forwarded;
  // Refused before it was queued: the buffer is the caller's again (a record left queued goes
  // out with the next publication, or its note is settled when the reader is gone). The note
  // is checked again: the direct path never polls, but nothing else may have settled it.
  forward_note& note = forwards_[index];
  if (status != pipe_status::ok &&
      book_->find(r.buffer.ticket)->state == entry_state::allocated &&
      note.record == r.buffer.ticket && note.from_end == from.id()) {
    note = {};
    --lent_out_;
    from.unlend(b);
    open_.layer->release_hold(*open_.ctx, from.key());
  }
  return status;
}

void writer_state::settle_forwards() noexcept {
  for (forward_note& note : forwards_) {
    if (note.from_end == 0) continue;
    try {
      open_.layer->settle(*open_.ctx, note);
    } catch (...) {  // the log of a region that cannot be freed: it stays with the service
    }
    note = {};
  }
  lent_out_ = 0;
}

void writer_state::peer_closed() noexcept {
  peer_closed_ = true;
  settle_forwards();  // the reader reads none of them any more
}

void writer_state::publish_backlog() {
  if (!closed_ && book_) (void)publish_queued();
}

void writer_state::close() noexcept {
  if (closed_) return;
  closed_ = true;
  *alive_ = false;
  if (lent_out_ != 0) {
    if (peer_closed_ || open_.ctx->rt().peer_failed(open_.peer_process)) {
      settle_forwards();
    } else {
      // The reader may still read them in place: the layer takes them back as it frees them
      // (its release area stays with our region until it closes or dies).
      try {
        open_.layer->adopt(open_.key, {open_.peer_process, std::move(forwards_),
                                       open_.region.data, layout_.release_slots(),
                                       releases_seen_, lent_out_});
      } catch (...) {  // no memory: the buffers stay lent, their regions held (never freed)
      }
      forwards_.clear();
      lent_out_ = 0;
    }
  }
  if (publisher_) {
    (void)publisher_->drain(fabric::deadline_clock::now() + std::chrono::seconds(5));
    publisher_.reset();
  }
  if (shadow_) {
    (void)open_.ctx->rt().service_free(reinterpret_cast<std::uint64_t>(shadow_.data),
                                        shadow_.size);
    shadow_ = {};
  }
  open_.layer->account(role::writer, counters_);
  if (open_.region) close_end(open_, role::writer, {writes_, posts_});
}

}  // namespace seriema::pipe::detail

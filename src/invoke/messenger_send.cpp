// The sending side of the one-sided Messenger protocol (paper §4.4.1): serialization straight
// into the receiver's chunk (same machine) or a registered staging unit (put, fence, then the
// published word), publishing, the move to the next chunk of the ring, the full-buffer policies,
// the local queue and its drain, and the messenger's failure. Growth is messenger_growth.cpp,
// the options channel.cpp; docs/messenger.md has the invariants.
// The local queue (detail/exceeding_queue.hpp) is defined here, not in a file of its own: in one
// translation unit with the queue path (copy_queued_record, send_queued_run, settle_failure) the
// compiler inlines its accessors there, and the code of that path stays what it was.
#include <fmt/format.h>

#include <seriema/base/error.hpp>
#include <seriema/transfer/arena.hpp>
#include <seriema/transfer/ucx.hpp>
#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/detail/settings.hpp>
#include <seriema/invoke/detail/messenger.hpp>

#include "chunk_service.hpp"

namespace seriema::invoke {

namespace {

std::uint64_t load_acquire(const std::uint64_t* word) noexcept {
  return std::atomic_ref<const std::uint64_t>(*word).load(std::memory_order_acquire);
}

}  // namespace

// ---------------------------------------------------------------- exceeding_queue

exceeding_queue::~exceeding_queue() {
  // The owner (the messenger) destroyed its transmitter first, which waited for every transfer
  // still reading a page; the blocks go back to the arena after that.
  pages_.clear();
  retired_.clear();
  spare_.clear();
  for (const transfer::memory_block& b : blocks_) source_->release_block(b);
}

void exceeding_queue::use_registered(transfer::block_source& source, std::size_t page_size,
                                     std::size_t max_bytes) {
  source_ = &source;
  page_size_ = page_size;
  max_blocks_ = std::max<std::size_t>(1, max_bytes / transfer::block_size);
}

bool exceeding_queue::carve_block() {
  if (blocks_.size() >= max_blocks_) return false;
  const transfer::memory_block block = source_->allocate_block();
  if (block.data == nullptr) return false;  // the arena is at its limit
  blocks_.push_back(block);
  for (std::size_t at = 0; at + page_size_ <= block.size; at += page_size_) {
    page p;
    p.data = block.data + at;
    p.capacity = page_size_;
    p.tags = &tags_.emplace_back();
    spare_.push_back(std::move(p));
  }
  return true;
}

bool exceeding_queue::take_registered_page(page& out) {
  // Pages retire in FIFO order and tickets complete in order, so the oldest retired page is
  // the first to become reusable.
  if (!retired_.empty() && retired_.front().tags->all_complete()) {
    out = std::move(retired_.front());
    retired_.pop_front();
    out.tags->clear();
  } else if (!spare_.empty() || carve_block()) {
    out = std::move(spare_.back());
    spare_.pop_back();
  } else {
    return false;
  }
  out.head = 0;
  out.tail = 0;
  return true;
}

exceeding_queue::page exceeding_queue::take_page(std::size_t size) {
  page fresh;
  if (source_ != nullptr && size <= page_size_ && take_registered_page(fresh)) return fresh;
  // Heap: no registered source (same machine, or SERIEMA_EXCEEDING_COPY=always), a record
  // larger than a page, or the registered cap reached. Its records are copied when sent, and
  // counted so (messenger_counters::exceeding_copied).
  fresh.capacity = std::max(heap_page_size, size);
  fresh.heap = std::make_unique<std::byte[]>(fresh.capacity);
  fresh.data = fresh.heap.get();
  return fresh;
}

void exceeding_queue::retire(page&& p) noexcept {
  if (p.tags != nullptr) retired_.push_back(std::move(p));
}

std::byte* exceeding_queue::reserve(std::size_t size) {
  if (pages_.empty() || pages_.back().capacity - pages_.back().tail < size) {
    pages_.push_back(take_page(size));
  }
  return pages_.back().data + pages_.back().tail;
}

void exceeding_queue::commit(std::size_t size) noexcept {
  pages_.back().tail += size;
  bytes_ += size;
}

std::byte* exceeding_queue::reserve_front(std::size_t size) {
  page fresh;
  fresh.capacity = size;
  fresh.heap = std::make_unique<std::byte[]>(size);
  fresh.data = fresh.heap.get();
  pages_.push_front(std::move(fresh));
  return pages_.front().data;
}

void exceeding_queue::commit_front(std::size_t size) noexcept {
  pages_.front().tail += size;
  bytes_ += size;
}

std::span<const std::byte> exceeding_queue::front() const noexcept {
  const page& p = pages_.front();
  wire::record_header h;
  std::memcpy(&h, p.data + p.head, sizeof h);
  return {p.data + p.head, h.size};
}

void exceeding_queue::pop() noexcept {
  page& p = pages_.front();
  wire::record_header h;
  std::memcpy(&h, p.data + p.head, sizeof h);
  p.head += h.size;
  bytes_ -= h.size;
  if (p.head == p.tail) {
    retire(std::move(p));
    pages_.pop_front();
  }
}

exceeding_queue::run exceeding_queue::front_run(std::size_t limit) const noexcept {
  const page& p = pages_.front();
  run r;
  std::size_t end = p.head;
  while (end < p.tail) {
    wire::record_header h;
    std::memcpy(&h, p.data + end, sizeof h);
    if (end + h.size - p.head > limit) break;
    end += h.size;
    ++r.records;
  }
  r.bytes = {p.data + p.head, end - p.head};
  r.tags = p.tags;
  return r;
}

bool exceeding_queue::pop_run(const run& r) noexcept {
  page& p = pages_.front();
  p.head += r.bytes.size();
  bytes_ -= r.bytes.size();
  if (p.head != p.tail) return false;
  retire(std::move(p));
  pages_.pop_front();
  return true;
}

void exceeding_queue::clear() noexcept {
  // Registered pages may still be read by a transfer: retired, not reused before it finished.
  while (!pages_.empty()) {
    retire(std::move(pages_.front()));
    pages_.pop_front();
  }
  bytes_ = 0;
}

// ---------------------------------------------------------------- messenger

messenger::messenger(channels& owner, thread_id destination, std::uint32_t released_word)
    : owner_(owner),
      destination_(destination),
      destination_process_(owner.self().rt().placement().locate(destination).process),
      released_word_(released_word) {}

messenger::~messenger() {
  // The transmitter waits (bounded) for puts still reading staging units; then the units go.
  transmitter_.reset();
  staging_.reset();
}

std::vector<std::uint64_t> messenger::chunk_addresses() const {
  std::vector<std::uint64_t> out;
  for (const slot& s : ring_) out.push_back(s.locator.address);
  return out;
}

bool messenger::check_peer() {
  if (failed_) {
    if (!busy_) settle_failure();
    return false;
  }
  thread_context& self = owner_.self();
  if (self.rt().peer_failed(destination_process_) ||
      self.endpoint_to(destination_process_).failed() ||
      (transmitter_ && transmitter_->failed())) {
    fail_all();
    return false;
  }
  return true;
}

bool messenger::peer_alive() {
  // The runtime may learn of a death on another thread (the launcher's notice arrives on the
  // bootstrap's reader thread), before this thread's next poll fails what its messengers hold:
  // a new call fails at once all the same. One load of a word nobody writes until a death.
  if (!owner_.self().rt().peer_failed(destination_process_)) return true;
  fail_all();
  return false;
}

void messenger::fail_all() noexcept {
  failed_ = true;
  close_join_window();
  // A wait of this messenger (busy_: growth, a drain) may be on the stack, in the middle of its
  // ring or its queue: what they hold is settled once it returned (check_peer, drain).
  if (!busy_) settle_failure();
}

void messenger::settle_failure() noexcept {
  end_open_record();  // counted as the calls before it were: sent, never to be consumed
  fabric::local_thread_state& state = owner_.self().state();
  fail_unpublished_replies(state);
  // Queued records were never published: their call_returns provably did not run.
  while (!queue_.empty()) {
    std::span<const std::byte> record = queue_.front();
    wire::record_header h;
    std::memcpy(&h, record.data(), sizeof h);
    if ((h.flags & wire::flag_reply) != 0) {
      wire::reply_extra reply;
      std::memcpy(&reply, record.data() + sizeof h + h.closure_size, sizeof reply);
      (void)state.deliver_reply(reply.slot, reply.generation, {}, fabric::outcome::not_executed);
    }
    queue_.pop();
  }
}

void messenger::fail_unpublished_replies(fabric::local_thread_state& state) noexcept {
  // Written but never published: the current chunk's bytes past the published word (mapped),
  // or the staging unit's since the last publish that went out (remote). The receiver reads
  // nothing past a published word, so these calls provably did not run.
  std::span<std::byte> unpublished;
  if (direct_ && !ring_.empty() && ring_[current_].direct_data != nullptr) {
    if (write_offset_ > published_) {
      unpublished = {ring_[current_].direct_data + published_, write_offset_ - published_};
    }
  } else if (!direct_ && staging_unit_.data != nullptr && staged_ > staged_batch_) {
    unpublished = {staging_unit_.data + staged_batch_, staged_ - staged_batch_};
  }
  wire::function_lookup functions;
  while (!unpublished.empty()) {
    const wire::parsed_record rec = wire::parse_record(unpublished, functions);
    if (rec.status == wire::parse_status::malformed) break;  // our own bytes: cannot happen
    if (rec.status == wire::parse_status::ok && (rec.header.flags & wire::flag_reply) != 0) {
      (void)state.deliver_reply(rec.reply.slot, rec.reply.generation, {},
                                fabric::outcome::not_executed);
    }
    unpublished = unpublished.subspan(rec.size());
  }
}

bool messenger::slot_free(const slot& s) const noexcept {
  // Fills are released in order (FIFO on both sides), so a chunk is free once the receiver has
  // released its last fill.
  return s.fill == 0 || load_acquire(owner_.feedback_words() + released_word_) >= s.fill;
}

void messenger::start_fill(std::size_t index) {
  current_ = index;
  closed_ = false;
  slot& s = ring_[current_];
  s.fill = ++fills_;
  s.lap = wire::next_lap(s.lap);
  write_offset_ = 0;
  published_ = 0;
  publish_limit_ = owner_.options().flush_size_for(by_message_);
  checked_batch_ = ~std::uint64_t{0};
}

void messenger::close_current(bool splice) {
  // Everything in the chunk is published with the full mark (and the splice mark when the ring
  // grew right after it); the receiver moves on once it has run all of it.
  if (direct_) {
    publish_word(true, splice);
  } else {
    publish_staged(true, splice);
  }
  closed_ = true;
}

bool messenger::advance_chunk(bool may_grow, space& why) {
  if (ring_.empty()) {
    if (!may_grow || !grow()) {
      why = failed_ ? space::failed : space::full;
      return false;
    }
    start_fill(0);
    return true;
  }
  std::size_t next = (current_ + 1) % ring_.size();
  if (!closed_) {
    // With one chunk, `next` is the current chunk itself: busy until the receiver released it,
    // which it does only after seeing it closed. So close first, then wait.
    bool splice = false;
    if (!slot_free(ring_[next]) && may_grow && ring_.size() < owner_.options().max_chunks) {
      if (grow()) {
        splice = true;
        next = current_ + 1;
      } else if (failed_) {
        why = space::failed;
        return false;
      }
    }
    close_current(splice);
    if (failed_) {
      why = space::failed;
      return false;
    }
    if (splice) {
      start_fill(next);
      return true;
    }
  }
  if (!slot_free(ring_[next])) {
    why = space::full;
    return false;
  }
  start_fill(next);
  return true;
}

bool messenger::start_staging_unit(std::size_t size) {
  // A staging unit is reused only when every put from it completed (its tags).
  unsigned idle = 0;
  for (;;) {
    staging_unit_ = staging_->allocate();
    if (staging_unit_) break;
    if (!check_peer()) return false;
    transmitter_->request_completion();
    // Our puts complete when the target's process worker acks them; the target's threads may
    // be waiting on puts to us just as well, so keep this process's worker moving too.
    const bool progressed = transmitter_->progress();
    owner_.self().rt().progress_shared();
    if (!progressed) fabric::thread_context::back_off(idle);
  }
  staged_ = 0;
  staged_batch_ = 0;
  return size + 64 <= staging_unit_.size;
}

std::byte* messenger::reserve_slow(std::size_t size, space& why, bool may_grow) {
  if (!check_peer()) {
    why = space::failed;
    return nullptr;
  }
  if (ring_.empty() || closed_ || write_offset_ + size > ring_[current_].capacity) {
    if (!advance_chunk(may_grow, why)) return nullptr;
  }
  if (direct_) return ring_[current_].direct_data + write_offset_;
  // Staged: room for the record and for the publish after it (publish_room) in the unit.
  if (!staging_unit_ || staged_ + size + publish_room > staging_unit_.size) {
    if (staging_unit_ && staged_ > staged_batch_) publish_staged(false, false);
    if (!start_staging_unit(size)) {
      why = failed_ ? space::failed : space::too_large;
      return nullptr;
    }
  }
  return staging_unit_.data + staged_;
}

std::byte* messenger::reserve(std::size_t size, space& why, bool may_grow) {
  why = space::ok;
  if (!ring_.empty() && !closed_ && write_offset_ + size <= ring_[current_].capacity) {
    if (direct_) return ring_[current_].direct_data + write_offset_;
    if (staging_unit_ && staged_ + size + publish_room <= staging_unit_.size) {
      return staging_unit_.data + staged_;
    }
  }
  return reserve_slow(size, why, may_grow);
}

void messenger::commit(std::size_t size, bool count) {
  write_offset_ += size;
  if (!direct_) staged_ += size;
  if (count) count_record(size);  // queued records were counted when they were queued
}

void messenger::seal_open_record() noexcept {
  close_join_window();
  const std::uint32_t repeat = open_repeat();
  const std::uint32_t joined = repeat - 1;
  if (joined > 0) {
    // Unpublished bytes (the record ends at the written bytes, above the published offset).
    const std::uint32_t size = static_cast<std::uint32_t>(sizeof(wire::record_header)) +
                               repeat * open_stride_;
    const std::uint32_t flags = wire::flag_repeated;
    std::memcpy(open_record_ + wire::record_size_offset, &size, 4);
    std::memcpy(open_record_ + wire::record_flags_offset, &flags, 4);
    std::memcpy(open_record_ + wire::record_flags_offset + 4, &repeat, 4);
    counters_.calls += joined;
    counters_.repeated += joined;
    counters_.bytes += std::uint64_t{joined} * open_stride_;
    owner_.count_sent(joined);
  }
  open_record_ = nullptr;
}

void messenger::publish_staged(bool full, bool splice) {
  end_open_record();
  slot& s = ring_[current_];
  const std::size_t pending = staged_ - staged_batch_;
  // The batch's remote offset: it ends where the chunk's written bytes end.
  const std::uint64_t remote_offset = wire::chunk_header_size + write_offset_ - pending;
  if (send_staged(pending, remote_offset, wire::make_published(write_offset_, s.lap, full, splice)) !=
      transfer::op_status::ok) {
    staged_batch_ = staged_;  // this batch may have gone out: not provably unpublished
    fail_all();
    return;
  }
  note_published();
}

transfer::op_status messenger::send_staged(std::size_t pending, std::uint64_t remote_offset,
                                           std::uint64_t word) {
  return send_batch({staging_unit_.data + staged_batch_, pending}, staging_unit_.tags, true,
                    remote_offset, word);
}

transfer::op_status messenger::send_batch(std::span<const std::byte> data,
                                          transfer::unit_tags* data_tags, bool in_staging,
                                          std::uint64_t remote_offset, std::uint64_t word) {
  // A publish may have used the unit's last bytes; one with no staged bytes pending (a close,
  // or a batch from the queue) then takes a fresh unit. With staged records pending there is
  // room: each reserved publish_room.
  if (staged_ + publish_room > staging_unit_.size) {
    if (in_staging && !data.empty()) return transfer::op_status::error;  // cannot happen
    if (!start_staging_unit(0)) return transfer::op_status::peer_failed;
    if (in_staging) data_tags = staging_unit_.tags;  // (data is empty)
  }
  if (!in_staging && !data_tags->can_accept(&transmitter_->counter())) {
    return transfer::op_status::tags_full;  // only this messenger's transmitter tags its queue
  }
  const slot& s = ring_[current_];
  std::byte* room = staging_unit_.data + staged_;
  transfer::op_status st;
  if (by_message_) {
    // The header travels from the unit as well: UCX reads it until the send completed.
    const fabric::write_message m{s.locator.address, s.locator.size, remote_offset,
                                  wire::published_word_offset, word};
    std::memcpy(room, &m, sizeof m);
    st = transmitter_->send(fabric::am_id_write, {room, sizeof m}, data, staging_unit_.tags);
    staged_ += sizeof m;
    // A payload from the queue is read until the same completion: its page carries the tag.
    if (st == transfer::op_status::ok && !in_staging) {
      (void)data_tags->add(transmitter_->current_tag());  // accepted: checked above
    }
  } else {
    if (!data.empty()) {
      st = transmitter_->put(data, *s.remote, remote_offset, data_tags);
      if (st != transfer::op_status::ok) return st;
      // The data lands before the word that publishes it (UCX orders across the fence).
      ucp_worker_fence(owner_.self().worker().handle());
    }
    // The word travels from the staging unit too (it must stay untouched until the put is done).
    std::memcpy(room, &word, sizeof word);
    st = transmitter_->put({room, sizeof word}, *s.remote, wire::published_word_offset,
                           staging_unit_.tags);
    staged_ += sizeof word;
  }
  staged_batch_ = staged_;
  return st;
}

void messenger::publish() {
  if (ring_.empty() || closed_ || published_ == write_offset_ || failed_) return;
  if (direct_) {
    publish_word(false, false);
  } else {
    publish_staged(false, false);
  }
}

call_status messenger::write_record(channel mode, fabric::function_id function,
                                    std::span<const std::byte> closure, std::uint32_t flags,
                                    std::span<const std::byte> extras,
                                    std::span<const std::byte> buffer, space& why) {
  busy_ = true;
  close_join_window();  // until this call is written: see join_limit_
  if (joins_open_record(mode, function, flags, buffer)) {
    const std::size_t stride = fabric::closure_stride(closure.size());
    if (std::byte* at = room_to_append(stride)) {
      append_closure(at, closure, stride);
      commit(stride, false);
      if (publish_due(mode)) publish();
      busy_ = false;
      open_join_window();
      why = space::ok;
      return call_status::ok;
    }
  }
  const std::size_t size = wire::record_size(closure.size(), buffer.size(), flags);
  std::byte* p = reserve(size, why, true);
  if (p == nullptr) {
    busy_ = false;
    if (why == space::failed) return call_status::peer_failed;
    if (why == space::too_large) return call_status::too_large;
    return call_status::full;
  }
  end_open_record();  // (when reserve moved on, a publish has ended it already)
  detail::serialize_record(p, size, function, closure, flags, extras, buffer);
  note_written(p, mode, function, flags, buffer, closure.size());
  commit(size, true);
  if (publish_due(mode)) publish();
  busy_ = false;
  open_join_window();
  return call_status::ok;
}

call_status messenger::queue_record(fabric::function_id function,
                                    std::span<const std::byte> closure, std::uint32_t flags,
                                    std::span<const std::byte> extras,
                                    std::span<const std::byte> buffer, bool bounded,
                                    bool first) {
  const std::size_t size = wire::record_size(closure.size(), buffer.size(), flags);
  if (bounded && queue_.bytes() + size > owner_.options().exceeding_limit) return call_status::full;
  close_join_window();  // later calls go behind this one, through the queue
  std::byte* p = first ? queue_.reserve_front(size) : queue_.reserve(size);
  detail::serialize_record(p, size, function, closure, flags, extras, buffer);
  if (first) {
    queue_.commit_front(size);
  } else {
    queue_.commit(size);
  }
  owner_.note_queued(*this);
  // Counted as sent now, so runtime::run's quiescence waits for it to be drained and run.
  count_record(size);
  ++counters_.exceeding;
  counters_.exceeding_peak_bytes = std::max<std::uint64_t>(counters_.exceeding_peak_bytes,
                                                           queue_.bytes());
  return call_status::ok;
}

void messenger::flush() {
  if (!failed_ && !peer_alive()) return;  // failed now, and settled unless a wait is on the stack
  (void)drain();
  publish();
}

std::size_t messenger::drain() {
  if (failed_ && !busy_) settle_failure();
  if (queue_.empty() || busy_ || failed_) return 0;
  if (!peer_alive()) return 0;  // its queue ends not_executed, not in a dead process's chunks
  std::size_t moved = 0;
  busy_ = true;
  while (!queue_.empty()) {
    // Registered pages exist only on the remote path (use_registered, from choose_publishing).
    const std::size_t step = queue_.front_registered() ? send_queued_run() : copy_queued_record();
    if (step == 0) break;
    moved += step;
  }
  busy_ = false;
  if (moved > 0) publish();
  return moved;
}

std::size_t messenger::copy_queued_record() {
  std::span<const std::byte> record = queue_.front();
  space why;
  // May grow: the allocation's wait nests a poll, which skips this messenger (busy_).
  std::byte* p = reserve(record.size(), why, true);
  if (p == nullptr) {
    if (why == space::failed) fail_all();
    return 0;
  }
  end_open_record();
  std::memcpy(p, record.data(), record.size());
  commit(record.size(), false);
  queue_.pop();
  ++(direct_ ? counters_.exceeding_direct : counters_.exceeding_copied);
  return 1;
}

bool messenger::make_room_in_chunk(std::size_t size, space& why) {
  if (!check_peer()) {
    why = space::failed;
    return false;
  }
  if (ring_.empty() || closed_ || write_offset_ + size > ring_[current_].capacity) {
    return advance_chunk(true, why);
  }
  return true;
}

std::size_t messenger::send_queued_run() {
  space why = space::ok;
  if (!make_room_in_chunk(queue_.front().size(), why)) {
    if (why == space::failed) fail_all();
    return 0;
  }
  // A staged batch must end where the chunk's written bytes end (publish_staged): publish the
  // records staged before the run first, so that the run follows them in the chunk.
  if (staged_ > staged_batch_) publish_staged(false, false);
  end_open_record();
  if (failed_) return 0;
  slot& s = ring_[current_];
  const exceeding_queue::run run = queue_.front_run(s.capacity - write_offset_);
  const std::uint64_t remote_offset = wire::chunk_header_size + write_offset_;
  write_offset_ += run.bytes.size();
  const transfer::op_status st =
      send_batch(run.bytes, run.tags, false, remote_offset,
                 wire::make_published(write_offset_, s.lap, false, false));
  // Sent or not, the run leaves the queue: a failed send may have delivered it (as a failed
  // staged batch may), so its calls are not provably unpublished.
  const bool page_emptied = queue_.pop_run(run);
  if (st != transfer::op_status::ok) {
    fail_all();
    return 0;
  }
  note_published();
  counters_.exceeding_uncopied += run.records;
  // The emptied page is reused once this send completed: ask for that completion now rather
  // than at the transmitter's next periodic ticket.
  if (page_emptied) transmitter_->request_completion();
  return run.records;
}

template <class Policy>
call_status messenger::send(channel mode, fabric::function_id function,
                            std::span<const std::byte> closure, std::uint32_t flags,
                            std::span<const std::byte> extras, std::span<const std::byte> buffer) {
  const std::size_t size = wire::record_size(closure.size(), buffer.size(), flags);
  if (size > owner_.options().max_record()) return call_status::too_large;
  if (failed_ || !peer_alive()) return call_status::peer_failed;
  if (busy_) {
    // Called from a handler that runs while this messenger waits (growth, Retry): the ring is
    // mid-operation, so the record goes to the queue, behind everything before it.
    return queue_record(function, closure, flags, extras, buffer, false);
  }
  // Overflow mode and retry_async queue a call that cannot be written now, up to the exceeding
  // limit; past it the policy decides.
  const bool queues = mode == channel::ovfl || std::is_same_v<Policy, policy::retry_async>;
  if (!queue_.empty()) {
    // Older records are queued (FIFO: this one goes behind them). A drain may grow the ring,
    // and the wait for the chunks polls: handlers run there, and their calls to this destination
    // are queued. A call that may queue takes its place in the queue before the drain, so that
    // those calls, made after it, go behind it. (A call that may not queue drains first: calls
    // made during that wait are written before it, as during retry's loop.)
    if (queues && queue_record(function, closure, flags, extras, buffer, true) == call_status::ok) {
      (void)drain();
      return call_status::ok;
    }
    (void)drain();
  }
  bool first = false;
  if (queue_.empty()) {
    space why;
    call_status status = write_record(mode, function, closure, flags, extras, buffer, why);
    if (status != call_status::full) return status;
    ++counters_.full;
    // The queue was empty: what it holds now, handlers queued during the write's wait for chunks
    // that then did not come (no memory there, the deadline in force). This call came first.
    first = !queue_.empty();
  }
  if (queues &&
      queue_record(function, closure, flags, extras, buffer, true, first) == call_status::ok) {
    return call_status::ok;
  }
  if constexpr (std::is_same_v<Policy, policy::retry>) {
    thread_context& self = owner_.self();
    const fabric::deadline_clock::time_point deadline = self.deadline_in_force();
    unsigned idle = 0;
    for (;;) {
      // Serving incoming calls while waiting is what lets two threads that fill each other's
      // rings both progress; the receiver's release arrives through this progress too.
      std::size_t ran = self.poll();
      if (!check_peer()) return call_status::peer_failed;
      if (!queue_.empty()) drain();
      if (queue_.empty()) {
        space why;
        call_status status = write_record(mode, function, closure, flags, extras, buffer, why);
        if (status != call_status::full) return status;
      }
      if (ran == 0) {
        if (deadline != fabric::no_deadline && fabric::deadline_clock::now() >= deadline) {
          return call_status::deadline_exceeded;
        }
        fabric::thread_context::back_off(idle);
      }
    }
  }
  return call_status::full;
}

template call_status messenger::send<policy::fail>(channel, fabric::function_id,
                                                   std::span<const std::byte>, std::uint32_t,
                                                   std::span<const std::byte>,
                                                   std::span<const std::byte>);
template call_status messenger::send<policy::retry>(channel, fabric::function_id,
                                                    std::span<const std::byte>, std::uint32_t,
                                                    std::span<const std::byte>,
                                                    std::span<const std::byte>);
template call_status messenger::send<policy::retry_async>(channel, fabric::function_id,
                                                          std::span<const std::byte>,
                                                          std::uint32_t,
                                                          std::span<const std::byte>,
                                                          std::span<const std::byte>);

call_status messenger::send_unbounded(fabric::function_id function,
                                      std::span<const std::byte> closure,
                                      std::span<const std::byte> buffer) {
  const std::size_t size = wire::record_size(closure.size(), buffer.size(), 0);
  if (size > owner_.options().max_record()) return call_status::too_large;
  if (failed_ || !peer_alive()) return call_status::peer_failed;
  if (!busy_ && queue_.empty()) {
    space why;
    call_status status = write_record(channel::write, function, closure, 0, {}, buffer, why);
    if (status != call_status::full) return status;
  }
  return queue_record(function, closure, 0, {}, buffer, false);
}

call_status messenger::publish_raw_for_testing(std::span<const std::byte> bytes,
                                               std::uint64_t messages) {
  if (bytes.size() % wire::record_alignment != 0 || bytes.size() > owner_.options().max_record()) {
    return call_status::too_large;
  }
  space why;
  end_open_record();
  busy_ = true;
  std::byte* p = reserve(bytes.size(), why, true);
  busy_ = false;
  if (p == nullptr) return why == space::failed ? call_status::peer_failed : call_status::full;
  std::memcpy(p, bytes.data(), bytes.size());
  write_offset_ += bytes.size();
  if (!direct_) staged_ += bytes.size();
  owner_.count_sent(messages);
  publish();
  return call_status::ok;
}

call_status messenger::publish_word_for_testing(std::uint64_t word) {
  if (ring_.empty()) setup();
  slot& s = ring_[current_];
  owner_.count_sent(1);
  end_open_record();  // the word may publish it
  if (direct_) {
    std::atomic_ref<std::uint64_t>(*s.direct_word).store(word, std::memory_order_release);
    return call_status::ok;
  }
  if (!staging_unit_ && !start_staging_unit(0)) return call_status::peer_failed;
  // Records staged but not published stay unpublished: only the word travels.
  staged_batch_ = staged_;
  transfer::op_status st = send_staged(0, wire::chunk_header_size + write_offset_, word);
  return st == transfer::op_status::ok ? call_status::ok : call_status::error;
}

}  // namespace seriema::invoke

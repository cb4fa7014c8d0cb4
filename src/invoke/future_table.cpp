// The futures' per-thread table (records, the watched scan, continuations, large replies read
// from the callee's memory), coroutine frames from per-thread free lists, deferred replies and
// runtime::run's driver of coroutine bodies.
#include <seriema/invoke/detail/future_table.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <nlohmann/json.hpp>
#include <seriema/base/error.hpp>
#include <seriema/base/log.hpp>
#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/detail/future_calls.hpp>
#include <seriema/invoke/task.hpp>
#include <seriema/transfer/ucx.hpp>

namespace seriema::invoke::detail {

namespace {

std::unique_ptr<fabric::thread_extension> make_table(thread_context& self) {
  return std::make_unique<future_table>(self);
}

// Registered before main: every worker and attached context gets its futures.
const std::size_t registered = fabric::register_thread_layer(
    {"invoke.futures", fabric::layer_slot::invoke_futures,
     fabric::layer_scope::workers_and_attached, &make_table});

// A fixed 16-poll period between clock reads of the watched scan: deadlines of watched records
// are seen within 16 polls (a poll is tens of nanoseconds when idle).
constexpr unsigned clock_period = 16;

// Service call that gives back a large reply's piece once its caller read it (fire and forget:
// a lost one leaks until the runtime ends, and the caller does not wait for it). Only memory the
// callee's process lent is freed, once: any other return frees nothing and is counted.
struct free_large_reply {
  std::uint64_t address;
  std::uint64_t size;
  void operator()(thread_context& server) const {
    if (!server.rt().service_return(address, size)) {
      server.rt().counters().rejected_returns.fetch_add(1, std::memory_order_relaxed);
    }
  }
};

}  // namespace

// A large reply's reads from the callee's registered memory, in flight on the owner's worker:
// one get per piece into one buffer (shared with the requests left to UCX at a deadline).
struct large_fetch {
  std::vector<large_piece> pieces;
  std::vector<std::optional<transfer::remote_memory>> remotes;  // the unpacked rkeys
  std::vector<void*> requests;                                   // null: done
  std::shared_ptr<std::vector<std::byte>> buffer;
  bool failed = false;
};

future_table::future_table(thread_context& self) : self_(self) { set_wants_poll(false); }

future_table::~future_table() {
  for (future_record& r : records_) {
    if (r.source != record_source::local) close_reply(r);
    r.drop_value();
  }
}

void throw_no_futures(thread_context& self) {
  throw error(fmt::format("thread {} has no futures (a service thread's context, or called "
                          "before the runtime made the thread's context)",
                          self.id()));
}

future_record& future_table::take_free() {
  if (free_.empty()) return records_.emplace_back();
  future_record* r = free_.back();
  free_.pop_back();
  if (r->cold) reset_cold(*r);
  return *r;
}

future_record& future_table::open_reply(fabric::thread_id dest, std::uint32_t value_size,
                                        bool (*decode)(future_record&,
                                                       std::span<const std::byte>)) {
  // Only the first line's words: the fields after `box` are at their defaults (take_free), and
  // `watched` is false and `object` null in a free record (release unwatched and dropped them).
  future_record& r = take_free();
  r.state.store(0, std::memory_order_relaxed);
  r.observed = false;
  r.held = true;
  r.value_size = value_size;
  r.destination = dest;
  r.status = fabric::call_status::ok;
  fabric::thread_context::opened_reply opened;
  if (decode != nullptr) {
    r.cold = true;
    r.rich = true;
    r.decode = decode;
    opened = self_.open_variable_reply(dest, &r.bytes, &r.state);
  } else {
    if (value_size > future_record::box_size) {
      r.cold = true;
      r.bytes.resize(value_size);
    }
    opened = self_.open_reply_raw(dest, value_size, r.raw_value(), &r.state);
  }
  r.source = opened.in_cell ? record_source::cell : record_source::entry;
  r.index = opened.index;
  r.generation = opened.generation;
  r.process = opened.process;
  ++created_;
  return r;
}

future_record& future_table::acquire() {
  future_record* r = &take_free();
  r->state.store(0, std::memory_order_relaxed);
  r->source = record_source::local;
  r->observed = false;
  r->held = true;
  r->index = r->generation = r->value_size = 0;
  r->destination = 0;
  r->process = -1;
  r->status = fabric::call_status::ok;
  ++created_;
  return *r;
}

void future_table::reset_cold(future_record& r) noexcept {
  r.rich = false;
  r.deadline = fabric::no_deadline;
  r.advance = nullptr;
  r.decode = nullptr;
  r.bytes.clear();  // keeps its capacity: a warm record allocates nothing
  r.details.clear();
  if (r.error) r.error = nullptr;  // (an exception_ptr's reset is a call into the runtime)
  r.next = {};
  r.discard = nullptr;
  r.node = nullptr;
  r.cold = false;
}

void future_table::release_slow(future_record& r) noexcept {
  if (r.watched) unwatch(r);
  r.held = false;
  if (r.source == record_source::local && r.outcome() == fabric::outcome::pending) {
    // A combinator's record: the combinator goes (its futures with it), and so does the record.
    // Any other local record still pending has a producer (then, a task) that ends it later
    // and gives it back then (complete).
    if (!r.cold || r.discard == nullptr) return;
    discard_combinator(r);
    free_.push_back(&r);
    return;
  }
  if (r.source != record_source::local && !ended(r)) close_reply(r);
  const fabric::outcome o = r.outcome();
  if (o != fabric::outcome::pending && o != fabric::outcome::done &&
      o != fabric::outcome::cancelled && !r.observed) {
    report_unobserved(r);
  }
  r.drop_value();
  free_.push_back(&r);
}

void future_table::discard_combinator(future_record& r) noexcept {
  void (*discard)(void*) = r.discard;
  void* node = r.node;
  r.advance = nullptr;
  r.discard = nullptr;
  r.node = nullptr;
  discard(node);
}

void future_table::report_unobserved(future_record& r) noexcept {
  const std::uint64_t before = self_.rt().counters().failed_futures_unobserved.fetch_add(
      1, std::memory_order_relaxed);
  if (before != 0) return;
  try {
    const std::string thrown = summarize_remote_exception(r.details);
    log::warning("thread {}: a future ({}{}{}) was destroyed without anyone asking how it "
                 "ended (get, try_get, result, wait, then or co_await); later ones are only "
                 "counted (counters: failed_futures_unobserved)",
                 self_.id(), fabric::describe(r.outcome(), r.destination, r.process),
                 thrown.empty() ? "" : ": ", thrown);
  } catch (...) {  // the log is best effort
  }
}

void future_table::close_reply(future_record& r) noexcept {
  switch (r.source) {
    case record_source::cell:
      self_.cells().abandon(r.index, r.generation, r.value_size);
      break;
    case record_source::entry:
      fabric::abandon_reply(self_.state(), r.index, r.generation);
      break;
    case record_source::fetching:
      // UCX may still write the buffer: the thread keeps it until each read completed.
      for (std::size_t i = 0; i < r.fetch->requests.size(); ++i) {
        if (r.fetch->requests[i] == nullptr) continue;
        self_.state().staged.leave(r.fetch->pieces[i].where.process, r.fetch->buffer,
                                   r.fetch->requests[i]);
      }
      free_pieces(*r.fetch);
      delete r.fetch;
      r.fetch = nullptr;
      break;
    case record_source::local:
      break;
  }
  (void)self_.state().take_failure_details(r.index, r.generation);
  r.source = record_source::local;
}

bool future_table::ended_slow(future_record& r) noexcept {
  fabric::outcome arrived = fabric::outcome::pending;
  switch (r.source) {
    case record_source::local:
      if (r.outcome() != fabric::outcome::pending) return true;
      return r.cold && r.advance != nullptr && r.advance(r.node);
    case record_source::cell:
      arrived = self_.cells().collect(r.index, r.generation, r.raw_value(), r.value_size);
      if (arrived == fabric::outcome::pending) return false;
      break;
    case record_source::entry:
      arrived = r.outcome();
      if (arrived == fabric::outcome::pending) return false;
      break;
    case record_source::fetching:
      return settle_fetch(r);
  }
  // The reply is here (the cell or entry is free again): the record is the owner's alone.
  r.source = record_source::local;
  if (arrived != fabric::outcome::done) {
    r.cold = true;
    r.details = self_.state().take_failure_details(r.index, r.generation);
  } else if (r.rich) {
    r.state.store(0, std::memory_order_relaxed);
    return settle_rich(r);
  }
  r.state.store(static_cast<int>(arrived), std::memory_order_relaxed);
  return true;
}

void future_table::reject_reply(future_record& r) noexcept {
  self_.rt().counters().rejected_results.fetch_add(1, std::memory_order_relaxed);
  r.state.store(static_cast<int>(fabric::outcome::not_executed), std::memory_order_relaxed);
}

bool future_table::settle_rich(future_record& r) noexcept {
  const std::span<const std::byte> reply = r.bytes;
  if (reply.empty()) {
    reject_reply(r);
    return true;
  }
  const auto tag = static_cast<reply_tag>(reply[0]);
  if (tag == reply_tag::inline_bytes) {
    if (r.decode(r, reply.subspan(1))) {
      r.state.store(static_cast<int>(fabric::outcome::done), std::memory_order_relaxed);
    } else {
      reject_reply(r);
    }
    return true;
  }
  return start_fetch(r, reply.subspan(1));
}

bool future_table::start_fetch(future_record& r, std::span<const std::byte> reply) noexcept {
  large_reply head;
  if (static_cast<reply_tag>(r.bytes[0]) != reply_tag::registered || reply.size() < sizeof head) {
    reject_reply(r);
    return true;
  }
  std::memcpy(&head, reply.data(), sizeof head);
  if (reply.size() != sizeof head + std::size_t{head.pieces} * sizeof(large_piece)) {
    reject_reply(r);
    return true;
  }
  try {
    auto fetch = std::make_unique<large_fetch>();
    fetch->pieces.resize(head.pieces);
    std::memcpy(fetch->pieces.data(), reply.data() + sizeof head, head.pieces * sizeof(large_piece));
    if (!pieces_fit(fetch->pieces, head.size)) {
      free_pieces(*fetch);
      reject_reply(r);
      return true;
    }
    fetch->buffer = std::make_shared<std::vector<std::byte>>(static_cast<std::size_t>(head.size));
    start_reads(*fetch);
    r.fetch = fetch.release();
    r.source = record_source::fetching;
  } catch (...) {  // an rkey did not unpack, or no memory for the value
    reject_reply(r);
    return true;
  }
  return settle_fetch(r);
}

bool future_table::pieces_fit(const std::vector<large_piece>& pieces,
                              std::uint64_t size) const noexcept {
  std::uint64_t total = 0;
  for (const large_piece& p : pieces) {
    if (!p.where.valid() || p.where.process < 0 || p.where.process >= self_.rt().size() ||
        p.size > p.where.size || p.size > large_piece_bytes) {
      return false;
    }
    total += p.size;
  }
  return total == size;
}

void future_table::start_reads(large_fetch& fetch) {
  fabric::runtime& rt = self_.rt();
  fetch.remotes.resize(fetch.pieces.size());
  fetch.requests.assign(fetch.pieces.size(), nullptr);
  std::byte* into = fetch.buffer->data();
  for (std::size_t i = 0; i < fetch.pieces.size(); ++i) {
    const large_piece& piece = fetch.pieces[i];
    const int process = piece.where.process;
    transfer::ucx_endpoint& endpoint = self_.endpoint_to(process);
    auto& remote = fetch.remotes[i].emplace(endpoint, piece.where, rt.same_machine(process));
    if (remote.direct() != nullptr) {
      std::memcpy(into, remote.direct(), static_cast<std::size_t>(piece.size));
    } else {
      ucp_request_param_t param{};
      void* get = ucp_get_nbx(endpoint.handle(), into, static_cast<std::size_t>(piece.size),
                              remote.address(), remote.rkey(), &param);
      if (UCS_PTR_IS_ERR(get)) {
        fetch.failed = true;
      } else {
        fetch.requests[i] = get;
      }
    }
    into += piece.size;
  }
}

void future_table::free_pieces(const large_fetch& fetch) noexcept {
  for (const large_piece& piece : fetch.pieces) {
    try {
      (void)self_.service_call(piece.where.process,
                               free_large_reply{piece.where.address, piece.where.size});
    } catch (...) {  // a lost free leaks until the runtime ends
    }
  }
}

bool future_table::settle_fetch(future_record& r) noexcept {
  large_fetch& fetch = *r.fetch;
  for (void*& request : fetch.requests) {
    if (request == nullptr) continue;
    const ucs_status_t status = ucp_request_check_status(request);
    if (status == UCS_INPROGRESS) return false;
    if (status != UCS_OK) fetch.failed = true;
    ucp_request_free(request);
    request = nullptr;
  }
  // Read (or failed): the callee's memory goes back in any case.
  free_pieces(fetch);
  const bool failed = fetch.failed;
  std::shared_ptr<std::vector<std::byte>> value = std::move(fetch.buffer);
  delete r.fetch;
  r.fetch = nullptr;
  r.source = record_source::local;
  if (failed) {  // the callee's process died before the value was read
    r.state.store(static_cast<int>(fabric::outcome::may_have_executed), std::memory_order_relaxed);
  } else if (r.decode(r, *value)) {
    r.state.store(static_cast<int>(fabric::outcome::done), std::memory_order_relaxed);
  } else {
    reject_reply(r);
  }
  return true;
}

void future_table::end_now(future_record& r, fabric::outcome why) noexcept {
  if (ended(r)) return;
  close_reply(r);
  if (r.discard != nullptr) discard_combinator(r);  // it (and its futures) go
  if (r.outcome() == fabric::outcome::pending) {
    r.state.store(static_cast<int>(why), std::memory_order_relaxed);
  }
}

void future_table::end_pending(future_record& r, fabric::outcome why) noexcept {
  if (ended(r)) return;
  end_now(r, why);
  if (r.watched) {
    remove_watched(r);
    firing_.push_back(&r);
    update_wants_poll();
  }
}

void future_table::complete(future_record& r, fabric::outcome why) noexcept {
  if (!r.held) {  // nobody holds it any more: given back now
    r.drop_value();
    free_.push_back(&r);
    return;
  }
  if (r.outcome() != fabric::outcome::pending) return;  // cancelled meanwhile: keeps that
  r.state.store(static_cast<int>(why), std::memory_order_relaxed);
  // Inside the scan (a combinator driven by ended() completed it), the scan moves it.
  if (r.watched && !scanning_) {
    remove_watched(r);
    firing_.push_back(&r);
    update_wants_poll();
  }
}

void future_table::watch(future_record& r, continuation c) {
  r.cold = true;  // `next` (and the deadline await_suspend may have set) are after the box
  r.next = c;
  // Asked before `watched` is set: a combinator that ended() drives may complete r right here,
  // and complete() queues a watched record to fire, so it would be queued twice (the second
  // firing would call the continuation it cleared).
  const bool ended_already = ended(r);
  r.watched = true;
  if (ended_already) {
    firing_.push_back(&r);
  } else {
    watched_.push_back(&r);
    if (r.deadline != fabric::no_deadline) ++with_deadline_;
  }
  set_wants_poll(true);
}

void future_table::remove_watched(future_record& r) noexcept {
  auto at = std::find(watched_.begin(), watched_.end(), &r);
  if (at == watched_.end()) return;
  if (r.deadline != fabric::no_deadline) --with_deadline_;
  *at = watched_.back();
  watched_.pop_back();
}

void future_table::unwatch(future_record& r) noexcept {
  remove_watched(r);
  auto at = std::find(firing_.begin(), firing_.end(), &r);
  if (at != firing_.end()) firing_.erase(at);
  r.watched = false;
  if (r.cold) r.next = {};
  update_wants_poll();
}

void future_table::drive(future_record& r) {
  driven_.push_back(&r);
  set_wants_poll(true);
}

void future_table::undrive(future_record& r) noexcept {
  std::erase(driven_, &r);
  update_wants_poll();
}

std::size_t future_table::poll(thread_context&) {
  const std::uint64_t advanced_before = advanced_;
  for (std::size_t i = 0; i < driven_.size(); ++i) (void)ended(*driven_[i]);
  if (!watched_.empty()) scan_watched();
  std::size_t fired = 0;
  // One at a time from the front: a continuation may watch or end others (appended), and a
  // nested poll (a resumed coroutine that waits) takes the next ones; each fires once.
  while (!firing_.empty()) {
    future_record& r = *firing_.front();
    firing_.pop_front();
    const continuation c = r.next;
    r.next = {};
    r.watched = false;
    ++fired;
    ++fired_;
    update_wants_poll();
    c.fire(c.context, r);
  }
  update_wants_poll();
  return fired + static_cast<std::size_t>(advanced_ - advanced_before);
}

void future_table::scan_watched() noexcept {
  scanning_ = true;
  const bool read_clock = with_deadline_ > 0 && ++polls_since_clock_ >= clock_period;
  fabric::deadline_clock::time_point now{};
  if (read_clock) {
    polls_since_clock_ = 0;
    now = fabric::deadline_clock::now();
  }
  for (std::size_t i = 0; i < watched_.size();) {
    future_record& r = *watched_[i];
    bool done = ended(r);
    if (!done && read_clock && r.deadline <= now) {
      end_now(r, fabric::outcome::deadline_exceeded);
      done = true;
    }
    if (!done) {
      ++i;
      continue;
    }
    if (r.deadline != fabric::no_deadline) --with_deadline_;
    watched_[i] = watched_.back();
    watched_.pop_back();
    firing_.push_back(&r);
  }
  scanning_ = false;
}

std::string future_table::counters_json() const {
  nlohmann::ordered_json out;
  out["futures"] = {{"records", records_.size()},
                    {"created", created_},
                    {"continuations_fired", fired_},
                    {"waiting", watched_.size()}};
  return out.dump();
}

// ---------------------------------------------------------------- deferred replies and tasks

void note_deferred_started(thread_context& self) noexcept {
  self.rt().counters().deferred_started.fetch_add(1, std::memory_order_acq_rel);
}

void note_deferred_finished(thread_context& self) noexcept {
  self.rt().counters().deferred_finished.fetch_add(1, std::memory_order_acq_rel);
}

std::vector<std::byte>& failure_scratch() {
  thread_local std::vector<std::byte> bytes;
  return bytes;
}

namespace {

// Registered memory of `self`'s zone for one piece of a large value; throws when there is none
// (after giving back the pieces allocated so far).
transfer::registered_buffer allocate_piece(thread_context& self, std::size_t size,
                                           std::vector<large_piece>& allocated) {
  fabric::runtime& rt = self.rt();
  const int zone = rt.is_attached_id(self.id()) ? rt.placement().zone_of_process(rt.rank())
                                                : rt.placement().locate(self.id()).zone;
  transfer::registered_buffer memory = rt.service_allocate(zone, size);
  if (memory) return memory;
  for (const large_piece& p : allocated) (void)rt.service_free(p.where.address, p.where.size);
  throw error(fmt::format("thread {}: no registered memory for a result piece of {} bytes (zone "
                          "{}; see SERIEMA_ARENA_LIMIT)",
                          self.id(), size, zone));
}

}  // namespace

std::span<std::byte> finish_serialized_reply(thread_context& self, std::vector<std::byte>& out) {
  const std::size_t size = out.size() - 1;
  if (size <= large_reply_bytes) return out;
  fabric::runtime& rt = self.rt();
  std::vector<large_piece> pieces;
  pieces.reserve((size + large_piece_bytes - 1) / large_piece_bytes);  // push_back cannot throw
  for (std::size_t at = 0; at < size; at += large_piece_bytes) {
    const std::size_t piece = std::min(large_piece_bytes, size - at);
    transfer::registered_buffer memory = allocate_piece(self, piece, pieces);
    std::memcpy(memory.data, out.data() + 1 + at, piece);
    large_piece p{transfer::remote_memory_locator::make(rt.rank(), memory), piece};
    p.where.size = memory.size;  // the caller gives back (address, size) as allocated
    pieces.push_back(p);
  }
  // Lent only once every piece is written: the caller's return (free_large_reply) frees memory
  // this process lent, and the lending's lock orders these writes before the memory's reuse
  // here (the real order, through the caller, is one ThreadSanitizer cannot see).
  try {
    for (const large_piece& p : pieces) rt.service_lend(p.where.address, p.where.size);
  } catch (...) {  // no memory for the entry: nothing goes out, every piece is freed
    for (const large_piece& p : pieces) {
      if (!rt.service_return(p.where.address, p.where.size)) {
        (void)rt.service_free(p.where.address, p.where.size);
      }
    }
    throw;
  }
  const large_reply head{size, static_cast<std::uint32_t>(pieces.size()), 0};
  out.resize(1 + sizeof head + pieces.size() * sizeof(large_piece));
  out[0] = static_cast<std::byte>(reply_tag::registered);
  std::memcpy(out.data() + 1, &head, sizeof head);
  std::memcpy(out.data() + 1 + sizeof head, pieces.data(), pieces.size() * sizeof(large_piece));
  return out;
}

void send_deferred_failure(thread_context& self, thread_id caller, std::uint32_t slot,
                           std::uint32_t generation, std::exception_ptr failure) noexcept {
  std::vector<std::byte>& details = failure_scratch();
  details.clear();
  try {
    std::rethrow_exception(failure);
  } catch (const std::exception& e) {
    describe_current_exception(details, &e);
  } catch (...) {
    describe_current_exception(details, nullptr);
  }
  self.rt().counters().exceptions_returned.fetch_add(1, std::memory_order_relaxed);
  try {
    self.send_failure(caller, slot, generation, fabric::outcome::threw, details);
  } catch (...) {  // the caller learns nothing more: its wait ends by its deadline
  }
}

// ---------------------------------------------------------------- coroutine frames

namespace {

// Frames of up to 4 KiB in 64-byte classes; a thread keeps at most 256 free frames per class.
constexpr std::size_t frame_granule = 64;
constexpr std::size_t frame_classes = 64;
constexpr std::uint32_t frames_kept = 256;

struct frame_cache {
  std::array<void*, frame_classes> heads{};
  std::array<std::uint32_t, frame_classes> counts{};
  ~frame_cache() {
    for (void* head : heads) {
      while (head != nullptr) {
        void* next = *static_cast<void**>(head);
        ::operator delete(head);
        head = next;
      }
    }
  }
};
thread_local frame_cache frames;

}  // namespace

void* allocate_frame(std::size_t size) {
  const std::size_t granules = (size + frame_granule - 1) / frame_granule;
  if (granules == 0 || granules > frame_classes) return ::operator new(size);
  void*& head = frames.heads[granules - 1];
  if (head != nullptr) {
    void* frame = head;
    head = *static_cast<void**>(frame);
    --frames.counts[granules - 1];
    return frame;
  }
  return ::operator new(granules * frame_granule);
}

void free_frame(void* frame, std::size_t size) noexcept {
  const std::size_t granules = (size + frame_granule - 1) / frame_granule;
  if (granules == 0 || granules > frame_classes || frames.counts[granules - 1] >= frames_kept) {
    ::operator delete(frame);
    return;
  }
  *static_cast<void**>(frame) = frames.heads[granules - 1];
  frames.heads[granules - 1] = frame;
  ++frames.counts[granules - 1];
}

}  // namespace seriema::invoke::detail

namespace seriema::invoke {

void drive_body(task<void>&& body, thread_context& self) {
  future<void> done = spawn(self, std::move(body));
  {
    // Exceptions of calls run meanwhile are kept (thrown by the run's own polls after the
    // body): leaving here early would leave the task suspended, and run() waiting for it.
    thread_context::deferring_scope keep(self);
    unsigned idle = 0;
    while (!done.ready()) {
      if (self.poll() != 0) {
        idle = 0;
        continue;
      }
      if (idle == 0) self.flush_layers();
      thread_context::back_off(idle);
    }
  }
  done.get();
}

}  // namespace seriema::invoke

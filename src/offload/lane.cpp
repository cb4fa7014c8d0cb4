// A lane's work: posting queued requests on the lane's context, asking one completion per
// destination per batch, ending what completed, and the executor thread's loop with the
// seed's sleep protocol.
#include "lane.hpp"

#include "bundle.hpp"

#include <fmt/format.h>

#include <seriema/base/error.hpp>
#include <seriema/base/log.hpp>
#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/detail/channels.hpp>
#include <seriema/transfer/ucx.hpp>

#include <algorithm>
#include <mutex>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SERIEMA_OFFLOAD_PAUSE() _mm_pause()
#else
#define SERIEMA_OFFLOAD_PAUSE() ((void)0)
#endif

namespace seriema::offload::detail {

namespace {

// The failure a request ends with, as seriema::error(text): made without letting anything
// escape (these run in noexcept paths); when even that fails, what it threw stands instead.
template <class... Args>
std::exception_ptr failure(fmt::format_string<Args...> text, Args&&... args) noexcept {
  try {
    return std::make_exception_ptr(error(fmt::format(text, std::forward<Args>(args)...)));
  } catch (...) {
    return std::current_exception();
  }
}

std::exception_ptr transfer_failure(transfer::op_status status, int process) noexcept {
  return failure("offload: the transfer to rank {} was refused: {}", process,
                 transfer::to_string(status));
}

// Remote keys of a lane whose transfers did not all complete by its shutdown (a stalled peer):
// UCX's requests may still use them, so they are kept, never destroyed, while the process runs.
std::mutex retired_mutex;
std::vector<std::unique_ptr<transfer::remote_memory>>& retired_memories() {
  static auto* kept = new std::vector<std::unique_ptr<transfer::remote_memory>>;
  return *kept;
}

}  // namespace

lane::lane(engine::state& st, std::uint16_t lane_index)
    : queue(st.options.queue_entries), index(lane_index), st_(st), runs_(st.options.flush_size) {
  // A bundle is one send-based call: its bytes and its own closure within SERIEMA_SEND_LIMIT.
  const std::size_t send_limit = st.owner.rt().options().send_limit;
  if (st.options.mode != method::direct && send_limit > 64) {
    bundle_limit_ = std::min(st.options.bundle_bytes, send_limit - 64);
  }
  if (bundle_limit_ != 0) {
    bundles_.reserve(st.options.flush_size);
    bundle_members_.resize(st.options.flush_size);
    bundle_scratch_.reserve(bundle_limit_);
  }
}

lane::~lane() { stop(); }

void lane::lock() noexcept {
  unsigned spins = 0;
  while (!try_lock()) {
    if (++spins < 128) {
      SERIEMA_OFFLOAD_PAUSE();
    } else {
      std::this_thread::yield();
    }
  }
}

void lane::start_executor() {
  thread_ = std::thread([this] {
    try {
      attached_.emplace(st_.owner.rt().attach(fabric::deadline_clock::now() +
                                              std::chrono::seconds(10)));
      context_ = &attached_->context();
      id_ = context_->id();
      pthread_getcpuclockid(pthread_self(), &cpu_clock_);
    } catch (...) {
      start_error_ = std::current_exception();
      started_.store(-1, std::memory_order_release);
      return;
    }
    started_.store(1, std::memory_order_release);
    executor_loop();
    lock();  // a direct requester may still be posting
    shutdown();
    unlock();
  });
}

double lane::executor_cpu_seconds() const noexcept {
  if (!thread_.joinable() || started_.load(std::memory_order_acquire) != 1) return 0.0;
  timespec used{};
  if (clock_gettime(cpu_clock_, &used) != 0) return 0.0;
  return static_cast<double>(used.tv_sec) + static_cast<double>(used.tv_nsec) * 1e-9;
}

void lane::attach_here() {
  attached_.emplace(
      st_.owner.rt().attach(fabric::deadline_clock::now() + std::chrono::seconds(10)));
  context_ = &attached_->context();
  id_ = context_->id();
  started_.store(1, std::memory_order_release);
}

void lane::wait_started(fabric::deadline_clock::time_point deadline) {
  while (started_.load(std::memory_order_acquire) == 0) {
    if (fabric::deadline_clock::now() >= deadline) {
      throw deadline_error("offload: an executor did not attach within its deadline");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (started_.load(std::memory_order_acquire) < 0) std::rethrow_exception(start_error_);
}

void lane::wake_to_stop() noexcept {
  if (thread_.joinable()) queue.wake();
}

void lane::stop() noexcept {
  if (thread_.joinable()) {
    queue.wake();
    thread_.join();
    return;
  }
  if (attached_) {  // delegate: this thread holds the slot
    lock();
    shutdown();
    unlock();
  }
}

// The executor's loop. Sleep protocol (method::sleep and the completer of method::direct):
// the executor sleeps only with nothing queued and nothing in flight. It clears the queue's
// awake bit (try_sleep: a CAS that fails when a requester claimed meanwhile), then reads
// in_flight (seq_cst); a direct requester raises in_flight (seq_cst), then reads the bit. In
// the single order of those four operations one side sees the other: the executor stays awake,
// or the requester wakes it.
void lane::executor_loop() {
  const method mode = st_.options.mode;
  unsigned idle = 0;
  while (!st_.stopping.load(std::memory_order_acquire)) {
    lock();
    const std::size_t work = run_once();
    unlock();
    if (work != 0) {
      idle = 0;
      continue;
    }
    if (mode == method::spin) {
      SERIEMA_OFFLOAD_PAUSE();
      if ((++idle & 1023) == 0) std::this_thread::yield();  // more threads than cores
      continue;
    }
    if (in_flight.load(std::memory_order_relaxed) != 0 || queue.has_claims() ||
        channels_queued_) {
      fabric::thread_context::back_off(idle);
      continue;
    }
    if (++idle < st_.options.idle_polls_before_sleep) {
      if ((idle & 15) == 0) std::this_thread::yield();
      continue;
    }
    std::uint64_t slept = 0;
    if (!queue.try_sleep(slept)) continue;
    if (in_flight.load(std::memory_order_seq_cst) != 0 ||
        st_.stopping.load(std::memory_order_seq_cst)) {
      queue.stay_awake();
      continue;
    }
    st_.counters.sleeps.fetch_add(1, std::memory_order_relaxed);
    queue.wait_while_asleep(slept);
    idle = 0;
  }
}

// Each request taken counts in in_flight from before it leaves the queue until its batch was
// posted (then its own list counts it), so quiet() never sees a request in neither place.
std::size_t lane::run_once() {
  if (context_ == nullptr) return 0;  // shut down
  const std::size_t retried = retry_parked();
  std::size_t taken = 0;
  while (taken < st_.options.flush_size) {
    command* c = queue.front();
    if (c == nullptr) break;  // empty, or the next claim is still being written
    in_flight.fetch_add(1, std::memory_order_seq_cst);
    execute(*c);
    queue.pop();
    ++taken;
  }
  if (taken != 0) {
    send_bundles();
    post_runs();
    in_flight.fetch_sub(taken, std::memory_order_relaxed);
    ask_completions();
    st_.counters.batches.fetch_add(1, std::memory_order_relaxed);
    st_.counters.posted.fetch_add(taken, std::memory_order_relaxed);
  }
  if (one_sided_unflushed_) flush_one_sided();
  const std::size_t work = retried + taken + poll_context() + complete_transfers() +
                           check_watched() + complete_gathers();
  // Read under the lane's lock (a direct requester may renew the channels under it).
  channels_queued_ = invoke::detail::channels_queued(*context_);
  return work;
}

void lane::post_now(command& c) {
  execute(c);
  if (one_sided_unflushed_) flush_one_sided();
  ask_completions();
  st_.counters.posted.fetch_add(1, std::memory_order_relaxed);
}

void lane::drive() noexcept {
  // Delegation only: with an executor thread, the executor alone takes the queue (its sleep
  // decision reads the queue's head as its own).
  if (st_.options.mode != method::delegate) return;
  // Unlock, then look for claims (seq_cst), pairs with a requester's claim, then try_lock
  // (seq_cst): a claim made while this thread held the lock is seen here, or its requester
  // got the lock itself.
  while (try_lock()) {
    const std::size_t work = run_once();
    unlock();
    st_.counters.delegated.fetch_add(work, std::memory_order_relaxed);
    if (!queue.has_claims()) return;
  }
}

// Runs one request. A request to a process known dead ends not_executed without touching the
// transport; an exception (an rkey UCX cannot unpack, a transmitter it cannot make) ends the
// request not_executed with that exception and is reported, never rethrown to anyone.
void lane::execute(command& c) noexcept {
  // Whatever happens to c here it is done with, unless it was parked (the parked copy holds).
  struct release_at_end {
    lane& l;
    command& c;
    ~release_at_end() { l.release_run_hold(c); }
  } release{*this, c};
  request_record& r = *c.record;
  if (context_ == nullptr) {  // shut down (a direct requester after the executor stopped)
    finish(r, fabric::outcome::cancelled, nullptr);
    return;
  }
  if (r.process >= 0 && st_.owner.rt().peer_failed(r.process)) {
    finish(r, fabric::outcome::not_executed,
           failure("offload: rank {} is dead; the request was not sent", r.process));
    return;
  }
  if (r.result() != fabric::outcome::pending) {
    // The requester stopped waiting (deadline_exceeded): nothing is posted, so its buffer is
    // no longer used.
    finish(r, fabric::outcome::cancelled, nullptr);
    return;
  }
  if (!c.sends) {
    try {
      (void)c.execute(*this, c);  // transfers are always taken
    } catch (...) {
      st_.report_executor_error("posting a request", std::current_exception());
      finish(r, fabric::outcome::not_executed, std::current_exception());
    }
    return;
  }
  try {
    count_call_endpoint(r.process);
  } catch (...) {  // the vector of destinations could not grow: the call is not made
    st_.report_executor_error("posting a request", std::current_exception());
    finish(r, fabric::outcome::not_executed, std::current_exception());
    return;
  }
  if (may_bundle(c) && !calls_parked(r.process)) {
    add_to_bundle(c);
    return;
  }
  send_bundles_to(r.process);  // the calls to that process before this one go first
  send_or_park(c);
}

bool lane::calls_parked(int process) const noexcept {
  const auto p = static_cast<std::size_t>(process);
  return p < parked_.size() && !parked_[p].calls.empty();
}

// A call to a process with parked calls waits behind them (their order kept).
void lane::send_or_park(command& c) noexcept {
  try {
    if (calls_parked(c.record->process) || !c.execute(*this, c)) park(c);
  } catch (...) {
    st_.report_executor_error("posting a request", std::current_exception());
    finish(*c.record, fabric::outcome::not_executed, std::current_exception());
  }
}

void lane::park(command& c) {
  if (parked_.empty()) parked_.resize(static_cast<std::size_t>(st_.owner.rt().size()));
  parked_calls& p = parked_[static_cast<std::size_t>(c.record->process)];
  if (p.calls.empty()) {
    p.gap = std::chrono::microseconds(500);
    p.retry_at = fabric::deadline_clock::now() + p.gap;
  }
  p.calls.push_back(c);
  c.holds_run = false;  // the parked copy holds the run now
  ++parked_count_;
  in_flight.fetch_add(1, std::memory_order_seq_cst);
}

void lane::release_run_hold(command& c) noexcept {
  if (!c.holds_run) return;
  c.holds_run = false;
  st_.owner.rt().counters().deferred_finished.fetch_add(1, std::memory_order_acq_rel);
}

void lane::settle_earlier_run() noexcept {
  for (request_record* r = watched_; r != nullptr; r = r->next) {
    if (r->check == &check_consumed) settle_consumed(*r);
  }
  (void)check_watched();
}

bool lane::open_channels(command& c) noexcept {
  bool ready = false;
  if (invoke::detail::attached_channels_stale(*context_)) settle_earlier_run();
  try {
    ready = invoke::detail::attached_channels(*context_) != nullptr;
  } catch (...) {  // no registered memory for the channels' feedback words
    st_.report_executor_error("opening one-sided channels", std::current_exception());
    finish(*c.record, fabric::outcome::not_executed, std::current_exception());
    return false;
  }
  if (!ready) {
    finish(*c.record, fabric::outcome::not_executed,
           failure("offload: a one-sided call to thread {} needs runtime::run() in progress "
                   "(its receivers exist only then); this process is not in a run",
                   c.target));
    return false;
  }
  one_sided_unflushed_ = true;
  return true;
}

void lane::flush_one_sided() noexcept {
  one_sided_unflushed_ = false;
  try {
    fabric::thread_context::deadline_scope bounded(*context_, st_.options.transport_wait);
    context_->flush_endpoints();
  } catch (...) {
    st_.report_executor_error("flushing one-sided calls", std::current_exception());
  }
}

// Tries each process's parked calls again, in order, once its gap passed. A call whose
// requester stopped waiting (its record ended) or whose process died is dropped or ended
// not_executed without a send. Calls at the front to one thread go as one bundle (they piled
// up because the transport was slow: the moment one message for many pays most).
std::size_t lane::retry_parked() noexcept {
  if (parked_count_ == 0) return 0;
  std::size_t moved = 0;
  const auto now = fabric::deadline_clock::now();
  for (parked_calls& p : parked_) {
    if (p.calls.empty() || now < p.retry_at) continue;
    while (!p.calls.empty()) {
      const std::size_t taken = retry_front(p);
      if (taken == 0) {
        p.gap = std::min(p.gap * 2, std::chrono::microseconds(64000));
        p.retry_at = fabric::deadline_clock::now() + p.gap;
        break;
      }
      for (std::size_t i = 0; i < taken; ++i) p.calls.pop_front();
      parked_count_ -= taken;
      in_flight.fetch_sub(taken, std::memory_order_relaxed);
      moved += taken;
    }
  }
  return moved;
}

// The parked calls at p's front that were dealt with (sent, or ended without a send); 0 when
// the transport did not take the first.
std::size_t lane::retry_front(parked_calls& p) noexcept {
  command& c = p.calls.front();
  const std::size_t dealt = retry_one(p, c);
  if (dealt != 0) release_run_hold(c);  // (bundles are of send-based calls only)
  return dealt;
}

std::size_t lane::retry_one(parked_calls& p, command& c) noexcept {
  request_record& r = *c.record;
  if (r.result() != fabric::outcome::pending) {
    finish(r, fabric::outcome::cancelled, nullptr);  // the requester's end stays
    return 1;
  }
  if (st_.owner.rt().peer_failed(r.process)) {
    finish(r, fabric::outcome::not_executed,
           failure("offload: rank {} died before the transport took the call", r.process));
    return 1;
  }
  if (const auto members = bundle_parked_front(p)) return *members;
  try {
    return c.execute(*this, c) ? 1 : 0;
  } catch (...) {
    st_.report_executor_error("posting a request", std::current_exception());
    finish(r, fabric::outcome::not_executed, std::current_exception());
    return 1;
  }
}

// Bundles. Calls and call_buffers of a batch to one thread are copied into an open bundle
// instead of being sent one by one; the bundle goes as one message (bundle.hpp) when the batch
// ends, or earlier when the next member would not fit or a send-based request to its process
// that cannot join (a call_return, a call too large) must follow it. Bundles to one process go
// in the order of their first members, so a thread's calls keep their order, and a call sent
// alone follows every call made before it to its process; calls to two threads of a process
// made in one batch may leave in another order (a later call joins its thread's earlier
// bundle). Calls to a process with parked calls are not bundled: they park behind those, in
// order. A bundle of one member goes as that call.
bool lane::bundleable(const command& c) const noexcept {
  return bundle_limit_ != 0 && c.function != 0 && bundle_bytes_of(c) <= bundle_limit_;
}

bool lane::may_bundle(const command& c) const noexcept {
  return bundleable(c) && members_used_ < bundle_members_.size();
}

fabric::call_status lane::post_bundle(fabric::thread_id dest, std::uint32_t members) noexcept {
  try {
    fabric::thread_context::deadline_scope bounded(*context_, st_.options.transport_wait);
    const fabric::call_status status = detail::send_bundle(*context_, dest, bundle_scratch_,
                                                           members);
    if (fabric::reached_transport(status)) {
      st_.counters.bundles.fetch_add(1, std::memory_order_relaxed);
      st_.counters.bundled.fetch_add(members, std::memory_order_relaxed);
    }
    return status;
  } catch (...) {  // the members end not_executed ("error"); the exception is reported
    st_.report_executor_error("posting a bundle of calls", std::current_exception());
    return fabric::call_status::error;
  }
}

// The calls at p's front to one thread that one bundle carries, sent as one: the entries dealt
// with (0: the transport did not take it), or none when fewer than two would go.
std::optional<std::size_t> lane::bundle_parked_front(parked_calls& p) noexcept {
  const command& front = p.calls.front();
  if (!bundleable(front)) return std::nullopt;
  bundle_scratch_.clear();
  std::size_t run = 0;
  std::uint32_t live = 0;
  for (const command& m : p.calls) {
    if (m.target != front.target || !bundleable(m) ||
        bundle_scratch_.size() + bundle_bytes_of(m) > bundle_limit_) {
      break;
    }
    ++run;
    if (m.record->result() != fabric::outcome::pending) continue;  // dropped below
    append_to_bundle(bundle_scratch_, m);  // within bundle_limit_: no allocation
    ++live;
  }
  if (live < 2) return std::nullopt;
  const fabric::call_status status = post_bundle(front.target, live);
  if (status == fabric::call_status::deadline_exceeded) return 0;
  for (std::size_t i = 0; i < run; ++i) {
    command& m = p.calls[i];
    if (m.record->result() != fabric::outcome::pending) {
      finish(*m.record, fabric::outcome::cancelled, nullptr);  // the requester's end stays
    } else {
      (void)end_send(*this, m, status);
    }
  }
  return run;
}

void lane::add_to_bundle(command& c) noexcept {
  const std::size_t size = bundle_bytes_of(c);
  auto open = std::find_if(bundles_.begin(), bundles_.end(),
                           [&](const open_bundle& b) { return b.dest == c.target; });
  if (open != bundles_.end() && open->bytes + size > bundle_limit_) {
    send_bundles_to(c.record->process);
    open = bundles_.end();
  }
  const auto slot = static_cast<std::uint32_t>(members_used_++);
  bundle_members_[slot] = {c, slot};
  if (open == bundles_.end()) {
    // Within the capacity reserved; in the order of their first members.
    bundles_.push_back({c.target, c.record->process, slot, slot, 1, size});
    return;
  }
  bundle_members_[open->last].next = slot;
  open->last = slot;
  ++open->count;
  open->bytes += size;
}

// Sends the open bundles to `process`, oldest first (they leave the list).
void lane::send_bundles_to(int process) noexcept {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < bundles_.size(); ++i) {
    if (bundles_[i].process == process) {
      send_bundle(bundles_[i]);
    } else {
      bundles_[kept++] = bundles_[i];
    }
  }
  bundles_.resize(kept);
}

void lane::send_bundle(const open_bundle& b) noexcept {
  // Members whose requesters stopped waiting meanwhile are not sent (as execute() decides).
  bundle_scratch_.clear();
  std::uint32_t live = 0;
  command* only = nullptr;
  for (std::uint32_t i = b.first, n = 0; n < b.count; i = bundle_members_[i].next, ++n) {
    command& m = bundle_members_[i].c;
    if (m.record->result() != fabric::outcome::pending) {
      finish(*m.record, fabric::outcome::cancelled, nullptr);
      m.record = nullptr;
      continue;
    }
    append_to_bundle(bundle_scratch_, m);  // within bundle_limit_: no allocation
    only = &m;
    ++live;
  }
  if (live <= 1) {
    if (only != nullptr) send_or_park(*only);
    return;
  }
  auto each_member = [&](auto&& action) {
    for (std::uint32_t i = b.first, n = 0; n < b.count; i = bundle_members_[i].next, ++n) {
      if (bundle_members_[i].c.record != nullptr) action(bundle_members_[i].c);
    }
  };
  const fabric::call_status status = calls_parked(only->record->process)
                                         ? fabric::call_status::deadline_exceeded
                                         : post_bundle(b.dest, live);
  if (status == fabric::call_status::deadline_exceeded) {  // not taken: each waits its turn
    each_member([&](command& m) {
      try {
        park(m);
      } catch (...) {
        st_.report_executor_error("parking a call", std::current_exception());
        finish(*m.record, fabric::outcome::not_executed, std::current_exception());
      }
    });
    return;
  }
  each_member([&](command& m) { (void)end_send(*this, m, status); });
}

void lane::send_bundles() noexcept {
  for (const open_bundle& b : bundles_) send_bundle(b);
  bundles_.clear();
  members_used_ = 0;
}

// Puts and gets are held in open runs until the batch ends: a request whose remote range starts
// where a run's ends, of the same region and kind, and whose local bytes follow the run's,
// joins it, and the run is posted as one operation (the seed's linked work requests: one post
// for many requests). Transfers are unordered, as UCX's are, so posting a run at the batch's
// end changes no promise. Atomics, and every request of direct injection, are posted at once.
void lane::execute_transfer(command& c) {
  const auto kind = static_cast<transfer_kind>(c.kind);
  const bool bytes = kind == transfer_kind::put || kind == transfer_kind::get;
  if (!bytes || st_.options.mode == method::direct) {
    open_run single{kind, c.target, c.offset, c.local, c.size, c.operand, c.compare, c.record,
                    c.record};
    c.record->next = nullptr;
    post_run(single);
    return;
  }
  for (std::size_t i = 0; i < run_count_; ++i) {
    open_run& run = runs_[i];
    if (run.kind == kind && run.region == c.target && run.offset + run.size == c.offset &&
        run.local + run.size == c.local) {
      c.record->next = nullptr;
      run.last->next = c.record;
      run.last = c.record;
      run.size += c.size;
      st_.counters.coalesced.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  if (run_count_ == runs_.size()) post_runs();
  c.record->next = nullptr;
  runs_[run_count_++] = {kind, c.target, c.offset, c.local, c.size, 0, 0, c.record, c.record};
}

void lane::post_runs() noexcept {
  for (std::size_t i = 0; i < run_count_; ++i) {
    if (runs_[i].first == nullptr) continue;  // gathered already
    if (runs_[i].kind == transfer_kind::get && gather_runs(i)) continue;
    try {
      post_run(runs_[i]);
    } catch (...) {
      st_.report_executor_error("posting a request", std::current_exception());
      for (request_record* r = runs_[i].first; r != nullptr;) {
        request_record* next = r->next;
        finish(*r, fabric::outcome::not_executed, std::current_exception());
        r = next;
      }
    }
  }
  run_count_ = 0;
}

// Posts one operation for every request of `run` (chained by `next`) and moves them, in order,
// to their destination's in-flight list, all under the same completion ticket.
void lane::post_run(const open_run& run) {
  const int process = run.first->process;
  destination& d = destination_to(process);
  transfer::transmitter& tx = *d.transmitter;
  transfer::remote_memory& memory = memory_of(run.region);
  auto* old = reinterpret_cast<std::uint64_t*>(run.first->value);
  transfer::op_status status = transfer::op_status::ok;
  switch (run.kind) {
    case transfer_kind::put:
      status = tx.put(std::span<const std::byte>(run.local, run.size), memory, run.offset);
      break;
    case transfer_kind::get:
      status = tx.get(std::span<std::byte>(run.local, run.size), memory, run.offset);
      break;
    case transfer_kind::fetch_add:
      status = tx.fetch_add(memory, run.offset, run.operand, old);
      break;
    case transfer_kind::compare_swap:
      status = tx.compare_swap(memory, run.offset, run.compare, run.operand, old);
      break;
    case transfer_kind::swap:
      status = tx.swap(memory, run.offset, run.operand, old);
      break;
  }
  const transfer::completion_tag tag = tx.current_tag();  // the next completion request's
  const std::exception_ptr refused =
      status == transfer::op_status::ok ? nullptr : transfer_failure(status, process);
  for (request_record* r = run.first; r != nullptr;) {  // nothing below throws
    request_record* next = r->next;
    if (status != transfer::op_status::ok) {
      finish(*r, fabric::outcome::not_executed, refused);
    } else {
      r->tag = tag;
      r->next = nullptr;
      if (d.newest != nullptr) {
        d.newest->next = r;
      } else {
        d.oldest = r;
      }
      d.newest = r;
      in_flight.fetch_add(1, std::memory_order_seq_cst);
    }
    r = next;
  }
  if (status == transfer::op_status::ok && !d.touched) {
    d.touched = true;
    touched_.push_back(process);
  }
}

lane::destination& lane::destination_to(int process) {
  ensure_destinations();
  destination& d = destinations_[static_cast<std::size_t>(process)];
  if (!d.transmitter) {
    transfer::transmitter_options options;
    options.completion_interval = 1;
    options.automatic = false;  // one completion request per destination per batch
    d.transmitter = std::make_unique<transfer::transmitter>(context_->endpoint_to(process),
                                                            options);
    count_endpoint(d);
  }
  return d;
}

// engine_counters::endpoints: one per process a lane's context reached (a transmitter's, or a
// call's; calls within the process use none).
void lane::count_endpoint(destination& d) noexcept {
  if (d.endpoint_counted) return;
  d.endpoint_counted = true;
  st_.counters.endpoints.fetch_add(1, std::memory_order_relaxed);
}

void lane::count_call_endpoint(int process) {
  if (process == st_.owner.rt().rank()) return;
  ensure_destinations();
  count_endpoint(destinations_[static_cast<std::size_t>(process)]);
}

transfer::remote_memory& lane::memory_of(std::uint32_t region) {
  if (memories_.size() <= region) memories_.resize(engine::state::max_regions);
  auto& memory = memories_[region];
  if (!memory) {
    const transfer::remote_memory_locator& locator = st_.regions[region];
    memory = std::make_unique<transfer::remote_memory>(context_->endpoint_to(locator.process),
                                                       locator, /*allow_direct=*/false);
  }
  return *memory;
}

void lane::ask_completions() noexcept {
  for (const int process : touched_) {
    destination& d = destinations_[static_cast<std::size_t>(process)];
    d.transmitter->request_completion();
    d.touched = false;
    st_.counters.completions_asked.fetch_add(1, std::memory_order_relaxed);
  }
  touched_.clear();
}

// Transfers end in ticket order per destination: the oldest first. A transmitter whose flush
// failed (its peer died) completes every ticket; those transfers end may_have_executed, as do
// those that complete once their process is known dead.
std::size_t lane::complete_transfers() noexcept {
  std::size_t ended = 0;
  for (std::size_t process = 0; process < destinations_.size(); ++process) {
    destination& d = destinations_[process];
    if (d.oldest == nullptr) continue;
    // A dead peer's transfers end whether or not UCX ever completes their flush (it may not);
    // one that did complete may have been lost too (shm puts can land in a dead mapping).
    const bool dead = st_.owner.rt().peer_failed(static_cast<int>(process));
    while (d.oldest != nullptr && (dead || d.oldest->tag.is_complete())) {
      request_record& r = *d.oldest;
      d.oldest = r.next;
      if (d.oldest == nullptr) d.newest = nullptr;
      in_flight.fetch_sub(1, std::memory_order_relaxed);
      ++ended;
      if (!r.tag.is_complete()) {
        // Ended for the requester now; the record stays the engine's until UCX lets go of the
        // operation (a fetched word may still land in it), checked below.
        r.end(fabric::outcome::may_have_executed);
        r.next = lingering_;
        lingering_ = &r;
        continue;
      }
      const bool failed = dead || d.transmitter->failed();
      finish(r, failed ? fabric::outcome::may_have_executed : fabric::outcome::done,
             failed ? failure("offload: rank {} died with the transfer in flight", r.process)
                    : nullptr);
    }
  }
  release_lingering();
  return ended;
}

// Gives back the records of dead peers' transfers whose operations UCX has let go of.
void lane::release_lingering() noexcept {
  request_record** link = &lingering_;
  while (*link != nullptr) {
    request_record& r = **link;
    if (!r.tag.is_complete()) {
      link = &r.next;
      continue;
    }
    *link = r.next;
    (void)st_.owner.core().pool.release(r);  // the engine lives: never the last
  }
}

void lane::watch(request_record& r) noexcept {
  r.next = watched_;
  watched_ = &r;
  in_flight.fetch_add(1, std::memory_order_seq_cst);
}

std::size_t lane::check_watched() noexcept {
  std::size_t ended = 0;
  request_record** link = &watched_;
  while (*link != nullptr) {
    request_record& r = **link;
    // The requester stopped waiting: the reply is not wanted (cancel closes its slot).
    if (r.result() != fabric::outcome::pending) r.cancel(r);
    if (!r.check(r)) {
      link = &r.next;
      continue;
    }
    *link = r.next;
    in_flight.fetch_sub(1, std::memory_order_relaxed);
    (void)st_.owner.core().pool.release(r);  // the engine lives: never the last
    ++ended;
  }
  return ended;
}

std::size_t lane::poll_context() noexcept {
  try {
    return context_->poll();
  } catch (...) {  // a call sent to the executor's own id threw: it is nobody's request
    st_.report_executor_error("polling its context", std::current_exception());
    return 1;
  }
}

void lane::finish(request_record& r, fabric::outcome how, std::exception_ptr failure) noexcept {
  if (r.claim()) {
    r.failure = std::move(failure);
    r.publish(how);
  }
  (void)st_.owner.core().pool.release(r);  // the engine lives: never the last
}

void lane::ensure_destinations() {
  if (!destinations_.empty()) return;
  destinations_.resize(static_cast<std::size_t>(st_.owner.rt().size()));
  touched_.reserve(destinations_.size());  // push_back in post_run never allocates
}

bool lane::gets_are_messages(int process) {
  ensure_destinations();
  destination& d = destinations_[static_cast<std::size_t>(process)];
  if (d.gets_are_messages < 0) {
    fabric::runtime& rt = st_.owner.rt();
    const bool mapped = rt.same_machine(process) && rt.context().shared_memory_domains();
    d.gets_are_messages = !rt.context().network_rdma() && !mapped ? 1 : 0;
  }
  return d.gets_are_messages == 1;
}

namespace {

// What the service role of the region's process runs: the bytes of every (offset, size) pair
// of `pieces`, one after the other, from the region [base, base + size) the requester's engine
// names (as a UCX get reads what its rkey names; the bounds are checked at both ends).
struct gather_bytes {
  std::uint64_t base;
  std::uint64_t size;
  std::string operator()(const std::vector<std::uint64_t>& pieces) const {
    std::string out;
    for (std::size_t i = 0; i + 1 < pieces.size(); i += 2) {
      if (pieces[i] > size || pieces[i + 1] > size - pieces[i]) {
        throw error(fmt::format("offload: a gathered get is outside its region ({} + {} > {})",
                                pieces[i], pieces[i + 1], size));
      }
      out.append(reinterpret_cast<const char*>(base) + pieces[i], pieces[i + 1]);
    }
    return out;
  }
};

// Gathers carry small gets only, and a reply small enough to come back in one message.
constexpr std::size_t gathered_run_limit = 4096;
constexpr std::size_t gathered_reply_limit = 32768;
// How long a gather waits for its reply before its gets go out as UCX gets (the target's
// service role may not be running calls: a barrier outside run() serves UCX gets, not calls),
// and how long gathering toward that process then stays off.
constexpr auto gather_wait = std::chrono::milliseconds(2);
constexpr auto gathering_pause = std::chrono::milliseconds(100);

}  // namespace

// Gathers run `first_run` and the later open get runs of the same region into one call, when
// the region's process serves gets by messages, no call to it is parked, gathering toward it
// is not paused, and at least two small runs fit one reply. Returns whether it took
// `first_run` (taken runs' `first` is cleared in runs_; they are the gather's: they end with
// its reply, or go out as UCX gets when the call is not sent or its reply is late).
bool lane::gather_runs(std::size_t first_run) noexcept {
  const open_run head = runs_[first_run];
  const int process = head.first->process;
  const auto fits = [&](const open_run& run) {
    return run.first != nullptr && run.kind == transfer_kind::get &&
           run.region == head.region && run.size <= gathered_run_limit;
  };
  std::unique_ptr<gather> g;
  try {
    if (!fits(head) || !gets_are_messages(process)) return false;
    const auto p = static_cast<std::size_t>(process);
    if (p < parked_.size() && !parked_[p].calls.empty()) return false;
    const auto now = fabric::deadline_clock::now();
    if (now < destinations_[p].gather_again_at) return false;
    std::size_t count = 0;
    std::size_t bytes = 0;
    for (std::size_t i = first_run; i < run_count_; ++i) {
      if (fits(runs_[i]) && bytes + runs_[i].size <= gathered_reply_limit) {
        ++count;
        bytes += runs_[i].size;
      }
    }
    if (count < 2) return false;
    g = std::make_unique<gather>();
    g->region = head.region;
    g->process = process;
    g->reply_by = now + gather_wait;
    std::vector<std::uint64_t> pieces;
    pieces.reserve(count * 2);
    g->runs.reserve(count);
    gathers_.reserve(gathers_.size() + 1);  // push_back below cannot throw
    bytes = 0;
    for (std::size_t i = first_run; i < run_count_; ++i) {
      open_run& run = runs_[i];
      if (!fits(run) || bytes + run.size > gathered_reply_limit) continue;
      bytes += run.size;
      pieces.push_back(run.offset);
      pieces.push_back(run.size);
      g->runs.push_back({run.first, run.local, run.size, run.offset});  // reserved: no throw
      for (request_record* r = run.first; r != nullptr; r = r->next) {
        in_flight.fetch_add(1, std::memory_order_seq_cst);
      }
      run.first = nullptr;
    }
    const transfer::remote_memory_locator& region = st_.regions[head.region];
    fabric::thread_context::deadline_scope bounded(*context_, st_.options.transport_wait);
    g->reply = invoke::call_return<invoke::channel::send>(
        *context_, fabric::service_of(process), gather_bytes{region.address, region.size},
        pieces);
    if (!fabric::reached_transport(g->reply.status())) {
      (void)g->reply.result();  // seen: not an unobserved failure
      ungather(*g);
      return true;
    }
    st_.counters.gathered.fetch_add(count, std::memory_order_relaxed);
    gathers_.push_back(std::move(g));
    return true;
  } catch (...) {
    st_.report_executor_error("gathering gets", std::current_exception());
    if (!g || g->runs.empty()) return false;  // nothing taken: they go out as gets
    ungather(*g);
    return true;
  }
}

// A gather that could not carry its gets (not sent, or its reply late): they go out as UCX
// gets, one per run, and gathering toward that process pauses.
void lane::ungather(gather& g) noexcept {
  destinations_[static_cast<std::size_t>(g.process)].gather_again_at =
      fabric::deadline_clock::now() + gathering_pause;
  for (const gathered_run& run : g.runs) {
    for (request_record* r = run.first; r != nullptr; r = r->next) {
      in_flight.fetch_sub(1, std::memory_order_relaxed);
    }
    try {
      post_run(open_run{transfer_kind::get, g.region, run.offset, run.local, run.size, 0, 0,
                        run.first, nullptr});
    } catch (...) {  // before any record was touched (see post_run)
      st_.report_executor_error("posting a request", std::current_exception());
      for (request_record* r = run.first; r != nullptr;) {
        request_record* next = r->next;
        finish(*r, fabric::outcome::not_executed, std::current_exception());
        r = next;
      }
    }
  }
  g.runs.clear();
}

void lane::end_gather(gather& g, fabric::outcome how, std::exception_ptr why) noexcept {
  for (const gathered_run& run : g.runs) {
    for (request_record* r = run.first; r != nullptr;) {
      request_record* next = r->next;
      in_flight.fetch_sub(1, std::memory_order_relaxed);
      finish(*r, how, why);
      r = next;
    }
  }
  g.runs.clear();
}

// A reply copied into the runs' buffers only when it is exactly their bytes (a short or long
// one ends them not_executed, their buffers untouched).
std::size_t lane::complete_gathers() noexcept {
  std::size_t ended = 0;
  const auto now = gathers_.empty() ? fabric::deadline_clock::time_point{}
                                    : fabric::deadline_clock::now();
  for (std::size_t i = 0; i < gathers_.size();) {
    gather& g = *gathers_[i];
    try {
      if (!g.reply.ready()) {
        if (now < g.reply_by) {
          ++i;
          continue;
        }
        g.reply.cancel();  // late: a reply that comes is dropped; the gets go out as gets
        ungather(g);
        ask_completions();  // their flush (nothing else may ask one for that destination)
      } else {
        invoke::call_result<std::string> got = g.reply.try_get();
        std::size_t expected = 0;
        for (const gathered_run& run : g.runs) expected += run.size;
        if (!got.has_value()) {
          end_gather(g, got.result(), got.error());
        } else if (got->size() != expected) {
          throw error(fmt::format("offload: a gathered reply has {} bytes, not {}",
                                  got->size(), expected));
        } else {
          std::size_t at = 0;
          for (const gathered_run& run : g.runs) {
            if (run.size != 0) std::memcpy(run.local, got->data() + at, run.size);
            at += run.size;
          }
          end_gather(g, fabric::outcome::done, nullptr);
        }
      }
    } catch (...) {
      end_gather(g, fabric::outcome::not_executed, std::current_exception());
    }
    gathers_[i] = std::move(gathers_.back());
    gathers_.pop_back();
    ++ended;
  }
  return ended;
}

// Asks every transmitter for the completion of all it posted and polls the context (which
// serves this process: over tcp a flush to a rank completes only while that rank progresses,
// and this rank may be the target) until they completed or 2 s passed, so that destroying them
// finds nothing to wait for.
void lane::settle_transmitters() noexcept {
  for (destination& d : destinations_) {
    if (!d.transmitter || d.transmitter->failed()) continue;
    d.settled_by = d.transmitter->current_tag();
    d.transmitter->request_completion();
  }
  const auto settled_by = fabric::deadline_clock::now() + std::chrono::seconds(2);
  unsigned idle = 0;
  for (destination& d : destinations_) {
    while (!d.settled_by.is_complete() && fabric::deadline_clock::now() < settled_by) {
      if (poll_context() == 0) fabric::thread_context::back_off(idle);
    }
  }
}

// Lock held, stopping: queued requests end cancelled; in-flight ones get 2 s to end; the
// transmitters are destroyed (each waits for its flushes, at most 5 s) and what is still in
// flight then ends cancelled. A transfer that never completed keeps its record (UCX may still
// write a fetched word into it): the engine then leaves its pool allocated.
void lane::shutdown() noexcept {
  if (context_ == nullptr) return;
  const auto drained_by = fabric::deadline_clock::now() + std::chrono::seconds(1);
  while (queue.has_claims() && fabric::deadline_clock::now() < drained_by) {
    command* c = queue.front();
    if (c == nullptr) {
      std::this_thread::yield();
      continue;
    }
    finish(*c->record, fabric::outcome::cancelled, nullptr);
    release_run_hold(*c);
    queue.pop();
  }
  for (parked_calls& p : parked_) {
    for (command& c : p.calls) {
      finish(*c.record, fabric::outcome::cancelled, nullptr);
      release_run_hold(c);
      in_flight.fetch_sub(1, std::memory_order_relaxed);
    }
    p.calls.clear();
  }
  parked_count_ = 0;
  const auto settled_by = fabric::deadline_clock::now() + std::chrono::seconds(2);
  unsigned idle = 0;
  while ((in_flight.load(std::memory_order_relaxed) != 0 ||
          invoke::detail::channels_queued(*context_)) &&
         fabric::deadline_clock::now() < settled_by) {
    if (poll_context() + complete_transfers() + check_watched() + complete_gathers() == 0) {
      fabric::thread_context::back_off(idle);
    }
  }
  settle_transmitters();
  for (request_record* r = watched_; r != nullptr;) {
    request_record* next = r->next;
    r->cancel(*r);
    r = next;
  }
  for (auto& g : gathers_) {
    g->reply.cancel();  // a reply that comes is dropped: their buffers stay untouched
    end_gather(*g, fabric::outcome::cancelled, nullptr);
  }
  gathers_.clear();
  check_watched();
  bool incomplete = false;
  for (std::size_t process = 0; process < destinations_.size(); ++process) {
    destination& d = destinations_[process];
    if (!d.transmitter) continue;
    const bool failed_before = d.transmitter->failed();
    d.transmitter.reset();  // waits for its flushes (at most 5 s); its counter stays readable
    const bool failed = failed_before || st_.owner.rt().peer_failed(static_cast<int>(process));
    for (request_record* r = d.oldest; r != nullptr;) {
      request_record* next = r->next;
      if (r->tag.is_complete()) {
        finish(*r, failed ? fabric::outcome::may_have_executed : fabric::outcome::done, nullptr);
      } else {
        r->end(fabric::outcome::cancelled);  // keeps the engine's hold: UCX may still write it
        incomplete = true;
      }
      r = next;
    }
  }
  release_lingering();
  if (lingering_ != nullptr) incomplete = true;  // their holds stay: the pool is kept
  if (incomplete) {
    try {
      const std::lock_guard guard(retired_mutex);
      for (auto& memory : memories_) {
        if (memory) retired_memories().push_back(std::move(memory));
      }
    } catch (...) {  // no memory to keep them: leak them rather than destroy keys UCX may use
      for (auto& memory : memories_) (void)memory.release();
    }
  }
  memories_.clear();
  destinations_.clear();
  // The slot's next holder must not find this lane's channels of an earlier run. Channels of
  // the run in progress stay: its receivers know this sender id, and a next holder in the same
  // run writes on in the same rings.
  if (!st_.owner.rt().in_run() || invoke::detail::attached_channels_stale(*context_)) {
    invoke::detail::close_attached_channels(*context_);
  }
  context_ = nullptr;
  attached_.reset();
}

}  // namespace seriema::offload::detail

// A long-lived thread of the job and its send-based remote invocation (UCX active messages):
// call / call_buffer / call_return to any thread, no setup between the two threads, calls run
// by the destination when it polls, in FIFO order per sender.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <seriema/fabric/detail/staged_sends.hpp>
#include <seriema/fabric/function_registry.hpp>
#include <seriema/fabric/outcome.hpp>
#include <seriema/fabric/placement.hpp>
#include <seriema/fabric/reply_cells.hpp>
#include <seriema/transfer/remote_memory.hpp>
#include <seriema/transfer/ucx.hpp>
#include <span>
#include <string>
#include <vector>

namespace seriema::fabric {

class runtime;

enum class call_status : std::uint8_t {
  ok,
  bad_destination,  // no such thread
  too_large,        // closure + buffer exceed the send-based limit (SERIEMA_SEND_LIMIT), or
                    // a one-sided record does not fit in a chunk
  full,             // one-sided: the channel's ring is at its maximum and the call's policy
                    // is to fail (the call was not sent)
  peer_failed,      // the destination's process is dead (endpoint error): nothing was sent
  error,            // UCX refused the send
  deadline_exceeded,  // the call waited for the transport (wireup, room) past its deadline
                      // (deadline_scope / SERIEMA_TIMEOUT); it was not sent
  queued_at_deadline,  // send-based: UCX took the call but had not sent it when the deadline
                       // passed (a stalled or partitioned peer): it stays queued, in order, and
                       // runs once if the link carries it again, never if the peer is found
                       // dead. Do not send it again; a call_return's slot stays open.
};
const char* to_string(call_status status) noexcept;
// Whether a call with this status was handed to the transport (ok, queued_at_deadline): it may
// run, so its reply slot must stay open.
constexpr bool reached_transport(call_status status) noexcept {
  return status == call_status::ok || status == call_status::queued_at_deadline;
}

// Wire header of a send-based call (the UCX active-message header). Every field is checked by
// the receiver before use; see docs/invocation.md.
struct call_header {
  function_id function = 0;
  std::uint32_t destination = 0;   // global thread id, or service_of(process)
  std::uint32_t source = 0;        // global thread id of the caller
  std::uint32_t closure_size = 0;  // bytes of closure at the start of the payload
  std::uint32_t buffer_size = 0;   // bytes of buffer after the closure
  std::uint32_t reply_slot = 0;    // call_return: slot index at the caller (0 = no reply)
  std::uint32_t reply_generation = 0;
  std::uint32_t reserved = 0;
};
static_assert(sizeof(call_header) == 32);

// Destinations above this bit are a process's service role rather than a worker thread.
inline constexpr std::uint32_t service_bit = 0x8000'0000u;
constexpr std::uint32_t service_of(int process) noexcept {
  return service_bit | static_cast<std::uint32_t>(process);
}

struct local_thread_state;
// Closes reply slot (index, generation) of `owner` if it is still open, without writing it: a
// reply that arrives later is rejected as stale (rejected_bad_reply) instead of being written
// into memory that no longer holds the slot.
void abandon_reply(local_thread_state& owner, std::uint32_t index,
                   std::uint32_t generation) noexcept;

// Where a call_return's value lands. Values of up to reply_cell::value_capacity bytes land in
// a reply cell of the caller thread (registered memory a same-machine callee writes directly,
// see reply_cells.hpp) when one is free, which the slot reads when asked; larger values (or
// every cell in use) land in the slot itself through the caller's reply table. The caller waits
// with thread_context::wait_for(slot) (which keeps serving calls). The slot ends exactly once
// with one outcome (done, threw, not_executed, may_have_executed, deadline_exceeded,
// cancelled): when its destination's process dies the runtime ends it (may_have_executed); a
// wait whose deadline passes, cancel(), or the slot's destruction while waiting close its cell
// or table entry, so a late reply is dropped, never written into memory that no longer holds
// the slot. Not copyable: the reply table holds its address. Owner thread only (the thread that
// opened it).
template <class R>
class return_slot {
  static_assert(std::is_trivially_copyable_v<R>, "call_return values must be trivially copyable");

 public:
  return_slot() = default;
  return_slot(const return_slot&) = delete;
  return_slot& operator=(const return_slot&) = delete;
  ~return_slot() { abandon_if_pending(); }

  // done/ready/failed/result: the owner thread only (they read the cell and may copy the value
  // in). done(): ended, whichever way; ready(): ended with the value; failed(): any other end.
  [[nodiscard]] bool done() const noexcept { return result() != outcome::pending; }
  [[nodiscard]] bool ready() const noexcept { return result() == outcome::done; }
  [[nodiscard]] bool failed() const noexcept {
    const outcome o = result();
    return o != outcome::pending && o != outcome::done;
  }
  [[nodiscard]] outcome result() const noexcept {
    int state = state_.load(std::memory_order_acquire);
    if (state == 0 && cells_ != nullptr) state = collect();
    return static_cast<outcome>(state);
  }
  [[nodiscard]] const R& value() const noexcept { return value_; }
  // The thread the call went to, and a sentence saying how the slot ended (for messages).
  [[nodiscard]] std::uint32_t destination() const noexcept { return destination_; }
  [[nodiscard]] std::string describe() const {
    return fabric::describe(result(), destination_, process_);
  }
  // Ends a pending slot as cancelled (nothing when it already ended): its reply, if one comes,
  // is dropped. The call itself may still run at the destination.
  void cancel() noexcept { end_pending(outcome::cancelled); }

 private:
  friend class thread_context;
  // Ends a pending slot with `why` (closing its cell or table entry first, so a reply is
  // dropped); a slot that ended meanwhile keeps its outcome.
  void end_pending(outcome why) noexcept {
    if (owner_ == nullptr || done()) return;
    abandon_if_pending();
    if (!done()) state_.store(static_cast<int>(why), std::memory_order_release);
  }
  // Closes the cell or table entry of a call still waiting, so its reply is dropped.
  void abandon_if_pending() noexcept {
    if (owner_ == nullptr || done()) return;
    if (cells_ != nullptr) {
      cells_->abandon(index_, generation_, sizeof(R));
      cells_ = nullptr;
    } else {
      abandon_reply(*owner_, index_, generation_);
    }
  }
  // Reads the cell; once it holds the outcome, copies the value here and lets the cell go.
  int collect() const noexcept {
    const outcome got = cells_->collect(index_, generation_, &value_, sizeof(R));
    if (got == outcome::pending) return 0;
    state_.store(static_cast<int>(got), std::memory_order_release);
    cells_ = nullptr;
    return static_cast<int>(got);
  }

  mutable R value_{};
  // The outcome (0: pending). Table slots: written under the reply table's mutex by whichever
  // thread delivers, fails or closes the reply (release, after the value). Cell slots: by the
  // owner, when it reads the cell. Ended by the owner (cancel, deadline) after closing either.
  mutable std::atomic<int> state_{0};
  // The reply-table entry or cell the slot is open in (set by the owner thread when it opens
  // it); cells_ is null for table slots and once a cell slot has read its reply.
  local_thread_state* owner_ = nullptr;
  mutable reply_cell_table* cells_ = nullptr;
  std::uint32_t index_ = 0;
  std::uint32_t generation_ = 0;
  std::uint32_t destination_ = 0;  // thread (or service_of(process)) the call went to
  int process_ = -1;               // its process
};

// Per-destination FIFO of received calls. Producers: whoever progresses the process worker (AM
// handler) and same-process senders; consumer: the destination thread. A mutex with batch swap
// keeps a global FIFO order across producer threads (lock-free multi-producer queues only keep
// per-producer order, and the progressing thread may change between two calls of one sender).
class call_queue {
 public:
  // Payloads up to this size travel inside the item (no allocation, and the receiver does not
  // keep UCX's receive descriptor): most closures are a few words.
  static constexpr std::size_t inline_payload = 64;
  struct item {
    call_header header;
    const function_entry* entry = nullptr;  // found by the receive path (else looked up to run)
    std::byte* heap = nullptr;  // owned payload when larger than inline_payload (new[])
    void* ucx_data = nullptr;   // UCX AM data to release after running (payload lives there)
    alignas(16) std::byte inline_bytes[inline_payload];
    // Closure bytes, then buffer bytes. Points into the item itself when inline: use it on the
    // copy that runs, not across a move of the item.
    [[nodiscard]] std::byte* payload() noexcept {
      if (ucx_data != nullptr) return static_cast<std::byte*>(ucx_data);
      return heap != nullptr ? heap : inline_bytes;
    }
    // Copies `parts` (in order) into the item: inline when they fit, else a new[] block.
    void store(std::initializer_list<std::span<const std::byte>> parts);
    // Frees what the item owns; UCX data goes back to `worker`.
    void release(ucp_worker_h worker) noexcept;
  };
  void push(const item& call);
  // Moves every queued call into `out` (cleared first); returns how many.
  std::size_t take_all(std::vector<item>& out);
  [[nodiscard]] bool empty() const noexcept { return size_.load(std::memory_order_relaxed) == 0; }

 private:
  std::mutex mutex_;
  std::vector<item> items_;
  std::atomic<std::size_t> size_{0};
};

// Counters of send-based invocation in one process (wire safety: rejected input is counted,
// never run). sent/executed also drive runtime::run's termination.
struct invocation_counters {
  std::atomic<std::uint64_t> sent{0};
  std::atomic<std::uint64_t> executed{0};
  std::atomic<std::uint64_t> rejected_malformed{0};
  std::atomic<std::uint64_t> rejected_unknown_function{0};
  std::atomic<std::uint64_t> rejected_bad_destination{0};
  std::atomic<std::uint64_t> rejected_bad_reply{0};
  // Feedback notifications naming no word (not messages: not part of consumed()).
  std::atomic<std::uint64_t> rejected_feedback{0};
  // Write messages (am_id_write) whose target is not a live service allocation (not messages:
  // the records they carried were never published).
  std::atomic<std::uint64_t> rejected_writes{0};
  // Calls whose serialized arguments did not deserialize (the call counts as executed: its
  // message was dealt with; the function did not run).
  std::atomic<std::uint64_t> rejected_arguments{0};
  // Calls the AM handler handed straight to their destination thread because that thread was
  // the one progressing the process worker (no locked queue; counted, not part of consumed()).
  std::atomic<std::uint64_t> handed_to_poller{0};
  // call_return replies this process wrote straight into the reply cell of a caller in another
  // process on this machine (counted as sent and executed here; a reply such a write finds
  // closed or stale counts in rejected_bad_reply here, not at the caller).
  std::atomic<std::uint64_t> replies_direct{0};

  // Messages that arrived and were dealt with: run, or rejected.
  [[nodiscard]] std::uint64_t consumed() const noexcept {
    return executed.load(std::memory_order_acquire) + rejected() ;
  }
  [[nodiscard]] std::uint64_t rejected() const noexcept {
    return rejected_malformed.load(std::memory_order_relaxed) +
           rejected_unknown_function.load(std::memory_order_relaxed) +
           rejected_bad_destination.load(std::memory_order_relaxed) +
           rejected_bad_reply.load(std::memory_order_relaxed);
  }
};

// Registered memory a sender obtained in this thread's NUMA zone through the allocation service
// (the paper's "incoming memory map" entry): the invoke layer's chunks, handed to the receiving
// thread in the order the sender allocated them.
struct granted_memory {
  std::uint32_t sender = 0;       // global thread id of the sender
  std::uint64_t run = 0;          // runtime::run epoch it belongs to
  std::uint32_t batch = 0;        // the sender's allocation batch (0 = the channel's first)
  transfer::registered_buffer memory;
};

// State of one local thread that must outlive its thread_context: calls may arrive before the
// thread starts and replies after it stopped waiting. Owned by the runtime.
struct local_thread_state {
  struct reply_entry {
    void* value = nullptr;
    std::size_t size = 0;
    std::atomic<int>* state = nullptr;
    std::uint32_t generation = 0;
    int process = -1;  // where the call went (fail_pending_to)
  };
  call_queue incoming;
  // The thread's reply cells (small values; attached by the runtime when it has a reply region).
  reply_cell_table cells;
  std::mutex replies_mutex;            // owner thread and receive path
  std::vector<reply_entry> replies{1};  // index 0 unused (0 = "no reply")
  std::vector<std::uint32_t> free_replies;

  // Writes `value` into reply slot (index, generation) and ends it done (or, when `result` is
  // a failure outcome, ends it so, with no value); false (nothing written) when the slot is
  // unknown, stale or of another size, or the outcome is not one a reply carries: a peer's bad
  // reply. Slots with reply_cell::index_bit are this thread's cells, the others table entries.
  bool deliver_reply(std::uint32_t index, std::uint32_t generation,
                     std::span<const std::byte> value, outcome result) noexcept;
  // Process `process` died: every reply slot (table entry or cell) still waiting for a call to
  // it ends with `why`. Any thread of this process. Returns how many.
  std::size_t fail_pending_to(int process, outcome why) noexcept;

  // Incoming memory map. Writers: the allocation service (any thread serving calls); reader:
  // the owner thread, which takes entries out. `granted_count` lets the owner skip the mutex.
  std::mutex granted_mutex;
  std::vector<granted_memory> granted;
  std::atomic<std::size_t> granted_count{0};
  std::atomic<std::size_t> first_grants{0};  // entries of batch 0 ever granted (new channels)
  void grant(const granted_memory& entry);
  // Moves out every entry `which` selects, in grant order.
  template <class Which>
  std::vector<granted_memory> take_granted(Which which) {
    std::vector<granted_memory> out;
    if (granted_count.load(std::memory_order_acquire) == 0) return out;
    std::lock_guard lock(granted_mutex);
    std::erase_if(granted, [&](const granted_memory& g) {
      if (!which(g)) return false;
      out.push_back(g);
      return true;
    });
    granted_count.store(granted.size(), std::memory_order_release);
    return out;
  }

  // The layer above's feedback words (registered memory peers write into: the invoke layer's
  // released counts and synchronizers), published so that a notification arriving as an active
  // message (am_id_feedback) can be applied here. Guarded by feedback_mutex: the handler runs on
  // whichever thread progresses the process worker; the owner sets and clears the area.
  std::mutex feedback_mutex;
  std::uint64_t* feedback_words = nullptr;
  std::size_t feedback_count = 0;
  // Adds `value` to word `word`; false (nothing done) when there is no such word.
  bool add_feedback(std::uint32_t word, std::uint64_t value) noexcept;

  // The thread's own UCX worker (single-thread: used by whichever std::thread runs this thread
  // id, one run at a time) and its endpoints by process. Created by the first thread_context
  // and kept across runtime::run calls: peers' process workers keep connections to it, so a
  // worker per run would leave their attachments (shm segments) behind on every run. Released
  // by the runtime at teardown (release_transport), before the UCX context.
  // Send-based messages UCX holds past their sender's deadline (declared before `worker`, so
  // that their memory goes after it).
  detail::staged_sends staged;
  std::unique_ptr<transfer::ucx_worker> worker;
  std::vector<std::unique_ptr<transfer::ucx_endpoint>> endpoints;
  void release_transport() noexcept;

  // Who polls this thread's context: its owner (owner_polls), or, while the owner is inside a
  // helped_section, one of the process's helper threads. The owner publishes `offered` and then
  // stores offered_to_helpers (release); a helper takes it by CAS offered -> helper_polls
  // (acquire), polls once, and stores offered back (release); the owner ends the section by CAS
  // offered -> owner_polls, so owner and helper never use the context at the same time.
  static constexpr int owner_polls = 0;
  static constexpr int offered_to_helpers = 1;
  static constexpr int helper_polls = 2;
  std::atomic<int> poller{owner_polls};
  thread_context* offered = nullptr;

  // One-sided messages counted by the layer above (runtime::run's quiescence sums them with
  // the send-based counters). Single writer each: the owner thread (relaxed load + store).
  std::atomic<std::uint64_t> one_sided_sent{0};
  std::atomic<std::uint64_t> one_sided_consumed{0};
};

// Per-thread state of a layer above fabric (the invoke layer's messengers). Created for every
// worker thread_context by the factory that layer installs at static-initialization time, so a
// thread receives one-sided calls even if it never sends one. Owner thread only.
class thread_extension {
 public:
  // `kind`: an address unique to the layer's class, so that the layer finds its own extension
  // with a pointer compare instead of a dynamic_cast on every call.
  explicit thread_extension(const void* kind) noexcept : kind_(kind) {}
  virtual ~thread_extension() = default;
  [[nodiscard]] const void* kind() const noexcept { return kind_; }
  // Receives and runs what arrived, and moves queued work on; returns the number of calls run.
  virtual std::size_t poll(thread_context& self) = 0;
  // Publishes everything batched locally (aggregators), so that it will be received.
  virtual void flush(thread_context& self) = 0;
  // Some process died (runtime::peer_failed says which): fail what is held for it.
  virtual void peers_failed(thread_context& self) = 0;
  // This thread's counters of the layer as one JSON object (SERIEMA_COUNTERS writes it when
  // run() ends); "{}" when the layer counts nothing.
  [[nodiscard]] virtual std::string counters_json() const { return "{}"; }

 private:
  const void* kind_;
};
using thread_extension_factory = std::unique_ptr<thread_extension> (*)(thread_context& self);
// Installs the factory (one layer; the last install wins). Call before runtime::run.
void install_thread_extension(thread_extension_factory factory) noexcept;

// One long-lived thread's handle on the job. Thread-safety: owner thread only, except
// incoming() which the runtime fills from other threads.
class thread_context {
 public:
  thread_context(runtime& rt, thread_id id);
  ~thread_context();
  thread_context(const thread_context&) = delete;
  thread_context& operator=(const thread_context&) = delete;

  [[nodiscard]] thread_id id() const noexcept { return id_; }
  [[nodiscard]] int process() const noexcept;
  [[nodiscard]] runtime& rt() const noexcept { return rt_; }
  [[nodiscard]] thread_id thread_count() const noexcept;

  // Send-based: `dest` runs f() (or f(ctx)) when it polls.
  template <class F>
  [[nodiscard]] call_status call(thread_id dest, F f) {
    check_remote_closure<F>();
    return send_call(dest, function_wrapper<F, plain_shape>::id, as_bytes_of(f), {}, 0, 0);
  }
  // Send-based: `dest` runs f(buf) (or f(ctx, buf)) with a copy of `buffer`.
  template <class F>
  [[nodiscard]] call_status call_buffer(thread_id dest, F f, std::span<const std::byte> buffer) {
    check_remote_closure<F>();
    return send_call(dest, function_wrapper<F, buffer_shape>::id, as_bytes_of(f), buffer, 0, 0);
  }
  // Send-based: `dest` runs f(); its return value lands in `slot` (wait_for(slot)).
  template <class F, class R>
  [[nodiscard]] call_status call_return(thread_id dest, F f, return_slot<R>& slot) {
    return send_returning(dest, f, slot);
  }
  // Service call: the process's service role (service thread, or a worker taking the role)
  // runs f(ctx) where ctx is the serving thread's context.
  template <class F>
  [[nodiscard]] call_status service_call(int process, F f) {
    check_remote_closure<F>();
    return send_call(service_of(process), function_wrapper<F, plain_shape>::id, as_bytes_of(f),
                     {}, 0, 0);
  }
  template <class F, class R>
  [[nodiscard]] call_status service_call_return(int process, F f, return_slot<R>& slot) {
    return send_returning(service_of(process), f, slot);
  }

  // Send-based call of a closure of any shape (the invoke layer's wrappers); call_return_as
  // also opens a reply slot whose value the closure writes (Shape return or invocation).
  template <class Shape, class F>
  [[nodiscard]] call_status call_as(thread_id dest, const F& f, std::span<const std::byte> buffer) {
    check_remote_closure<F>();
    return send_call(dest, function_wrapper<F, Shape>::id, as_bytes_of(f), buffer, 0, 0);
  }
  template <class Shape, class F, class R>
  [[nodiscard]] call_status call_return_as(thread_id dest, const F& f,
                                           std::span<const std::byte> buffer,
                                           return_slot<R>& slot) {
    check_remote_closure<F>();
    static_assert(function_wrapper<F, Shape>::result_size() == sizeof(R) ||
                      !std::is_same_v<Shape, invocation_shape>,
                  "call_return: the slot's type must be the function's return type");
    auto [index, generation] = open_slot(slot, dest);
    call_status status =
        send_call(dest, function_wrapper<F, Shape>::id, as_bytes_of(f), buffer, index, generation);
    if (!reached_transport(status)) fail_unsent_reply(index);
    return status;
  }

  // Test hook (tests/multiproc/failure_handling_mp_test.cpp): a call_return naming `function`
  // whatever it is, with `closure` as its bytes; an unregistered id tests the receiver's refusal.
  template <class R>
  [[nodiscard]] call_status call_return_raw_for_testing(thread_id dest, function_id function,
                                                        std::span<const std::byte> closure,
                                                        return_slot<R>& slot) {
    auto [index, generation] = open_slot(slot, dest);
    call_status status = send_call(dest, function, closure, {}, index, generation);
    if (!reached_transport(status)) fail_unsent_reply(index);
    return status;
  }

  // Reply slots (used by the invoke layer's one-sided call_return): opens a slot that a reply
  // (index, generation) fills; fail_unsent_reply(index) fails it (the call was not sent).
  template <class R>
  std::pair<std::uint32_t, std::uint32_t> open_reply_for(return_slot<R>& slot, thread_id dest) {
    return open_slot(slot, dest);
  }
  void fail_unsent_reply(std::uint32_t index) noexcept;
  // Fails the slot (index, generation) that thread `caller` opened for a call_return whose
  // function threw here: an am_id_reply without a value (written directly when the caller is in
  // this process). Waits only for the send to complete and runs no calls meanwhile, so it is
  // safe in a catch handler (a call that threw in a nested poll would abandon the handler).
  void send_failure(thread_id caller, std::uint32_t slot, std::uint32_t generation,
                    outcome why = outcome::threw);

  // Runs the calls received so far (FIFO per sender) and progresses communication; takes the
  // service role when no service thread is configured. Returns the number of calls run.
  // An exception thrown by a call leaves the poll that ran it when that poll is the
  // application's own (not inside a running call, not inside a deferring_scope); a nested poll
  // keeps it and the next such outer poll throws it, one per poll, in the order thrown.
  std::size_t poll();

  // While alive, polls of this thread keep the exceptions of the calls they run (see poll())
  // instead of throwing them: an operation that waits (a call being run, a messenger's setup, a
  // put, a get, a remote allocation) completes even when a call it runs meanwhile throws, so
  // its in-flight requests, reply slots and state stay valid. Scopes nest.
  class deferring_scope {
   public:
    explicit deferring_scope(thread_context& self) noexcept : self_(self) { ++self_.nesting_; }
    ~deferring_scope() { --self_.nesting_; }
    deferring_scope(const deferring_scope&) = delete;
    deferring_scope& operator=(const deferring_scope&) = delete;

   private:
    thread_context& self_;
  };
  // Exceptions kept by nested polls and not thrown yet.
  [[nodiscard]] std::size_t deferred_exceptions() const noexcept { return deferred_.size(); }
  // Polls until pred() holds (with idle back-off), or until the deadline in force passes
  // (`deadline`, an enclosing deadline_scope, SERIEMA_TIMEOUT: the earliest); returns whether
  // pred() held. Serving calls while waiting is what lets two threads that wait on each other
  // both progress; an idle wait also publishes what this thread's aggregators batched (the call
  // it waits for may be among it). The clock is read only when a poll found nothing to do.
  template <class Pred>
  bool wait_until(Pred pred, deadline_clock::time_point deadline = no_deadline) {
    deadline = deadline_in_force(deadline);
    unsigned idle = 0;
    while (!pred()) {
      if (poll() == 0) {
        if (idle == 0 && extension_) extension_->flush(*this);
        if (deadline != no_deadline && deadline_clock::now() >= deadline) return pred();
        back_off(idle);
      } else {
        idle = 0;
      }
    }
    return true;
  }
  // Waits until the slot ended (serving calls), at most until the deadline in force; a slot
  // still pending then ends as deadline_exceeded (its late reply is dropped). Returns the
  // outcome. A dead destination ends it (may_have_executed) within the keepalive.
  template <class R>
  outcome wait_for(return_slot<R>& slot, deadline_clock::time_point deadline = no_deadline) {
    if (!wait_until([&] { return slot.done(); }, deadline)) {
      slot.end_pending(outcome::deadline_exceeded);
    }
    return slot.result();
  }
  template <class R, class Rep, class Period>
  outcome wait_for(return_slot<R>& slot, std::chrono::duration<Rep, Period> timeout) {
    return wait_for(slot, deadline_clock::now() +
                              std::chrono::duration_cast<deadline_clock::duration>(timeout));
  }

  // While alive, every wait of this thread (wait_until, wait_for, synchronizer waits, retry
  // calls, remote allocation, the send path's wait for the transport) ends by `deadline` at
  // the latest. Scopes nest; the earliest deadline wins. Owner thread only.
  class deadline_scope {
   public:
    deadline_scope(thread_context& self, deadline_clock::time_point deadline) noexcept
        : self_(self), saved_(self.scope_deadline_) {
      if (deadline < self_.scope_deadline_) self_.scope_deadline_ = deadline;
    }
    template <class Rep, class Period>
    deadline_scope(thread_context& self, std::chrono::duration<Rep, Period> timeout) noexcept
        : deadline_scope(self, deadline_clock::now() + std::chrono::duration_cast<
                                                           deadline_clock::duration>(timeout)) {}
    ~deadline_scope() { self_.scope_deadline_ = saved_; }
    deadline_scope(const deadline_scope&) = delete;
    deadline_scope& operator=(const deadline_scope&) = delete;

   private:
    thread_context& self_;
    deadline_clock::time_point saved_;
  };
  // The earliest of `deadline`, the enclosing deadline_scopes' and now + SERIEMA_TIMEOUT (when
  // set): what a wait starting now must end by.
  [[nodiscard]] deadline_clock::time_point deadline_in_force(
      deadline_clock::time_point deadline = no_deadline) const noexcept;

  // Allocates `bytes` of registered memory in the NUMA zone of thread `owner` (any process),
  // through a no-setup service call; waits (serving calls). Throws seriema::error on failure.
  transfer::remote_memory_locator allocate_remote(thread_id owner, std::size_t bytes);
  void free_remote(const transfer::remote_memory_locator& locator);

  // The thread's own UCX worker (sends) and its endpoint to `process`'s process worker.
  [[nodiscard]] transfer::ucx_worker& worker() noexcept { return *worker_; }
  transfer::ucx_endpoint& endpoint_to(int process);

  // Publishes what the extension batched, then flushes every endpoint of this thread (all sends
  // and puts delivered). Control path.
  void flush_endpoints();

  // The layer above's per-thread state (null for service threads or when none is installed).
  [[nodiscard]] thread_extension* extension() const noexcept { return extension_.get(); }
  [[nodiscard]] local_thread_state& state() noexcept { return state_; }
  // runtime::run epoch this context belongs to (1 for the first run).
  [[nodiscard]] std::uint64_t run_epoch() const noexcept { return run_epoch_; }

  static void back_off(unsigned& idle) noexcept;
  // Runs the calls of `pending` in order on behalf of `self` until it is empty (nested polls
  // continue the same queue); releases their payloads. Returns the count run.
  static std::size_t run_calls(thread_context& self, std::deque<call_queue::item>& pending);
  // The AM handler's shortcut, for a call to the very thread whose poll() is progressing the
  // process worker (runtime::serve on this thread): appends it to the calls this poll runs next,
  // without the destination's locked queue. Only when that queue is empty, so a sender's calls
  // that another thread's progress queued earlier still run first (handlers are serialized by
  // the process worker's progress flag; the queue's only consumer is this thread).
  void accept_from_handler(const call_queue::item& call) { pending_.push_back(call); }

 private:
  template <class F>
  static std::span<const std::byte> as_bytes_of(const F& f) noexcept {
    return {reinterpret_cast<const std::byte*>(&f), sizeof(F)};
  }
  // call_return and service_call_return: open a reply slot, send, close it if sending failed.
  template <class F, class R>
  call_status send_returning(std::uint32_t dest, const F& f, return_slot<R>& slot) {
    static_assert(std::is_same_v<R, detail::return_type_t<F>>,
                  "call_return: the slot's type must be the function's return type");
    return call_return_as<return_shape>(dest, f, {}, slot);
  }
  call_status send_call(std::uint32_t dest, function_id function,
                        std::span<const std::byte> closure, std::span<const std::byte> buffer,
                        std::uint32_t reply_slot, std::uint32_t reply_generation);
  std::pair<std::uint32_t, std::uint32_t> open_reply(void* value, std::size_t size,
                                                     std::atomic<int>* state, int process);
  // The process of a thread id or service_of(process); -1 for ids naming nothing.
  [[nodiscard]] int process_of(std::uint32_t dest) const noexcept;
  template <class R>
  std::pair<std::uint32_t, std::uint32_t> open_slot(return_slot<R>& slot, std::uint32_t dest) {
    // A slot reused while a call is still pending would leave its first cell or entry open.
    slot.abandon_if_pending();
    slot.state_.store(0, std::memory_order_relaxed);
    slot.cells_ = nullptr;
    const int process = process_of(dest);
    std::pair<std::uint32_t, std::uint32_t> opened;
    if (auto cell = state_.cells.open(sizeof(R), process)) {
      opened = *cell;
      slot.cells_ = &state_.cells;
    } else {
      opened = open_reply(&slot.value_, sizeof(R), &slot.state_, process);
    }
    slot.destination_ = dest;
    slot.process_ = process;
    slot.owner_ = &state_;
    slot.index_ = opened.first;
    slot.generation_ = opened.second;
    return opened;
  }
  // Sends a call_return's outcome to `caller`: the value (ok), or a failure (no data).
  void send_reply(thread_id caller, function_id function, std::uint32_t slot,
                  std::uint32_t generation, std::span<const std::byte> value, outcome result);
  // A process died since this thread last looked (runtime::failure_epoch): tells the layer
  // above (its messengers fail what they hold for it).
  void notice_peer_failures();

  runtime& rt_;
  thread_id id_;
  local_thread_state& state_;
  transfer::ucx_worker* worker_;  // state_.worker
  std::vector<std::unique_ptr<transfer::ucx_endpoint>>& endpoints_;  // state_.endpoints
  std::vector<call_queue::item> batch_;    // poll(): what take_all moved out (transient)
  std::deque<call_queue::item> pending_;   // received, not yet run (shared by nested polls)
  unsigned nesting_ = 0;                   // live deferring_scopes (calls running, waits)
  std::deque<std::exception_ptr> deferred_;  // kept by nested polls, thrown by outer ones
  deadline_clock::time_point scope_deadline_ = no_deadline;  // innermost deadline_scope's
  std::uint64_t failures_seen_ = 0;  // runtime::failure_epoch() this thread acted on
  std::size_t poll_once();
  std::uint64_t run_epoch_ = 0;
  // Destroyed first (it holds rkeys and endpoints of worker_).
  std::unique_ptr<thread_extension> extension_;
};

// Says on stderr (the first time in this process; all are counted by the caller) that a call
// from `source` to `self` names a function this program did not register.
void report_unknown_function(thread_context& self, std::uint32_t source,
                             function_id function) noexcept;

// While alive, the thread that created it does not touch its context (it computes), and the
// process's helper threads (SERIEMA_HELPER_THREADS) poll it instead: they run the calls sent to
// it (in FIFO order per sender, on the helper's OS thread, so shared data needs the
// application's synchronization), and move its queued retry_async calls on. The destructor
// waits for a helper's poll in progress, then hands the context back. Throws seriema::error
// when the process has no helper threads.
class helped_section {
 public:
  explicit helped_section(thread_context& self);
  ~helped_section();
  helped_section(const helped_section&) = delete;
  helped_section& operator=(const helped_section&) = delete;

 private:
  local_thread_state& state_;
};

}  // namespace seriema::fabric

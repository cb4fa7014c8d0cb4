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
#include <seriema/fabric/detail/call_queue.hpp>
#include <seriema/fabric/detail/reply_cells.hpp>
#include <seriema/fabric/detail/thread_extension.hpp>
#include <array>
#include <seriema/fabric/function_registry.hpp>
#include <seriema/fabric/outcome.hpp>
#include <seriema/fabric/placement.hpp>
#include <seriema/transfer/detail/ucx_forward.hpp>
#include <seriema/transfer/remote_memory.hpp>
#include <span>
#include <string>
#include <vector>

namespace seriema::fabric {

class runtime;

/// What became of a call when it was made (the call itself reports how it ran through a
/// return_slot or a synchronizer).
enum class call_status : std::uint8_t {
  ok,
  bad_destination,  ///< no such thread
  too_large,        ///< closure + buffer exceed the send-based limit (SERIEMA_SEND_LIMIT), a
                    ///< one-sided record does not fit a chunk's data area (SERIEMA_CHUNK_SIZE)
                    ///< or, to another machine, a staging unit (SERIEMA_STAGING_SIZE), or a put
                    ///< variant's target is smaller than its bytes (invoke::describe says which
                    ///< limit applies to a channel, with its value)
  full,             ///< one-sided: the channel's ring is at its maximum and the call's policy
                    ///< is to fail (the call was not sent)
  peer_failed,      ///< the destination's process is dead (endpoint error): nothing was sent
  error,            ///< UCX refused the send
  deadline_exceeded,  ///< the call waited for the transport (wireup, room) past its deadline
                      ///< (deadline_scope / SERIEMA_TIMEOUT); it was not sent
  queued_at_deadline,  ///< send-based: UCX took the call but had not sent it when the deadline
                       ///< passed (a stalled or partitioned peer): it stays queued, in order, and
                       ///< runs once if the link carries it again, never if the peer is found
                       ///< dead. Do not send it again; a call_return's slot stays open.
};
const char* to_string(call_status status) noexcept;  ///< "ok", "peer failed", ...
/// Whether a call with this status was handed to the transport (ok, queued_at_deadline): it may
/// run, so its reply slot must stay open.
constexpr bool reached_transport(call_status status) noexcept {
  return status == call_status::ok || status == call_status::queued_at_deadline;
}

struct local_thread_state;
/// Closes reply slot (index, generation) of `owner` if it is still open, without writing it: a
/// reply that arrives later is rejected as stale (rejected_bad_reply) instead of being written
/// into memory that no longer holds the slot.
void abandon_reply(local_thread_state& owner, std::uint32_t index,
                   std::uint32_t generation) noexcept;

/// Where a call_return's value lands. Values of up to reply_cell::value_capacity bytes land in
/// a reply cell of the caller thread (registered memory a same-machine callee writes directly,
/// see reply_cells.hpp) when one is free, which the slot reads when asked; larger values (or
/// every cell in use) land in the slot itself through the caller's reply table. The caller waits
/// with thread_context::wait_for(slot) (which keeps serving calls). The slot ends exactly once
/// with one outcome (done, threw, not_executed, may_have_executed, deadline_exceeded,
/// cancelled): when its destination's process dies the runtime ends it (may_have_executed); a
/// wait whose deadline passes, cancel(), or the slot's destruction while waiting close its cell
/// or table entry, so a late reply is dropped, never written into memory that no longer holds
/// the slot. Not copyable: the reply table holds its address. Owner thread only (the thread that
/// opened it).
template <class R>
class return_slot {
  static_assert(std::is_trivially_copyable_v<R>, "call_return values must be trivially copyable");

 public:
  return_slot() = default;
  return_slot(const return_slot&) = delete;
  return_slot& operator=(const return_slot&) = delete;
  ~return_slot() { abandon_if_pending(); }

  /// done/ready/failed/result: the owner thread only (they read the cell and may copy the value
  /// in). done(): ended, whichever way; ready(): ended with the value; failed(): any other end.
  [[nodiscard]] bool done() const noexcept { return result() != outcome::pending; }
  /// Ended with the value (value() holds it).
  [[nodiscard]] bool ready() const noexcept { return result() == outcome::done; }
  /// Ended without a value (describe() says why).
  [[nodiscard]] bool failed() const noexcept {
    const outcome o = result();
    return o != outcome::pending && o != outcome::done;
  }
  /// How the slot ended, or outcome::pending.
  [[nodiscard]] outcome result() const noexcept {
    int state = state_.load(std::memory_order_acquire);
    if (state == 0 && cells_ != nullptr) state = collect();
    return static_cast<outcome>(state);
  }
  /// The returned value; meaningful once ready().
  [[nodiscard]] const R& value() const noexcept { return value_; }
  /// The thread the call went to, and a sentence saying how the slot ended (for messages).
  [[nodiscard]] std::uint32_t destination() const noexcept { return destination_; }
  /// "thread 3 (rank 1) died before replying"-style text for the outcome.
  [[nodiscard]] std::string describe() const {
    return fabric::describe(result(), destination_, process_);
  }
  /// Ends a pending slot as cancelled (nothing when it already ended): its reply, if one comes,
  /// is dropped. The call itself may still run at the destination.
  void cancel() noexcept { end_pending(outcome::cancelled); }

 private:
  friend class thread_context;
  /// Ends a pending slot with `why` (closing its cell or table entry first, so a reply is
  /// dropped); a slot that ended meanwhile keeps its outcome.
  void end_pending(outcome why) noexcept {
    if (owner_ == nullptr || done()) return;
    abandon_if_pending();
    if (!done()) state_.store(static_cast<int>(why), std::memory_order_release);
  }
  /// Closes the cell or table entry of a call still waiting, so its reply is dropped.
  void abandon_if_pending() noexcept {
    if (owner_ == nullptr || done()) return;
    if (cells_ != nullptr) {
      cells_->abandon(index_, generation_, sizeof(R));
      cells_ = nullptr;
    } else {
      abandon_reply(*owner_, index_, generation_);
    }
  }
  /// Reads the cell; once it holds the outcome, copies the value here and lets the cell go.
  int collect() const noexcept {
    const outcome got = cells_->collect(index_, generation_, &value_, sizeof(R));
    if (got == outcome::pending) return 0;
    state_.store(static_cast<int>(got), std::memory_order_release);
    cells_ = nullptr;
    return static_cast<int>(got);
  }

  mutable R value_{};
  /// The outcome (0: pending). Table slots: written under the reply table's mutex by whichever
  /// thread delivers, fails or closes the reply (release, after the value). Cell slots: by the
  /// owner, when it reads the cell. Ended by the owner (cancel, deadline) after closing either.
  mutable std::atomic<int> state_{0};
  /// The reply-table entry or cell the slot is open in (set by the owner thread when it opens
  /// it); cells_ is null for table slots and once a cell slot has read its reply.
  local_thread_state* owner_ = nullptr;
  mutable reply_cell_table* cells_ = nullptr;
  std::uint32_t index_ = 0;
  std::uint32_t generation_ = 0;
  std::uint32_t destination_ = 0;  ///< thread (or service_of(process)) the call went to
  int process_ = -1;               ///< its process
};

/// One long-lived thread's handle on the job: send-based calls to any thread (no setup between
/// the two), polling that runs the calls sent here (FIFO per sender), waits with deadlines and
/// remote allocation. runtime::run gives each worker thread one. Thread-safety: the owner thread
/// only. Errors: calls return a call_status (never throw); waits return an outcome or a bool;
/// setup and allocation throw seriema::error.
class thread_context {
 public:
  /// The context of thread `id` of this process (runtime::run makes them; applications do not).
  thread_context(runtime& rt, thread_id id);
  ~thread_context();
  thread_context(const thread_context&) = delete;
  thread_context& operator=(const thread_context&) = delete;

  /// This thread's job-wide id: 0..thread_count() - 1 for workers, runtime::attached_id() for
  /// attached threads.
  [[nodiscard]] thread_id id() const noexcept { return id_; }
  [[nodiscard]] int process() const noexcept;  ///< This thread's process (rank).
  [[nodiscard]] runtime& rt() const noexcept { return rt_; }  ///< The runtime it belongs to.
  /// Threads in the job (every process's workers): the valid destinations of a call.
  [[nodiscard]] thread_id thread_count() const noexcept;

  /// Send-based: `dest` runs f() (or f(ctx)) when it polls.
  template <class F>
  [[nodiscard]] call_status call(thread_id dest, F f) {
    check_remote_closure<F>();
    return send_call(dest, function_wrapper<F, plain_shape>::id, as_bytes_of(f), {}, 0, 0);
  }
  /// Send-based: `dest` runs f(buf) (or f(ctx, buf)) with a copy of `buffer`.
  template <class F>
  [[nodiscard]] call_status call_buffer(thread_id dest, F f, std::span<const std::byte> buffer) {
    check_remote_closure<F>();
    return send_call(dest, function_wrapper<F, buffer_shape>::id, as_bytes_of(f), buffer, 0, 0);
  }
  /// Send-based: `dest` runs f(); its return value lands in `slot` (wait_for(slot)).
  template <class F, class R>
  [[nodiscard]] call_status call_return(thread_id dest, F f, return_slot<R>& slot) {
    return send_returning(dest, f, slot);
  }
  /// Service call: the process's service role (service thread, or a worker taking the role)
  /// runs f(ctx) where ctx is the serving thread's context.
  template <class F>
  [[nodiscard]] call_status service_call(int process, F f) {
    check_remote_closure<F>();
    return send_call(service_of(process), function_wrapper<F, plain_shape>::id, as_bytes_of(f),
                     {}, 0, 0);
  }
  /// service_call whose return value lands in `slot`.
  template <class F, class R>
  [[nodiscard]] call_status service_call_return(int process, F f, return_slot<R>& slot) {
    return send_returning(service_of(process), f, slot);
  }

  // --- machinery of the invoke layer and tests; not for applications ---
  /// @cond INTERNAL
  /// Send-based call of a closure of any shape (the invoke layer's wrappers); call_return_as
  /// also opens a reply slot whose value the closure writes (Shape return or invocation).
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

  /// Send-based calls naming `function` by id with `closure` as its bytes (the invoke layer's
  /// calls of registered ids; checked there). The receiver refuses a closure of another size.
  [[nodiscard]] call_status call_by_id(thread_id dest, function_id function,
                                       std::span<const std::byte> closure,
                                       std::span<const std::byte> buffer) {
    return send_call(dest, function, closure, buffer, 0, 0);
  }
  template <class R>
  [[nodiscard]] call_status call_return_by_id(thread_id dest, function_id function,
                                              std::span<const std::byte> closure,
                                              std::span<const std::byte> buffer,
                                              return_slot<R>& slot) {
    auto [index, generation] = open_slot(slot, dest);
    call_status status = send_call(dest, function, closure, buffer, index, generation);
    if (!reached_transport(status)) fail_unsent_reply(index);
    return status;
  }

  /// Test hook (tests/multiproc/failure_handling_mp_test.cpp): a call_return naming `function`
  /// whatever it is, with `closure` as its bytes; an unregistered id tests the receiver's refusal.
  template <class R>
  [[nodiscard]] call_status call_return_raw_for_testing(thread_id dest, function_id function,
                                                        std::span<const std::byte> closure,
                                                        return_slot<R>& slot) {
    return call_return_by_id(dest, function, closure, {}, slot);
  }

  /// Test hook: a call naming `function` whatever it is, replying to an opened slot (index,
  /// generation); an unregistered id tests the receiver's refusal.
  [[nodiscard]] call_status call_with_reply_raw_for_testing(thread_id dest, function_id function,
                                                            std::span<const std::byte> closure,
                                                            std::uint32_t index,
                                                            std::uint32_t generation) {
    return send_call(dest, function, closure, {}, index, generation);
  }

  /// Reply slots (used by the invoke layer's one-sided call_return): opens a slot that a reply
  /// (index, generation) fills; fail_unsent_reply(index) fails it (the call was not sent).
  template <class R>
  std::pair<std::uint32_t, std::uint32_t> open_reply_for(return_slot<R>& slot, thread_id dest) {
    return open_slot(slot, dest);
  }
  void fail_unsent_reply(std::uint32_t index) noexcept;
  /// A reply slot opened for the invoke layer's futures: its (index, generation), and whether it
  /// is a reply cell (cells(): collect / abandon) or an entry of the reply table (its outcome
  /// lands in *state; abandon_reply closes it).
  struct opened_reply {
    std::uint32_t index = 0;
    std::uint32_t generation = 0;
    bool in_cell = false;
    int process = -1;  ///< the destination's process (-1: no such thread)
  };
  /// Opens a reply for a value of exactly `size` bytes from a call to `dest`: a reply cell when
  /// the value fits one and one is free, else a table entry that writes the value to `value`
  /// and then the outcome to *state (release).
  opened_reply open_reply_raw(thread_id dest, std::size_t size, void* value,
                              std::atomic<int>* state);
  /// Opens a table entry for a reply of any size: its bytes are assigned to *bytes, then the
  /// outcome stored to *state (release).
  opened_reply open_variable_reply(thread_id dest, std::vector<std::byte>* bytes,
                                   std::atomic<int>* state);
  /// The thread's reply cells (collect, abandon).
  [[nodiscard]] reply_cell_table& cells() noexcept { return cells_; }
  /// Send-based call of a closure of shape Shape whose reply goes to an already opened slot
  /// (index, generation); the caller fails the slot when the call was not sent.
  template <class Shape, class F>
  [[nodiscard]] call_status call_with_reply_as(thread_id dest, const F& f,
                                               std::span<const std::byte> buffer,
                                               std::uint32_t index, std::uint32_t generation) {
    check_remote_closure<F>();
    return send_call(dest, function_wrapper<F, Shape>::id, as_bytes_of(f), buffer, index,
                     generation);
  }
  /// Fails the slot (index, generation) that thread `caller` opened for a call_return whose
  /// function threw here (or, `why`, is not known here): an am_id_reply carrying `details` (what
  /// the caller's future learns of the exception; may be empty), written directly when the
  /// caller is in this process or, without details, on this machine. Waits only for the send to
  /// complete and runs no calls meanwhile, so it is safe in a catch handler (a call that threw in
  /// a nested poll would abandon the handler).
  void send_failure(thread_id caller, std::uint32_t slot, std::uint32_t generation,
                    outcome why = outcome::threw, std::span<const std::byte> details = {});
  /// Sends a call_return's value to slot (index, generation) of `caller` (a deferred reply: the
  /// function's coroutine or future ended after the call returned). As the receive path sends
  /// replies: written directly into a cell where it can, else an am_id_reply.
  void send_reply_value(thread_id caller, std::uint32_t slot, std::uint32_t generation,
                        std::span<const std::byte> value);
  /// @endcond

  /// Runs the calls received so far (FIFO per sender) and progresses communication; takes the
  /// service role when no service thread is configured. Returns the number of calls run.
  /// An exception thrown by a call leaves the poll that ran it when that poll is the
  /// application's own (not inside a running call, not inside a deferring_scope); a nested poll
  /// keeps it and the next such outer poll throws it, one per poll, in the order thrown.
  std::size_t poll();

  /// While alive, polls of this thread keep the exceptions of the calls they run (see poll())
  /// instead of throwing them: an operation that waits (a call being run, a messenger's setup, a
  /// put, a get, a remote allocation) completes even when a call it runs meanwhile throws, so
  /// its in-flight requests, reply slots and state stay valid. Scopes nest.
  class deferring_scope {
   public:
    /// Opens the scope on `self` (its owner thread).
    explicit deferring_scope(thread_context& self) noexcept : self_(self) { ++self_.nesting_; }
    ~deferring_scope() { --self_.nesting_; }
    deferring_scope(const deferring_scope&) = delete;
    deferring_scope& operator=(const deferring_scope&) = delete;

   private:
    thread_context& self_;
  };
  /// Exceptions kept by nested polls and not thrown yet.
  [[nodiscard]] std::size_t deferred_exceptions() const noexcept { return deferred_.size(); }

  /// @cond INTERNAL
  /// A plain call or call_buffer handed back to this thread's poll (run_first).
  struct handed_call {
    function_id function = 0;             ///< registered, with no result
    thread_id source = 0;                 ///< the caller the function sees
    std::span<const std::byte> closure;   ///< the registered closure size
    std::span<const std::byte> buffer;    ///< call_buffer's bytes (empty for a call)
  };
  /// Queues `calls` (copied) to run on this thread before every call it received and has not
  /// run yet, in their order, each as a send-based call that arrived alone: a wait inside one
  /// runs the next, an exception leaves the poll that ran it and the others still run. A layer
  /// that receives several calls in one message (offload's bundles) hands them over so. Each
  /// counts as a call sent within this process (runtime::run ends once they ran). Throws
  /// seriema::error, queuing none, when one names no registered plain call of its closure's
  /// size. Owner thread only.
  void run_first(std::span<const handed_call> calls);
  /// @endcond
  /// Polls until pred() holds (with idle back-off), or until the deadline in force passes
  /// (`deadline`, an enclosing deadline_scope, SERIEMA_TIMEOUT: the earliest); returns whether
  /// pred() held. Serving calls while waiting is what lets two threads that wait on each other
  /// both progress; an idle wait also publishes what this thread's aggregators batched (the call
  /// it waits for may be among it). The clock is read only when a poll found nothing to do.
  template <class Pred>
  bool wait_until(Pred pred, deadline_clock::time_point deadline = no_deadline) {
    deadline = deadline_in_force(deadline);
    unsigned idle = 0;
    while (!pred()) {
      if (poll() == 0) {
        if (idle == 0) flush_layers();
        if (deadline != no_deadline && deadline_clock::now() >= deadline) return pred();
        back_off(idle);
      } else {
        idle = 0;
      }
    }
    return true;
  }
  /// Waits until the slot ended (serving calls), at most until the deadline in force; a slot
  /// still pending then ends as deadline_exceeded (its late reply is dropped). Returns the
  /// outcome. A dead destination ends it (may_have_executed) within the keepalive.
  template <class R>
  outcome wait_for(return_slot<R>& slot, deadline_clock::time_point deadline = no_deadline) {
    if (!wait_until([&] { return slot.done(); }, deadline)) {
      slot.end_pending(outcome::deadline_exceeded);
    }
    return slot.result();
  }
  /// wait_for with a deadline `timeout` from now.
  template <class R, class Rep, class Period>
  outcome wait_for(return_slot<R>& slot, std::chrono::duration<Rep, Period> timeout) {
    return wait_for(slot, deadline_clock::now() +
                              std::chrono::duration_cast<deadline_clock::duration>(timeout));
  }

  /// While alive, every wait of this thread (wait_until, wait_for, synchronizer waits, retry
  /// calls, remote allocation, the send path's wait for the transport) ends by `deadline` at
  /// the latest. Scopes nest; the earliest deadline wins. Owner thread only.
  class deadline_scope {
   public:
    /// Waits of `self` end by `deadline` while the scope lives.
    deadline_scope(thread_context& self, deadline_clock::time_point deadline) noexcept
        : self_(self), saved_(self.scope_deadline_) {
      if (deadline < self_.scope_deadline_) self_.scope_deadline_ = deadline;
    }
    /// Waits of `self` end within `timeout` from now while the scope lives.
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
  /// The earliest of `deadline`, the enclosing deadline_scopes' and now + SERIEMA_TIMEOUT (when
  /// set): what a wait starting now must end by.
  [[nodiscard]] deadline_clock::time_point deadline_in_force(
      deadline_clock::time_point deadline = no_deadline) const noexcept;

  /// Job-wide quiescence: a barrier of every worker of the job, each calling it inside run(),
  /// that returns once every call sent before it, anywhere, has run, calls those calls made
  /// included, with deferred replies and spawned tasks finished (the termination rounds run()
  /// has at its end). Waiting serves calls. Ends by `deadline` (or the deadline in force):
  /// throws seriema::deadline_error then, and seriema::error naming a rank that failed; after
  /// either every later quiesce throws it too, and a deadline passed in the job-wide rounds
  /// breaks the collectives as any collective's does (run()'s end and finalize() throw it).
  /// Throws seriema::error outside run(), from a thread that is not a worker, and from a call or
  /// coroutine run while this thread waits in quiesce. Give every worker the same deadline.
  void quiesce(deadline_clock::time_point deadline = no_deadline);
  /// quiesce() with a deadline `timeout` from now.
  template <class Rep, class Period>
  void quiesce(std::chrono::duration<Rep, Period> timeout) {
    quiesce(deadline_clock::now() + std::chrono::duration_cast<deadline_clock::duration>(timeout));
  }

  /// Allocates `bytes` of registered memory in the NUMA zone of thread `owner` (any process),
  /// through a no-setup service call; waits (serving calls). Throws seriema::error on failure.
  transfer::remote_memory_locator allocate_remote(thread_id owner, std::size_t bytes);
  /// Frees what allocate_remote returned: a service call to the owner's process, whose answer it
  /// waits for (serving calls), so the owner must still be inside run() (quiesce before its
  /// workers leave). Throws seriema::error when the call cannot be sent, fails or is refused.
  void free_remote(const transfer::remote_memory_locator& locator);

  /// Publishes what the extension batched, then flushes every endpoint of this thread (all sends
  /// and puts delivered). Control path.
  void flush_endpoints();

  // --- machinery of the runtime and the invoke layer; not for applications ---
  /// @cond INTERNAL
  /// The thread's own UCX worker (sends) and its endpoint to `process`'s process worker.
  [[nodiscard]] transfer::ucx_worker& worker() noexcept { return *worker_; }
  transfer::ucx_endpoint& endpoint_to(int process);

  /// The per-thread state of the layer in `slot` (layer_slot::...; null when the layer is not
  /// linked or does not serve this kind of context).
  [[nodiscard]] thread_extension* extension(std::size_t slot) const noexcept {
    return layers_[slot].get();
  }
  /// Attached contexts: makes this context's state of the layer in `slot` now, or anew
  /// (replacing the one it has), whatever the layer's scope: a layer of workers' scope that an
  /// attached thread asked for (the offload engine's one-sided calls need invoke's channels, made
  /// anew for each run). Returns it (null when no layer is registered there). Owner thread only,
  /// outside any call the old state is running.
  thread_extension* renew_layer(std::size_t slot);
  /// Attached contexts: drops this context's state of the layer in `slot` (the thread that
  /// asked for it is done with it, so the slot's next holder does not find it). Owner thread
  /// only, outside any call the state is running.
  void drop_layer(std::size_t slot) noexcept;
  /// Asks every layer to publish what it batched (aggregators), so that it will be received:
  /// the upper layers first, so that what they hand down (a container's cached updates) is in
  /// the lower layers' batches before those publish.
  void flush_layers() {
    for (std::uint8_t i = layer_count_; i > 0; --i) in_order_[i - 1]->flush(*this);
  }
  [[nodiscard]] local_thread_state& state() noexcept { return state_; }
  /// runtime::run epoch this context belongs to (1 for the first run).
  [[nodiscard]] std::uint64_t run_epoch() const noexcept { return run_epoch_; }

  static void back_off(unsigned& idle) noexcept;
  /// Runs the calls of `pending` in order on behalf of `self` until it is empty (nested polls
  /// continue the same queue); releases their payloads. Returns the count run.
  static std::size_t run_calls(thread_context& self, std::deque<call_queue::item>& pending);
  /// run_calls for a call that expects a reply: runs it and sends the reply (or its failure).
  /// Out of the plain calls' way. The item is released by the caller (or here, if it throws).
  static void run_returning(thread_context& self, call_queue::item& item,
                            const function_entry& entry);
  /// The AM handler's shortcut, for a call to the very thread whose poll() is progressing the
  /// process worker (runtime::serve on this thread): appends it to the calls this poll runs next,
  /// without the destination's locked queue. Only when that queue is empty, so a sender's calls
  /// that another thread's progress queued earlier still run first (handlers are serialized by
  /// the process worker's progress flag; the queue's only consumer is this thread).
  void accept_from_handler(const call_queue::item& call) { pending_.push_back(call); }
  /// runtime::attach: the OS thread now owning this context names it in its log lines.
  void adopt_owner_thread() noexcept;
  /// runtime::detach: the OS thread lets go; the exceptions nested polls kept and nobody threw
  /// are dropped (returned, for the log line) rather than thrown at the slot's next holder.
  std::size_t release_owner_thread() noexcept;
  /// @endcond

 private:
  template <class F>
  static std::span<const std::byte> as_bytes_of(const F& f) noexcept {
    return {reinterpret_cast<const std::byte*>(&f), sizeof(F)};
  }
  /// call_return and service_call_return: open a reply slot, send, close it if sending failed.
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
  /// The process of a thread id or service_of(process); -1 for ids naming nothing.
  [[nodiscard]] int process_of(std::uint32_t dest) const noexcept;
  template <class R>
  std::pair<std::uint32_t, std::uint32_t> open_slot(return_slot<R>& slot, std::uint32_t dest) {
    // A slot reused while a call is still pending would leave its first cell or entry open.
    slot.abandon_if_pending();
    slot.state_.store(0, std::memory_order_relaxed);
    slot.cells_ = nullptr;
    const int process = process_of(dest);
    std::pair<std::uint32_t, std::uint32_t> opened;
    if (auto cell = cells_.open(sizeof(R), process)) {
      opened = *cell;
      slot.cells_ = &cells_;
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
  /// Sends a call_return's outcome to `caller`: the value (done), or a failure carrying
  /// `value` as its details (may be empty).
  void send_reply(thread_id caller, function_id function, std::uint32_t slot,
                  std::uint32_t generation, std::span<const std::byte> value, outcome result);
  /// After a call that expected a reply ran (or threw, `threw`): sends what its reply channel
  /// says (nothing when deferred).
  void finish_reply(thread_id caller, function_id function, const reply_channel& reply,
                    std::span<const std::byte> value);
  /// A process died since this thread last looked (runtime::failure_epoch): tells the layer
  /// above (its messengers fail what they hold for it).
  void notice_peer_failures();

  runtime& rt_;
  thread_id id_;
  local_thread_state& state_;
  reply_cell_table& cells_;  ///< state_.cells (this header sees local_thread_state incomplete)
  transfer::ucx_worker* worker_;  ///< state_.worker
  std::vector<std::unique_ptr<transfer::ucx_endpoint>>& endpoints_;  ///< state_.endpoints
  std::vector<call_queue::item> batch_;    ///< poll(): what take_all moved out (transient)
  std::deque<call_queue::item> pending_;   ///< received, not yet run (shared by nested polls)
  unsigned nesting_ = 0;                   ///< live deferring_scopes (calls running, waits)
  std::deque<std::exception_ptr> deferred_;  ///< kept by nested polls, thrown by outer ones
  [[noreturn]] void throw_kept();  ///< throws (and forgets) the oldest of deferred_
  deadline_clock::time_point scope_deadline_ = no_deadline;  ///< innermost deadline_scope's
  std::uint64_t failures_seen_ = 0;  ///< runtime::failure_epoch() this thread acted on
  std::size_t poll_once();
  std::uint64_t run_epoch_ = 0;
  /// The layers' per-thread state by slot, and the same in slot order for poll and flush.
  /// Destroyed first (they hold rkeys and endpoints of worker_).
  std::array<std::unique_ptr<thread_extension>, layer_slot::count> layers_;
  std::array<thread_extension*, layer_slot::count> in_order_{};
  std::uint8_t layer_count_ = 0;
  void make_layers();
  void order_layers() noexcept;  // in_order_ and layer_count_ from layers_
};

/// While alive, the thread that created it does not touch its context (it computes), and the
/// process's helper threads (SERIEMA_HELPER_THREADS) poll it instead: they run the calls sent to
/// it (in FIFO order per sender, on the helper's OS thread, so shared data needs the
/// application's synchronization), and move its queued retry_async calls on. The destructor
/// waits for a helper's poll in progress, then hands the context back. Throws seriema::error
/// when the process has no helper threads.
class helped_section {
 public:
  /// Hands `self` to the helper threads; throws seriema::error when there are none.
  explicit helped_section(thread_context& self);
  ~helped_section();
  helped_section(const helped_section&) = delete;
  helped_section& operator=(const helped_section&) = delete;

 private:
  local_thread_state& state_;
};

}  // namespace seriema::fabric

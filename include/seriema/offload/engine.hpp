// Offloaded communication (seed 003): any thread of a process, a worker or not, attached or
// not, a fiber or a plain std::thread, hands calls, puts, gets and atomics to a few executor
// threads through lock-free queues; executors post them in batches on their own endpoints and
// end each request's future with one of the usual outcomes.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <seriema/base/error.hpp>
#include <seriema/fabric/outcome.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/invoke/errors.hpp>
#include <seriema/invoke/future.hpp>
#include <seriema/invoke/invoke.hpp>
#include <seriema/invoke/synchronizer.hpp>
#include <seriema/offload/detail/request.hpp>
#include <seriema/offload/detail/settings.hpp>
#include <seriema/transfer/remote_memory.hpp>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace seriema::fabric {
class runtime;
}

namespace seriema::offload {

/// How requests reach the transport (the seed's three methods and its authors' later one).
enum class method : std::uint8_t {
  direct,    ///< the requester posts itself on a lane's endpoints under the lane's lock; the
             ///< executor thread only completes (the seed's baseline, "direct injection")
  spin,      ///< executors spin on their queues ("static offloading")
  sleep,     ///< executors sleep when idle; a requester that saw the sleep bit wakes one
             ///< ("dynamic offloading"; the default)
  delegate,  ///< no executor threads: whichever requester holds a lane's lock runs the queued
             ///< requests of the others (queue delegation; needs no spare core)
};
const char* to_string(method m) noexcept;  ///< "direct", "spin", "sleep", "delegate"
/// The method named `text` (to_string's names); throws seriema::config_error otherwise.
method parse_method(std::string_view text);

/// What became of a request when it was made. Anything but ok means nothing was queued and the
/// future ended not_executed at once.
enum class request_status : std::uint8_t {
  ok,
  full,             ///< every queue entry or request record was in use (and the wait for one,
                    ///< engine_options::wait_when_full, passed)
  out_of_range,     ///< the bytes are not inside the region, or an atomic's word is not aligned
  bad_destination,  ///< no such thread, or a region this engine did not hand out
  too_large,        ///< the closure does not fit a queue entry (closure_capacity bytes)
  stopped,          ///< the engine is being destroyed
};
const char* to_string(request_status s) noexcept;  ///< "ok", "queue full", ...

/// Settings of one engine.
struct engine_options {
  unsigned executors = 1;             ///< lanes: executor threads, each with its own context
  method mode = method::sleep;        ///< see method
  std::size_t queue_entries = 1024;   ///< per lane; a power of two
  std::size_t max_requests = 65536;   ///< requests pending at once, engine-wide
  std::size_t flush_size = 64;        ///< requests an executor posts before asking completion
  /// Calls and call_buffers of one batch to one thread travel as one message of at most this
  /// many bytes (their closures and buffers, 16 bytes of header each; capped at the runtime's
  /// SERIEMA_SEND_LIMIT less 64); there each runs as if it had come alone, in their order.
  /// 0: a message per call. (Direct injection never bundles: a requester posts its own call.)
  std::size_t bundle_bytes = 4096;
  unsigned idle_polls_before_sleep = 256;  ///< sleep: empty polls before an executor sleeps
  /// How long a request waits for a queue entry or record when all are in use, then it is
  /// refused with request_status::full (0: refused at once). Waiting requesters of a
  /// delegating engine drive it meanwhile.
  std::chrono::microseconds wait_when_full{std::chrono::seconds(1)};
  /// The longest an executor waits for the transport to take one send-based call (a socket or
  /// FIFO that is full, or still connecting). A call not taken by then stays queued at the
  /// executor, behind it every later call to that process (their order kept), and is tried
  /// again while the executor serves the other destinations (a stalled peer holds up only its
  /// own calls; its requests end by their waits' deadlines, or not_executed once it is dead).
  std::chrono::microseconds transport_wait{1000};
  /// The longest a future's get() waits (wait() takes its own deadline).
  std::chrono::milliseconds get_timeout{std::chrono::seconds(60)};

  /// The defaults, with executors from SERIEMA_OFFLOAD_EXECUTORS and mode from
  /// SERIEMA_OFFLOAD_METHOD (what engine(rt) uses). Throws config_error naming the setting.
  static engine_options from_environment();
};

/// What an engine did so far (relaxed counters; any thread).
struct engine_counters {
  std::uint64_t requests = 0;          ///< requests queued (or, direct, posted)
  std::uint64_t refused_full = 0;      ///< refused with request_status::full
  std::uint64_t batches = 0;           ///< executor turns that posted at least one request
  std::uint64_t posted = 0;            ///< requests posted by executors (or requesters, direct)
  std::uint64_t completions_asked = 0; ///< flushes asked for (one per destination per batch)
  std::uint64_t sleeps = 0;            ///< times an executor went to sleep
  std::uint64_t wakes = 0;             ///< times a requester woke a sleeping executor
  std::uint64_t delegated = 0;         ///< requests run by another requester (delegate)
  std::uint64_t executor_errors = 0;   ///< exceptions caught in executors (logged)
  std::uint64_t endpoints = 0;         ///< endpoints the lanes opened (at most lanes x processes)
  std::uint64_t coalesced = 0;         ///< puts and gets that joined another's operation
  std::uint64_t gathered = 0;  ///< runs of gets carried by one call (tcp: gets by messages)
  std::uint64_t bundles = 0;   ///< messages that carried two calls or more
  std::uint64_t bundled = 0;   ///< calls that travelled in those messages
  std::uint64_t one_sided = 0; ///< calls written into a ring (channel write, trad, ovfl)
};

/// A region of remote registered memory the engine may reach: a remote_memory_locator that
/// engine::region() checked and numbered. Trivially copyable; valid with the engine that made it.
struct region {
  std::uint32_t index = ~std::uint32_t{0};  ///< in the engine's table
  int process = -1;                         ///< the owner
  std::uint64_t size = 0;                   ///< bytes
};

class engine;

/// @cond INTERNAL
namespace detail {
/// One lane: a context (its UCX worker and endpoints), a queue, a lock and the executor's
/// in-flight lists (src/offload/lane.cpp).
class lane;
fabric::thread_context& context_of(lane& l) noexcept;
/// engine_options::transport_wait of the lane's engine.
std::chrono::microseconds transport_wait(const lane& l) noexcept;
/// The executor watches `r` (its check() ends it) until it ended.
void watch(lane& l, request_record& r) noexcept;
/// Ends `r` with `how` (and `failure`), and lets the engine's hold go.
void finish(lane& l, request_record& r, fabric::outcome how,
            std::exception_ptr failure = nullptr) noexcept;

/// A queued request. `execute` runs on the lane holder's thread with the lane's context; it
/// returns false when the transport did not take a send-based call (it is tried again).
struct command {
  static constexpr std::size_t closure_capacity = 96;
  bool (*execute)(lane&, command&) = nullptr;
  request_record* record = nullptr;
  std::uint32_t target = 0;  ///< thread id, or region index
  std::uint32_t kind = 0;    ///< transfers: which operation
  bool sends = false;        ///< a send-based call (kept in order behind one not taken yet)
  /// One-sided: counted as work of the run in progress (runtime::run does not end) until the
  /// lane wrote it or ended it (engine::submit_one_sided, lane::release_run_hold).
  bool holds_run = false;
  /// call / call_buffer: the closure's registered function (0: not one a bundle may carry)
  fabric::function_id function = 0;
  std::uint32_t closure_size = 0;  ///< bytes of `closure` in use
  std::uint64_t offset = 0;
  std::uint64_t operand = 0;
  std::uint64_t compare = 0;
  std::byte* local = nullptr;
  std::size_t size = 0;
  alignas(16) std::byte closure[closure_capacity]{};
};

/// The closure stored in c (trivially copyable, so bytes are enough).
template <class F>
struct stored_closure {
  alignas(F) std::byte bytes[sizeof(F)];
  explicit stored_closure(const command& c) noexcept { std::memcpy(bytes, c.closure, sizeof(F)); }
  F& get() noexcept { return *std::launder(reinterpret_cast<F*>(bytes)); }
};

/// Ends a send-based call's record as `status` says; false when the transport did not take it
/// within transport_wait (the caller tries it again later).
bool end_send(lane& l, command& c, fabric::call_status status) noexcept;

template <class F>
bool execute_call(lane& l, command& c) {
  stored_closure<F> f(c);
  fabric::thread_context::deadline_scope bounded(context_of(l), transport_wait(l));
  return end_send(l, c, context_of(l).call(c.target, f.get()));
}

template <class F>
bool execute_call_buffer(lane& l, command& c) {
  stored_closure<F> f(c);
  const auto buffer = std::span<const std::byte>(c.local, c.size);
  fabric::thread_context::deadline_scope bounded(context_of(l), transport_wait(l));
  return end_send(l, c, context_of(l).call_buffer(c.target, f.get(), buffer));
}

/// One-sided calls (invoke::channel write, trad, ovfl): readies the lane's channels for the
/// run in progress and notes that this batch needs its publish and flush; false, having ended
/// `c`'s record not_executed, when no run is in progress in this process (no receiver exists).
bool open_channels(lane& l, command& c) noexcept;
/// engine_counters::one_sided += 1.
void count_one_sided(lane& l) noexcept;
/// end_send for a one-sided call, counting it (engine_counters::one_sided) when it was written.
bool end_one_sided(lane& l, command& c, fabric::call_status status) noexcept;

/// A one-sided call or call_buffer: written into the destination's ring by the executor (a ring
/// that is full waits for room, at most transport_wait, and the call is tried again later).
template <invoke::channel C, class F, bool WithBuffer>
bool execute_one_sided(lane& l, command& c) {
  if (!open_channels(l, c)) return true;
  stored_closure<F> f(c);
  fabric::thread_context& ctx = context_of(l);
  fabric::thread_context::deadline_scope bounded(ctx, transport_wait(l));
  if constexpr (!WithBuffer) {
    return end_one_sided(l, c, invoke::call<C, invoke::policy::retry>(ctx, c.target, f.get()));
  } else {
    const auto buffer = std::span<const std::byte>(c.local, c.size);
    return end_one_sided(
        l, c, invoke::call_buffer<C, invoke::policy::retry>(ctx, c.target, f.get(), buffer));
  }
}

/// A consumption-notified call: its synchronizer (the lane context's, counting this one call)
/// lives in the record's value storage, which such a call does not use otherwise.
inline invoke::synchronizer& synchronizer_of(request_record& r) noexcept {
  static_assert(sizeof(invoke::synchronizer) <= request_record::value_capacity &&
                alignof(invoke::synchronizer) <= 16);
  return *std::launder(reinterpret_cast<invoke::synchronizer*>(r.value));
}
/// Ends the record once the destination ran the call (done) or its process died first
/// (may_have_executed), destroying the synchronizer; false while it is pending.
bool check_consumed(request_record& r) noexcept;
/// The requester stopped waiting, or the engine ends: the synchronizer goes (a notice that
/// still comes is absorbed by its word) and the next check ends the record cancelled.
void cancel_consumed(request_record& r) noexcept;
/// The run the call was made in ended, hence the call ran (a run ends once every call sent in
/// it was consumed): ends the record done and lets its synchronizer go while its channels live.
void settle_consumed(request_record& r) noexcept;
/// Makes the lane's synchronizer for `c`; false (the call is tried again later) when the
/// context's feedback area has no free word.
bool open_synchronizer(lane& l, command& c) noexcept;

/// A call whose future ends when the destination ran it: the call names a synchronizer of the
/// lane's context (invoke::notify_on::consume), which the executor watches.
template <invoke::channel C, class F, bool WithBuffer>
bool execute_consumed(lane& l, command& c) {
  if (!open_channels(l, c)) return true;  // the synchronizer's word is in the channels' area
  if (!open_synchronizer(l, c)) return false;
  stored_closure<F> f(c);
  fabric::thread_context& ctx = context_of(l);
  invoke::synchronizer& sync = synchronizer_of(*c.record);
  fabric::call_status status;
  {
    fabric::thread_context::deadline_scope bounded(ctx, transport_wait(l));
    if constexpr (!WithBuffer) {
      status = invoke::call<C, invoke::policy::retry>(ctx, c.target, f.get(), sync);
    } else {
      const auto buffer = std::span<const std::byte>(c.local, c.size);
      status = invoke::call_buffer<C, invoke::policy::retry>(ctx, c.target, f.get(), buffer,
                                                             sync);
    }
  }
  if (!fabric::reached_transport(status)) {
    sync.decrement();  // no notice will come for it: the word goes back free
    sync.~synchronizer();
    return end_send(l, c, status);
  }
  if constexpr (C != invoke::channel::send) count_one_sided(l);
  c.record->check = &check_consumed;
  c.record->cancel = &cancel_consumed;
  watch(l, *c.record);
  return true;
}

/// Reads the executor's future of a call_return; ends the record once it ended (returns
/// whether it did). The future is destroyed here, on the lane holder's thread.
template <class R>
bool check_call_return(request_record& r) noexcept {
  auto& pending = *std::launder(reinterpret_cast<invoke::future<R>*>(r.pending_future));
  std::optional<invoke::call_result<R>> result;
  std::exception_ptr failure;
  try {
    if (!pending.ready()) return false;
    result.emplace(pending.try_get());
  } catch (...) {
    failure = std::current_exception();
  }
  pending.~future();
  if (!r.claim()) return true;  // the requester's wait ended it first
  if (result && result->has_value()) {
    if constexpr (!std::is_void_v<R>) {
      try {
        new (r.value) R(std::move(**result));
      } catch (...) {  // R's move (or copy) threw: the value is lost, not the process
        r.failure = std::current_exception();
        r.publish(fabric::outcome::not_executed);
        return true;
      }
      r.destroy_value = [](request_record& done) noexcept {
        std::launder(reinterpret_cast<R*>(done.value))->~R();
      };
    }
    r.publish(fabric::outcome::done);
  } else if (result) {
    r.failure = result->error();
    r.publish(result->result());
  } else {
    r.failure = failure;
    r.publish(fabric::outcome::not_executed);
  }
  return true;
}

/// Cancels the executor's future of a call_return (engine shutdown).
template <class R>
void cancel_call_return(request_record& r) noexcept {
  auto& pending = *std::launder(reinterpret_cast<invoke::future<R>*>(r.pending_future));
  pending.cancel();
}

template <class F, invoke::channel C = invoke::channel::send>
bool execute_call_return(lane& l, command& c) {
  if (C != invoke::channel::send && !open_channels(l, c)) return true;
  stored_closure<F> f(c);
  fabric::thread_context::deadline_scope bounded(context_of(l), transport_wait(l));
  auto pending = invoke::call_return<C, invoke::policy::retry>(context_of(l), c.target, f.get());
  using R = typename decltype(pending)::value_type;
  using T = std::conditional_t<std::is_same_v<decltype(pending), invoke::future<void>>, void, R>;
  static_assert(sizeof(pending) <= request_record::future_capacity);
  if (pending.status() == fabric::call_status::deadline_exceeded) {
    (void)pending.result();  // seen (not an unobserved failure): the call is tried again
    return false;
  }
  if constexpr (C != invoke::channel::send) {
    if (fabric::reached_transport(pending.status())) count_one_sided(l);
  }
  new (c.record->pending_future) invoke::future<T>(std::move(pending));
  c.record->check = &check_call_return<T>;
  c.record->cancel = &cancel_call_return<T>;
  watch(l, *c.record);
  return true;
}

/// A waiting future's turn at its lane (delegating engines; nothing otherwise or once the
/// engine is being destroyed).
void drive_lane(engine_core& core, std::uint16_t lane) noexcept;
/// What a wait does between two looks: spins, then yields (to the thread's fiber scheduler
/// when one set the hook, else the OS), then sleeps briefly.
void wait_step(unsigned& idle) noexcept;
}  // namespace detail
/// @endcond

/// While alive on a thread, the waits of offload futures on it yield to `yield` (a user-level
/// thread scheduler's yield: boost::this_fiber::yield) instead of the OS, so a waiting fiber lets
/// the others of its thread run. seriema/offload/fibers.hpp has the Boost.Fiber one.
class wait_hook_scope {
 public:
  /// Waits on this thread call `yield` between looks while the scope lives.
  explicit wait_hook_scope(void (*yield)()) noexcept;
  ~wait_hook_scope();  ///< The previous hook (or none) again.
  wait_hook_scope(const wait_hook_scope&) = delete;
  wait_hook_scope& operator=(const wait_hook_scope&) = delete;

 private:
  void (*saved_)();
};

/// The end of one request: a value (T; void for puts, gets and plain calls; the old word for
/// atomics; the function's result for call_return) or an outcome that says why not. Made by an
/// engine; waited for by any one thread (the future is not shared), which spins, yields and
/// sleeps meanwhile (a fiber yields to its scheduler: wait_hook_scope). Move-only. Dropping a
/// pending future lets the request run to its end unobserved (fire and forget). A future must
/// not outlive its engine's destruction unless the engine said so (see ~engine).
template <class T>
class [[nodiscard]] future {
 public:
  future() noexcept = default;  ///< No request (result() says not_executed).
  /// Takes over `other`'s request (`other` holds none afterwards).
  future(future&& other) noexcept
      : core_(other.core_), record_(std::exchange(other.record_, nullptr)),
        status_(other.status_) {}
  /// Lets go of this future's request (as the destructor does), then takes over `other`'s.
  future& operator=(future&& other) noexcept {
    if (this != &other) {
      reset();
      core_ = other.core_;
      record_ = std::exchange(other.record_, nullptr);
      status_ = other.status_;
    }
    return *this;
  }
  future(const future&) = delete;
  future& operator=(const future&) = delete;
  ~future() { reset(); }  ///< Lets go of the request (a pending one runs to its end).

  /// What the request's submission returned (anything but ok: it was never queued).
  [[nodiscard]] request_status status() const noexcept { return status_; }
  /// Whether it ended, whichever way (never waits).
  [[nodiscard]] bool ready() const noexcept { return result() != fabric::outcome::pending; }
  /// A delegating engine's turn: runs the queued requests of this request's lane when its lock
  /// is free (what wait() does between looks). Nothing for the other methods.
  void progress() noexcept {
    if (record_ != nullptr && record_->result() == fabric::outcome::pending) {
      detail::drive_lane(*core_, record_->lane);
    }
  }
  /// How it ended, or pending. A refused request ended not_executed.
  [[nodiscard]] fabric::outcome result() const noexcept {
    if (record_ == nullptr) return fabric::outcome::not_executed;
    return record_->result();
  }
  /// Waits until it ended or `deadline` passed (then it ends deadline_exceeded: a request the
  /// executor has not taken yet is dropped; one already posted may still be carried out, and
  /// a put or get still uses its buffer until engine::quiet() says it ended). Returns the
  /// outcome.
  fabric::outcome wait(fabric::deadline_clock::time_point deadline);
  /// wait() with a deadline `timeout` from now.
  template <class Rep, class Period>
  fabric::outcome wait(std::chrono::duration<Rep, Period> timeout) {
    return wait(fabric::deadline_clock::now() +
                std::chrono::duration_cast<fabric::deadline_clock::duration>(timeout));
  }
  /// Waits (at most engine_options::get_timeout) and gives the value, or throws: the callee's
  /// exception for a call_return that threw (as invoke::future::get), the executor's exception
  /// that refused the request, or invoke's not_executed_error, may_have_executed_error,
  /// deadline_exceeded_error, cancelled_error. The future is empty afterwards.
  T get();
  /// "put to rank 1: may have executed" and the like, for messages.
  [[nodiscard]] std::string describe() const;

 private:
  friend class engine;
  future(detail::engine_core* core, detail::request_record* r, request_status s) noexcept
      : core_(core), record_(r), status_(s) {}
  void reset() noexcept;
  detail::engine_core* core_ = nullptr;
  detail::request_record* record_ = nullptr;
  request_status status_ = request_status::ok;
};

/// The offload engine of one process (any number may exist; each holds `executors` of the
/// process's attach slots, SERIEMA_ATTACH_SLOTS). Every member may be called by any thread.
/// Requests of one requester thread go through one lane (chosen from the thread's identity),
/// so its calls to a thread run in the order it made them (calls to two threads of a process
/// may leave in another order when bundled; a call_return follows every earlier call to its
/// process); transfers complete in any order.
///
/// Lifetime: make it after the runtime (inside or outside run(); destinations run calls only
/// inside run()) and destroy it before finalize(). Destroying it ends queued requests
/// cancelled, lets in-flight ones end (at most 2 s), then cancels the rest.
class engine {
 public:
  /// Starts the executors (attaching their slots). Throws seriema::config_error for bad
  /// options, seriema::error when the process has too few attach slots.
  engine(fabric::runtime& rt, engine_options options);
  /// engine(rt, engine_options::from_environment()): SERIEMA_OFFLOAD_EXECUTORS and
  /// SERIEMA_OFFLOAD_METHOD decide.
  explicit engine(fabric::runtime& rt) : engine(rt, engine_options::from_environment()) {}
  ~engine();
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  /// Numbers `locator` for put/get/atomics. Throws seriema::error for an invalid locator or one
  /// of a rank the job does not have, and when the table (1024 regions) is full. Control path.
  region add_region(const transfer::remote_memory_locator& locator);

  /// Writes `bytes` to target[offset, offset + bytes.size()). `bytes` stays untouched until
  /// the future ended.
  future<void> put(std::span<const std::byte> bytes, region target, std::uint64_t offset);
  /// Reads source[offset, offset + into.size()) into `into` (there once the future is done).
  future<void> get(std::span<std::byte> into, region source, std::uint64_t offset);
  /// 64-bit atomics on the aligned word at `offset`; each gives the word before.
  future<std::uint64_t> fetch_add(region target, std::uint64_t offset, std::uint64_t value);
  /// Stores `desired` where the word equals `expected`; gives the word before.
  future<std::uint64_t> compare_swap(region target, std::uint64_t offset,
                                     std::uint64_t expected, std::uint64_t desired);
  /// Stores `value`; gives the word before.
  future<std::uint64_t> swap(region target, std::uint64_t offset, std::uint64_t value);

  /// Call: `dest` runs f() (or f(ctx)) when it polls. The future is done once the call was
  /// handed to the transport. Send-based (C = channel::send, the default): calls of one batch
  /// to one thread may share a message (engine_options::bundle_bytes); each still runs as a
  /// call that came alone (in order, an exception leaves the destination's poll that ran it, a
  /// wait inside runs the next). One-sided (C = write, trad, ovfl): the executor writes the
  /// call into the destination's ring as a worker's call on that channel would travel (its
  /// aggregation published at the end of each batch); `dest` must be a worker and the call made
  /// inside runtime::run() (else the future ends not_executed, saying so).
  template <invoke::channel C = invoke::channel::send, class F>
  future<void> call(fabric::thread_id dest, F f) {
    if constexpr (C == invoke::channel::send) {
      return submit_closure(dest, f, &detail::execute_call<F>, {},
                            fabric::function_wrapper<F, fabric::plain_shape>::id);
    } else {
      return submit_one_sided(dest, f, &detail::execute_one_sided<C, F, false>, {});
    }
  }
  /// As call, with a copy of `buffer` (which stays untouched until the future ended).
  template <invoke::channel C = invoke::channel::send, class F>
  future<void> call_buffer(fabric::thread_id dest, F f, std::span<const std::byte> buffer) {
    if constexpr (C == invoke::channel::send) {
      return submit_closure(dest, f, &detail::execute_call_buffer<F>, buffer,
                            fabric::function_wrapper<F, fabric::buffer_shape>::id);
    } else {
      return submit_one_sided(dest, f, &detail::execute_one_sided<C, F, true>, buffer);
    }
  }
  /// As call, and the future ends only once `dest` ran the call (done), or may_have_executed
  /// when dest's process died first: the synchronizer-notified call
  /// (invoke::notify_on::consume) for a thread that has no synchronizer of its own, one
  /// synchronizer word of the executor per call in flight. On any channel; inside run().
  template <invoke::channel C = invoke::channel::send, class F>
  future<void> call_consumed(fabric::thread_id dest, F f) {
    return submit_one_sided(dest, f, &detail::execute_consumed<C, F, false>, {});
  }
  /// As call_consumed, with a copy of `buffer` (untouched until the future ended).
  template <invoke::channel C = invoke::channel::send, class F>
  future<void> call_buffer_consumed(fabric::thread_id dest, F f,
                                    std::span<const std::byte> buffer) {
    return submit_one_sided(dest, f, &detail::execute_consumed<C, F, true>, buffer);
  }
  /// `dest` runs f(); the future gets what it returns (a value of up to 64 bytes, any type
  /// cereal serializes) or its exception. The call goes on channel C (as for call); the reply
  /// comes back to the executor by fabric's reply path.
  template <invoke::channel C = invoke::channel::send, class F>
  auto call_return(fabric::thread_id dest, F f) {
    using R = decltype(invoke::call_return<invoke::channel::send>(
        std::declval<fabric::thread_context&>(), dest, f));
    using T = std::conditional_t<std::is_same_v<R, invoke::future<void>>, void,
                                 typename R::value_type>;
    if constexpr (!std::is_void_v<T>) {
      static_assert(sizeof(T) <= detail::request_record::value_capacity &&
                        alignof(T) <= 16,
                    "offload::engine::call_return: the value must fit 64 bytes");
    }
    auto made = C == invoke::channel::send
                    ? submit_closure(dest, f, &detail::execute_call_return<F, C>, {}, 0)
                    : submit_one_sided(dest, f, &detail::execute_call_return<F, C>, {});
    return future<T>(made.core_, std::exchange(made.record_, nullptr), made.status_);
  }

  /// Waits until every request made before it ended, or `deadline` (returns false then).
  /// Delegating engines are driven by this thread meanwhile.
  bool quiet(fabric::deadline_clock::time_point deadline);
  /// Delegating engines: runs what is queued on every lane whose lock is free. Nothing else.
  void progress();

  /// What the engine did so far (relaxed reads; any thread).
  [[nodiscard]] engine_counters counters() const noexcept;
  /// The options it was made with.
  [[nodiscard]] const engine_options& options() const noexcept { return options_; }
  /// The runtime it belongs to.
  [[nodiscard]] fabric::runtime& rt() const noexcept { return rt_; }
  /// The job-wide ids of the lanes' contexts (attached ids). Not destinations for application
  /// calls: a lane polls its context only while it has work (an idle executor sleeps), so a
  /// call sent there may wait until the lane's next request; one that throws is counted and
  /// logged as an executor error.
  [[nodiscard]] std::vector<fabric::thread_id> lane_ids() const;
  /// CPU time each executor thread used so far, in seconds (zeros for delegate: no threads).
  [[nodiscard]] std::vector<double> executor_cpu_seconds() const;
  /// Requests pending engine-wide (records in use, futures still held included).
  [[nodiscard]] std::size_t pending() const noexcept;

  /// @cond INTERNAL
  struct state;
  [[nodiscard]] detail::engine_core& core() const noexcept { return *core_; }
  /// Drives lane `lane` when this engine delegates (a waiting future's turn).
  void drive(std::uint16_t lane) noexcept;
  /// @endcond

 private:
  template <class T>
  friend class future;
  using executor_fn = bool (*)(detail::lane&, detail::command&);

  template <class F>
  future<void> submit_closure(fabric::thread_id dest, const F& f, executor_fn execute,
                              std::span<const std::byte> buffer, fabric::function_id function,
                              bool holds_run = false) {
    fabric::check_remote_closure<F>();
    if constexpr (sizeof(F) > detail::command::closure_capacity) {
      return refuse(request_status::too_large);
    } else {
      detail::command c;
      c.execute = execute;
      c.sends = true;
      c.holds_run = holds_run;
      c.target = dest;
      c.local = const_cast<std::byte*>(buffer.data());
      c.size = buffer.size();
      c.function = function;
      c.closure_size = sizeof(F);
      std::memcpy(c.closure, &f, sizeof(F));
      return submit(c, dest_process(dest));
    }
  }
  /// One-sided and consumption-notified calls: to worker threads only (attached threads have no
  /// ring to write into, nor channels to count a consumption with).
  template <class F>
  future<void> submit_one_sided(fabric::thread_id dest, const F& f, executor_fn execute,
                                std::span<const std::byte> buffer) {
    if (!is_worker(dest)) return refuse(request_status::bad_destination);
    // Until the lane wrote it, the request is work the run waits for: a run that ended with it
    // still queued or parked would free the rings it is to be written into.
    hold_run();
    auto made = submit_closure(dest, f, execute, buffer, 0, true);  // never bundled
    if (made.status() != request_status::ok) release_run();
    return made;
  }
  void hold_run() noexcept;     ///< runtime counters: deferred_started += 1
  void release_run() noexcept;  ///< deferred_finished += 1
  future<void> refuse(request_status why) noexcept;
  [[nodiscard]] bool is_worker(fabric::thread_id dest) const noexcept;
  /// The lane the calling thread's requests to this engine go through.
  std::uint16_t lane_of_this_thread() noexcept;
  /// The same request as a future of the old word (atomics).
  static future<std::uint64_t> word_future(future<void>&& made) noexcept;
  /// The process of thread `dest`, or -1 when no such thread exists.
  [[nodiscard]] int dest_process(fabric::thread_id dest) const noexcept;
  /// Checks, takes a record and queues `c` (or, direct, posts it).
  future<void> submit(detail::command& c, int process);
  future<void> submit_transfer(std::uint32_t kind, region r, std::uint64_t offset,
                               std::byte* local, std::size_t size, std::uint64_t operand,
                               std::uint64_t compare);

  fabric::runtime& rt_;
  engine_options options_;
  std::unique_ptr<state> state_;
  detail::engine_core* core_;  ///< left allocated when futures outlive the engine
};

template <class T>
void future<T>::reset() noexcept {
  if (record_ != nullptr && core_->pool.release(*std::exchange(record_, nullptr))) delete core_;
}

template <class T>
fabric::outcome future<T>::wait(fabric::deadline_clock::time_point deadline) {
  if (record_ == nullptr) return fabric::outcome::not_executed;
  unsigned idle = 0;
  while (record_->result() == fabric::outcome::pending) {
    detail::drive_lane(*core_, record_->lane);
    if (record_->result() != fabric::outcome::pending) break;
    // (An executor that is writing the end makes end() fail: the loop sees it published.)
    if (idle > 64 && fabric::deadline_clock::now() >= deadline &&
        record_->end(fabric::outcome::deadline_exceeded)) {
      break;
    }
    detail::wait_step(idle);
  }
  return record_->result();
}

/// @cond INTERNAL
namespace detail {
/// The exception get() throws for a request that ended `how` (not done, not threw with an
/// exception of its own).
std::exception_ptr failure_for(fabric::outcome how, request_status status,
                               const request_record* r);
std::string describe_request(fabric::outcome how, request_status status,
                             const request_record* r);
}  // namespace detail
/// @endcond

template <class T>
T future<T>::get() {
  const fabric::outcome how =
      record_ == nullptr
          ? fabric::outcome::not_executed
          : wait(fabric::deadline_clock::now() + core_->get_timeout);
  if (how == fabric::outcome::done) {
    if constexpr (std::is_void_v<T>) {
      reset();
      return;
    } else {
      T value = std::move(*std::launder(reinterpret_cast<T*>(record_->value)));
      reset();
      return value;
    }
  }
  std::exception_ptr failure = record_ != nullptr && record_->failure != nullptr
                                   ? record_->failure
                                   : detail::failure_for(how, status_, record_);
  reset();
  std::rethrow_exception(failure);
}

template <class T>
std::string future<T>::describe() const {
  return detail::describe_request(result(), status_, record_);
}

}  // namespace seriema::offload

// future<T>: what a call_return without a slot gives back. Move-only; its state is a record in
// the calling thread's pool (no allocation once warm); it ends exactly once with a
// fabric::outcome, and gives the value, the callee's exception, or a typed error naming the
// outcome. Continuations (then, when_all, when_any, co_await) run on the owner thread inside its
// polls, never on another thread. docs/futures.md says what runs where and when.
#pragma once

#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <seriema/fabric/outcome.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/invoke/detail/future_table.hpp>
#include <seriema/invoke/errors.hpp>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace seriema::invoke {

using fabric::call_status;
using fabric::outcome;
using fabric::thread_context;
using fabric::thread_id;

template <class T>
class future;
template <class T>
class task;

namespace detail {

/// What a future<T> holds: T, or unit for future<void>.
template <class T>
using value_of = std::conditional_t<std::is_void_v<T>, unit, T>;

template <class T>
struct is_future : std::false_type {};
template <class T>
struct is_future<future<T>> : std::true_type {};
template <class T>
struct is_task : std::false_type {};
template <class T>
struct is_task<task<T>> : std::true_type {};

/// T itself, or V for a future<V> / task<V> (what a caller gets from a function returning one).
template <class T>
struct unwrapped {
  using type = T;
};
template <class T>
struct unwrapped<future<T>> {
  using type = T;
};
template <class T>
struct unwrapped<task<T>> {
  using type = T;
};
template <class T>
using unwrapped_t = typename unwrapped<T>::type;

/// Constructs a V in r (in its box when it fits, else on the heap).
template <class V, class... A>
void emplace_value(future_record& r, A&&... args) {
  r.drop_value();
  r.cold = true;  // `destroy` is after the box
  if constexpr (sizeof(V) <= future_record::box_size && alignof(V) <= 16) {
    r.object = ::new (static_cast<void*>(r.box)) V(std::forward<A>(args)...);
    r.destroy = [](void* object, bool) { static_cast<V*>(object)->~V(); };
  } else {
    r.object = new V(std::forward<A>(args)...);
    r.destroy = [](void* object, bool) { delete static_cast<V*>(object); };
  }
}

/// Moves the value out of an ended-done r: its typed object, or a fixed-size reply's raw bytes.
template <class V>
V take_value(future_record& r) {
  if (r.object != nullptr) return std::move(*static_cast<V*>(r.object));
  if constexpr (std::is_trivially_copyable_v<V>) {
    V out;
    std::memcpy(static_cast<void*>(&out), r.raw_value(), sizeof(V));
    return out;
  } else {
    // Unreachable: a non-trivially-copyable value always lives in the record as an object.
    std::terminate();
  }
}

/// The exception a failed r stands for: a local one (a callback's, a task's), the callee's
/// rebuilt, or the error naming r's outcome.
inline std::exception_ptr failure_of(const future_record& r) {
  if (r.error) return r.error;
  if (r.outcome() == outcome::threw) {
    return rebuild_remote_exception(r.details, r.status, r.destination, r.process);
  }
  return outcome_exception(r.outcome(), r.status, r.destination, r.process);
}

/// Gives `to` the failure of `from` (outcome, status, destination, details, exception).
inline void copy_failure(const future_record& from, future_record& to) {
  to.cold = true;
  to.status = from.status;
  to.destination = from.destination;
  to.process = from.process;
  to.details = from.details;
  to.error = from.error;
}

/// Ends local record r with value V(args...), unless it ended already (cancelled) or nobody
/// holds it any more (then it is given back).
template <class V, class... A>
void fulfil(future_table& t, future_record& r, A&&... args) {
  if (r.outcome() != outcome::pending || !r.held) {
    t.complete(r, outcome::done);  // frees an orphan; keeps an ended record's outcome
    return;
  }
  emplace_value<V>(r, std::forward<A>(args)...);
  t.complete(r, outcome::done);
}
/// Ends local record r failed with `e` (outcome threw), unless it ended already.
inline void fail_with(future_table& t, future_record& r, std::exception_ptr e) {
  if (r.outcome() == outcome::pending && r.held) {
    r.cold = true;
    r.error = std::move(e);
  }
  t.complete(r, outcome::threw);
}
/// Ends local record r failed as `from` did, unless it ended already.
inline void fail_like(future_table& t, future_record& r, const future_record& from) {
  if (r.outcome() == outcome::pending && r.held) copy_failure(from, r);
  t.complete(r, from.outcome());
}

/// Resumes the coroutine whose address is `context` (a continuation's fire).
inline void resume_coroutine(void* context, future_record&) {
  std::coroutine_handle<>::from_address(context).resume();
}

}  // namespace detail

/// What try_get() gives: the value, or how the call failed (outcome, status, the exception get()
/// would throw). Never throws until value() is asked of a failure.
template <class T>
class call_result {
  using value_type = detail::value_of<T>;

 public:
  /// A result holding `value`.
  static call_result success(value_type value) {
    call_result r;
    r.value_.emplace(std::move(value));
    r.outcome_ = outcome::done;
    return r;
  }
  /// A failed result: `why`, what the send returned, the exception value() throws and where.
  static call_result failure(outcome why, call_status status, std::exception_ptr error,
                             thread_id destination, int process) {
    call_result r;
    r.outcome_ = why;
    r.status_ = status;
    r.error_ = std::move(error);
    r.destination_ = destination;
    r.process_ = process;
    return r;
  }

  /// Whether the call gave a value.
  [[nodiscard]] bool has_value() const noexcept { return value_.has_value(); }
  explicit operator bool() const noexcept { return has_value(); }  ///< has_value()
  /// The value; for a failure, throws what future::get() would have thrown.
  decltype(auto) value() & {
    if (!value_) std::rethrow_exception(error_);
    if constexpr (!std::is_void_v<T>) return (*value_);
  }
  /// The value, moved out; for a failure, throws what future::get() would have thrown.
  decltype(auto) value() && {
    if (!value_) std::rethrow_exception(error_);
    if constexpr (!std::is_void_v<T>) return std::move(*value_);
  }
  /// The value (precondition: has_value()).
  value_type& operator*() noexcept { return *value_; }
  value_type* operator->() noexcept { return &*value_; }  ///< the value's members
  /// How the call ended (done, or the failure's outcome).
  [[nodiscard]] outcome result() const noexcept { return outcome_; }
  /// What sending the call returned.
  [[nodiscard]] call_status status() const noexcept { return status_; }
  /// The exception value() throws (null for a value).
  [[nodiscard]] std::exception_ptr error() const noexcept { return error_; }
  /// The failure's message, the way get() would have thrown it ("" for a value).
  [[nodiscard]] std::string describe() const {
    if (!error_) return {};
    try {
      std::rethrow_exception(error_);
    } catch (const std::exception& e) {
      return e.what();
    } catch (...) {
      return "unknown exception";
    }
  }
  /// The thread the call went to (0 for a failure that names none).
  [[nodiscard]] thread_id destination() const noexcept { return destination_; }

 private:
  std::optional<value_type> value_;
  outcome outcome_ = outcome::pending;
  call_status status_ = call_status::ok;
  std::exception_ptr error_;
  thread_id destination_ = 0;
  int process_ = -1;
};

/// The result of a call_return (or of a then, when_all, spawn). Move-only; the owner thread
/// (the one that made it) only; it must not outlive the runtime::run (or attachment) it was
/// made in. Ends exactly once: done (get() gives the value), threw (get() throws the callee's
/// exception: rebuilt when registered, else remote_error), or not_executed, may_have_executed,
/// deadline_exceeded, cancelled (get() throws the matching call_error subclass). Waiting serves
/// the calls sent to this thread. A future that failed and was destroyed without anyone asking
/// how (get, try_get, result, wait, then, co_await) is counted (runtime counters:
/// failed_futures_unobserved), and the first in the process is logged.
template <class T>
class [[nodiscard]] future {
 public:
  using value_type = detail::value_of<T>;  ///< T, or an empty struct for future<void>

  future() noexcept = default;  ///< an empty future (valid() is false)
  /// Takes over `other`'s call (`other` is empty afterwards).
  future(future&& other) noexcept
      : record_(std::exchange(other.record_, nullptr)), table_(other.table_) {}
  /// Lets go of this future's call (as its destructor does), then takes over `other`'s.
  future& operator=(future&& other) noexcept {
    if (this != &other) {
      reset();
      record_ = std::exchange(other.record_, nullptr);
      table_ = other.table_;
    }
    return *this;
  }
  future(const future&) = delete;
  future& operator=(const future&) = delete;
  ~future() { reset(); }

  /// Whether this future holds a call (false once moved from, or after get / try_get / then).
  [[nodiscard]] bool valid() const noexcept { return record_ != nullptr; }
  /// Whether it ended, whichever way (reads the reply; never waits).
  [[nodiscard]] bool ready() const { return table_->ended(*record_); }
  /// How it ended, or outcome::pending (never waits).
  [[nodiscard]] outcome result() const {
    (void)ready();
    record_->observed = true;
    return record_->outcome();
  }
  /// What sending the call returned (ok, or why it was never sent: then the future ended
  /// not_executed).
  [[nodiscard]] call_status status() const noexcept { return record_->status; }
  /// The thread the call went to.
  [[nodiscard]] thread_id destination() const noexcept { return record_->destination; }
  /// "call to thread 3 (rank 1): failed, may have executed: ..." for the current outcome.
  [[nodiscard]] std::string describe() const {
    return fabric::describe(result(), record_->destination, record_->process);
  }

  /// Waits until it ended (serving calls), at most until `deadline` (or the deadline in force:
  /// a deadline_scope, SERIEMA_TIMEOUT, with_deadline), then ends it deadline_exceeded.
  /// Returns the outcome.
  outcome wait(fabric::deadline_clock::time_point deadline = fabric::no_deadline) {
    detail::future_record& r = *record_;
    if (r.deadline < deadline) deadline = r.deadline;
    thread_context& self = table_->self();
    // A combinator is driven by the futures layer's polls meanwhile, which count its progress
    // as work (so the wait does not back off while its futures keep ending).
    const bool driven = r.cold && r.advance != nullptr && !table_->ended(r);
    if (driven) table_->drive(r);
    const bool ended = self.wait_until([&] { return table_->ended(r); }, deadline);
    if (driven) table_->undrive(r);
    if (!ended) table_->end_pending(r, outcome::deadline_exceeded);
    r.observed = true;
    return r.outcome();
  }
  /// wait() with a deadline `timeout` from now.
  template <class Rep, class Period>
  outcome wait(std::chrono::duration<Rep, Period> timeout) {
    return wait(fabric::deadline_clock::now() +
                std::chrono::duration_cast<fabric::deadline_clock::duration>(timeout));
  }

  /// Waits (as wait()), then gives the value, or throws: the callee's exception (a registered
  /// type as itself, else remote_error), or not_executed_error, may_have_executed_error,
  /// deadline_exceeded_error, cancelled_error. The future is empty afterwards.
  T get() {
    if (wait() == outcome::done) {
      if constexpr (std::is_void_v<T>) {
        reset();
        return;
      } else {
        T value = detail::take_value<T>(*record_);
        reset();
        return value;
      }
    }
    std::exception_ptr failure = detail::failure_of(*record_);
    reset();
    std::rethrow_exception(failure);
  }
  /// Waits (as wait()), then gives the value or the failure without throwing. The future is
  /// empty afterwards.
  call_result<T> try_get() {
    (void)wait();
    return take_result();
  }

  /// Ends a pending future as cancelled (nothing when it ended): its reply, if one comes, is
  /// dropped. The call itself may still run at the destination.
  void cancel() noexcept {
    if (record_ != nullptr) table_->end_pending(*record_, outcome::cancelled);
  }

  /// f runs on this thread, inside one of its polls, once this future ended: f(value) when it
  /// ended with one (the returned future then gets f's result; a future or task that f returns
  /// is waited for), or f(call_result<T>) whatever the outcome if f takes that. Without a
  /// call_result parameter, a failure skips f and passes on to the returned future; an
  /// exception f throws ends it (threw, get() rethrows it). Consumes this future.
  template <class F>
  auto then(F f) &&;

  /// @cond INTERNAL
  /// The awaiter of `co_await future` (the coroutine resumes on this thread, in a poll, once it
  /// ended; get()'s value or exception is the result). The awaited deadline is the earliest of
  /// the future's own (with_deadline) and the deadline in force when the coroutine suspends.
  struct awaiter {
    future& awaited;
    bool await_ready() const { return awaited.ready(); }
    void await_suspend(std::coroutine_handle<> waiting) {
      detail::future_record& r = *awaited.record_;
      r.cold = true;  // the deadline is after the box
      r.deadline = awaited.table_->self().deadline_in_force(r.deadline);
      awaited.table_->watch(r, {&detail::resume_coroutine, waiting.address()});
    }
    T await_resume() { return awaited.get(); }
  };
  /// @endcond
  /// co_await on an lvalue future: it is consumed (empty afterwards), as by get(). The coroutine
  /// resumes on this thread, inside a poll, once it ended; the deadline is the earliest of the
  /// future's own (with_deadline) and the deadline in force when the coroutine suspends.
  awaiter operator co_await() & noexcept { return awaiter{*this}; }
  /// co_await on a temporary future (a call_return's result): the awaiter keeps it.
  auto operator co_await() && noexcept {
    struct owning_awaiter {
      future kept;
      bool await_ready() const { return kept.ready(); }
      void await_suspend(std::coroutine_handle<> waiting) {
        awaiter{kept}.await_suspend(waiting);
      }
      T await_resume() { return kept.get(); }
    };
    return owning_awaiter{std::move(*this)};
  }

  /// @cond INTERNAL
  future(detail::future_table& table, detail::future_record& record) noexcept
      : record_(&record), table_(&table) {}
  [[nodiscard]] detail::future_record* record() const noexcept { return record_; }
  [[nodiscard]] detail::future_table* table() const noexcept { return table_; }
  /// The result of an ended future, moved out; the future is empty afterwards.
  call_result<T> take_result() {
    detail::future_record& r = *record_;
    r.observed = true;
    call_result<T> out =
        r.outcome() == outcome::done
            ? call_result<T>::success(detail::take_value<value_type>(r))
            : call_result<T>::failure(r.outcome(), r.status, detail::failure_of(r),
                                      r.destination, r.process);
    reset();
    return out;
  }
  /// @endcond

 private:
  void reset() noexcept {
    if (record_ != nullptr) table_->release(*std::exchange(record_, nullptr));
  }

  detail::future_record* record_ = nullptr;
  detail::future_table* table_ = nullptr;
};

/// A future of `self`'s thread that ended already with `value` (e.g. a function with a deferred
/// reply that sometimes knows the answer at once).
template <class T>
future<std::decay_t<T>> make_ready_future(thread_context& self, T&& value) {
  detail::future_table& table = detail::futures_of(self);
  detail::future_record& r = table.acquire();
  detail::fulfil<std::decay_t<T>>(table, r, std::forward<T>(value));
  return future<std::decay_t<T>>(table, r);
}
/// A future<void> of `self`'s thread that ended already.
inline future<void> make_ready_future(thread_context& self) {
  detail::future_table& table = detail::futures_of(self);
  detail::future_record& r = table.acquire();
  detail::fulfil<detail::unit>(table, r);
  return future<void>(table, r);
}

/// Gives `future` a deadline: waiting for it (wait, get, co_await, when_all...) ends it
/// deadline_exceeded once `deadline` passed. Returns it.
template <class T>
future<T> with_deadline(future<T>&& f, fabric::deadline_clock::time_point deadline) {
  if (deadline < f.record()->deadline) {
    f.record()->cold = true;  // the deadline is after the box
    f.record()->deadline = deadline;
  }
  return std::move(f);
}
/// with_deadline() `timeout` from now.
template <class T, class Rep, class Period>
future<T> with_deadline(future<T>&& f, std::chrono::duration<Rep, Period> timeout) {
  return with_deadline(std::move(f),
                       fabric::deadline_clock::now() +
                           std::chrono::duration_cast<fabric::deadline_clock::duration>(timeout));
}

namespace detail {

/// A local record of `table`, held by the returned future.
template <class T>
future<T> make_local_future(future_table& table) {
  return future<T>(table, table.acquire());
}

/// Ends local record `out` as the ended `source` did (its value moved over, or its failure).
template <class T>
void forward_result(future_table& table, future<T>& source, future_record& out) {
  future_record& r = *source.record();
  if (r.outcome() == outcome::done) {
    fulfil<value_of<T>>(table, out, take_value<value_of<T>>(r));
  } else {
    fail_like(table, out, r);
  }
  r.observed = true;
}

/// Ends `out` with what `value` (a then callback's result: a plain value, a future or a task)
/// gives, waiting (by continuation) for a future or task.
template <class U, class R>
void settle_with(future_table& table, future_record& out, R&& value);

/// then(f)'s state: the source future and the callback, until the source ended.
template <class T, class F, class U>
struct then_node {
  future<T> source;
  F callback;
  future_record* out;
  future_table* table;

  static void fire(void* context, future_record&) {
    std::unique_ptr<then_node> node(static_cast<then_node*>(context));
    node->run();
  }
  void run() {
    future_record& r = *source.record();
    r.observed = true;
    try {
      if constexpr (std::is_invocable_v<F&, call_result<T>>) {
        invoke_settling(source.take_result());
      } else if (r.outcome() != outcome::done) {
        fail_like(*table, *out, r);
      } else if constexpr (std::is_void_v<T>) {
        invoke_settling();
      } else {
        invoke_settling(take_value<T>(r));
      }
    } catch (...) {
      fail_with(*table, *out, std::current_exception());
    }
  }
  template <class... A>
  void invoke_settling(A&&... args) {
    using R = std::invoke_result_t<F&, A...>;
    if constexpr (std::is_void_v<R>) {
      callback(std::forward<A>(args)...);
      fulfil<unit>(*table, *out);
    } else {
      settle_with<U>(*table, *out, callback(std::forward<A>(args)...));
    }
  }
};

/// Waits for an inner future (a then callback returned one) and ends `out` as it ends.
template <class V>
struct forward_node {
  future<V> inner;
  future_record* out;
  future_table* table;
  static void fire(void* context, future_record&) {
    std::unique_ptr<forward_node> node(static_cast<forward_node*>(context));
    forward_result(*node->table, node->inner, *node->out);
  }
};

template <class T>
future<T> spawn_on(future_table& table, task<T>&& t);  // task.hpp

template <class U, class R>
void settle_with(future_table& table, future_record& out, R&& value) {
  using D = std::decay_t<R>;
  if constexpr (is_future<D>::value || is_task<D>::value) {
    using V = unwrapped_t<D>;
    future<V> inner;
    if constexpr (is_task<D>::value) {
      inner = spawn_on(table, std::move(value));
    } else {
      inner = std::move(value);
    }
    auto* node = new forward_node<V>{std::move(inner), &out, &table};
    table.watch(*node->inner.record(), {&forward_node<V>::fire, node});
  } else {
    fulfil<value_of<U>>(table, out, std::forward<R>(value));
  }
}

/// What then(f) makes of F's result: its value type (void for none; V for a future or task).
template <class T, class F>
struct then_result {
  template <class G>
  static auto probe() {
    if constexpr (std::is_invocable_v<G&, call_result<T>>) {
      return std::type_identity<std::invoke_result_t<G&, call_result<T>>>{};
    } else if constexpr (std::is_void_v<T>) {
      return std::type_identity<std::invoke_result_t<G&>>{};
    } else {
      return std::type_identity<std::invoke_result_t<G&, T>>{};
    }
  }
  using raw = typename decltype(probe<F>())::type;
  using type = unwrapped_t<std::decay_t<raw>>;
};

}  // namespace detail

/// @cond INTERNAL
template <class T>
template <class F>
auto future<T>::then(F f) && {
  using U = typename detail::then_result<T, F>::type;
  detail::future_table& table = *table_;
  future<U> out = detail::make_local_future<U>(table);
  auto* node = new detail::then_node<T, F, U>{std::move(*this), std::move(f), out.record(),
                                              &table};
  table.watch(*node->source.record(), {&detail::then_node<T, F, U>::fire, node});
  return out;
}
/// @endcond

/// when_any's value: which future ended first, and all of them back (that one ended).
template <class T>
struct when_any_result {
  std::size_t index = 0;              ///< the first that ended (in poll order)
  std::vector<future<T>> futures;     ///< the futures given to when_any, in their order
};

namespace detail {

/// A combinator's state (when_all, when_any): its futures, and the record of the future it
/// gives, which it ends. It is driven by that record's ended(): a wait on the combinator reads
/// its futures' replies directly, as a loop over hand-polled slots would, with no continuation
/// between them. Owned by the record (installed as its `advance`); it deletes itself once it
/// ended the record, or when the record is given back first (`discard`).
template <class Derived>
struct combinator {
  future_record* out = nullptr;
  future_table* table = nullptr;

  /// Makes `node` drive `out`, and drives it once (its futures may have ended already).
  static void install(Derived* node, future_record& out, future_table& table) {
    node->out = &out;
    node->table = &table;
    out.cold = true;
    out.node = node;
    out.advance = [](void* n) { return static_cast<Derived*>(n)->advance(); };
    out.discard = [](void* n) { delete static_cast<Derived*>(n); };
    (void)node->advance();
  }
  /// Once the result is made: the record no longer points here, and the node goes.
  bool done() {
    out->advance = nullptr;
    out->discard = nullptr;
    out->node = nullptr;
    delete static_cast<Derived*>(this);
    return true;
  }
};

/// when_all over futures of several types: waits for them in order.
template <class... T>
struct when_all_node : combinator<when_all_node<T...>> {
  std::tuple<future<T>...> children;
  std::size_t next = 0;  ///< the first future not known to have ended

  future_record* record_of(std::size_t i) {
    future_record* found = nullptr;
    std::size_t at = 0;
    std::apply([&](auto&... f) { ((at++ == i ? (found = f.record(), 0) : 0), ...); }, children);
    return found;
  }
  bool advance() {
    for (; next < sizeof...(T); ++next) {
      if (!this->table->ended(*record_of(next))) return false;
      this->table->note_advanced();
    }
    finish();
    return this->done();
  }
  void finish() {
    future_record* failed = nullptr;
    std::apply([&](auto&... f) {
      ((f.record()->observed = true,
        failed = failed == nullptr && f.record()->outcome() != outcome::done ? f.record() : failed),
       ...);
    }, children);
    if (failed != nullptr) return fail_like(*this->table, *this->out, *failed);
    fulfil<std::tuple<value_of<T>...>>(
        *this->table, *this->out,
        std::apply([](auto&... f) {
          return std::tuple<value_of<T>...>(
              take_value<typename std::decay_t<decltype(f)>::value_type>(*f.record())...);
        }, children));
  }
};

/// when_all over a vector of futures of one type: waits for them in order, and settles each
/// one as it is found ended (its value taken, its record given back while its lines are in
/// cache: one pass over the futures, as a loop over hand-polled slots makes).
template <class T>
struct when_all_vector_node : combinator<when_all_vector_node<T>> {
  static constexpr std::size_t none_failed = static_cast<std::size_t>(-1);
  std::vector<future<T>> children;
  std::vector<value_of<T>> values;  ///< of the futures before `next`, while none failed
  std::size_t next = 0;             ///< the first future not known to have ended
  std::size_t failed = none_failed; ///< the first that failed (kept for its failure)

  bool advance() {
    for (; next < children.size(); ++next) {
      if (!this->table->ended(*children[next].record())) return false;
      this->table->note_advanced();
      settle(children[next]);
    }
    if (failed != none_failed) {
      fail_like(*this->table, *this->out, *children[failed].record());
    } else {
      fulfil<std::vector<value_of<T>>>(*this->table, *this->out, std::move(values));
    }
    return this->done();
  }
  void settle(future<T>& f) {
    future_record& r = *f.record();
    r.observed = true;
    if (failed == none_failed && r.outcome() != outcome::done) {
      failed = next;
      return;
    }
    if (failed == none_failed) values.push_back(take_value<value_of<T>>(r));
    f = future<T>{};  // its record goes back now
  }
};

/// when_any: the first future found ended decides; every future goes back to the caller.
template <class T>
struct when_any_node : combinator<when_any_node<T>> {
  std::vector<future<T>> children;

  bool advance() {
    for (std::size_t i = 0; i < children.size(); ++i) {
      if (!this->table->ended(*children[i].record())) continue;
      children[i].record()->observed = true;
      this->table->note_advanced();
      fulfil<when_any_result<T>>(*this->table, *this->out,
                                 when_any_result<T>{i, std::move(children)});
      return this->done();
    }
    return false;
  }
};

}  // namespace detail

/// A future that ends once every future given ended: with the tuple of their values, or, when
/// any failed, as the first of them (in argument order) that failed. Consumes them.
template <class... T>
future<std::tuple<detail::value_of<T>...>> when_all(future<T>&&... futures) {
  static_assert(sizeof...(T) > 0, "when_all: give it at least one future");
  detail::future_table& table = *std::get<0>(std::forward_as_tuple(futures...)).table();
  auto out = detail::make_local_future<std::tuple<detail::value_of<T>...>>(table);
  auto* node = new detail::when_all_node<T...>;
  node->children = std::tuple<future<T>...>(std::move(futures)...);
  detail::when_all_node<T...>::install(node, *out.record(), table);
  return out;
}

/// A future that ends once every future of `futures` ended: with their values in order, or,
/// when any failed, as the first of them that failed. `self` is the thread they belong to (an
/// empty vector gives a future that ended already). Consumes them.
template <class T>
future<std::vector<detail::value_of<T>>> when_all(thread_context& self,
                                                 std::vector<future<T>>&& futures) {
  detail::future_table& table = detail::futures_of(self);
  auto out = detail::make_local_future<std::vector<detail::value_of<T>>>(table);
  auto* node = new detail::when_all_vector_node<T>;
  node->children = std::move(futures);
  node->values.reserve(node->children.size());
  detail::when_all_vector_node<T>::install(node, *out.record(), table);
  return out;
}

/// A future that ends as soon as one future of `futures` ended (whichever way), with its index
/// and every future handed back (the others may still be pending). Throws seriema::error for an
/// empty vector. Consumes them.
template <class T>
future<when_any_result<T>> when_any(std::vector<future<T>>&& futures) {
  if (futures.empty()) throw seriema::error("when_any: the vector of futures is empty");
  detail::future_table& table = *futures.front().table();
  auto out = detail::make_local_future<when_any_result<T>>(table);
  auto* node = new detail::when_any_node<T>;
  node->children = std::move(futures);
  detail::when_any_node<T>::install(node, *out.record(), table);
  return out;
}

}  // namespace seriema::invoke

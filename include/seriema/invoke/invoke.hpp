// The remote invocation primitives (paper Table 1), send-based and one-sided alike:
//   call, call_buffer (inline, put, put-async, get, get-async), call_return, broadcast,
//   broadcast_buffer (inline, put, get),
// chosen per call by template parameters: the channel (send / write / trad / ovfl), the
// full-buffer policy (fail / retry / retry_async) and, optionally, a synchronizer notified when
// the call was consumed (the default: call(me, dest, f, sync) counts calls that ran) or, with
// notify_on::transmit, transmitted. Aggregator wraps a channel choice for repeated calls. A
// misplaced synchronizer or notify_on fails to compile with one sentence (detail/misuse.hpp).
#pragma once

#include <cstdint>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/invoke/channel.hpp>
#include <seriema/invoke/detail/future_calls.hpp>
#include <seriema/invoke/detail/primitives.hpp>
#include <seriema/invoke/future.hpp>
#include <seriema/invoke/task.hpp>
#include <seriema/invoke/synchronizer.hpp>
#include <span>
#include <type_traits>

namespace seriema::invoke {

using fabric::return_slot;


/// `dest` runs f() (or f(ctx)).
template <channel C = channel::write, class Policy = policy::fail, class F>
call_status call(thread_context& self, thread_id dest, const F& f) {
  return detail::dispatch<Policy, fabric::plain_shape>(self, C, dest, f, {}, nullptr,
                                                      notify_on::transmit);
}
/// call() that decrements `sync` when the call was consumed (`When`, by default: `dest` ran it)
/// or, with notify_on::transmit, transmitted.
template <channel C = channel::write, class Policy = policy::fail,
          notify_on When = notify_on::consume, class F>
call_status call(thread_context& self, thread_id dest, const F& f, synchronizer& sync) {
  return detail::dispatch<Policy, fabric::plain_shape>(self, C, dest, f, {}, &sync, When);
}

/// `dest` runs f(buf) (or f(ctx, buf)) with a copy of `buffer` that travelled with the call.
template <channel C = channel::write, class Policy = policy::fail, class F>
call_status call_buffer(thread_context& self, thread_id dest, const F& f,
                        std::span<const std::byte> buffer) {
  return detail::dispatch<Policy, fabric::buffer_shape>(self, C, dest, f, buffer, nullptr,
                                                       notify_on::transmit);
}
/// call_buffer() that decrements `sync` when the call was consumed (`When`, by default) or, with
/// notify_on::transmit, transmitted.
template <channel C = channel::write, class Policy = policy::fail,
          notify_on When = notify_on::consume, class F>
call_status call_buffer(thread_context& self, thread_id dest, const F& f,
                        std::span<const std::byte> buffer, synchronizer& sync) {
  return detail::dispatch<Policy, fabric::buffer_shape>(self, C, dest, f, buffer, &sync, When);
}

/// `dest` runs f() (or f(ctx)); the value is written back into `slot` (self.wait_for(slot)).
template <channel C = channel::write, class Policy = policy::fail, class F, class R>
call_status call_return(thread_context& self, thread_id dest, const F& f,
                        return_slot<R>& slot) {
  static_assert(std::is_same_v<R, fabric::detail::return_type_t<F>>,
                "call_return: the slot's type must be the function's return type");
  return detail::returning<C, Policy, fabric::return_shape>(self, dest, f, {}, slot);
}
/// call_return() that also decrements `sync` when `dest` ran the call (`When`, by default) or,
/// with notify_on::transmit, when it was transmitted (the value may arrive in `slot` after the
/// notice, or before).
template <channel C = channel::write, class Policy = policy::fail,
          notify_on When = notify_on::consume, class F, class R>
call_status call_return(thread_context& self, thread_id dest, const F& f, return_slot<R>& slot,
                        synchronizer& sync) {
  static_assert(std::is_same_v<R, fabric::detail::return_type_t<F>>,
                "call_return: the slot's type must be the function's return type");
  return detail::returning<C, Policy, fabric::return_shape>(self, dest, f, {}, slot, &sync, When);
}

/// `dest` runs f(args...) (or f(ctx, args...)). The arguments may be of any type cereal
/// serializes (std::string, std::vector, std::map, user types with a serialize() member...):
/// they are serialized into the call's buffer here and deserialized on the destination, which
/// passes them as lvalues. Bytes that do not deserialize are rejected and counted
/// (runtime counters: rejected_arguments); f does not run then.
template <channel C = channel::write, class Policy = policy::fail, class F, class... Args>
  requires(sizeof...(Args) > 0 && !(detail::is_synchronizer_like_v<Args> || ...))
call_status call(thread_context& self, thread_id dest, F f, const Args&... args) {
  using wrapper = detail::with_arguments<F, std::remove_cvref_t<Args>...>;
  detail::argument_scratch scratch;
  detail::serialize_arguments(scratch.bytes(), args...);
  return detail::dispatch<Policy, fabric::invocation_shape>(self, C, dest, wrapper{f},
                                                           scratch.bytes(), nullptr,
                                                           notify_on::transmit);
}
/// The same, with a synchronizer.
template <channel C = channel::write, class Policy = policy::fail,
          notify_on When = notify_on::consume, class F, class... Args>
  requires(sizeof...(Args) > 0)
call_status call(thread_context& self, thread_id dest, F f, synchronizer& sync,
                 const Args&... args) {
  using wrapper = detail::with_arguments<F, std::remove_cvref_t<Args>...>;
  detail::argument_scratch scratch;
  detail::serialize_arguments(scratch.bytes(), args...);
  return detail::dispatch<Policy, fabric::invocation_shape>(self, C, dest, wrapper{f},
                                                           scratch.bytes(), &sync, When);
}

/// `dest` runs f(args...) (or f(ctx, args...); the arguments, if any, of any type cereal
/// serializes, as for call); returns a future of its value, whatever its type: a trivially
/// copyable value comes back as its bytes (a reply cell when it fits 56 bytes), any other type
/// cereal serializes (std::string, std::vector, user types) serialized, one over 64 KiB through
/// registered memory. A function that returns a task<V> or a future<V> makes a deferred reply:
/// the future gets V once that ended (the callee's thread stays free meanwhile). A function that
/// throws fails the future with its exception (get() throws it: a registered type as itself,
/// else remote_error); it is not raised at the destination. Works on every channel, from
/// workers, and (channel::send) from attached threads.
template <channel C = channel::write, class Policy = policy::fail, class F, class... Args>
  requires(!(detail::is_return_slot_v<Args> || ...) && !(detail::is_synchronizer_v<Args> || ...))
auto call_return(thread_context& self, thread_id dest, F f, const Args&... args) {
  return detail::call_returning_future<C, Policy>(self, dest, f, args...);
}

/// `dest` runs f(args...) (or f(ctx, args...)) with serialized arguments (as call above); the
/// value is written back into `slot`. Arguments that do not deserialize give a value-initialized
/// result (and a rejection counted at the destination).
template <channel C = channel::write, class Policy = policy::fail, class F, class R,
          class... Args>
  requires(sizeof...(Args) > 0 && !(detail::is_synchronizer_like_v<Args> || ...))
call_status call_return(thread_context& self, thread_id dest, F f, return_slot<R>& slot,
                        const Args&... args) {
  using wrapper = detail::returning_with_arguments<F, std::remove_cvref_t<Args>...>;
  static_assert(std::is_same_v<R, typename wrapper::result_type>,
                "call_return: the slot's type must be the function's return type");
  detail::argument_scratch scratch;
  detail::serialize_arguments(scratch.bytes(), args...);
  return detail::returning<C, Policy, fabric::invocation_shape>(self, dest, wrapper{f},
                                                               scratch.bytes(), slot);
}


/// `dest` runs the function registered under `id` (fabric::register_function<F, Shape>(id,
/// name), in every process before the runtime starts) on `closure`'s bytes, which must have the
/// registered closure's size (a struct laid out like the registered F's captures). With a
/// `buffer`, the function must have been registered with buffer_shape. The call site needs no
/// F: it names the function by id. Throws seriema::error when `id` is not registered, or
/// registered for another closure size or returning a value (checked against this process's
/// registry, which the runtime made sure equals every other's).
template <channel C = channel::write, class Policy = policy::fail, class Closure>
call_status call_registered(thread_context& self, thread_id dest, fabric::function_id id,
                            const Closure& closure, std::span<const std::byte> buffer = {}) {
  return detail::call_registered_id<C, Policy>(self, dest, id | fabric::user_function_bit,
                                               closure, buffer);
}
/// call_registered for a function registered with return_shape: the value is written back into
/// `slot`, whose type must have the registered result's size.
template <channel C = channel::write, class Policy = policy::fail, class Closure, class R>
call_status call_return_registered(thread_context& self, thread_id dest, fabric::function_id id,
                                   const Closure& closure, return_slot<R>& slot) {
  return detail::call_return_registered_id<C, Policy>(self, dest, id | fabric::user_function_bit,
                                                      closure, slot);
}

/// call_buffer, put variant (paper): `origin` is put into `target` (registered memory of the
/// destination's process, e.g. from allocate_remote), and once it is there `dest` runs
/// f(target's bytes). Waits for the put's completion before sending the call.
template <channel C = channel::write, class Policy = policy::fail, class F>
call_status call_buffer(thread_context& self, thread_id dest, F f,
                        std::span<const std::byte> origin,
                        const transfer::remote_memory_locator& target) {
  return detail::put_then_call<C, Policy>(self, dest, f, origin, target, nullptr,
                                          notify_on::transmit);
}
/// call_buffer, put variant, decrementing `sync` once the put completed and the call was
/// transmitted (`origin` may change from then on; it may already when this returns), or
/// (notify_on::consume) once f ran at `dest`.
template <channel C = channel::write, class Policy = policy::fail,
          notify_on When = notify_on::consume, class F>
call_status call_buffer(thread_context& self, thread_id dest, F f,
                        std::span<const std::byte> origin,
                        const transfer::remote_memory_locator& target, synchronizer& sync) {
  return detail::put_then_call<C, Policy>(self, dest, f, origin, target, &sync, When);
}

/// call_buffer, put variant, asynchronous (paper's Async): the put of `origin` into `target`
/// starts now and the call returns at once; the call carrying f goes out on a later poll of
/// this thread, once the bytes are in the target's memory (through the retry_async policy, so
/// it never fails for a full ring). `origin` must stay unchanged until `sync` counts the call
/// down: when the call was transmitted, or (notify_on::consume) once f ran at `dest`. A put that
/// fails (target's process died), or a call that cannot be sent, still counts `sync` down and is
/// counted in this thread's failed_puts. Returns bad_destination / too_large at once when
/// `target` is not in `dest`'s process or smaller than `origin`.
template <channel C = channel::write, notify_on When = notify_on::consume, class F>
call_status call_buffer_put_async(thread_context& self, thread_id dest, F f,
                                  std::span<const std::byte> origin,
                                  const transfer::remote_memory_locator& target,
                                  synchronizer& sync) {
  return detail::start_put_then_call<C>(self, dest, f, origin, target, sync, When);
}

/// call_buffer, get variant (paper): `dest` reads `origin` (registered memory anywhere, e.g. the
/// caller's, which must stay unchanged until the call ran) by a remote read, then runs
/// f(bytes read). The read is synchronous on the destination thread (it serves calls while it
/// waits).
template <channel C = channel::write, class Policy = policy::fail, class F>
call_status call_buffer_get(thread_context& self, thread_id dest, F f,
                            const transfer::remote_memory_locator& origin) {
  fabric::check_remote_closure<F>();
  return invoke::call<C, Policy>(self, dest, detail::call_after_get<F>{f, origin});
}
/// The same, decrementing `sync` when the call was transmitted or (notify_on::consume) once f ran
/// at the destination: from then on `origin` may change.
template <channel C = channel::write, class Policy = policy::fail,
          notify_on When = notify_on::consume, class F>
call_status call_buffer_get(thread_context& self, thread_id dest, F f,
                            const transfer::remote_memory_locator& origin, synchronizer& sync) {
  fabric::check_remote_closure<F>();
  return invoke::call<C, Policy, When>(self, dest, detail::call_after_get<F>{f, origin}, sync);
}

/// call_buffer_get, async variant (paper): `dest` starts reading `origin` and keeps serving calls
/// meanwhile; f(bytes read) runs on one of its later polls, so calls sent after this one may run
/// before f. With a synchronizer, it is decremented once f ran (origin may change from then on).
/// A read that fails (origin's process died) is counted at the destination (failed_reads) and
/// f does not run; the synchronizer is still decremented.
template <channel C = channel::write, class Policy = policy::fail, class F>
call_status call_buffer_get_async(thread_context& self, thread_id dest, F f,
                                  const transfer::remote_memory_locator& origin) {
  fabric::check_remote_closure<F>();
  return detail::dispatch<Policy, fabric::invocation_shape>(
      self, C, dest, detail::call_after_get_async<F>{f, origin, 0}, {}, nullptr,
      notify_on::transmit);
}
/// call_buffer_get_async() that decrements `sync` once f ran, or its read failed: `origin` may
/// change from then on.
template <channel C = channel::write, class Policy = policy::fail, class F>
call_status call_buffer_get_async(thread_context& self, thread_id dest, F f,
                                  const transfer::remote_memory_locator& origin,
                                  synchronizer& sync) {
  fabric::check_remote_closure<F>();
  return detail::dispatch<Policy, fabric::invocation_shape>(
      self, C, dest, detail::call_after_get_async<F>{f, origin, sync.word()}, {}, nullptr,
      notify_on::transmit);
}

/// broadcast: f() (or f(ctx)) runs once on every thread of the job, this one included, through
/// a binary tree rooted here; each hop travels on channel C.
template <channel C = channel::write, class F>
void broadcast(thread_context& self, F f) {
  detail::start_broadcast<C, fabric::plain_shape>(self, f, {}, nullptr, notify_on::transmit);
}
/// broadcast() naming `sync`, where one broadcast counts as one call: decremented once this
/// thread sent the broadcast on (transmit), or once every thread of the job ran f (consume;
/// each thread reports to this one, and a process that dies first ends the wait with
/// may_have_executed).
template <channel C = channel::write, notify_on When = notify_on::consume, class F>
void broadcast(thread_context& self, F f, synchronizer& sync) {
  detail::start_broadcast<C, fabric::plain_shape>(self, f, {}, &sync, When);
}

/// broadcast_buffer: f(buf) runs once on every thread with a copy of `buffer`, through the tree.
template <channel C = channel::write, class F>
void broadcast_buffer(thread_context& self, F f, std::span<const std::byte> buffer) {
  std::vector<std::byte> mine(buffer.begin(), buffer.end());
  detail::start_broadcast<C, fabric::buffer_shape>(self, f, mine, nullptr, notify_on::transmit);
}
/// broadcast_buffer() naming `sync` (counted as broadcast() counts it).
template <channel C = channel::write, notify_on When = notify_on::consume, class F>
void broadcast_buffer(thread_context& self, F f, std::span<const std::byte> buffer,
                      synchronizer& sync) {
  std::vector<std::byte> mine(buffer.begin(), buffer.end());
  detail::start_broadcast<C, fabric::buffer_shape>(self, f, mine, &sync, When);
}

/// broadcast_buffer, put variant (paper): `targets[t]` is registered memory of thread t's
/// process (one per thread of the job, by thread id, e.g. from allocate_remote). `origin` is
/// copied into this thread's target, and down the tree each thread puts its target's bytes
/// into its children's targets (waiting for each put, serving calls) before calling them; every
/// thread then runs f(its target's first origin.size() bytes). Returns bad_destination (a
/// target per thread is missing, or lies in another process) or too_large (a target smaller
/// than origin) without sending anything. The targets table travels with every hop
/// (208 bytes per thread).
template <channel C = channel::write, class F>
call_status broadcast_buffer(thread_context& self, F f, std::span<const std::byte> origin,
                             std::span<const transfer::remote_memory_locator> targets) {
  return detail::start_broadcast_put<C>(self, f, origin, targets, nullptr, notify_on::transmit);
}
/// broadcast_buffer put variant naming `sync` (counted as broadcast() counts it).
template <channel C = channel::write, notify_on When = notify_on::consume, class F>
call_status broadcast_buffer(thread_context& self, F f, std::span<const std::byte> origin,
                             std::span<const transfer::remote_memory_locator> targets,
                             synchronizer& sync) {
  return detail::start_broadcast_put<C>(self, f, origin, targets, &sync, When);
}

/// broadcast_buffer, get variant (paper): every thread reads `origin` (registered memory
/// anywhere, e.g. this thread's; it must stay unchanged until every thread read it) by a remote
/// read, then runs f(bytes read). The reads are synchronous on each thread, as call_buffer_get's.
template <channel C = channel::write, class F>
void broadcast_buffer_get(thread_context& self, F f,
                          const transfer::remote_memory_locator& origin) {
  detail::start_broadcast<C, fabric::plain_shape>(self, detail::call_after_get<F>{f, origin}, {},
                                                  nullptr, notify_on::transmit);
}
/// broadcast_buffer_get naming `sync`: with notify_on::consume it is counted down once every
/// thread read `origin` and ran f, and `origin` may change from then on.
template <channel C = channel::write, notify_on When = notify_on::consume, class F>
void broadcast_buffer_get(thread_context& self, F f, const transfer::remote_memory_locator& origin,
                          synchronizer& sync) {
  detail::start_broadcast<C, fabric::plain_shape>(self, detail::call_after_get<F>{f, origin}, {},
                                                  &sync, When);
}

template <channel Mode>
class aggregator_to;

/// Aggregator (paper §4.4.2): calls of this thread through one one-sided mode, traditional
/// (batched, published every flush_size bytes or on flush()), overflow (published at once,
/// queued locally only while a messenger has no room) or adaptive (batched while the
/// destination is busy with what was published, published at once while it is idle). Cheap to construct; the messengers belong
/// to the thread (channels), so aggregators of one thread share them and keep FIFO per
/// destination.
template <channel Mode>
class aggregator {
  static_assert(Mode == channel::trad || Mode == channel::ovfl || Mode == channel::adaptive,
                "an aggregator is traditional (trad), overflow (ovfl) or adaptive");

 public:
  /// An aggregator of `self`'s calls (the owner thread's).
  explicit aggregator(thread_context& self) : self_(self) {}

  /// invoke::call through this aggregator's mode.
  template <class Policy = policy::fail, class F>
  call_status call(thread_id dest, const F& f) {
    return invoke::call<Mode, Policy>(self_, dest, f);
  }
  /// invoke::call_buffer through this aggregator's mode.
  template <class Policy = policy::fail, class F>
  call_status call_buffer(thread_id dest, const F& f, std::span<const std::byte> buffer) {
    return invoke::call_buffer<Mode, Policy>(self_, dest, f, buffer);
  }
  /// invoke::call_return through this aggregator's mode.
  template <class Policy = policy::fail, class F, class R>
  call_status call_return(thread_id dest, const F& f, return_slot<R>& slot) {
    return invoke::call_return<Mode, Policy>(self_, dest, f, slot);
  }
  /// invoke::call_return's future form through this aggregator's mode.
  template <class Policy = policy::fail, class F, class... Args>
    requires(!(detail::is_return_slot_v<Args> || ...))
  auto call_return(thread_id dest, const F& f, const Args&... args) {
    return invoke::call_return<Mode, Policy>(self_, dest, f, args...);
  }
  /// Publishes every batched call of this thread (all destinations).
  void flush() { channels_of(self_).flush(self_); }

  /// This aggregator's calls to `dest` alone, without a lookup per call (see aggregator_to).
  [[nodiscard]] aggregator_to<Mode> to(thread_id dest) const {
    return aggregator_to<Mode>(self_, dest);
  }

 private:
  thread_context& self_;
};

/// An aggregator's calls to one destination (paper §4.4: an RDMAAggregator is made on the
/// sending thread for one destination thread): the calls of aggregator<Mode> with `dest`, through
/// the same messenger (so FIFO with every other call of this thread to `dest`), without looking
/// the messenger up on each call. In trad mode it also keeps a copy of the messenger's join
/// window (messenger::join_view): a run of plain calls of one function then costs two stores
/// (the closure and the messenger's write offset) and checks whose loads no store waits for.
/// Made and used by one thread; valid while the thread's channels live (its run). Keep it a
/// local of the function that calls through it: the copy then stays in registers; as a member of
/// an object in memory it is loaded on every call, like the messenger's own words (a run of
/// calls through invoke::call<channel::trad> waits on the store-to-load forwarding of the write
/// offset from one call to the next, about 6 cycles). Throws seriema::error for a `dest` that is
/// not a thread of the job, and on a thread without channels (a service thread).
template <channel Mode>
class aggregator_to {
  static_assert(Mode == channel::trad || Mode == channel::ovfl || Mode == channel::adaptive,
                "an aggregator is traditional (trad), overflow (ovfl) or adaptive");

 public:
  /// `self`'s calls to `dest` (throws seriema::error, see the class).
  aggregator_to(thread_context& self, thread_id dest)
      : self_(self), dest_(dest), messenger_(&channels_of(self).to(dest)),
        view_(messenger_->view_join_window(Mode == channel::adaptive)) {}

  [[nodiscard]] thread_id destination() const noexcept { return dest_; }  ///< the destination

  /// invoke::call to the destination (a join of the open record when it can).
  template <class Policy = policy::fail, class F>
  [[gnu::always_inline]] call_status call(const F& f) {
    fabric::check_remote_closure<F>();
    const fabric::function_id id = fabric::function_wrapper<F, fabric::plain_shape>::id;
    if constexpr (Mode == channel::trad || Mode == channel::adaptive) {
      constexpr std::size_t stride = fabric::closure_stride(sizeof(F));
      // One branch for the three checks: the compiler then lays the join out as the straight
      // path of the caller's loop.
      const bool joins = (view_.function == id) & (view_.at + stride <= view_.quiet_limit) &
                         messenger_->join_view_current(view_);
      if (__builtin_expect(joins, 1)) {
        messenger_->join_through(view_, detail::bytes_of(f), stride);
        return call_status::ok;
      }
      const general_result r = send_general<Policy>(*messenger_, id, closure_argument(f));
      view_ = r.view;
      return r.status;
    } else {
      return write_or_send<Policy>(*messenger_, id, detail::bytes_of(f));
    }
  }
  /// invoke::call_buffer to the destination.
  template <class Policy = policy::fail, class F>
  call_status call_buffer(const F& f, std::span<const std::byte> buffer) {
    return renew(invoke::call_buffer<Mode, Policy>(self_, dest_, f, buffer));
  }
  /// invoke::call_return to the destination.
  template <class Policy = policy::fail, class F, class R>
  call_status call_return(const F& f, return_slot<R>& slot) {
    return renew(invoke::call_return<Mode, Policy>(self_, dest_, f, slot));
  }
  /// invoke::call_return's future form to the destination.
  template <class Policy = policy::fail, class F, class... Args>
    requires(!(detail::is_return_slot_v<Args> || ...))
  auto call_return(const F& f, const Args&... args) {
    auto result = invoke::call_return<Mode, Policy>(self_, dest_, f, args...);
    renew(call_status::ok);
    return result;
  }
  /// Publishes the calls batched for this destination (and moves its queued ones on).
  void flush() {
    messenger_->drain();
    messenger_->publish();
    renew(call_status::ok);
  }

 private:
  struct general_result {
    call_status status;
    messenger::join_view view;  ///< the window the call left
  };
  /// A trad call that does not join through the view: out of line, so that the join stays a
  /// straight run of instructions in the caller's loop; static, so that this object's address
  /// does not escape (its copy of the window then stays in registers).
  template <class Policy, class Closure>
  [[gnu::noinline]] static general_result send_general(messenger& m, fabric::function_id id,
                                                       const Closure closure) {
    std::span<const std::byte> bytes;
    if constexpr (std::is_same_v<Closure, std::span<const std::byte>>) {
      bytes = closure;
    } else {
      bytes = detail::bytes_of(closure);
    }
    const call_status status = write_or_send<Policy>(m, id, bytes);
    return {status, m.view_join_window(Mode == channel::adaptive)};
  }
  /// How send_general gets the closure. One under 16 bytes is copied into registers whole, so
  /// by value: its address then does not escape, and the caller's loop need not store it to
  /// the stack on every call (a store-buffer entry per call; trad 8 B ran at 0.6 x with it). A
  /// larger one is copied from memory in 8-byte pieces anyway, and a copy of it for every call
  /// that goes out of line (one per batch) would cost more than it saves: its bytes.
  template <class F>
  [[gnu::always_inline]] static auto closure_argument(const F& f) noexcept {
    if constexpr (sizeof(F) < 16) {
      return f;
    } else {
      return detail::bytes_of(f);
    }
  }
  /// A plain call through the messenger: its inline direct write, else its general path.
  template <class Policy>
  [[gnu::always_inline]] static call_status write_or_send(messenger& m, fabric::function_id id,
                                                          std::span<const std::byte> closure) {
    if (m.try_write_direct(Mode, id, closure, 0, {}, {})) return call_status::ok;
    return m.template send<Policy>(Mode, id, closure, 0, {}, {});
  }
  /// After a call through the free functions: the window they left.
  call_status renew(call_status status) noexcept {
    view_ = messenger_->view_join_window(Mode == channel::adaptive);
    return status;
  }

  thread_context& self_;
  thread_id dest_;
  messenger* messenger_;
  messenger::join_view view_;
};

}  // namespace seriema::invoke

// Overloads that only fail, each with one sentence naming a common mistake.
#include <seriema/invoke/detail/misuse.hpp>

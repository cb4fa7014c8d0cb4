// Overloads of the invoke primitives that exist only to fail: each matches one common mistake
// with a synchronizer or a notify_on (a pointer where the synchronizer belongs, another type
// there, a notify_on on a call that names no synchronizer, template arguments out of order) and
// stops the build with one static_assert sentence saying what to write, where the compiler would
// otherwise list every candidate of every primitive. Included at the end of invoke.hpp; checked
// by tests/diagnostics (each sentence, and no candidate list).
#pragma once

#include <seriema/invoke/channel.hpp>
#include <seriema/invoke/detail/primitives.hpp>
#include <seriema/invoke/synchronizer.hpp>
#include <seriema/transfer/remote_memory.hpp>
#include <span>
#include <type_traits>

namespace seriema::invoke {

namespace detail {

// Which primitive a diagnostic is for: each gets its own instantiation of the rejecting function,
// so that one mistake per primitive is reported (the compiler reports a failed static_assert
// once per instantiation).
enum class primitive {
  call,
  call_return,
  call_buffer,
  call_buffer_put,
  call_buffer_put_async,
  call_buffer_get,
  call_buffer_get_async,
  broadcast,
  broadcast_buffer,
  broadcast_buffer_put,
  broadcast_buffer_get
};

// True for the argument the synchronizer overloads take: a synchronizer lvalue, not const.
template <class S>
constexpr bool is_synchronizer_lvalue_v = std::is_same_v<S, synchronizer&>;

// One sentence for what stands where a synchronizer belongs (S as a forwarding reference
// deduces it). Exactly one of these fails for any S that is not a synchronizer lvalue.
template <class S, primitive Where>
constexpr void reject_synchronizer_argument() {
  static_assert(!is_synchronizer_pointer_v<S>,
                "seriema::invoke: pass the synchronizer itself, not a pointer to it: write "
                "(..., sync), not (..., &sync)");
  static_assert(is_synchronizer_like_v<S>,
                "seriema::invoke: this argument must be an invoke::synchronizer (the one the "
                "call counts down): invoke::synchronizer sync(me, n); then (..., sync)");
  static_assert(!is_synchronizer_v<S> || is_synchronizer_lvalue_v<S>,
                "seriema::invoke: the synchronizer must be a named, non-const synchronizer: the "
                "call counts it down");
}

template <primitive Where, class... T>
constexpr void reject_notify_on_without_synchronizer() {
  static_assert(dependent_false<T...>,
                "seriema::invoke: a notify_on says when a synchronizer is counted down, but this "
                "call names none: pass the synchronizer, or leave notify_on out");
}

template <primitive Where, class... T>
constexpr void reject_notify_on_before_policy() {
  static_assert(dependent_false<T...>,
                "seriema::invoke: the policy comes before notify_on: write <channel, "
                "policy::fail, notify_on::...>, or leave both out");
}

}  // namespace detail

/// @cond INTERNAL

// ---- Something other than a synchronizer lvalue where one belongs. At call and call_return the
// argument after the function (or slot) may be a serialized argument, so only a pointer to a
// synchronizer (or a const one) is caught there; at call_buffer and broadcast_buffer it may be a
// put variant's target(s), which are let through.

template <channel C = channel::write, class Policy = policy::fail,
          notify_on When = notify_on::consume, class F, class S, class... Args>
  requires(detail::is_synchronizer_like_v<S> && !detail::is_synchronizer_lvalue_v<S>)
call_status call(thread_context&, thread_id, const F&, S&&, const Args&...) {
  detail::reject_synchronizer_argument<S, detail::primitive::call>();
  return call_status::error;
}

template <channel C = channel::write, class Policy = policy::fail,
          notify_on When = notify_on::consume, class F, class R, class S, class... Args>
  requires(detail::is_synchronizer_like_v<S> && !detail::is_synchronizer_lvalue_v<S>)
call_status call_return(thread_context&, thread_id, const F&, return_slot<R>&, S&&,
                        const Args&...) {
  detail::reject_synchronizer_argument<S, detail::primitive::call_return>();
  return call_status::error;
}

template <channel C = channel::write, class Policy = policy::fail,
          notify_on When = notify_on::consume, class F, class S>
  requires(!detail::is_synchronizer_lvalue_v<S> &&
           !std::is_convertible_v<S, const transfer::remote_memory_locator&>)
call_status call_buffer(thread_context&, thread_id, const F&, std::span<const std::byte>, S&&) {
  detail::reject_synchronizer_argument<S, detail::primitive::call_buffer>();
  return call_status::error;
}

template <channel C = channel::write, class Policy = policy::fail,
          notify_on When = notify_on::consume, class F, class S>
  requires(!detail::is_synchronizer_lvalue_v<S>)
call_status call_buffer(thread_context&, thread_id, const F&, std::span<const std::byte>,
                        const transfer::remote_memory_locator&, S&&) {
  detail::reject_synchronizer_argument<S, detail::primitive::call_buffer_put>();
  return call_status::error;
}

template <channel C = channel::write, notify_on When = notify_on::consume, class F, class S>
  requires(!detail::is_synchronizer_lvalue_v<S>)
call_status call_buffer_put_async(thread_context&, thread_id, const F&, std::span<const std::byte>,
                                  const transfer::remote_memory_locator&, S&&) {
  detail::reject_synchronizer_argument<S, detail::primitive::call_buffer_put_async>();
  return call_status::error;
}

template <channel C = channel::write, class Policy = policy::fail,
          notify_on When = notify_on::consume, class F, class S>
  requires(!detail::is_synchronizer_lvalue_v<S>)
call_status call_buffer_get(thread_context&, thread_id, const F&,
                            const transfer::remote_memory_locator&, S&&) {
  detail::reject_synchronizer_argument<S, detail::primitive::call_buffer_get>();
  return call_status::error;
}

template <channel C = channel::write, class Policy = policy::fail, class F, class S>
  requires(!detail::is_synchronizer_lvalue_v<S>)
call_status call_buffer_get_async(thread_context&, thread_id, const F&,
                                  const transfer::remote_memory_locator&, S&&) {
  detail::reject_synchronizer_argument<S, detail::primitive::call_buffer_get_async>();
  return call_status::error;
}

template <channel C = channel::write, notify_on When = notify_on::consume, class F, class S>
  requires(!detail::is_synchronizer_lvalue_v<S>)
void broadcast(thread_context&, const F&, S&&) {
  detail::reject_synchronizer_argument<S, detail::primitive::broadcast>();
}

template <channel C = channel::write, notify_on When = notify_on::consume, class F, class S>
  requires(!detail::is_synchronizer_lvalue_v<S> &&
           !std::is_convertible_v<S, std::span<const transfer::remote_memory_locator>>)
void broadcast_buffer(thread_context&, const F&, std::span<const std::byte>, S&&) {
  detail::reject_synchronizer_argument<S, detail::primitive::broadcast_buffer>();
}

template <channel C = channel::write, notify_on When = notify_on::consume, class F, class S>
  requires(!detail::is_synchronizer_lvalue_v<S>)
call_status broadcast_buffer(thread_context&, const F&, std::span<const std::byte>,
                             std::span<const transfer::remote_memory_locator>, S&&) {
  detail::reject_synchronizer_argument<S, detail::primitive::broadcast_buffer_put>();
  return call_status::error;
}

template <channel C = channel::write, notify_on When = notify_on::consume, class F, class S>
  requires(!detail::is_synchronizer_lvalue_v<S>)
void broadcast_buffer_get(thread_context&, const F&, const transfer::remote_memory_locator&,
                          S&&) {
  detail::reject_synchronizer_argument<S, detail::primitive::broadcast_buffer_get>();
}

// ---- A synchronizer after serialized arguments (cereal would try to serialize it).

template <channel C = channel::write, class Policy = policy::fail, class F, class First,
          class... Rest>
  requires(!detail::is_synchronizer_like_v<First> && (detail::is_synchronizer_like_v<Rest> || ...))
call_status call(thread_context&, thread_id, const F&, const First&, const Rest&...) {
  static_assert(detail::dependent_false<F>,
                "seriema::invoke: the synchronizer goes right after the function, before the "
                "arguments: call(me, dest, f, sync, args...)");
  return call_status::error;
}

template <channel C = channel::write, class Policy = policy::fail, class F, class R, class First,
          class... Rest>
  requires(!detail::is_synchronizer_like_v<First> && (detail::is_synchronizer_like_v<Rest> || ...))
call_status call_return(thread_context&, thread_id, const F&, return_slot<R>&, const First&,
                        const Rest&...) {
  static_assert(detail::dependent_false<F>,
                "seriema::invoke: the synchronizer goes right after the slot, before the "
                "arguments: call_return(me, dest, f, slot, sync, args...)");
  return call_status::error;
}

// ---- A notify_on given to a call that names no synchronizer. No default for When here: these
// are viable only when a notify_on was written.

template <channel C, class Policy, notify_on When, class F, class... Rest>
  requires(!(detail::is_synchronizer_like_v<Rest> || ...))
call_status call(thread_context&, thread_id, const F&, const Rest&...) {
  detail::reject_notify_on_without_synchronizer<detail::primitive::call, F>();
  return call_status::error;
}

template <channel C, class Policy, notify_on When, class F, class... Rest>
  requires(!(detail::is_synchronizer_like_v<Rest> || ...))
call_status call_buffer(thread_context&, thread_id, const F&, const Rest&...) {
  detail::reject_notify_on_without_synchronizer<detail::primitive::call_buffer, F>();
  return call_status::error;
}

template <channel C, class Policy, notify_on When, class F, class... Rest>
  requires(!(detail::is_synchronizer_like_v<Rest> || ...))
call_status call_return(thread_context&, thread_id, const F&, const Rest&...) {
  detail::reject_notify_on_without_synchronizer<detail::primitive::call_return, F>();
  return call_status::error;
}

template <channel C, class Policy, notify_on When, class F, class... Rest>
  requires(!(detail::is_synchronizer_like_v<Rest> || ...))
call_status call_buffer_get(thread_context&, thread_id, const F&, const Rest&...) {
  detail::reject_notify_on_without_synchronizer<detail::primitive::call_buffer_get, F>();
  return call_status::error;
}

template <channel C, notify_on When, class F, class... Rest>
  requires(!(detail::is_synchronizer_like_v<Rest> || ...))
void broadcast(thread_context&, const F&, const Rest&...) {
  detail::reject_notify_on_without_synchronizer<detail::primitive::broadcast, F>();
}

template <channel C, notify_on When, class F, class... Rest>
  requires(!(detail::is_synchronizer_like_v<Rest> || ...))
void broadcast_buffer(thread_context&, const F&, const Rest&...) {
  detail::reject_notify_on_without_synchronizer<detail::primitive::broadcast_buffer, F>();
}

template <channel C, notify_on When, class F, class... Rest>
  requires(!(detail::is_synchronizer_like_v<Rest> || ...))
void broadcast_buffer_get(thread_context&, const F&, const Rest&...) {
  detail::reject_notify_on_without_synchronizer<detail::primitive::broadcast_buffer_get, F>();
}

// call_buffer_get_async counts its synchronizer down once f ran, always.
template <channel C, class Policy, notify_on When, class F, class... Rest>
call_status call_buffer_get_async(thread_context&, thread_id, const F&, const Rest&...) {
  static_assert(detail::dependent_false<F>,
                "seriema::invoke: call_buffer_get_async takes no notify_on: its synchronizer is "
                "counted down once f ran");
  return call_status::error;
}

// ---- call_buffer_put_async: no policy (its call waits for the put, then goes out as
// retry_async does), and a synchronizer always (the origin must not change until it counts).

template <channel C, class Policy, notify_on When = notify_on::consume, class F, class... Rest>
call_status call_buffer_put_async(thread_context&, thread_id, const F&, const Rest&...) {
  static_assert(detail::dependent_false<F>,
                "seriema::invoke: call_buffer_put_async takes no policy (its call is queued as "
                "with retry_async): write call_buffer_put_async<channel, notify_on>");
  return call_status::error;
}

template <channel C = channel::write, notify_on When = notify_on::consume, class F>
call_status call_buffer_put_async(thread_context&, thread_id, const F&, std::span<const std::byte>,
                                  const transfer::remote_memory_locator&) {
  static_assert(detail::dependent_false<F>,
                "seriema::invoke: call_buffer_put_async needs a synchronizer: origin must not "
                "change until it counts the call down");
  return call_status::error;
}

// ---- A notify_on written where the policy goes: <channel, notify_on> instead of
// <channel, policy, notify_on>.

template <channel C, notify_on When, class... Rest>
call_status call(thread_context&, thread_id, const Rest&...) {
  detail::reject_notify_on_before_policy<detail::primitive::call, Rest...>();
  return call_status::error;
}

template <channel C, notify_on When, class... Rest>
call_status call_buffer(thread_context&, thread_id, const Rest&...) {
  detail::reject_notify_on_before_policy<detail::primitive::call_buffer, Rest...>();
  return call_status::error;
}

template <channel C, notify_on When, class... Rest>
call_status call_return(thread_context&, thread_id, const Rest&...) {
  detail::reject_notify_on_before_policy<detail::primitive::call_return, Rest...>();
  return call_status::error;
}

template <channel C, notify_on When, class... Rest>
call_status call_buffer_get(thread_context&, thread_id, const Rest&...) {
  detail::reject_notify_on_before_policy<detail::primitive::call_buffer_get, Rest...>();
  return call_status::error;
}

/// @endcond

}  // namespace seriema::invoke

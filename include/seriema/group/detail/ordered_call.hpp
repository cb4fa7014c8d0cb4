// group::ordered_call's template part: the function travels as invoke does it (its registered id,
// its closure, its serialized arguments), in one slot of the sender's ring.
#pragma once

#include <seriema/invoke/detail/primitives.hpp>

namespace seriema::group {

namespace detail {

/// An ordered call without arguments: f() or f(ctx), as the invocation shape runs it.
template <class F>
struct without_arguments {
  F f;
  static constexpr std::uint32_t result_bytes = 0;
  void operator()(fabric::invocation& call) const {
    F copy = f;
    if constexpr (fabric::detail::takes_context_v<F>) {
      copy(*call.self);
    } else {
      copy();
    }
  }
};

template <class F, class... Args>
using ordered_wrapper =
    std::conditional_t<sizeof...(Args) == 0, without_arguments<F>,
                       invoke::detail::with_arguments<F, std::remove_cvref_t<Args>...>>;

}  // namespace detail

template <class F, class... Args>
invoke::future<void> group::ordered_call_until(deadline_clock::time_point deadline, F f,
                                               const Args&... args) {
  using wrapper = detail::ordered_wrapper<F, Args...>;
  fabric::check_remote_closure<wrapper>();
  const wrapper closure{f};
  invoke::detail::argument_scratch scratch;
  if constexpr (sizeof...(Args) > 0) {
    invoke::detail::serialize_arguments(scratch.bytes(), args...);
  } else {
    scratch.bytes().clear();
  }
  return send_call(fabric::function_wrapper<wrapper, fabric::invocation_shape>::id,
                   {reinterpret_cast<const std::byte*>(&closure), sizeof closure},
                   scratch.bytes(), deadline);
}

template <class F, class... Args>
invoke::future<void> group::ordered_call(F f, const Args&... args) {
  return ordered_call_until(no_deadline, f, args...);
}

}  // namespace seriema::group

// The machinery of call_return's future form: the closure that travels (it runs the function
// at the destination and shapes the reply: a fixed-size value, a serialized one, an exception's
// details, or a deferred reply for a function that returns a task or a future), the caller's
// record opened for the reply, and the decoding of a serialized value.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <seriema/fabric/function_registry.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/invoke/detail/argument_archive.hpp>
#include <seriema/invoke/detail/future_table.hpp>
#include <seriema/invoke/detail/primitives.hpp>
#include <seriema/invoke/errors.hpp>
#include <seriema/invoke/future.hpp>
#include <seriema/invoke/task.hpp>
#include <span>
#include <tuple>
#include <type_traits>
#include <vector>

namespace seriema::invoke::detail {

/// A serialized reply starts with one of these bytes.
enum class reply_tag : std::uint8_t {
  inline_bytes = 0,  ///< the value's serialization follows
  registered = 1,    ///< it lies in the callee's registered memory: a large_reply follows
};
/// Serialized values larger than this go through registered memory: the reply says where, and
/// the caller reads them with gets (so a value of any size, beyond what a message may carry).
inline constexpr std::size_t large_reply_bytes = 64 * 1024;
/// The value is cut into pieces of at most this size, each a registered allocation in the
/// callee's zone (an allocation lies in one 2 MiB arena block).
inline constexpr std::size_t large_piece_bytes = 1024 * 1024;

/// A large value's header in the reply (after the tag), followed by `pieces` large_piece.
struct large_reply {
  std::uint64_t size = 0;    ///< the value's bytes
  std::uint32_t pieces = 0;  ///< how many pieces follow
  std::uint32_t reserved = 0;
};
/// One piece: registered memory the callee allocated, which the caller reads and then frees
/// with a service call (`where.size` as allocated; `size` the value's bytes in it).
struct large_piece {
  transfer::remote_memory_locator where;
  std::uint64_t size = 0;
};

/// This thread's buffer for a failure's details: valid until the next failure this thread
/// describes (failures are sent at once by a path that runs no calls meanwhile).
std::vector<std::byte>& failure_scratch();

/// The reply bytes of a serialized value in `out` (its tag, then the bytes inline, or where
/// they lie after copying them into registered memory of this thread's zone). Throws
/// seriema::error when that memory cannot be had.
std::span<std::byte> finish_serialized_reply(thread_context& self, std::vector<std::byte>& out);

/// Serializes `value` into `out` as a reply (see finish_serialized_reply).
template <class V>
std::span<std::byte> serialize_reply(thread_context& self, const V& value,
                                     std::vector<std::byte>& out) {
  out.clear();
  out.push_back(static_cast<std::byte>(reply_tag::inline_bytes));
  {
    argument_output_archive archive(out);
    archive(value);
  }
  return finish_serialized_reply(self, out);
}

/// Decodes a serialized V (the bytes after the tag) into r's object; false when the bytes are
/// not exactly a serialization of V (peer-written: every length bounded).
template <class V>
bool decode_reply(future_record& r, std::span<const std::byte> bytes) {
  static_assert(std::is_default_constructible_v<V>,
                "call_return: a serialized result type must be default constructible");
  try {
    argument_input_archive archive(bytes);
    V value{};
    archive(value);
    if (archive.remaining() != 0) return false;
    emplace_value<V>(r, std::move(value));
    return true;
  } catch (...) {
    return false;
  }
}

/// Whether values of V travel as their bytes (reply cells and table, as return_slot) or
/// serialized.
template <class V>
inline constexpr bool fixed_reply_v = std::is_trivially_copyable_v<V>;

/// Opens a record of `table` for the reply of a call to `dest` whose value is a T.
template <class T>
future<T> open_reply_future(future_table& table, thread_id dest,
                            fabric::thread_context::opened_reply& opened) {
  using V = value_of<T>;
  future_record* r;
  if constexpr (fixed_reply_v<V>) {
    r = &table.open_reply(dest, static_cast<std::uint32_t>(sizeof(V)), nullptr);
  } else {
    r = &table.open_reply(dest, 0, &decode_reply<V>);
  }
  opened = {r->index, r->generation, r->source == record_source::cell, r->process};
  return future<T>(table, *r);
}

/// After the call was sent or refused: a call that never left fails its reply (not_executed),
/// and the future keeps what sending returned.
template <class T>
void note_sent(future<T>& f, call_status status) {
  f.record()->status = status;
  if (!fabric::reached_transport(status)) {
    f.table()->self().fail_unsent_reply(f.record()->index);
  }
}

/// The reply bytes of `value` for a deferred reply, in `out`.
template <class V>
std::span<const std::byte> reply_bytes_of(thread_context& self, const V& value,
                                          std::vector<std::byte>& out) {
  if constexpr (fixed_reply_v<V>) {
    out.resize(sizeof(V));
    std::memcpy(out.data(), &value, sizeof(V));
    return out;
  } else {
    return serialize_reply(self, value, out);
  }
}

/// Sends the reply of a call whose function threw (describing the exception being handled;
/// call inside a catch block) or whose deferred value ended in a failure.
void send_deferred_failure(thread_context& self, thread_id caller, std::uint32_t slot,
                           std::uint32_t generation, std::exception_ptr failure) noexcept;

/// A call whose function returned a future (or a task, spawned): its reply goes when that ends.
template <class T>
struct deferred_reply_node {
  future<T> pending;
  thread_id caller;
  std::uint32_t slot;
  std::uint32_t generation;
  std::shared_ptr<void> keep;  ///< the closure and arguments a coroutine handler refers to

  static void fire(void* context, future_record&) {
    std::unique_ptr<deferred_reply_node> node(static_cast<deferred_reply_node*>(context));
    node->send();
  }
  void send() noexcept {
    thread_context& self = pending.table()->self();
    future_record& r = *pending.record();
    r.observed = true;
    try {
      if (r.outcome() == outcome::done) {
        const value_of<T> value = take_value<value_of<T>>(r);
        fabric::detail::scratch_lease bytes;
        self.send_reply_value(caller, slot, generation, reply_bytes_of(self, value, bytes.bytes()));
      } else {
        send_deferred_failure(self, caller, slot, generation, failure_of(r));
      }
    } catch (...) {
      send_deferred_failure(self, caller, slot, generation, std::current_exception());
    }
    note_deferred_finished(self);
  }
};

/// Turns what the function returned into a future of the callee's thread, marks the call's
/// reply deferred, and sends it once that future ended.
template <class R>
void defer_reply(thread_context& self, R&& pending, const fabric::invocation& call,
                 std::shared_ptr<void> keep) {
  using D = std::decay_t<R>;
  using T = unwrapped_t<D>;
  future_table& table = futures_of(self);
  future<T> f;
  if constexpr (is_task<D>::value) {
    f = spawn_on(table, std::move(pending));
  } else {
    f = std::move(pending);
  }
  note_deferred_started(self);
  auto* node = new deferred_reply_node<T>{std::move(f), call.source, call.reply->slot,
                                          call.reply->generation, std::move(keep)};
  call.reply->deferred = true;
  table.watch(*node->pending.record(), {&deferred_reply_node<T>::fire, node});
}

/// The closure of call_return's future form: f with its arguments (serialized in the call's
/// buffer), run at the destination; the reply made from what it returns (see reply_channel).
template <class F, class... Args>
struct future_call {
  F f;

  template <class G = F>
  static auto probe() {
    if constexpr (std::is_invocable_v<G&, thread_context&, Args&...>) {
      return std::type_identity<std::invoke_result_t<G&, thread_context&, Args&...>>{};
    } else {
      return std::type_identity<std::invoke_result_t<G&, Args&...>>{};
    }
  }
  /// What f returns, and the value the caller's future gets.
  using returned = typename decltype(probe())::type;
  using result_type = unwrapped_t<std::decay_t<returned>>;
  using value_type = value_of<result_type>;
  static constexpr bool deferred = is_future<std::decay_t<returned>>::value ||
                                   is_task<std::decay_t<returned>>::value;
  static constexpr std::uint32_t result_bytes =
      fixed_reply_v<value_type> ? static_cast<std::uint32_t>(sizeof(value_type))
                                : fabric::variable_result_size;

  void operator()(fabric::invocation& call) const {
    std::tuple<Args...> args;
    if constexpr (sizeof...(Args) > 0) {
      if (!deserialize_arguments(call, args)) {
        if (call.reply != nullptr) call.reply->result = outcome::not_executed;
        return;
      }
    }
    if (call.reply == nullptr) {  // no reply expected (a forged or test call): run it only
      (void)run(call, args);
      return;
    }
    // The exception is described where it is caught (no rethrow: a throw costs a microsecond).
    try {
      respond(call, args);
    } catch (const std::exception& e) {
      fail_reply(call, &e);
    } catch (...) {
      fail_reply(call, nullptr);
    }
  }

 private:
  decltype(auto) run(fabric::invocation& call, std::tuple<Args...>& args) const {
    F copy = f;
    return apply_arguments(copy, *call.self, args);
  }
  // A deferred reply's function runs on a copy of the closure and arguments that lives until
  // the reply went: a coroutine lambda refers to its captures, and a coroutine's reference
  // parameters to the arguments, long after this call returned.
  static void fail_reply(fabric::invocation& call, const std::exception* caught) {
    std::vector<std::byte>& details = failure_scratch();
    details.clear();
    describe_current_exception(details, caught);
    call.reply->result = outcome::threw;
    call.reply->details = details;
  }
  struct kept_call {
    F f;
    std::tuple<Args...> args;
  };
  void respond(fabric::invocation& call, std::tuple<Args...>& args) const {
    thread_context& self = *call.self;
    if constexpr (deferred) {
      auto kept = std::make_shared<kept_call>(kept_call{f, std::move(args)});
      defer_reply(self, apply_arguments(kept->f, self, kept->args), call, kept);
    } else if constexpr (std::is_void_v<returned>) {
      (void)run(call, args);
      std::memset(call.result.data(), 0, call.result.size());
    } else if constexpr (fixed_reply_v<value_type>) {
      const value_type value = run(call, args);
      std::memcpy(call.result.data(), &value, sizeof value);
    } else {
      const value_type value = run(call, args);
      // The receive path leased the buffer for a function of variable_result_size.
      call.result = serialize_reply(self, value, *call.reply->storage);
    }
  }
};

}  // namespace seriema::invoke::detail

namespace seriema::invoke::detail {

/// call_return's future form on channel C: opens the caller's record, sends the call (its
/// arguments serialized into the call's buffer), and gives the future.
template <channel C, class Policy, class F, class... Args>
auto call_returning_future(thread_context& self, thread_id dest, const F& f,
                           const Args&... args) {
  using closure = future_call<F, std::remove_cvref_t<Args>...>;
  using R = typename closure::result_type;
  fabric::check_remote_closure<F>();
  future_table& table = futures_of(self);
  fabric::thread_context::opened_reply opened;
  future<R> out = open_reply_future<R>(table, dest, opened);
  std::optional<argument_scratch> scratch;  // leased only for arguments
  std::span<const std::byte> buffer;
  if constexpr (sizeof...(Args) > 0) {
    serialize_arguments(scratch.emplace().bytes(), args...);
    buffer = scratch->bytes();
  }
  const closure call{f};
  call_status status;
  if constexpr (C == channel::send) {
    status = self.call_with_reply_as<fabric::invocation_shape>(dest, call, buffer, opened.index,
                                                               opened.generation);
  } else {
    const wire::reply_extra extra{opened.index, opened.generation};
    status = one_sided<Policy>(self, dest, C,
                               fabric::function_wrapper<closure, fabric::invocation_shape>::id,
                               bytes_of(call), wire::flag_reply, bytes_of(extra), buffer);
  }
  note_sent(out, status);
  return out;
}

}  // namespace seriema::invoke::detail

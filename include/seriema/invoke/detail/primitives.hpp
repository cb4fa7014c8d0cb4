// The machinery behind invoke.hpp's primitives: dispatch of one call to its channel, the
// closures that carry notices and replies, serialized arguments (cereal), and the put and get
// variants' transfers. Inline templates: the typed caller's sizes become constants.
#pragma once

#include <cereal/archives/binary.hpp>
#include <cereal/types/array.hpp>
#include <cereal/types/map.hpp>
#include <cereal/types/optional.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/tuple.hpp>
#include <cereal/types/unordered_map.hpp>
#include <cereal/types/utility.hpp>
#include <cereal/types/vector.hpp>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <vector>
#include <seriema/fabric/detail/scratch.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/invoke/detail/argument_archive.hpp>
#include <seriema/invoke/channel.hpp>
#include <seriema/invoke/detail/messenger.hpp>
#include <seriema/invoke/synchronizer.hpp>
#include <span>


namespace seriema::invoke {

using fabric::return_slot;

namespace detail {

template <class F>
std::span<const std::byte> bytes_of(const F& f) noexcept {
  return {reinterpret_cast<const std::byte*>(&f), sizeof(F)};
}

// Sends a call_return's value back to the caller over the reverse messenger (queued when that
// one is full: a reply is never dropped for lack of room).
void send_reply(thread_context& self, thread_id caller, std::uint32_t slot,
                std::uint32_t generation, std::span<const std::byte> value);
// After a one-sided call that expected a reply ran: sends what its reply channel says (nothing
// when deferred; a failure with its details; else `value` through send_reply).
void finish_reply(thread_context& self, thread_id caller, const fabric::reply_channel& reply,
                  std::span<const std::byte> value);

// Always inlined into the typed caller: the record's sizes are then constants, and the common
// case (try_write_direct) compiles to a few stores.
template <class Policy>
[[gnu::always_inline]] inline call_status one_sided(thread_context& self, thread_id dest,
                                                    channel c, fabric::function_id function,
                                                    std::span<const std::byte> closure,
                                                    std::uint32_t flags,
                                                    std::span<const std::byte> extras,
                                                    std::span<const std::byte> buffer) {
  channels& table = channels_of(self);
  if (messenger* m = table.existing(dest);
      m != nullptr && m->try_write_direct(c, function, closure, flags, extras, buffer)) {
    return call_status::ok;
  }
  if (dest >= self.thread_count()) return call_status::bad_destination;
  return table.to(dest).template send<Policy>(c, function, closure, flags, extras, buffer);
}

// A send-based call whose caller asked for a consumption notice: runs the function in its own
// shape, then decrements the caller's synchronizer word (channels::notify_thread: an atomic in
// this process, a feedback active message otherwise).
template <class F, class Shape>
struct notify_after {
  F f;
  std::uint32_t word;
  static constexpr std::uint32_t result_bytes = fabric::function_wrapper<F, Shape>::result_size();
  void operator()(fabric::invocation& call) const {
    fabric::function_wrapper<F, Shape>::invoke(reinterpret_cast<const std::byte*>(&f), call);
    channels_of(*call.self).notify_thread(call.source, word, wire::count_down_one);
  }
};

// Always inlined: callers pass the channel as a constant, so only its branch remains.
template <class Policy, class Shape, class F>
[[gnu::always_inline]] inline call_status dispatch(thread_context& self, channel c, thread_id dest,
                                                   const F& f, std::span<const std::byte> buffer,
                                                   synchronizer* sync, notify_on when) {
  fabric::check_remote_closure<F>();
  const fabric::function_id id = fabric::function_wrapper<F, Shape>::id;
  call_status status;
  if (c == channel::send) {
    if (sync != nullptr && when == notify_on::consume) {
      // The notice needs the destination's channels, which attached threads do not have.
      if (dest >= self.thread_count()) return call_status::bad_destination;
      sync->note_target(dest);
      status = self.call_as<fabric::invocation_shape>(dest, notify_after<F, Shape>{f, sync->word()},
                                                      buffer);
    } else {
      status = self.call_as<Shape>(dest, f, buffer);
    }
  } else if (sync != nullptr && when == notify_on::consume) {
    sync->note_target(dest);
    wire::notify_extra extra{sync->word(), 0};
    status = one_sided<Policy>(self, dest, c, id, bytes_of(f), wire::flag_notify,
                               bytes_of(extra), buffer);
  } else {
    status = one_sided<Policy>(self, dest, c, id, bytes_of(f), 0, {}, buffer);
  }
  if (fabric::reached_transport(status) && sync != nullptr && when == notify_on::transmit) {
    // Captures and buffer were copied (chunk, staging unit, queue, sent, or staged for UCX).
    sync->decrement();
  }
  return status;
}

// The extras of a one-sided call_return that also asks for a consumption notice, in the order
// the receiver parses them (wire::parse_record).
struct reply_notify_extras {
  wire::reply_extra reply;
  wire::notify_extra notify;
};

// call_return on any channel, for a closure of shape Shape (return, or invocation for wrappers
// that write the result themselves); `sync` (optional) is decremented as dispatch does.
template <channel C, class Policy, class Shape, class F, class R>
call_status returning(thread_context& self, thread_id dest, const F& f,
                      std::span<const std::byte> buffer, return_slot<R>& slot,
                      synchronizer* sync = nullptr, notify_on when = notify_on::transmit) {
  fabric::check_remote_closure<F>();
  static_assert(fabric::function_wrapper<F, Shape>::result_size() == sizeof(R),
                "call_return: the slot's type must be the function's return type");
  const bool on_consume = sync != nullptr && when == notify_on::consume;
  if (on_consume) sync->note_target(dest);
  call_status status;
  if constexpr (C == channel::send) {
    if (on_consume) {
      status = self.call_return_as<fabric::invocation_shape>(
          dest, notify_after<F, Shape>{f, sync->word()}, buffer, slot);
    } else {
      status = self.call_return_as<Shape>(dest, f, buffer, slot);
    }
  } else {
    auto [index, generation] = self.open_reply_for(slot, dest);
    const fabric::function_id id = fabric::function_wrapper<F, Shape>::id;
    if (on_consume) {
      reply_notify_extras extras{{index, generation}, {sync->word(), 0}};
      status = one_sided<Policy>(self, dest, C, id, bytes_of(f),
                                 wire::flag_reply | wire::flag_notify, bytes_of(extras), buffer);
    } else {
      wire::reply_extra extra{index, generation};
      status = one_sided<Policy>(self, dest, C, id, bytes_of(f), wire::flag_reply,
                                 bytes_of(extra), buffer);
    }
    if (status != call_status::ok) self.fail_unsent_reply(index);
  }
  if (fabric::reached_transport(status) && sync != nullptr && when == notify_on::transmit) {
    sync->decrement();
  }
  return status;
}

// Checks a call by registered id against this process's registry (every process of the job has
// the same one: the runtime refuses skew): the id is registered, its closure has `closure_size`
// bytes, and it returns a value exactly when `returns`. Throws seriema::error naming the
// mismatch (a programming error, like a closure that is not trivially copyable).
void check_registered_call(fabric::function_id id, std::size_t closure_size, bool returns);
[[noreturn]] void throw_result_size_mismatch(fabric::function_id id, std::size_t registered,
                                             std::size_t slot);

// A call of a registered id on channel C (the closure's bytes as they are).
template <channel C, class Policy, class Closure>
call_status call_registered_id(thread_context& self, thread_id dest, fabric::function_id id,
                               const Closure& closure, std::span<const std::byte> buffer) {
  fabric::check_remote_closure<Closure>();
  check_registered_call(id, sizeof(Closure), false);
  if constexpr (C == channel::send) {
    return self.call_by_id(dest, id, bytes_of(closure), buffer);
  } else {
    return one_sided<Policy>(self, dest, C, id, bytes_of(closure), 0, {}, buffer);
  }
}

// A call_return of a registered id on channel C.
template <channel C, class Policy, class Closure, class R>
call_status call_return_registered_id(thread_context& self, thread_id dest, fabric::function_id id,
                                      const Closure& closure, return_slot<R>& slot) {
  fabric::check_remote_closure<Closure>();
  check_registered_call(id, sizeof(Closure), true);
  if (const fabric::function_entry* entry = fabric::function_registry::instance().find(id);
      entry->result_size != sizeof(R)) {
    throw_result_size_mismatch(id, entry->result_size, sizeof(R));
  }
  if constexpr (C == channel::send) {
    return self.call_return_by_id(dest, id, bytes_of(closure), {}, slot);
  } else {
    auto [index, generation] = self.open_reply_for(slot, dest);
    wire::reply_extra extra{index, generation};
    const call_status status = one_sided<Policy>(self, dest, C, id, bytes_of(closure),
                                                 wire::flag_reply, bytes_of(extra), {});
    if (status != call_status::ok) self.fail_unsent_reply(index);
    return status;
  }
}

// ---- Serialized arguments (cereal): non-trivially-copyable values travel as the call's buffer.

// Bytes of serialized arguments, in a per-thread scratch buffer that stays valid until the lease
// is destroyed (leases nest: a Retry call serves calls that serialize too).
using argument_scratch = fabric::detail::scratch_lease;

template <class... Args>
void serialize_arguments(std::vector<std::byte>& out, const Args&... args) {
  out.clear();
  argument_output_archive archive(out);
  archive(args...);
}

// Counts (runtime counters: rejected_arguments) and reports arguments that did not deserialize.
void reject_arguments(thread_context& self, std::uint32_t source, const char* what) noexcept;

// Decodes every argument from `bytes` (peer-written: argument_input_archive bounds every length
// by the bytes left); null when they are exactly a serialization of Args, else why not.
template <class... Args>
const char* decode_arguments(std::span<const std::byte> bytes, std::tuple<Args...>& args) {
  try {
    argument_input_archive archive(bytes);
    std::apply([&](auto&... a) { archive(a...); }, args);
    return archive.remaining() == 0 ? nullptr : "bytes left after the last argument";
  } catch (const std::bad_alloc&) {
    return "out of memory decoding the arguments";
  } catch (const std::exception&) {
    return "the bytes are not a serialization of the function's arguments";
  }
}

// Deserializes every argument from the call's buffer; false (counted, reported) when the bytes
// are not exactly a serialization of Args: a corrupt record, never a crash.
template <class... Args>
bool deserialize_arguments(fabric::invocation& call, std::tuple<Args...>& args) {
  if (const char* why = decode_arguments(call.buffer, args)) {
    reject_arguments(*call.self, call.source, why);
    return false;
  }
  return true;
}

template <class F, class... Args>
decltype(auto) apply_arguments(F& f, thread_context& self, std::tuple<Args...>& args) {
  return std::apply(
      [&](auto&... a) -> decltype(auto) {
        if constexpr (std::is_invocable_v<F&, thread_context&, Args&...>) {
          return f(self, a...);
        } else {
          return f(a...);
        }
      },
      args);
}

template <class F, class... Args>
using result_with_arguments_t =
    typename std::conditional_t<std::is_invocable_v<F&, thread_context&, Args&...>,
                                std::invoke_result<F&, thread_context&, Args&...>,
                                std::invoke_result<F&, Args&...>>::type;

// The closure that travels for call(dest, f, args...): f, with the arguments in the buffer.
template <class F, class... Args>
struct with_arguments {
  F f;
  static constexpr std::uint32_t result_bytes = 0;
  void operator()(fabric::invocation& call) const {
    std::tuple<Args...> args;
    if (!deserialize_arguments(call, args)) return;
    F copy = f;
    (void)apply_arguments(copy, *call.self, args);
  }
};

// call_return(dest, f, slot, args...): as with_arguments, the value written into the result.
template <class F, class... Args>
struct returning_with_arguments {
  using result_type = result_with_arguments_t<F, Args...>;
  static_assert(std::is_trivially_copyable_v<result_type>,
                "call_return: the return value must be trivially copyable");
  F f;
  static constexpr std::uint32_t result_bytes = sizeof(result_type);
  void operator()(fabric::invocation& call) const {
    std::tuple<Args...> args;
    result_type value{};
    if (deserialize_arguments(call, args)) {
      F copy = f;
      value = apply_arguments(copy, *call.self, args);
    }
    std::memcpy(call.result.data(), &value, sizeof value);
  }
};

template <class T>
constexpr bool is_synchronizer_v = std::is_same_v<std::remove_cvref_t<T>, synchronizer>;
template <class T>
struct is_return_slot : std::false_type {};
template <class R>
struct is_return_slot<return_slot<R>> : std::true_type {};
template <class T>
constexpr bool is_return_slot_v = is_return_slot<std::remove_cvref_t<T>>::value;
// A pointer to a synchronizer: `&sync` where `sync` belongs.
template <class T>
constexpr bool is_synchronizer_pointer_v =
    std::is_pointer_v<std::remove_cvref_t<T>> &&
    std::is_same_v<std::remove_cv_t<std::remove_pointer_t<std::remove_cvref_t<T>>>, synchronizer>;
// A synchronizer, or what a caller may have meant as one (a pointer to it).
template <class T>
constexpr bool is_synchronizer_like_v = is_synchronizer_v<T> || is_synchronizer_pointer_v<T>;
// Compile-time false that depends on T, for static_asserts of overloads that only fail.
template <class... T>
constexpr bool dependent_false = false;

}  // namespace detail

namespace detail {

// Waits (serving calls), until `deadline`, for the thread's put or get left in flight to
// `process` by an earlier deadline (fabric::detail::staged_sends::leave); false if it is still.
bool settle_left(thread_context& self, int process, fabric::deadline_clock::time_point deadline);
// Puts `bytes` into `target` (direct copy when mapped) and waits for remote completion
// (deadline_exceeded: the deadline in force passed first; peer_failed: the target died).
call_status put_and_wait(thread_context& self, std::span<const std::byte> bytes,
                         const transfer::remote_memory_locator& target);
// Reads the whole of `origin` (waiting, while serving calls); throws seriema::error on failure,
// seriema::deadline_error past the deadline in force.
std::vector<std::byte> read_remote(thread_context& self,
                                   const transfer::remote_memory_locator& origin);

// Runs the user's buffer function on a buffer that lies in the executing thread's memory.
template <class F>
void run_on_buffer(const F& f, thread_context& self, std::span<std::byte> buffer) {
  F copy = f;
  if constexpr (std::is_invocable_v<F&, thread_context&, std::span<std::byte>>) {
    copy(self, buffer);
  } else {
    copy(buffer);
  }
}

// call_buffer, put variant: the buffer was put into (address, size) of the destination's
// memory before this call was sent.
template <class F>
struct call_on_put_buffer {
  F f;
  std::uint64_t address;
  std::uint64_t size;
  void operator()(thread_context& self) const {
    run_on_buffer(f, self, {reinterpret_cast<std::byte*>(address), static_cast<std::size_t>(size)});
  }
};

// call_buffer, get variant: the destination reads `origin` (a remote read), then runs f on it.
template <class F>
struct call_after_get {
  F f;
  transfer::remote_memory_locator origin;
  void operator()(thread_context& self) const {
    std::vector<std::byte> local = read_remote(self, origin);
    run_on_buffer(f, self, local);
  }
};

// call_buffer_get, async variant: the destination starts the read and goes on serving calls;
// f runs on a later poll once the bytes are there, then the caller's synchronizer word (if any)
// is decremented: the origin may be reused from then on.
template <class F>
struct call_after_get_async {
  F f;
  transfer::remote_memory_locator origin;
  std::uint32_t word;  // the caller's synchronizer word; 0: none
  static constexpr std::uint32_t result_bytes = 0;
  void operator()(fabric::invocation& call) const {
    channels_of(*call.self)
        .read_async(origin, [fn = f, word = word, caller = call.source](
                                thread_context& self, std::span<std::byte> bytes, bool ok) {
          if (ok) run_on_buffer(fn, self, bytes);
          if (word != 0) channels_of(self).notify_thread(caller, word, wire::count_down_one);
        });
  }
};

// Runs a broadcast's function here, in its shape.
template <class Shape, class F>
void run_broadcast_function(const F& f, thread_context& self, std::span<std::byte> buffer) {
  F copy = f;
  if constexpr (std::is_same_v<Shape, fabric::buffer_shape>) {
    run_on_buffer(copy, self, buffer);
  } else if constexpr (fabric::detail::takes_context_v<F>) {
    copy(self);
  } else {
    copy();
  }
}

// The children of this thread in the binary tree over n threads rooted at `root` (ids relative
// to it): up to two thread ids, `count` of them.
struct tree_children {
  std::array<thread_id, 2> ids{};
  std::uint32_t count = 0;
};
inline tree_children children_in_tree(thread_id self, std::uint32_t root, std::uint32_t n) {
  tree_children out;
  const std::uint32_t relative = (self + n - root) % n;
  for (std::uint32_t child = 2 * relative + 1; child <= 2 * relative + 2 && child < n; ++child) {
    out.ids[out.count++] = (child + root) % n;
  }
  return out;
}

// After a broadcast's function ran here: counts the root's synchronizer word down (0: none).
inline void report_broadcast_ran(thread_context& self, std::uint32_t root, std::uint32_t word) {
  if (word != 0) channels_of(self).notify_thread(root, word, wire::count_down_one);
}

// A broadcast names `sync` (notified `when`): one broadcast counts as one call. On consumption
// every thread reports once it ran the function, so the count grows by threads - 1 and every
// process becomes a target (its death ends the wait). Returns the word the hops report to (0:
// none, transmit).
std::uint32_t open_broadcast_notices(thread_context& self, synchronizer& sync, notify_on when);

// A hop of a broadcast: forward to this thread's children in the binary tree rooted at `root`,
// then run f here, then report to the root's synchronizer word (0: none). Forwarding queues when
// a ring is full (retry_async): a handler never blocks.
template <channel C, class F, class Shape>
struct broadcast_hop {
  F f;
  std::uint32_t root;
  std::uint32_t word;
  void operator()(thread_context& self, std::span<std::byte> buffer) const { hop(self, buffer); }
  void operator()(thread_context& self) const { hop(self, {}); }

  void hop(thread_context& self, std::span<std::byte> buffer) const {
    const tree_children children = children_in_tree(self.id(), root, self.thread_count());
    for (std::uint32_t i = 0; i < children.count; ++i) {
      (void)dispatch<policy::retry_async, Shape>(self, C, children.ids[i], *this, buffer, nullptr,
                                                 notify_on::transmit);
    }
    run_broadcast_function<Shape>(f, self, buffer);
    report_broadcast_ran(self, root, word);
  }
};

// Checks a broadcast_buffer put variant's targets: one per thread, each in its thread's process
// and at least `size` bytes. ok, bad_destination or too_large.
call_status check_broadcast_targets(thread_context& self, std::uint64_t size,
                                    std::span<const transfer::remote_memory_locator> targets);

// A hop of broadcast_buffer's put variant. Its buffer is the table of every thread's target
// (remote_memory_locator, by thread id); this thread's bytes are already in its own target.
// It puts them into each child's target (waiting, serving calls), then calls the child, then
// runs f on its target, then reports to the root. The table is peer-written: a table of the
// wrong size is refused (counted as rejected arguments), a target outside this thread's process
// or smaller than `size` too.
template <channel C, class F>
struct broadcast_put_hop {
  F f;
  std::uint32_t root;
  std::uint32_t word;
  std::uint64_t size;
  void operator()(thread_context& self, std::span<std::byte> table) const {
    const std::uint32_t n = self.thread_count();
    if (table.size() != std::size_t{n} * sizeof(transfer::remote_memory_locator)) {
      return reject_arguments(self, root, "broadcast_buffer: the target table has a wrong size");
    }
    const auto target = [&](thread_id t) {
      transfer::remote_memory_locator l;
      std::memcpy(&l, table.data() + std::size_t{t} * sizeof l, sizeof l);
      return l;
    };
    const transfer::remote_memory_locator mine = target(self.id());
    if (mine.process != self.process() || mine.size < size) {
      return reject_arguments(self, root, "broadcast_buffer: this thread's target is not here");
    }
    const std::span<std::byte> bytes(reinterpret_cast<std::byte*>(mine.address),
                                     static_cast<std::size_t>(size));
    const tree_children children = children_in_tree(self.id(), root, n);
    for (std::uint32_t i = 0; i < children.count; ++i) {
      if (put_and_wait(self, bytes, target(children.ids[i])) != call_status::ok) continue;
      (void)dispatch<policy::retry_async, fabric::buffer_shape>(self, C, children.ids[i], *this,
                                                               table, nullptr,
                                                               notify_on::transmit);
    }
    run_on_buffer(f, self, bytes);
    report_broadcast_ran(self, root, word);
  }
};

// Sends a broadcast of `f` (plain or buffer shape) from this thread, the root, naming `sync`
// when not null.
template <channel C, class Shape, class F>
void start_broadcast(thread_context& self, const F& f, std::span<std::byte> buffer,
                     synchronizer* sync, notify_on when) {
  fabric::check_remote_closure<F>();
  const std::uint32_t word = sync != nullptr ? open_broadcast_notices(self, *sync, when) : 0;
  broadcast_hop<C, F, Shape>{f, self.id(), word}.hop(self, buffer);
  if (sync != nullptr && when == notify_on::transmit) sync->decrement();
}

// broadcast_buffer, put variant, from the root.
template <channel C, class F>
call_status start_broadcast_put(thread_context& self, const F& f,
                                std::span<const std::byte> origin,
                                std::span<const transfer::remote_memory_locator> targets,
                                synchronizer* sync, notify_on when) {
  fabric::check_remote_closure<F>();
  const call_status checked = check_broadcast_targets(self, origin.size(), targets);
  if (checked != call_status::ok) return checked;
  // The root's own target is in its process: a plain copy.
  std::memcpy(reinterpret_cast<void*>(targets[self.id()].address), origin.data(), origin.size());
  const std::uint32_t word = sync != nullptr ? open_broadcast_notices(self, *sync, when) : 0;
  // The hop takes the table as a call's (mutable) buffer: the root hands it a copy of its own.
  std::vector<transfer::remote_memory_locator> table(targets.begin(), targets.end());
  const broadcast_put_hop<C, F> first_hop{f, self.id(), word, origin.size()};
  first_hop(self, std::as_writable_bytes(std::span(table)));
  if (sync != nullptr && when == notify_on::transmit) sync->decrement();
  return call_status::ok;
}

// Whether `target` can take `size` bytes for a call to `dest`: ok, bad_destination (no such
// thread, or the target is in another process) or too_large.
inline call_status check_put_target(thread_context& self, thread_id dest, std::size_t size,
                                    const transfer::remote_memory_locator& target) {
  if (dest >= self.thread_count()) return call_status::bad_destination;
  if (target.process != self.rt().placement().locate(dest).process) {
    return call_status::bad_destination;
  }
  return size > target.size ? call_status::too_large : call_status::ok;
}

// call_buffer, put variant: puts `origin` into `target` (waiting), then sends the call.
template <channel C, class Policy, class F>
call_status put_then_call(thread_context& self, thread_id dest, const F& f,
                          std::span<const std::byte> origin,
                          const transfer::remote_memory_locator& target, synchronizer* sync,
                          notify_on when) {
  fabric::check_remote_closure<F>();
  call_status status = check_put_target(self, dest, origin.size(), target);
  if (status == call_status::ok) status = put_and_wait(self, origin, target);
  if (status != call_status::ok) return status;
  return dispatch<Policy, fabric::plain_shape>(
      self, C, dest, call_on_put_buffer<F>{f, target.address, origin.size()}, {}, sync, when);
}

// call_buffer, put variant, asynchronous: the call carrying `f` goes out on a later poll, once
// the put completed (channels::put_async). The continuation runs on the caller's thread.
template <channel C, class F>
call_status start_put_then_call(thread_context& self, thread_id dest, const F& f,
                                std::span<const std::byte> origin,
                                const transfer::remote_memory_locator& target, synchronizer& sync,
                                notify_on when) {
  fabric::check_remote_closure<F>();
  const call_status checked = check_put_target(self, dest, origin.size(), target);
  if (checked != call_status::ok) return checked;
  channels_of(self).put_async(
      origin, target,
      [f, dest, address = target.address, size = origin.size(), sync = &sync, when](
          thread_context& me, std::span<std::byte>, bool put) {
        call_status sent = call_status::peer_failed;
        if (put) {
          sent = dispatch<policy::retry_async, fabric::plain_shape>(
              me, C, dest, call_on_put_buffer<F>{f, address, size}, {}, sync, when);
        }
        if (fabric::reached_transport(sent)) return;
        if (put) channels_of(me).note_failed_put();
        // Neither the put nor the call got through: the synchronizer still counts it down
        // (as call_buffer_get_async does for a failed read); failed_puts says so.
        sync->decrement();
      });
  return call_status::ok;
}

}  // namespace detail

}  // namespace seriema::invoke

// The remote invocation primitives (paper Table 1), send-based and one-sided alike:
//   call, call_buffer (inline buffer), call_return,
// chosen per call by template parameters: the channel (send / write / trad / ovfl), the
// full-buffer policy (fail / retry / retry_async) and, optionally, a synchronizer notified when
// the call was transmitted or consumed. Aggregator wraps a channel choice for repeated calls.
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
#include <chrono>
#include <cstdint>
#include <cstring>
#include <istream>
#include <ostream>
#include <streambuf>
#include <tuple>
#include <vector>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/invoke/detail/argument_archive.hpp>
#include <seriema/invoke/messenger.hpp>
#include <span>

namespace seriema::invoke {

using fabric::return_slot;

// When a synchronizer is decremented for a call.
enum class notify_on : std::uint8_t {
  transmit,  // the call left the caller's hands: its captures and buffer may be reused
  consume,   // the destination ran it (one-sided: a remote atomic on the counter)
};

// A counting semaphore in the calling thread's registered feedback area: started at `count`,
// decremented once per call that names it. Owner: the thread that created it; it must outlive
// the calls that name it.
class synchronizer {
 public:
  synchronizer(thread_context& self, std::uint64_t count);
  ~synchronizer();
  synchronizer(const synchronizer&) = delete;
  synchronizer& operator=(const synchronizer&) = delete;

  [[nodiscard]] std::uint64_t remaining() const noexcept;
  [[nodiscard]] bool done() const noexcept { return remaining() == 0; }
  // Polls (serving calls, publishing batches) until the count reaches zero (done), a process
  // that a consumption-notified call named here went to dies first (may_have_executed: the
  // calls still counted will never be reported), or the deadline in force passes
  // (deadline_exceeded; `deadline`, a deadline_scope, SERIEMA_TIMEOUT). The count stays as it
  // is: remaining() says how many calls were not reported.
  fabric::outcome wait_until(fabric::deadline_clock::time_point deadline = fabric::no_deadline);
  template <class Rep, class Period>
  fabric::outcome wait_for(std::chrono::duration<Rep, Period> timeout) {
    return wait_until(fabric::deadline_clock::now() +
                      std::chrono::duration_cast<fabric::deadline_clock::duration>(timeout));
  }
  // wait_until() == done.
  bool wait() { return wait_until() == fabric::outcome::done; }
  // Adds `n` expected calls (a reusable synchronizer).
  void add(std::uint64_t n) noexcept;

  // used by the primitives
  [[nodiscard]] std::uint32_t word() const noexcept { return word_; }
  void decrement() noexcept;
  // A call naming this synchronizer for its consumption went to thread `dest`: a wait ends
  // when that thread's process dies.
  void note_target(thread_id dest);

 private:
  [[nodiscard]] bool a_target_failed() const noexcept;
  thread_context& self_;
  std::uint32_t word_;
  // Processes a consumption-notified call went to: bit p of target_processes_ for p < 64, and
  // more_target_processes_[p - 64] beyond (allocated only when such a process is named).
  std::uint64_t target_processes_ = 0;
  std::vector<bool> more_target_processes_;
};

namespace detail {

template <class F>
std::span<const std::byte> bytes_of(const F& f) noexcept {
  return {reinterpret_cast<const std::byte*>(&f), sizeof(F)};
}

// Sends a call_return's value back to the caller over the reverse messenger (queued when that
// one is full: a reply is never dropped for lack of room).
void send_reply(thread_context& self, thread_id caller, std::uint32_t slot,
                std::uint32_t generation, std::span<const std::byte> value);

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

// call_return on any channel, for a closure of shape Shape (return, or invocation for wrappers
// that write the result themselves).
template <channel C, class Policy, class Shape, class F, class R>
call_status returning(thread_context& self, thread_id dest, const F& f,
                      std::span<const std::byte> buffer, return_slot<R>& slot) {
  fabric::check_remote_closure<F>();
  static_assert(fabric::function_wrapper<F, Shape>::result_size() == sizeof(R),
                "call_return: the slot's type must be the function's return type");
  if constexpr (C == channel::send) {
    return self.call_return_as<Shape>(dest, f, buffer, slot);
  } else {
    auto [index, generation] = self.open_reply_for(slot, dest);
    wire::reply_extra extra{index, generation};
    call_status status =
        one_sided<Policy>(self, dest, C, fabric::function_wrapper<F, Shape>::id, bytes_of(f),
                          wire::flag_reply, bytes_of(extra), buffer);
    if (status != call_status::ok) self.fail_unsent_reply(index);
    return status;
  }
}

// ---- Serialized arguments (cereal): non-trivially-copyable values travel as the call's buffer.

// Bytes of serialized arguments, in a per-thread scratch buffer that stays valid until the
// returned lease is destroyed (leases nest: a Retry call serves calls that serialize too).
class argument_scratch {
 public:
  argument_scratch();
  ~argument_scratch();
  argument_scratch(const argument_scratch&) = delete;
  argument_scratch& operator=(const argument_scratch&) = delete;
  [[nodiscard]] std::vector<std::byte>& bytes() noexcept { return *bytes_; }

 private:
  std::vector<std::byte>* bytes_;
};

// std::streambuf appending to a byte vector (the scratch buffer: no allocation once warm).
class byte_sink final : public std::streambuf {
 public:
  explicit byte_sink(std::vector<std::byte>& out) : out_(out) {}

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    const auto* p = reinterpret_cast<const std::byte*>(s);
    out_.insert(out_.end(), p, p + n);
    return n;
  }
  int_type overflow(int_type c) override {
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      out_.push_back(static_cast<std::byte>(c));
    }
    return traits_type::not_eof(c);
  }

 private:
  std::vector<std::byte>& out_;
};

template <class... Args>
void serialize_arguments(std::vector<std::byte>& out, const Args&... args) {
  out.clear();
  byte_sink sink(out);
  std::ostream stream(&sink);
  cereal::BinaryOutputArchive archive(stream);
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

}  // namespace detail

// `dest` runs f() (or f(ctx)).
template <channel C = channel::write, class Policy = policy::fail, class F>
call_status call(thread_context& self, thread_id dest, const F& f) {
  return detail::dispatch<Policy, fabric::plain_shape>(self, C, dest, f, {}, nullptr,
                                                      notify_on::transmit);
}
template <channel C = channel::write, class Policy = policy::fail, notify_on When, class F>
call_status call(thread_context& self, thread_id dest, const F& f, synchronizer& sync) {
  return detail::dispatch<Policy, fabric::plain_shape>(self, C, dest, f, {}, &sync, When);
}

// `dest` runs f(buf) (or f(ctx, buf)) with a copy of `buffer` that travelled with the call.
template <channel C = channel::write, class Policy = policy::fail, class F>
call_status call_buffer(thread_context& self, thread_id dest, const F& f,
                        std::span<const std::byte> buffer) {
  return detail::dispatch<Policy, fabric::buffer_shape>(self, C, dest, f, buffer, nullptr,
                                                       notify_on::transmit);
}
template <channel C = channel::write, class Policy = policy::fail, notify_on When, class F>
call_status call_buffer(thread_context& self, thread_id dest, const F& f,
                        std::span<const std::byte> buffer, synchronizer& sync) {
  return detail::dispatch<Policy, fabric::buffer_shape>(self, C, dest, f, buffer, &sync, When);
}

// `dest` runs f() (or f(ctx)); the value is written back into `slot` (self.wait_for(slot)).
template <channel C = channel::write, class Policy = policy::fail, class F, class R>
call_status call_return(thread_context& self, thread_id dest, const F& f,
                        return_slot<R>& slot) {
  static_assert(std::is_same_v<R, fabric::detail::return_type_t<F>>,
                "call_return: the slot's type must be the function's return type");
  return detail::returning<C, Policy, fabric::return_shape>(self, dest, f, {}, slot);
}

// `dest` runs f(args...) (or f(ctx, args...)). The arguments may be of any type cereal
// serializes (std::string, std::vector, std::map, user types with a serialize() member...):
// they are serialized into the call's buffer here and deserialized on the destination, which
// passes them as lvalues. Bytes that do not deserialize are rejected and counted
// (runtime counters: rejected_arguments); f does not run then.
template <channel C = channel::write, class Policy = policy::fail, class F, class... Args>
  requires(sizeof...(Args) > 0 && !(detail::is_synchronizer_v<Args> || ...))
call_status call(thread_context& self, thread_id dest, F f, const Args&... args) {
  using wrapper = detail::with_arguments<F, std::remove_cvref_t<Args>...>;
  detail::argument_scratch scratch;
  detail::serialize_arguments(scratch.bytes(), args...);
  return detail::dispatch<Policy, fabric::invocation_shape>(self, C, dest, wrapper{f},
                                                           scratch.bytes(), nullptr,
                                                           notify_on::transmit);
}
// The same, with a synchronizer.
template <channel C = channel::write, class Policy = policy::fail, notify_on When, class F,
          class... Args>
  requires(sizeof...(Args) > 0)
call_status call(thread_context& self, thread_id dest, F f, synchronizer& sync,
                 const Args&... args) {
  using wrapper = detail::with_arguments<F, std::remove_cvref_t<Args>...>;
  detail::argument_scratch scratch;
  detail::serialize_arguments(scratch.bytes(), args...);
  return detail::dispatch<Policy, fabric::invocation_shape>(self, C, dest, wrapper{f},
                                                           scratch.bytes(), &sync, When);
}

// `dest` runs f(args...) (or f(ctx, args...)) with serialized arguments (as call above); the
// value is written back into `slot`. Arguments that do not deserialize give a value-initialized
// result (and a rejection counted at the destination).
template <channel C = channel::write, class Policy = policy::fail, class F, class R,
          class... Args>
  requires(sizeof...(Args) > 0)
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

namespace detail {

// Waits (serving calls), until `deadline`, for the thread's put or get left in flight to
// `process` by an earlier deadline (fabric::detail::staged_sends::leave); false if it is still.
bool settle_left(thread_context& self, int process, fabric::deadline_clock::time_point deadline);
// Waits (serving calls) until the UCX request of `self`'s worker completed, frees it and returns
// its status. Past `deadline` (UCX 1.13 cannot cancel it) the request stays in flight and the
// thread keeps `memory`, which it reads or writes, until UCX completed it: UCS_ERR_TIMED_OUT.
ucs_status_t wait_or_leave(thread_context& self, int process, void* request,
                           std::vector<std::byte>& memory,
                           fabric::deadline_clock::time_point deadline);
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

// A hop of a broadcast: forward to this thread's children in the binary tree rooted at `root`
// (thread ids relative to it), then run f here. Forwarding queues when a ring is full
// (retry_async): a handler never blocks.
template <channel C, class F, class Shape>
struct broadcast_hop {
  F f;
  std::uint32_t root;
  void operator()(thread_context& self, std::span<std::byte> buffer) const { hop(self, buffer); }
  void operator()(thread_context& self) const { hop(self, {}); }

  void hop(thread_context& self, std::span<std::byte> buffer) const {
    const std::uint32_t n = self.thread_count();
    const std::uint32_t relative = (self.id() + n - root) % n;
    for (std::uint32_t child = 2 * relative + 1; child <= 2 * relative + 2 && child < n; ++child) {
      const thread_id dest = (child + root) % n;
      (void)dispatch<policy::retry_async, Shape>(self, C, dest, *this, buffer, nullptr,
                                                 notify_on::transmit);
    }
    F copy = f;
    if constexpr (std::is_same_v<Shape, fabric::buffer_shape>) {
      run_on_buffer(copy, self, buffer);
    } else if constexpr (fabric::detail::takes_context_v<F>) {
      copy(self);
    } else {
      copy();
    }
  }
};

}  // namespace detail

// call_buffer, put variant (paper): `origin` is put into `target` (registered memory of the
// destination's process, e.g. from allocate_remote), and once it is there `dest` runs
// f(target's bytes). Waits for the put's completion before sending the call.
template <channel C = channel::write, class Policy = policy::fail, class F>
call_status call_buffer(thread_context& self, thread_id dest, F f,
                        std::span<const std::byte> origin,
                        const transfer::remote_memory_locator& target) {
  fabric::check_remote_closure<F>();
  if (dest >= self.thread_count()) return call_status::bad_destination;
  if (target.process != self.rt().placement().locate(dest).process ||
      origin.size() > target.size) {
    return call_status::bad_destination;
  }
  call_status status = detail::put_and_wait(self, origin, target);
  if (status != call_status::ok) return status;
  return invoke::call<C, Policy>(self, dest,
                                 detail::call_on_put_buffer<F>{f, target.address, origin.size()});
}

// call_buffer, get variant (paper): `dest` reads `origin` (registered memory anywhere, e.g. the
// caller's, which must stay unchanged until the call ran) by a remote read, then runs
// f(bytes read). The read is synchronous on the destination thread (it serves calls while it
// waits).
template <channel C = channel::write, class Policy = policy::fail, class F>
call_status call_buffer_get(thread_context& self, thread_id dest, F f,
                            const transfer::remote_memory_locator& origin) {
  fabric::check_remote_closure<F>();
  return invoke::call<C, Policy>(self, dest, detail::call_after_get<F>{f, origin});
}
// The same, decrementing `sync` when the call was transmitted or (notify_on::consume) once f ran
// at the destination: from then on `origin` may change.
template <channel C = channel::write, class Policy = policy::fail, notify_on When, class F>
call_status call_buffer_get(thread_context& self, thread_id dest, F f,
                            const transfer::remote_memory_locator& origin, synchronizer& sync) {
  fabric::check_remote_closure<F>();
  return invoke::call<C, Policy, When>(self, dest, detail::call_after_get<F>{f, origin}, sync);
}

// call_buffer_get, async variant (paper): `dest` starts reading `origin` and keeps serving calls
// meanwhile; f(bytes read) runs on one of its later polls, so calls sent after this one may run
// before f. With a synchronizer, it is decremented once f ran (origin may change from then on).
// A read that fails (origin's process died) is counted at the destination (failed_reads) and
// f does not run; the synchronizer is still decremented.
template <channel C = channel::write, class Policy = policy::fail, class F>
call_status call_buffer_get_async(thread_context& self, thread_id dest, F f,
                                  const transfer::remote_memory_locator& origin) {
  fabric::check_remote_closure<F>();
  return detail::dispatch<Policy, fabric::invocation_shape>(
      self, C, dest, detail::call_after_get_async<F>{f, origin, 0}, {}, nullptr,
      notify_on::transmit);
}
template <channel C = channel::write, class Policy = policy::fail, class F>
call_status call_buffer_get_async(thread_context& self, thread_id dest, F f,
                                  const transfer::remote_memory_locator& origin,
                                  synchronizer& sync) {
  fabric::check_remote_closure<F>();
  return detail::dispatch<Policy, fabric::invocation_shape>(
      self, C, dest, detail::call_after_get_async<F>{f, origin, sync.word()}, {}, nullptr,
      notify_on::transmit);
}

// broadcast: f() (or f(ctx)) runs once on every thread of the job, this one included, through
// a binary tree rooted here; each hop travels on channel C.
template <channel C = channel::write, class F>
void broadcast(thread_context& self, F f) {
  fabric::check_remote_closure<F>();
  detail::broadcast_hop<C, F, fabric::plain_shape>{f, self.id()}.hop(self, {});
}

// broadcast_buffer: f(buf) runs once on every thread with a copy of `buffer`, through the tree.
template <channel C = channel::write, class F>
void broadcast_buffer(thread_context& self, F f, std::span<const std::byte> buffer) {
  fabric::check_remote_closure<F>();
  std::vector<std::byte> mine(buffer.begin(), buffer.end());
  detail::broadcast_hop<C, F, fabric::buffer_shape>{f, self.id()}.hop(self, mine);
}

template <channel Mode>
class aggregator_to;

// Aggregator (paper §4.4.2): calls of this thread through one one-sided mode, traditional
// (batched, published every flush_size bytes or on flush()) or overflow (published at once,
// queued locally only while a messenger has no room). Cheap to construct; the messengers belong
// to the thread (channels), so aggregators of one thread share them and keep FIFO per
// destination.
template <channel Mode>
class aggregator {
  static_assert(Mode == channel::trad || Mode == channel::ovfl,
                "an aggregator is traditional (trad) or overflow (ovfl)");

 public:
  explicit aggregator(thread_context& self) : self_(self) {}

  template <class Policy = policy::fail, class F>
  call_status call(thread_id dest, const F& f) {
    return invoke::call<Mode, Policy>(self_, dest, f);
  }
  template <class Policy = policy::fail, class F>
  call_status call_buffer(thread_id dest, const F& f, std::span<const std::byte> buffer) {
    return invoke::call_buffer<Mode, Policy>(self_, dest, f, buffer);
  }
  template <class Policy = policy::fail, class F, class R>
  call_status call_return(thread_id dest, const F& f, return_slot<R>& slot) {
    return invoke::call_return<Mode, Policy>(self_, dest, f, slot);
  }
  // Publishes every batched call of this thread (all destinations).
  void flush() { channels_of(self_).flush(self_); }

  // This aggregator's calls to `dest` alone, without a lookup per call (see aggregator_to).
  [[nodiscard]] aggregator_to<Mode> to(thread_id dest) const {
    return aggregator_to<Mode>(self_, dest);
  }

 private:
  thread_context& self_;
};

// An aggregator's calls to one destination (paper §4.4: an RDMAAggregator is made on the
// sending thread for one destination thread): the calls of aggregator<Mode> with `dest`, through
// the same messenger (so FIFO with every other call of this thread to `dest`), without looking
// the messenger up on each call. In trad mode it also keeps a copy of the messenger's join
// window (messenger::join_view): a run of plain calls of one function then costs two stores
// (the closure and the messenger's write offset) and checks whose loads no store waits for.
// Made and used by one thread; valid while the thread's channels live (its run). Keep it a
// local of the function that calls through it: the copy then stays in registers; as a member of
// an object in memory it is loaded on every call, like the messenger's own words (a run of
// calls through invoke::call<channel::trad> waits on the store-to-load forwarding of the write
// offset from one call to the next, about 6 cycles). Throws seriema::error for a `dest` that is
// not a thread of the job, and on a thread without channels (a service thread).
template <channel Mode>
class aggregator_to {
  static_assert(Mode == channel::trad || Mode == channel::ovfl,
                "an aggregator is traditional (trad) or overflow (ovfl)");

 public:
  aggregator_to(thread_context& self, thread_id dest)
      : self_(self), dest_(dest), messenger_(&channels_of(self).to(dest)),
        view_(messenger_->view_join_window()) {}

  [[nodiscard]] thread_id destination() const noexcept { return dest_; }

  template <class Policy = policy::fail, class F>
  [[gnu::always_inline]] call_status call(const F& f) {
    fabric::check_remote_closure<F>();
    const fabric::function_id id = fabric::function_wrapper<F, fabric::plain_shape>::id;
    if constexpr (Mode == channel::trad) {
      constexpr std::size_t stride = fabric::closure_stride(sizeof(F));
      // One branch for the three checks: the compiler then lays the join out as the straight
      // path of the caller's loop.
      const bool joins = (view_.function == id) & (view_.at + stride <= view_.limit) &
                         messenger_->join_view_current(view_);
      if (__builtin_expect(joins, 1)) {
        messenger_->join_through(view_, detail::bytes_of(f), stride);
        return call_status::ok;
      }
      const general_result r = send_general<Policy>(*messenger_, id, detail::bytes_of(f));
      view_ = r.view;
      return r.status;
    } else {
      return write_or_send<Policy>(*messenger_, id, detail::bytes_of(f));
    }
  }
  template <class Policy = policy::fail, class F>
  call_status call_buffer(const F& f, std::span<const std::byte> buffer) {
    return renew(invoke::call_buffer<Mode, Policy>(self_, dest_, f, buffer));
  }
  template <class Policy = policy::fail, class F, class R>
  call_status call_return(const F& f, return_slot<R>& slot) {
    return renew(invoke::call_return<Mode, Policy>(self_, dest_, f, slot));
  }
  // Publishes the calls batched for this destination (and moves its queued ones on).
  void flush() {
    messenger_->drain();
    messenger_->publish();
    renew(call_status::ok);
  }

 private:
  struct general_result {
    call_status status;
    messenger::join_view view;  // the window the call left
  };
  // A trad call that does not join through the view: out of line, so that the join stays a
  // straight run of instructions in the caller's loop; static, so that this object's address
  // does not escape (its copy of the window then stays in registers).
  template <class Policy>
  [[gnu::noinline]] static general_result send_general(messenger& m, fabric::function_id id,
                                                       std::span<const std::byte> closure) {
    const call_status status = write_or_send<Policy>(m, id, closure);
    return {status, m.view_join_window()};
  }
  // A plain call through the messenger: its inline direct write, else its general path.
  template <class Policy>
  [[gnu::always_inline]] static call_status write_or_send(messenger& m, fabric::function_id id,
                                                          std::span<const std::byte> closure) {
    if (m.try_write_direct(Mode, id, closure, 0, {}, {})) return call_status::ok;
    return m.template send<Policy>(Mode, id, closure, 0, {}, {});
  }
  // After a call through the free functions: the window they left.
  call_status renew(call_status status) noexcept {
    view_ = messenger_->view_join_window();
    return status;
  }

  thread_context& self_;
  thread_id dest_;
  messenger* messenger_;
  messenger::join_view view_;
};

}  // namespace seriema::invoke

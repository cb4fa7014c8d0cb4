// The remote invocation primitives (paper Table 1), send-based and one-sided alike:
//   call, call_buffer (inline buffer), call_return,
// chosen per call by template parameters: the channel (send / write / trad / ovfl), the
// full-buffer policy (fail / retry / retry_async) and, optionally, a synchronizer notified when
// the call was transmitted or consumed. Aggregator wraps a channel choice for repeated calls.
#pragma once

#include <cstdint>
#include <seriema/fabric/thread_context.hpp>
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
  // Polls (serving calls, publishing batches) until done; false when a messenger of this thread
  // failed (its peer died) first: the calls still pending will never be consumed.
  bool wait();
  // Adds `n` expected calls (a reusable synchronizer).
  void add(std::uint64_t n) noexcept;

  // used by the primitives
  [[nodiscard]] std::uint32_t word() const noexcept { return word_; }
  void decrement() noexcept;

 private:
  thread_context& self_;
  std::uint32_t word_;
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

template <class Policy>
call_status one_sided(thread_context& self, thread_id dest, channel c, fabric::function_id function,
                      std::span<const std::byte> closure, std::uint32_t flags,
                      std::span<const std::byte> extras, std::span<const std::byte> buffer) {
  if (dest >= self.thread_count()) return call_status::bad_destination;
  return channels_of(self).to(dest).template send<Policy>(c, function, closure, flags, extras,
                                                          buffer);
}

template <class Policy, class Shape, class F>
call_status dispatch(thread_context& self, channel c, thread_id dest, const F& f,
                     std::span<const std::byte> buffer, synchronizer* sync, notify_on when) {
  fabric::check_remote_closure<F>();
  const fabric::function_id id = fabric::function_wrapper<F, Shape>::id;
  call_status status;
  if (c == channel::send) {
    if constexpr (std::is_same_v<Shape, fabric::buffer_shape>) {
      status = self.call_buffer(dest, f, buffer);
    } else {
      status = self.call(dest, f);
    }
  } else if (sync != nullptr && when == notify_on::consume) {
    wire::notify_extra extra{sync->word(), 0};
    status = one_sided<Policy>(self, dest, c, id, bytes_of(f), wire::flag_notify,
                               bytes_of(extra), buffer);
  } else {
    status = one_sided<Policy>(self, dest, c, id, bytes_of(f), 0, {}, buffer);
  }
  if (status == call_status::ok && sync != nullptr && when == notify_on::transmit) {
    sync->decrement();  // captures and buffer were copied (chunk, staging unit or queue)
  }
  return status;
}

}  // namespace detail

// `dest` runs f() (or f(ctx)).
template <channel C = channel::write, class Policy = policy::fail, class F>
call_status call(thread_context& self, thread_id dest, F f) {
  return detail::dispatch<Policy, fabric::plain_shape>(self, C, dest, f, {}, nullptr,
                                                      notify_on::transmit);
}
template <channel C = channel::write, class Policy = policy::fail, notify_on When, class F>
call_status call(thread_context& self, thread_id dest, F f, synchronizer& sync) {
  static_assert(C != channel::send || When == notify_on::transmit,
                "consumption notices need a one-sided channel (write, trad or ovfl)");
  return detail::dispatch<Policy, fabric::plain_shape>(self, C, dest, f, {}, &sync, When);
}

// `dest` runs f(buf) (or f(ctx, buf)) with a copy of `buffer` that travelled with the call.
template <channel C = channel::write, class Policy = policy::fail, class F>
call_status call_buffer(thread_context& self, thread_id dest, F f,
                        std::span<const std::byte> buffer) {
  return detail::dispatch<Policy, fabric::buffer_shape>(self, C, dest, f, buffer, nullptr,
                                                       notify_on::transmit);
}
template <channel C = channel::write, class Policy = policy::fail, notify_on When, class F>
call_status call_buffer(thread_context& self, thread_id dest, F f,
                        std::span<const std::byte> buffer, synchronizer& sync) {
  static_assert(C != channel::send || When == notify_on::transmit,
                "consumption notices need a one-sided channel (write, trad or ovfl)");
  return detail::dispatch<Policy, fabric::buffer_shape>(self, C, dest, f, buffer, &sync, When);
}

// `dest` runs f() (or f(ctx)); the value is written back into `slot` (self.wait_for(slot)).
template <channel C = channel::write, class Policy = policy::fail, class F, class R>
call_status call_return(thread_context& self, thread_id dest, F f, return_slot<R>& slot) {
  fabric::check_remote_closure<F>();
  static_assert(std::is_same_v<R, fabric::detail::return_type_t<F>>,
                "call_return: the slot's type must be the function's return type");
  if constexpr (C == channel::send) {
    return self.call_return(dest, f, slot);
  } else {
    auto [index, generation] = self.open_reply_for(slot);
    wire::reply_extra extra{index, generation};
    call_status status = detail::one_sided<Policy>(
        self, dest, C, fabric::function_wrapper<F, fabric::return_shape>::id, detail::bytes_of(f),
        wire::flag_reply, detail::bytes_of(extra), {});
    if (status != call_status::ok) self.close_reply(index, false);
    return status;
  }
}

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
  call_status call(thread_id dest, F f) {
    return invoke::call<Mode, Policy>(self_, dest, f);
  }
  template <class Policy = policy::fail, class F>
  call_status call_buffer(thread_id dest, F f, std::span<const std::byte> buffer) {
    return invoke::call_buffer<Mode, Policy>(self_, dest, f, buffer);
  }
  template <class Policy = policy::fail, class F, class R>
  call_status call_return(thread_id dest, F f, return_slot<R>& slot) {
    return invoke::call_return<Mode, Policy>(self_, dest, f, slot);
  }
  // Publishes every batched call of this thread (all destinations).
  void flush() { channels_of(self_).flush(self_); }

 private:
  thread_context& self_;
};

}  // namespace seriema::invoke

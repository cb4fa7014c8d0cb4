// Out-of-line parts of the primitives: synchronizers (words of the thread's registered feedback
// area) and the reply path of one-sided call_return.
#include <fmt/format.h>

#include <seriema/invoke/invoke.hpp>
#include <seriema/transfer/error.hpp>

namespace seriema::invoke {

namespace {

// The function a reply record runs at the caller: copies the value into the waiting slot. A
// reply for a slot that is no longer waiting (stale generation) is dropped.
struct reply_delivery {
  std::uint32_t slot;
  std::uint32_t generation;
  void operator()(thread_context& self, std::span<std::byte> value) const {
    (void)self.state().deliver_reply(slot, generation, value, true);
  }
};

std::atomic_ref<std::uint64_t> counter_word(thread_context& self, std::uint32_t word) {
  return std::atomic_ref<std::uint64_t>(channels_of(self).feedback_words()[word]);
}

}  // namespace

synchronizer::synchronizer(thread_context& self, std::uint64_t count)
    : self_(self), word_(channels_of(self).acquire_counter_word()) {
  if (word_ == 0) {
    throw error(fmt::format("thread {}: more than {} synchronizers alive", self.id(),
                            channels::synchronizer_words));
  }
  counter_word(self_, word_).store(count, std::memory_order_release);
}

synchronizer::~synchronizer() { channels_of(self_).release_counter_word(word_); }

std::uint64_t synchronizer::remaining() const noexcept {
  return counter_word(self_, word_).load(std::memory_order_acquire);
}

void synchronizer::add(std::uint64_t n) noexcept {
  counter_word(self_, word_).fetch_add(n, std::memory_order_acq_rel);
}

void synchronizer::decrement() noexcept {
  counter_word(self_, word_).fetch_sub(1, std::memory_order_acq_rel);
}

bool synchronizer::wait() {
  channels& mine = channels_of(self_);
  self_.wait_until([&] { return done() || mine.any_failed(); });
  return done();
}

namespace detail {

void send_reply(thread_context& self, thread_id caller, std::uint32_t slot,
                std::uint32_t generation, std::span<const std::byte> value) {
  reply_delivery delivery{slot, generation};
  (void)channels_of(self).to(caller).send<policy::retry_async>(
      channel::write, fabric::function_wrapper<reply_delivery, fabric::buffer_shape>::id,
      bytes_of(delivery), 0, {}, value);
}

}  // namespace detail

}  // namespace seriema::invoke

// Attach slots: contexts for threads that are not runtime::run's workers (runtime::attach and
// attached_thread), with ids after every worker's.
//
// Invariants. A slot is held by at most one thread: `held` goes false -> true by CAS (acquire)
// in try_attach and back to false (release) in detach, by the holder. The slot's context is made
// by its first holder and then kept until teardown: peers pair reply cells, endpoints and the
// UCX worker with the slot's id, and a call sent to the id while nobody holds it must find a
// context to run on. Who uses the context: the holder between attach and detach; between two
// holders, the helper threads (during run()), through the helped_section protocol on the slot
// state's poller word: detach offers the context (release) before giving `held` back, and
// attach takes it back from the helpers (waiting out a helper's poll) before using it.
#include <fmt/format.h>

#include <seriema/base/error.hpp>
#include <seriema/base/log.hpp>
#include <thread>

#include "runtime/runtime_internal.hpp"

namespace seriema::fabric {

thread_id runtime::attached_id(int rank, int slot) const noexcept {
  return placement_->thread_count() +
         static_cast<thread_id>(rank) * static_cast<thread_id>(options_.attach_slots) +
         static_cast<thread_id>(slot);
}

bool runtime::is_attached_id(thread_id id) const noexcept {
  const thread_id workers = placement_->thread_count();
  return (id & service_bit) == 0 && id >= workers &&
         id - workers < static_cast<thread_id>(size()) * static_cast<thread_id>(options_.attach_slots);
}

int runtime::attached_threads() const noexcept {
  int held = 0;
  for (int s = 0; s < options_.attach_slots; ++s) {
    if (attach_slots_[static_cast<std::size_t>(s)].held.load(std::memory_order_acquire)) ++held;
  }
  return held;
}

std::size_t runtime::attach_slot_of(thread_id id) const noexcept {
  return (id - placement_->thread_count()) % static_cast<thread_id>(options_.attach_slots);
}

bool runtime::attach_slot_opened(thread_id id) const noexcept {
  return attach_slots_[attach_slot_of(id)].opened.load(std::memory_order_acquire);
}

std::optional<attached_thread> runtime::try_attach() {
  for (int s = 0; s < options_.attach_slots; ++s) {
    attach_slot& slot = attach_slots_[static_cast<std::size_t>(s)];
    bool expected = false;
    if (slot.held.load(std::memory_order_relaxed) ||
        !slot.held.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
      continue;
    }
    const thread_id id = attached_id(rank(), s);
    if (!slot.context) {
      try {
        slot.context = std::make_unique<thread_context>(*this, id);
        slot.opened.store(true, std::memory_order_release);
      } catch (...) {
        slot.held.store(false, std::memory_order_release);
        throw;
      }
    } else {
      local_state(id).take_back_from_helpers();
    }
    slot.context->adopt_owner_thread();
    return attached_thread(*this, s, *slot.context);
  }
  return std::nullopt;
}

attached_thread runtime::attach() {
  if (auto attached = try_attach()) return std::move(*attached);
  throw error(fmt::format(
      "rank {}: runtime::attach(): all {} attach slots of this process are held; raise "
      "SERIEMA_ATTACH_SLOTS, or attach with a deadline to wait for one",
      rank(), options_.attach_slots));
}

attached_thread runtime::attach(deadline_clock::time_point deadline) {
  for (;;) {
    const std::uint32_t signal = attach_signal_.load(std::memory_order_acquire);
    if (auto attached = try_attach()) return std::move(*attached);
    if (options_.attach_slots == 0 || deadline_clock::now() >= deadline) break;
    // A detach bumps the signal after giving its slot back: no lost wakeup. The wait is
    // bounded by short sleeps so the deadline is noticed without a timed futex.
    if (attach_signal_.load(std::memory_order_acquire) == signal) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  throw deadline_error(fmt::format(
      "rank {}: runtime::attach(): none of the {} attach slots of this process was given back "
      "before the deadline (SERIEMA_ATTACH_SLOTS)",
      rank(), options_.attach_slots));
}

void runtime::detach(int slot_index, thread_context& context) noexcept {
  attach_slot& slot = attach_slots_[static_cast<std::size_t>(slot_index)];
  if (const std::size_t dropped = context.release_owner_thread(); dropped > 0) {
    log::warning("attached thread {} detached with {} exception(s) thrown by calls it ran and "
                 "never rethrown (a poll outside any call rethrows them); dropped",
                 context.id(), dropped);
  }
  // Calls that reach the slot from now on are run by the helpers (during run()) or by the
  // next holder.
  local_state(context.id()).offer_to_helpers(context);
  slot.held.store(false, std::memory_order_release);
  attach_signal_.fetch_add(1, std::memory_order_acq_rel);
}

void runtime::flush_attach_slots(deadline_clock::time_point deadline) {
  for (int s = 0; s < options_.attach_slots; ++s) {
    attach_slot& slot = attach_slots_[static_cast<std::size_t>(s)];
    if (!slot.opened.load(std::memory_order_acquire)) continue;
    local_thread_state& state = local_state(attached_id(rank(), s));
    state.take_back_from_helpers();
    {
      thread_context::deadline_scope until(*slot.context, deadline);
      slot.context->flush_endpoints();
    }
    state.offer_to_helpers(*slot.context);
  }
}

void runtime::release_attach_slots() noexcept {
  for (int s = 0; s < options_.attach_slots; ++s) {
    attach_slot& slot = attach_slots_[static_cast<std::size_t>(s)];
    if (slot.held.load(std::memory_order_acquire)) {
      log::error("runtime destroyed while a thread holds attach slot {}: its attached_thread "
                 "outlives the runtime",
                 s);
    }
    if (!slot.context) continue;
    local_state(attached_id(rank(), s)).take_back_from_helpers();
    slot.context.reset();
  }
}

attached_thread::attached_thread(attached_thread&& other) noexcept
    : rt_(other.rt_), slot_(other.slot_), context_(other.context_) {
  other.rt_ = nullptr;
}

attached_thread::~attached_thread() {
  if (rt_ != nullptr) rt_->detach(slot_, *context_);
}

thread_id attached_thread::id() const noexcept { return context_->id(); }

}  // namespace seriema::fabric

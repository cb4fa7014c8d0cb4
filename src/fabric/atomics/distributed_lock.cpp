// The distributed queue lock: creation at its home, enqueue, waiting for the grant, abandonment
// at the deadline, and the release that skips abandoned tickets (protocol and invariants at the
// top of include/seriema/fabric/distributed_lock.hpp).
#include <fmt/format.h>

#include <atomic>
#include <bit>
#include <seriema/base/error.hpp>
#include <seriema/base/log.hpp>
#include <seriema/fabric/distributed_lock.hpp>
#include <seriema/fabric/runtime.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <thread>

namespace seriema::fabric {

namespace {

// Slot states (the low two bits of a slot word; the ticket is above them).
constexpr std::uint64_t slot_waiting = 0;
constexpr std::uint64_t slot_granted = 1;
constexpr std::uint64_t slot_abandoned = 2;

constexpr std::uint64_t queue_word_offset = 0;
constexpr std::uint64_t word_stride = 64;  // one cache line per word: no false sharing at home
constexpr std::uint32_t max_slots = 1u << 20;

constexpr std::uint64_t slot_word(std::uint32_t ticket, std::uint64_t state) noexcept {
  return (static_cast<std::uint64_t>(ticket) << 2) | state;
}
constexpr std::uint32_t next_of(std::uint64_t queue) noexcept {
  return static_cast<std::uint32_t>(queue);
}
constexpr std::uint32_t served_of(std::uint64_t queue) noexcept {
  return static_cast<std::uint32_t>(queue >> 32);
}
constexpr std::uint64_t lock_bytes(std::uint32_t slots) noexcept {
  return word_stride * (1 + static_cast<std::uint64_t>(slots));
}

constexpr std::uint64_t slot_offset_of(std::uint32_t ticket, std::uint32_t slots) noexcept {
  return word_stride * (1 + (ticket & (slots - 1)));
}

// Between two reads of a word the home owns: serve calls, spin briefly, then leave the core in
// growing steps capped at 50 us (a remote read costs a round trip; a waiter must still notice
// its grant soon).
void pause_between_reads(thread_context& ctx, unsigned& idle) {
  if (ctx.poll() != 0) return;
  ++idle;
  if (idle < 16) return;
  if (idle < 64) {
    std::this_thread::yield();
    return;
  }
  std::this_thread::sleep_for(std::chrono::microseconds(idle < 256 ? 5 : 50));
}

// Runs at the home process (a service call): writes the free lock's initial words.
void initialize_at_home(std::uint64_t address, std::uint32_t slots) {
  auto* words = reinterpret_cast<std::uint64_t*>(address);
  const std::size_t stride = word_stride / sizeof(std::uint64_t);
  std::atomic_ref<std::uint64_t>(words[0]).store(0, std::memory_order_relaxed);
  for (std::uint32_t i = 0; i < slots; ++i) {
    const std::uint64_t state = i == 0 ? slot_granted : slot_waiting;
    std::atomic_ref<std::uint64_t>(words[stride * (1 + i)]).store(slot_word(i, state),
                                                                  std::memory_order_relaxed);
  }
  std::atomic_thread_fence(std::memory_order_release);
}

}  // namespace

distributed_lock_descriptor distributed_lock::create(thread_context& ctx, thread_id home,
                                                     std::uint32_t slots) {
  if (slots < 2 || slots > max_slots || !std::has_single_bit(slots)) {
    throw error(fmt::format("distributed_lock::create: {} slots; expected a power of two in "
                            "2..{}",
                            slots, max_slots));
  }
  distributed_lock_descriptor lock;
  lock.memory = ctx.allocate_remote(home, lock_bytes(slots));
  lock.slots = slots;
  if (lock.memory.address % word_stride != 0) {
    ctx.free_remote(lock.memory);
    throw error(fmt::format("distributed_lock::create: the allocation at {} is not {}-byte "
                            "aligned",
                            lock.memory.to_string(), word_stride));
  }
  const std::uint64_t address = lock.memory.address;
  return_slot<int> initialized;
  call_status sent = ctx.service_call_return(
      lock.memory.process,
      [address, slots] {
        initialize_at_home(address, slots);
        return 1;
      },
      initialized);
  outcome how = outcome::not_executed;
  if (sent == call_status::ok) {
    thread_context::deferring_scope keep_exceptions(ctx);
    how = ctx.wait_for(initialized);
  }
  if (how != outcome::done) {
    throw error(fmt::format("distributed_lock::create: initializing the lock at {}: {}",
                            lock.memory.to_string(),
                            sent == call_status::ok ? initialized.describe() : to_string(sent)));
  }
  return lock;
}

void distributed_lock::destroy(thread_context& ctx, const distributed_lock_descriptor& lock) {
  ctx.free_remote(lock.memory);
}

distributed_lock::distributed_lock(thread_context& ctx, const distributed_lock_descriptor& lock)
    : descriptor_(lock), words_(ctx, lock.memory) {
  if (!lock.valid() || !std::has_single_bit(lock.slots) || lock.slots > max_slots ||
      lock.memory.size < lock_bytes(lock.slots)) {
    throw error(fmt::format("distributed_lock: invalid descriptor ({} slots over {})", lock.slots,
                            lock.memory.to_string()));
  }
}

distributed_lock::~distributed_lock() {
  if (held_) (void)release();
}

atomic_result distributed_lock::step(detail::atomic_op op, std::uint64_t offset,
                                     std::uint64_t operand, std::uint64_t compare) {
  return words_.execute(op, offset, operand, compare, deadline_clock::now() + protocol_grace,
                        /*in_force=*/false);
}

void distributed_lock::report_broken(const char* step_name, outcome how) {
  if (reported_broken_) return;
  reported_broken_ = true;
  log::error("distributed lock at {}: {} ended {}; the lock may be unusable (waits on it end at "
             "their deadlines)",
             descriptor_.memory.to_string(), step_name, to_string(how));
}

outcome distributed_lock::acquire(deadline_clock::time_point deadline) {
  if (held_) return outcome::not_executed;  // misuse: the handle holds it already
  // A call run while waiting that throws must not leave a ticket behind: its exception leaves
  // the thread's next outer poll instead.
  thread_context::deferring_scope keep_exceptions(words_.context());
  deadline = words_.context().deadline_in_force(deadline);
  outcome how = enqueue(deadline);
  if (how != outcome::done) return how;
  how = wait_for_grant(deadline);
  held_ = how == outcome::done;
  return how;
}

outcome distributed_lock::enqueue(deadline_clock::time_point deadline) {
  using detail::atomic_op;
  atomic_result seen = words_.execute(atomic_op::fetch_add, queue_word_offset, 0, 0, deadline);
  unsigned idle = 0;
  for (;;) {
    if (!seen.ok()) return seen.how;  // nothing taken yet: a clean end
    const std::uint64_t queue = seen.value;
    const std::uint32_t next = next_of(queue);
    if (static_cast<std::uint32_t>(next - served_of(queue)) >= descriptor_.slots) {
      // Full: `slots` tickets unfinished. Wait for the holder to finish one.
      if (deadline_clock::now() >= deadline) return outcome::deadline_exceeded;
      pause_between_reads(words_.context(), idle);
      seen = words_.execute(atomic_op::fetch_add, queue_word_offset, 0, 0, deadline);
      continue;
    }
    const std::uint64_t taken = (queue & ~std::uint64_t{0xffffffff}) |
                                static_cast<std::uint32_t>(next + 1);
    const atomic_result swapped = step(atomic_op::compare_swap, queue_word_offset, taken, queue);
    if (!swapped.ok()) {
      report_broken("enqueue", swapped.how);  // the ticket may have been taken
      return swapped.how;
    }
    if (swapped.value == queue) {
      ticket_ = next;
      return outcome::done;
    }
    if (deadline_clock::now() >= deadline) return outcome::deadline_exceeded;
    seen = swapped;  // another thread enqueued first: retry with what the CAS found
  }
}

outcome distributed_lock::wait_for_grant(deadline_clock::time_point deadline) {
  const std::uint64_t offset = slot_offset_of(ticket_, descriptor_.slots);
  unsigned idle = 0;
  for (;;) {
    const atomic_result seen =
        words_.execute(detail::atomic_op::fetch_add, offset, 0, 0, deadline);
    if (!seen.ok()) {
      // The home's process failed: nothing to hand back. Otherwise (the probe outlived the
      // deadline, or could not be posted) the ticket must be given up, not stranded.
      if (words_.context().rt().peer_failed(descriptor_.memory.process)) return seen.how;
      return abandon();
    }
    if (seen.value == slot_word(ticket_, slot_granted)) return outcome::done;
    if (seen.value != slot_word(ticket_, slot_waiting)) {
      report_broken("waiting for the grant (the slot names another ticket)",
                    outcome::not_executed);
      return outcome::not_executed;
    }
    if (deadline_clock::now() >= deadline) return abandon();
    pause_between_reads(words_.context(), idle);
  }
}

outcome distributed_lock::abandon() {
  const std::uint64_t offset = slot_offset_of(ticket_, descriptor_.slots);
  const atomic_result left =
      step(detail::atomic_op::compare_swap, offset, slot_word(ticket_, slot_abandoned),
           slot_word(ticket_, slot_waiting));
  if (!left.ok()) {
    report_broken("abandoning a ticket at the deadline", left.how);
    return left.how;
  }
  if (left.value == slot_word(ticket_, slot_waiting)) {
    ++abandoned_;
    return outcome::deadline_exceeded;
  }
  if (left.value == slot_word(ticket_, slot_granted)) return outcome::done;  // the grant came first
  report_broken("abandoning a ticket (the slot names another ticket)", outcome::not_executed);
  return outcome::not_executed;
}

outcome distributed_lock::release() {
  if (!held_) return outcome::not_executed;
  held_ = false;
  thread_context::deferring_scope keep_exceptions(words_.context());
  std::uint32_t finishing = ticket_;
  std::uint64_t state = slot_granted;
  // Not bounded by `slots`: each skip finishes a ticket, which lets a new one be issued, and
  // that one may be abandoned too. Each turn finishes a ticket, though, and a ticket not issued
  // yet is always waiting, so the loop ends once acquirers stop leaving faster than it skips.
  for (;;) {
    if (outcome how = finish_ticket(finishing, state); how != outcome::done) return how;
    const std::uint32_t next = finishing + 1;
    const atomic_result handed =
        step(detail::atomic_op::compare_swap, slot_offset_of(next, descriptor_.slots),
             slot_word(next, slot_granted), slot_word(next, slot_waiting));
    if (!handed.ok()) {
      report_broken("granting the next ticket", handed.how);
      return handed.how;
    }
    if (handed.value == slot_word(next, slot_waiting)) return outcome::done;
    if (handed.value != slot_word(next, slot_abandoned)) {
      report_broken("granting the next ticket (the slot names another ticket)",
                    outcome::not_executed);
      return outcome::not_executed;
    }
    ++skipped_;  // that waiter left at its deadline: finish its ticket too
    finishing = next;
    state = slot_abandoned;
  }
}

outcome distributed_lock::finish_ticket(std::uint32_t ticket, std::uint64_t state) {
  const std::uint32_t reuser = ticket + descriptor_.slots;  // the ticket that uses the slot next
  const atomic_result handed =
      step(detail::atomic_op::compare_swap, slot_offset_of(ticket, descriptor_.slots),
           slot_word(reuser, slot_waiting), slot_word(ticket, state));
  if (!handed.ok() || handed.value != slot_word(ticket, state)) {
    report_broken("handing a finished slot on", handed.ok() ? outcome::not_executed : handed.how);
    return handed.ok() ? outcome::not_executed : handed.how;
  }
  const atomic_result served = step(detail::atomic_op::add, queue_word_offset, 1ull << 32, 0);
  if (!served.ok()) {
    report_broken("counting a finished ticket", served.how);
    return served.how;
  }
  return outcome::done;
}

}  // namespace seriema::fabric

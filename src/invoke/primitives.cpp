// Out-of-line parts of the primitives: synchronizers (words of the thread's registered feedback
// area) and the reply path of one-sided call_return.
#include <fmt/format.h>

#include <bit>
#include <cstdio>
#include <memory>

#include <seriema/base/error.hpp>
#include <seriema/transfer/arena.hpp>
#include <seriema/transfer/ucx.hpp>
#include <seriema/base/log.hpp>
#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/invoke.hpp>

namespace seriema::invoke {

namespace {

// The function a reply record runs at the caller: copies the value into the waiting slot. A
// reply for a slot that is no longer waiting (stale generation) is dropped.
struct reply_delivery {
  std::uint32_t slot;
  std::uint32_t generation;
  void operator()(thread_context& self, std::span<std::byte> value) const {
    (void)self.state().deliver_reply(slot, generation, value, fabric::outcome::done);
  }
};

std::atomic_ref<std::uint64_t> counter_word(thread_context& self, std::uint32_t word) {
  return std::atomic_ref<std::uint64_t>(channels_of(self).feedback_words()[word]);
}

}  // namespace

synchronizer::synchronizer(thread_context& self, std::uint64_t count)
    : self_(self),
      word_(channels_of(self).acquire_counter_word()) {
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

void synchronizer::note_target(thread_id dest) {
  if (dest >= self_.thread_count()) return;
  const auto process = static_cast<std::size_t>(self_.rt().placement().locate(dest).process);
  if (process < 64) {
    target_processes_ |= std::uint64_t{1} << process;
    return;
  }
  if (more_target_processes_.size() <= process - 64) more_target_processes_.resize(process - 63);
  more_target_processes_[process - 64] = true;
}

bool synchronizer::a_target_failed() const noexcept {
  fabric::runtime& rt = self_.rt();
  if (rt.failure_epoch() == 0) return false;  // nobody died: no scan
  for (std::uint64_t bits = target_processes_; bits != 0; bits &= bits - 1) {
    if (rt.peer_failed(std::countr_zero(bits))) return true;
  }
  for (std::size_t p = 0; p < more_target_processes_.size(); ++p) {
    if (more_target_processes_[p] && rt.peer_failed(static_cast<int>(p + 64))) return true;
  }
  return false;
}

fabric::outcome synchronizer::status() const noexcept {
  if (done()) return fabric::outcome::done;
  return a_target_failed() ? fabric::outcome::may_have_executed : fabric::outcome::pending;
}

fabric::outcome synchronizer::wait_until(fabric::deadline_clock::time_point deadline) {
  std::uint64_t epoch_checked = ~std::uint64_t{0};
  bool target_failed = false;
  const bool ended = self_.wait_until(
      [&] {
        if (done()) return true;
        const std::uint64_t epoch = self_.rt().failure_epoch();
        if (epoch != epoch_checked) {  // rescan only when another process died
          epoch_checked = epoch;
          target_failed = a_target_failed();
        }
        return target_failed;
      },
      deadline);
  if (done()) return fabric::outcome::done;
  return ended ? fabric::outcome::may_have_executed : fabric::outcome::deadline_exceeded;
}

namespace detail {

void reject_arguments(thread_context& self, std::uint32_t source, const char* what) noexcept {
  const std::uint64_t before =
      self.rt().counters().rejected_arguments.fetch_add(1, std::memory_order_relaxed);
  if (before == 0) {
    // The first one in this process is reported; all are counted.
    log::warning("thread {}: arguments of a call from thread {} rejected: {}", self.id(), source,
                 what);
  }
}

void check_registered_call(fabric::function_id id, std::size_t closure_size, bool returns) {
  const fabric::function_registry& registry = fabric::function_registry::instance();
  const fabric::function_entry* entry = registry.find(id);
  if (entry == nullptr) {
    throw error(fmt::format("call of function id {:#x}: no function is registered under it "
                            "(fabric::register_function, before the runtime starts)",
                            id & ~fabric::user_function_bit));
  }
  if (entry->closure_size != closure_size) {
    throw error(fmt::format("call of '{}' (id {:#x}): its closure has {} bytes, the call passes {}",
                            entry->name, id & ~fabric::user_function_bit, entry->closure_size,
                            closure_size));
  }
  if ((entry->result_size > 0) != returns) {
    throw error(fmt::format("call of '{}' (id {:#x}): it was registered {}, the call {}",
                            entry->name, id & ~fabric::user_function_bit,
                            entry->result_size > 0 ? "returning a value" : "without a value",
                            returns ? "waits for one (call_return_registered)"
                                    : "expects none (call_registered)"));
  }
}

void throw_result_size_mismatch(fabric::function_id id, std::size_t registered, std::size_t slot) {
  throw error(fmt::format("call_return of function id {:#x}: it returns {} bytes, the slot holds {}",
                          id & ~fabric::user_function_bit, registered, slot));
}

std::uint32_t open_broadcast_notices(thread_context& self, synchronizer& sync, notify_on when) {
  if (when == notify_on::transmit) return 0;
  fabric::runtime& rt = self.rt();
  sync.add(self.thread_count() - 1);
  for (int process = 0; process < rt.size(); ++process) {
    sync.note_target(rt.placement().global_id(process, 0));
  }
  return sync.word();
}

call_status check_broadcast_targets(thread_context& self, std::uint64_t size,
                                    std::span<const transfer::remote_memory_locator> targets) {
  if (targets.size() != self.thread_count()) return call_status::bad_destination;
  const fabric::placement& where = self.rt().placement();
  for (thread_id t = 0; t < targets.size(); ++t) {
    if (targets[t].process != where.locate(t).process) return call_status::bad_destination;
    if (targets[t].size < size) return call_status::too_large;
  }
  return call_status::ok;
}

void send_reply(thread_context& self, thread_id caller, std::uint32_t slot,
                std::uint32_t generation, std::span<const std::byte> value) {
  if (self.rt().is_attached_id(caller)) {
    // An attached caller (an offload executor) receives no one-sided records: fabric's reply
    // path, as a send-based call's reply goes.
    self.send_reply_value(caller, slot, generation, value);
    return;
  }
  reply_delivery delivery{slot, generation};
  call_status status = channels_of(self).to(caller).send_unbounded(
      fabric::function_wrapper<reply_delivery, fabric::buffer_shape>::id, bytes_of(delivery), value);
  if (status != call_status::ok) {
    // Too large for a record, or the caller's process died: the caller's slot never fills.
    channels_of(self).receive_counts().rejected_record += 1;
  }
}

void finish_reply(thread_context& self, thread_id caller, const fabric::reply_channel& reply,
                  std::span<const std::byte> value) {
  if (reply.deferred) return;
  if (reply.result == fabric::outcome::done) {
    send_reply(self, caller, reply.slot, reply.generation, value);
    return;
  }
  if (reply.result == fabric::outcome::threw) {
    self.rt().counters().exceptions_returned.fetch_add(1, std::memory_order_relaxed);
  }
  // As a failure always goes: through fabric's reply path, which runs no calls while it waits.
  self.send_failure(caller, reply.slot, reply.generation, reply.result, reply.details);
}

bool settle_left(thread_context& self, int process, fabric::deadline_clock::time_point deadline) {
  fabric::detail::staged_sends& staged = self.state().staged;
  if (!staged.left_in_flight(process)) return true;
  return self.wait_until([&] { return !staged.left_in_flight(process); }, deadline);
}

namespace {
// Waits (serving calls) until the UCX request of `self`'s worker completed, frees it and returns
// its status. Past `deadline` (UCX 1.13 cannot cancel it) the request stays in flight and the
// thread keeps `memory`, which it reads or writes, until UCX completed it: UCS_ERR_TIMED_OUT.
ucs_status_t wait_or_leave(thread_context& self, int process, void* request,
                           std::vector<std::byte>& memory,
                           fabric::deadline_clock::time_point deadline) {
  auto completed = [&] { return ucp_request_check_status(request) != UCS_INPROGRESS; };
  {
    // A call that throws meanwhile must not leave this wait: the request uses `memory`.
    thread_context::deferring_scope waiting(self);
    if (!self.wait_until(completed, deadline)) {
      self.state().staged.leave(process, std::move(memory), request);
      return UCS_ERR_TIMED_OUT;
    }
  }
  const ucs_status_t status = ucp_request_check_status(request);
  ucp_request_free(request);
  return status;
}
}  // namespace

call_status put_and_wait(thread_context& self, std::span<const std::byte> bytes,
                         const transfer::remote_memory_locator& target) {
  fabric::runtime& rt = self.rt();
  transfer::ucx_endpoint& endpoint = self.endpoint_to(target.process);
  if (endpoint.failed()) return call_status::peer_failed;
  transfer::remote_memory remote(endpoint, target, rt.same_machine(target.process));
  if (!remote.contains(0, bytes.size())) return call_status::too_large;
  if (remote.direct() != nullptr) {
    std::memcpy(remote.direct(), bytes.data(), bytes.size());
    std::atomic_thread_fence(std::memory_order_release);  // before the call that names it
    return call_status::ok;
  }
  const fabric::deadline_clock::time_point deadline = self.deadline_in_force();
  if (!settle_left(self, target.process, deadline)) return call_status::deadline_exceeded;
  // UCX reads the source until the put completed, which may be after the deadline (it cannot
  // cancel a put queued behind a full socket): the put goes from a copy the thread can keep.
  std::vector<std::byte> source(bytes.begin(), bytes.end());
  ucp_request_param_t param{};
  void* put = ucp_put_nbx(endpoint.handle(), source.data(), source.size(), remote.address(),
                          remote.rkey(), &param);
  if (UCS_PTR_IS_ERR(put)) return call_status::error;
  if (put != nullptr) ucp_request_free(put);
  // Remote completion: the flush completes once the bytes are in the target's memory (and so
  // after the put read `source`). Wait serving calls (and so progressing this process's
  // worker): over tcp the target's thread may itself be waiting on a put to us, and needs our
  // progress as we need its.
  void* flush = ucp_ep_flush_nbx(endpoint.handle(), &param);
  if (flush == nullptr) return call_status::ok;
  if (UCS_PTR_IS_ERR(flush)) return call_status::peer_failed;
  const ucs_status_t st = wait_or_leave(self, target.process, flush, source, deadline);
  if (st == UCS_OK) return call_status::ok;
  return st == UCS_ERR_TIMED_OUT ? call_status::deadline_exceeded : call_status::peer_failed;
}

std::vector<std::byte> read_remote(thread_context& self,
                                   const transfer::remote_memory_locator& origin) {
  fabric::runtime& rt = self.rt();
  if (origin.process < 0 || origin.process >= rt.size()) {
    throw error(fmt::format("call_buffer_get: no process {}", origin.process));
  }
  transfer::ucx_endpoint& endpoint = self.endpoint_to(origin.process);
  transfer::remote_memory remote(endpoint, origin, rt.same_machine(origin.process));
  std::vector<std::byte> local(static_cast<std::size_t>(origin.size));
  if (remote.direct() != nullptr) {
    std::memcpy(local.data(), remote.direct(), local.size());
    return local;
  }
  const fabric::deadline_clock::time_point deadline = self.deadline_in_force();
  if (!settle_left(self, origin.process, deadline)) {
    throw deadline_error(fmt::format(
        "call_buffer_get on thread {}: deadline passed before the read of {} could start (an "
        "earlier read or put to rank {} is still in flight)",
        self.id(), origin.to_string(), origin.process));
  }
  ucp_request_param_t param{};
  void* get = ucp_get_nbx(endpoint.handle(), local.data(), local.size(), remote.address(),
                          remote.rkey(), &param);
  if (UCS_PTR_IS_ERR(get)) {
    throw error(fmt::format("call_buffer_get: read of {} failed: {}", origin.to_string(),
                            ucs_status_string(UCS_PTR_STATUS(get))));
  }
  if (get == nullptr) return local;
  // Serve calls while the read is in flight (the origin may need our progress over tcp); past
  // the deadline `local` stays with the thread until UCX completed the read.
  const ucs_status_t st = wait_or_leave(self, origin.process, get, local, deadline);
  if (st == UCS_ERR_TIMED_OUT) {
    throw deadline_error(fmt::format("call_buffer_get on thread {}: read of {} passed its deadline",
                                     self.id(), origin.to_string()));
  }
  if (st != UCS_OK) {
    throw error(fmt::format("call_buffer_get: read of {} failed: {}", origin.to_string(),
                            ucs_status_string(st)));
  }
  return local;
}

}  // namespace detail

}  // namespace seriema::invoke

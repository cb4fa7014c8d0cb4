// What arrives at the process worker: the active-message handlers for calls, replies, write
// messages and feedback, each checking its input before anything runs, and serve(), which
// progresses the worker for a thread and runs the service calls.
#include <cstring>
#include <seriema/base/error.hpp>
#include "runtime/runtime_internal.hpp"

namespace seriema::fabric {

namespace {
// The context whose poll() is progressing the process worker on this thread (inside serve), for
// on_call_message's shortcut; null elsewhere (service threads, a send's wait for UCX).
thread_local thread_context* serving_context = nullptr;
}  // namespace

std::size_t runtime::serve(thread_context& self) {
  serving_context = (self.id() & service_bit) == 0 ? &self : nullptr;
  progress_shared();
  serving_context = nullptr;
  // One thread at a time runs service calls, so they run in arrival order; the progress flag
  // is not held meanwhile (a service call that sends must not stop others from progressing).
  if (service_queue_.empty() && !service_leftover_.load(std::memory_order_relaxed)) return 0;
  bool expected = false;
  if (!service_running_.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
    return 0;
  }
  struct finish_service {  // also when a service call throws: note what is left, free the role
    runtime& rt;
    ~finish_service() {
      rt.service_leftover_.store(!rt.service_pending_.empty(), std::memory_order_relaxed);
      rt.service_running_.store(false, std::memory_order_release);
    }
  } finish{*this};
  std::vector<call_queue::item> batch;
  service_queue_.take_all(batch);
  service_pending_.insert(service_pending_.end(), batch.begin(), batch.end());
  return thread_context::run_calls(self, service_pending_);
}

namespace {

// Validates a call's header against its payload; returns false for anything malformed,
// including a source that names no thread or service of the job (a reply would go there).
bool well_formed(const call_header& h, std::size_t length, const function_entry* entry,
                 const runtime& rt) {
  if (entry == nullptr || !rt.source_exists(h.source)) return false;
  const std::size_t send_limit = rt.options().send_limit;
  // Overflow-safe: sizes are 32-bit, their sum is computed in 64 bits.
  std::uint64_t expected = std::uint64_t{h.closure_size} + h.buffer_size;
  return h.closure_size == entry->closure_size && expected == length && length <= send_limit &&
         (h.reply_slot == 0 || entry->result_size > 0) && h.reserved == 0;
}

}  // namespace

ucs_status_t runtime::am_handlers::on_call_message(
    void* arg, const void* header, std::size_t header_length, void* data, std::size_t length,
    const ucp_am_recv_param_t* param) {
  auto* self = static_cast<runtime*>(arg);
  if (header_length != sizeof(call_header)) {
    self->counters_.rejected_malformed.fetch_add(1, std::memory_order_relaxed);
    return UCS_OK;
  }
  call_header h;
  std::memcpy(&h, header, sizeof h);
  const function_entry* entry = function_registry::instance().find(h.function);
  if (entry == nullptr) {
    // A caller waiting for a reply learns it (not executed): the destination's run_calls counts
    // it and sends the failure (no sending from inside UCX's progress here).
    if (h.reply_slot != 0) {
      if (call_queue* queue = self->queue_of(h.destination); queue != nullptr &&
          self->source_exists(h.source)) {
        call_queue::item item;
        item.header = h;
        queue->push(item);
        return UCS_OK;
      }
    }
    self->counters_.rejected_unknown_function.fetch_add(1, std::memory_order_relaxed);
    return UCS_OK;
  }
  if (!well_formed(h, length, entry, *self) ||
      (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) {
    self->counters_.rejected_malformed.fetch_add(1, std::memory_order_relaxed);
    return UCS_OK;
  }
  call_queue* queue = self->queue_of(h.destination);
  if (queue == nullptr) {
    if (h.reply_slot != 0 && self->is_local(h.destination)) {
      // An attach slot nobody attached yet: the service role tells the caller (run_calls).
      call_queue::item refused;
      refused.header = h;
      refused.refused = true;
      self->service_queue_.push(refused);
      return UCS_OK;
    }
    self->counters_.rejected_bad_destination.fetch_add(1, std::memory_order_relaxed);
    return UCS_OK;
  }
  call_queue::item item;
  item.header = h;
  item.entry = entry;
  ucs_status_t keep = UCS_OK;
  if (length > call_queue::inline_payload &&
      (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA) != 0) {
    item.ucx_data = data;  // kept until the call ran (released by run_calls)
    keep = UCS_INPROGRESS;
  } else {
    item.store({{static_cast<const std::byte*>(data), length}});
  }
  thread_context* poller = serving_context;
  // The queue found above is the poller's own (serve never names a service context).
  if (poller != nullptr && &poller->state().incoming == queue && queue->empty()) {
    poller->accept_from_handler(item);
    self->counters_.handed_to_poller.fetch_add(1, std::memory_order_relaxed);
  } else {
    queue->push(item);
  }
  return keep;
}

ucs_status_t runtime::am_handlers::on_feedback_message(
    void* arg, const void* header, std::size_t header_length, void*, std::size_t length,
    const ucp_am_recv_param_t*) {
  auto* self = static_cast<runtime*>(arg);
  feedback_message m;
  if (header_length != sizeof m || length != 0) {
    self->counters_.rejected_feedback.fetch_add(1, std::memory_order_relaxed);
    return UCS_OK;
  }
  std::memcpy(&m, header, sizeof m);
  if (!self->is_local(m.thread) || !self->local_state(m.thread).add_feedback(m.word, m.value)) {
    self->counters_.rejected_feedback.fetch_add(1, std::memory_order_relaxed);
  }
  return UCS_OK;
}

ucs_status_t runtime::am_handlers::on_write_message(
    void* arg, const void* header, std::size_t header_length, void* data, std::size_t length,
    const ucp_am_recv_param_t* param) {
  auto* self = static_cast<runtime*>(arg);
  write_message m;
  const bool applied = header_length == sizeof m &&
                       (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) == 0 &&
                       (std::memcpy(&m, header, sizeof m),
                        self->service_write(m, {static_cast<const std::byte*>(data), length}));
  if (!applied) self->counters_.rejected_writes.fetch_add(1, std::memory_order_relaxed);
  return UCS_OK;
}

ucs_status_t runtime::am_handlers::on_reply_message(
    void* arg, const void* header, std::size_t header_length, void* data, std::size_t length,
    const ucp_am_recv_param_t*) {
  auto* self = static_cast<runtime*>(arg);
  call_header h;
  if (header_length != sizeof h) {
    self->counters_.rejected_bad_reply.fetch_add(1, std::memory_order_relaxed);
    return UCS_OK;
  }
  std::memcpy(&h, header, sizeof h);
  // For a reply, `destination` is the caller thread and buffer_size its outcome: 0 the value
  // follows, else the failure's (threw, not_executed; deliver_reply refuses anything else).
  local_thread_state* owner = self->reply_owner(h.destination);
  const outcome result = h.buffer_size == 0 ? outcome::done
                         : h.buffer_size <= 0xff ? static_cast<outcome>(h.buffer_size)
                                                 : outcome::pending;
  bool delivered = owner != nullptr &&
                   owner->deliver_reply(h.reply_slot, h.reply_generation,
                                        {static_cast<const std::byte*>(data), length}, result);
  if (delivered) {
    self->counters_.executed.fetch_add(1, std::memory_order_relaxed);  // a reply is a message too
  } else {
    self->counters_.rejected_bad_reply.fetch_add(1, std::memory_order_relaxed);
  }
  return UCS_OK;
}

}  // namespace seriema::fabric

// Send-based remote invocation: sending calls as UCX active messages (or straight into a local
// thread's queue), running received calls in FIFO order, replies for call_return, and the
// remote allocation service.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <seriema/base/enum_names.hpp>
#include <seriema/base/error.hpp>
#include <seriema/base/log.hpp>
#include <seriema/fabric/detail/scratch.hpp>
#include "runtime/runtime_internal.hpp"
#include <seriema/fabric/thread_context.hpp>
#include <thread>

namespace seriema::fabric {

namespace {

using send_result = detail::staged_sends::result;
using wait_end = detail::staged_sends::wait_end;

// Progresses `self`'s worker (and the process worker: the peer's answer to our wireup may need
// it, and so may the peer's own sends to us) until `request` completed, the runtime knows
// `process` dead (its endpoint may never report it: another worker's keepalive found the
// death), or `deadline` passed. Runs no calls (the process worker's handlers only queue them).
wait_end progress_request(thread_context& self, void* request, int process,
                          deadline_clock::time_point deadline) noexcept {
  unsigned idle = 0;
  while (ucp_request_check_status(request) == UCS_INPROGRESS) {
    const bool progressed = self.worker().progress();
    self.rt().progress_shared();
    if (progressed) continue;
    if (process >= 0 && self.rt().peer_failed(process)) return wait_end::peer_dead;
    if (deadline != no_deadline && deadline_clock::now() >= deadline) return wait_end::deadline;
    thread_context::back_off(idle);
  }
  return wait_end::completed;
}

// Waits for an endpoint flush until the deadline in force; a flush still in flight then is
// handed back to UCX (it reads no memory of ours), so the caller goes on.
void wait_flush(thread_context& self, void* request, int process) noexcept {
  if (request == nullptr || UCS_PTR_IS_ERR(request)) return;
  (void)progress_request(self, request, process, self.deadline_in_force());
  ucp_request_free(request);
}

// A send-based message (`header`, then `closure` and `buffer`) to `process`, ended by the
// deadline in force (staged_sends::send: what UCX cannot take at once is copied first).
send_result send_message(thread_context& self, transfer::ucx_endpoint& endpoint, int process,
                         unsigned am_id, const call_header& header,
                         std::span<const std::byte> closure, std::span<const std::byte> buffer) {
  const deadline_clock::time_point deadline = self.deadline_in_force();
  return self.state().staged.send(
      endpoint.handle(), process, am_id,
      {reinterpret_cast<const std::byte*>(&header), sizeof header}, closure, buffer,
      [&](void* request) { return progress_request(self, request, process, deadline); });
}

// The registered layers by slot. Written before main (static initializers, serialized by
// layers_mutex), read by every thread_context constructor after that.
struct layer_registry {
  std::mutex mutex;
  std::array<thread_layer, layer_slot::count> by_slot{};
};
layer_registry& layers() {
  static layer_registry registry;
  return registry;
}

}  // namespace

std::size_t register_thread_layer(const thread_layer& layer) noexcept {
  layer_registry& registry = layers();
  std::lock_guard lock(registry.mutex);
  if (layer.slot >= layer_slot::count || layer.make == nullptr) {
    std::fprintf(stderr, "seriema: layer '%.*s' asks for slot %zu (there are %zu) or has no "
                 "factory: a build error\n", static_cast<int>(layer.name.size()),
                 layer.name.data(), layer.slot, layer_slot::count);
    std::abort();
  }
  thread_layer& taken = registry.by_slot[layer.slot];
  if (taken.make != nullptr && taken.make != layer.make) {
    std::fprintf(stderr, "seriema: layers '%.*s' and '%.*s' both registered in slot %zu: give "
                 "one another slot (fabric/detail/thread_extension.hpp)\n",
                 static_cast<int>(taken.name.size()), taken.name.data(),
                 static_cast<int>(layer.name.size()), layer.name.data(), layer.slot);
    std::abort();
  }
  taken = layer;
  return layer.slot;
}

thread_layer registered_thread_layer(std::size_t slot) noexcept {
  layer_registry& registry = layers();
  std::lock_guard lock(registry.mutex);
  return slot < layer_slot::count ? registry.by_slot[slot] : thread_layer{};
}

const char* to_string(call_status status) noexcept {
  static constexpr enum_name_entry<call_status> names[] = {
      {call_status::ok, "ok"},
      {call_status::bad_destination, "no such destination thread"},
      {call_status::too_large,
       "call too large for its path: send-based, over SERIEMA_SEND_LIMIT; one-sided, over the "
       "chunk's data area (SERIEMA_CHUNK_SIZE) or, to another machine, a staging unit "
       "(SERIEMA_STAGING_SIZE); or a put variant's target smaller than its bytes "
       "(invoke::describe names the one that applies)"},
      {call_status::peer_failed, "destination process failed"},
      {call_status::full, "destination's chunks are full (channel at its maximum)"},
      {call_status::error, "UCX error"},
      {call_status::queued_at_deadline,
       "queued in UCX past its deadline (stalled or partitioned peer); it may still run"},
      {call_status::deadline_exceeded, "deadline exceeded before the call could be sent"},
  };
  return name_in(names, status);
}

const char* to_string(outcome o) noexcept {
  static constexpr enum_name_entry<outcome> names[] = {
      {outcome::pending, "pending"},
      {outcome::done, "done"},
      {outcome::threw, "failed: the function threw at the destination"},
      {outcome::not_executed, "failed, not executed"},
      {outcome::may_have_executed,
       "failed, may have executed: the destination's process died before replying"},
      {outcome::deadline_exceeded,
       "deadline exceeded (a late reply is dropped; the call may still run)"},
      {outcome::cancelled, "cancelled (a late reply is dropped; the call may still run)"},
  };
  return name_in(names, o, "unknown outcome");
}

std::string describe(outcome o, std::uint32_t destination, int process) {
  const std::string target =
      (destination & service_bit) != 0
          ? fmt::format("the service of rank {}", destination & ~service_bit)
          : fmt::format("thread {} (rank {})", destination, process);
  return fmt::format("call to {}: {}", target, to_string(o));
}

void report_unknown_function(thread_context& self, std::uint32_t source,
                             function_id function) noexcept {
  static std::atomic<bool> reported{false};
  if (reported.exchange(true, std::memory_order_relaxed)) return;
  log::error("thread {} received a call from thread {} naming function {:016x}, which is not "
             "registered here (different builds of the program?); not run, its caller's slot "
             "fails (not executed); later ones are only counted",
             self.id(), source, function);
}

void call_queue::item::store(std::initializer_list<std::span<const std::byte>> parts) {
  std::size_t total = 0;
  for (auto part : parts) total += part.size();
  std::byte* out = inline_bytes;
  if (total > inline_payload) out = heap = new std::byte[total];
  for (auto part : parts) {
    if (!part.empty()) std::memcpy(out, part.data(), part.size());
    out += part.size();
  }
}

void call_queue::item::release(ucp_worker_h worker) noexcept {
  if (ucx_data != nullptr) ucp_am_data_release(worker, ucx_data);
  delete[] heap;
  ucx_data = nullptr;
  heap = nullptr;
}

void call_queue::push(const item& call) {
  std::lock_guard lock(mutex_);
  items_.push_back(call);
  size_.store(items_.size(), std::memory_order_relaxed);
}

std::size_t call_queue::take_all(std::vector<item>& out) {
  out.clear();
  if (empty()) return 0;
  std::lock_guard lock(mutex_);
  out.swap(items_);
  size_.store(0, std::memory_order_relaxed);
  return out.size();
}

namespace {
// Failure details kept at most per thread: a peer sending details for slots nobody collects
// cannot grow the list without bound (the oldest are dropped).
constexpr std::size_t max_failure_details = 4096;
}  // namespace

bool local_thread_state::deliver_reply(std::uint32_t index, std::uint32_t generation,
                                       std::span<const std::byte> value, outcome result) noexcept {
  const bool ok = result == outcome::done;
  if (!ok && !is_reply_failure(result)) return false;
  const bool details = !ok && !value.empty();
  if (details && !keep_failure_details(index, generation, value)) return false;
  if ((index & reply_cell::index_bit) != 0) {
    if (cells.deliver(index, generation, ok ? value : std::span<const std::byte>{}, result)) {
      return true;
    }
    if (details) (void)take_failure_details(index, generation);
    return false;
  }
  std::lock_guard lock(replies_mutex);
  const bool delivered = deliver_to_entry(index, generation, value, result);
  if (!delivered && details) std::erase_if(failures, [&](const failure_details& f) {
    return f.index == index && f.generation == generation;
  });
  return delivered;
}

bool local_thread_state::deliver_to_entry(std::uint32_t index, std::uint32_t generation,
                                          std::span<const std::byte> value,
                                          outcome result) noexcept {
  const bool ok = result == outcome::done;
  if (index == 0 || index >= replies.size()) return false;
  reply_entry& entry = replies[index];
  if (entry.state == nullptr || entry.generation != generation) return false;  // stale/forged
  if (ok && entry.bytes != nullptr) {
    try {
      entry.bytes->assign(value.begin(), value.end());
    } catch (...) {  // out of memory: the reply is lost, the caller's future waits for it
      return false;
    }
  } else if (ok) {
    if (value.size() != entry.size) return false;
    std::memcpy(entry.value, value.data(), value.size());
  }
  entry.state->store(static_cast<int>(result), std::memory_order_release);
  entry.state = nullptr;
  entry.value = nullptr;
  entry.bytes = nullptr;
  free_replies.push_back(index);
  return true;
}

bool local_thread_state::keep_failure_details(std::uint32_t index, std::uint32_t generation,
                                              std::span<const std::byte> details) noexcept {
  std::lock_guard lock(replies_mutex);
  try {
    if (failures.size() >= max_failure_details) failures.erase(failures.begin());
    failures.push_back({index, generation, {details.begin(), details.end()}});
  } catch (...) {
    return false;
  }
  return true;
}

std::vector<std::byte> local_thread_state::take_failure_details(std::uint32_t index,
                                                                std::uint32_t generation) noexcept {
  std::lock_guard lock(replies_mutex);
  for (auto it = failures.begin(); it != failures.end(); ++it) {
    if (it->index == index && it->generation == generation) {
      std::vector<std::byte> out = std::move(it->bytes);
      failures.erase(it);
      return out;
    }
  }
  return {};
}

std::size_t local_thread_state::fail_pending_to(int process, outcome why) noexcept {
  std::size_t failed = cells.fail_pending_to(process, why);
  std::lock_guard lock(replies_mutex);
  for (std::uint32_t index = 1; index < replies.size(); ++index) {
    reply_entry& entry = replies[index];
    if (entry.state == nullptr || entry.process != process) continue;
    entry.state->store(static_cast<int>(why), std::memory_order_release);
    entry.state = nullptr;
    entry.value = nullptr;
    entry.bytes = nullptr;
    free_replies.push_back(index);
    ++failed;
  }
  return failed;
}

void abandon_reply(local_thread_state& owner, std::uint32_t index,
                   std::uint32_t generation) noexcept {
  std::lock_guard lock(owner.replies_mutex);
  if (index == 0 || index >= owner.replies.size()) return;
  auto& entry = owner.replies[index];
  if (entry.state == nullptr || entry.generation != generation) return;  // delivered meanwhile
  entry.state = nullptr;
  entry.value = nullptr;
  entry.bytes = nullptr;
  owner.free_replies.push_back(index);
}

void local_thread_state::grant(std::span<const granted_memory> batch) {
  granted.grant(batch);
  const auto firsts = std::count_if(batch.begin(), batch.end(),
                                    [](const granted_memory& g) { return g.batch == 0; });
  if (firsts > 0) {
    first_grants.fetch_add(static_cast<std::size_t>(firsts), std::memory_order_release);
  }
}

bool local_thread_state::add_feedback(std::uint32_t word, std::uint64_t value) noexcept {
  std::lock_guard lock(feedback_mutex);
  if (feedback_words == nullptr || word >= feedback_count) return false;
  std::atomic_ref<std::uint64_t>(feedback_words[word]).fetch_add(value, std::memory_order_acq_rel);
  return true;
}

thread_context::thread_context(runtime& rt, thread_id id)
    : rt_(rt),
      id_(id),
      state_((id & service_bit) != 0 ? rt.service_state() : rt.local_state(id)),
      cells_(state_.cells),
      worker_(nullptr),
      endpoints_(state_.endpoints) {
  // Log lines of this thread name it (a service context leaves the thread out).
  log::set_thread((id & service_bit) != 0 ? -1 : static_cast<std::int64_t>(id));
  if (!state_.worker) {
    state_.worker = std::make_unique<transfer::ucx_worker>(rt.context(),
                                                           transfer::worker_sharing::single_thread);
    state_.endpoints.resize(static_cast<std::size_t>(rt.size()));
  }
  worker_ = state_.worker.get();
  run_epoch_ = rt.run_epoch();
  make_layers();
}

void thread_context::make_layers() {
  // Service roles run no layer; attached threads only the layers that serve them.
  if ((id_ & service_bit) != 0) return;
  const bool attached = rt_.is_attached_id(id_);
  for (std::size_t slot = 0; slot < layer_slot::count; ++slot) {
    const thread_layer layer = registered_thread_layer(slot);
    if (layer.make == nullptr) continue;
    if (attached && layer.scope != layer_scope::workers_and_attached) continue;
    layers_[slot] = layer.make(*this);
  }
  order_layers();
}

void thread_context::order_layers() noexcept {
  layer_count_ = 0;
  for (auto& layer : layers_) {
    if (layer) in_order_[layer_count_++] = layer.get();
  }
}

thread_extension* thread_context::renew_layer(std::size_t slot) {
  const thread_layer layer = registered_thread_layer(slot);
  if (layer.make == nullptr) return nullptr;
  // The old state goes first (it hands its registered memory back before the new one takes
  // some), out of the poll order while it is destroyed.
  drop_layer(slot);
  layers_[slot] = layer.make(*this);
  order_layers();
  return layers_[slot].get();
}

void thread_context::drop_layer(std::size_t slot) noexcept {
  layers_[slot].reset();
  order_layers();
}

void thread_context::adopt_owner_thread() noexcept { log::set_thread(static_cast<std::int64_t>(id_)); }

std::size_t thread_context::release_owner_thread() noexcept {
  const std::size_t dropped = deferred_.size();
  deferred_.clear();
  log::set_thread(-1);
  return dropped;
}

thread_context::~thread_context() {
  log::set_thread(-1);
  // Upper layers first (they may use the lower ones); the worker and endpoints stay with state_
  // for the next run.
  for (std::size_t slot = layer_slot::count; slot-- > 0;) layers_[slot].reset();
  layer_count_ = 0;
  // Calls received but not run (the thread's body ended by an exception mid-batch) go back to
  // the thread's queue, where the runtime's teardown releases them.
  for (const auto& item : pending_) state_.incoming.push(item);
}

helped_section::helped_section(thread_context& self) : state_(self.state()) {
  if (self.rt().options().helper_threads == 0) {
    throw error(fmt::format("thread {}: helped_section needs helper threads, and this process "
                            "has none (SERIEMA_HELPER_THREADS=0)",
                            self.id()));
  }
  if (state_.poller.load(std::memory_order_relaxed) != local_thread_state::owner_polls) {
    throw error(fmt::format("thread {}: helped_section inside a helped_section", self.id()));
  }
  state_.offer_to_helpers(self);
}

helped_section::~helped_section() { state_.take_back_from_helpers(); }

void local_thread_state::offer_to_helpers(thread_context& context) noexcept {
  offered = &context;
  poller.store(offered_to_helpers, std::memory_order_release);
  context.rt().wake_helpers();
}

void local_thread_state::take_back_from_helpers() noexcept {
  // A helper may be inside a poll of the context: wait until it has put it back.
  int expected = offered_to_helpers;
  while (!poller.compare_exchange_weak(expected, owner_polls, std::memory_order_acq_rel)) {
    expected = offered_to_helpers;
    std::this_thread::yield();
  }
  offered = nullptr;
}

void local_thread_state::release_transport() noexcept {
  remote_ops.transmitters.clear();  // they post on the endpoints
  endpoints.clear();  // before the worker they belong to
  staged.release_requests();  // their memory stays until this state goes, after the worker
  worker.reset();
}

int thread_context::process() const noexcept { return rt_.process_of_thread(id_); }

thread_id thread_context::thread_count() const noexcept { return rt_.placement().thread_count(); }

transfer::ucx_endpoint& thread_context::endpoint_to(int process) {
  auto& slot = endpoints_[static_cast<std::size_t>(process)];
  if (!slot) slot = rt_.connect(*worker_, process);
  return *slot;
}

void thread_context::flush_endpoints() {
  flush_layers();
  for (std::size_t process = 0; process < endpoints_.size(); ++process) {
    auto& endpoint = endpoints_[process];
    if (!endpoint || endpoint->failed()) continue;
    ucp_request_param_t param{};
    wait_flush(*this, ucp_ep_flush_nbx(endpoint->handle(), &param), static_cast<int>(process));
  }
}

void thread_context::back_off(unsigned& idle) noexcept {
  // Spin briefly, then yield, then sleep: idle pollers must leave the cores to busy threads
  // (tests run more polling threads than there are cores).
  ++idle;
  if (idle < 64) return;
  if (idle < 256) {
    std::this_thread::yield();
    return;
  }
  std::this_thread::sleep_for(std::chrono::microseconds(idle < 4096 ? 20 : 200));
}

int thread_context::process_of(std::uint32_t dest) const noexcept {
  return rt_.process_of_thread(dest);
}

deadline_clock::time_point thread_context::deadline_in_force(
    deadline_clock::time_point deadline) const noexcept {
  if (scope_deadline_ < deadline) deadline = scope_deadline_;
  const auto timeout = rt_.options().timeout;
  if (timeout.count() > 0) {
    const auto by_default = deadline_clock::now() + timeout;
    if (by_default < deadline) deadline = by_default;
  }
  return deadline;
}

std::pair<std::uint32_t, std::uint32_t> thread_context::open_reply(void* value, std::size_t size,
                                                                   std::atomic<int>* state,
                                                                   int process) {
  std::lock_guard lock(state_.replies_mutex);
  std::uint32_t index;
  if (!state_.free_replies.empty()) {
    index = state_.free_replies.back();
    state_.free_replies.pop_back();
  } else {
    index = static_cast<std::uint32_t>(state_.replies.size());
    state_.replies.emplace_back();
  }
  auto& entry = state_.replies[index];
  entry.value = value;
  entry.size = size;
  entry.bytes = nullptr;
  entry.state = state;
  entry.process = process;
  ++entry.generation;
  return {index, entry.generation};
}

thread_context::opened_reply thread_context::open_reply_raw(thread_id dest, std::size_t size,
                                                            void* value,
                                                            std::atomic<int>* state) {
  const int process = process_of(dest);
  if (auto cell = cells_.open(size, process)) return {cell->first, cell->second, true, process};
  auto [index, generation] = open_reply(value, size, state, process);
  return {index, generation, false, process};
}

thread_context::opened_reply thread_context::open_variable_reply(thread_id dest,
                                                                 std::vector<std::byte>* bytes,
                                                                 std::atomic<int>* state) {
  const int process = process_of(dest);
  auto [index, generation] = open_reply(nullptr, 0, state, process);
  std::lock_guard lock(state_.replies_mutex);
  state_.replies[index].bytes = bytes;
  return {index, generation, false, process};
}

void thread_context::fail_unsent_reply(std::uint32_t index) noexcept {
  if ((index & reply_cell::index_bit) != 0) {
    state_.cells.fail_unsent(index);
    return;
  }
  std::lock_guard lock(state_.replies_mutex);
  auto& entry = state_.replies[index];
  if (entry.state != nullptr) {
    entry.state->store(static_cast<int>(outcome::not_executed), std::memory_order_release);
  }
  entry.state = nullptr;
  entry.value = nullptr;
  entry.bytes = nullptr;
  state_.free_replies.push_back(index);
}

call_status thread_context::send_call(std::uint32_t dest, function_id function,
                                      std::span<const std::byte> closure,
                                      std::span<const std::byte> buffer, std::uint32_t reply_slot,
                                      std::uint32_t reply_generation) {
  const int process = rt_.process_of_thread(dest);
  if (process < 0) return call_status::bad_destination;
  // Overflow-safe: a buffer size near SIZE_MAX must not wrap the sum below the limit.
  const std::size_t limit = rt_.options().send_limit;
  if (buffer.size() > limit || closure.size() > limit - buffer.size()) {
    return call_status::too_large;
  }
  if (process != rt_.rank() && rt_.peer_failed(process)) return call_status::peer_failed;
  call_header header;
  header.function = function;
  header.destination = dest;
  header.source = id_;
  header.closure_size = static_cast<std::uint32_t>(closure.size());
  header.buffer_size = static_cast<std::uint32_t>(buffer.size());
  header.reply_slot = reply_slot;
  header.reply_generation = reply_generation;

  rt_.counters().sent.fetch_add(1, std::memory_order_relaxed);
  if (process == rt_.rank()) {
    // Same process: straight into the destination's queue, no UCX involved.
    call_queue* queue = rt_.queue_of(dest);
    if (queue == nullptr) {  // an attach slot of this process nobody attached yet
      rt_.counters().sent.fetch_sub(1, std::memory_order_relaxed);
      return call_status::bad_destination;
    }
    call_queue::item item;
    item.header = header;
    item.store({closure, buffer});
    queue->push(item);
    return call_status::ok;
  }

  transfer::ucx_endpoint& endpoint = endpoint_to(process);
  if (endpoint.failed()) {
    rt_.counters().sent.fetch_sub(1, std::memory_order_relaxed);
    return call_status::peer_failed;
  }
  // The closure usually lives on the caller's stack: send_message copies what UCX cannot take
  // at once (send-based calls are the no-setup path, not the high-rate one).
  switch (send_message(*this, endpoint, process, am_id_call, header, closure, buffer)) {
    case send_result::sent:
      return call_status::ok;
    case send_result::queued_at_deadline:
      return call_status::queued_at_deadline;  // still counted as sent: it may arrive
    case send_result::deadline_unsent:
      rt_.counters().sent.fetch_sub(1, std::memory_order_relaxed);
      return call_status::deadline_exceeded;
    case send_result::peer_failed:
    case send_result::error:
      break;
  }
  rt_.counters().sent.fetch_sub(1, std::memory_order_relaxed);
  if (endpoint.failed() || rt_.peer_failed(process)) return call_status::peer_failed;
  return call_status::error;
}

void thread_context::send_reply(thread_id caller, function_id function, std::uint32_t slot,
                                std::uint32_t generation, std::span<const std::byte> value,
                                outcome result) {
  const bool ok = result == outcome::done;
  call_header reply;
  reply.function = function;
  reply.destination = caller;
  reply.source = id_;
  // 0: the value follows; else the failure's outcome (threw, not_executed), and the data its
  // details (what the caller's future learns of an exception; usually none).
  reply.buffer_size = ok ? 0 : static_cast<std::uint32_t>(result);
  reply.reply_slot = slot;
  reply.reply_generation = generation;
  const int caller_process = rt_.process_of_thread(caller);
  if (caller_process < 0) return;  // the receive path checked the source: never here
  rt_.counters().sent.fetch_add(1, std::memory_order_relaxed);
  if (caller_process == rt_.rank()) {
    local_thread_state* owner = rt_.reply_owner(caller);
    if (owner != nullptr && owner->deliver_reply(slot, generation, value, result)) {
      rt_.counters().executed.fetch_add(1, std::memory_order_relaxed);
    } else {
      rt_.counters().rejected_bad_reply.fetch_add(1, std::memory_order_relaxed);
    }
    return;
  }
  // A cell holds an outcome, not a failure's details: those travel as a message.
  if ((slot & reply_cell::index_bit) != 0 && (ok || value.empty())) {
    // The caller's cell, written with plain stores when its process's region maps here.
    std::span<std::byte> cells = rt_.reply_cells_of(caller_process);
    if (!cells.empty()) {
      std::byte* cell = reply_cell::in_region(cells, slot);
      if (cell != nullptr && reply_cell::write(cell, generation, value, result)) {
        rt_.counters().executed.fetch_add(1, std::memory_order_relaxed);
        rt_.counters().replies_direct.fetch_add(1, std::memory_order_relaxed);
      } else {
        rt_.counters().rejected_bad_reply.fetch_add(1, std::memory_order_relaxed);
      }
      return;
    }
  }
  if (rt_.peer_failed(caller_process)) {  // nobody waits there any more
    rt_.counters().sent.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  transfer::ucx_endpoint& endpoint = endpoint_to(caller_process);
  const send_result sent = send_message(*this, endpoint, caller_process, am_id_reply, reply, value, {});
  if (sent != send_result::sent && sent != send_result::queued_at_deadline) {
    rt_.counters().sent.fetch_sub(1, std::memory_order_relaxed);
  }
}

void thread_context::send_failure(thread_id caller, std::uint32_t slot, std::uint32_t generation,
                                  outcome why, std::span<const std::byte> details) {
  // Details beyond the send limit are cut: the caller then learns the failure without them.
  if (details.size() > rt_.options().send_limit) details = {};
  send_reply(caller, 0, slot, generation, details, why);
}

void thread_context::send_reply_value(thread_id caller, std::uint32_t slot,
                                      std::uint32_t generation, std::span<const std::byte> value) {
  send_reply(caller, 0, slot, generation, value, outcome::done);
}

void thread_context::finish_reply(thread_id caller, function_id function,
                                  const reply_channel& reply, std::span<const std::byte> value) {
  if (reply.deferred) return;
  if (reply.result != outcome::done) {
    if (reply.result == outcome::threw) {
      rt_.counters().exceptions_returned.fetch_add(1, std::memory_order_relaxed);
    }
    send_failure(caller, reply.slot, reply.generation, reply.result, reply.details);
    return;
  }
  send_reply(caller, function, reply.slot, reply.generation, value, outcome::done);
}

void thread_context::run_first(std::span<const handed_call> calls) {
  if ((id_ & service_bit) != 0) {
    throw error("a service role's context takes no calls handed back (run_first)");
  }
  const function_registry& registry = function_registry::instance();
  for (const handed_call& c : calls) {
    const function_entry* entry = registry.find(c.function);
    if (entry == nullptr || entry->closure_size != c.closure.size() || entry->result_size != 0 ||
        c.buffer.size() > std::numeric_limits<std::uint32_t>::max()) {
      throw error(fmt::format("thread {}: a call handed back from thread {} names no registered "
                              "plain call with a {}-byte closure (function {:#x})",
                              id_, c.source, c.closure.size(), c.function));
    }
  }
  // Last first, each at the front: they end up in order, ahead of everything received. Out of
  // memory part way, the ones queued are taken back: all or none.
  std::size_t queued = 0;
  try {
    for (std::size_t i = calls.size(); i-- > 0;) {
      const handed_call& c = calls[i];
      call_queue::item item;
      item.header.function = c.function;
      item.header.destination = id_;
      item.header.source = c.source;
      item.header.closure_size = static_cast<std::uint32_t>(c.closure.size());
      item.header.buffer_size = static_cast<std::uint32_t>(c.buffer.size());
      item.entry = registry.find(c.function);
      item.store({c.closure, c.buffer});
      try {
        pending_.push_front(item);
      } catch (...) {
        item.release(rt_.worker().handle());
        throw;
      }
      ++queued;
    }
  } catch (...) {
    for (; queued > 0; --queued) {
      pending_.front().release(rt_.worker().handle());
      pending_.pop_front();
    }
    throw;
  }
  rt_.counters().sent.fetch_add(calls.size(), std::memory_order_relaxed);
}

std::size_t thread_context::run_calls(thread_context& self, std::deque<call_queue::item>& pending) {
  runtime& rt = self.rt_;
  std::size_t ran = 0;
  // One item at a time, taken out before it runs: a call that waits (and so polls) continues
  // with the calls behind it, never re-runs one, and per-sender FIFO holds.
  while (!pending.empty()) {
    call_queue::item item = pending.front();
    pending.pop_front();
    const call_header& h = item.header;
    std::byte* payload = item.payload();
    if (item.refused) {  // an attach slot nobody attached (see the receive path)
      rt.counters().rejected_bad_destination.fetch_add(1, std::memory_order_relaxed);
      self.send_failure(h.source, h.reply_slot, h.reply_generation, outcome::not_executed);
      continue;
    }
    const function_entry* entry =
        item.entry != nullptr ? item.entry : function_registry::instance().find(h.function);
    if (entry == nullptr) {
      // Queued by the receive path so that the caller's slot fails instead of waiting for ever.
      rt.counters().rejected_unknown_function.fetch_add(1, std::memory_order_relaxed);
      item.release(rt.worker().handle());
      report_unknown_function(self, h.source, h.function);
      if (h.reply_slot != 0) {
        self.send_failure(h.source, h.reply_slot, h.reply_generation, outcome::not_executed);
      }
      continue;
    }
    if (h.reply_slot != 0) {
      run_returning(self, item, *entry);
    } else {
      // A plain call: no result (the receive path refused a result without a reply slot).
      invocation call{&self, h.source, {payload + h.closure_size, h.buffer_size}, {}};
      try {
        thread_context::deferring_scope running(self);
        entry->invoke(payload, call);
      } catch (...) {
        // The call was dealt with (counted, so runtime::run can still end if the thread goes
        // on); the exception goes on to the poll.
        rt.counters().executed.fetch_add(1, std::memory_order_relaxed);
        item.release(rt.worker().handle());
        throw;
      }
      rt.counters().executed.fetch_add(1, std::memory_order_relaxed);
    }
    ++ran;
    item.release(rt.worker().handle());
    // A call that waited may have kept exceptions of calls its nested polls ran: at the
    // application's own poll they leave before a later call runs (in the order thrown).
    if (self.nesting_ == 0 && !self.deferred_.empty()) [[unlikely]] self.throw_kept();
  }
  return ran;
}

void thread_context::run_returning(thread_context& self, call_queue::item& item,
                                   const function_entry& entry) {
  runtime& rt = self.rt_;
  const call_header& h = item.header;
  std::byte* payload = item.payload();
  alignas(16) std::byte result[256];
  std::vector<std::byte> big_result;
  std::span<std::byte> result_span;
  if (entry.result_size != variable_result_size) {
    if (entry.result_size <= sizeof result) {
      result_span = {result, entry.result_size};
    } else {
      big_result.resize(entry.result_size);
      result_span = big_result;
    }
  }
  reply_channel reply{h.reply_slot, h.reply_generation};
  std::optional<detail::scratch_lease> reply_bytes;  // a serialized value's, until it went
  if (entry.result_size == variable_result_size) reply.storage = &reply_bytes.emplace().bytes();
  invocation call{&self, h.source, {payload + h.closure_size, h.buffer_size}, result_span, &reply};
  try {
    thread_context::deferring_scope running(self);
    entry.invoke(payload, call);
  } catch (...) {
    // Counted, as a plain call that throws; its caller learns through a failed slot.
    rt.counters().executed.fetch_add(1, std::memory_order_relaxed);
    self.send_failure(h.source, h.reply_slot, h.reply_generation);
    item.release(rt.worker().handle());
    throw;
  }
  rt.counters().executed.fetch_add(1, std::memory_order_relaxed);
  // The wrapper may have pointed the result at bytes of its own (a serialized value).
  self.finish_reply(h.source, h.function, reply, call.result);
}

void thread_context::throw_kept() {
  std::exception_ptr thrown = deferred_.front();
  deferred_.pop_front();
  std::rethrow_exception(thrown);
}

std::size_t thread_context::poll() {
  if (nesting_ == 0) {
    if (!deferred_.empty()) throw_kept();
    try {
      return poll_once();
    } catch (...) {
      // Exceptions kept by nested polls of an earlier call were thrown before this one.
      if (deferred_.empty()) throw;
      deferred_.push_back(std::current_exception());
      throw_kept();
    }
  }
  try {
    return poll_once();
  } catch (...) {
    // Inside a running call or a runtime wait: the outer poll throws it (see deferring_scope).
    deferred_.push_back(std::current_exception());
    return 1;
  }
}

std::size_t thread_context::poll_once() {
  std::size_t ran = 0;
  worker_->progress();
  if (rt_.failure_epoch() != failures_seen_) notice_peer_failures();
  if (!rt_.has_service_thread() && (id_ & service_bit) == 0) ran += rt_.serve(*this);
  if (state_.incoming.take_all(batch_) > 0) {
    pending_.insert(pending_.end(), batch_.begin(), batch_.end());
    batch_.clear();
  }
  if (!pending_.empty()) ran += run_calls(*this, pending_);
  for (std::uint8_t i = 0; i < layer_count_; ++i) {
    thread_extension* layer = in_order_[i];
    if (layer->wants_poll()) ran += layer->poll(*this);
  }
  return ran;
}

void thread_context::notice_peer_failures() {
  failures_seen_ = rt_.failure_epoch();
  // The layers above first: what their queues hold provably never ran (not_executed); whatever
  // else still waits for a dead process may have run there.
  for (std::uint8_t i = 0; i < layer_count_; ++i) in_order_[i]->peers_failed(*this);
  for (int rank = 0; rank < rt_.size(); ++rank) {
    if (rt_.peer_failed(rank)) (void)state_.fail_pending_to(rank, outcome::may_have_executed);
  }
}

transfer::remote_memory_locator thread_context::allocate_remote(thread_id owner, std::size_t bytes) {
  const int owner_process = rt_.process_of_thread(owner);
  if (owner_process < 0 || (owner & service_bit) != 0) {
    throw error(fmt::format("allocate_remote: thread {} does not exist", owner));
  }
  // An attached thread runs anywhere in its process: its memory goes in the process's zone.
  int zone = rt_.is_attached_id(owner) ? rt_.placement().zone_of_process(owner_process)
                                       : rt_.placement().locate(owner).zone;
  std::uint64_t size = bytes;
  return_slot<transfer::remote_memory_locator> slot;
  call_status status = service_call_return(
      owner_process,
      [zone, size](thread_context& server) {
        transfer::remote_memory_locator out{};
        transfer::registered_buffer buffer =
            server.rt().service_allocate(zone, static_cast<std::size_t>(size));
        if (buffer) out = transfer::remote_memory_locator::make(server.rt().rank(), buffer);
        return out;
      },
      slot);
  if (status != call_status::ok) {
    throw error(fmt::format("allocate_remote({} bytes near thread {}): {}", bytes, owner,
                            to_string(status)));
  }
  outcome got;
  {
    deferring_scope waiting(*this);  // the allocation is not abandoned half-way
    got = wait_for(slot);
  }
  if (got != outcome::done) {
    throw error(fmt::format("allocate_remote({} bytes near thread {}): {}", bytes, owner,
                            slot.describe()));
  }
  if (!slot.value().valid()) {
    throw error(fmt::format("allocate_remote: process {} could not allocate {} bytes in zone {}",
                            owner_process, bytes, zone));
  }
  return slot.value();
}

void thread_context::free_remote(const transfer::remote_memory_locator& locator) {
  std::uint64_t address = locator.address;
  std::uint64_t size = locator.size;
  return_slot<int> slot;
  call_status status = service_call_return(
      locator.process,
      [address, size](thread_context& server) {
        return server.rt().service_free(address, size) ? 1 : 0;
      },
      slot);
  if (status != call_status::ok) {
    throw error(fmt::format("free_remote({}): {}", locator.to_string(), to_string(status)));
  }
  outcome got;
  {
    deferring_scope waiting(*this);
    got = wait_for(slot);
  }
  if (got != outcome::done) {
    throw error(fmt::format("free_remote({}): {}", locator.to_string(), slot.describe()));
  }
  if (slot.value() != 1) {
    throw error(fmt::format("free_remote({}): the owner does not know this allocation",
                            locator.to_string()));
  }
}

}  // namespace seriema::fabric

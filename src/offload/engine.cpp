// The offload engine: options, lanes and their start and stop, submission (checks, a record,
// the requester's lane, the queue or direct posting), futures' failures and waits.
#include <fmt/format.h>

#include <array>
#include <functional>
#include <thread>

#include <seriema/base/enum_names.hpp>
#include <seriema/base/log.hpp>
#include <seriema/fabric/runtime.hpp>

#include "lane.hpp"

namespace seriema::offload {

namespace {

constexpr enum_name_entry<method> method_names[] = {
    {method::direct, "direct"}, {method::spin, "spin"},
    {method::sleep, "sleep"},   {method::delegate, "delegate"}};

constexpr enum_name_entry<request_status> status_names[] = {
    {request_status::ok, "ok"},
    {request_status::full, "queue full"},
    {request_status::out_of_range, "out of range"},
    {request_status::bad_destination, "bad destination"},
    {request_status::too_large, "too large"},
    {request_status::stopped, "engine stopping"}};

void check_options(const engine_options& o) {
  if (o.executors == 0 || o.executors > 64) {
    throw config_error(fmt::format("offload: executors = {}; give 1 to 64", o.executors));
  }
  if (o.queue_entries < 2 || (o.queue_entries & (o.queue_entries - 1)) != 0) {
    throw config_error(
        fmt::format("offload: queue_entries = {}; give a power of two >= 2", o.queue_entries));
  }
  if (o.max_requests == 0 || o.max_requests > (std::size_t{1} << 30)) {
    throw config_error(fmt::format("offload: max_requests = {}; give 1 to 2^30", o.max_requests));
  }
  if (o.flush_size == 0) throw config_error("offload: flush_size must be at least 1");
}

// The lane a requester thread uses for an engine: chosen round robin on its first request,
// then kept (its calls stay in order). Engines are told apart by a number never reused; a
// thread remembers its lane in the last `remembered` engines it used.
struct lane_choice {
  std::uint64_t engine = 0;  // 0: none
  std::uint16_t lane = 0;
};
constexpr std::size_t remembered = 4;
thread_local std::array<lane_choice, remembered> chosen{};
thread_local std::size_t next_forgotten = 0;
std::atomic<std::uint64_t> engines_made{0};

thread_local void (*wait_hook)() = nullptr;

inline void cpu_pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

const char* to_string(method m) noexcept { return name_in(method_names, m); }
const char* to_string(request_status s) noexcept { return name_in(status_names, s); }

method parse_method(std::string_view text) {
  for (const auto& entry : method_names) {
    if (text == entry.name) return entry.value;
  }
  throw config_error(fmt::format(
      "offload: unknown method '{}'; give direct, spin, sleep or delegate", text));
}

wait_hook_scope::wait_hook_scope(void (*yield)()) noexcept : saved_(wait_hook) {
  wait_hook = yield;
}
wait_hook_scope::~wait_hook_scope() { wait_hook = saved_; }

engine::state::state(engine& e, const engine_options& o)
    : owner(e), options(o), id(engines_made.fetch_add(1, std::memory_order_relaxed) + 1),
      regions(std::make_unique<transfer::remote_memory_locator[]>(max_regions)) {}

void engine::state::report_executor_error(const char* where, std::exception_ptr error) noexcept {
  if (counters.executor_errors.fetch_add(1, std::memory_order_relaxed) != 0) return;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    log::warning("offload: an executor caught an exception {} (later ones are only counted): {}",
                 where, e.what());
  } catch (...) {
    log::warning("offload: an executor caught an unknown exception {}", where);
  }
}

engine::engine(fabric::runtime& rt, engine_options options)
    : rt_(rt), options_(options) {
  check_options(options_);
  state_ = std::make_unique<state>(*this, options_);
  core_ = new detail::engine_core(options_.max_requests);
  core_->get_timeout = options_.get_timeout;
  for (unsigned i = 0; i < options_.executors; ++i) {
    state_->lanes.push_back(std::make_unique<detail::lane>(*state_, static_cast<std::uint16_t>(i)));
  }
  try {
    for (auto& l : state_->lanes) {
      if (options_.mode == method::delegate) {
        l->attach_here();
      } else {
        l->start_executor();
      }
    }
    const auto deadline = fabric::deadline_clock::now() + std::chrono::seconds(15);
    for (auto& l : state_->lanes) l->wait_started(deadline);
  } catch (...) {
    state_->stopping.store(true, std::memory_order_seq_cst);
    state_->lanes.clear();
    delete core_;  // no future was made
    throw;
  }
  core_->live.store(this, std::memory_order_release);
}

engine::~engine() {
  core_->live.store(nullptr, std::memory_order_seq_cst);
  // Futures taking their turn at a lane, and submissions already inside, finish first; only
  // then do the executors stop (a submission never meets a lane that shut down).
  while (core_->users.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
  state_->stopping.store(true, std::memory_order_seq_cst);
  for (auto& l : state_->lanes) l->wake_to_stop();  // they shut down at once
  for (auto& l : state_->lanes) l->stop();
  state_->lanes.clear();
  const std::size_t held = core_->pool.in_use();
  if (core_->pool.release_owner()) {
    delete core_;
  } else {
    try {
      log::info("offload: engine destroyed with {} request(s) still held by futures; they stay "
                "readable",
                held);
    } catch (...) {  // a destructor: the line is not worth a terminate
    }
  }
}

region engine::add_region(const transfer::remote_memory_locator& locator) {
  if (!locator.valid()) throw error("offload: add_region: the locator is invalid");
  if (locator.process >= rt_.size()) {
    throw error(fmt::format("offload: add_region: the locator names rank {}, the job has {}",
                            locator.process, rt_.size()));
  }
  std::lock_guard guard(state_->regions_mutex);
  const std::uint32_t index = state_->region_count.load(std::memory_order_relaxed);
  if (index >= state::max_regions) {
    throw error(fmt::format("offload: add_region: the table's {} regions are in use",
                            state::max_regions));
  }
  state_->regions[index] = locator;
  state_->region_count.store(index + 1, std::memory_order_release);
  return region{index, locator.process, locator.size};
}

std::uint16_t engine::lane_of_this_thread() noexcept {
  for (const lane_choice& c : chosen) {
    if (c.engine == state_->id) return c.lane;
  }
  // Not remembered (first request, or forgotten for other engines): the same lane again, from
  // the thread's identity, so that its calls stay in order whatever it forgot.
  lane_choice& c = chosen[next_forgotten++ % remembered];
  c.engine = state_->id;
  const std::uint64_t mixed =
      static_cast<std::uint64_t>(std::hash<std::thread::id>{}(std::this_thread::get_id())) *
      0x9E3779B97F4A7C15ull;
  c.lane = static_cast<std::uint16_t>((mixed >> 32) % state_->lanes.size());
  return c.lane;
}

future<void> engine::refuse(request_status why) noexcept {
  if (why == request_status::full) {
    state_->counters.refused_full.fetch_add(1, std::memory_order_relaxed);
  }
  return future<void>(core_, nullptr, why);
}

void engine::hold_run() noexcept {
  rt_.counters().deferred_started.fetch_add(1, std::memory_order_acq_rel);
}

void engine::release_run() noexcept {
  rt_.counters().deferred_finished.fetch_add(1, std::memory_order_acq_rel);
}

bool engine::is_worker(fabric::thread_id dest) const noexcept {
  return dest < rt_.placement().thread_count();
}

int engine::dest_process(fabric::thread_id dest) const noexcept {
  const fabric::thread_id workers = rt_.placement().thread_count();
  if (dest < workers || rt_.is_attached_id(dest)) return rt_.process_of_thread(dest);
  return -1;
}

future<void> engine::submit(detail::command& c, int process) {
  if (process < 0) return refuse(request_status::bad_destination);
  const detail::engine_use using_it(*core_);
  if (using_it.live() == nullptr) return refuse(request_status::stopped);
  detail::lane& l = *state_->lanes[lane_of_this_thread()];
  const bool waits = options_.wait_when_full.count() > 0;
  const auto give_up = fabric::deadline_clock::now() + options_.wait_when_full;
  unsigned idle = 0;
  detail::request_record* r = core_->pool.take();
  while (r == nullptr) {
    if (!waits || fabric::deadline_clock::now() >= give_up) return refuse(request_status::full);
    if (options_.mode == method::delegate) l.drive();
    detail::wait_step(idle);
    r = core_->pool.take();
  }
  r->lane = l.index;
  r->destination = c.target;
  r->process = process;
  c.record = r;
  state_->counters.requests.fetch_add(1, std::memory_order_relaxed);
  if (options_.mode == method::direct) {
    l.lock();
    l.post_now(c);
    l.unlock();
    if (l.queue.asleep() && l.queue.wake()) {
      state_->counters.wakes.fetch_add(1, std::memory_order_relaxed);
    }
    return future<void>(core_, r, request_status::ok);
  }
  for (;;) {
    const auto pushed = l.queue.push(c);
    if (pushed.claimed) {
      if (pushed.was_asleep) {
        l.queue.notify();
        state_->counters.wakes.fetch_add(1, std::memory_order_relaxed);
      }
      break;
    }
    if (!waits || fabric::deadline_clock::now() >= give_up) {
      (void)core_->pool.release(*r);  // both holds: nothing was queued
      (void)core_->pool.release(*r);
      return refuse(request_status::full);
    }
    if (options_.mode == method::delegate) l.drive();
    detail::wait_step(idle);
  }
  if (options_.mode == method::delegate) l.drive();
  return future<void>(core_, r, request_status::ok);
}

future<void> engine::submit_transfer(std::uint32_t kind, region target, std::uint64_t offset,
                                     std::byte* local, std::size_t size, std::uint64_t operand,
                                     std::uint64_t compare) {
  if (target.index >= state_->region_count.load(std::memory_order_acquire) ||
      state_->regions[target.index].process != target.process) {
    return refuse(request_status::bad_destination);
  }
  const std::uint64_t limit = state_->regions[target.index].size;
  const bool word = kind != static_cast<std::uint32_t>(detail::transfer_kind::put) &&
                    kind != static_cast<std::uint32_t>(detail::transfer_kind::get);
  if (offset > limit || size > limit - offset || (word && offset % 8 != 0)) {
    return refuse(request_status::out_of_range);
  }
  detail::command c;
  c.execute = [](detail::lane& l, detail::command& command) {
    l.execute_transfer(command);
    return true;
  };
  c.target = target.index;
  c.kind = kind;
  c.offset = offset;
  c.local = local;
  c.size = size;
  c.operand = operand;
  c.compare = compare;
  return submit(c, target.process);
}

future<void> engine::put(std::span<const std::byte> bytes, region target, std::uint64_t offset) {
  return submit_transfer(static_cast<std::uint32_t>(detail::transfer_kind::put), target, offset,
                         const_cast<std::byte*>(bytes.data()), bytes.size(), 0, 0);
}

future<void> engine::get(std::span<std::byte> into, region source, std::uint64_t offset) {
  return submit_transfer(static_cast<std::uint32_t>(detail::transfer_kind::get), source, offset,
                         into.data(), into.size(), 0, 0);
}

future<std::uint64_t> engine::word_future(future<void>&& made) noexcept {
  return future<std::uint64_t>(made.core_, std::exchange(made.record_, nullptr), made.status_);
}

future<std::uint64_t> engine::fetch_add(region target, std::uint64_t offset, std::uint64_t value) {
  return word_future(submit_transfer(static_cast<std::uint32_t>(detail::transfer_kind::fetch_add),
                                     target, offset, nullptr, 8, value, 0));
}

future<std::uint64_t> engine::compare_swap(region target, std::uint64_t offset,
                                           std::uint64_t expected, std::uint64_t desired) {
  return word_future(
      submit_transfer(static_cast<std::uint32_t>(detail::transfer_kind::compare_swap), target,
                      offset, nullptr, 8, desired, expected));
}

future<std::uint64_t> engine::swap(region target, std::uint64_t offset, std::uint64_t value) {
  return word_future(submit_transfer(static_cast<std::uint32_t>(detail::transfer_kind::swap),
                                     target, offset, nullptr, 8, value, 0));
}

bool engine::quiet(fabric::deadline_clock::time_point deadline) {
  unsigned idle = 0;
  for (;;) {
    bool idle_everywhere = true;
    for (auto& l : state_->lanes) {
      if (options_.mode == method::delegate) l->drive();
      // Claims first, then in_flight: a request counts in in_flight before it leaves the queue
      // (run_once), so one taken between the two looks is seen in the second.
      if (l->queue.has_claims() || l->in_flight.load(std::memory_order_seq_cst) != 0) {
        idle_everywhere = false;
      }
    }
    if (idle_everywhere) return true;
    if (fabric::deadline_clock::now() >= deadline) return false;
    detail::wait_step(idle);
  }
}

void engine::progress() {
  if (options_.mode != method::delegate) return;
  for (auto& l : state_->lanes) l->drive();
}

void engine::drive(std::uint16_t lane) noexcept {
  state_->lanes[lane]->drive();  // nothing unless the engine delegates
}

engine_counters engine::counters() const noexcept {
  const auto& c = state_->counters;
  const auto read = [](const std::atomic<std::uint64_t>& v) {
    return v.load(std::memory_order_relaxed);
  };
  return {read(c.requests),          read(c.refused_full), read(c.batches), read(c.posted),
          read(c.completions_asked), read(c.sleeps),       read(c.wakes),   read(c.delegated),
          read(c.executor_errors),   read(c.endpoints),    read(c.coalesced),
          read(c.gathered),          read(c.bundles),      read(c.bundled),
          read(c.one_sided)};
}

std::size_t engine::pending() const noexcept { return core_->pool.in_use(); }

std::vector<fabric::thread_id> engine::lane_ids() const {
  std::vector<fabric::thread_id> ids;
  for (const auto& l : state_->lanes) ids.push_back(l->id());
  return ids;
}

std::vector<double> engine::executor_cpu_seconds() const {
  std::vector<double> used;
  for (const auto& l : state_->lanes) used.push_back(l->executor_cpu_seconds());
  return used;
}

namespace detail {

fabric::thread_context& context_of(lane& l) noexcept { return l.context(); }
std::chrono::microseconds transport_wait(const lane& l) noexcept {
  return l.options().transport_wait;
}
void watch(lane& l, request_record& r) noexcept { l.watch(r); }
void finish(lane& l, request_record& r, fabric::outcome how, std::exception_ptr failure) noexcept {
  l.finish(r, how, std::move(failure));
}

// ok and queued_at_deadline: the transport has the call (UCX sends a queued one, in order, once
// the link carries it); anything else but a deadline was a refusal.
bool end_send(lane& l, command& c, fabric::call_status status) noexcept {
  if (status == fabric::call_status::deadline_exceeded) return false;
  const bool sent = fabric::reached_transport(status);
  std::exception_ptr why;
  if (!sent) {
    try {
      why = std::make_exception_ptr(error(fmt::format(
          "offload: the call to thread {} was not sent: {}", c.target, fabric::to_string(status))));
    } catch (...) {
      why = std::current_exception();
    }
  }
  l.finish(*c.record, sent ? fabric::outcome::done : fabric::outcome::not_executed, why);
  return true;
}

bool open_channels(lane& l, command& c) noexcept { return l.open_channels(c); }

bool open_synchronizer(lane& l, command& c) noexcept {
  try {
    new (c.record->value) invoke::synchronizer(l.context(), 1);
    return true;
  } catch (...) {  // every word of the context's feedback area counts a call in flight
    return false;
  }
}

namespace {
bool ended_cancelled(request_record& r) noexcept {
  if (r.claim()) r.publish(fabric::outcome::cancelled);
  return true;
}
}  // namespace

bool check_consumed(request_record& r) noexcept {
  invoke::synchronizer& sync = synchronizer_of(r);
  const fabric::outcome now = sync.status();
  if (now == fabric::outcome::pending) return false;
  sync.~synchronizer();
  if (r.claim()) r.publish(now);
  return true;
}

void settle_consumed(request_record& r) noexcept {
  invoke::synchronizer& sync = synchronizer_of(r);
  const bool target_died = sync.status() == fabric::outcome::may_have_executed;
  sync.~synchronizer();
  if (target_died) {
    r.check = [](request_record& ended) noexcept {
      if (ended.claim()) ended.publish(fabric::outcome::may_have_executed);
      return true;
    };
  } else {
    r.check = [](request_record& done) noexcept {
      if (done.claim()) done.publish(fabric::outcome::done);
      return true;
    };
  }
  r.cancel = [](request_record&) noexcept {};
}

void cancel_consumed(request_record& r) noexcept {
  synchronizer_of(r).~synchronizer();
  r.check = &ended_cancelled;
  r.cancel = [](request_record&) noexcept {};
}
void count_one_sided(lane& l) noexcept { l.count_one_sided(); }
bool end_one_sided(lane& l, command& c, fabric::call_status status) noexcept {
  if (fabric::reached_transport(status)) l.count_one_sided();
  return end_send(l, c, status);
}

void drive_lane(engine_core& core, std::uint16_t lane) noexcept {
  const engine_use using_it(core);
  if (engine* e = using_it.live()) e->drive(lane);
}

void wait_step(unsigned& idle) noexcept {
  // Short: requesters usually outnumber cores, and a spinning requester takes the core an
  // executor (or the requester it waits behind) needs. A fiber yields to its scheduler instead.
  ++idle;
  if (idle < 16) {
    cpu_pause();
    return;
  }
  if (wait_hook != nullptr) {
    wait_hook();
    // Every fiber of the thread may be waiting: then the yield comes straight back, and the
    // thread sleeps a little now and then rather than spin.
    if (idle > 4096 && (idle & 63) == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
    return;
  }
  if (idle < 32) {
    std::this_thread::yield();
    return;
  }
  std::this_thread::sleep_for(std::chrono::microseconds(idle < 1024 ? 10 : 50));
}

std::string describe_request(fabric::outcome how, request_status status,
                             const request_record* r) {
  if (status != request_status::ok) {
    return fmt::format("offload request refused: {}", to_string(status));
  }
  if (r == nullptr) return "an empty offload future (no request, or its value was taken)";
  return fmt::format("offload request to {} (rank {}): {}", r->destination, r->process,
                     fabric::to_string(how));
}

std::exception_ptr failure_for(fabric::outcome how, request_status status,
                               const request_record* r) {
  const std::string text = describe_request(how, status, r);
  const fabric::thread_id dest = r != nullptr ? r->destination : 0;
  const int process = r != nullptr ? r->process : -1;
  const auto sent = fabric::call_status::ok;
  switch (how) {
    case fabric::outcome::may_have_executed:
      return std::make_exception_ptr(
          invoke::may_have_executed_error(text, how, sent, dest, process));
    case fabric::outcome::deadline_exceeded:
      return std::make_exception_ptr(
          invoke::deadline_exceeded_error(text, how, sent, dest, process));
    case fabric::outcome::cancelled:
      return std::make_exception_ptr(invoke::cancelled_error(text, how, sent, dest, process));
    default:
      return std::make_exception_ptr(invoke::not_executed_error(text, how, sent, dest, process));
  }
}

}  // namespace detail
}  // namespace seriema::offload

// The per-process runtime: startup order (settings -> bootstrap -> placement -> UCX -> address
// exchange), lazy endpoints and arenas, and the progressing AM barrier.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <seriema/base/error.hpp>
#include <seriema/base/log.hpp>
#include <seriema/base/settings.hpp>
#include <seriema/fabric/detail/settings.hpp>
#include <seriema/fabric/runtime.hpp>
#include <thread>

#include "counters_report.hpp"

namespace seriema::fabric {

// The collectives' active message (am_id_runtime_barrier).
struct barrier_message {
  std::uint64_t epoch;
  std::uint32_t kind;  // 0: arrival at rank 0; 1: release from rank 0; 2: rank `value` failed
  std::int32_t from;
  std::uint64_t value;  // arrival: this rank's addend; release: the sum
};

runtime_options runtime_options::from_environment() {
  config::reject_unknown_environment_settings();
  runtime_options options;
  options.threads_per_process =
      static_cast<int>(config::get_unsigned("SERIEMA_THREADS", 1, 4096));
  options.service_threads =
      static_cast<int>(config::get_unsigned("SERIEMA_SERVICE_THREADS", 0, 1));
  options.helper_threads =
      static_cast<int>(config::get_unsigned("SERIEMA_HELPER_THREADS", 0, 64));
  options.reply_cells =
      static_cast<std::uint32_t>(config::get_unsigned("SERIEMA_REPLY_CELLS", 0, 65536));
  options.send_limit = config::get_bytes("SERIEMA_SEND_LIMIT");
  if (options.send_limit < 64 || options.send_limit > (std::size_t{1} << 30)) {
    throw config_error(fmt::format("SERIEMA_SEND_LIMIT={}: expected 64 bytes .. 1G",
                                   options.send_limit));
  }
  options.timeout = config::get_duration("SERIEMA_TIMEOUT");
  options.counters_path = config::raw("SERIEMA_COUNTERS").value_or("");
  options.placement = placement_options::from_environment();
  options.ucx = transfer::context_options::from_environment();
  options.memory = transfer::arena_options::from_environment();
  return options;
}

runtime::runtime(const runtime_options& options) : options_(options) {
  boot_ = bootstrap::create(options_.boot);
  log::set_rank(rank());
  counters_file_ = detail::counters_file_for(options_.counters_path, rank(), size());
  dead_ = std::make_unique<std::atomic<bool>[]>(static_cast<std::size_t>(boot_->size()));
  dead_status_ = std::make_unique<std::atomic<int>[]>(static_cast<std::size_t>(boot_->size()));
  dead_reporter_ = std::make_unique<std::atomic<int>[]>(static_cast<std::size_t>(boot_->size()));
  failures_announced_.assign(static_cast<std::size_t>(boot_->size()), false);
  barrier_arrived_ = std::make_unique<std::atomic<std::uint64_t>[]>(static_cast<std::size_t>(boot_->size()));
  if (!options_.ucx.peer_errors && boot_->size() > 1) {
    log::warning("SERIEMA_PEER_ERRORS=no: a rank that dies will not be detected, and calls and "
                 "waits addressed to it may hang until their deadline (SERIEMA_TIMEOUT)");
  }
  try {
    // Placement is about hardware. seriema-run runs every rank on this one host, also when it
    // emulates several machines: then the host's cores are shared by all ranks, not handed out
    // again per emulated machine (which would pin ranks of different "machines" to one core).
    const bool emulated_machines =
        boot_->mode() == bootstrap_mode::launcher && boot_->machine_count() > 1;
    std::vector<int> processes_on_machine;
    if (emulated_machines) {
      processes_on_machine.assign(1, boot_->size());
    } else {
      processes_on_machine.assign(static_cast<std::size_t>(boot_->machine_count()), 0);
      for (int r = 0; r < boot_->size(); ++r) ++processes_on_machine[boot_->machine_of(r)];
    }
    placement_ = std::make_unique<fabric::placement>(machine_topology::detect(), processes_on_machine,
                                                     options_.threads_per_process,
                                                     options_.placement);
    placement_->bind_process(boot_->rank());

    context_ = std::make_unique<transfer::ucx_context>(options_.ucx);
    worker_ = std::make_unique<transfer::ucx_worker>(*context_, transfer::worker_sharing::multi_thread);

    for (int t = 0; t < options_.threads_per_process; ++t) {
      local_states_.push_back(std::make_unique<local_thread_state>());
    }
    struct handler_entry {
      unsigned id;
      ucp_am_recv_callback_t callback;
      const char* what;
    };
    for (const handler_entry& h : {handler_entry{am_id_runtime_barrier, &runtime::on_barrier_message, "barrier"},
                                   handler_entry{am_id_call, &runtime::on_call_message, "calls"},
                                   handler_entry{am_id_reply, &runtime::on_reply_message, "replies"},
                                   handler_entry{am_id_write, &runtime::on_write_message, "writes"},
                                   handler_entry{am_id_feedback, &runtime::on_feedback_message,
                                                 "feedback"}}) {
      ucp_am_handler_param_t handler{};
      handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                           UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
      handler.id = h.id;
      handler.cb = h.callback;
      handler.arg = this;
      handler.flags = UCP_AM_FLAG_PERSISTENT_DATA;  // calls keep their data until they ran
      transfer::check_ucx(ucp_worker_set_am_recv_handler(worker_->handle(), &handler),
                          fmt::format("ucp_worker_set_am_recv_handler ({})", h.what).c_str());
    }

    attach_reply_cells();
    // One exchange at startup: every rank's reply-region locator, then its worker address.
    transfer::remote_memory_locator my_cells{};  // invalid: peers reply by message
    if (reply_region_) {
      try {
        my_cells = reply_region_->locator(rank());
      } catch (const std::exception& e) {
        // The cells still take replies from this process and by message; peers just cannot
        // write them directly.
        log::info("peers will reply by message: {}", e.what());
      }
    }
    std::vector<std::byte> mine(sizeof my_cells);
    std::memcpy(mine.data(), &my_cells, sizeof my_cells);
    mine.insert(mine.end(), worker_->address().begin(), worker_->address().end());
    for (auto& blob : boot_->allgather(mine)) {
      if (blob.size() <= sizeof my_cells) {
        throw error("startup exchange: a rank sent a truncated address (mixed seriema versions?)");
      }
      transfer::remote_memory_locator cells;
      std::memcpy(&cells, blob.data(), sizeof cells);
      reply_locators_.push_back(cells);
      addresses_.emplace_back(blob.begin() + sizeof cells, blob.end());
    }
    reply_peers_ = std::make_unique<reply_peer[]>(static_cast<std::size_t>(boot_->size()));
    endpoints_.resize(static_cast<std::size_t>(boot_->size()));
    check_registries();
  } catch (const std::exception& e) {
    boot_->abort(e.what());
    throw;
  }
}

runtime::~runtime() {
  try {
    finalize();
  } catch (const std::exception& e) {
    log::error("shutdown: {}", e.what());
  }
  // Calls still queued hold UCX data of the process worker: release them first.
  std::vector<call_queue::item> leftover;
  auto release_all = [&](call_queue& queue) {
    queue.take_all(leftover);
    for (auto& item : leftover) item.release(worker_->handle());
  };
  if (worker_) {
    release_all(service_queue_);
    for (auto& item : service_pending_) item.release(worker_->handle());
    service_pending_.clear();
    for (auto& state : local_states_) release_all(state->incoming);
  }
  // Thread workers and their endpoints first (they belong to the context); then the process
  // worker's endpoints before arenas (rkeys unpacked on them refer to peers), arenas before the
  // worker and context (memory handles belong to the context).
  for (auto& state : local_states_) state->release_transport();
  service_state_->release_transport();
  reply_peers_.reset();  // rkeys unpacked on the endpoints below
  endpoints_.clear();
  barrier_staged_.release_requests();  // messages left at a deadline; memory goes with *this
  {
    // Nothing the service handed out stays a write target once its memory goes.
    std::lock_guard writable_lock(writable_mutex_);
    writable_.clear();
  }
  service_allocators_.clear();
  arenas_.clear();
  reply_region_.reset();
  worker_.reset();
  context_.reset();
}

std::span<const std::byte> runtime::worker_address(int rank) const {
  if (rank < 0 || rank >= size()) throw error(fmt::format("worker_address: no rank {}", rank));
  return addresses_[static_cast<std::size_t>(rank)];
}

transfer::ucx_endpoint& runtime::endpoint(int rank) {
  if (rank < 0 || rank >= size()) {
    throw error(fmt::format("endpoint: rank {} does not exist (job has {} ranks)", rank, size()));
  }
  std::lock_guard lock(endpoints_mutex_);
  auto& slot = endpoints_[static_cast<std::size_t>(rank)];
  if (!slot) slot = connect(*worker_, rank);
  return *slot;
}

std::unique_ptr<transfer::ucx_endpoint> runtime::connect(transfer::ucx_worker& worker, int rank) {
  if (peer_failed(rank)) {
    throw error(fmt::format("cannot connect to rank {}: it failed earlier ({})", rank,
                            describe_failed_peers()));
  }
  try {
    return std::make_unique<transfer::ucx_endpoint>(
        worker, addresses_[static_cast<std::size_t>(rank)], fmt::format("rank {}", rank),
        [this, rank](ucs_status_t status) { note_peer_failure(rank, status); });
  } catch (const std::exception& e) {
    if (peer_failed(rank)) {  // the transport's hint would point at the configuration
      throw error(fmt::format("cannot connect to rank {}: it failed ({})", rank,
                              describe_failed_peers()));
    }
    throw;
  }
}

void runtime::note_peer_failure(int rank, ucs_status_t status, int reported_by) noexcept {
  if (rank < 0 || rank >= size() || rank == this->rank()) return;
  if (dead_[static_cast<std::size_t>(rank)].load(std::memory_order_acquire)) return;
  dead_status_[static_cast<std::size_t>(rank)].store(status, std::memory_order_relaxed);
  dead_reporter_[static_cast<std::size_t>(rank)].store(reported_by, std::memory_order_relaxed);
  if (dead_[static_cast<std::size_t>(rank)].exchange(true, std::memory_order_acq_rel)) return;
  // The service role's slots here (it has no messengers); each thread ends its own slots at
  // its next poll (thread_context::notice_peer_failures), after its messengers had their say.
  (void)service_state_->fail_pending_to(rank, outcome::may_have_executed);
  failure_epoch_.fetch_add(1, std::memory_order_acq_rel);
  const std::string reason = describe_failed_peer(rank);
  log::warning("{} failed: calls to it fail from now on; calls waiting for its reply end as "
               "'may have executed'",
               reason);
}

std::string runtime::describe_failed_peer(int rank) const {
  const auto status =
      static_cast<ucs_status_t>(dead_status_[static_cast<std::size_t>(rank)].load());
  const int reporter = dead_reporter_[static_cast<std::size_t>(rank)].load();
  if (reporter >= 0) return fmt::format("rank {} (reported failed by rank {})", rank, reporter);
  return fmt::format("rank {} ({})", rank, ucs_status_string(status));
}

std::string runtime::describe_failed_peers() const {
  std::string out;
  for (int r = 0; r < size(); ++r) {
    if (peer_failed(r)) out += (out.empty() ? "" : ", ") + describe_failed_peer(r);
  }
  return out.empty() ? "no rank has failed" : out;
}

transfer::arena& runtime::arena_for_zone(int zone) {
  if (zone < 0 || zone > 4096) throw error(fmt::format("arena_for_zone: bad zone {}", zone));
  std::lock_guard lock(arenas_mutex_);
  if (arenas_.size() <= static_cast<std::size_t>(zone)) arenas_.resize(static_cast<std::size_t>(zone) + 1);
  auto& slot = arenas_[static_cast<std::size_t>(zone)];
  if (!slot) slot = std::make_unique<transfer::arena>(*context_, zone, options_.memory);
  return *slot;
}

transfer::arena& runtime::local_arena() {
  return arena_for_zone(placement_->zone_of_process(rank()));
}

transfer::registered_buffer runtime::service_allocate(int zone, std::size_t bytes) {
  transfer::arena& zone_arena = arena_for_zone(zone);
  std::lock_guard lock(service_allocators_mutex_);
  if (service_allocators_.size() <= static_cast<std::size_t>(zone)) {
    service_allocators_.resize(static_cast<std::size_t>(zone) + 1);
  }
  auto& slot = service_allocators_[static_cast<std::size_t>(zone)];
  if (!slot) {
    transfer::general_allocator_config config;
    config.policy = transfer::fit_policy::best_fit;
    // No cap of its own: the zone's arena (SERIEMA_ARENA_LIMIT) bounds it. The allocator's
    // default of 1 GiB was reached by the messengers' rings alone at 16 threads (16 x 16 pairs x
    // 2 chunks of 2 MiB), and the last channel then never got its ring.
    config.max_bytes = std::numeric_limits<std::size_t>::max();
    slot = std::make_unique<transfer::general_allocator>(zone_arena, config);
  }
  transfer::registered_buffer buffer = slot->allocate(bytes);
  if (buffer) {
    try {
      std::lock_guard writable_lock(writable_mutex_);
      writable_[reinterpret_cast<std::uint64_t>(buffer.data)] = buffer.size;
    } catch (...) {
      (void)slot->free(buffer);  // not handed out: the caller sees the exception
      throw;
    }
  }
  return buffer;
}

bool runtime::service_free(std::uint64_t address, std::uint64_t size) {
  {
    // No write message lands in it from here on (the handler checks under this lock).
    std::lock_guard writable_lock(writable_mutex_);
    auto it = writable_.find(address);
    if (it != writable_.end() && it->second == size) writable_.erase(it);
  }
  std::lock_guard lock(service_allocators_mutex_);
  for (auto& allocator : service_allocators_) {
    if (!allocator) continue;
    transfer::registered_buffer buffer{reinterpret_cast<std::byte*>(address),
                                       static_cast<std::size_t>(size), nullptr, nullptr};
    if (allocator->free(buffer) == transfer::free_status::ok) return true;
  }
  return false;
}

bool runtime::service_write(const write_message& m, std::span<const std::byte> data) {
  // Overflow-safe range checks: every operand is at most m.size once the first test passed.
  const bool in_range = m.data_offset <= m.size && data.size() <= m.size - m.data_offset &&
                        m.word_offset <= m.size && sizeof m.word <= m.size - m.word_offset &&
                        (m.base + m.word_offset) % alignof(std::uint64_t) == 0;
  if (!in_range) return false;
  std::lock_guard lock(writable_mutex_);
  auto it = writable_.find(m.base);
  if (it == writable_.end() || it->second != m.size) return false;
  auto* base = reinterpret_cast<std::byte*>(m.base);
  if (!data.empty()) std::memcpy(base + m.data_offset, data.data(), data.size());
  // The payload is in place before the word that publishes it (release; readers acquire).
  std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(base + m.word_offset))
      .store(m.word, std::memory_order_release);
  return true;
}

void runtime::attach_reply_cells() {
  const std::uint32_t per_thread = options_.reply_cells;
  if (per_thread == 0) return;
  const std::size_t threads = local_states_.size() + 1;  // + the service role's state
  reply_region_ = std::make_unique<transfer::shared_region>(
      *context_, threads * per_thread * reply_cell::size,
      "the reply cells (SERIEMA_REPLY_CELLS per thread; 0 does without them)");
  std::byte* base = reply_region_->bytes().data();
  std::uint32_t first = 0;
  auto attach = [&](local_thread_state& state) {
    state.cells.attach(base + std::size_t{first} * reply_cell::size, first, per_thread);
    first += per_thread;
  };
  for (auto& state : local_states_) attach(*state);
  attach(*service_state_);
}

std::span<std::byte> runtime::reply_cells_of(int rank) {
  if (rank == this->rank()) return reply_region_ ? reply_region_->bytes() : std::span<std::byte>{};
  reply_peer& peer = reply_peers_[static_cast<std::size_t>(rank)];
  int state = peer.state.load(std::memory_order_acquire);
  if (state == 0) {
    std::lock_guard lock(reply_peers_mutex_);
    state = peer.state.load(std::memory_order_relaxed);
    if (state == 0) {
      const auto& locator = reply_locators_[static_cast<std::size_t>(rank)];
      state = 2;
      if (locator.valid() && same_machine(rank)) {
        try {
          peer.mapping.emplace(endpoint(rank), locator, true);
          if (peer.mapping->direct() != nullptr) {
            peer.cells = {peer.mapping->direct(), static_cast<std::size_t>(locator.size)};
            state = 1;
          } else {
            peer.mapping.reset();  // no rkey kept for nothing
          }
        } catch (const std::exception& e) {
          // The replies still arrive, as messages; say once why they do not take the direct way.
          log::info("replies to rank {} travel as messages: its reply cells do not map here ({})",
                    rank, e.what());
        }
      }
      peer.state.store(state, std::memory_order_release);
    }
  }
  return state == 1 ? peer.cells : std::span<std::byte>{};
}

transfer::remote_memory runtime::resolve(const transfer::remote_memory_locator& locator) {
  return transfer::remote_memory(endpoint(locator.process), locator, same_machine(locator.process));
}

std::vector<std::vector<std::byte>> runtime::allgather(std::span<const std::byte> mine,
                                                       deadline_clock::time_point deadline) {
  // The bootstrap blocks without progressing UCX. A peer may still be completing one-sided
  // operations on this process (over TCP they need our progress), so first meet in the
  // progressing barrier: every rank gets there only after its own flushes returned.
  barrier(deadline);
  return boot_->allgather(mine);
}

ucs_status_t runtime::on_barrier_message(void* arg, const void* header, std::size_t header_length,
                                         void*, std::size_t, const ucp_am_recv_param_t*) {
  auto* self = static_cast<runtime*>(arg);
  if (header_length != sizeof(barrier_message)) return UCS_OK;  // malformed: ignore
  barrier_message message;
  std::memcpy(&message, header, sizeof message);
  if (message.kind == 2) {
    // A survivor left a collective because `value` died: so must we (it will not release us).
    if (message.value < static_cast<std::uint64_t>(self->size()) && message.from >= 0 &&
        message.from < self->size()) {
      self->note_peer_failure(static_cast<int>(message.value), UCS_ERR_CONNECTION_RESET,
                              message.from);
    }
    return UCS_OK;
  }
  if (message.kind == 0) {
    // Sum before count: the waiter reads the count (acquire), then the sum.
    if (message.from <= 0 || message.from >= self->size()) return UCS_OK;  // malformed
    self->barrier_sums_[message.epoch % 2].fetch_add(message.value, std::memory_order_relaxed);
    self->barrier_arrived_[static_cast<std::size_t>(message.from)].store(
        message.epoch + 1, std::memory_order_release);
    self->barrier_arrivals_[message.epoch % 2].fetch_add(1, std::memory_order_release);
  } else {
    self->barrier_result_.store(message.value, std::memory_order_relaxed);
    std::uint64_t released = self->barrier_released_.load(std::memory_order_relaxed);
    while (released < message.epoch + 1 &&
           !self->barrier_released_.compare_exchange_weak(released, message.epoch + 1,
                                                          std::memory_order_release)) {
    }
  }
  return UCS_OK;
}

void runtime::send_barrier_message(int to, const barrier_message& message,
                                   deadline_clock::time_point deadline, const char* what) {
  transfer::ucx_endpoint& peer = endpoint(to);
  auto wait = [&](void* request) {
    int idle = 0;
    while (ucp_request_check_status(request) == UCS_INPROGRESS) {
      if (worker_->progress()) continue;
      if (peer_failed(to)) return detail::staged_sends::wait_end::peer_dead;
      if (deadline != no_deadline && deadline_clock::now() >= deadline) {
        return detail::staged_sends::wait_end::deadline;
      }
      if (++idle > 128) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));  // idle back-off
        idle = 0;
      }
    }
    return detail::staged_sends::wait_end::completed;
  };
  using result = detail::staged_sends::result;
  const result sent = barrier_staged_.send(
      peer.handle(), to, am_id_runtime_barrier,
      {reinterpret_cast<const std::byte*>(&message), sizeof message}, {}, {}, wait);
  if (sent == result::sent) return;
  if (sent == result::deadline_unsent || sent == result::queued_at_deadline) {
    break_collectives(fmt::format("{} on rank {}: deadline passed before rank {} could be told "
                                  "(stalled or partitioned)",
                                  what, rank(), to));
  }
  throw error(fmt::format("{} on rank {}: cannot reach rank {}: {}", what, rank(), to,
                          sent == result::peer_failed ? "it failed" : "UCX refused the send"));
}

void runtime::barrier(deadline_clock::time_point deadline) {
  (void)collective_sum(0, deadline, "barrier");
}

std::uint64_t runtime::allreduce_sum(std::uint64_t value, deadline_clock::time_point deadline) {
  return collective_sum(value, deadline, "allreduce");
}

deadline_clock::time_point runtime::default_deadline() const noexcept {
  if (options_.timeout.count() <= 0) return no_deadline;
  return deadline_clock::now() + options_.timeout;
}

void runtime::break_collectives(const std::string& text) {
  collectives_broken_ = text;
  throw deadline_error(text);
}

std::string runtime::ranks_missing_from(std::uint64_t epoch) const {
  std::string missing;
  for (int r = 1; r < size(); ++r) {
    if (barrier_arrived_[static_cast<std::size_t>(r)].load(std::memory_order_acquire) > epoch) {
      continue;
    }
    missing += fmt::format("{}{}", missing.empty() ? "" : ", ", r);
  }
  return missing.empty() ? "none (the last arrival came as the deadline passed)" : missing;
}

void runtime::throw_if_peers_failed() {
  // Every survivor leaves the collective, not only the ones whose own peer died: rank 0 would
  // never release the others. So the survivors learn it too, whether or not they talked to
  // the dead rank: each dead rank is announced to every live one (once; best effort).
  if (failure_epoch() == 0) return;
  for (int dead = 0; dead < size(); ++dead) {
    if (!peer_failed(dead) || failures_announced_[static_cast<std::size_t>(dead)]) continue;
    failures_announced_[static_cast<std::size_t>(dead)] = true;
    for (int r = 0; r < size(); ++r) {
      if (r == rank() || peer_failed(r)) continue;
      try {
        send_barrier_message(r, {0, 2, rank(), static_cast<std::uint64_t>(dead)},
                             deadline_clock::now() + std::chrono::seconds(1), "failure notice");
      } catch (const std::exception&) {
        // That one is failing too: its own detection, or another survivor, covers it.
      }
    }
  }
  throw error(fmt::format("collective on rank {}: {} failed; the job cannot complete it",
                          rank(), describe_failed_peers()));
}

namespace {

// Progresses `worker` until done() holds, with idle back-off; calls check_peer() each turn (it
// throws when a peer failed). False once the deadline passed (read only when idle).
template <class Done, class CheckPeer>
bool progress_until(transfer::ucx_worker& worker, Done done, CheckPeer check_peer,
                    deadline_clock::time_point deadline) {
  int idle = 0;
  while (!done()) {
    check_peer();
    if (worker.progress()) continue;
    if (deadline != no_deadline && deadline_clock::now() >= deadline) return done();
    if (++idle > 128) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));  // idle back-off
      idle = 0;
    }
  }
  return true;
}

}  // namespace

std::uint64_t runtime::collective_sum(std::uint64_t value, deadline_clock::time_point deadline,
                                      const char* what) {
  if (!collectives_broken_.empty()) {
    throw deadline_error(fmt::format(
        "{} on rank {}: refused, an earlier collective of this job passed its deadline, so the "
        "ranks no longer agree on collectives: {}",
        what, rank(), collectives_broken_));
  }
  if (size() == 1) return value;
  const std::uint64_t epoch = barrier_epoch_++;
  const auto started = deadline_clock::now();
  auto waited = [&] {
    return std::chrono::duration<double>(deadline_clock::now() - started).count();
  };
  auto check_peers = [&] { throw_if_peers_failed(); };
  if (rank() == 0) {
    auto& arrivals = barrier_arrivals_[epoch % 2];
    auto all_arrived = [&] {
      return arrivals.load(std::memory_order_acquire) >= static_cast<std::uint64_t>(size() - 1);
    };
    if (!progress_until(*worker_, all_arrived, check_peers, deadline)) {
      break_collectives(fmt::format(
          "{} #{} on rank 0: deadline passed after {:.3f} s with rank(s) {} not arrived (stalled, "
          "partitioned, or not calling it)",
          what, epoch, waited(), ranks_missing_from(epoch)));
    }
    std::uint64_t total = value + barrier_sums_[epoch % 2].exchange(0, std::memory_order_relaxed);
    arrivals.store(0, std::memory_order_relaxed);
    for (int r = 1; r < size(); ++r) send_barrier_message(r, {epoch, 1, 0, total}, deadline, what);
    return total;
  }
  send_barrier_message(0, {epoch, 0, rank(), value}, deadline, what);
  auto released = [&] { return barrier_released_.load(std::memory_order_acquire) > epoch; };
  if (!progress_until(*worker_, released, check_peers, deadline)) {
    break_collectives(fmt::format(
        "{} #{} on rank {}: deadline passed after {:.3f} s without rank 0 releasing it (rank 0, "
        "or a rank it waits for, is stalled, partitioned, or not calling it; rank 0's error "
        "names the missing ranks)",
        what, epoch, rank(), waited()));
  }
  return barrier_result_.load(std::memory_order_relaxed);
}

void runtime::finalize(deadline_clock::time_point deadline) {
  if (running_runs_.load(std::memory_order_acquire) > 0) {
    throw error(fmt::format(
        "rank {}: finalize() called inside run() (from a thread's body or a call it ran); the "
        "runtime ends after run() returned, on the thread that called it",
        rank()));
  }
  if (finalized_) return;
  finalized_ = true;
  if (!collectives_broken_.empty()) {
    // The job is ending abnormally: no flush (a stalled peer would hold it to the deadline),
    // endpoints close without the handshake, and the barrier below refuses at once.
    for (auto& endpoint : endpoints_) {
      if (endpoint) endpoint->close_forcefully();
    }
    barrier(deadline);
  }
  // Our one-sided traffic lands first, then we meet: after the barrier nobody writes into
  // memory a peer is about to tear down. A dead rank's endpoint is not flushed (it failed), and
  // the barrier then ends with an error naming it.
  for (std::size_t r = 0; r < endpoints_.size(); ++r) {
    if (endpoints_[r] && !peer_failed(static_cast<int>(r))) (void)endpoints_[r]->flush_blocking(deadline);
  }
  barrier(deadline);
}

}  // namespace seriema::fabric

namespace seriema::fabric {

void runtime::check_registries() {
  auto& registry = function_registry::instance();
  registry.freeze();
  struct digest {
    std::uint64_t fingerprint;
    std::uint64_t functions;
  };
  digest mine{registry.fingerprint(), registry.size()};
  auto all = boot_->allgather(std::as_bytes(std::span(&mine, 1)));
  std::string differing;
  digest first{};
  for (std::size_t r = 0; r < all.size(); ++r) {
    digest d{};
    if (all[r].size() != sizeof d) {
      throw error(fmt::format("startup: rank {} sent a malformed function-registry digest", r));
    }
    std::memcpy(&d, all[r].data(), sizeof d);
    if (r == 0) first = d;
    if (d.fingerprint != first.fingerprint || d.functions != first.functions) {
      differing += fmt::format("{}rank {} ({} functions, {:#x})", differing.empty() ? "" : ", ", r,
                               d.functions, d.fingerprint);
    }
  }
  if (!differing.empty()) {
    throw error(fmt::format(
        "refusing to start: the processes' remote-function registries differ (rank 0 has {} "
        "functions, {:#x}; different: {}); every process must run the same build of the "
        "program and register the same functions",
        first.functions, first.fingerprint, differing));
  }
}

local_thread_state& runtime::local_state(thread_id id) {
  const auto& where = placement_->locate(id);
  return *local_states_[static_cast<std::size_t>(where.local_thread)];
}

bool runtime::is_local(thread_id id) const noexcept {
  return id < placement_->thread_count() && placement_->locate(id).process == rank();
}

call_queue* runtime::queue_of(std::uint32_t destination) noexcept {
  if ((destination & service_bit) != 0) {
    return (destination & ~service_bit) == static_cast<std::uint32_t>(rank()) ? &service_queue_
                                                                              : nullptr;
  }
  return is_local(destination) ? &local_state(destination).incoming : nullptr;
}

bool runtime::source_exists(std::uint32_t source) const noexcept {
  return (source & service_bit) != 0 ? (source & ~service_bit) < static_cast<std::uint32_t>(size())
                                     : source < placement().thread_count();
}

local_thread_state* runtime::reply_owner(thread_id caller) noexcept {
  if (caller == service_of(rank())) return service_state_.get();
  return is_local(caller) ? &local_state(caller) : nullptr;
}

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

void runtime::progress_shared() noexcept {
  bool expected = false;
  if (!service_role_taken_.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
    return;
  }
  (void)worker_->progress();
  service_role_taken_.store(false, std::memory_order_release);
}

std::uint64_t runtime::messages_sent() const noexcept {
  std::uint64_t total = counters_.sent.load(std::memory_order_acquire);
  for (const auto& state : local_states_) {
    total += state->one_sided_sent.load(std::memory_order_acquire);
  }
  return total;
}

std::uint64_t runtime::messages_consumed() const noexcept {
  std::uint64_t total = counters_.consumed();
  for (const auto& state : local_states_) {
    total += state->one_sided_consumed.load(std::memory_order_acquire);
  }
  return total;
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

ucs_status_t runtime::on_call_message(void* arg, const void* header, std::size_t header_length,
                                      void* data, std::size_t length,
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

ucs_status_t runtime::on_feedback_message(void* arg, const void* header,
                                          std::size_t header_length, void*, std::size_t length,
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

ucs_status_t runtime::on_write_message(void* arg, const void* header, std::size_t header_length,
                                       void* data, std::size_t length,
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

ucs_status_t runtime::on_reply_message(void* arg, const void* header, std::size_t header_length,
                                       void* data, std::size_t length,
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

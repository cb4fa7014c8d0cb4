// The per-process runtime: startup order (settings -> bootstrap -> placement -> UCX -> address
// exchange), lazy endpoints and arenas, and the progressing AM barrier.
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <seriema/base/error.hpp>
#include <seriema/base/log.hpp>
#include <seriema/base/settings.hpp>
#include <seriema/fabric/detail/settings.hpp>
#include "runtime/runtime_internal.hpp"
#include <thread>

#include "runtime/counters_report.hpp"

namespace seriema::fabric {

runtime_options runtime_options::from_environment() {
  // Every layer's settings first, all problems in one message; then this layer's, each read
  // even when another is bad (this is also what the fabric layer's check of the settings runs).
  config::check_environment();
  config::problems found;
  runtime_options options;
  found.check([&] {
    options.threads_per_process =
        static_cast<int>(config::get_unsigned("SERIEMA_THREADS", 1, 4096));
  });
  found.check([&] {
    options.service_threads =
        static_cast<int>(config::get_unsigned("SERIEMA_SERVICE_THREADS", 0, 1));
  });
  found.check([&] {
    options.helper_threads =
        static_cast<int>(config::get_unsigned("SERIEMA_HELPER_THREADS", 0, 64));
  });
  found.check([&] {
    options.attach_slots =
        static_cast<int>(config::get_unsigned("SERIEMA_ATTACH_SLOTS", 0, 1024));
  });
  found.check([&] {
    options.reply_cells =
        static_cast<std::uint32_t>(config::get_unsigned("SERIEMA_REPLY_CELLS", 0, 65536));
  });
  found.check([&] {
    options.send_limit = config::get_bytes("SERIEMA_SEND_LIMIT");
    if (options.send_limit < 64 || options.send_limit > (std::size_t{1} << 30)) {
      throw config_error(fmt::format("SERIEMA_SEND_LIMIT={}: expected 64 bytes .. 1G",
                                     options.send_limit));
    }
  });
  found.check([&] { options.timeout = config::get_duration("SERIEMA_TIMEOUT"); });
  found.check([&] { options.counters_path = config::raw("SERIEMA_COUNTERS").value_or(""); });
  found.check([&] { options.placement = placement_options::from_environment(); });
  found.check([&] { options.ucx = transfer::context_options::from_environment(); });
  found.check([&] { options.memory = transfer::arena_options::from_environment(); });
  found.throw_if_any();
  return options;
}

namespace {

// Runtimes constructed and not finalized yet in this process, and the rank of the last one: a
// process that exits with one (std::exit in a body, a return from main that leaks it) leaves the
// job before finalize, which the launcher counts as a failure; the atexit hook says so here too.
std::atomic<int> unfinalized_runtimes{0};
std::atomic<int> unfinalized_rank{-1};

extern "C" void warn_if_exiting_unfinalized() {
  if (unfinalized_runtimes.load(std::memory_order_acquire) == 0) return;
  log::error("rank {} is exiting (std::exit, or a return from main) while its runtime was never "
             "finalized: the job counts this as a failed rank, and the other ranks end their run() "
             "with an error naming it; call runtime::finalize() (or let the runtime be destroyed) "
             "before exiting",
             unfinalized_rank.load(std::memory_order_relaxed));
}

void count_unfinalized_runtime(int rank) {
  static const bool hooked = std::atexit(warn_if_exiting_unfinalized) == 0;
  (void)hooked;
  unfinalized_rank.store(rank, std::memory_order_relaxed);
  unfinalized_runtimes.fetch_add(1, std::memory_order_acq_rel);
}

// Who reported a rank dead (dead_reporter_): a survivor's rank number, -1 for UCX (the default
// of note_peer_failure), or this for the launcher.
constexpr int reported_by_launcher = -2;

}  // namespace

runtime::runtime(const runtime_options& options)
    : options_(options), service_state_(std::make_unique<local_thread_state>()),
      quiescence_(std::make_unique<quiescence>()) {
  boot_ = bootstrap::create(options_.boot);
  log::set_rank(rank());
  counters_file_ = detail::counters_file_for(options_.counters_path, rank(), size());
  dead_ = std::make_unique<std::atomic<bool>[]>(static_cast<std::size_t>(boot_->size()));
  dead_status_ = std::make_unique<std::atomic<int>[]>(static_cast<std::size_t>(boot_->size()));
  dead_reporter_ = std::make_unique<std::atomic<int>[]>(static_cast<std::size_t>(boot_->size()));
  left_how_.resize(static_cast<std::size_t>(boot_->size()));
  failures_announced_.assign(static_cast<std::size_t>(boot_->size()), false);
  barrier_arrived_ = std::make_unique<std::atomic<std::uint64_t>[]>(static_cast<std::size_t>(boot_->size()));
  if (!options_.ucx.peer_errors && boot_->size() > 1) {
    log::warning("SERIEMA_PEER_ERRORS=no: a rank that dies will not be detected, and calls and "
                 "waits addressed to it may hang until their deadline (SERIEMA_TIMEOUT)");
  }
  try {
    // From here the launcher counts this rank leaving before finalize() as a failure.
    boot_->mark_running();
    place_and_bind();
    options_.ucx.net_devices = placement_->net_devices(boot_->rank());
    context_ = std::make_unique<transfer::ucx_context>(options_.ucx);
    worker_ = std::make_unique<transfer::ucx_worker>(*context_, transfer::worker_sharing::multi_thread);
    // Workers first, then the attach slots (local index threads + slot).
    for (int t = 0; t < options_.threads_per_process + options_.attach_slots; ++t) {
      local_states_.push_back(std::make_unique<local_thread_state>());
    }
    attach_slots_ = std::make_unique<attach_slot[]>(static_cast<std::size_t>(options_.attach_slots));
    register_handlers();
    attach_reply_cells();
    exchange_addresses();
    reply_peers_ = std::make_unique<reply_peer[]>(static_cast<std::size_t>(boot_->size()));
    endpoints_.resize(static_cast<std::size_t>(boot_->size()));
    check_registries();
    // Now that every member note_peer_left touches is complete (the service role's reply cells
    // were attached above), hear from the launcher which ranks left: UCX cannot see the death of
    // a rank we have no endpoint to. Notices that came during startup are delivered here; a
    // death during startup also failed the bootstrap's collectives above.
    boot_->watch_peers([this](int r, const std::string& how) { note_peer_left(r, how); });
  } catch (const std::exception& e) {
    stop_watching_peers();  // the members the watch uses go with this constructor
    boot_->abort(e.what());
    throw;
  }
  count_unfinalized_runtime(rank());
}

void runtime::stop_watching_peers() noexcept {
  try {
    boot_->watch_peers(nullptr);
  } catch (...) {
    // Removing a handler allocates nothing; nothing to do if it ever failed.
  }
}

void runtime::place_and_bind() {
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
}

const std::vector<std::string>& runtime::net_devices() const noexcept {
  return context_->net_devices();
}

void runtime::register_handlers() {
  struct handler_entry {
    unsigned id;
    ucp_am_recv_callback_t callback;
    const char* what;
  };
  const handler_entry handlers[] = {
      {am_id_runtime_barrier, &am_handlers::on_barrier_message, "barrier"},
      {am_id_call, &am_handlers::on_call_message, "calls"},
      {am_id_reply, &am_handlers::on_reply_message, "replies"},
      {am_id_write, &am_handlers::on_write_message, "writes"},
      {am_id_feedback, &am_handlers::on_feedback_message, "feedback"}};
  for (const handler_entry& h : handlers) {
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
}

// One exchange at startup: every rank's reply-region locator, then its worker address.
void runtime::exchange_addresses() {
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
}

runtime::~runtime() {
  try {
    finalize();
  } catch (const std::exception& e) {
    log::error("shutdown: {}", e.what());
  }
  stop_watching_peers();  // finalize() did, unless it was refused
  // Attach slots' contexts first: what they received and did not run goes back to their queues.
  release_attach_slots();
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

void runtime::note_peer_failure(int rank, transfer::ucx_status_code status,
                                int reported_by) noexcept {
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

void runtime::note_peer_left(int rank, const std::string& how) noexcept {
  if (rank < 0 || rank >= size() || rank == this->rank()) return;
  try {
    std::lock_guard lock(left_mutex_);
    left_how_[static_cast<std::size_t>(rank)] = how;
  } catch (...) {
    // Out of memory for the text: the rank is still recorded dead, described as UCX would.
  }
  // When UCX or a survivor reported it first, the launcher's account (how it left) still
  // describes it from now on.
  if (peer_failed(rank)) {
    dead_reporter_[static_cast<std::size_t>(rank)].store(reported_by_launcher,
                                                         std::memory_order_relaxed);
  }
  note_peer_failure(rank, UCS_ERR_CONNECTION_RESET, reported_by_launcher);
}

std::string runtime::describe_failed_peer(int rank) const {
  const auto status =
      static_cast<ucs_status_t>(dead_status_[static_cast<std::size_t>(rank)].load());
  const int reporter = dead_reporter_[static_cast<std::size_t>(rank)].load();
  if (reporter >= 0) return fmt::format("rank {} (reported failed by rank {})", rank, reporter);
  if (reporter == reported_by_launcher) {
    std::lock_guard lock(left_mutex_);
    if (!left_how_[static_cast<std::size_t>(rank)].empty()) {
      return fmt::format("rank {} ({})", rank, left_how_[static_cast<std::size_t>(rank)]);
    }
  }
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

void runtime::finalize(deadline_clock::time_point deadline) {
  if (running_runs_.load(std::memory_order_acquire) > 0) {
    throw error(fmt::format(
        "rank {}: finalize() called inside run() (from a thread's body or a call it ran); the "
        "runtime ends after run() returned, on the thread that called it",
        rank()));
  }
  if (const int attached = attached_threads(); attached > 0) {
    throw error(fmt::format(
        "rank {}: finalize() while {} thread(s) hold attach slots; their attached_thread "
        "handles must end first (they use the runtime)",
        rank(), attached));
  }
  if (finalized_) return;
  finalized_ = true;
  unfinalized_runtimes.fetch_sub(1, std::memory_order_acq_rel);
  // Whether the barrier below succeeds or throws, this rank took the orderly way out: from now
  // on the launcher judges its exit by its status alone. Until then a rank that leaves is
  // reported to us (the barrier would wait for it).
  struct tell_launcher {
    runtime& rt;
    ~tell_launcher() {
      rt.stop_watching_peers();
      rt.boot_->mark_finalized();
    }
  } finalizing{*this};
  if (!collectives_broken_.empty()) {
    // The job is ending abnormally: no flush (a stalled peer would hold it to the deadline),
    // endpoints close without the handshake, and the barrier below refuses at once.
    for (auto& endpoint : endpoints_) {
      if (endpoint) endpoint->close_forcefully();
    }
    barrier(deadline);
  }
  // Our one-sided traffic lands first, then we meet: after the barrier nobody writes into
  // memory a peer is about to tear down. Once any rank has failed the barrier can only end
  // with an error naming it, so the flushes stop: UCX may keep a flush to a dead peer pending,
  // and over TCP a flush to a live peer waits for that peer's progress, which stops as soon
  // as its own finalize() failed (it learnt of the death first).
  const auto job_failed = [this] { return failure_epoch() != 0; };
  for (std::size_t r = 0; r < endpoints_.size() && !job_failed(); ++r) {
    if (!endpoints_[r] || peer_failed(static_cast<int>(r))) continue;
    (void)endpoints_[r]->flush_blocking(deadline, job_failed);
  }
  if (!job_failed()) flush_attach_slots(deadline);
  barrier(deadline);
}

}  // namespace seriema::fabric

namespace seriema::fabric {

namespace {

// What every rank must agree on before calls flow: the registry, and how its ids were made
// (with address-based ids, the binary itself).
struct registry_digest {
  std::uint64_t fingerprint = 0;
  std::uint64_t functions = 0;
  std::uint64_t mode = 0;        // function_id_mode
  std::uint64_t executable = 0;  // executable_identity() with address-based ids; else 0
  std::uint64_t threads = 0;       // SERIEMA_THREADS and SERIEMA_ATTACH_SLOTS: thread ids are
  std::uint64_t attach_slots = 0;  // computed from them, so every rank needs the same
};

function_id_mode id_mode_setting() {
  static constexpr std::string_view modes[] = {"hash", "address"};
  return static_cast<function_id_mode>(config::get_choice("SERIEMA_FUNCTION_IDS", modes));
}

}  // namespace

void runtime::check_registries() {
  auto& registry = function_registry::instance();
  registry.freeze();
  if (id_mode_setting() != registry.id_mode()) {
    throw config_error("SERIEMA_FUNCTION_IDS changed after the program started: it is read "
                       "before main, from the environment the process was started with");
  }
  const bool by_address = registry.id_mode() == function_id_mode::address;
  registry_digest mine{registry.fingerprint(), registry.size(),
                       static_cast<std::uint64_t>(registry.id_mode()),
                       by_address ? executable_identity() : 0,
                       static_cast<std::uint64_t>(options_.threads_per_process),
                       static_cast<std::uint64_t>(options_.attach_slots)};
  auto all = boot_->allgather(std::as_bytes(std::span(&mine, 1)));
  std::string differing;
  std::string other_shape;
  registry_digest first{};
  for (std::size_t r = 0; r < all.size(); ++r) {
    registry_digest d{};
    if (all[r].size() != sizeof d) {
      throw error(fmt::format("startup: rank {} sent a malformed function-registry digest", r));
    }
    std::memcpy(&d, all[r].data(), sizeof d);
    if (r == 0) first = d;
    if (d.threads != first.threads || d.attach_slots != first.attach_slots) {
      other_shape += fmt::format(", rank {} has {} and {}", r, d.threads, d.attach_slots);
    }
    if (d.fingerprint != first.fingerprint || d.functions != first.functions ||
        d.mode != first.mode || d.executable != first.executable) {
      differing += fmt::format("{}rank {} ({} functions, {:#x}{})", differing.empty() ? "" : ", ",
                               r, d.functions, d.fingerprint,
                               d.mode != first.mode           ? ", other SERIEMA_FUNCTION_IDS"
                               : d.executable != first.executable ? ", another binary"
                                                                  : "");
    }
  }
  if (!other_shape.empty()) {
    throw config_error(fmt::format(
        "refusing to start: SERIEMA_THREADS and SERIEMA_ATTACH_SLOTS must be the same on every "
        "rank (thread ids are computed from them): rank 0 has {} and {}{}",
        first.threads, first.attach_slots, other_shape));
  }
  if (!differing.empty()) {
    throw error(fmt::format(
        "refusing to start: the processes' remote-function registries differ (rank 0 has {} "
        "functions, {:#x}; different: {}); every process must run the same build of the "
        "program and register the same functions{}",
        first.functions, first.fingerprint, differing,
        by_address ? " (SERIEMA_FUNCTION_IDS=address: ids are code offsets, so the binaries "
                     "must be identical)"
                   : ""));
  }
}

local_thread_state& runtime::local_state(thread_id id) {
  if (id >= placement_->thread_count()) {  // an attach slot of this process
    return *local_states_[static_cast<std::size_t>(options_.threads_per_process) +
                          attach_slot_of(id)];
  }
  const auto& where = placement_->locate(id);
  return *local_states_[static_cast<std::size_t>(where.local_thread)];
}

bool runtime::is_local(thread_id id) const noexcept {
  return (id & service_bit) == 0 && process_of_thread(id) == rank();
}

int runtime::process_of_thread(std::uint32_t id) const noexcept {
  if ((id & service_bit) != 0) {
    const std::uint32_t process = id & ~service_bit;
    return process < static_cast<std::uint32_t>(size()) ? static_cast<int>(process) : -1;
  }
  const thread_id workers = placement_->thread_count();
  if (id < workers) return placement_->locate(id).process;
  if (!is_attached_id(id)) return -1;
  return static_cast<int>((id - workers) / static_cast<thread_id>(options_.attach_slots));
}

call_queue* runtime::queue_of(std::uint32_t destination) noexcept {
  if ((destination & service_bit) != 0) {
    return (destination & ~service_bit) == static_cast<std::uint32_t>(rank()) ? &service_queue_
                                                                              : nullptr;
  }
  if (!is_local(destination)) return nullptr;
  // An attach slot has a context to run calls on once a thread attached it.
  if (is_attached_id(destination) && !attach_slot_opened(destination)) return nullptr;
  return &local_state(destination).incoming;
}

bool runtime::source_exists(std::uint32_t source) const noexcept {
  return process_of_thread(source) >= 0;
}

local_thread_state* runtime::reply_owner(thread_id caller) noexcept {
  if (caller == service_of(rank())) return service_state_.get();
  return is_local(caller) ? &local_state(caller) : nullptr;
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
  // A deferred reply (or spawned task) not finished yet counts as a message in flight.
  std::uint64_t total = counters_.sent.load(std::memory_order_acquire) +
                        counters_.deferred_started.load(std::memory_order_acquire);
  for (const auto& state : local_states_) {
    total += state->one_sided_sent.load(std::memory_order_acquire);
  }
  return total;
}

std::uint64_t runtime::messages_consumed() const noexcept {
  std::uint64_t total = counters_.consumed() +
                        counters_.deferred_finished.load(std::memory_order_acquire);
  for (const auto& state : local_states_) {
    total += state->one_sided_consumed.load(std::memory_order_acquire);
  }
  return total;
}

}  // namespace seriema::fabric

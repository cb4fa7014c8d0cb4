// The per-process runtime: startup order (settings -> bootstrap -> placement -> UCX -> address
// exchange), lazy endpoints and arenas, and the progressing AM barrier.
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <seriema/fabric/runtime.hpp>
#include <seriema/transfer/config.hpp>
#include <seriema/transfer/error.hpp>
#include <thread>

namespace seriema::fabric {

namespace {

struct barrier_message {
  std::uint64_t epoch;
  std::uint32_t kind;  // 0: arrival at rank 0; 1: release from rank 0
  std::int32_t from;
};

}  // namespace

runtime_options runtime_options::from_environment() {
  config::reject_unknown_environment_settings();
  runtime_options options;
  options.threads_per_process =
      static_cast<int>(config::get_unsigned("SERIEMA_THREADS", 1, 4096));
  options.placement = placement_options::from_environment();
  options.ucx = transfer::context_options::from_environment();
  options.memory = transfer::arena_options::from_environment();
  return options;
}

runtime::runtime(const runtime_options& options) : options_(options) {
  boot_ = bootstrap::create(options_.boot);
  try {
    std::vector<int> processes_on_machine(static_cast<std::size_t>(boot_->machine_count()), 0);
    for (int r = 0; r < boot_->size(); ++r) ++processes_on_machine[boot_->machine_of(r)];
    placement_ = std::make_unique<fabric::placement>(machine_topology::detect(), processes_on_machine,
                                                     options_.threads_per_process,
                                                     options_.placement);
    placement_->bind_process(boot_->rank());

    context_ = std::make_unique<transfer::ucx_context>(options_.ucx);
    worker_ = std::make_unique<transfer::ucx_worker>(*context_, transfer::worker_sharing::multi_thread);

    ucp_am_handler_param_t handler{};
    handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                         UCP_AM_HANDLER_PARAM_FIELD_ARG;
    handler.id = am_id_runtime_barrier;
    handler.cb = &runtime::on_barrier_message;
    handler.arg = this;
    transfer::check_ucx(ucp_worker_set_am_recv_handler(worker_->handle(), &handler),
                        "ucp_worker_set_am_recv_handler (barrier)");
    barrier_arrivals_.assign(2, 0);

    addresses_ = boot_->allgather(worker_->address());
    endpoints_.resize(static_cast<std::size_t>(boot_->size()));
  } catch (const std::exception& e) {
    boot_->abort(e.what());
    throw;
  }
}

runtime::~runtime() {
  try {
    finalize();
  } catch (const std::exception& e) {
    fmt::print(stderr, "seriema[rank {}]: shutdown: {}\n", boot_ ? boot_->rank() : -1, e.what());
  }
  // Endpoints before arenas (rkeys unpacked on them refer to peers), arenas before the worker
  // and context (memory handles belong to the context).
  endpoints_.clear();
  arenas_.clear();
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
  if (!slot) {
    slot = std::make_unique<transfer::ucx_endpoint>(*worker_, addresses_[static_cast<std::size_t>(rank)],
                                                    fmt::format("rank {}", rank));
  }
  return *slot;
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

std::vector<std::vector<std::byte>> runtime::allgather(std::span<const std::byte> mine) {
  // The bootstrap blocks without progressing UCX. A peer may still be completing one-sided
  // operations on this process (over TCP they need our progress), so first meet in the
  // progressing barrier: every rank gets there only after its own flushes returned.
  barrier();
  return boot_->allgather(mine);
}

ucs_status_t runtime::on_barrier_message(void* arg, const void* header, std::size_t header_length,
                                         void*, std::size_t, const ucp_am_recv_param_t*) {
  auto* self = static_cast<runtime*>(arg);
  if (header_length != sizeof(barrier_message)) return UCS_OK;  // not ours: ignore
  barrier_message message;
  std::memcpy(&message, header, sizeof message);
  if (message.kind == 0) {
    ++self->barrier_arrivals_[message.epoch % 2];
  } else if (message.epoch + 1 > self->barrier_released_) {
    self->barrier_released_ = message.epoch + 1;
  }
  return UCS_OK;
}

namespace {

void send_barrier_message(transfer::ucx_endpoint& endpoint, const barrier_message& message) {
  ucp_request_param_t param{};
  void* request = ucp_am_send_nbx(endpoint.handle(), am_id_runtime_barrier, &message,
                                  sizeof message, nullptr, 0, &param);
  ucs_status_t status = transfer::wait_request(endpoint.worker(), request);
  if (status != UCS_OK) {
    throw error(fmt::format("barrier: cannot reach {}: {}", endpoint.peer(),
                            ucs_status_string(status)));
  }
}

}  // namespace

void runtime::barrier() {
  if (size() == 1) return;
  const std::uint64_t epoch = barrier_epoch_++;
  auto wait_until = [&](auto done, auto check_peer) {
    int idle = 0;
    while (!done()) {
      check_peer();
      if (!worker_->progress() && ++idle > 128) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));  // idle back-off
        idle = 0;
      }
    }
  };
  if (rank() == 0) {
    wait_until([&] { return barrier_arrivals_[epoch % 2] >= static_cast<std::uint64_t>(size() - 1); },
               [&] {
                 for (int r = 1; r < size(); ++r) {
                   auto& ep = endpoint(r);
                   if (ep.failed()) {
                     throw error(fmt::format("barrier: rank {} failed ({})", r,
                                             ucs_status_string(ep.failure())));
                   }
                 }
               });
    barrier_arrivals_[epoch % 2] = 0;
    for (int r = 1; r < size(); ++r) send_barrier_message(endpoint(r), {epoch, 1, 0});
  } else {
    send_barrier_message(endpoint(0), {epoch, 0, rank()});
    wait_until([&] { return barrier_released_ > epoch; },
               [&] {
                 auto& ep = endpoint(0);
                 if (ep.failed()) {
                   throw error(fmt::format("barrier: rank 0 failed ({})",
                                           ucs_status_string(ep.failure())));
                 }
               });
  }
}

void runtime::finalize() {
  if (finalized_) return;
  finalized_ = true;
  barrier();  // nobody tears down memory a peer may still be writing
  for (auto& endpoint : endpoints_) {
    if (endpoint) (void)endpoint->flush_blocking();
  }
}

}  // namespace seriema::fabric

// The per-process runtime: bootstrap, placement, the UCX context and process worker, endpoints
// to every rank, registered arenas per zone, and a barrier that keeps UCX progressing.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <seriema/fabric/bootstrap.hpp>
#include <seriema/fabric/placement.hpp>
#include <seriema/transfer/arena.hpp>
#include <seriema/transfer/remote_memory.hpp>
#include <seriema/transfer/ucx.hpp>
#include <span>
#include <string>
#include <vector>

namespace seriema::fabric {

struct runtime_options {
  int threads_per_process = 1;  // SERIEMA_THREADS
  placement_options placement;
  transfer::context_options ucx;
  transfer::arena_options memory;
  bootstrap_options boot;
  // Reads every SERIEMA_* setting; throws config_error naming the first bad one (including
  // unknown SERIEMA_* variables).
  static runtime_options from_environment();
};

// Thread-safety: construction/finalize on the main thread; endpoint(), arena_for_zone(),
// resolve() and the accessors from any thread.
class runtime {
 public:
  explicit runtime(const runtime_options& options = runtime_options::from_environment());
  ~runtime();  // finalize() if not done (errors are reported, never thrown)
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  [[nodiscard]] int rank() const noexcept { return boot_->rank(); }
  [[nodiscard]] int size() const noexcept { return boot_->size(); }
  [[nodiscard]] int machine() const noexcept { return boot_->machine(); }
  [[nodiscard]] int machine_of(int rank) const noexcept { return boot_->machine_of(rank); }
  [[nodiscard]] bool same_machine(int rank) const noexcept { return machine_of(rank) == machine(); }
  [[nodiscard]] bootstrap& boot() noexcept { return *boot_; }
  [[nodiscard]] const fabric::placement& placement() const noexcept { return *placement_; }
  [[nodiscard]] transfer::ucx_context& context() noexcept { return *context_; }
  // The process-wide worker (shared by threads). Endpoints below belong to it.
  [[nodiscard]] transfer::ucx_worker& worker() noexcept { return *worker_; }
  // UCX worker address of every rank, as exchanged at startup.
  [[nodiscard]] std::span<const std::byte> worker_address(int rank) const;

  // The endpoint from the process worker to `rank` (created on first use).
  transfer::ucx_endpoint& endpoint(int rank);
  // The arena of NUMA zone `zone` (OS index), created on first use; local_arena(): this
  // process's zone.
  transfer::arena& arena_for_zone(int zone);
  transfer::arena& local_arena();
  // Resolves a locator for use from this process: direct pointer access only when the owner is
  // on this machine (so --machines N really takes the inter-machine path).
  transfer::remote_memory resolve(const transfer::remote_memory_locator& locator);

  // Collective over all ranks, progressing the worker while it waits (one-sided traffic over
  // TCP needs the target to progress). Throws seriema::error if a peer fails.
  void barrier();
  // Collective exchange of small blobs (control path): a progressing barrier, then the
  // bootstrap's allgather, so a peer finishing one-sided operations on us is never stranded.
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine);

  // Final barrier and teardown of endpoints. Idempotent.
  void finalize();

 private:
  static ucs_status_t on_barrier_message(void* arg, const void* header, std::size_t header_length,
                                         void* data, std::size_t length,
                                         const ucp_am_recv_param_t* param);

  runtime_options options_;
  std::unique_ptr<bootstrap> boot_;
  std::unique_ptr<fabric::placement> placement_;
  std::unique_ptr<transfer::ucx_context> context_;
  std::unique_ptr<transfer::ucx_worker> worker_;
  std::vector<std::vector<std::byte>> addresses_;
  std::mutex endpoints_mutex_;
  std::vector<std::unique_ptr<transfer::ucx_endpoint>> endpoints_;
  std::mutex arenas_mutex_;
  std::vector<std::unique_ptr<transfer::arena>> arenas_;  // indexed by zone OS index
  // Barrier state: written by the AM handler (on the thread progressing the worker, which is
  // the thread inside barrier()), read by that same thread.
  std::vector<std::uint64_t> barrier_arrivals_;  // rank 0: arrivals per epoch parity
  std::uint64_t barrier_epoch_ = 0;
  std::uint64_t barrier_released_ = 0;
  bool finalized_ = false;
};

// Active-message ids reserved by seriema's own layers (applications use ids >= 16).
inline constexpr unsigned am_id_runtime_barrier = 1;
inline constexpr unsigned am_id_first_free = 16;

}  // namespace seriema::fabric

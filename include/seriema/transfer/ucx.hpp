// RAII wrappers for the UCX objects seriema uses: one context per process, workers, endpoints
// (with peer-failure detection), plus status helpers. Setup path: throws ucx_error.
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>
#include <seriema/transfer/detail/settings.hpp>
#include <seriema/transfer/options.hpp>

namespace seriema::transfer {

/// Throws ucx_error("<what>: <UCX status text>") when status is not UCS_OK.
void check_ucx(ucs_status_t status, const char* what);

/// Whether UCX may put the memory it allocates (ucp_mem_map ALLOCATE) on hugetlb pages, and who
/// decided: seriema from SERIEMA_PAGES, or the user through a UCX_*_HUGETLB_MODE variable.
struct ucx_hugetlb {
  bool allowed = true;    ///< false: UCX's shared-memory allocators use normal pages only
  /// e.g. "try (set by seriema for SERIEMA_PAGES=auto)", "UCX_SYSV_HUGETLB_MODE=n (set by the
  /// user; ...)"
  std::string described;
};

/// The process's UCX context (features: RMA, 64/32-bit atomics, active messages; workers may be
/// shared between threads). Thread-safety: immutable after construction; safe to share.
class ucx_context {
 public:
  /// Reads the UCX configuration and initializes UCX. Throws ucx_error when UCX rejects its
  /// configuration or cannot initialize, config_error when UCX_TLS names an unknown transport.
  explicit ucx_context(const context_options& options = context_options::from_environment());
  ~ucx_context();  ///< cleans up UCX; every worker, endpoint and registration must be gone
  ucx_context(const ucx_context&) = delete;
  ucx_context& operator=(const ucx_context&) = delete;

  /// The UCX context handle.
  [[nodiscard]] ucp_context_h handle() const noexcept { return context_; }
  /// The options the context was built with.
  [[nodiscard]] const context_options& options() const noexcept { return options_; }
  /// Bytes every UCX request of this context reserves for seriema (see transmitter).
  static constexpr std::size_t request_reserve = 32;
  /// True when a usable transport writes remote memory without the target's CPU (rc, dc,
  /// ugni_rdma): puts to other machines are then native; otherwise (tcp) UCX emulates them with
  /// messages the target's progress applies.
  [[nodiscard]] bool network_rdma() const noexcept { return network_rdma_; }
  /// The network devices UCX was restricted to (options().net_devices as applied); empty when
  /// UCX chose: none asked, UCX_NET_DEVICES set by the user, or none of those asked was usable
  /// by UCX (then a warning was logged and UCX was initialized again without restriction).
  [[nodiscard]] const std::vector<std::string>& net_devices() const noexcept {
    return applied_net_devices_;
  }
  /// True when UCX's shared-memory domains (sysv, posix) are in use, so that memory UCX
  /// allocates is a segment same-machine peers can map (false with e.g. UCX_TLS=tcp,self: UCX
  /// then allocates private memory).
  [[nodiscard]] bool shared_memory_domains() const noexcept { return shared_memory_domains_; }
  /// The hugetlb mode UCX's shared-memory allocators use in this context (see ucx_hugetlb).
  [[nodiscard]] const ucx_hugetlb& hugetlb() const noexcept { return hugetlb_; }

 private:
  // ucp_init with seriema's settings, restricted to `net_devices` unless empty.
  ucs_status_t initialize(const std::vector<std::string>& net_devices);
  // False (and UCX initialized again unrestricted) when UCX offers none of the devices applied.
  bool restriction_was_usable(const std::vector<std::string>& available);
  ucp_context_h context_ = nullptr;
  context_options options_;
  bool network_rdma_ = false;
  std::vector<std::string> applied_net_devices_;
  bool shared_memory_domains_ = false;
  ucx_hugetlb hugetlb_;
};

/// Whether a worker is used by one thread or shared (UCS_THREAD_MODE_SINGLE / _MULTI).
enum class worker_sharing {
  single_thread,  ///< used only by the thread that owns it
  multi_thread    ///< any thread may use it; UCX serializes internally
};

/// A UCX worker (progress engine + address). Thread-safety: single_thread workers belong to one
/// thread; multi_thread workers may be used by any thread (UCX serializes internally).
class ucx_worker {
 public:
  /// The context must outlive the worker. Throws ucx_error when UCX cannot create the worker
  /// (or, for multi_thread, when this UCX build cannot share workers between threads).
  ucx_worker(ucx_context& context, worker_sharing sharing);
  ~ucx_worker();  ///< destroys the worker; its endpoints must be gone
  ucx_worker(const ucx_worker&) = delete;
  ucx_worker& operator=(const ucx_worker&) = delete;

  /// The UCX worker handle.
  [[nodiscard]] ucp_worker_h handle() const noexcept { return worker_; }
  /// The context the worker belongs to.
  [[nodiscard]] ucx_context& context() const noexcept { return context_; }
  /// The opaque address a peer needs to connect to this worker.
  [[nodiscard]] const std::vector<std::byte>& address() const noexcept { return address_; }
  /// Progresses outstanding communication; returns true if anything happened.
  bool progress() noexcept { return ucp_worker_progress(worker_) != 0; }

 private:
  ucx_context& context_;
  ucp_worker_h worker_ = nullptr;
  std::vector<std::byte> address_;
};

/// An endpoint from a worker to a peer worker. When the context enables peer errors, a dead peer
/// flips `failed()` (from UCX's error callback, on the thread progressing the worker) and every
/// later operation on the endpoint reports it. Thread-safety: as the worker.
class ucx_endpoint {
 public:
  /// `peer` names the remote process in messages ("rank 3"). `on_failure`, when given, is
  /// called once with UCX's reason when the endpoint fails, on the thread progressing the
  /// worker (inside UCX: it must not block or call UCX). The worker must outlive the endpoint.
  /// Throws ucx_error when UCX cannot create the endpoint.
  ucx_endpoint(ucx_worker& worker, std::span<const std::byte> peer_address, std::string peer,
               std::function<void(ucs_status_t)> on_failure = {});
  ~ucx_endpoint();  ///< flushes and closes, bounded in time; never throws
  ucx_endpoint(const ucx_endpoint&) = delete;
  ucx_endpoint& operator=(const ucx_endpoint&) = delete;

  /// The UCX endpoint handle.
  [[nodiscard]] ucp_ep_h handle() const noexcept { return endpoint_; }
  /// The worker the endpoint was created on.
  [[nodiscard]] ucx_worker& worker() const noexcept { return worker_; }
  /// The peer's name in messages ("rank 3").
  [[nodiscard]] const std::string& peer() const noexcept { return peer_; }
  /// True once UCX reported the peer dead. Any thread.
  [[nodiscard]] bool failed() const noexcept {
    return failure_.load(std::memory_order_acquire) != UCS_OK;
  }
  /// UCX's reason for the failure; UCS_OK while the endpoint is healthy. Any thread.
  [[nodiscard]] ucs_status_t failure() const noexcept {
    return failure_.load(std::memory_order_acquire);
  }
  /// The transports UCX chose for this endpoint's lanes, e.g. "rma: posix/memory; am: tcp/eth0".
  [[nodiscard]] std::string describe_transports() const;

  /// The job is ending abnormally (a collective passed its deadline): the destructor closes
  /// without the flush and handshake a peer that stopped progressing would never answer.
  void close_forcefully() noexcept { close_forcefully_ = true; }

  /// Blocks (progressing the worker) until every operation posted on this endpoint completed,
  /// or until `deadline` (then UCS_ERR_TIMED_OUT; UCX completes the flush on its own later).
  /// Returns the final status (an error when the peer failed). Control path.
  ucs_status_t flush_blocking(
      std::chrono::steady_clock::time_point deadline =
          std::chrono::steady_clock::time_point::max()) noexcept;
  /// flush_blocking() that also ends, with UCS_ERR_CANCELED, as soon as the endpoint failed or
  /// `give_up()` says so (the runtime: the peer is known dead, reported by the launcher or by
  /// another endpoint; UCX 1.13 may keep a flush to a peer that died pending). The flush is
  /// then left to UCX, which reads no memory of ours for it. Control path.
  ucs_status_t flush_blocking(std::chrono::steady_clock::time_point deadline,
                              const std::function<bool()>& give_up) noexcept;

 private:
  static void on_error(void* arg, ucp_ep_h ep, ucs_status_t status);

  ucx_worker& worker_;
  ucp_ep_h endpoint_ = nullptr;
  std::string peer_;
  std::atomic<ucs_status_t> failure_{UCS_OK};
  std::function<void(ucs_status_t)> on_failure_;
  bool close_forcefully_ = false;  ///< owner: whoever destroys the endpoint
};

/// Waits for a UCX request pointer returned by an *_nbx call (progressing `worker`); returns its
/// final status and frees it. Accepts NULL (immediate success) and error pointers. Control path.
ucs_status_t wait_request(ucx_worker& worker, void* request) noexcept;
/// The same, bounded: at `deadline` the request is handed back to UCX (ucp_request_free: it
/// completes on its own later) and UCS_ERR_TIMED_OUT returned. Only for requests that reference
/// no caller memory (flushes): a send's buffer must stay valid until its request completes.
ucs_status_t wait_request_until(ucx_worker& worker, void* request,
                                std::chrono::steady_clock::time_point deadline) noexcept;

/// Registered memory that UCX allocates itself (ucp_mem_map with ALLOCATE: a shm segment that
/// same-machine peers can map with ucp_rkey_ptr): its handle and address, or the failing status
/// with nothing left mapped. Arenas and shared_region use it.
ucs_status_t map_ucx_allocated_memory(ucx_context& context, std::size_t length, ucp_mem_h* memh,
                                      std::byte** base) noexcept;
/// The packed rkey of `memh`: what a peer unpacks to address that memory. Throws ucx_error.
std::vector<std::byte> pack_rkey(ucx_context& context, ucp_mem_h memh);

/// UCX library version ("1.13.1").
std::string ucx_version();
/// The transports/devices this context can use, one "transport/device" entry each
/// (e.g. "tcp/eth0", "posix/memory").
std::vector<std::string> ucx_available_transports(ucx_context& context);

}  // namespace seriema::transfer

// Job bootstrap: who am I (rank, size, machine), exchange of small blobs (UCX worker addresses,
// rkeys), and a barrier. Three modes chosen automatically: PMIx (mpirun/prterun/srun), the
// seriema-run launcher, or a single process.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <seriema/base/error.hpp>
#include <seriema/fabric/detail/settings.hpp>
#include <span>
#include <string>
#include <vector>

namespace seriema::fabric {

/// How a process found the job: PMIx (mpirun, srun), the seriema-run launcher, or alone.
enum class bootstrap_mode { pmix, launcher, single };
const char* to_string(bootstrap_mode mode) noexcept;  ///< "pmix", "launcher" or "single"

/// Thrown when a bootstrap collective cannot complete: a peer died (the message names its rank),
/// the timeout passed (the message names the ranks that never arrived), or the launcher vanished.
/// Also thrown when the bootstrap cannot start (launcher socket unreachable, PMIx_Init failed,
/// inconsistent SERIEMA_RUN_* variables). Messages start with "seriema: bootstrap failed: ".
class bootstrap_error : public seriema::error {
 public:
  using error::error;
};

/// How the bootstrap's collectives are bounded.
struct bootstrap_options {
  /// How long one collective may wait for the slowest peer. Default: SERIEMA_BOOTSTRAP_TIMEOUT
  /// (30 s when unset).
  std::chrono::milliseconds timeout{0};  ///< 0 = take from the environment
};

/// How the processes of a job find each other before UCX is up: rank, size, machines, and
/// allgather/barrier over PMIx, the seriema-run launcher, or nothing (a single process).
///
/// Thread-safety: one thread at a time (the collectives are called from the process's main thread
/// during startup and shutdown).
///
/// Collectives are matched by call order: the k-th collective (allgather or barrier) of one rank
/// meets the k-th collective of every other rank. Several bootstrap objects may be created one
/// after another in a process; every rank must then create and use them in the same order.
class bootstrap {
 public:
  virtual ~bootstrap() = default;

  /// Detects the mode from the environment: PMIx variables (PMIX_RANK / PMIX_NAMESPACE) → pmix;
  /// SERIEMA_RUN_SOCKET → launcher; otherwise single. Throws seriema::error on failure.
  static std::unique_ptr<bootstrap> create(const bootstrap_options& options = {});

  /// The mode create() would choose in this environment (for seriema-info and messages).
  [[nodiscard]] static bootstrap_mode detect_mode() noexcept;

  [[nodiscard]] virtual bootstrap_mode mode() const noexcept = 0;  ///< pmix, launcher or single
  [[nodiscard]] virtual int rank() const noexcept = 0;  ///< this process's rank, 0..size() - 1
  [[nodiscard]] virtual int size() const noexcept = 0;  ///< processes in the job
  /// Machines are numbered 0..machine_count()-1, in order of their lowest rank.
  [[nodiscard]] virtual int machine() const noexcept = 0;
  [[nodiscard]] virtual int machine_count() const noexcept = 0;  ///< machines in the job
  /// machine_of(r) for every rank r (known after construction; O(1)).
  [[nodiscard]] virtual int machine_of(int rank) const noexcept = 0;

  /// Collective: every rank contributes `mine`; returns all contributions indexed by rank.
  /// Throws bootstrap_error when a peer died, the timeout passed or the launcher went away.
  virtual std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) = 0;
  /// Collective: returns when every rank has entered it. Throws like allgather.
  virtual void barrier() = 0;
  /// Tells the launcher (or PMIx) that this rank is failing and why, so that the others stop
  /// promptly; best effort, never throws. The caller still exits (non-zero) by itself.
  virtual void abort(const std::string& why) noexcept = 0;

  /// What watch_peers() calls when the launcher reports that `rank` left the job before it
  /// finalized; `how` says who saw it and how it left, e.g. "seriema-run: exited with status 0
  /// before finalize".
  using peer_left_handler = std::function<void(int rank, const std::string& how)>;

  /// Tells the launcher that this rank's runtime is up: from now on, this process leaving the
  /// job (any exit status, or a signal) before mark_finalized() is a failure of the job, which
  /// the launcher reports and announces to the other ranks. The runtime calls it; best effort,
  /// never throws. seriema-run acts on it; PMIx launchers already treat a process that exits
  /// without PMIx_Finalize as failed.
  virtual void mark_running() noexcept {}
  /// Tells the launcher that this rank's runtime has finalized: its exit is now judged by its
  /// status alone. The runtime calls it at the end of finalize(); best effort, never throws.
  virtual void mark_finalized() noexcept {}
  /// From now on calls `handler` (on a thread of the bootstrap) once for each other rank the
  /// launcher reports gone before it finalized: seriema-run's notices, or under PMIx the
  /// server's process table. Reports that came before are delivered at once, on the calling
  /// thread. An empty handler stops the calls; it returns only after a call in progress ended,
  /// so what the handler refers to may then be destroyed. The handler must not call
  /// watch_peers(). Without a launcher (single process) nothing is ever reported.
  virtual void watch_peers(peer_left_handler handler) { (void)handler; }
};

}  // namespace seriema::fabric

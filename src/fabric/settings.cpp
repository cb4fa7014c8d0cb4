// The fabric layer's SERIEMA_* settings (bootstrap, placement, threads, timeouts, seriema-run).
#include <fmt/format.h>

#include <seriema/fabric/detail/settings.hpp>
#include <seriema/fabric/runtime.hpp>

namespace seriema::fabric::detail {
namespace {

constexpr config::setting table[] = {
    // fabric: bootstrap and placement
    {"SERIEMA_BOOTSTRAP_TIMEOUT", "30s",
     "how long a bootstrap collective waits for the slowest rank (e.g. 30s, 500ms, 2m)"},
    {"SERIEMA_THREADS", "1", "worker threads per process (the T of MxPxT)"},
    {"SERIEMA_HYPERTHREADS", "avoid",
     "avoid: put threads on hyperthread siblings only after every core has one; use: fill PUs"},
    {"SERIEMA_PROCESS_ZONES", "auto",
     "NUMA zone of each process on a machine: auto (spread evenly) or a comma list, e.g. 0,1"},
    {"SERIEMA_NET_DEVICES", "auto",
     "network devices each process restricts UCX to: auto (those nearest its NUMA zone, unless "
     "UCX_NET_DEVICES is set), none (UCX chooses), or a comma list of UCX names, e.g. mlx5_0:1"},
    {"SERIEMA_SERVICE_THREADS", "0",
     "service threads per process: 0 (worker threads take the service role) or 1"},
    {"SERIEMA_HELPER_THREADS", "1",
     "helper threads per process: they serve the calls of threads inside a helped_section and "
     "finish their queued (retry_async) calls, 0..64"},
    {"SERIEMA_ATTACH_SLOTS", "4",
     "contexts per process that threads outside runtime::run (a pool, main, short-lived "
     "threads) can attach to with runtime::attach(), 0..1024; the same on every rank"},
    {"SERIEMA_SEND_LIMIT", "1M", "largest closure + buffer of one send-based call"},
    {"SERIEMA_FUNCTION_IDS", "hash",
     "how remote functions are named on the wire: hash (of the type's name) or address (the "
     "code's offset in its binary, as the paper does; every process must run the same binary, "
     "checked at start)"},
    {"SERIEMA_REPLY_CELLS", "256",
     "reply cells per thread, 0..65536: call_returns of up to 56-byte values a thread may have "
     "outstanding whose callee on the same machine writes the value straight into the caller's "
     "memory (beyond that, and with 0, replies travel as messages)"},
    {"SERIEMA_TIMEOUT", "0",
     "default deadline of every wait that is given none (wait_for, synchronizer waits, retry "
     "calls, remote allocation), e.g. 30s; 0: none (waits end on peer failure, their own "
     "deadline or success)"},
    {"SERIEMA_COUNTERS", "",
     "file each process writes its counters to (JSON) when run() ends; {rank} in it becomes the "
     "process's rank, and is required when the job has more than one process"},
    {"SERIEMA_BIND", "yes", "yes: bind processes to zones and pin threads to PUs; none: do not"},
    // set by seriema-run for the processes it starts (not for users)
    {"SERIEMA_RUN_SOCKET", "", "set by seriema-run: its rendezvous socket"},
    {"SERIEMA_RUN_RANK", "", "set by seriema-run: this process's rank"},
    {"SERIEMA_RUN_SIZE", "", "set by seriema-run: number of processes"},
    {"SERIEMA_RUN_MACHINE", "", "set by seriema-run: emulated machine of this process"},
    {"SERIEMA_RUN_MACHINES", "", "set by seriema-run: number of emulated machines"},
    {"SERIEMA_RUN_ISOLATED", "",
     "set by seriema-run: yes when emulated machines have their own boot ids (UCX sees hosts)"},
};

}  // namespace

std::span<const config::setting> settings() noexcept { return table; }

void validate_settings(config::problems& found) {
  // Threads, limits, placement, and the transfer layer's UCX and memory settings (a problem
  // the transfer layer reports too is listed once).
  found.check([] { (void)runtime_options::from_environment(); });
  // Read where the bootstrap and the function registry start; the same parsers and rules.
  found.check([] {
    if (config::get_duration("SERIEMA_BOOTSTRAP_TIMEOUT").count() <= 0) {
      throw config_error(fmt::format(
          "SERIEMA_BOOTSTRAP_TIMEOUT={}: a bootstrap collective needs a positive timeout; use "
          "e.g. 30s",
          config::raw("SERIEMA_BOOTSTRAP_TIMEOUT").value_or("")));
    }
  });
  found.check([] {
    static constexpr std::string_view modes[] = {"hash", "address"};
    (void)config::get_choice("SERIEMA_FUNCTION_IDS", modes);
  });
  // SERIEMA_RUN_* are seriema-run's to the processes it starts; the bootstrap checks them.
}

}  // namespace seriema::fabric::detail

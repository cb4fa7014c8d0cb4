// seriema-run's process group: forks and execs the ranks (each in its own emulated machine with
// --machines), pumps their output (--tag-output), reaps them, forwards the launcher's signals and
// stops them (SIGTERM, then SIGKILL after the grace period). It knows nothing of the rendezvous:
// the job (main.cpp) tells it which ranks get the grace period and when to stop the rest.
// Thread-safety: one thread (the job's event loop); the children only between fork and exec.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../machine_isolation.hpp"
#include "options.hpp"

namespace seriema::tools::seriema_run {

class process_group {
 public:
  // Prepares the emulated machines (--machines > 1), saying once on stderr when this host cannot
  // isolate them. Starts nothing.
  explicit process_group(run_options options);
  ~process_group();  // closes the pipes and the signalfd; the children die with the launcher
  process_group(const process_group&) = delete;
  process_group& operator=(const process_group&) = delete;

  // Blocks the signals the launcher handles (read from a signalfd from now on), then starts every
  // rank: `program_path` with the command's arguments, told `socket_path` and its rank, size and
  // bootstrap timeout. Returns false when one could not be started; the started ones are then
  // killed and exit_code() is 1.
  bool start(const std::string& program_path, const std::string& socket_path);

  // The signalfd and the open output pipes, to poll for reading.
  void add_poll_fds(std::vector<pollfd>& fds) const;
  // Writes out what the ranks wrote (tagged "[rank] "); closes a pipe at its end of file.
  void pump_output();
  // SIGINT/SIGTERM/SIGHUP/SIGQUIT to the launcher: forwarded to the ranks, SIGKILL after the
  // grace period; the same signal again kills them now.
  void read_signals();
  // The ranks that exited since the last call (their exit is not judged yet).
  std::vector<int> reap();
  // Says on stderr how rank `r` ended unless it exited with 0, and records its status as the
  // job's unless our signal killed it. Returns true when it failed by itself.
  bool judge_exit(int r);
  // How rank `r` ended ("exited with status 3", "killed by signal 9 (SIGKILL)"); once reaped.
  [[nodiscard]] std::string how_it_ended(int r) const;
  // Whether a signal of ours (termination, the launcher's signals, the time limit) ended it.
  [[nodiscard]] bool stopped_by_us(int r) const;
  // Records `code` as the job's exit status unless one was recorded before (the first cause).
  void record_failure(int code) { record_exit_code(code); }
  // Rank `r` was told that the job failed (or aborted it): it gets the grace period to report and
  // exit by itself before start_termination signals it.
  void give_grace(int r);
  // --on-failure=kill: ranks with grace get SIGTERM after it, the others SIGTERM now; SIGKILL
  // follows after the grace period. Once; later calls do nothing.
  void start_termination();
  // --time-limit passed (`limit` as given): names the ranks still running (with their pids, and
  // which are stopped), SIGTERMs them now and SIGKILLs them after the grace period; the job's
  // status is exit_time_limit unless a failure came first.
  void stop_at_time_limit(const std::string& limit);
  [[nodiscard]] std::optional<clock_type::time_point> next_timer() const;
  void check_timers(clock_type::time_point now);  // the SIGTERMs and SIGKILLs that are due
  [[nodiscard]] bool any_running() const;
  // After the last rank exited: writes out what is left in the pipes without waiting for
  // grandchildren that still hold them.
  void drain_output();
  // The status the job exits with, when something decided one (a failed rank, a signal).
  [[nodiscard]] std::optional<int> exit_code() const { return exit_code_; }
  [[nodiscard]] std::string who(int r) const;  // "rank r (pid p)"

 private:
  struct rank_process {
    pid_t pid = -1;
    bool own_group = false;  // leads its own process group: signals go to the whole group
    bool running = false;
    int wait_status = 0;
    bool signaled_by_us = false;  // its death is a consequence, not a cause
    bool has_grace = false;       // see give_grace
    std::optional<clock_type::time_point> term_at;
    std::optional<clock_type::time_point> kill_at;
  };

  // Reassembles a child's stdout or stderr into lines and writes them prefixed with "[rank] ".
  struct output_pipe {
    int fd = -1;
    int target = 1;  // 1 = stdout, 2 = stderr
    int rank = 0;
    std::string partial;
    void emit(std::string_view line) const;
    bool pump();  // reads what is available; returns false at end of file
  };

  struct launch_plan;  // what every rank is started with (process_group.cpp)

  void block_signals();
  bool start_rank(int r, const launch_plan& plan);
  [[noreturn]] void exec_rank(int r, bool own_group, const launch_plan& plan, int out_fd,
                              int err_fd);
  void enter_emulated_machine(int machine) const;
  bool fail_start();
  void on_launcher_signal(int sig);
  void send_signal(rank_process& rp, int sig);
  // SIGTERM, then SIGCONT so that a stopped rank acts on it; SIGKILL follows after the grace.
  void terminate(rank_process& rp, clock_type::time_point now);
  [[nodiscard]] int running_count() const;
  void record_exit_code(int code);

  run_options options_;
  std::optional<emulated_machines> machines_;  // with --machines > 1
  std::vector<rank_process> ranks_;
  std::vector<output_pipe> pipes_;
  int signal_fd_ = -1;
  sigset_t original_mask_{};  // restored in the children
  bool terminating_ = false;
  int launcher_signal_ = 0;
  std::optional<int> exit_code_;
};

}  // namespace seriema::tools::seriema_run

// seriema-run's process group (process_group.hpp): starting the ranks, their output, reaping,
// the launcher's signals and the termination timers.
#include "process_group.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <seriema/base/error.hpp>
#include <seriema/fabric/detail/launcher_protocol.hpp>
#include <utility>

namespace seriema::tools::seriema_run {

namespace {

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* abbrev = sigabbrev_np(sig);
    return fmt::format("killed by signal {} (SIG{})", sig, abbrev != nullptr ? abbrev : "?");
  }
  return fmt::format("stopped with wait status {}", status);
}

// The state letter of process `pid` in /proc/<pid>/stat ('T': stopped), or '?'.
char process_state(pid_t pid) {
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() ? '?' : text[paren + 2];
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

// ---- output ----

void process_group::output_pipe::emit(std::string_view line) const {
  std::string out = fmt::format("[{}] {}\n", rank, line);
  std::string_view rest = out;
  while (!rest.empty()) {
    ssize_t n = ::write(target, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // our own output is gone; nothing better to do
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
}

bool process_group::output_pipe::pump() {
  char buffer[1 << 14];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) {
      if (!partial.empty()) emit(partial);
      partial.clear();
      return false;
    }
    partial.append(buffer, static_cast<std::size_t>(n));
    std::size_t start = 0;
    for (std::size_t nl; (nl = partial.find('\n', start)) != std::string::npos; start = nl + 1) {
      emit(std::string_view(partial).substr(start, nl - start));
    }
    partial.erase(0, start);
  }
}

void process_group::add_poll_fds(std::vector<pollfd>& fds) const {
  fds.push_back({signal_fd_, POLLIN, 0});
  for (const auto& p : pipes_) {
    if (p.fd >= 0) fds.push_back({p.fd, POLLIN, 0});
  }
}

void process_group::pump_output() {
  for (auto& p : pipes_) {
    if (p.fd >= 0 && !p.pump()) {
      ::close(p.fd);
      p.fd = -1;
    }
  }
  std::erase_if(pipes_, [](const output_pipe& p) { return p.fd < 0; });
}

void process_group::drain_output() {
  for (auto& p : pipes_) {
    while (p.fd >= 0 && p.pump()) {
      // Drain only what the dead children left; a grandchild holding the pipe is not waited for.
      pollfd q{p.fd, POLLIN, 0};
      if (::poll(&q, 1, 0) <= 0) break;
    }
  }
}

// ---- starting the ranks ----

struct process_group::launch_plan {
  std::string program_path;
  std::string socket_path;
  std::string size_text;
  std::string timeout_text;
  std::vector<char*> argv;  // into options_.command, null-terminated
  pid_t launcher_pid;
};

process_group::process_group(run_options options)
    : options_(std::move(options)), ranks_(static_cast<std::size_t>(options_.np)) {
  // With several emulated machines, give each its own boot id so UCX connects them like
  // separate hosts (no shm between them). Said once when this host does not allow it.
  if (options_.machines > 1) {
    machines_.emplace(options_.machines);
    if (!machines_->isolated()) {
      fmt::print(stderr,
                 "seriema-run: --machines {}: {}; UCX may still use shared memory between the "
                 "emulated machines (seriema's own inter-machine path is used regardless)\n",
                 options_.machines, machines_->reason());
    }
  }
}

process_group::~process_group() {
  for (auto& p : pipes_) ::close(p.fd);
  if (signal_fd_ >= 0) ::close(signal_fd_);
}

bool process_group::start(const std::string& program_path, const std::string& socket_path) {
  block_signals();
  launch_plan plan{program_path,
                   socket_path,
                   std::to_string(options_.np),
                   fmt::format("{}ms", options_.timeout.count()),
                   {},
                   ::getpid()};
  for (auto& arg : options_.command) plan.argv.push_back(arg.data());
  plan.argv.push_back(nullptr);
  for (int r = 0; r < options_.np; ++r) {
    if (!start_rank(r, plan)) return fail_start();
  }
  return true;
}

void process_group::block_signals() {
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&mask, sig);
  if (::sigprocmask(SIG_BLOCK, &mask, &original_mask_) != 0) {
    throw seriema::error(fmt::format("sigprocmask: {}", std::strerror(errno)));
  }
  signal_fd_ = ::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (signal_fd_ < 0) throw seriema::error(fmt::format("signalfd: {}", std::strerror(errno)));
  std::signal(SIGPIPE, SIG_IGN);  // a closed stdout must not kill the launcher; reset in children
}

// Returns false, having said why, when the pipes or the fork failed.
bool process_group::start_rank(int r, const launch_plan& plan) {
  int out_pipe[2] = {-1, -1};
  int err_pipe[2] = {-1, -1};
  if (options_.tag_output &&
      (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0)) {
    fmt::print(stderr, "seriema-run: cannot create output pipes for rank {}: {}\n", r,
               std::strerror(errno));
    return false;
  }
  const bool own_group = r > 0 || ::isatty(0) == 0;
  pid_t pid = ::fork();
  if (pid < 0) {
    fmt::print(stderr, "seriema-run: cannot start rank {}: fork: {}\n", r, std::strerror(errno));
    return false;
  }
  if (pid == 0) exec_rank(r, own_group, plan, out_pipe[1], err_pipe[1]);
  if (own_group) ::setpgid(pid, pid);  // also here: no race with the signals below
  auto& rp = ranks_[static_cast<std::size_t>(r)];
  rp.pid = pid;
  rp.own_group = own_group;
  rp.running = true;
  if (options_.tag_output) {
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    for (auto [fd, target] : {std::pair{out_pipe[0], 1}, std::pair{err_pipe[0], 2}}) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
      pipes_.push_back(output_pipe{fd, target, r, {}});
    }
  }
  return true;
}

// Child: never returns. Dies with the launcher so that no rank outlives a killed job.
void process_group::exec_rank(int r, bool own_group, const launch_plan& plan, int out_fd,
                              int err_fd) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // Own process group, so that signals reach whatever the rank started too (a wrapper
  // script, timeout, valgrind). Rank 0 reading a terminal stays in ours: a background
  // group reading the terminal would be stopped (SIGTTIN).
  if (own_group) ::setpgid(0, 0);
  if (::getppid() != plan.launcher_pid) ::_exit(1);
  ::setenv("SERIEMA_RUN_SOCKET", plan.socket_path.c_str(), 1);
  ::setenv("SERIEMA_RUN_RANK", std::to_string(r).c_str(), 1);
  ::setenv("SERIEMA_RUN_SIZE", plan.size_text.c_str(), 1);
  ::setenv("SERIEMA_BOOTSTRAP_TIMEOUT", plan.timeout_text.c_str(), 1);
  if (r > 0) {
    int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, 0);
  }
  if (options_.tag_output) {
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
  }
  enter_emulated_machine(
      fabric::launcher_protocol::machine_of_rank(r, options_.np, options_.machines));
  std::signal(SIGPIPE, SIG_DFL);
  ::sigprocmask(SIG_SETMASK, &original_mask_, nullptr);
  ::execv(plan.program_path.c_str(), plan.argv.data());
  int err = errno;
  std::string message = fmt::format("seriema-run: cannot execute {}: {}\n", options_.command[0],
                                    std::strerror(err));
  (void)!::write(2, message.data(), message.size());
  ::_exit(exit_cannot_execute);
}

// Child, between fork and exec: makes it a process of emulated machine `machine`.
void process_group::enter_emulated_machine(int machine) const {
  ::setenv("SERIEMA_RUN_MACHINE", std::to_string(machine).c_str(), 1);
  ::setenv("SERIEMA_RUN_MACHINES", std::to_string(options_.machines).c_str(), 1);
  ::setenv("SERIEMA_RUN_ISOLATED", machines_ && machines_->isolated() ? "yes" : "no", 1);
  if (machines_ && !machines_->enter(machine)) {
    std::string message = fmt::format(
        "seriema-run: cannot give emulated machine {} its own boot id: {}\n", machine,
        std::strerror(errno));
    (void)!::write(2, message.data(), message.size());
    ::_exit(126);
  }
}

bool process_group::fail_start() {
  record_exit_code(1);
  for (auto& rp : ranks_) {
    if (rp.running) {
      ::kill(rp.own_group ? -rp.pid : rp.pid, SIGKILL);
      ::waitpid(rp.pid, nullptr, 0);
      rp.running = false;
    }
  }
  return false;
}

// ---- exits ----

std::vector<int> process_group::reap() {
  std::vector<int> reaped;
  for (;;) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) break;
    for (int r = 0; r < options_.np; ++r) {
      auto& rp = ranks_[static_cast<std::size_t>(r)];
      if (rp.pid == pid && rp.running) {
        rp.running = false;
        rp.wait_status = status;
        reaped.push_back(r);
      }
    }
  }
  return reaped;
}

bool process_group::judge_exit(int r) {
  const auto& rp = ranks_[static_cast<std::size_t>(r)];
  bool clean = WIFEXITED(rp.wait_status) && WEXITSTATUS(rp.wait_status) == 0;
  if (clean) return false;
  fmt::print(stderr, "seriema-run: {} {}{}\n", who(r), describe_wait_status(rp.wait_status),
             rp.signaled_by_us ? " (sent by seriema-run)" : "");
  if (rp.signaled_by_us) return false;
  record_exit_code(exit_code_of(rp.wait_status));
  return true;
}

std::string process_group::how_it_ended(int r) const {
  return describe_wait_status(ranks_[static_cast<std::size_t>(r)].wait_status);
}

bool process_group::stopped_by_us(int r) const {
  return ranks_[static_cast<std::size_t>(r)].signaled_by_us;
}

std::string process_group::who(int r) const {
  return fmt::format("rank {} (pid {})", r, ranks_[static_cast<std::size_t>(r)].pid);
}

bool process_group::any_running() const {
  return std::any_of(ranks_.begin(), ranks_.end(),
                     [](const rank_process& rp) { return rp.running; });
}

int process_group::running_count() const {
  return static_cast<int>(std::count_if(ranks_.begin(), ranks_.end(),
                                        [](const rank_process& rp) { return rp.running; }));
}

void process_group::record_exit_code(int code) {
  if (!exit_code_) exit_code_ = code;
}

// ---- signals and termination ----

void process_group::read_signals() {
  signalfd_siginfo info{};
  while (::read(signal_fd_, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
    int sig = static_cast<int>(info.ssi_signo);
    if (sig != SIGCHLD) on_launcher_signal(sig);
  }
}

void process_group::on_launcher_signal(int sig) {
  record_exit_code(128 + sig);
  bool again = launcher_signal_ != 0;
  launcher_signal_ = sig;
  if (again) {
    fmt::print(stderr, "seriema-run: got SIG{} again; killing {} ranks\n", sigabbrev_np(sig),
               running_count());
    for (auto& rp : ranks_) send_signal(rp, SIGKILL);
    return;
  }
  fmt::print(stderr, "seriema-run: got SIG{}; forwarding it to {} ranks\n", sigabbrev_np(sig),
             running_count());
  terminating_ = true;
  for (auto& rp : ranks_) {
    if (!rp.running) continue;
    send_signal(rp, sig);
    rp.term_at.reset();
    rp.kill_at = clock_type::now() + options_.grace;
  }
}

void process_group::send_signal(rank_process& rp, int sig) {
  if (!rp.running) return;
  rp.signaled_by_us = true;
  ::kill(rp.own_group ? -rp.pid : rp.pid, sig);
}

void process_group::give_grace(int r) { ranks_[static_cast<std::size_t>(r)].has_grace = true; }

void process_group::start_termination() {
  if (terminating_) return;
  terminating_ = true;
  int count = running_count();
  if (count == 0) return;
  fmt::print(stderr, "seriema-run: stopping the {} remaining rank{} (--on-failure=kill)\n", count,
             count == 1 ? "" : "s");
  auto now = clock_type::now();
  for (auto& rp : ranks_) {
    if (!rp.running) continue;
    if (rp.has_grace) {
      rp.term_at = now + options_.grace;
    } else {
      terminate(rp, now);
    }
  }
}

void process_group::terminate(rank_process& rp, clock_type::time_point now) {
  rp.term_at.reset();
  send_signal(rp, SIGTERM);
  send_signal(rp, SIGCONT);
  if (!rp.kill_at) rp.kill_at = now + options_.grace;
}

void process_group::stop_at_time_limit(const std::string& limit) {
  const int count = running_count();
  if (count == 0) return;
  std::string running;
  constexpr int shown = 16;
  int listed = 0;
  for (int r = 0; r < options_.np; ++r) {
    const auto& rp = ranks_[static_cast<std::size_t>(r)];
    if (!rp.running) continue;
    if (listed++ == shown) {
      running += fmt::format(" and {} more", count - shown);
      break;
    }
    running += fmt::format("{}rank {} (pid {}{})", listed == 1 ? "" : ", ", r, rp.pid,
                           process_state(rp.pid) == 'T' ? ", stopped" : "");
  }
  fmt::print(stderr,
             "seriema-run: the time limit of {} (--time-limit) passed with {} rank{} still "
             "running: {}; stopping {} (SIGTERM, SIGKILL after {})\n",
             limit, count, count == 1 ? "" : "s", running, count == 1 ? "it" : "them",
             options_.grace.count() % 1000 == 0
                 ? fmt::format("{}s", options_.grace.count() / 1000)
                 : fmt::format("{}ms", options_.grace.count()));
  record_exit_code(exit_time_limit);
  terminating_ = true;
  const auto now = clock_type::now();
  for (auto& rp : ranks_) {
    if (rp.running && !rp.signaled_by_us) terminate(rp, now);
  }
}

std::optional<clock_type::time_point> process_group::next_timer() const {
  std::optional<clock_type::time_point> next;
  auto consider = [&](const std::optional<clock_type::time_point>& t) {
    if (t && (!next || *t < *next)) next = t;
  };
  for (const auto& rp : ranks_) {
    if (!rp.running) continue;
    consider(rp.term_at);
    consider(rp.kill_at);
  }
  return next;
}

void process_group::check_timers(clock_type::time_point now) {
  for (auto& rp : ranks_) {
    if (!rp.running) continue;
    if (rp.term_at && now >= *rp.term_at) terminate(rp, now);
    if (rp.kill_at && now >= *rp.kill_at) {
      rp.kill_at.reset();
      send_signal(rp, SIGKILL);
    }
  }
}

}  // namespace seriema::tools::seriema_run

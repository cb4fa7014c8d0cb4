// seriema-run: starts N ranks of a program on this host (optionally as M emulated machines),
// serves their bootstrap rendezvous over a private Unix socket, and turns the failure of any rank
// into a prompt, named failure of the whole job instead of a hang.
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <seriema/base/error.hpp>
#include <seriema/base/settings.hpp>
#include <seriema/fabric/detail/launcher_protocol.hpp>
#include <string>
#include <vector>

#include "machine_isolation.hpp"

namespace {

// Prepared by the launcher before it forks (null when --machines is 1).
const seriema::tools::emulated_machines* emulated = nullptr;

// Called in each child between fork and exec: makes it a process of emulated machine `machine`
// of `machines`.
void enter_emulated_machine(int machine, int machines) {
  ::setenv("SERIEMA_RUN_MACHINE", std::to_string(machine).c_str(), 1);
  ::setenv("SERIEMA_RUN_MACHINES", std::to_string(machines).c_str(), 1);
  ::setenv("SERIEMA_RUN_ISOLATED", emulated != nullptr && emulated->isolated() ? "yes" : "no", 1);
  if (emulated != nullptr && !emulated->enter(machine)) {
    std::string message = fmt::format(
        "seriema-run: cannot give emulated machine {} its own boot id: {}\n", machine,
        std::strerror(errno));
    (void)!::write(2, message.data(), message.size());
    ::_exit(126);
  }
}

namespace proto = seriema::fabric::launcher_protocol;
using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int exit_usage = 2;
constexpr int exit_cannot_execute = 127;

struct run_options {
  int np = 0;
  int machines = 1;
  milliseconds timeout{30'000};
  milliseconds grace{3'000};
  bool kill_on_failure = true;
  bool tag_output = false;
  std::vector<std::string> command;
};

std::string format_duration(milliseconds d) {
  if (d.count() % 1000 == 0) return fmt::format("{}s", d.count() / 1000);
  return fmt::format("{}ms", d.count());
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* abbrev = sigabbrev_np(sig);
    return fmt::format("killed by signal {} (SIG{})", sig, abbrev != nullptr ? abbrev : "?");
  }
  return fmt::format("stopped with wait status {}", status);
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// Finds `program` like execvp would; returns the path to exec or throws with the errno text.
std::string resolve_program(const std::string& program) {
  auto check = [](const std::string& path) -> int {
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0) return errno;
    if (S_ISDIR(st.st_mode)) return EISDIR;
    if (::access(path.c_str(), X_OK) != 0) return errno;
    return 0;
  };
  if (program.empty()) return program;
  if (program.find('/') != std::string::npos) {
    if (int err = check(program); err != 0) throw std::system_error(err, std::generic_category());
    return program;
  }
  const char* path_env = std::getenv("PATH");
  std::string path = path_env != nullptr ? path_env : "/usr/local/bin:/usr/bin:/bin";
  int first_error = ENOENT;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + program;
    int err = check(candidate);
    if (err == 0) return candidate;
    if (err != ENOENT && err != ENOTDIR && first_error == ENOENT) first_error = err;
    start = end + 1;
  }
  throw std::system_error(first_error, std::generic_category());
}

// The private directory holding the rendezvous socket; removed when the launcher exits.
class socket_directory {
 public:
  socket_directory() {
    std::vector<std::string> bases;
    if (const char* tmp = std::getenv("TMPDIR"); tmp != nullptr && *tmp != '\0') {
      bases.emplace_back(tmp);
    }
    bases.emplace_back("/tmp");
    std::string last_error;
    for (const auto& base : bases) {
      std::string pattern = base + "/seriema-run.XXXXXX";
      // sun_path holds 108 bytes; leave room for "/rendezvous".
      if (pattern.size() + 12 >= sizeof(sockaddr_un{}.sun_path)) {
        last_error = fmt::format("{}: path too long for a Unix socket", base);
        continue;
      }
      std::vector<char> buffer(pattern.begin(), pattern.end());
      buffer.push_back('\0');
      if (::mkdtemp(buffer.data()) == nullptr) {
        last_error = fmt::format("{}: {}", pattern, std::strerror(errno));
        continue;
      }
      dir_ = buffer.data();
      socket_path_ = dir_ + "/rendezvous";
      return;
    }
    throw seriema::error(fmt::format(
        "cannot create a private directory for the rendezvous socket ({}); set TMPDIR to a "
        "short, writable directory",
        last_error));
  }
  ~socket_directory() {
    ::unlink(socket_path_.c_str());
    ::rmdir(dir_.c_str());
  }
  socket_directory(const socket_directory&) = delete;
  socket_directory& operator=(const socket_directory&) = delete;

  const std::string& socket_path() const noexcept { return socket_path_; }

 private:
  std::string dir_;
  std::string socket_path_;
};

// Reassembles a child's stdout or stderr into lines and writes them prefixed with "[rank] ".
struct output_pipe {
  int fd = -1;
  int target = 1;  // 1 = stdout, 2 = stderr
  int rank = 0;
  std::string partial;

  void emit(std::string_view line) const {
    std::string out = fmt::format("[{}] {}\n", rank, line);
    std::string_view rest = out;
    while (!rest.empty()) {
      ssize_t n = ::write(target, rest.data(), rest.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // our own output is gone; nothing better to do
      rest.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  // Reads what is available; returns false at end of file.
  bool pump() {
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
};

struct rank_state {
  pid_t pid = -1;
  bool own_group = false;  // leads its own process group: signals go to the whole group
  bool running = false;
  // Reaped, and the sockets read since: its death is judged (on_rank_exit). Until then a
  // collective does not count it as missing, so an abort or contribution it sent just before
  // exiting is read first, whichever connection the launcher happens to read first.
  bool exit_judged = false;
  int wait_status = 0;
  bool signaled_by_us = false;  // its death is a consequence, not a cause
  bool ever_connected = false;
  bool aborted = false;
  bool notified = false;  // was told that a collective failed: gets the grace period to report
  int joined = 0;         // collectives this rank has contributed to (the current one included)
  std::vector<std::byte> blob;
  std::uint64_t reply_to = 0;  // connection waiting for the current collective's answer; 0: none
  std::optional<clock_type::time_point> term_at;
  std::optional<clock_type::time_point> kill_at;
};

struct connection {
  int fd = -1;
  int rank = -1;  // -1 until its hello
  proto::frame_reader reader;
  std::vector<std::byte> out;
  std::size_t out_done = 0;
  bool closed = false;
};

class launcher {
 public:
  explicit launcher(run_options options) : options_(std::move(options)) {
    ranks_.resize(static_cast<std::size_t>(options_.np));
  }

  ~launcher() {
    for (auto& [id, c] : connections_) ::close(c.fd);
    for (auto& p : pipes_) ::close(p.fd);
    if (listen_fd_ >= 0) ::close(listen_fd_);
    if (signal_fd_ >= 0) ::close(signal_fd_);
  }

  launcher(const launcher&) = delete;
  launcher& operator=(const launcher&) = delete;

  int run(const std::string& program_path) {
    socket_directory directory;
    // With several emulated machines, give each its own boot id so UCX connects them like
    // separate hosts (no shm between them). Said once when this host does not allow it.
    std::optional<seriema::tools::emulated_machines> machines;
    if (options_.machines > 1) {
      machines.emplace(options_.machines);
      emulated = &*machines;
      if (!machines->isolated()) {
        fmt::print(stderr,
                   "seriema-run: --machines {}: {}; UCX may still use shared memory between the "
                   "emulated machines (seriema's own inter-machine path is used regardless)\n",
                   options_.machines, machines->reason());
      }
    }
    listen_on(directory.socket_path());
    block_signals();
    if (!start_ranks(program_path, directory.socket_path())) return finish();
    while (any_running()) {
      wait_for_events();
      auto reaped = reap_children();
      accept_connections();
      service_connections();
      // Deaths are judged after reading every socket: a rank that contributed and then died
      // has its contribution counted, not reported as missing.
      for (int r : reaped) on_rank_exit(r);
      check_timers();
    }
    for (auto& p : pipes_) {
      while (p.fd >= 0 && p.pump()) {
        // Drain only what the dead children left; a grandchild holding the pipe is not waited for.
        pollfd q{p.fd, POLLIN, 0};
        if (::poll(&q, 1, 0) <= 0) break;
      }
    }
    return finish();
  }

 private:
  void listen_on(const std::string& path) {
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) throw seriema::error(fmt::format("socket: {}", std::strerror(errno)));
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
    if (::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
        ::listen(listen_fd_, SOMAXCONN) != 0) {
      throw seriema::error(
          fmt::format("cannot listen on {}: {}; set TMPDIR to a writable directory", path,
                      std::strerror(errno)));
    }
  }

  void block_signals() {
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

  // Returns false when a fork failed (the started ranks are then being killed).
  bool start_ranks(const std::string& program_path, const std::string& socket_path) {
    std::vector<char*> argv;
    for (auto& arg : options_.command) argv.push_back(arg.data());
    argv.push_back(nullptr);
    std::string size_text = std::to_string(options_.np);
    std::string timeout_text = fmt::format("{}ms", options_.timeout.count());
    pid_t launcher_pid = ::getpid();

    for (int r = 0; r < options_.np; ++r) {
      int out_pipe[2] = {-1, -1};
      int err_pipe[2] = {-1, -1};
      if (options_.tag_output &&
          (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0)) {
        fmt::print(stderr, "seriema-run: cannot create output pipes for rank {}: {}\n", r,
                   std::strerror(errno));
        return fail_start();
      }
      int machine = proto::machine_of_rank(r, options_.np, options_.machines);
      std::string rank_text = std::to_string(r);
      const bool own_group = r > 0 || ::isatty(0) == 0;
      pid_t pid = ::fork();
      if (pid < 0) {
        fmt::print(stderr, "seriema-run: cannot start rank {}: fork: {}\n", r,
                   std::strerror(errno));
        return fail_start();
      }
      if (pid == 0) {
        // Child: never returns. Dies with the launcher so that no rank outlives a killed job.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        // Own process group, so that signals reach whatever the rank started too (a wrapper
        // script, timeout, valgrind). Rank 0 reading a terminal stays in ours: a background
        // group reading the terminal would be stopped (SIGTTIN).
        if (own_group) ::setpgid(0, 0);
        if (::getppid() != launcher_pid) ::_exit(1);
        ::setenv("SERIEMA_RUN_SOCKET", socket_path.c_str(), 1);
        ::setenv("SERIEMA_RUN_RANK", rank_text.c_str(), 1);
        ::setenv("SERIEMA_RUN_SIZE", size_text.c_str(), 1);
        ::setenv("SERIEMA_BOOTSTRAP_TIMEOUT", timeout_text.c_str(), 1);
        if (r > 0) {
          int null_fd = ::open("/dev/null", O_RDONLY);
          if (null_fd >= 0) ::dup2(null_fd, 0);
        }
        if (options_.tag_output) {
          ::dup2(out_pipe[1], 1);
          ::dup2(err_pipe[1], 2);
        }
        enter_emulated_machine(machine, options_.machines);
        std::signal(SIGPIPE, SIG_DFL);
        ::sigprocmask(SIG_SETMASK, &original_mask_, nullptr);
        ::execv(program_path.c_str(), argv.data());
        int err = errno;
        std::string message = fmt::format("seriema-run: cannot execute {}: {}\n",
                                          options_.command[0], std::strerror(err));
        (void)!::write(2, message.data(), message.size());
        ::_exit(exit_cannot_execute);
      }
      if (own_group) ::setpgid(pid, pid);  // also here: no race with the signals below
      auto& rs = ranks_[static_cast<std::size_t>(r)];
      rs.pid = pid;
      rs.own_group = own_group;
      rs.running = true;
      if (options_.tag_output) {
        ::close(out_pipe[1]);
        ::close(err_pipe[1]);
        for (auto [fd, target] : {std::pair{out_pipe[0], 1}, std::pair{err_pipe[0], 2}}) {
          ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
          pipes_.push_back(output_pipe{fd, target, r, {}});
        }
      }
    }
    return true;
  }

  bool fail_start() {
    record_exit_code(1);
    for (auto& rs : ranks_) {
      if (rs.running) {
        ::kill(rs.own_group ? -rs.pid : rs.pid, SIGKILL);
        ::waitpid(rs.pid, nullptr, 0);
        rs.running = false;
      }
    }
    return false;
  }

  bool any_running() const {
    return std::any_of(ranks_.begin(), ranks_.end(),
                       [](const rank_state& rs) { return rs.running; });
  }

  int running_count() const {
    return static_cast<int>(std::count_if(ranks_.begin(), ranks_.end(),
                                          [](const rank_state& rs) { return rs.running; }));
  }

  std::string who(int r) const {
    return fmt::format("rank {} (pid {})", r, ranks_[static_cast<std::size_t>(r)].pid);
  }

  void wait_for_events() {
    std::vector<pollfd> fds;
    fds.push_back({signal_fd_, POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (auto& [id, c] : connections_) {
      short events = POLLIN;
      if (c.out_done < c.out.size()) events |= POLLOUT;
      fds.push_back({c.fd, events, 0});
    }
    for (auto& p : pipes_) {
      if (p.fd >= 0) fds.push_back({p.fd, POLLIN, 0});
    }
    int timeout_ms = -1;
    if (auto next = next_timer()) {
      auto left = std::chrono::ceil<milliseconds>(*next - clock_type::now()).count();
      timeout_ms = static_cast<int>(std::clamp<std::int64_t>(left, 0, 1 << 30));
    }
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) {
      throw seriema::error(fmt::format("poll: {}", std::strerror(errno)));
    }
    for (auto& p : pipes_) {
      if (p.fd >= 0 && !p.pump()) {
        ::close(p.fd);
        p.fd = -1;
      }
    }
    std::erase_if(pipes_, [](const output_pipe& p) { return p.fd < 0; });
    signalfd_siginfo info{};
    while (::read(signal_fd_, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
      int sig = static_cast<int>(info.ssi_signo);
      if (sig != SIGCHLD) on_launcher_signal(sig);
    }
  }

  std::optional<clock_type::time_point> next_timer() const {
    std::optional<clock_type::time_point> next = collective_deadline_;
    auto consider = [&](const std::optional<clock_type::time_point>& t) {
      if (t && (!next || *t < *next)) next = t;
    };
    for (const auto& rs : ranks_) {
      if (!rs.running) continue;
      consider(rs.term_at);
      consider(rs.kill_at);
    }
    return next;
  }

  std::vector<int> reap_children() {
    std::vector<int> reaped;
    for (;;) {
      int status = 0;
      pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid < 0 && errno == EINTR) continue;
      if (pid <= 0) break;
      for (int r = 0; r < options_.np; ++r) {
        auto& rs = ranks_[static_cast<std::size_t>(r)];
        if (rs.pid == pid && rs.running) {
          rs.running = false;
          rs.wait_status = status;
          reaped.push_back(r);
        }
      }
    }
    return reaped;
  }

  void on_rank_exit(int r) {
    auto& rs = ranks_[static_cast<std::size_t>(r)];
    rs.exit_judged = true;
    bool clean = WIFEXITED(rs.wait_status) && WEXITSTATUS(rs.wait_status) == 0;
    if (!clean) {
      fmt::print(stderr, "seriema-run: {} {}{}\n", who(r), describe_wait_status(rs.wait_status),
                 rs.signaled_by_us ? " (sent by seriema-run)" : "");
      if (!rs.signaled_by_us) record_exit_code(exit_code_of(rs.wait_status));
    }
    // A rank that is gone can join no further collective.
    check_pending_collective();
    if (!clean && !rs.signaled_by_us && options_.kill_on_failure) start_termination();
  }

  void on_launcher_signal(int sig) {
    record_exit_code(128 + sig);
    bool again = launcher_signal_ != 0;
    launcher_signal_ = sig;
    if (again) {
      fmt::print(stderr, "seriema-run: got SIG{} again; killing {} ranks\n", sigabbrev_np(sig),
                 running_count());
      for (auto& rs : ranks_) send_signal(rs, SIGKILL);
      return;
    }
    fmt::print(stderr, "seriema-run: got SIG{}; forwarding it to {} ranks\n", sigabbrev_np(sig),
               running_count());
    terminating_ = true;
    for (auto& rs : ranks_) {
      if (!rs.running) continue;
      send_signal(rs, sig);
      rs.term_at.reset();
      rs.kill_at = clock_type::now() + options_.grace;
    }
  }

  void send_signal(rank_state& rs, int sig) {
    if (!rs.running) return;
    rs.signaled_by_us = true;
    ::kill(rs.own_group ? -rs.pid : rs.pid, sig);
  }

  // --on-failure=kill: ranks that were just told of a failed collective get the grace period to
  // report it and exit by themselves; the others get SIGTERM now. SIGKILL follows after grace.
  void start_termination() {
    if (terminating_) return;
    terminating_ = true;
    int count = running_count();
    if (count == 0) return;
    fmt::print(stderr, "seriema-run: stopping the {} remaining rank{} (--on-failure=kill)\n", count,
               count == 1 ? "" : "s");
    auto now = clock_type::now();
    for (auto& rs : ranks_) {
      if (!rs.running) continue;
      if (rs.notified || rs.aborted) {
        rs.term_at = now + options_.grace;
      } else {
        send_signal(rs, SIGTERM);
        rs.kill_at = now + options_.grace;
      }
    }
  }

  void check_timers() {
    auto now = clock_type::now();
    if (collective_deadline_ && now >= *collective_deadline_) on_collective_timeout();
    for (auto& rs : ranks_) {
      if (!rs.running) continue;
      if (rs.term_at && now >= *rs.term_at) {
        rs.term_at.reset();
        send_signal(rs, SIGTERM);
        rs.kill_at = now + options_.grace;
      }
      if (rs.kill_at && now >= *rs.kill_at) {
        rs.kill_at.reset();
        send_signal(rs, SIGKILL);
      }
    }
  }

  void record_exit_code(int code) {
    if (!exit_code_) exit_code_ = code;
  }

  int finish() {
    int code = exit_code_.value_or(failed_ ? 1 : 0);
    if (code != 0 && code != exit_usage) {
      fmt::print(stderr, "seriema-run: job failed; exiting with status {}\n", code);
    }
    return code;
  }

  // ---- connections and the rendezvous ----

  void accept_connections() {
    for (;;) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;  // EAGAIN, or out of descriptors: retried on the next event
      }
      connection c;
      c.fd = fd;
      connections_.emplace(next_connection_id_++, std::move(c));
    }
  }

  void service_connections() {
    std::byte buffer[1 << 16];
    for (auto& [id, c] : connections_) {
      if (c.closed) continue;
      flush(c);
      while (!c.closed) {
        ssize_t n = ::read(c.fd, buffer, sizeof(buffer));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n <= 0) {
          c.closed = true;
          break;
        }
        c.reader.feed(std::span<const std::byte>(buffer, static_cast<std::size_t>(n)));
        try {
          while (auto f = c.reader.next()) {
            on_frame(id, c, std::move(*f));
            if (c.closed) break;
          }
        } catch (const proto::protocol_error& e) {
          reject(c, fmt::format("seriema: bootstrap failed: {}", e.what()));
        }
      }
    }
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (!it->second.closed) {
        ++it;
        continue;
      }
      for (auto& rs : ranks_) {
        if (rs.reply_to == it->first) rs.reply_to = 0;
      }
      ::close(it->second.fd);
      it = connections_.erase(it);
    }
  }

  // Tells the peer why, then drops the connection.
  void reject(connection& c, const std::string& why) {
    send(c, proto::encode_failure(why));
    c.closed = true;
  }

  void on_frame(std::uint64_t id, connection& c, proto::frame f) {
    if (c.rank < 0) {
      if (f.type != proto::message_type::hello) {
        reject(c, "seriema: bootstrap failed: the first message to seriema-run must be a hello");
        return;
      }
      auto hello = proto::decode_hello(f.payload);
      if (hello.rank >= options_.np) {
        reject(c, fmt::format("seriema: bootstrap failed: pid {} claims rank {} but this job has "
                              "{} ranks; SERIEMA_RUN_RANK must be left as seriema-run set it",
                              hello.pid, hello.rank, options_.np));
        return;
      }
      c.rank = hello.rank;
      ranks_[static_cast<std::size_t>(c.rank)].ever_connected = true;
      return;
    }
    switch (f.type) {
      case proto::message_type::contribute:
        on_contribute(id, c, proto::decode_contribute(f.payload));
        return;
      case proto::message_type::abort: {
        auto& rs = ranks_[static_cast<std::size_t>(c.rank)];
        rs.aborted = true;
        failed_ = true;
        std::string why = proto::decode_text(f.payload);
        fmt::print(stderr, "seriema-run: {} aborted: {}\n", who(c.rank), why);
        fail_bootstrap(fmt::format("{} aborted: {}", who(c.rank), why));
        if (options_.kill_on_failure) start_termination();
        return;
      }
      default:
        reject(c, fmt::format("seriema: bootstrap failed: unexpected message type {} from {}",
                              static_cast<std::uint32_t>(f.type), who(c.rank)));
    }
  }

  void on_contribute(std::uint64_t id, connection& c, proto::contribute_message m) {
    int r = c.rank;
    auto& rs = ranks_[static_cast<std::size_t>(r)];
    if (failure_) {
      rs.notified = true;
      send(c, proto::encode_failure(rank_message(*failure_)));
      return;
    }
    auto now = clock_type::now();
    if (rs.joined == current_) {
      // Joined already: legal only from a new connection after the old one closed.
      if (rs.reply_to != 0) {
        reject(c,
               fmt::format("seriema: bootstrap failed: {} entered bootstrap collective #{} twice",
                           who(r), current_));
        return;
      }
      rs.reply_to = id;
      rs.blob = std::move(m.blob);
      return;
    }
    auto timeout = milliseconds(m.timeout_ms);
    if (arrived_ == 0) {
      kind_ = m.kind;
      collective_timeout_ = timeout;
      collective_deadline_ = now + timeout;
    } else if (m.kind != kind_) {
      rs.joined = current_;
      rs.reply_to = id;
      ++arrived_;
      fail_bootstrap(fmt::format(
          "{} entered a {} as bootstrap collective #{} while other ranks entered a {}; every rank "
          "must make the same bootstrap calls in the same order",
          who(r), proto::to_string(m.kind), current_, proto::to_string(kind_)));
      return;
    } else if (now + timeout < *collective_deadline_) {
      collective_timeout_ = timeout;
      collective_deadline_ = now + timeout;
    }
    rs.joined = current_;
    rs.blob = std::move(m.blob);
    rs.reply_to = id;
    ++arrived_;
    check_pending_collective();
  }

  // Completes the current collective when every rank has joined; fails it when a rank that has
  // not joined can no longer do so.
  void check_pending_collective() {
    if (arrived_ == 0 || failure_) return;
    for (int r = 0; r < options_.np; ++r) {
      const auto& rs = ranks_[static_cast<std::size_t>(r)];
      if (rs.joined < current_ && !rs.running && rs.exit_judged) {
        fail_bootstrap(fmt::format("{} {} before joining the {} (bootstrap collective #{})", who(r),
                                   describe_wait_status(rs.wait_status), proto::to_string(kind_),
                                   current_));
        return;
      }
    }
    if (arrived_ < options_.np) return;
    std::vector<std::vector<std::byte>> blobs;
    blobs.reserve(ranks_.size());
    for (auto& rs : ranks_) blobs.push_back(std::move(rs.blob));
    auto result = proto::encode_result(blobs);
    for (auto& rs : ranks_) {
      if (auto it = connections_.find(rs.reply_to); it != connections_.end())
        send(it->second, result);
      rs.reply_to = 0;
      rs.blob.clear();
    }
    arrived_ = 0;
    ++current_;
    collective_deadline_.reset();
  }

  void on_collective_timeout() {
    std::vector<std::string> missing;
    for (int r = 0; r < options_.np; ++r) {
      const auto& rs = ranks_[static_cast<std::size_t>(r)];
      if (rs.joined >= current_) continue;
      missing.push_back(fmt::format("{}{}", who(r), rs.ever_connected ? "" : ", never connected"));
    }
    std::string list;
    constexpr std::size_t shown = 8;
    for (std::size_t i = 0; i < missing.size() && i < shown; ++i) {
      list += (i == 0 ? "" : ", ") + missing[i];
    }
    if (missing.size() > shown) list += fmt::format(" and {} more", missing.size() - shown);
    fail_bootstrap(fmt::format(
        "the {} (bootstrap collective #{}) timed out after {}: {} {} not joined it and {} still "
        "running; raise SERIEMA_BOOTSTRAP_TIMEOUT or seriema-run --timeout if {} merely slow",
        proto::to_string(kind_), current_, format_duration(collective_timeout_), list,
        missing.size() == 1 ? "has" : "have", missing.size() == 1 ? "is" : "are",
        missing.size() == 1 ? "it is" : "they are"));
  }

  std::string rank_message(const std::string& reason) const {
    return fmt::format("seriema: bootstrap failed: {}", reason);
  }

  // The rendezvous is broken for good: every pending and later collective fails with `reason`.
  void fail_bootstrap(const std::string& reason) {
    if (failure_) return;
    failure_ = reason;
    failed_ = true;
    fmt::print(stderr, "seriema-run: bootstrap failed: {}\n", reason);
    auto frame = proto::encode_failure(rank_message(reason));
    for (auto& rs : ranks_) {
      if (rs.joined == current_ && arrived_ > 0) {
        if (auto it = connections_.find(rs.reply_to); it != connections_.end()) {
          send(it->second, frame);
          rs.notified = true;
        }
      }
      rs.reply_to = 0;
      rs.blob.clear();
    }
    arrived_ = 0;
    collective_deadline_.reset();
    if (options_.kill_on_failure) start_termination();
  }

  void send(connection& c, std::span<const std::byte> frame) {
    if (c.closed) return;
    if (c.out_done == c.out.size()) {
      c.out.clear();
      c.out_done = 0;
    }
    c.out.insert(c.out.end(), frame.begin(), frame.end());
    flush(c);
  }

  void flush(connection& c) {
    while (c.out_done < c.out.size()) {
      ssize_t n = ::send(c.fd, c.out.data() + c.out_done, c.out.size() - c.out_done,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n < 0) {
        c.closed = true;  // the rank went away; its exit status tells the rest
        return;
      }
      c.out_done += static_cast<std::size_t>(n);
    }
  }

  run_options options_;
  std::vector<rank_state> ranks_;
  std::map<std::uint64_t, connection> connections_;
  std::uint64_t next_connection_id_ = 1;
  std::vector<output_pipe> pipes_;
  int listen_fd_ = -1;
  int signal_fd_ = -1;
  sigset_t original_mask_{};

  // The collective being gathered: the current_-th of every rank.
  int current_ = 1;
  int arrived_ = 0;
  proto::collective_kind kind_ = proto::collective_kind::barrier;
  milliseconds collective_timeout_{0};
  std::optional<clock_type::time_point> collective_deadline_;
  std::optional<std::string> failure_;

  bool terminating_ = false;
  bool failed_ = false;
  int launcher_signal_ = 0;
  std::optional<int> exit_code_;
};

}  // namespace

int main(int argc, char** argv) {
  run_options options;
  CLI::App app{
      "seriema-run: start N processes of a program on this host, serve their bootstrap, and stop "
      "the job promptly when one fails.\n"
      "Ranks go to emulated machines in contiguous blocks: rank r of N is on machine r*M/N."};
  std::string timeout_text;
  std::string grace_text = "3s";
  std::string on_failure = "kill";
  app.add_option("-n,--np", options.np, "number of processes (ranks), at least 1")->required();
  app.add_option("--machines", options.machines,
                 "number of emulated machines M, 1 <= M <= N (default 1)");
  app.add_option("--timeout", timeout_text,
                 "how long a bootstrap collective waits for the slowest rank (default: "
                 "SERIEMA_BOOTSTRAP_TIMEOUT, else 30s)");
  app.add_option("--on-failure", on_failure,
                 "kill: when a rank fails, stop the others (SIGTERM, SIGKILL after --grace); "
                 "wait: let them run to completion (the exit status is still non-zero)")
      ->check(CLI::IsMember({"kill", "wait"}));
  app.add_option("--grace", grace_text, "time between SIGTERM and SIGKILL (default 3s)");
  app.add_flag("--tag-output", options.tag_output, "prefix every output line with [rank]");
  app.add_option("command", options.command, "the program and its arguments, after --");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : exit_usage;
  }

  try {
    if (options.np < 1) {
      throw seriema::config_error(
          fmt::format("-n {}: the job needs at least 1 process", options.np));
    }
    if (options.machines < 1 || options.machines > options.np) {
      throw seriema::config_error(fmt::format(
          "--machines {}: each emulated machine needs at least one rank; use 1 to {} machines for "
          "-n {}",
          options.machines, options.np, options.np));
    }
    if (options.command.empty()) {
      throw seriema::config_error(
          "no program given; usage: seriema-run -n N [options] -- program [args...]");
    }
    options.timeout = timeout_text.empty()
                          ? seriema::config::get_duration("SERIEMA_BOOTSTRAP_TIMEOUT")
                          : seriema::config::parse_duration("--timeout", timeout_text);
    if (options.timeout.count() <= 0) {
      throw seriema::config_error("the bootstrap timeout must be positive; use e.g. --timeout 30s");
    }
    if (options.timeout.count() > 0xffffffffLL) {
      throw seriema::config_error("the bootstrap timeout must be under 49 days");
    }
    options.grace = seriema::config::parse_duration("--grace", grace_text);
    options.kill_on_failure = on_failure == "kill";
  } catch (const seriema::error& e) {
    fmt::print(stderr, "seriema-run: {}\n", e.what());
    return exit_usage;
  }

  std::string program_path;
  try {
    program_path = resolve_program(options.command[0]);
  } catch (const std::system_error& e) {
    fmt::print(stderr, "seriema-run: cannot execute {}: {}\n", options.command[0],
               std::strerror(e.code().value()));
    return exit_cannot_execute;
  }

  try {
    launcher job(std::move(options));
    return job.run(program_path);
  } catch (const std::exception& e) {
    fmt::print(stderr, "seriema-run: {}\n", e.what());
    return 1;
  }
}

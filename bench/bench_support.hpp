// What the benchmarks share: a description of the machine for their reports (JSON through
// json_report.hpp), medians, and the ucx_perftest runner that measures the raw-UCX baseline in the
// same run (server and client on 127.0.0.1, pinned like the two ranks).
#pragma once

#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/utsname.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>
#include <seriema/fabric/runtime.hpp>
#include <seriema/transfer/ucx.hpp>
#include <span>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "json_report.hpp"

extern char** environ;

namespace seriema::bench {

using clock_type = std::chrono::steady_clock;

// ---- machine description -------------------------------------------------------------------

inline std::string read_first_match(const char* path, const char* key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      auto value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      return value;
    }
  }
  return "unknown";
}

inline std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

inline std::string utc_now() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

inline std::vector<int> cpus_of(const cpu_set_t& set) {
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

inline std::string join_cpus(const std::vector<int>& cpus) {
  std::string out;
  for (int c : cpus) out += (out.empty() ? "" : ",") + std::to_string(c);
  return out.empty() ? "?" : out;
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// ---- ucx_perftest baseline ------------------------------------------------------------------

struct perftest_result {
  bool ok = false;
  double msgs_per_s = 0;
  double mib_per_s = 0;  // ucx_perftest's "MB/s" is 2^20 bytes per second
  double latency_typical_us = 0;  // latency tests: one-way (half a round trip), typical
  double latency_avg_us = 0;
  std::string error;
};

inline std::string find_in_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

inline bool port_is_free(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return ok;
}

inline bool port_is_listening(int port) {
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      fields >> slot >> local >> remote >> state;
      auto colon = local.rfind(':');
      if (colon == std::string::npos || state != "0A") continue;
      if (std::stoi(local.substr(colon + 1), nullptr, 16) == port) return true;
    }
  }
  return false;
}

// Runs ucx_perftest pairs (server + client on 127.0.0.1) with a pristine copy of the environment
// (taken before the runtime touched it), UCX_TLS as chosen, and each side pinned like its rank.
class perftest_runner {
 public:
  perftest_runner(std::string binary, std::vector<std::string> environment, std::string tls,
                  cpu_set_t client_cpus, cpu_set_t server_cpus, double timeout)
      : binary_(std::move(binary)),
        environment_(std::move(environment)),
        tls_(std::move(tls)),
        client_cpus_(client_cpus),
        server_cpus_(server_cpus),
        timeout_(timeout),
        next_port_(13000 + static_cast<int>(getpid() % 1000)) {
    std::erase_if(environment_, [](const std::string& e) { return e.rfind("UCX_TLS=", 0) == 0; });
    if (!tls_.empty()) environment_.push_back("UCX_TLS=" + tls_);
  }

  // test: ucp_put_bw, ucp_am_bw, ucp_am_lat, ...
  perftest_result run(std::size_t size, std::uint64_t iters, std::uint64_t warmup,
                      const std::string& test = "ucp_put_bw") {
    perftest_result result;
    int port = pick_port();
    std::vector<std::string> args = {binary_,
                                     "-t",
                                     test,
                                     "-s",
                                     std::to_string(size),
                                     "-n",
                                     std::to_string(iters),
                                     "-w",
                                     std::to_string(warmup),
                                     "-p",
                                     std::to_string(port)};
    std::string server_out = temp_path("server"), client_out = temp_path("client");
    pid_t server = spawn(args, server_cpus_, server_out);
    if (server < 0) return fail(result, "cannot start the ucx_perftest server");
    clock_type::time_point deadline =
        clock_type::now() +
        std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(timeout_));
    bool listening = false;
    while (clock_type::now() < deadline && !exited(server)) {
      if ((listening = port_is_listening(port))) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    pid_t client = -1;
    if (listening) {
      auto client_args = args;
      client_args.insert(client_args.begin() + 1, "127.0.0.1");
      client = spawn(client_args, client_cpus_, client_out);
    }
    bool client_done = client > 0 && wait_until(client, deadline);
    clock_type::time_point grace = clock_type::now() + std::chrono::seconds(2);
    bool server_done = wait_until(server, std::max(deadline, grace));
    if (client > 0 && !client_done) kill_and_reap(client);
    if (!server_done) kill_and_reap(server);
    std::string output = slurp(client_out);
    std::string server_output = slurp(server_out);
    std::remove(client_out.c_str());
    std::remove(server_out.c_str());
    if (!listening)
      return fail(result, "server never listened on port " + std::to_string(port) + ": " +
                              last_line(server_output));
    if (!client_done) return fail(result, fmt::format("timed out after {:.0f} s", timeout_));
    std::istringstream lines(output);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.rfind("Final:", 0) != 0) continue;
      // Final: iters p50 avg overall | MB/s avg overall | msg/s avg overall
      std::istringstream fields(line.substr(6));
      double v[8];
      int n = 0;
      while (n < 8 && fields >> v[n]) ++n;
      if (n == 8) {
        result.ok = true;
        result.latency_typical_us = v[1];
        result.latency_avg_us = v[2];
        result.mib_per_s = v[5];
        result.msgs_per_s = v[7];
        return result;
      }
    }
    return fail(result, "no \"Final:\" line in its output: " + last_line(output));
  }

 private:
  static perftest_result& fail(perftest_result& r, std::string why) {
    r.ok = false;
    r.error = std::move(why);
    return r;
  }
  static std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static std::string last_line(const std::string& text) {
    auto end = text.find_last_not_of("\n ");
    if (end == std::string::npos) return "(no output)";
    auto start = text.rfind('\n', end);
    return text.substr(start == std::string::npos ? 0 : start + 1, end + 1 - (start + 1));
  }
  static std::string temp_path(const char* what) {
    std::string path = fmt::format("/tmp/seriema-bench-{}-{}-XXXXXX", getpid(), what);
    int fd = mkstemp(path.data());
    if (fd >= 0) ::close(fd);
    return path;
  }
  int pick_port() {
    for (int tries = 0; tries < 200; ++tries) {
      int port = next_port_;
      next_port_ = next_port_ >= 14999 ? 13000 : next_port_ + 1;
      if (port_is_free(port)) return port;
    }
    return next_port_;
  }
  // fork+exec: the child only redirects output, sets its CPU affinity and execs (async-signal-safe
  // calls only; argv/envp are prepared before the fork).
  pid_t spawn(const std::vector<std::string>& args, const cpu_set_t& cpus, const std::string& out) {
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (auto& e : environment_) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
      int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        ::close(fd);
      }
      int null_fd = ::open("/dev/null", O_RDONLY);
      if (null_fd >= 0) ::dup2(null_fd, 0);
      (void)sched_setaffinity(0, sizeof cpus, &cpus);
      ::execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    return pid;
  }
  bool exited(pid_t pid) {
    int status;
    return waitpid(pid, &status, WNOHANG) == pid;
  }
  bool wait_until(pid_t pid, clock_type::time_point deadline) {
    while (clock_type::now() < deadline) {
      if (exited(pid)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }
  static void kill_and_reap(pid_t pid) {
    ::kill(pid, SIGKILL);
    int status;
    (void)waitpid(pid, &status, 0);
  }

  std::string binary_;
  std::vector<std::string> environment_;
  std::string tls_;
  cpu_set_t client_cpus_, server_cpus_;
  double timeout_;
  int next_port_;
};

// What the process had before the runtime bound it and edited its environment: ucx_perftest
// inherits these.
struct launch_state {
  cpu_set_t cpus;
  std::vector<std::string> environment;
  static launch_state capture() {
    launch_state s;
    CPU_ZERO(&s.cpus);
    sched_getaffinity(0, sizeof s.cpus, &s.cpus);
    for (char** e = environ; *e != nullptr; ++e) s.environment.emplace_back(*e);
    return s;
  }
};

// The ucx_perftest options the two-rank invoke benchmarks share.
struct perftest_options {
  std::string binary = "ucx_perftest";
  bool skip = false;
  std::string tls;  // default: ours; tcp,self across machines
  double timeout = 25;
  void add_to(CLI::App& app) {
    app.add_option("--perftest", binary, "ucx_perftest binary");
    app.add_flag("--no-perftest", skip, "skip the ucx_perftest baseline");
    app.add_option("--perftest-tls", tls,
                   "UCX_TLS for ucx_perftest (default: ours; tcp,self across machines)");
    app.add_option("--perftest-timeout", timeout, "seconds per ucx_perftest run");
  }
};

// Rank 0 -> rank 1 benchmark setup: the transport label (guessed when empty), the UCX_TLS
// ucx_perftest runs with, and (rank 0) the runner, its client pinned like rank 0 and its server
// like rank 1 when each rank has one CPU of its own.
struct pair_setup {
  bool same_machine = false;
  std::string perftest_tls;
  std::optional<perftest_runner> perftest;

  pair_setup(fabric::runtime& rt, const launch_state& launch, const perftest_options& opt,
             std::string& transport, const char* program) {
    cpu_set_t mine;
    CPU_ZERO(&mine);
    sched_getaffinity(0, sizeof mine, &mine);
    auto sets = rt.allgather(std::as_bytes(std::span(&mine, 1)));
    cpu_set_t rank1;
    std::memcpy(&rank1, sets[1].data(), sizeof rank1);
    same_machine = rt.same_machine(rt.rank() == 0 ? 1 : 0);
    const char* env_tls = std::getenv("UCX_TLS");
    const std::string our_tls = env_tls ? env_tls : "";
    if (transport.empty()) {
      transport = same_machine && our_tls.find("tcp") == std::string::npos ? "shm" : "tcp";
    }
    perftest_tls = opt.tls.empty() ? (our_tls.empty() && !same_machine ? "tcp,self" : our_tls)
                                   : opt.tls;
    if (rt.rank() != 0 || opt.skip) return;
    const std::string binary = find_in_path(opt.binary);
    if (binary.empty()) {
      fmt::print(stderr, "{}: {} not found: no raw baseline (apt-get install ucx-utils)\n", program,
                 opt.binary);
      return;
    }
    const auto c0 = cpus_of(mine), c1 = cpus_of(rank1);
    const bool pinned = c0.size() == 1 && c1.size() == 1 && c0 != c1;
    perftest.emplace(binary, launch.environment, perftest_tls, pinned ? mine : launch.cpus,
                     pinned ? rank1 : launch.cpus, opt.timeout);
  }
};

// "# machine: host | cpu | N CPUs | Linux x | UCX y | date | load" and the JSON object of it.
struct machine_info {
  std::string host, cpu, kernel, ucx;
  long cpus = 0;
  static machine_info here() {
    utsname un{};
    uname(&un);
    return {un.nodename, read_first_match("/proc/cpuinfo", "model name"), un.release,
            transfer::ucx_version(), sysconf(_SC_NPROCESSORS_ONLN)};
  }
  [[nodiscard]] std::string line() const {
    return fmt::format("# machine: {} | {} | {} CPUs | Linux {} | UCX {} | {} | load {}", host, cpu,
                       cpus, kernel, ucx, utc_now(), load_average());
  }
  [[nodiscard]] report_json json() const {
    return {{"host", host}, {"cpu", cpu}, {"cpus", cpus}, {"kernel", kernel}, {"ucx", ucx}};
  }
};

}  // namespace seriema::bench

// Drives seriema-run on bootstrap_mp_test's failure scenarios and checks that a dead, hung or
// aborting rank makes the launcher and the other ranks fail promptly, naming that rank.
//
// usage: bootstrap_failure_test --launcher <seriema-run> --program <bootstrap_mp_test>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

std::string launcher_path;
std::string program_path;

// Only a "did not hang" bound, far above the 3-5 s timeouts the scenarios use.
constexpr double hang_bound_s = 25.0;

struct outcome {
  int exit_code = -1;  // 128+signal when the launcher was killed by a signal
  double seconds = 0;
  std::string out;
  std::string err;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class temp_file {
 public:
  temp_file() {
    std::string pattern = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") +
                          "/bootstrap_failure_test.XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    fd_ = ::mkstemp(buffer.data());
    path_ = buffer.data();
  }
  ~temp_file() {
    if (fd_ >= 0) ::close(fd_);
    ::unlink(path_.c_str());
  }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// Runs seriema-run with `args` (program arguments included), `env` added to the environment
// (PMIx variables removed so the ranks use the launcher), and `during(pid, stdout_path)` called
// once after the start. Kills it after 90 s so that a hang fails the test instead of blocking it.
outcome run_launcher(const std::vector<std::string>& args, const std::vector<std::string>& env,
                     const std::function<void(pid_t, const std::string&)>& during = {}) {
  temp_file out_file;
  temp_file err_file;
  std::vector<std::string> argv_storage = {launcher_path};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);

  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e;
    if (entry.starts_with("PMIX_") || entry.starts_with("SERIEMA_")) continue;
    env_storage.push_back(entry);
  }
  env_storage.insert(env_storage.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_file.fd(), 1);
  posix_spawn_file_actions_adddup2(&actions, err_file.fd(), 2);
  auto start = std::chrono::steady_clock::now();
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, launcher_path.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  outcome result;
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn " << launcher_path << ": " << std::strerror(rc);
    return result;
  }
  if (during) during(pid, out_file.path());
  int status = 0;
  for (;;) {
    pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(90)) {
      ADD_FAILURE() << "seriema-run hung for 90 s; killing it";
      ::kill(pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = read_file(out_file.path());
  result.err = read_file(err_file.path());
  return result;
}

// Replaces the digits after every "pid " with N, so that expected lines can be literal.
std::string without_pids(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    if (text.compare(i, 4, "pid ") == 0 && i + 4 < text.size() &&
        std::isdigit(static_cast<unsigned char>(text[i + 4]))) {
      out += "pid N";
      i += 4;
      while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    } else {
      out += text[i++];
    }
  }
  return out;
}

// True when one line of `text` holds every part, in order ("pid 123" reads as "pid N").
bool has_line(const std::string& text, std::initializer_list<std::string> parts) {
  std::istringstream lines(without_pids(text));
  for (std::string line; std::getline(lines, line);) {
    std::size_t at = 0;
    bool all = true;
    for (const auto& part : parts) {
      at = line.find(part, at);
      if (at == std::string::npos) {
        all = false;
        break;
      }
      at += part.size();
    }
    if (all) return true;
  }
  return false;
}

bool has_exact_line(const std::string& text, const std::string& expected) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line == expected) return true;
  }
  return false;
}

#define EXPECT_LINE(text, ...)                                                              \
  EXPECT_TRUE(has_line(text, {__VA_ARGS__})) << "no line with " << #__VA_ARGS__ << " in:\n" \
                                             << (text)

std::vector<std::string> scenario(int np, const std::string& name,
                                  std::vector<std::string> launcher_flags = {}) {
  std::vector<std::string> args = {"-n", std::to_string(np)};
  args.insert(args.end(), launcher_flags.begin(), launcher_flags.end());
  args.insert(args.end(), {"--", program_path, "--scenario", name});
  return args;
}

TEST(bootstrap_failure, dead_rank_is_named_by_launcher_and_survivors) {
  auto r = run_launcher(scenario(3, "exit-before-allgather", {"--on-failure=wait"}),
                        {"SERIEMA_BOOTSTRAP_TIMEOUT=5s"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_LT(r.seconds, hang_bound_s);
  EXPECT_LINE(r.err, "seriema-run: rank 1 (pid N) exited with status 3");
  for (int survivor : {0, 2}) {
    EXPECT_LINE(r.err, "[mp rank " + std::to_string(survivor) +
                           "] caught bootstrap_error: seriema: bootstrap failed: rank 1 (pid N) "
                           "exited with status 3 before joining the allgather");
    EXPECT_LINE(r.err,
                "seriema-run: rank " + std::to_string(survivor) + " (pid N) exited with status 1");
  }
}

TEST(bootstrap_failure, dead_rank_stops_the_job_by_default) {
  auto r = run_launcher(scenario(3, "exit-before-allgather"), {"SERIEMA_BOOTSTRAP_TIMEOUT=5s"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_LT(r.seconds, hang_bound_s);
  EXPECT_LINE(r.err, "seriema-run: rank 1 (pid N) exited with status 3");
  EXPECT_LINE(r.err, "seriema-run: job failed; exiting with status 3");
}

TEST(bootstrap_failure, hung_rank_times_out_and_is_named) {
  auto r = run_launcher(scenario(3, "hang-before-allgather"), {"SERIEMA_BOOTSTRAP_TIMEOUT=3s"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.seconds, hang_bound_s);
  EXPECT_LINE(r.err,
              "seriema-run: bootstrap failed: the allgather (bootstrap collective #1) timed out "
              "after 3s: rank 1 (pid N) has not joined it");
  for (int survivor : {0, 2}) {
    EXPECT_LINE(r.err,
                "[mp rank " + std::to_string(survivor) +
                    "] caught bootstrap_error: seriema: bootstrap failed: ",
                "timed out", "rank 1 (pid N) has not joined");
  }
  // The hung rank is stopped by the launcher.
  EXPECT_LINE(r.err, "rank 1 (pid N) killed by signal 15 (SIGTERM) (sent by seriema-run)");
}

TEST(bootstrap_failure, rank_killed_by_signal_is_reported) {
  auto r = run_launcher(scenario(3, "signal-before-allgather", {"--on-failure=wait"}),
                        {"SERIEMA_BOOTSTRAP_TIMEOUT=5s"});
  EXPECT_EQ(r.exit_code, 128 + 9);
  EXPECT_LT(r.seconds, hang_bound_s);
  EXPECT_LINE(r.err, "seriema-run: rank 2 (pid N) killed by signal 9 (SIGKILL)");
  EXPECT_LINE(r.err, "[mp rank 0] caught bootstrap_error: ", "rank 2 (pid N) killed by signal 9");
}

TEST(bootstrap_failure, abort_is_named_to_the_others) {
  auto r = run_launcher(scenario(2, "abort-before-allgather", {"--on-failure=wait"}),
                        {"SERIEMA_BOOTSTRAP_TIMEOUT=5s"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.seconds, hang_bound_s);
  EXPECT_LINE(r.err, "seriema-run: rank 1 (pid N) aborted: test abort from rank 1");
  EXPECT_LINE(r.err,
              "[mp rank 0] caught bootstrap_error: seriema: bootstrap failed: rank 1 (pid N) "
              "aborted: test abort from rank 1");
}

TEST(bootstrap_failure, clean_exit_before_a_collective_fails_it) {
  auto r = run_launcher(scenario(3, "exit0-before-barrier", {"--on-failure=wait"}),
                        {"SERIEMA_BOOTSTRAP_TIMEOUT=5s"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_LT(r.seconds, hang_bound_s);
  EXPECT_LINE(r.err,
              "[mp rank 2] caught bootstrap_error: seriema: bootstrap failed: rank 1 (pid N) "
              "exited with status 0 before joining the barrier");
}

TEST(bootstrap_failure, wait_mode_lets_the_others_finish) {
  auto r = run_launcher(scenario(3, "exit-after-bootstrap", {"--on-failure=wait"}),
                        {"SERIEMA_BOOTSTRAP_TIMEOUT=5s"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_LINE(r.err, "seriema-run: rank 1 (pid N) exited with status 3");
  EXPECT_LINE(r.err, "[mp rank 0] done");
  EXPECT_LINE(r.err, "[mp rank 2] done");
  EXPECT_FALSE(has_line(r.err, {"sent by seriema-run"})) << r.err;
}

TEST(bootstrap_failure, kill_mode_stops_the_others) {
  auto r = run_launcher(scenario(3, "exit-after-bootstrap"), {"SERIEMA_BOOTSTRAP_TIMEOUT=5s"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_LT(r.seconds, hang_bound_s);
  EXPECT_LINE(r.err, "rank 0 (pid N) killed by signal 15 (SIGTERM) (sent by seriema-run)");
  EXPECT_FALSE(has_line(r.err, {"[mp rank 0] done"})) << r.err;
}

TEST(bootstrap_failure, launcher_forwards_sigterm_and_fails) {
  std::vector<int> pids;
  auto r = run_launcher(scenario(2, "sleep"), {}, [&](pid_t launcher, const std::string& out) {
    auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < std::chrono::seconds(20)) {
      std::istringstream lines(read_file(out));
      pids.clear();
      for (std::string line; std::getline(lines, line);) {
        if (auto at = line.find("] pid ");
            line.starts_with("[mp rank ") && at != std::string::npos) {
          pids.push_back(std::stoi(line.substr(at + 6)));
        }
      }
      if (pids.size() == 2) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(launcher, SIGTERM);
  });
  ASSERT_EQ(pids.size(), 2u) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 128 + SIGTERM);
  EXPECT_LT(r.seconds, hang_bound_s);
  EXPECT_LINE(r.err, "seriema-run: got SIGTERM; forwarding it to 2 ranks");
  for (int pid : pids) EXPECT_NE(::kill(pid, 0), 0) << "rank pid " << pid << " survived";
}

TEST(bootstrap_failure, all_ranks_succeeding_exits_zero_and_tags_output) {
  auto r = run_launcher(scenario(2, "print", {"--tag-output"}), {});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has_exact_line(r.out, "[0] [mp rank 0] hello from rank 0")) << r.out;
  EXPECT_TRUE(has_exact_line(r.out, "[1] [mp rank 1] hello from rank 1")) << r.out;
  EXPECT_TRUE(has_exact_line(r.out, "[1] [mp rank 1] second line")) << r.out;  // no newline at end
}

TEST(bootstrap_failure, bad_arguments_are_refused) {
  auto zero = run_launcher({"-n", "0", "--", program_path}, {});
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_LINE(zero.err, "seriema-run: -n 0: the job needs at least 1 process");

  auto machines = run_launcher({"-n", "2", "--machines", "3", "--", program_path}, {});
  EXPECT_EQ(machines.exit_code, 2);
  EXPECT_LINE(machines.err, "seriema-run: --machines 3: ", "use 1 to 2 machines");

  auto no_program = run_launcher({"-n", "2"}, {});
  EXPECT_EQ(no_program.exit_code, 2);
  EXPECT_LINE(no_program.err, "no program given");

  auto missing = run_launcher({"-n", "2", "--", "./does-not-exist"}, {});
  EXPECT_EQ(missing.exit_code, 127);
  EXPECT_TRUE(has_exact_line(
      missing.err, "seriema-run: cannot execute ./does-not-exist: No such file or directory"))
      << missing.err;

  auto bad_timeout = run_launcher({"-n", "1", "--timeout", "soon", "--", program_path}, {});
  EXPECT_EQ(bad_timeout.exit_code, 2);
  EXPECT_LINE(bad_timeout.err, "--timeout=soon");

  auto bad_limit = run_launcher({"-n", "1", "--time-limit", "soon", "--", program_path}, {});
  EXPECT_EQ(bad_limit.exit_code, 2);
  EXPECT_LINE(bad_limit.err, "--time-limit=soon");
  auto zero_limit = run_launcher({"-n", "1", "--time-limit", "0s", "--", program_path}, {});
  EXPECT_EQ(zero_limit.exit_code, 2);
  EXPECT_LINE(zero_limit.err, "seriema-run: --time-limit must be positive");
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string arg = argv[i];
    if (arg == "--launcher") {
      launcher_path = argv[i + 1];
    } else if (arg == "--program") {
      program_path = argv[i + 1];
    } else {
      std::fprintf(stderr, "bootstrap_failure_test: unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  if (launcher_path.empty() || program_path.empty()) {
    std::fprintf(stderr,
                 "usage: bootstrap_failure_test --launcher <seriema-run> --program <exe>\n");
    return 2;
  }
  return RUN_ALL_TESTS();
}

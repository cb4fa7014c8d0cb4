// seriema-run's command line (cli.hpp): CLI11 options, checks that name the fix, and the PATH
// search for the program.
#include "cli.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdlib>
#include <seriema/base/error.hpp>
#include <seriema/base/settings.hpp>
#include <system_error>

namespace seriema::tools::seriema_run {

namespace {

// The options read as text, then parsed into run_options by check_options.
struct option_texts {
  std::string timeout;
  std::string grace = "3s";
  std::string time_limit;
  std::string on_failure = "kill";
};

void add_options(CLI::App& app, run_options& options, option_texts& texts) {
  app.add_option("-n,--np", options.np, "number of processes (ranks), at least 1")->required();
  app.add_option("--machines", options.machines,
                 "number of emulated machines M, 1 <= M <= N (default 1)");
  app.add_option("--timeout", texts.timeout,
                 "how long a bootstrap collective waits for the slowest rank (default: "
                 "SERIEMA_BOOTSTRAP_TIMEOUT, else 30s)");
  app.add_option("--on-failure", texts.on_failure,
                 "kill: when a rank fails, stop the others (SIGTERM, SIGKILL after --grace); "
                 "wait: let them run to completion (the exit status is still non-zero)")
      ->check(CLI::IsMember({"kill", "wait"}));
  app.add_option("--grace", texts.grace, "time between SIGTERM and SIGKILL (default 3s)");
  app.add_option("--time-limit", texts.time_limit,
                 "wall-clock limit of the whole job, e.g. 60s or 10m (default: none); when it "
                 "passes, name the ranks still running, stop them (SIGTERM, SIGKILL after "
                 "--grace) and exit with status 124");
  app.add_flag("--tag-output", options.tag_output, "prefix every output line with [rank]");
  app.add_option("command", options.command, "the program and its arguments, after --");
}

// Throws config_error naming the fix.
void check_options(run_options& options, const option_texts& texts) {
  if (options.np < 1) {
    throw seriema::config_error(fmt::format("-n {}: the job needs at least 1 process", options.np));
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
  options.timeout = texts.timeout.empty()
                        ? seriema::config::get_duration("SERIEMA_BOOTSTRAP_TIMEOUT")
                        : seriema::config::parse_duration("--timeout", texts.timeout);
  if (options.timeout.count() <= 0) {
    throw seriema::config_error("the bootstrap timeout must be positive; use e.g. --timeout 30s");
  }
  if (options.timeout.count() > 0xffffffffLL) {
    throw seriema::config_error("the bootstrap timeout must be under 49 days");
  }
  options.grace = seriema::config::parse_duration("--grace", texts.grace);
  if (!texts.time_limit.empty()) {
    options.time_limit = seriema::config::parse_duration("--time-limit", texts.time_limit);
    if (options.time_limit->count() <= 0) {
      throw seriema::config_error(
          "--time-limit must be positive; use e.g. --time-limit 60s (leave it out for none)");
    }
  }
  options.kill_on_failure = texts.on_failure == "kill";
}

}  // namespace

std::optional<int> parse_command_line(int argc, char** argv, run_options& options) {
  CLI::App app{
      "seriema-run: start N processes of a program on this host, serve their bootstrap, and stop "
      "the job promptly when one fails.\n"
      "Ranks go to emulated machines in contiguous blocks: rank r of N is on machine r*M/N."};
  option_texts texts;
  add_options(app, options, texts);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : exit_usage;
  }
  try {
    check_options(options, texts);
  } catch (const seriema::error& e) {
    fmt::print(stderr, "seriema-run: {}\n", e.what());
    return exit_usage;
  }
  return std::nullopt;
}

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

}  // namespace seriema::tools::seriema_run

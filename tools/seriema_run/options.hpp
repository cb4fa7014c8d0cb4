// seriema-run's settings once the command line is parsed (cli.cpp), and its own exit statuses:
// what the process group and the rendezvous server are built from.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace seriema::tools::seriema_run {

using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int exit_usage = 2;             // bad options: nothing was started
constexpr int exit_cannot_execute = 127;  // the program cannot be executed (as a shell says)
constexpr int exit_time_limit = 124;      // --time-limit stopped the job (as timeout(1) says)

struct run_options {
  int np = 0;
  int machines = 1;
  milliseconds timeout{30'000};  // of one bootstrap collective; every rank gets it in its env
  milliseconds grace{3'000};     // between SIGTERM and SIGKILL
  std::optional<milliseconds> time_limit;  // --time-limit: the job's wall-clock limit (none)
  bool kill_on_failure = true;   // --on-failure=kill (else wait)
  bool tag_output = false;
  std::vector<std::string> command;  // the program and its arguments
};

}  // namespace seriema::tools::seriema_run

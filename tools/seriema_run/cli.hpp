// seriema-run's command line: the options, their checks, and finding the program to execute.
#pragma once

#include <optional>
#include <string>

#include "options.hpp"

namespace seriema::tools::seriema_run {

// Parses and checks argv into `options`. Returns the status to exit with when there is nothing to
// run: 0 after --help, exit_usage after saying on stderr what is wrong.
std::optional<int> parse_command_line(int argc, char** argv, run_options& options);

// Finds `program` like execvp would; returns the path to exec, or throws std::system_error with
// the errno that execvp would have failed with.
std::string resolve_program(const std::string& program);

}  // namespace seriema::tools::seriema_run

// The command line of the MPI baselines (bench/mpi_*.cpp): CLI11 parsing that finalizes MPI
// before the program leaves on --help or a bad option. No seriema dependency.
#pragma once

#include <mpi.h>

#include <CLI/CLI.hpp>
#include <optional>

namespace seriema::bench {

// Parses argv into `app`. On --help or a parse error prints what CLI11 prints, finalizes MPI and
// returns the code main() returns; nullopt when the program goes on.
inline std::optional<int> parse_or_finalize(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    MPI_Finalize();
    return code;
  }
  return std::nullopt;
}

}  // namespace seriema::bench

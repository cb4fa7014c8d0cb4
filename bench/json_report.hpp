// Writing the benchmarks' JSON reports (nlohmann-json): the report type, numbers rounded to the
// decimals a report keeps, and the file writer. No seriema dependency, so the MPI baseline
// (bench/mpi_rate.cpp, which links no seriema library) uses it too.
#pragma once

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace seriema::bench {

// Keys stay in the order they are added, so a report reads top-down like the table it mirrors
// (readers look keys up by name; the order is for people).
using report_json = nlohmann::ordered_json;

// `x` rounded to `decimals` places: what a report keeps of a measurement (nlohmann writes the
// shortest text that reads back as the double, so 0.1235 stays "0.1235").
inline double rounded(double x, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(x * scale) / scale;
}

// `x` rounded, or null when it was not measured.
inline report_json rounded_or_null(std::optional<double> x, int decimals) {
  return x ? report_json(rounded(*x, decimals)) : report_json(nullptr);
}

// `values` as a JSON array, each rounded to `decimals` places.
inline report_json rounded_array(const std::vector<double>& values, int decimals) {
  report_json out = report_json::array();
  for (double x : values) out.push_back(rounded(x, decimals));
  return out;
}

// Writes `report` to `path` (creating its directory), indented by 2, with a final newline.
inline void write_report(const std::string& path, const report_json& report) {
  std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << report.dump(2) << "\n";
}

}  // namespace seriema::bench

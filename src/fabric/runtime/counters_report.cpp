// SERIEMA_COUNTERS: writing a process's counters as JSON (nlohmann-json) when run() ends.
#include "runtime/counters_report.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <seriema/base/error.hpp>
#include "runtime/runtime_internal.hpp"

namespace seriema::fabric::detail {

using json = nlohmann::ordered_json;

std::string counters_file_for(std::string_view pattern, int rank, int size) {
  constexpr std::string_view marker = "{rank}";
  std::string path(pattern);
  const auto at = path.find(marker);
  if (at == std::string::npos) {
    if (size > 1 && !path.empty()) {
      throw config_error(fmt::format(
          "SERIEMA_COUNTERS={}: the job has {} processes and each writes its own file; put "
          "{{rank}} in the path (e.g. counters.{{rank}}.json)",
          pattern, size));
    }
    return path;
  }
  return path.replace(at, marker.size(), std::to_string(rank));
}

std::string thread_counters_json(thread_context& self) {
  json entry;
  entry["thread"] = self.id();
  entry["one_sided_consumed"] =
      self.rt().local_state(self.id()).one_sided_consumed.load(std::memory_order_acquire);
  // The layer's object (invoke: "sent" per destination, "received") joins the entry's fields.
  for (std::size_t slot = 0; slot < layer_slot::count; ++slot) {
    if (thread_extension* layer = self.extension(slot)) {
      entry.update(json::parse(layer->counters_json()));
    }
  }
  return entry.dump();
}

namespace {

json process_counters(const invocation_counters& c) {
  auto value = [](const std::atomic<std::uint64_t>& counter) {
    return counter.load(std::memory_order_acquire);
  };
  return json{{"sent", value(c.sent)},
              {"executed", value(c.executed)},
              {"rejected_malformed", value(c.rejected_malformed)},
              {"rejected_unknown_function", value(c.rejected_unknown_function)},
              {"rejected_bad_destination", value(c.rejected_bad_destination)},
              {"rejected_bad_reply", value(c.rejected_bad_reply)},
              {"rejected_feedback", value(c.rejected_feedback)},
              {"rejected_writes", value(c.rejected_writes)},
              {"rejected_arguments", value(c.rejected_arguments)},
              {"handed_to_poller", value(c.handed_to_poller)},
              {"replies_direct", value(c.replies_direct)},
              {"deferred_started", value(c.deferred_started)},
              {"deferred_finished", value(c.deferred_finished)},
              {"rejected_results", value(c.rejected_results)},
              {"exceptions_returned", value(c.exceptions_returned)},
              {"failed_futures_unobserved", value(c.failed_futures_unobserved)}};
}

}  // namespace

void write_counters_file(const std::string& path, runtime& rt, std::uint64_t run,
                         std::span<const std::string> thread_entries) {
  json report;
  report["rank"] = rt.rank();
  report["size"] = rt.size();
  report["run"] = run;
  report["process"] = process_counters(rt.counters());
  json threads = json::array();
  for (const std::string& entry : thread_entries) {
    if (!entry.empty()) threads.push_back(json::parse(entry));
  }
  report["threads"] = std::move(threads);
  std::ofstream out(path, std::ios::trunc);
  out << report.dump(2) << '\n';
  out.close();
  if (!out) {
    throw error(fmt::format("SERIEMA_COUNTERS: cannot write {}: {}", path, std::strerror(errno)));
  }
}

}  // namespace seriema::fabric::detail

// SERIEMA_COUNTERS: the JSON report of a process's counters that runtime::run writes at its end.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace seriema::fabric {
class runtime;
class thread_context;
}  // namespace seriema::fabric

namespace seriema::fabric::detail {

// The file process `rank` of `size` writes: `pattern` with "{rank}" replaced; empty when the
// pattern is empty. Throws config_error when several processes would share one file.
std::string counters_file_for(std::string_view pattern, int rank, int size);

// One thread's entry: its id, one-sided calls consumed, and the fields of its layer
// extension's counters.
// Called by the thread itself at the end of a run.
std::string thread_counters_json(thread_context& self);

// Writes {"rank", "run", "process": {send-based counters}, "threads": [entries]} to `path`
// (replaced whole). Throws seriema::error naming the path when it cannot be written.
void write_counters_file(const std::string& path, runtime& rt, std::uint64_t run,
                         std::span<const std::string> thread_entries);

}  // namespace seriema::fabric::detail

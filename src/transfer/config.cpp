// The SERIEMA_* settings table and its typed, validating parsers.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <seriema/transfer/config.hpp>
#include <seriema/transfer/error.hpp>

extern char** environ;

namespace seriema::config {
namespace {

constexpr setting settings_table[] = {
    // fabric: bootstrap and placement
    {"SERIEMA_BOOTSTRAP_TIMEOUT", "30s",
     "how long a bootstrap collective waits for the slowest rank (e.g. 30s, 500ms, 2m)"},
    {"SERIEMA_THREADS", "1", "worker threads per process (the T of MxPxT)"},
    {"SERIEMA_HYPERTHREADS", "avoid",
     "avoid: put threads on hyperthread siblings only after every core has one; use: fill PUs"},
    {"SERIEMA_PROCESS_ZONES", "auto",
     "NUMA zone of each process on a machine: auto (spread evenly) or a comma list, e.g. 0,1"},
    {"SERIEMA_SERVICE_THREADS", "0",
     "service threads per process: 0 (worker threads take the service role) or 1"},
    {"SERIEMA_HELPER_THREADS", "1",
     "helper threads per process: they serve the calls of threads inside a helped_section and "
     "finish their queued (retry_async) calls, 0..64"},
    {"SERIEMA_SEND_LIMIT", "1M", "largest closure + buffer of one send-based call"},
    {"SERIEMA_REPLY_CELLS", "256",
     "reply cells per thread, 0..65536: call_returns of up to 56-byte values a thread may have "
     "outstanding whose callee on the same machine writes the value straight into the caller's "
     "memory (beyond that, and with 0, replies travel as messages)"},
    {"SERIEMA_TIMEOUT", "0",
     "default deadline of every wait that is given none (wait_for, synchronizer waits, retry "
     "calls, remote allocation), e.g. 30s; 0: none (waits end on peer failure, their own "
     "deadline or success)"},
    {"SERIEMA_COUNTERS", "",
     "file each process writes its counters to (JSON) when run() ends; {rank} in it becomes the "
     "process's rank, and is required when the job has more than one process"},
    {"SERIEMA_BIND", "yes", "yes: bind processes to zones and pin threads to PUs; none: do not"},
    // transfer: registered memory
    {"SERIEMA_PAGES", "auto",
     "page kind for arena segments: auto (1g, else 2m, else thp, else normal), 1g, 2m, thp, normal"},
    {"SERIEMA_MEMORY_SOURCE", "ucx",
     "who allocates arena segments: ucx (shm-mappable, same-machine peers get direct pointers) or "
     "self (mmap with SERIEMA_PAGES, registered with UCX; put/get only)"},
    {"SERIEMA_SEGMENT_SIZE", "64M", "bytes per arena segment (multiple of 2M), registered once"},
    {"SERIEMA_ARENA_LIMIT", "0", "cap on bytes one zone's arena may obtain (0 = no cap)"},
    {"SERIEMA_COMPLETION_INTERVAL", "64",
     "S: a transmitter asks for completion on every S-th operation (selective completion)"},
    // transfer: UCX endpoints
    {"SERIEMA_PEER_ERRORS", "yes",
     "yes: endpoints report a dead peer as an error (UCX peer error handling); no: do not"},
    {"SERIEMA_KEEPALIVE", "1s", "UCX keepalive interval: how fast a dead peer is detected"},
    // invoke: one-sided channels (messengers and aggregators)
    {"SERIEMA_CHUNK_SIZE", "2M",
     "bytes of one messenger chunk in the receiver's zone, header included (8K..2M)"},
    {"SERIEMA_CHUNKS_PER_ALLOCATION", "2", "chunks obtained per allocation service call (1..8)"},
    {"SERIEMA_MAX_CHUNKS", "8", "most chunks one messenger may hold (its ring's maximum)"},
    {"SERIEMA_FLUSH_SIZE", "4K", "traditional aggregation: bytes batched before a publish"},
    {"SERIEMA_EXCEEDING_LIMIT", "64M",
     "bytes of calls one messenger may queue locally (overflow aggregation, RetryAsync)"},
    {"SERIEMA_STAGING_SIZE", "256K",
     "bytes of one registered staging unit for calls to other machines; a one-sided record is "
     "at most this minus 64 bytes (4K..2M)"},
    {"SERIEMA_REMOTE_PUBLISH", "auto",
     "how calls staged for another machine are published: put (batch, fence, word), message "
     "(one write message the receiver applies; tcp), auto (message unless an RDMA transport)"},
    // set by seriema-run for the processes it starts (not for users)
    {"SERIEMA_RUN_SOCKET", "", "set by seriema-run: its rendezvous socket"},
    {"SERIEMA_RUN_RANK", "", "set by seriema-run: this process's rank"},
    {"SERIEMA_RUN_SIZE", "", "set by seriema-run: number of processes"},
    {"SERIEMA_RUN_MACHINE", "", "set by seriema-run: emulated machine of this process"},
    {"SERIEMA_RUN_MACHINES", "", "set by seriema-run: number of emulated machines"},
    {"SERIEMA_RUN_ISOLATED", "",
     "set by seriema-run: yes when emulated machines have their own boot ids (UCX sees hosts)"},
};

const setting* find_setting(std::string_view name) {
  for (const auto& s : settings_table) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Splits "123abc" into the number and the suffix; throws when there is no leading number.
std::pair<std::uint64_t, std::string> number_and_suffix(std::string_view what, std::string_view text,
                                                        std::string_view expected) {
  text = trim(text);
  std::uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || ptr == text.data()) {
    throw config_error(fmt::format("{}={}: not a valid value; expected {}", what, text, expected));
  }
  return {value, lower(trim(std::string_view(ptr, text.data() + text.size())))};
}

std::uint64_t checked_multiply(std::string_view what, std::string_view text, std::uint64_t value,
                               std::uint64_t factor) {
  if (value != 0 && factor > std::numeric_limits<std::uint64_t>::max() / value) {
    throw config_error(fmt::format("{}={}: value too large", what, text));
  }
  return value * factor;
}

}  // namespace

std::span<const setting> all_settings() { return settings_table; }

void reject_unknown_environment_settings() {
  for (char** env = environ; env != nullptr && *env != nullptr; ++env) {
    std::string_view entry(*env);
    if (!entry.starts_with("SERIEMA_")) continue;
    std::string_view name = entry.substr(0, entry.find('='));
    if (find_setting(name) == nullptr) {
      throw config_error(fmt::format(
          "{}: unknown setting; seriema-info --settings lists the SERIEMA_* variables", name));
    }
  }
}

std::optional<std::string> raw(std::string_view name) {
  if (find_setting(name) == nullptr) {
    throw config_error(fmt::format("{}: not a registered seriema setting", name));
  }
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::uint64_t parse_unsigned(std::string_view what, std::string_view text) {
  auto [value, suffix] = number_and_suffix(what, text, "a non-negative integer");
  if (!suffix.empty()) {
    throw config_error(fmt::format("{}={}: expected a non-negative integer", what, trim(text)));
  }
  return value;
}

std::size_t parse_bytes(std::string_view what, std::string_view text) {
  constexpr std::string_view expected = "a size such as 4096, 64K, 2M or 1G";
  auto [value, suffix] = number_and_suffix(what, text, expected);
  std::uint64_t factor = 1;
  if (suffix.empty() || suffix == "b") {
    factor = 1;
  } else if (suffix == "k" || suffix == "kb" || suffix == "kib") {
    factor = 1ull << 10;
  } else if (suffix == "m" || suffix == "mb" || suffix == "mib") {
    factor = 1ull << 20;
  } else if (suffix == "g" || suffix == "gb" || suffix == "gib") {
    factor = 1ull << 30;
  } else {
    throw config_error(fmt::format("{}={}: unknown unit '{}'; expected {}", what, trim(text),
                                   suffix, expected));
  }
  return checked_multiply(what, text, value, factor);
}

std::chrono::milliseconds parse_duration(std::string_view what, std::string_view text) {
  constexpr std::string_view expected = "a duration such as 30, 30s, 500ms or 2m";
  auto [value, suffix] = number_and_suffix(what, text, expected);
  std::uint64_t factor = 0;
  if (suffix.empty() || suffix == "s") {
    factor = 1000;
  } else if (suffix == "ms") {
    factor = 1;
  } else if (suffix == "m" || suffix == "min") {
    factor = 60'000;
  } else {
    throw config_error(fmt::format("{}={}: unknown unit '{}'; expected {}", what, trim(text),
                                   suffix, expected));
  }
  std::uint64_t ms = checked_multiply(what, text, value, factor);
  if (ms > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    throw config_error(fmt::format("{}={}: value too large", what, text));
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(ms));
}

bool parse_bool(std::string_view what, std::string_view text) {
  std::string v = lower(trim(text));
  if (v == "1" || v == "yes" || v == "on" || v == "true" || v == "y") return true;
  if (v == "0" || v == "no" || v == "off" || v == "false" || v == "n" || v == "none") return false;
  throw config_error(fmt::format("{}={}: expected yes or no", what, trim(text)));
}

namespace {
std::string value_or_default(std::string_view name) {
  if (auto v = raw(name)) return *v;
  return std::string(find_setting(name)->default_value);
}
}  // namespace

std::uint64_t get_unsigned(std::string_view name, std::uint64_t min_value, std::uint64_t max_value) {
  std::string text = value_or_default(name);
  std::uint64_t v = parse_unsigned(name, text);
  if (v < min_value || v > max_value) {
    throw config_error(
        fmt::format("{}={}: out of range; expected {}..{}", name, text, min_value, max_value));
  }
  return v;
}

std::size_t get_bytes(std::string_view name) { return parse_bytes(name, value_or_default(name)); }

std::chrono::milliseconds get_duration(std::string_view name) {
  return parse_duration(name, value_or_default(name));
}

bool get_bool(std::string_view name) { return parse_bool(name, value_or_default(name)); }

std::size_t get_choice(std::string_view name, std::span<const std::string_view> choices) {
  std::string text = value_or_default(name);
  std::string v = lower(trim(text));
  for (std::size_t i = 0; i < choices.size(); ++i) {
    if (v == choices[i]) return i;
  }
  std::string accepted;
  for (std::size_t i = 0; i < choices.size(); ++i) {
    accepted += (i == 0 ? "" : ", ");
    accepted += choices[i];
  }
  throw config_error(fmt::format("{}={}: unknown value; expected one of {}", name, text, accepted));
}

}  // namespace seriema::config

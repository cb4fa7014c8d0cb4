// The registry of SERIEMA_* settings: every knob, its default and its meaning, in one place, so
// that typos and bad values are rejected with one clear line and seriema-info can print them all.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace seriema::config {

struct setting {
  std::string_view name;           // e.g. "SERIEMA_BOOTSTRAP_TIMEOUT"
  std::string_view default_value;  // as the user would write it
  std::string_view help;           // one line: meaning and accepted values
};

// Every setting seriema understands. Upper layers add theirs here too, so one table is the truth.
std::span<const setting> all_settings();

// Throws config_error naming the variable when the environment holds a SERIEMA_* variable that
// is not in the table (a typo would otherwise be silently ignored).
void reject_unknown_environment_settings();

// Raw lookup: the environment value, or nullopt when unset or empty. Throws config_error when
// `name` is not a registered setting (a programming error caught by the tests).
std::optional<std::string> raw(std::string_view name);

// Typed lookups. Each throws config_error naming the setting, the value and what is accepted.
std::uint64_t get_unsigned(std::string_view name, std::uint64_t min_value, std::uint64_t max_value);
std::size_t get_bytes(std::string_view name);  // accepts 4096, 64K, 2M, 1G (powers of 1024)
std::chrono::milliseconds get_duration(std::string_view name);  // accepts 30, 30s, 500ms, 2m
bool get_bool(std::string_view name);                             // 1/0, yes/no, on/off, true/false
// One of `choices`; returns the index into choices.
std::size_t get_choice(std::string_view name, std::span<const std::string_view> choices);

// Pure parsers used by the lookups (exposed for tests and for command-line flags). Each throws
// config_error with a message naming `what` when the text is not acceptable.
std::uint64_t parse_unsigned(std::string_view what, std::string_view text);
std::size_t parse_bytes(std::string_view what, std::string_view text);
std::chrono::milliseconds parse_duration(std::string_view what, std::string_view text);
bool parse_bool(std::string_view what, std::string_view text);

}  // namespace seriema::config

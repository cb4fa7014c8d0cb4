// The registry of SERIEMA_* settings: each layer registers its table (name, default, meaning)
// next to its code, so typos and bad values are rejected with one clear line and seriema-info
// prints them all, and typed parsers that name the setting in every error.
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

/// One SERIEMA_* setting as a layer declares it.
struct setting {
  std::string_view name;           ///< e.g. "SERIEMA_BOOTSTRAP_TIMEOUT"
  std::string_view default_value;  ///< as the user would write it
  std::string_view help;           ///< one line: meaning and accepted values
};

/// Adds `table`, the settings of layer `layer`, to the registry. `order` sorts layers for
/// listing (base 0, transfer 1, fabric 2, invoke 3, ...). A layer registered twice keeps its first
/// table. Thread-safe; layers call it before main through a settings_registration.
void register_settings(std::string_view layer, int order, std::span<const setting> table);

/// Registers a layer's table when constructed: each layer defines one as an inline variable in
/// its detail/settings.hpp, which the layer's headers that read settings include, so a program
/// knows the settings of every layer it uses before main runs.
struct settings_registration {
  /// Calls register_settings(layer, order, table).
  settings_registration(std::string_view layer, int order, std::span<const setting> table) {
    register_settings(layer, order, table);
  }
};

/// Every registered setting, layer by layer (in `order`), each layer's in table order.
std::vector<setting> all_settings();
/// The layers registered in this program, in `order`.
std::vector<std::string_view> registered_layers();

/// Throws config_error naming the variable when the environment holds a SERIEMA_* variable that
/// no registered layer knows (a typo would otherwise be silently ignored). The message names the
/// layers this program has: a setting of a layer it does not link is unknown to it as well.
void reject_unknown_environment_settings();

/// Raw lookup: the environment value, or nullopt when unset or empty. Throws config_error when
/// `name` is not a registered setting (a programming error caught by the tests).
std::optional<std::string> raw(std::string_view name);

/// Typed lookups (the environment value, else the setting's registered default). Each throws
/// config_error naming the setting, the value and what is accepted. This one: an integer in
/// [min_value, max_value].
std::uint64_t get_unsigned(std::string_view name, std::uint64_t min_value, std::uint64_t max_value);
/// A size in bytes: 4096, 64K, 2M, 1G (powers of 1024). Throws config_error as get_unsigned().
std::size_t get_bytes(std::string_view name);
/// A duration: 30 (seconds), 30s, 500ms, 2m. Throws config_error as get_unsigned().
std::chrono::milliseconds get_duration(std::string_view name);
/// A boolean: 1/0, yes/no, on/off, true/false. Throws config_error as get_unsigned().
bool get_bool(std::string_view name);
/// One of `choices` (case-insensitive); returns the index into choices. Throws config_error as
/// get_unsigned().
std::size_t get_choice(std::string_view name, std::span<const std::string_view> choices);

// Pure parsers used by the lookups (exposed for tests and for command-line flags). Each throws
// config_error with a message naming `what` when the text is not acceptable.

/// A non-negative integer without unit. Throws config_error naming `what` when `text` is not one.
std::uint64_t parse_unsigned(std::string_view what, std::string_view text);
/// A size as get_bytes() accepts it. Throws config_error naming `what` when `text` is not one.
std::size_t parse_bytes(std::string_view what, std::string_view text);
/// A duration as get_duration() accepts it. Throws config_error naming `what` when `text` is not
/// one.
std::chrono::milliseconds parse_duration(std::string_view what, std::string_view text);
/// A boolean as get_bool() accepts it. Throws config_error naming `what` when `text` is not one.
bool parse_bool(std::string_view what, std::string_view text);

}  // namespace seriema::config

// The registry of SERIEMA_* settings: each layer registers its table (name, default, meaning)
// and the check of its values next to its code, so typos and bad values are rejected in one
// message that names each setting, and seriema-info prints them all; the names of every layer's
// settings, known even where a layer is not linked; typed parsers that name the setting.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <seriema/base/error.hpp>
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

/// Collects the problems of a configuration, so that one error reports them all (one line per
/// problem) instead of the first only. Thread-safety: none (one per check).
class problems {
 public:
  /// Adds each line of `problem` that is not there yet (a setting two layers read, such as
  /// SERIEMA_PAGES, is reported once).
  void add(std::string_view problem);
  /// Runs `read` (a lookup or a layer's from_environment()), adding the message of the
  /// config_error it throws, if any; other exceptions go through.
  template <class Read>
  void check(Read&& read) {
    try {
      static_cast<Read&&>(read)();
    } catch (const config_error& e) {
      add(e.what());
    }
  }
  /// Whether no problem was found.
  [[nodiscard]] bool empty() const noexcept { return lines_.empty(); }
  /// The problems found, one line each, in the order found.
  [[nodiscard]] const std::vector<std::string>& lines() const noexcept { return lines_; }
  /// Throws config_error whose message is every problem, one per line, when there is any.
  void throw_if_any() const;

 private:
  std::vector<std::string> lines_;
};

/// Reads every setting of one layer with the parsers and checks the layer uses, adding what is
/// wrong to `found` (each layer's validate_settings, declared in its detail/settings.hpp).
using settings_validator = void (*)(problems& found);

/// Adds `table`, the settings of layer `layer`, to the registry, with `validate`, the check of
/// their values that check_environment() runs (null: none). `order` sorts layers for listing
/// (base 0, transfer 1, fabric 2, invoke 3, ...). A layer registered twice keeps its first table.
/// Thread-safe; layers call it before main through a settings_registration.
void register_settings(std::string_view layer, int order, std::span<const setting> table,
                       settings_validator validate = nullptr);

/// Registers a layer's table when constructed: each layer defines one as an inline variable in
/// its detail/settings.hpp, which the layer's headers that read settings include, so a program
/// knows the settings of every layer it uses before main runs.
struct settings_registration {
  /// Calls register_settings(layer, order, table, validate).
  settings_registration(std::string_view layer, int order, std::span<const setting> table,
                        settings_validator validate = nullptr) {
    register_settings(layer, order, table, validate);
  }
};

/// The names of one layer's settings.
struct layer_setting_names {
  std::string_view layer;                   ///< "transfer", "fabric", "invoke"
  std::span<const std::string_view> names;  ///< in the order of the layer's table
};
/// The names of every layer's settings, known to the base layer whether or not a program links
/// the layer: one environment serves a job of several programs, so a setting of a layer this
/// program does not link is not a typo. Equal to the tables the layers register
/// (tests/unit/base/setting_names_test.cpp compares it with what seriema-info, which links every
/// layer, lists).
std::span<const layer_setting_names> every_layer_setting_names() noexcept;

/// Every registered setting, layer by layer (in `order`), each layer's in table order.
std::vector<setting> all_settings();
/// The layers registered in this program, in `order`.
std::vector<std::string_view> registered_layers();
/// The table layer `layer` registered in this program (empty when it registered none).
std::span<const setting> registered_table(std::string_view layer);

/// Looks at every SERIEMA_* variable of the environment. Those no layer of seriema has (typos)
/// throw one config_error naming each, with the nearest known name when one is close, and the
/// layers this program links. One of a layer this program does not link is not an error: an info
/// line says once that this program does not use it.
void reject_unknown_environment_settings();

/// Checks the whole configuration at once: reject_unknown_environment_settings(), then every
/// registered layer's validator. Throws config_error listing every problem, one line each (a
/// bad value of one layer does not hide a contradiction in another). A validator that calls
/// check_environment() again (through a from_environment()) returns at once from the nested call.
void check_environment();

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

// The registry of SERIEMA_* settings (each layer's table and check), the check of the whole
// environment, and the typed, validating parsers.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <seriema/base/error.hpp>
#include <seriema/base/log.hpp>
#include <seriema/base/settings.hpp>
#include <set>

extern char** environ;

namespace seriema::config {
namespace {

struct layer_table {
  std::string_view layer;
  int order;
  std::span<const setting> table;
  settings_validator validate;
};

// The registry. Written by register_settings (before main, or by tests), read on setup paths.
struct registry {
  std::mutex mutex;
  std::vector<layer_table> layers;  // sorted by order
  // Settings of layers this program does not link that were already said to be ignored.
  std::set<std::string, std::less<>> noted_foreign;
};

registry& the_registry() {
  static registry r;  // constructed on first use: safe from other translation units' initializers
  return r;
}

std::optional<setting> find_setting(std::string_view name) {
  registry& r = the_registry();
  std::lock_guard lock(r.mutex);
  for (const auto& layer : r.layers) {
    for (const auto& s : layer.table) {
      if (s.name == name) return s;
    }
  }
  return std::nullopt;
}

// The layer of seriema whose setting `name` is, registered here or not; empty when none is.
std::string_view layer_known_for(std::string_view name) {
  for (const auto& layer : every_layer_setting_names()) {
    for (std::string_view known : layer.names) {
      if (known == name) return layer.layer;
    }
  }
  return {};
}

// Edit distance (insertions, deletions, substitutions) between two short names.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The known name nearest to `name` when it is close enough to be what was meant: at most a third
// of the part after SERIEMA_ differs (SERIEMA_TREADS -> SERIEMA_THREADS). Empty otherwise.
std::string nearest_known_name(std::string_view name) {
  std::vector<std::string_view> candidates;
  for (const auto& layer : every_layer_setting_names()) {
    candidates.insert(candidates.end(), layer.names.begin(), layer.names.end());
  }
  for (const setting& s : all_settings()) candidates.push_back(s.name);
  std::string_view best;
  std::size_t best_distance = std::string_view::npos;
  for (std::string_view candidate : candidates) {
    const std::size_t d = edit_distance(name, candidate);
    if (d < best_distance) {
      best = candidate;
      best_distance = d;
    }
  }
  const std::size_t tail = name.size() > 8 ? name.size() - 8 : 1;
  return best_distance <= std::max<std::size_t>(1, tail / 3) ? std::string(best) : std::string();
}

// Nonzero while check_environment() runs on this thread: the validators it calls may reach it
// again through a from_environment().
thread_local int checking_environment = 0;

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

void problems::add(std::string_view problem) {
  while (!problem.empty()) {
    const std::size_t end = problem.find('\n');
    const std::string_view line = problem.substr(0, end);
    if (!line.empty() && std::find(lines_.begin(), lines_.end(), line) == lines_.end()) {
      lines_.emplace_back(line);
    }
    if (end == std::string_view::npos) break;
    problem.remove_prefix(end + 1);
  }
}

void problems::throw_if_any() const {
  if (lines_.empty()) return;
  throw config_error(fmt::format("{}", fmt::join(lines_, "\n")));
}

void register_settings(std::string_view layer, int order, std::span<const setting> table,
                       settings_validator validate) {
  registry& r = the_registry();
  std::lock_guard lock(r.mutex);
  for (const auto& known : r.layers) {
    if (known.layer == layer) return;
  }
  auto at = std::find_if(r.layers.begin(), r.layers.end(),
                         [order](const layer_table& t) { return t.order > order; });
  r.layers.insert(at, layer_table{layer, order, table, validate});
}

std::vector<setting> all_settings() {
  registry& r = the_registry();
  std::lock_guard lock(r.mutex);
  std::vector<setting> all;
  for (const auto& layer : r.layers) all.insert(all.end(), layer.table.begin(), layer.table.end());
  return all;
}

std::vector<std::string_view> registered_layers() {
  registry& r = the_registry();
  std::lock_guard lock(r.mutex);
  std::vector<std::string_view> layers;
  for (const auto& layer : r.layers) layers.push_back(layer.layer);
  return layers;
}

std::span<const setting> registered_table(std::string_view layer) {
  registry& r = the_registry();
  std::lock_guard lock(r.mutex);
  for (const auto& known : r.layers) {
    if (known.layer == layer) return known.table;
  }
  return {};
}

namespace {

// Adds a problem for each SERIEMA_* variable of the environment that no layer of seriema has;
// notes once each one of a layer this program does not link.
void check_environment_names(problems& found) {
  for (char** env = environ; env != nullptr && *env != nullptr; ++env) {
    std::string_view entry(*env);
    if (!entry.starts_with("SERIEMA_")) continue;
    const std::string_view name = entry.substr(0, entry.find('='));
    if (find_setting(name)) continue;
    if (const std::string_view layer = layer_known_for(name); !layer.empty()) {
      // One environment for a job of several programs: not a typo, so not an error; said once.
      registry& r = the_registry();
      bool first = false;
      {
        std::lock_guard lock(r.mutex);
        first = r.noted_foreign.emplace(name).second;
      }
      if (first) {
        log::info("{}: a setting of the {} layer, which this program does not link (it links {}): "
                  "ignored here",
                  entry, layer, fmt::join(registered_layers(), ", "));
      }
      continue;
    }
    const std::string nearest = nearest_known_name(name);
    found.add(fmt::format(
        "{}: unknown setting: no layer of seriema has it{} (this program links the layers {}); "
        "seriema-info --settings lists every SERIEMA_* variable",
        name, nearest.empty() ? "" : fmt::format("; did you mean {}?", nearest),
        fmt::join(registered_layers(), ", ")));
  }
}

}  // namespace

void reject_unknown_environment_settings() {
  problems found;
  check_environment_names(found);
  found.throw_if_any();
}

void check_environment() {
  if (checking_environment != 0) return;  // reached again from a validator: the outer one checks
  ++checking_environment;
  struct leave {
    ~leave() { --checking_environment; }
  } leaving;
  problems found;
  check_environment_names(found);
  std::vector<settings_validator> validators;
  {
    registry& r = the_registry();
    std::lock_guard lock(r.mutex);
    for (const auto& layer : r.layers) {
      if (layer.validate != nullptr) validators.push_back(layer.validate);
    }
  }
  for (settings_validator validate : validators) validate(found);
  found.throw_if_any();
}

std::optional<std::string> raw(std::string_view name) {
  if (!find_setting(name)) {
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

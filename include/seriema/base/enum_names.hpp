// The one way seriema names enum values: each enum's to_string(E) looks its value up in a
// table of {value, name}, and fmt prints any enum that has a to_string through that.
#pragma once

#include <fmt/format.h>

#include <concepts>
#include <cstddef>
#include <string_view>
#include <type_traits>

namespace seriema {

/// One row of an enum's name table: a value and its name.
template <class E>
struct enum_name_entry {
  E value;           ///< the enumerator
  const char* name;  ///< what to_string returns for it
};

/// The name of `value` in `table`, or `unknown` when the table does not have it (a value cast
/// from an integer nothing defines).
template <class E, std::size_t N>
constexpr const char* name_in(const enum_name_entry<E> (&table)[N], E value,
                              const char* unknown = "unknown") noexcept {
  for (const auto& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return unknown;
}

/// An enum with a to_string(E) found by argument-dependent lookup.
template <class E>
concept named_enum = std::is_enum_v<E> && requires(E value) {
  { to_string(value) } -> std::convertible_to<const char*>;
};

}  // namespace seriema

// fmt::print("{}", status) prints to_string(status) for every named enum.
/// @cond INTERNAL
template <seriema::named_enum E>
struct fmt::formatter<E> : fmt::formatter<std::string_view> {
  auto format(E value, format_context& context) const {
    return fmt::formatter<std::string_view>::format(to_string(value), context);
  }
};
/// @endcond

// How a keyed container's operation reaches the part that owns the key: here at once, or as one
// call to the owner that finds the part there by the container's id.
#pragma once

#include <cstdint>
#include <seriema/containers/detail/container_table.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/invoke/invoke.hpp>
#include <type_traits>

namespace seriema::containers::detail {

/// Runs at(part, vals...) on the part of container `id` (a Container) at worker `dest`, from
/// `self`, whose own part is `here` and whose table is `table`: at once when `dest` is `self`;
/// else as a call through channel C with policy Policy that carries `at` and the values in its
/// closure when they are all trivially copyable (no serialization), or serialized as its
/// arguments, counted for the thread's progress rule (container_table::sent_one). A part gone
/// at `dest` drops the operation there (counted and logged by its table).
template <invoke::channel C, class Policy, class Container, class At, class... Vals>
invoke::call_status run_at(Container& here, fabric::thread_context& self, container_table& table,
                           std::uint32_t id, fabric::thread_id dest, At at,
                           const Vals&... vals) {
  if (dest == self.id()) {
    at(here, vals...);
    return invoke::call_status::ok;
  }
  invoke::call_status status;
  if constexpr ((std::is_trivially_copyable_v<Vals> && ...)) {
    status = invoke::call<C, Policy>(self, dest, [id, at, vals...](fabric::thread_context& s) {
      if (auto* part = containers_of(s).template find<Container>(id)) at(*part, vals...);
    });
  } else {
    status = invoke::call<C, Policy>(
        self, dest,
        [id, at](fabric::thread_context& s, Vals&... v) {
          if (auto* part = containers_of(s).template find<Container>(id)) at(*part, v...);
        },
        vals...);
  }
  table.sent_one(self);
  return status;
}

}  // namespace seriema::containers::detail

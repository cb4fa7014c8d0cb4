// The function registry: registration, the frozen open-addressing lookup table, fingerprint.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <seriema/base/error.hpp>
#include <seriema/base/log.hpp>
#include <seriema/fabric/function_registry.hpp>

namespace seriema::fabric {

namespace {

std::uint64_t fnv1a(std::string_view text, std::uint64_t hash = 0xcbf29ce484222325ull) noexcept {
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

[[noreturn]] void die(const std::string& message) {
  log::error("{}", message);
  std::abort();
}

}  // namespace

function_id function_id_of_name(std::string_view name) noexcept {
  std::uint64_t h = fnv1a(name);
  auto folded = static_cast<std::uint32_t>(h ^ (h >> 32));
  return folded & ~user_function_bit;
}

function_registry& function_registry::instance() {
  static function_registry registry;
  return registry;
}

function_id function_registry::add(std::string_view name, invoker_fn invoke,
                                   repeated_invoker_fn invoke_repeated, std::uint32_t closure_size,
                                   std::uint32_t result_size) {
  function_id id = function_id_of_name(name);
  for (const auto& entry : entries_) {
    if (entry.id != id) continue;
    if (entry.name == name) return id;  // the same wrapper seen from another translation unit
    die(fmt::format("function ids collide: '{}' and '{}' both hash to {:#x}; rename one "
                    "function or register it with an explicit id",
                    entry.name, name, id));
  }
  if (frozen_) {
    die(fmt::format("function '{}' registered after the runtime started (a library loaded "
                    "late?); every process must register the same functions before startup",
                    name));
  }
  entries_.push_back({id, std::string(name), invoke, invoke_repeated, closure_size, result_size});
  return id;
}

function_id function_registry::add_user(function_id id, std::string_view name, invoker_fn invoke,
                                        repeated_invoker_fn invoke_repeated,
                                        std::uint32_t closure_size, std::uint32_t result_size) {
  id |= user_function_bit;
  for (const auto& entry : entries_) {
    if (entry.id == id) {
      if (entry.name == name) return id;
      throw error(fmt::format("register_function: id {:#x} is already '{}' (wanted for '{}')",
                              id & ~user_function_bit, entry.name, name));
    }
  }
  if (frozen_) {
    throw error(fmt::format("register_function('{}'): the runtime has started; register "
                            "functions before creating it",
                            name));
  }
  entries_.push_back({id, std::string(name), invoke, invoke_repeated, closure_size, result_size});
  return id;
}

void function_registry::freeze() {
  if (frozen_) return;
  std::size_t capacity = std::bit_ceil(std::max<std::size_t>(16, entries_.size() * 2));
  table_.assign(capacity, 0);
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    std::size_t slot = entries_[i].id & (capacity - 1);
    while (table_[slot] != 0) slot = (slot + 1) & (capacity - 1);
    table_[slot] = static_cast<std::uint32_t>(i + 1);
  }
  frozen_ = true;
}

const function_entry* function_registry::find(function_id id) const noexcept {
  if (!frozen_) {
    for (const auto& entry : entries_) {
      if (entry.id == id) return &entry;
    }
    return nullptr;
  }
  const std::size_t mask = table_.size() - 1;
  for (std::size_t slot = id & mask;; slot = (slot + 1) & mask) {
    std::uint32_t index = table_[slot];
    if (index == 0) return nullptr;
    if (entries_[index - 1].id == id) return &entries_[index - 1];
  }
}

std::uint64_t function_registry::fingerprint() const noexcept {
  // Sum of per-entry hashes: independent of registration order.
  std::uint64_t sum = entries_.size();
  for (const auto& entry : entries_) {
    sum += fnv1a(entry.name, fnv1a(std::string_view(reinterpret_cast<const char*>(&entry.id),
                                                    sizeof entry.id)));
  }
  return sum;
}

}  // namespace seriema::fabric

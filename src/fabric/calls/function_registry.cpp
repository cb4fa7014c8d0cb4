// The function registry: registration, the frozen open-addressing lookup table, fingerprint.
#include <fmt/format.h>

#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
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

function_id function_id_of_address(invoker_fn invoke) noexcept {
  Dl_info info{};
  const auto address = reinterpret_cast<std::uintptr_t>(invoke);
  if (dladdr(reinterpret_cast<void*>(invoke), &info) == 0 || info.dli_fbase == nullptr) {
    die(fmt::format("SERIEMA_FUNCTION_IDS=address: the function at {:#x} is in no loaded binary",
                    address));
  }
  const std::uintptr_t offset = address - reinterpret_cast<std::uintptr_t>(info.dli_fbase);
  if (offset >= user_function_bit) {
    die(fmt::format("SERIEMA_FUNCTION_IDS=address: a function lies {:#x} bytes into {}, beyond "
                    "what an id holds; use SERIEMA_FUNCTION_IDS=hash",
                    offset, info.dli_fname != nullptr ? info.dli_fname : "its binary"));
  }
  return static_cast<function_id>(offset);
}

namespace {

// The GNU build id note of the main program, if it has one (dl_iterate_phdr visits it first).
std::string build_id_of_executable() {
  std::string id;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) -> int {
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_NOTE) continue;
          const auto* p = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
          const unsigned char* end = p + ph.p_memsz;
          while (p + sizeof(ElfW(Nhdr)) <= end) {
            const auto* note = reinterpret_cast<const ElfW(Nhdr)*>(p);
            const unsigned char* name = p + sizeof(ElfW(Nhdr));
            const unsigned char* desc = name + ((note->n_namesz + 3) & ~3u);
            if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 &&
                std::memcmp(name, "GNU", 4) == 0 && desc + note->n_descsz <= end) {
              static_cast<std::string*>(out)->assign(reinterpret_cast<const char*>(desc),
                                                     note->n_descsz);
              return 1;
            }
            p = desc + ((note->n_descsz + 3) & ~3u);
          }
        }
        return 1;  // only the main program
      },
      &id);
  return id;
}

}  // namespace

std::uint64_t executable_identity() {
  const std::string build_id = build_id_of_executable();
  if (!build_id.empty()) return fnv1a(build_id);
  std::FILE* file = std::fopen("/proc/self/exe", "rb");
  if (file == nullptr) throw error("cannot read /proc/self/exe to identify the binary");
  std::uint64_t hash = 0xcbf29ce484222325ull;
  char chunk[1 << 16];
  for (std::size_t n; (n = std::fread(chunk, 1, sizeof chunk, file)) > 0;) {
    hash = fnv1a(std::string_view(chunk, n), hash);
  }
  std::fclose(file);
  return hash;
}

function_registry::function_registry() {
  // Read once, before main (the first registration): ids cannot change afterwards. A value other
  // than these two is refused when the runtime starts (the settings registry names it).
  const char* mode = std::getenv("SERIEMA_FUNCTION_IDS");
  if (mode != nullptr && std::string_view(mode) == "address") mode_ = function_id_mode::address;
}

function_registry& function_registry::instance() {
  static function_registry registry;
  return registry;
}

function_id function_registry::add(std::string_view name, invoker_fn invoke,
                                   repeated_invoker_fn invoke_repeated, std::uint32_t closure_size,
                                   std::uint32_t result_size) {
  const function_id id = mode_ == function_id_mode::address ? function_id_of_address(invoke)
                                                             : function_id_of_name(name);
  for (const auto& entry : entries_) {
    if (entry.id != id) continue;
    if (entry.name == name) return id;  // the same wrapper seen from another translation unit
    die(fmt::format("function ids collide: '{}' and '{}' both have id {:#x} ({}); rename one "
                    "function or register it with an explicit id",
                    entry.name, name, id,
                    mode_ == function_id_mode::address
                        ? "the same code offset: two binaries, or identical code folded into one"
                        : "their names hash alike"));
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

// Remote exceptions: the registry of exception types rebuilt at the caller, the bytes a failure
// reply carries (registered id, demangled type name, what()), and the exceptions a future's
// get() throws for each outcome.
#include <cxxabi.h>
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <seriema/fabric/function_registry.hpp>
#include <seriema/invoke/errors.hpp>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace seriema::invoke::detail {

namespace {

struct registered_exception {
  std::uint32_t id;
  std::string name;  // mangled
  exception_maker maker;
  exception_matcher matcher;
};

struct exception_registry {
  std::mutex mutex;
  std::vector<registered_exception> types;  // in registration order
};

exception_registry& registry() {
  static exception_registry instance;
  return instance;
}

template <class E>
void add_standard() {
  add_remote_exception(typeid(E).name(), &make_rebuilt<E>, &holds<E>);
}

// The standard exceptions, bases before the types derived from them: the matcher probes the
// newest registration first, so the most derived registered type wins. std::exception itself is
// not registered: an exception of no registered type arrives as remote_error.
const bool standard_registered = [] {
  add_standard<std::bad_alloc>();
  add_standard<std::logic_error>();
  add_standard<std::invalid_argument>();
  add_standard<std::domain_error>();
  add_standard<std::length_error>();
  add_standard<std::out_of_range>();
  add_standard<std::runtime_error>();
  add_standard<std::range_error>();
  add_standard<std::overflow_error>();
  add_standard<std::underflow_error>();
  return true;
}();

std::string demangle(const char* mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(mangled, nullptr, nullptr,
                                                                  &status),
                                              std::free);
  return status == 0 && name ? std::string(name.get()) : std::string(mangled);
}

// The demangled name of `type`, remembered per thread (demangling allocates and parses).
const std::string& demangled(const std::type_info& type) {
  thread_local std::unordered_map<const std::type_info*, std::string> names;
  auto [at, added] = names.try_emplace(&type);
  if (added) at->second = demangle(type.name());
  return at->second;
}

// Details on the wire: version, registered id, then the type name and what(), each as a 32-bit
// length and its bytes.
constexpr std::uint8_t details_version = 1;
constexpr std::size_t max_what = 1024;
constexpr std::size_t max_type_name = 1024;

void put_u32(std::vector<std::byte>& out, std::uint32_t value) {
  const auto* p = reinterpret_cast<const std::byte*>(&value);
  out.insert(out.end(), p, p + sizeof value);
}
void put_text(std::vector<std::byte>& out, std::string_view text, std::size_t limit) {
  text = text.substr(0, limit);
  put_u32(out, static_cast<std::uint32_t>(text.size()));
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  out.insert(out.end(), p, p + text.size());
}

// Reads what put_u32 / put_text wrote, bounded by the bytes left.
class details_reader {
 public:
  explicit details_reader(std::span<const std::byte> bytes) : bytes_(bytes) {}
  bool u8(std::uint8_t& out) { return take(&out, 1); }
  bool u32(std::uint32_t& out) { return take(&out, sizeof out); }
  bool text(std::string& out) {
    std::uint32_t size = 0;
    if (!u32(size) || size > bytes_.size() - at_) return false;
    out.assign(reinterpret_cast<const char*>(bytes_.data() + at_), size);
    at_ += size;
    return true;
  }
  [[nodiscard]] bool finished() const noexcept { return at_ == bytes_.size(); }

 private:
  bool take(void* out, std::size_t size) {
    if (size > bytes_.size() - at_) return false;
    std::memcpy(out, bytes_.data() + at_, size);
    at_ += size;
    return true;
  }
  std::span<const std::byte> bytes_;
  std::size_t at_ = 0;
};

// The registered id for the exception being handled: its exact type's, else the newest
// registered type it derives from, else 0.
std::uint32_t registered_id_of_current(const std::type_info* type) {
  exception_registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (type != nullptr) {
    for (const registered_exception& e : r.types) {
      if (e.name == type->name()) return e.id;
    }
  }
  const std::exception_ptr current = std::current_exception();
  for (auto e = r.types.rbegin(); e != r.types.rend(); ++e) {
    if (e->matcher(current)) return e->id;
  }
  return 0;
}

exception_maker maker_of(std::uint32_t id) {
  exception_registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (const registered_exception& e : r.types) {
    if (e.id == id) return e.maker;
  }
  return nullptr;
}

std::string target_text(fabric::thread_id destination, int process) {
  return fmt::format("call to thread {} (rank {})", destination, process);
}

}  // namespace

void add_remote_exception(const char* type_name, exception_maker maker,
                          exception_matcher matcher) {
  const std::uint32_t id = fabric::function_id_of_name(type_name) | 1u;  // never 0
  exception_registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (const registered_exception& e : r.types) {
    if (e.name == type_name) return;  // registered already
    if (e.id == id) {
      throw error(fmt::format("register_remote_exception: {} and {} have the same id; register "
                              "only one of them",
                              demangle(e.name.c_str()), demangle(type_name)));
    }
  }
  r.types.push_back({id, type_name, maker, matcher});
}

void describe_current_exception(std::vector<std::byte>& out, const std::exception* caught) {
  const std::type_info* type = abi::__cxa_current_exception_type();
  try {
    std::string type_name = type != nullptr ? demangled(*type) : std::string("unknown");
    if (caught == nullptr) type_name += " (not a std::exception)";
    out.push_back(static_cast<std::byte>(details_version));
    put_u32(out, registered_id_of_current(type));
    put_text(out, type_name, max_type_name);
    put_text(out, caught != nullptr ? std::string_view(caught->what()) : std::string_view(),
             max_what);
  } catch (...) {  // out of memory: the caller learns the failure without its details
    out.clear();
  }
}

namespace {
// The parts of a failure's details; false when the bytes are not details.
bool parse_details(std::span<const std::byte> details, std::uint32_t& id, std::string& type_name,
                   std::string& what) {
  details_reader in(details);
  std::uint8_t version = 0;
  return in.u8(version) && version == details_version && in.u32(id) && in.text(type_name) &&
         in.text(what) && in.finished();
}
}  // namespace

std::string summarize_remote_exception(std::span<const std::byte> details) {
  std::uint32_t id = 0;
  std::string type_name;
  std::string what;
  if (!parse_details(details, id, type_name, what)) return {};
  return what.empty() ? type_name : type_name + ": " + what;
}

std::exception_ptr rebuild_remote_exception(std::span<const std::byte> details,
                                            fabric::call_status status,
                                            fabric::thread_id destination, int process) {
  std::uint32_t id = 0;
  std::string type_name;
  std::string what;
  if (!parse_details(details, id, type_name, what)) {
    id = 0;
    type_name = "unknown (the callee sent no description)";
    what.clear();
  }
  const std::string text =
      fmt::format("{} threw {}{}{}", target_text(destination, process), type_name,
                  what.empty() ? "" : ": ", what);
  const exception_maker maker = id != 0 ? maker_of(id) : nullptr;
  if (maker != nullptr) return maker(what, remote_origin(destination, process, type_name, what));
  return std::make_exception_ptr(
      remote_error(text, status, destination, process, std::move(type_name), std::move(what)));
}

std::exception_ptr outcome_exception(fabric::outcome why, fabric::call_status status,
                                     fabric::thread_id destination, int process) {
  std::string text = fabric::describe(why, destination, process);
  if (status != fabric::call_status::ok) text += fmt::format(" ({})", fabric::to_string(status));
  switch (why) {
    case fabric::outcome::may_have_executed:
      return std::make_exception_ptr(
          may_have_executed_error(text, why, status, destination, process));
    case fabric::outcome::deadline_exceeded:
      return std::make_exception_ptr(
          deadline_exceeded_error(text, why, status, destination, process));
    case fabric::outcome::cancelled:
      return std::make_exception_ptr(cancelled_error(text, why, status, destination, process));
    case fabric::outcome::threw:  // without details
      return rebuild_remote_exception({}, status, destination, process);
    default:
      return std::make_exception_ptr(
          not_executed_error(text, fabric::outcome::not_executed, status, destination, process));
  }
}

}  // namespace seriema::invoke::detail

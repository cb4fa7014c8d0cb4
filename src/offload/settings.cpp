// The offload module's SERIEMA_* settings (what engine_options::from_environment() reads).
#include <seriema/offload/detail/settings.hpp>
#include <seriema/offload/engine.hpp>

namespace seriema::offload {
namespace detail {
namespace {

constexpr config::setting table[] = {
    {"SERIEMA_OFFLOAD_EXECUTORS", "1",
     "executor threads (lanes) of an offload engine made without options (1..64); each holds "
     "one of the process's SERIEMA_ATTACH_SLOTS"},
    {"SERIEMA_OFFLOAD_METHOD", "sleep",
     "how an offload engine made without options reaches the transport: sleep (executors sleep "
     "when idle), spin (executors spin), direct (requesters post under a lock), delegate (no "
     "executor threads: requesters run each other's requests)"},
};

constexpr std::string_view method_choices[] = {"direct", "spin", "sleep", "delegate"};

}  // namespace

std::span<const config::setting> settings() noexcept { return table; }

void validate_settings(config::problems& found) {
  found.check([] { (void)engine_options::from_environment(); });
}

}  // namespace detail

engine_options engine_options::from_environment() {
  engine_options options;
  options.executors =
      static_cast<unsigned>(config::get_unsigned("SERIEMA_OFFLOAD_EXECUTORS", 1, 64));
  options.mode = parse_method(
      detail::method_choices[config::get_choice("SERIEMA_OFFLOAD_METHOD", detail::method_choices)]);
  return options;
}

}  // namespace seriema::offload

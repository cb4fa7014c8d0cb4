// Fuzzes the settings parsers (SERIEMA_* values): numbers, byte sizes, durations and yes/no.
// config_error is the expected answer to a bad value; anything else is a finding.
#include <cstdint>
#include <seriema/base/error.hpp>
#include <seriema/base/settings.hpp>
#include <string_view>

namespace config = seriema::config;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto refused = [](auto parse) {
    try {
      (void)parse();
    } catch (const seriema::config_error&) {
    }
  };
  refused([&] { return config::parse_unsigned("SERIEMA_FUZZ", text); });
  refused([&] { return config::parse_bytes("SERIEMA_FUZZ", text); });
  refused([&] { return config::parse_duration("SERIEMA_FUZZ", text); });
  refused([&] { return config::parse_bool("SERIEMA_FUZZ", text); });
  return 0;
}

// The offload module's SERIEMA_* settings: registered before main in every program that
// includes the engine's header (see settings_registration in seriema/base/settings.hpp).
#pragma once

#include <seriema/base/settings.hpp>
#include <seriema/invoke/detail/settings.hpp>
#include <span>

namespace seriema::offload::detail {

// The table, defined in src/offload/settings.cpp next to the code that reads it.
std::span<const config::setting> settings() noexcept;
// Reads every setting of the table, adding each problem to `found`.
void validate_settings(config::problems& found);

inline const config::settings_registration settings_registered{"offload", 8, settings(),
                                                               &validate_settings};

}  // namespace seriema::offload::detail

// The invoke layer's SERIEMA_* settings: registered before main in every program that includes
// an invoke header reading settings (see settings_registration in seriema/base/settings.hpp).
#pragma once

#include <seriema/base/settings.hpp>
#include <seriema/fabric/detail/settings.hpp>
#include <span>

namespace seriema::invoke::detail {

// The table, defined in src/invoke/settings.cpp next to the code that reads it.
std::span<const config::setting> settings() noexcept;
// Reads every setting of the table with the parsers and checks the layer uses, adding each
// problem to `found` (config::check_environment() runs it).
void validate_settings(config::problems& found);

inline const config::settings_registration settings_registered{"invoke", 3, settings(),
                                                               &validate_settings};

}  // namespace seriema::invoke::detail

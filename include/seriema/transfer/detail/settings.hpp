// The transfer layer's SERIEMA_* settings: registered before main in every program that includes
// a transfer header reading settings (see settings_registration in seriema/base/settings.hpp).
#pragma once

#include <seriema/base/settings.hpp>
#include <span>

namespace seriema::transfer::detail {

// The table, defined in src/transfer/settings.cpp next to the code that reads it.
std::span<const config::setting> settings() noexcept;
// Reads every setting of the table with the parsers and checks the layer uses, adding each
// problem to `found` (config::check_environment() runs it).
void validate_settings(config::problems& found);

inline const config::settings_registration settings_registered{"transfer", 1, settings(),
                                                               &validate_settings};

}  // namespace seriema::transfer::detail

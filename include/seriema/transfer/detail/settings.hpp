// The transfer layer's SERIEMA_* settings: registered before main in every program that includes
// a transfer header reading settings (see settings_registration in seriema/base/settings.hpp).
#pragma once

#include <seriema/base/settings.hpp>
#include <span>

namespace seriema::transfer::detail {

// The table, defined in src/transfer/settings.cpp next to the code that reads it.
std::span<const config::setting> settings() noexcept;

inline const config::settings_registration settings_registered{"transfer", 1, settings()};

}  // namespace seriema::transfer::detail

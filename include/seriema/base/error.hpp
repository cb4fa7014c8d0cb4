// Exception types for the setup/control path. The data path never throws: it returns statuses.
#pragma once

#include <stdexcept>
#include <string>

namespace seriema {

/// Any failure on the setup or control path (bootstrap, placement, endpoint creation, bad
/// configuration). The message names the cause and, where there is one, the fix.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A SERIEMA_* setting (environment or option) has a value we cannot use. The message names the
/// setting, the value, and what would be accepted.
class config_error : public error {
 public:
  using error::error;
};

/// A wait on the control path (a collective, finalize()) passed its deadline; the message names
/// what was waited for and who did not answer.
class deadline_error : public error {
 public:
  using error::error;
};

/// A UCX call failed on the setup/control path; carries the UCX status text.
class ucx_error : public error {
 public:
  using error::error;
};

}  // namespace seriema

// Names of the bootstrap modes (for messages and seriema-info).
#include <seriema/fabric/bootstrap.hpp>

namespace seriema::fabric {

const char* to_string(bootstrap_mode mode) noexcept {
  switch (mode) {
    case bootstrap_mode::pmix:
      return "pmix";
    case bootstrap_mode::launcher:
      return "seriema-run";
    case bootstrap_mode::single:
      return "single";
  }
  return "unknown";
}

}  // namespace seriema::fabric

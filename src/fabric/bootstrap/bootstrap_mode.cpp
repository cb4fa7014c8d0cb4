// Names of the bootstrap modes (for messages and seriema-info).
#include <seriema/base/enum_names.hpp>
#include <seriema/fabric/bootstrap.hpp>

namespace seriema::fabric {

const char* to_string(bootstrap_mode mode) noexcept {
  static constexpr enum_name_entry<bootstrap_mode> names[] = {
      {bootstrap_mode::pmix, "pmix"},
      {bootstrap_mode::launcher, "seriema-run"},
      {bootstrap_mode::single, "single"},
  };
  return name_in(names, mode);
}

}  // namespace seriema::fabric

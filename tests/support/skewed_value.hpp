// A result type whose bytes never deserialize, shared by the futures and coroutines tests: it
// writes one 32-bit word and reads a 64-bit one (what a caller built from another version of
// the type would see), so the caller's future ends not_executed and counts a rejected result.
#pragma once

#include <cstdint>
#include <string>

namespace seriema::test {

struct skewed {
  std::int64_t value = 0;
  std::string note;  // not trivially copyable: travels serialized
  template <class Archive>
  void save(Archive& archive) const {
    archive(static_cast<std::int32_t>(value));
  }
  template <class Archive>
  void load(Archive& archive) {
    archive(value);
  }
};

}  // namespace seriema::test

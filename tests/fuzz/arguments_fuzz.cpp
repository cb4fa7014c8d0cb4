// Fuzzes the decoding of serialized call arguments (invoke::detail::decode_arguments, what a
// receiver does with the buffer of call(dest, f, args...)) into a string, a vector and a map.
// A refusal is the expected answer to bytes that are not a serialization; anything else (a crash,
// an allocation far beyond the input) is a finding.
#include <cstdint>
#include <map>
#include <seriema/invoke/invoke.hpp>
#include <string>
#include <tuple>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  std::tuple<std::string, std::vector<std::uint64_t>, std::map<std::uint32_t, std::string>> args;
  (void)seriema::invoke::detail::decode_arguments(bytes, args);
  return 0;
}

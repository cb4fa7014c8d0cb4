// The archives of serialized arguments: argument_output_archive writes exactly the bytes
// cereal::BinaryOutputArchive writes (the wire format stays cereal's binary one), and
// argument_input_archive reads them back to equal values.
#include <gtest/gtest.h>

#include <cereal/archives/binary.hpp>
#include <cereal/types/map.hpp>
#include <cereal/types/optional.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/tuple.hpp>
#include <cereal/types/utility.hpp>
#include <cereal/types/vector.hpp>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <seriema/invoke/detail/argument_archive.hpp>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

using seriema::invoke::detail::argument_input_archive;
using seriema::invoke::detail::argument_output_archive;

struct point {
  double x = 0;
  std::string label;
  std::vector<std::int16_t> tags;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(x, label, tags);
  }
  bool operator==(const point&) const = default;
};

template <class... Ts>
std::vector<std::byte> with_cereal(const Ts&... values) {
  std::ostringstream stream;
  {
    cereal::BinaryOutputArchive archive(stream);
    archive(values...);
  }
  const std::string bytes = stream.str();
  const auto* first = reinterpret_cast<const std::byte*>(bytes.data());
  return {first, first + bytes.size()};
}

template <class... Ts>
std::vector<std::byte> with_ours(const Ts&... values) {
  std::vector<std::byte> out;
  argument_output_archive archive(out);
  archive(values...);
  return out;
}

// Writes `values` with both archives, compares the bytes, and reads them back.
template <class... Ts>
void check_round_trip(const Ts&... values) {
  const std::vector<std::byte> ours = with_ours(values...);
  ASSERT_EQ(ours, with_cereal(values...));
  std::tuple<Ts...> read;
  argument_input_archive input(ours);
  std::apply([&](auto&... v) { input(v...); }, read);
  EXPECT_EQ(input.remaining(), 0u);
  EXPECT_EQ(read, std::make_tuple(values...));
}

TEST(ArgumentArchive, ArithmeticValuesAreTheirBytes) {
  check_round_trip(std::uint64_t{42}, -7, 2.5, 'c', true, std::int8_t{-1});
  EXPECT_EQ(with_ours(std::uint32_t{0x01020304}).size(), 4u);
}

TEST(ArgumentArchive, StringsAndContainersCarryASizeTag) {
  check_round_trip(std::string{}, std::string("hello"), std::string(1000, 'x'));
  check_round_trip(std::vector<double>{1, 2, 3}, std::vector<std::string>{"a", "", "bc"});
  check_round_trip(std::map<std::string, std::vector<int>>{{"k", {1, 2}}, {"", {}}});
}

TEST(ArgumentArchive, NestedAndUserTypes) {
  check_round_trip(std::optional<std::string>{}, std::optional<std::string>{"set"});
  check_round_trip(std::pair<int, std::string>{3, "three"},
                   std::tuple<char, std::vector<point>>{'p', {{1.5, "one", {1, -1}}, {}}});
  check_round_trip(point{-0.25, std::string(70, 'q'), {7}});
}

TEST(ArgumentArchive, AppendsToWhatTheVectorHolds) {
  std::vector<std::byte> out{std::byte{0xEE}};
  argument_output_archive archive(out);
  archive(std::string("ab"));
  ASSERT_EQ(out.size(), 1u + 8u + 2u);  // the tag byte, the size tag, the letters
  EXPECT_EQ(out[0], std::byte{0xEE});
  EXPECT_EQ(out[9], std::byte{'a'});
}

}  // namespace

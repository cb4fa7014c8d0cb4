// Record serialization: copy_in_pieces and serialize_record copy every byte exactly, at any
// size and alignment, and write nothing outside the record (the paired 16-byte stores included).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>
#include <seriema/invoke/detail/record_copy.hpp>
#include <seriema/invoke/detail/wire.hpp>

namespace {

using seriema::invoke::detail::copy_in_pieces;
using seriema::invoke::detail::serialize_record;
namespace wire = seriema::invoke::wire;

constexpr std::byte guard{0xA5};

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = static_cast<std::byte>((i * 131 + seed * 7 + 1) & 0xFF);
  }
  return out;
}

template <std::size_t Width>
void check_copies_exactly() {
  constexpr std::size_t slack = 32;
  for (std::size_t n = 0; n <= 300; ++n) {
    for (std::size_t from_offset : {0u, 1u, 8u, 12u}) {
      for (std::size_t to_offset : {0u, 3u, 8u, 16u}) {
        const std::vector<std::byte> source = pattern(n + from_offset, static_cast<unsigned>(n));
        std::vector<std::byte> target(slack + to_offset + n + slack, guard);
        std::byte* to = target.data() + slack + to_offset;
        copy_in_pieces<Width>(to, source.data() + from_offset, n);
        for (std::size_t i = 0; i < n; ++i) {
          ASSERT_EQ(to[i], source[from_offset + i])
              << "width " << Width << ", " << n << " bytes, byte " << i << " (from +"
              << from_offset << ", to +" << to_offset << ")";
        }
        for (std::size_t i = 0; i < slack + to_offset; ++i) ASSERT_EQ(target[i], guard) << n;
        for (std::size_t i = slack + to_offset + n; i < target.size(); ++i) {
          ASSERT_EQ(target[i], guard) << "width " << Width << ", " << n << " bytes: past the end";
        }
      }
    }
  }
}

TEST(RecordCopy, EightBytePiecesCopyEveryByteAndNothingElse) { check_copies_exactly<8>(); }

TEST(RecordCopy, FourBytePiecesCopyEveryByteAndNothingElse) { check_copies_exactly<4>(); }

TEST(RecordCopy, SerializedRecordParsesBackToItsParts) {
  for (std::size_t closure_size : {8u, 16u, 24u, 40u, 64u, 200u, 256u}) {
    for (std::size_t buffer_size : {0u, 1u, 13u, 64u}) {
      const std::vector<std::byte> closure = pattern(closure_size, 3);
      const std::vector<std::byte> buffer = pattern(buffer_size, 5);
      const std::size_t size = wire::record_size(closure_size, buffer_size, 0);
      std::vector<std::byte> target(size + 64, guard);
      serialize_record(target.data(), size, 0x1234, closure, 0, {}, buffer);
      wire::record_header header;
      std::memcpy(&header, target.data(), sizeof header);
      EXPECT_EQ(header.function, 0x1234u);
      EXPECT_EQ(header.size, size);
      EXPECT_EQ(header.closure_size, closure_size);
      EXPECT_EQ(header.buffer_size, buffer_size);
      EXPECT_EQ(header.flags, 0u);
      EXPECT_EQ(header.repeat, 0u);
      const std::byte* at = target.data() + sizeof header;
      for (std::size_t i = 0; i < closure_size; ++i) ASSERT_EQ(at[i], closure[i]) << closure_size;
      at += closure_size;
      for (std::size_t i = 0; i < buffer_size; ++i) ASSERT_EQ(at[i], buffer[i]) << buffer_size;
      at += buffer_size;
      for (; at < target.data() + size; ++at) ASSERT_EQ(*at, std::byte{0}) << "padding is zeroed";
      for (; at < target.data() + target.size(); ++at) ASSERT_EQ(*at, guard) << "past the record";
    }
  }
}

}  // namespace

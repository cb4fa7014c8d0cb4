// How a sender writes a record into the ring: the header as words composed in registers, the
// closure and extras copied in pieces no wider than the stores that filled them (store forwarding).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <seriema/fabric/function_registry.hpp>
#include <seriema/invoke/detail/wire.hpp>
#include <span>
#include <type_traits>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace seriema::invoke::detail {

// Copies `n` bytes with loads and stores of `Width` bytes. The caller usually stored a closure's
// (or an extra's) fields one by one just before the call, and a load wider than those stores
// cannot be forwarded from them: it waits until they reached the cache, behind every earlier
// store to the ring (an 8-byte sequence field, then a 16-byte copy, cost a 64-byte closure about
// 40 ns per call). Loads no wider than the fields are forwarded at once. Unrolled for closures
// up to 256 bytes: as a loop (one taken branch per piece), joined 64- and 256-byte closures ran
// at 239-243 and 65-72 M calls/s instead of 275 and 84 M (trad through aggregator_to).
// On x86-64, 8-byte pieces are stored in pairs: two 8-byte loads into one SSE register (movq,
// movhps; each still forwardable), one 16-byte store. A store takes a store-buffer entry until
// its line is owned, and stores leave that buffer in order: behind the published word of a
// `write` call, whose line the polling receiver keeps taking back, a 280-byte record held 35
// entries and now holds 19. Alternated runs (fast spells): `write` 256 B 27-32 -> 31-36 M calls/s,
// `trad` 64 B 275-286 -> 324-355 M, 256 B 82-86 -> 95-99 M; 8 B unchanged.
template <std::size_t Width>
[[gnu::always_inline]] inline void copy_in_pieces(std::byte* to, const std::byte* from,
                                                  std::size_t n) noexcept {
  using piece = std::conditional_t<Width == 8, std::uint64_t, std::uint32_t>;
  static_assert(sizeof(piece) == Width);
  std::size_t i = 0;
#if defined(__SSE2__) && defined(__GNUC__)
  if constexpr (Width == 8) {
#pragma GCC unroll 16
    for (; i + 16 <= n; i += 16) {
      using eight = std::byte[8];
      __m128i pair;  // asm, so the compiler cannot merge the two loads into one 16-byte load
      asm("movq %1, %0\n\tmovhps %2, %0"
          : "=&x"(pair)
          : "m"(*reinterpret_cast<const eight*>(from + i)),
            "m"(*reinterpret_cast<const eight*>(from + i + 8)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(to + i), pair);
    }
  }
#endif
#pragma GCC unroll 32
  for (; i + Width <= n; i += Width) {
    piece word;
    std::memcpy(&word, from + i, Width);
#if defined(__GNUC__)
    asm("" : "+r"(word));  // keeps the compiler from merging the loads into wider ones
#endif
    std::memcpy(to + i, &word, Width);
  }
  if (i < n) std::memcpy(to + i, from + i, n - i);
}

// Writes the record header, closure, extras and buffer at `p` (`size` bytes, from
// wire::record_size), and zeroes the padding after them (no stale bytes travel).
[[gnu::always_inline]] inline void serialize_record(std::byte* p, std::size_t size,
                                                    fabric::function_id function,
                                                    std::span<const std::byte> closure,
                                                    std::uint32_t flags,
                                                    std::span<const std::byte> extras,
                                                    std::span<const std::byte> buffer) noexcept {
  static_assert(sizeof(fabric::function_id) == 4 && sizeof(wire::record_header) == 24);
  if constexpr (std::endian::native == std::endian::little) {
    // The header as three 8-byte stores of words composed in registers. Built as a struct on
    // the stack and copied, its 4-byte stores were reloaded by a 16-byte load, which the CPU
    // cannot forward from them: every call waited for its stores to reach the cache.
    const std::uint64_t words[3] = {
        std::uint64_t{function} | std::uint64_t{static_cast<std::uint32_t>(size)} << 32,
        std::uint64_t{static_cast<std::uint32_t>(closure.size())} |
            std::uint64_t{static_cast<std::uint32_t>(buffer.size())} << 32,
        std::uint64_t{flags}};
    for (std::size_t i = 0; i < 3; ++i) std::memcpy(p + 8 * i, &words[i], 8);
  } else {
    const wire::record_header h{function,
                                static_cast<std::uint32_t>(size),
                                static_cast<std::uint32_t>(closure.size()),
                                static_cast<std::uint32_t>(buffer.size()),
                                flags,
                                0};
    std::memcpy(p, &h, sizeof h);
  }
  std::byte* q = p + sizeof(wire::record_header);
  copy_in_pieces<8>(q, closure.data(), closure.size());
  q += closure.size();
  if (!extras.empty()) {
    copy_in_pieces<4>(q, extras.data(), extras.size());  // reply or notify: 4-byte fields
    q += extras.size();
  }
  if (!buffer.empty()) {
    std::memcpy(q, buffer.data(), buffer.size());
    q += buffer.size();
  }
  std::memset(q, 0, static_cast<std::size_t>(p + size - q));
}

}  // namespace seriema::invoke::detail

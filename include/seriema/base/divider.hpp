// Division of 64-bit unsigned integers by a divisor fixed at run time, by a multiplication and
// shifts instead of a `div` instruction (20-90 cycles): a container's owner and slot of an index.
#pragma once

#include <bit>
#include <cstdint>

namespace seriema {

namespace detail {
__extension__ using uint128 = unsigned __int128;  // GCC and Clang (-Wpedantic: an extension)
}  // namespace detail

/// n / d and n % d for every 64-bit n, with d fixed when the divider is made (d >= 1): the
/// round-up method of Granlund and Montgomery ("Division by invariant integers using
/// multiplication", 1994), as libdivide implements it. For d a power of two, a shift. Otherwise
/// q = (n * magic) >> 64 is corrected by one halving add when the 64-bit magic needs a 65th bit.
class divider {
 public:
  /// A divider by `d`; d = 0 is taken as 1 (no division by zero to report here: callers divide
  /// by counts of workers or indexes, at least 1).
  explicit constexpr divider(std::uint64_t d = 1) noexcept : d_(d == 0 ? 1 : d) {
    const int log = 63 - std::countl_zero(d_);
    if ((d_ & (d_ - 1)) == 0) {
      shift_ = static_cast<std::uint8_t>(log);  // magic_ 0: a shift
      return;
    }
    // 2^(64 + log) / d fits 64 bits, as d > 2^log.
    const detail::uint128 numerator = detail::uint128{1} << (64 + log);
    std::uint64_t proposed = static_cast<std::uint64_t>(numerator / d_);
    const std::uint64_t rem = static_cast<std::uint64_t>(numerator % d_);
    if (d_ - rem < (std::uint64_t{1} << log)) {
      shift_ = static_cast<std::uint8_t>(log);  // this power is exact for every n
    } else {
      // One power more: 2^(65 + log) / d, its 65th bit carried by the halving add.
      proposed += proposed;
      const std::uint64_t twice_rem = rem + rem;
      if (twice_rem >= d_ || twice_rem < rem) proposed += 1;
      shift_ = static_cast<std::uint8_t>(log);
      add_ = true;
    }
    magic_ = proposed + 1;
  }

  /// The divisor.
  [[nodiscard]] constexpr std::uint64_t divisor() const noexcept { return d_; }
  /// n / d.
  [[nodiscard]] constexpr std::uint64_t quotient(std::uint64_t n) const noexcept {
    if (magic_ == 0) return n >> shift_;
    const auto q = static_cast<std::uint64_t>(
        (static_cast<detail::uint128>(n) * magic_) >> 64);
    if (!add_) return q >> shift_;
    return (((n - q) >> 1) + q) >> shift_;
  }
  /// n % d.
  [[nodiscard]] constexpr std::uint64_t remainder(std::uint64_t n) const noexcept {
    return n - quotient(n) * d_;
  }

 private:
  std::uint64_t d_;
  std::uint64_t magic_ = 0;
  std::uint8_t shift_ = 0;
  bool add_ = false;
};

}  // namespace seriema

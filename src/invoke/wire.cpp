// The receiver's check of peer-written published words (records are parsed inline: wire.hpp).
#include <seriema/invoke/detail/wire.hpp>

namespace seriema::invoke::wire {

word_status check_published(std::uint64_t word, std::uint32_t lap, std::uint64_t capacity,
                            std::uint64_t read_offset) noexcept {
  const std::uint32_t word_lap = published_lap(word);
  if (word_lap != lap) {
    // The previous lap's last word, or a fresh chunk's zero: nothing new yet. Anything else
    // is a lap the sender cannot be on.
    std::uint32_t previous = lap == 1 ? static_cast<std::uint32_t>(lap_mask) : lap - 1;
    if (word_lap == 0 || word_lap == previous) return word_status::stale;
    return word_status::invalid;
  }
  if ((word & ~known_bits) != 0) return word_status::invalid;
  const std::uint64_t offset = published_offset(word);
  if (offset > capacity || offset < read_offset || offset % record_alignment != 0) {
    return word_status::invalid;
  }
  return word_status::fresh;
}

}  // namespace seriema::invoke::wire

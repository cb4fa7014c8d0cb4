// The receiver's checks of peer-written chunk contents: record framing and published words.
#include <seriema/invoke/wire.hpp>

namespace seriema::invoke::wire {

parsed_record parse_record(std::span<std::byte> bytes) noexcept {
  parsed_record out;
  if (bytes.size() < sizeof(record_header)) return out;  // malformed: no room for a header
  std::memcpy(&out.header, bytes.data(), sizeof out.header);
  const record_header& h = out.header;
  // Framing: a size we can trust to find the next record. All sums in 64 bits.
  if (h.size < sizeof(record_header) || h.size % record_alignment != 0 || h.size > bytes.size()) {
    return out;
  }
  out.size = h.size;
  const std::uint64_t needed = std::uint64_t{sizeof(record_header)} + h.closure_size +
                               extras_size(h.flags & known_flags) + h.buffer_size;
  if ((h.flags & ~known_flags) != 0 || h.reserved != 0 || needed > h.size ||
      align_record(static_cast<std::size_t>(needed)) != h.size) {
    out.status = parse_status::bad_record;
    return out;
  }
  out.entry = fabric::function_registry::instance().find(h.function);
  if (out.entry == nullptr) {
    out.status = parse_status::unknown_function;
    return out;
  }
  const bool wants_reply = (h.flags & flag_reply) != 0;
  if (h.closure_size != out.entry->closure_size || wants_reply != (out.entry->result_size > 0)) {
    out.status = parse_status::bad_record;
    return out;
  }
  std::byte* p = bytes.data() + sizeof(record_header);
  out.closure = p;
  p += h.closure_size;
  if (wants_reply) {
    std::memcpy(&out.reply, p, sizeof out.reply);
    p += sizeof out.reply;
  }
  if ((h.flags & flag_notify) != 0) {
    std::memcpy(&out.notify, p, sizeof out.notify);
    p += sizeof out.notify;
  }
  out.buffer = {p, h.buffer_size};
  out.status = parse_status::ok;
  return out;
}

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

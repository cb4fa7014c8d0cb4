// Fuzzes the launcher protocol as a rank or the launcher reads it from a socket: the byte
// stream cut into frames by frame_reader, and each frame's payload decoded by its type.
// protocol_error is the expected answer to malformed input; anything else is a finding.
#include <cstdint>
#include <span>

#include <seriema/fabric/detail/launcher_protocol.hpp>

namespace protocol = seriema::fabric::launcher_protocol;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  // The first byte chops the stream into pieces of that length, as reads of a socket would.
  const std::size_t piece = data[0] == 0 ? 1 : data[0];
  const std::span<const std::byte> stream(reinterpret_cast<const std::byte*>(data) + 1, size - 1);
  protocol::frame_reader reader;
  try {
    for (std::size_t at = 0; at < stream.size(); at += piece) {
      reader.feed(stream.subspan(at, std::min(piece, stream.size() - at)));
      while (auto frame = reader.next()) {
        try {
          switch (frame->type) {
            case protocol::message_type::hello:
              (void)protocol::decode_hello(frame->payload);
              break;
            case protocol::message_type::contribute:
              (void)protocol::decode_contribute(frame->payload);
              break;
            case protocol::message_type::abort:
            case protocol::message_type::failure:
              (void)protocol::decode_text(frame->payload);
              break;
            case protocol::message_type::result:
              (void)protocol::decode_result(frame->payload, 4);
              break;
            case protocol::message_type::rank_failed:
              (void)protocol::decode_rank_failed(frame->payload);
              break;
            case protocol::message_type::running:
            case protocol::message_type::finalized:
              break;  // no payload (checked with the header)
          }
        } catch (const protocol::protocol_error&) {
          // a malformed payload: refused
        }
      }
    }
  } catch (const protocol::protocol_error&) {
    // a malformed frame header: the connection would be dropped
  }
  return 0;
}

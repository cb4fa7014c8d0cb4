// Encoding, decoding and validation of seriema-run's rendezvous messages; machine assignment.
#include <seriema/base/enum_names.hpp>
#include <seriema/fabric/detail/launcher_protocol.hpp>

#include <fmt/format.h>

#include <cstring>

namespace seriema::fabric::launcher_protocol {
namespace {

void put_u32(std::vector<std::byte>& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xffu));
}

void put_bytes(std::vector<std::byte>& out, std::span<const std::byte> bytes) {
  out.insert(out.end(), bytes.begin(), bytes.end());
}

std::vector<std::byte> start_frame(message_type type, std::size_t payload_size) {
  if (payload_size > max_payload_bytes) {
    throw protocol_error(fmt::format(
        "seriema: bootstrap failed: a seriema-run message of {} bytes exceeds the limit of {} "
        "bytes; exchange less data through the bootstrap",
        payload_size, max_payload_bytes));
  }
  std::vector<std::byte> out;
  out.reserve(header_bytes + payload_size);
  put_u32(out, static_cast<std::uint32_t>(type));
  put_u32(out, static_cast<std::uint32_t>(payload_size));
  return out;
}

// Bounds-checked reading of a payload; every failure names what was being read.
class cursor {
 public:
  explicit cursor(std::span<const std::byte> bytes) : bytes_(bytes) {}

  std::uint32_t u32(const char* what) {
    need(4, what);
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= std::to_integer<std::uint32_t>(bytes_[pos_ + i]) << (8 * i);
    pos_ += 4;
    return v;
  }
  std::uint8_t u8(const char* what) {
    need(1, what);
    return std::to_integer<std::uint8_t>(bytes_[pos_++]);
  }
  std::span<const std::byte> take(std::size_t n, const char* what) {
    need(n, what);
    auto out = bytes_.subspan(pos_, n);
    pos_ += n;
    return out;
  }
  std::size_t remaining() const noexcept { return bytes_.size() - pos_; }
  void expect_end(const char* what) const {
    if (remaining() != 0) {
      throw protocol_error(fmt::format("seriema-run protocol: {} has {} unexpected trailing bytes",
                                       what, remaining()));
    }
  }

 private:
  void need(std::size_t n, const char* what) const {
    if (remaining() < n) {
      throw protocol_error(
          fmt::format("seriema-run protocol: truncated message reading {} (need {} bytes, {} left)",
                      what, n, remaining()));
    }
  }
  std::span<const std::byte> bytes_;
  std::size_t pos_ = 0;
};

std::span<const std::byte> as_bytes(std::string_view text) {
  return std::as_bytes(std::span<const char>(text.data(), text.size()));
}

// Limits on the payload length of each message type, checked on the header alone.
void check_header(std::uint32_t type, std::uint32_t length) {
  auto bad = [&](const char* why) {
    return protocol_error(
        fmt::format("seriema-run protocol: message type {} with {} bytes: {}", type, length, why));
  };
  switch (static_cast<message_type>(type)) {
    case message_type::hello:
      if (length != 8) throw bad("a hello has 8 bytes");
      return;
    case message_type::contribute:
      if (length < 5 || length > max_payload_bytes) throw bad("bad contribution length");
      return;
    case message_type::abort:
    case message_type::failure:
      if (length > max_text_bytes) throw bad("text longer than 64 KiB");
      return;
    case message_type::result:
      if (length < 4 || length > max_payload_bytes) throw bad("bad result length");
      return;
    case message_type::running:
    case message_type::finalized:
      if (length != 0) throw bad("this message has no payload");
      return;
    case message_type::rank_failed:
      if (length < 4 || length > 4 + max_text_bytes) throw bad("bad rank failure length");
      return;
  }
  throw bad("unknown message type");
}

}  // namespace

int machine_of_rank(int rank, int size, int machines) noexcept {
  if (size <= 0 || machines <= 1 || rank < 0 || rank >= size) return 0;
  return static_cast<int>(static_cast<std::int64_t>(rank) * machines / size);
}

void check_job_shape(int size, int machines) {
  if (size < 1) {
    throw bootstrap_error(
        fmt::format("seriema: bootstrap failed: {} processes requested; use at least 1", size));
  }
  if (machines < 1 || machines > size) {
    throw bootstrap_error(fmt::format(
        "seriema: bootstrap failed: {} emulated machines for {} processes; use 1 to {} machines",
        machines, size, size));
  }
}

const char* to_string(collective_kind kind) noexcept {
  static constexpr enum_name_entry<collective_kind> names[] = {
      {collective_kind::allgather, "allgather"},
      {collective_kind::barrier, "barrier"},
  };
  return name_in(names, kind, "collective");
}

std::vector<std::byte> encode_hello(const hello_message& hello) {
  auto out = start_frame(message_type::hello, 8);
  put_u32(out, static_cast<std::uint32_t>(hello.rank));
  put_u32(out, static_cast<std::uint32_t>(hello.pid));
  return out;
}

std::vector<std::byte> encode_contribute(collective_kind kind, std::uint32_t timeout_ms,
                                         std::span<const std::byte> blob) {
  auto out = start_frame(message_type::contribute, 5 + blob.size());
  out.push_back(static_cast<std::byte>(kind));
  put_u32(out, timeout_ms);
  put_bytes(out, blob);
  return out;
}

std::vector<std::byte> encode_abort(std::string_view why) {
  why = why.substr(0, max_text_bytes);
  auto out = start_frame(message_type::abort, why.size());
  put_bytes(out, as_bytes(why));
  return out;
}

std::vector<std::byte> encode_failure(std::string_view why) {
  why = why.substr(0, max_text_bytes);
  auto out = start_frame(message_type::failure, why.size());
  put_bytes(out, as_bytes(why));
  return out;
}

std::vector<std::byte> encode_running() { return start_frame(message_type::running, 0); }

std::vector<std::byte> encode_finalized() { return start_frame(message_type::finalized, 0); }

std::vector<std::byte> encode_rank_failed(int rank, std::string_view how) {
  how = how.substr(0, max_text_bytes);
  auto out = start_frame(message_type::rank_failed, 4 + how.size());
  put_u32(out, static_cast<std::uint32_t>(rank));
  put_bytes(out, as_bytes(how));
  return out;
}

std::vector<std::byte> encode_result(std::span<const std::vector<std::byte>> blobs) {
  std::size_t size = 4;
  for (const auto& b : blobs) size += 4 + b.size();
  auto out = start_frame(message_type::result, size);
  put_u32(out, static_cast<std::uint32_t>(blobs.size()));
  for (const auto& b : blobs) {
    put_u32(out, static_cast<std::uint32_t>(b.size()));
    put_bytes(out, b);
  }
  return out;
}

hello_message decode_hello(std::span<const std::byte> payload) {
  cursor in(payload);
  hello_message hello{};
  std::uint32_t rank = in.u32("hello rank");
  std::uint32_t pid = in.u32("hello pid");
  in.expect_end("hello");
  if (rank > 0x7fffffffu || pid > 0x7fffffffu) {
    throw protocol_error(fmt::format("seriema-run protocol: hello with bad rank {} or pid {}",
                                     static_cast<std::int32_t>(rank),
                                     static_cast<std::int32_t>(pid)));
  }
  hello.rank = static_cast<int>(rank);
  hello.pid = static_cast<int>(pid);
  return hello;
}

contribute_message decode_contribute(std::span<const std::byte> payload) {
  cursor in(payload);
  contribute_message m{};
  std::uint8_t kind = in.u8("contribution kind");
  if (kind > static_cast<std::uint8_t>(collective_kind::barrier)) {
    throw protocol_error(fmt::format("seriema-run protocol: unknown collective kind {}", kind));
  }
  m.kind = static_cast<collective_kind>(kind);
  m.timeout_ms = in.u32("contribution timeout");
  auto blob = in.take(in.remaining(), "contribution blob");
  if (m.kind == collective_kind::barrier && !blob.empty()) {
    throw protocol_error("seriema-run protocol: a barrier carries no data");
  }
  m.blob.assign(blob.begin(), blob.end());
  return m;
}

std::string decode_text(std::span<const std::byte> payload) {
  if (payload.size() > max_text_bytes) {
    throw protocol_error("seriema-run protocol: text longer than 64 KiB");
  }
  std::string text(payload.size(), '\0');
  if (!payload.empty()) std::memcpy(text.data(), payload.data(), payload.size());
  return text;
}

rank_failed_message decode_rank_failed(std::span<const std::byte> payload) {
  cursor in(payload);
  const std::uint32_t rank = in.u32("failed rank");
  if (rank > 0x7fffffffu) {
    throw protocol_error(fmt::format("seriema-run protocol: rank failure naming rank {}",
                                     static_cast<std::int32_t>(rank)));
  }
  return {static_cast<int>(rank), decode_text(in.take(in.remaining(), "how the rank left"))};
}

std::vector<std::vector<std::byte>> decode_result(std::span<const std::byte> payload,
                                                  int expected_count) {
  cursor in(payload);
  std::uint32_t count = in.u32("result count");
  if (expected_count < 0 || count != static_cast<std::uint32_t>(expected_count)) {
    throw protocol_error(
        fmt::format("seriema-run protocol: result holds {} blobs for a job of {} ranks", count,
                    expected_count));
  }
  // Each blob has at least its 4-byte length: reject impossible counts before reserving.
  if (count > in.remaining() / 4) {
    throw protocol_error(
        fmt::format("seriema-run protocol: result claims {} blobs but has only {} bytes", count,
                    in.remaining()));
  }
  std::vector<std::vector<std::byte>> blobs;
  blobs.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    std::uint32_t length = in.u32("result blob length");
    auto blob = in.take(length, "result blob");
    blobs.emplace_back(blob.begin(), blob.end());
  }
  in.expect_end("result");
  return blobs;
}

void frame_reader::feed(std::span<const std::byte> bytes) {
  // Drop consumed bytes first so the buffer holds at most one partial frame plus new input.
  if (consumed_ > 0) {
    buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(consumed_));
    consumed_ = 0;
  }
  buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
}

std::optional<frame> frame_reader::next() {
  std::size_t available = buffer_.size() - consumed_;
  if (available < header_bytes) return std::nullopt;
  cursor header(std::span<const std::byte>(buffer_).subspan(consumed_, header_bytes));
  std::uint32_t type = header.u32("header type");
  std::uint32_t length = header.u32("header length");
  check_header(type, length);
  if (available - header_bytes < length) return std::nullopt;
  auto start = buffer_.begin() + static_cast<std::ptrdiff_t>(consumed_ + header_bytes);
  frame f{static_cast<message_type>(type), std::vector<std::byte>(start, start + length)};
  consumed_ += header_bytes + length;
  return f;
}

}  // namespace seriema::fabric::launcher_protocol

// Wire format between seriema-run and the ranks it starts (tools/seriema_run/ and
// src/fabric/bootstrap/bootstrap_launcher.cpp), and the one rule that assigns ranks to emulated
// machines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <seriema/fabric/bootstrap.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace seriema::fabric {

namespace launcher_protocol {

// seriema-run places ranks on machines in contiguous blocks: rank r of N on M machines goes to
// machine r * M / N. With 1 <= M <= N every machine gets floor(N/M) or ceil(N/M) ranks, and
// machines are numbered in order of their lowest rank. Both the launcher and every rank use this.
[[nodiscard]] int machine_of_rank(int rank, int size, int machines) noexcept;

// Throws bootstrap_error naming the fix when size < 1 or machines is not in 1..size.
void check_job_shape(int size, int machines);

// A malformed frame or payload (bad length, unknown type, truncated, trailing bytes).
class protocol_error : public bootstrap_error {
 public:
  using bootstrap_error::bootstrap_error;
};

// Every message is one frame: an 8-byte header {u32 type, u32 payload length}, little-endian,
// then the payload. Lengths are validated against the type before anything is allocated.
enum class message_type : std::uint32_t {
  hello = 1,       // rank -> launcher: i32 rank, i32 pid (first message on a connection)
  contribute = 2,  // rank -> launcher: u8 kind, u32 timeout in ms, then the blob
  abort = 3,       // rank -> launcher: why (text)
  result = 4,      // launcher -> rank: u32 count, then count x (u32 length, bytes)
  failure = 5,     // launcher -> rank: why the collective failed (text, already user-readable)
  // rank -> launcher, no payload: this rank's runtime is up. From now on the rank leaving the
  // job (exiting, with any status, or killed) before it sent `finalized` is a failure of the job
  // that the launcher announces to the other ranks (`rank_failed`).
  running = 6,
  finalized = 7,    // rank -> launcher, no payload: its runtime finalized; its exit is normal
  rank_failed = 8,  // launcher -> rank, at any time: i32 rank, then how it left (text)
};

enum class collective_kind : std::uint8_t { allgather = 0, barrier = 1 };
const char* to_string(collective_kind kind) noexcept;

inline constexpr std::size_t header_bytes = 8;
inline constexpr std::uint32_t max_payload_bytes = 256u << 20;  // a result holds every rank's blob
inline constexpr std::uint32_t max_text_bytes = 64u << 10;
inline constexpr std::uint32_t max_blob_bytes = max_payload_bytes - 5;

struct frame {
  message_type type;
  std::vector<std::byte> payload;
};

struct hello_message {
  int rank;
  int pid;
};

struct rank_failed_message {
  int rank;
  std::string how;  // "exited with status 0", "killed by signal 9 (SIGKILL)"
};

struct contribute_message {
  collective_kind kind;
  std::uint32_t timeout_ms;
  std::vector<std::byte> blob;
};

// Each encode_* returns a whole frame (header + payload), ready to write.
std::vector<std::byte> encode_hello(const hello_message& hello);
std::vector<std::byte> encode_contribute(collective_kind kind, std::uint32_t timeout_ms,
                                         std::span<const std::byte> blob);
std::vector<std::byte> encode_abort(std::string_view why);
std::vector<std::byte> encode_result(std::span<const std::vector<std::byte>> blobs);
std::vector<std::byte> encode_failure(std::string_view why);
std::vector<std::byte> encode_running();
std::vector<std::byte> encode_finalized();
std::vector<std::byte> encode_rank_failed(int rank, std::string_view how);

// Each decode_* takes a payload and throws protocol_error when it is malformed.
hello_message decode_hello(std::span<const std::byte> payload);
contribute_message decode_contribute(std::span<const std::byte> payload);
std::string decode_text(std::span<const std::byte> payload);  // abort and failure
rank_failed_message decode_rank_failed(std::span<const std::byte> payload);
// `expected_count` is the job size: a result with another count is malformed.
std::vector<std::vector<std::byte>> decode_result(std::span<const std::byte> payload,
                                                  int expected_count);

// Cuts the byte stream of one connection into frames. A header is validated as soon as its 8
// bytes are in, so a bad type or length is rejected before the payload is buffered.
// Thread-safety: one thread at a time.
class frame_reader {
 public:
  void feed(std::span<const std::byte> bytes);
  // The next complete frame, or nullopt when more bytes are needed. Throws protocol_error.
  std::optional<frame> next();
  // True when part of a frame is buffered (a connection closing now was cut mid-message).
  [[nodiscard]] bool mid_frame() const noexcept { return buffer_.size() > consumed_; }

 private:
  std::vector<std::byte> buffer_;
  std::size_t consumed_ = 0;
};

}  // namespace launcher_protocol
}  // namespace seriema::fabric

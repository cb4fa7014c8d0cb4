// How one pipe end writes into the other end's region: data, then a word that publishes it, by
// direct stores (same machine, mapped), put + fence + put, or one write message the receiving
// process applies in order (fabric::am_id_write).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <seriema/fabric/detail/messages.hpp>
#include <seriema/pipe/pipe.hpp>
#include <seriema/transfer/completion.hpp>
#include <seriema/transfer/remote_memory.hpp>
#include <seriema/transfer/transmitter.hpp>
#include <span>
#include <vector>

namespace seriema::pipe::detail {

/// The way a publisher reaches the region.
enum class publish_path : std::uint8_t { direct, put, message };
const char* to_string(publish_path path) noexcept;

/// Writes into one region of the peer (owner thread only). `cells` is how many publications may
/// be in flight before the oldest one's stable memory (the word a put reads, the header a write
/// message reads) is reused: the pipe's width. The data a publication names must stay untouched
/// until the peer has seen the word (the pipe's protocol guarantees it: a range is reused only
/// after the peer handed it back).
class publisher {
 public:
  /// Resolves `region` on ctx's endpoint to its process. `protocol` picks the path (see
  /// write_protocol). Throws seriema::error when the locator cannot be resolved.
  publisher(fabric::thread_context& ctx, const transfer::remote_memory_locator& region,
            write_protocol protocol, std::uint32_t cells);
  ~publisher();  ///< waits (at most 5 s) for what is in flight: UCX may still read the cells
  publisher(const publisher&) = delete;
  publisher& operator=(const publisher&) = delete;

  [[nodiscard]] publish_path path() const noexcept { return path_; }
  /// The region itself, mapped, on the direct path; null otherwise.
  [[nodiscard]] std::byte* direct() const noexcept { return direct_; }
  /// Makes region[data_offset, + data.size()) equal `data`, then region[word_offset] (8-byte
  /// aligned) equal `word`, in that order as the peer sees them. On the direct path `data` may
  /// already be in place (it is then not copied). ok, peer_failed (nothing sent), or
  /// deadline_exceeded (a cell stayed in flight past the deadline in force: nothing sent).
  [[nodiscard]] pipe_status publish(std::span<const std::byte> data, std::uint64_t data_offset,
                                    std::uint64_t word_offset, std::uint64_t word);
  /// Copies region[offset, + into.size()) into `into`: a copy on the direct path, else a get
  /// and a wait for it (serving calls) until `deadline`. ok, peer_failed, deadline_exceeded (the
  /// get may still land: `into` must stay alive until drain()), or error.
  [[nodiscard]] pipe_status fetch(std::span<std::byte> into, std::uint64_t offset,
                                  fabric::deadline_clock::time_point deadline);
  /// fetch without waiting (for a future's attempt, which runs inside a poll): a copy on the
  /// direct path (`in_flight` empty), else a get posted with its completion asked for, whose
  /// tag is `in_flight`. ok, peer_failed or error.
  [[nodiscard]] pipe_status start_fetch(std::span<std::byte> into, std::uint64_t offset,
                                        transfer::completion_tag& in_flight);
  /// Whether the next `publications` publish calls would find their cells free (never wait, so
  /// never poll): always on the direct path.
  [[nodiscard]] bool free_cells(std::size_t publications) const noexcept;
  /// Where a started fetch stands: ok (landed), empty (not yet), peer_failed.
  [[nodiscard]] pipe_status fetch_state(const transfer::completion_tag& in_flight) const noexcept;
  /// Waits, serving calls, until everything published has reached the peer's memory, the peer
  /// died, or `deadline`; true when it all arrived (always on the direct path).
  bool drain(fabric::deadline_clock::time_point deadline);

 private:
  struct cell {
    fabric::write_message header;  ///< what a write message carries (read until completion)
    std::uint64_t word = 0;        ///< a put's source (read until completion)
    transfer::completion_tag in_flight;
  };
  bool peer_dead() const noexcept;
  bool wait_for(transfer::completion_tag tag, fabric::deadline_clock::time_point deadline);

  fabric::thread_context& ctx_;
  int process_;
  publish_path path_;
  transfer::remote_memory region_;
  std::byte* direct_ = nullptr;
  std::unique_ptr<transfer::transmitter> transmitter_;
  std::vector<cell> cells_;
  std::size_t next_cell_ = 0;
};

}  // namespace seriema::pipe::detail

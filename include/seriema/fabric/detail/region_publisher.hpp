// How one thread writes into a region of another process: data, then a word that publishes it,
// by direct stores (same machine, mapped), put + fence + put, or one write message the receiving
// process applies in order (am_id_write). The modules that push into a peer's memory (pipes,
// groups) share it; docs/pipes.md "Publication" describes the three paths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <seriema/fabric/detail/messages.hpp>
#include <seriema/fabric/outcome.hpp>
#include <seriema/transfer/completion.hpp>
#include <seriema/transfer/remote_memory.hpp>
#include <seriema/transfer/transmitter.hpp>
#include <span>
#include <vector>

namespace seriema::fabric {
class thread_context;
}

namespace seriema::fabric::detail {

/// The way a publisher reaches the region.
enum class publish_path : std::uint8_t { direct, put, message };
const char* to_string(publish_path path) noexcept;  ///< "direct stores", ...

/// What the publisher may choose among, given the region's process.
struct publish_route {
  /// Map the region and store into it when it is on this machine.
  bool allow_direct = true;
  /// Across machines (or where direct is not allowed): put + fence + put where true, one write
  /// message where false.
  bool by_put = false;
};

/// How a publication or fetch ended.
enum class publish_status : std::uint8_t {
  ok,
  pending,            ///< fetch_state: not landed yet
  peer_failed,        ///< the region's process died: nothing sent
  deadline_exceeded,  ///< a cell stayed in flight past the deadline: nothing sent
  error,              ///< the transport refused the operation (see the log)
};

/// Writes into one region of a peer (owner thread only). `cells` is how many publications may
/// be in flight before the oldest one's stable memory (the word a put reads, the header a write
/// message reads) is reused. The data a publication names must stay untouched until the peer has
/// seen the word (the caller's protocol guarantees it), except for words the caller only ever
/// increases (the peer then sees a value at least as new).
class region_publisher {
 public:
  /// Resolves `region` on ctx's endpoint to its process. Throws seriema::error when the locator
  /// cannot be resolved.
  region_publisher(thread_context& ctx, const transfer::remote_memory_locator& region,
                   publish_route route, std::uint32_t cells);
  ~region_publisher();  ///< waits (at most 5 s) for what is in flight: UCX may still read cells
  region_publisher(const region_publisher&) = delete;
  region_publisher& operator=(const region_publisher&) = delete;

  [[nodiscard]] publish_path path() const noexcept { return path_; }
  /// The region itself, mapped, on the direct path; null otherwise.
  [[nodiscard]] std::byte* direct() const noexcept { return direct_; }
  /// The region's process.
  [[nodiscard]] int process() const noexcept { return process_; }
  /// Makes region[data_offset, + data.size()) equal `data`, then region[word_offset] (8-byte
  /// aligned) equal `word`, in that order as the peer sees them. On the direct path `data` may
  /// already be in place (it is then not copied). ok, peer_failed (nothing sent),
  /// deadline_exceeded (a cell stayed in flight past the deadline in force: nothing sent), error.
  [[nodiscard]] publish_status publish(std::span<const std::byte> data, std::uint64_t data_offset,
                                       std::uint64_t word_offset, std::uint64_t word);
  /// Copies region[offset, + into.size()) into `into`: a copy on the direct path, else a get
  /// and a wait for it (serving calls) until `deadline`. ok, peer_failed, deadline_exceeded (the
  /// get may still land: `into` must stay alive until drain()), or error.
  [[nodiscard]] publish_status fetch(std::span<std::byte> into, std::uint64_t offset,
                                     deadline_clock::time_point deadline);
  /// fetch without waiting (for an attempt that runs inside a poll): a copy on the direct path
  /// (`in_flight` empty), else a get posted with its completion asked for, whose tag is
  /// `in_flight`. ok, peer_failed or error.
  [[nodiscard]] publish_status start_fetch(std::span<std::byte> into, std::uint64_t offset,
                                           transfer::completion_tag& in_flight);
  /// Whether the next `publications` publish calls would find their cells free (never wait, so
  /// never poll): always on the direct path.
  [[nodiscard]] bool free_cells(std::size_t publications) const noexcept;
  /// Where a started fetch stands: ok (landed), pending (not yet), peer_failed.
  [[nodiscard]] publish_status fetch_state(const transfer::completion_tag& in_flight)
      const noexcept;
  /// Waits, serving calls, until everything published has reached the peer's memory, the peer
  /// died, or `deadline`; true when it all arrived (always on the direct path).
  bool drain(deadline_clock::time_point deadline);
  /// Whether the region's process is known dead (the runtime's verdict or the endpoint's).
  [[nodiscard]] bool peer_dead() const noexcept;

 private:
  struct cell {
    write_message header;     ///< what a write message carries (read until completion)
    std::uint64_t word = 0;   ///< a put's source (read until completion)
    transfer::completion_tag in_flight;
  };
  bool wait_for(transfer::completion_tag tag, deadline_clock::time_point deadline);

  thread_context& ctx_;
  int process_;
  publish_path path_;
  transfer::remote_memory region_;
  std::byte* direct_ = nullptr;
  std::unique_ptr<transfer::transmitter> transmitter_;
  std::vector<cell> cells_;
  std::size_t next_cell_ = 0;
};

}  // namespace seriema::fabric::detail

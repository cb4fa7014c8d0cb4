// Reply cells: where small call_return values land. Each local thread owns a run of 64-byte
// cells in its process's shared reply region (registered memory UCX allocated). The thread that
// ran the call writes its value straight into the caller's cell when it can map the caller's
// region (same machine, ucp_rkey_ptr: the paper's "return value copied back via RDMA write");
// otherwise it sends an am_id_reply and the caller's process writes the cell.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <seriema/fabric/outcome.hpp>
#include <span>
#include <utility>
#include <vector>

namespace seriema::fabric {

// One cell: the 8-byte word at offset 0, the value in the 56 bytes after it (one cache line,
// so the value and the word that publishes it travel together).
//
// The word is (generation << 32) | (value size << 8) | (why << 2) | state, where `why` is the
// fabric::outcome of a failed cell (0 otherwise). Who writes it, in order:
//  0. a free cell's word is never pending (attach sets claimed, generation 0), so no reply
//     lands in it;
//  1. the owner, opening the cell: pending, with the slot's generation and the value's size
//     (release; a free cell is the owner's alone, nobody else writes it);
//  2. exactly one writer, by CAS pending -> claimed for that generation and size (a reply for
//     another generation or size, a duplicate, or one arriving after the owner closed the cell
//     fails the CAS and writes nothing);
//  3. that writer: the value bytes, then ready or failed with its outcome (release);
//  or instead of 2-3, the owner closing a cell whose slot was abandoned: CAS pending -> claimed
//  (so a late reply fails its CAS); or failing a call reported as not sent: CAS pending ->
//  failed (not_executed); or any thread of the caller's process learning that the cell's
//  destination process died: CAS pending -> failed (may_have_executed). Every writer takes the
//  cell by a CAS from pending, so exactly one outcome lands. A reply's writer checks the cell
//  index against the caller's whole region (it does not know how the caller divides it among
//  threads); the caller's process, delivering a reply message, checks it against the named
//  thread's own cells.
// The owner reuses a cell only after it read ready/failed, or after its own CAS closed it.
namespace reply_cell {
inline constexpr std::size_t size = 64;
inline constexpr std::size_t value_offset = 8;
inline constexpr std::size_t value_capacity = size - value_offset;
// A call header's reply_slot with this bit names a cell (the rest: its index in the caller
// process's region) rather than an entry of the caller thread's reply table.
inline constexpr std::uint32_t index_bit = 0x8000'0000u;
enum state : std::uint64_t { pending = 0, ready = 1, failed = 2, claimed = 3 };
inline constexpr std::uint64_t state_mask = 3;
inline constexpr std::uint64_t why_mask = 0xfc;
constexpr std::uint64_t word(std::uint32_t generation, std::size_t value_size, state s,
                             outcome why = outcome::pending) noexcept {
  return (std::uint64_t{generation} << 32) | (std::uint64_t{value_size} << 8) |
         (std::uint64_t{static_cast<std::uint8_t>(why)} << 2) | s;
}
// The writer's side: delivers a reply (the value when `result` is done, else a failure with
// that outcome: threw or not_executed) into `cell` if it is pending for `generation` (and, for a
// value, for one of exactly value.size() bytes). False, nothing written, otherwise. `cell` may be
// in another process's memory.
bool write(std::byte* cell, std::uint32_t generation, std::span<const std::byte> value,
           outcome result) noexcept;
// Fails `cell` with `why` if it is pending for any generation (CAS); false otherwise.
bool fail_if_pending(std::byte* cell, outcome why) noexcept;
// The cell with index `index` (index_bit included or not) in a region of `region` bytes, or
// null when it lies outside (overflow-safe).
std::byte* in_region(std::span<std::byte> region, std::uint32_t index) noexcept;
}  // namespace reply_cell

// The owner's side of one thread's cells: which are free, opening and reading them.
// Thread-safety: open/collect/abandon from any thread (a free-cell bitmap of atomic words; the
// rare "reply being written while its slot is abandoned" list under a mutex); deliver from any
// thread of this process (the CAS protocol above).
class reply_cell_table {
 public:
  // The cells [first_index, first_index + count) of a region, starting at `cells`.
  void attach(std::byte* cells, std::uint32_t first_index, std::uint32_t count);

  // Opens a free cell for a value of `value_size` bytes (<= value_capacity) from a call to
  // process `destination`: the reply_slot to send (index_bit | index) and its generation;
  // nullopt when every cell is in use.
  std::optional<std::pair<std::uint32_t, std::uint32_t>> open(std::size_t value_size,
                                                              int destination) noexcept;
  // The outcome of cell `slot` for `generation`: pending (also while a writer is at it), done
  // (the value copied to `out`) or a failure. Frees the cell once it ended.
  outcome collect(std::uint32_t slot, std::uint32_t generation, void* out,
                  std::size_t value_size) noexcept;
  // The slot waiting on cell `slot` is gone: closes the cell so that a late reply writes
  // nothing (or, when a writer is at it right now, frees it once the writer is done).
  void abandon(std::uint32_t slot, std::uint32_t generation, std::size_t value_size) noexcept;
  // The call was reported as not sent: marks the cell failed (not_executed) unless a writer
  // already claimed it (collect then reads the writer's outcome, and frees the cell either way).
  void fail_unsent(std::uint32_t slot) noexcept;
  // Process `destination` died: every cell still pending for a call to it fails with `why`.
  // Any thread. Returns how many.
  std::size_t fail_pending_to(int destination, outcome why) noexcept;
  // A reply for one of these cells arriving in this process (am_id_reply, a call_return from a
  // thread of this process, a one-sided reply record); false when it names no cell of ours or
  // the cell is not pending for it.
  bool deliver(std::uint32_t slot, std::uint32_t generation, std::span<const std::byte> value,
               outcome result) noexcept;

 private:
  [[nodiscard]] std::byte* cell(std::uint32_t slot) const noexcept;
  void release(std::uint32_t slot) noexcept;
  void reclaim_drained() noexcept;

  std::byte* cells_ = nullptr;
  std::uint32_t first_ = 0;
  std::uint32_t count_ = 0;
  std::unique_ptr<std::atomic<std::uint64_t>[]> free_bits_;  // bit set: cell free
  // The process each cell's call went to: written by the owner before it publishes the cell
  // pending (release), read by fail_pending_to after it saw the cell pending (acquire).
  std::unique_ptr<std::atomic<std::int32_t>[]> destinations_;
  std::size_t bit_words_ = 0;
  // Cells whose slot was abandoned while a writer held them (claimed): freed once ready/failed.
  std::mutex draining_mutex_;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> draining_;  // (slot, generation)
  std::atomic<std::size_t> draining_count_{0};
};

}  // namespace seriema::fabric

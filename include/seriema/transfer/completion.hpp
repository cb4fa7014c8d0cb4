// Completion tags: how a buffer learns that every operation that used it has completed, without
// asking the transmitter (paper §4.1: buffers tagged with (transmitter, flush number)).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace seriema::transfer {

/// The part of a transmitter a tag refers to. `completed_tickets` is written only by the
/// transmitter's completion callbacks and only ever grows; once it exceeds a ticket, every
/// operation tagged with that ticket has completed (locally and remotely).
struct completion_counter {
  /// 1 + the largest ticket whose flush completed (0: none yet).
  std::atomic<std::uint64_t> completed_tickets{0};
};

/// (transmitter, flush ticket). Empty (counter == nullptr) means "nothing pending".
struct completion_tag {
  const completion_counter* counter = nullptr;  ///< the transmitter's counter; null: empty tag
  std::uint64_t ticket = 0;                      ///< the flush ticket that covers the operation

  /// True when the tag is empty or its ticket's flush has completed. Any thread (acquire load).
  [[nodiscard]] bool is_complete() const noexcept {
    return counter == nullptr || counter->completed_tickets.load(std::memory_order_acquire) > ticket;
  }
};

/// The tags of one recyclable unit. A unit may be used by several transmitters before it is
/// recycled, so it keeps one tag per transmitter (the newest ticket each). Single writer: the
/// thread that owns the allocator the unit belongs to (tagging happens on that thread, right
/// after the operation is posted).
class unit_tags {
 public:
  /// How many transmitters' tags one unit can carry at once.
  static constexpr int max_transmitters = 4;

  /// Records that an operation tagged `tag` used this unit. Returns false (and records nothing)
  /// when the unit already carries tags of max_transmitters other transmitters.
  [[nodiscard]] bool add(completion_tag tag) noexcept {
    // Occupied slots form a prefix (only clear() empties slots), so the first empty slot ends
    // the search; with one transmitter this is a single comparison.
    for (auto& slot : tags_) {
      if (slot.counter == tag.counter) {
        if (tag.ticket > slot.ticket) slot.ticket = tag.ticket;
        return true;
      }
      if (slot.counter == nullptr) {
        slot = tag;
        return true;
      }
    }
    for (auto& slot : tags_) {  // full: reuse the slot of a transmitter that is done with us
      if (slot.is_complete()) {
        slot = tag;
        return true;
      }
    }
    return false;
  }

  /// Whether add() for this counter would succeed (checked before posting an operation).
  [[nodiscard]] bool can_accept(const completion_counter* counter) const noexcept {
    for (const auto& slot : tags_) {
      if (slot.counter == counter || slot.counter == nullptr || slot.is_complete()) return true;
    }
    return false;
  }

  /// True when every recorded tag is complete (or none is recorded): the unit may be reused.
  [[nodiscard]] bool all_complete() const noexcept {
    for (const auto& slot : tags_) {
      if (slot.counter == nullptr) return true;  // the rest are empty too
      if (!slot.is_complete()) return false;
    }
    return true;
  }

  /// Forgets every tag (the allocator does this when it hands the unit out again).
  void clear() noexcept { tags_ = {}; }

 private:
  std::array<completion_tag, max_transmitters> tags_{};
};

}  // namespace seriema::transfer

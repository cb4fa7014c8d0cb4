// The group's shared state table (Derecho's SST) and slot rings (its SMC): how each member's
// region is laid out, what each word means, who writes it, and the decoders that validate what a
// member finds in its region before it uses it (fuzzed by tests/fuzz/group_row_fuzz.cpp).
//
// Every member allocates one region in its own zone, `members` rows of row_bytes. Row m of every
// member's region is written only by member m (in its own region by stores, in the others' by
// its pushes: direct stores, put + fence + put, or one write message); the other rows of a
// region are never written by its owner. So each word has one writer, and a member reads the
// others' rows in its own memory.
//
// Row m = control words, then member m's slot ring (window slots of slot_bytes):
//   word 0  version          the publication word of a control push: version_word(pushes,
//                            view, phase), so the view and phase read with it (acquire) come with
//                            every other word of that push or a later one
//   word 1  sent             the publication word of m's message pushes: sent_word(view, count),
//                            messages 0 .. count-1 of m in that view are in the slots (each still
//                            checked by its own word)
//   word 2  view             the view this row speaks of
//   word 3  suspected        bit j: m suspects member j
//   word 4  wedged           m's phase: 0 running, 1 wedged (sends, receives and delivers
//                            nothing more in this view), 2 trimmed (the trim words are final)
//   word 5  delivered        messages m delivered in the view's total order (nulls included)
//   word 6  membership       bit j: member j belongs to the view
//   word 7  joining          joining_word(seat, thread): the thread m admits into seat `seat` at
//                            the end of this view (0: none); equal at every member before the trim
//   word 8 + j               received[j]: messages of sender j that m holds, a prefix 0 .. r-1
//   word 8 + members + j     consumed[j]: messages of sender j whose slots m no longer needs
//   word 8 + 2 members + j   trim[j]: the ragged trim of the last view change (messages of sender
//                            j delivered in the view it ended); kept until the next change
// `members` is the group's capacity (seats): founders and every thread that may join later.
// A control push carries words 2 .. end, then stores the version; a message push carries a run of
// consecutive slots (header and payload of each), then stores `sent`.
// Slot (message n of member m at slot n % window):
//   word 0  seq_word(view, n): 0 (zeroed) never matches a message; a slot is read only once
//           `sent` says it was pushed, and used only if this word is the one of message n
//   word 1  size (bytes 0-3) | kind (bytes 4-7)
//   +16     payload
//
// Why a slot is never overwritten before every member is done with it: member m writes message n
// only when every row's consumed[m] >= n + 1 - window (flow control), and a member counts a
// message consumed only after it delivered it (ordered mode: once stable and in order).
// Why received, consumed and delivered may be pushed while they change: they only increase, and
// a 64-bit aligned word lands whole on every path (the conformance suite checks it), so a reader
// sees a value at least as old as the push and never a torn one. The words of one push may be
// seen from different pushes, though (accept_row: unsettled, read again later).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace seriema::group::detail {

/// Seats a group may have (the suspected word is a 64-bit mask).
inline constexpr std::uint32_t max_members = 64;
/// Bytes in front of each payload in a slot.
inline constexpr std::size_t slot_header_size = 16;
/// Control words before the per-member arrays.
inline constexpr std::size_t fixed_control_words = 8;

/// Index of each fixed control word.
namespace word {
inline constexpr std::size_t version = 0;
inline constexpr std::size_t sent = 1;
inline constexpr std::size_t view = 2;
inline constexpr std::size_t suspected = 3;
inline constexpr std::size_t wedged = 4;
inline constexpr std::size_t delivered = 5;
inline constexpr std::size_t membership = 6;
inline constexpr std::size_t joining = 7;
/// The first word a control push carries.
inline constexpr std::size_t first_pushed = 2;
}  // namespace word

/// What a slot carries.
enum class slot_kind : std::uint32_t {
  data = 1,          ///< a send's payload, handed to on_deliver
  null = 2,          ///< nothing: keeps the round-robin order moving for a quiet sender
  ordered_call = 3,  ///< a function to run (id, closure size, closure, arguments)
  large = 4,         ///< a large_descriptor: the payload travels through the large region
};

/// What the slot of a large message carries (its payload lies in the large areas, see
/// large_layout): the sender's large-message ordinal and the payload's size.
struct large_descriptor {
  std::uint64_t ordinal = 0;  ///< the sender's large messages before this one (never reset)
  std::uint64_t bytes = 0;    ///< payload bytes: more than max_message, at most max_large
};

/// The word that publishes message n of a view (never 0; changes with the view, so a slot left
/// from an earlier view never matches).
constexpr std::uint64_t seq_word(std::uint32_t view, std::uint64_t n) noexcept {
  return (std::uint64_t{view} << 40) | ((n + 1) & ((std::uint64_t{1} << 40) - 1));
}

/// The bit of seat m in a mask of seats (the suspected and membership words).
constexpr std::uint64_t seat_bit(std::uint32_t m) noexcept { return std::uint64_t{1} << m; }

/// The joining word: `thread` enters seat `seat` (< max_members) at the end of the view; never 0.
constexpr std::uint64_t joining_word(std::uint32_t seat, std::uint32_t thread) noexcept {
  return (std::uint64_t{thread} << 8) | (seat + 1);
}
/// The seat a nonzero joining word names (max_members or more: not a seat).
constexpr std::uint32_t seat_of_joining(std::uint64_t w) noexcept {
  return static_cast<std::uint32_t>(w & 0xFF) - 1;
}
constexpr std::uint32_t thread_of_joining(std::uint64_t w) noexcept {
  return static_cast<std::uint32_t>(w >> 8);
}

/// A member's phase in its view (its row's wedged word, and the low bits of its version word).
enum class phase : std::uint8_t { running = 0, wedged = 1, trimmed = 2 };

/// The version word of a control push: the push count, the view and the phase.
constexpr std::uint64_t version_word(std::uint64_t pushes, std::uint32_t view, phase p) noexcept {
  return (pushes << 32) | (std::uint64_t{view & 0x3FFF'FFFFu} << 2) | static_cast<std::uint64_t>(p);
}
constexpr std::uint32_t view_of_version(std::uint64_t version) noexcept {
  return static_cast<std::uint32_t>(version >> 2) & 0x3FFF'FFFFu;
}
constexpr phase phase_of_version(std::uint64_t version) noexcept {
  return static_cast<phase>(version & 3);
}
/// The sent word: a count of messages in a view (a count of another view means nothing).
constexpr std::uint64_t sent_word(std::uint32_t view, std::uint64_t count) noexcept {
  return (std::uint64_t{view} << 40) | (count & ((std::uint64_t{1} << 40) - 1));
}
/// The count a sent word gives for `view`: 0 when it speaks of another view.
constexpr std::uint64_t sent_in(std::uint64_t sent, std::uint32_t view) noexcept {
  return (sent >> 40) == view ? (sent & ((std::uint64_t{1} << 40) - 1)) : 0;
}

/// Where everything lies in a region; equal at every member of a group.
struct table_layout {
  std::uint32_t members = 0;
  std::uint32_t window = 0;
  std::uint32_t max_message = 0;  ///< payload bytes a slot holds
  std::uint32_t max_large = 0;    ///< payload bytes of a large message (0: none)
  std::uint64_t control_bytes = 0;
  std::uint64_t slot_bytes = 0;
  std::uint64_t row_bytes = 0;

  static table_layout make(std::uint32_t members, std::uint32_t window,
                           std::uint32_t max_message, std::uint32_t max_large = 0) noexcept {
    table_layout l;
    l.members = members;
    l.window = window;
    l.max_message = max_message;
    l.max_large = max_large;
    l.control_bytes = round_up((fixed_control_words + 3 * std::uint64_t{members}) * 8);
    l.slot_bytes = round_up(slot_header_size + std::uint64_t{max_message});
    l.row_bytes = l.control_bytes + l.slot_bytes * window;
    return l;
  }
  static constexpr std::uint64_t round_up(std::uint64_t n) noexcept { return (n + 63) & ~63ull; }

  [[nodiscard]] std::uint64_t region_bytes() const noexcept { return row_bytes * members; }
  [[nodiscard]] std::uint64_t row(std::uint32_t m) const noexcept { return row_bytes * m; }
  /// Offset of control word `w` of row m.
  [[nodiscard]] std::uint64_t control(std::uint32_t m, std::size_t w) const noexcept {
    return row(m) + 8 * w;
  }
  [[nodiscard]] std::uint64_t received(std::uint32_t m, std::uint32_t j) const noexcept {
    return control(m, fixed_control_words + j);
  }
  [[nodiscard]] std::uint64_t consumed(std::uint32_t m, std::uint32_t j) const noexcept {
    return control(m, fixed_control_words + members + j);
  }
  [[nodiscard]] std::uint64_t trim(std::uint32_t m, std::uint32_t j) const noexcept {
    return control(m, fixed_control_words + 2 * std::uint64_t{members} + j);
  }
  /// Bytes of the control words a control push carries (from word::first_pushed).
  [[nodiscard]] std::uint64_t pushed_control_bytes() const noexcept {
    return (fixed_control_words - word::first_pushed + 3 * std::uint64_t{members}) * 8;
  }
  /// Offset of the slot of message n of member m.
  [[nodiscard]] std::uint64_t slot(std::uint32_t m, std::uint64_t n) const noexcept {
    return row(m) + control_bytes + slot_bytes * (n % window);
  }
};

/// The word that says how much of a large message has landed in an area: the ordinal + 1 of the
/// message (so 0 never matches one) and its bytes in place, a prefix.
constexpr std::uint64_t large_word(std::uint64_t ordinal, std::uint64_t bytes) noexcept {
  return ((ordinal + 1) << 32) | (bytes & 0xFFFF'FFFFu);
}
constexpr std::uint64_t large_tag(std::uint64_t word) noexcept { return word >> 32; }
constexpr std::uint64_t large_bytes(std::uint64_t word) noexcept { return word & 0xFFFF'FFFFu; }

/// The large region of a member (a registered region of its own beside the table, present when
/// group_options::max_large_message is not 0). Large messages travel down a chain, the view's
/// members in round-robin order starting at the sender: each member receives a large message
/// from the member before it in the view (the sender itself, or its predecessor) and passes it
/// on, block by block, to the member after it, unless that one is the sender.
///
/// The region holds an *area* per (writer w, sender s, slot j): large_window slots of max_large
/// bytes, each with one word, large_word(ordinal, bytes landed). Area (w, s, j) of member x's
/// region and its word are written only by w: by its pushes when w is not x, by x itself for
/// its own messages (w = s = x, the slot the sender fills in place). So a member removed by a
/// view change that still pushes (a stalled one that resumes) writes only areas nobody reads any
/// more, as with the rows. The sender puts its ordinal-th large message in slot ordinal %
/// large_window, and reuses the slot only once every member consumed the message there.
struct large_layout {
  std::uint32_t members = 0;
  std::uint32_t slots = 0;        ///< large_window
  std::uint64_t area_bytes = 0;   ///< max_large rounded up to 64
  std::uint64_t words_bytes = 0;  ///< the words, in front of the areas (whole pages)

  static large_layout make(std::uint32_t members, std::uint32_t slots,
                           std::uint32_t max_large) noexcept {
    large_layout l;
    l.members = members;
    l.slots = slots;
    l.area_bytes = table_layout::round_up(max_large);
    l.words_bytes = (std::uint64_t{members} * members * slots * 8 + 4095) & ~4095ull;
    return l;
  }
  [[nodiscard]] std::uint64_t index(std::uint32_t w, std::uint32_t s,
                                    std::uint64_t j) const noexcept {
    return (std::uint64_t{w} * members + s) * slots + j;
  }
  [[nodiscard]] std::uint64_t region_bytes() const noexcept {
    return words_bytes + area_bytes * members * members * slots;
  }
  /// Offset of the word of area (w, s, j).
  [[nodiscard]] std::uint64_t word(std::uint32_t w, std::uint32_t s, std::uint64_t j) const noexcept {
    return index(w, s, j) * 8;
  }
  /// Offset of the first byte of area (w, s, j).
  [[nodiscard]] std::uint64_t area(std::uint32_t w, std::uint32_t s, std::uint64_t j) const noexcept {
    return words_bytes + index(w, s, j) * area_bytes;
  }
};

/// Loads a word of a region that another member may be writing (acquire: what it published
/// before the word is visible after it).
inline std::uint64_t load_word(const std::byte* region, std::uint64_t offset) noexcept {
  return std::atomic_ref<const std::uint64_t>(
             *reinterpret_cast<const std::uint64_t*>(region + offset))
      .load(std::memory_order_acquire);
}
/// Stores a word of the owner's own row (relaxed: a push publishes it with its version word).
inline void store_word(std::byte* region, std::uint64_t offset, std::uint64_t value) noexcept {
  std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(region + offset))
      .store(value, std::memory_order_relaxed);
}

/// What decode_slot found.
enum class slot_state : std::uint8_t {
  empty,     ///< the expected message has not arrived (the slot holds an older one, or nothing)
  ready,     ///< the expected message, valid
  rejected,  ///< the slot claims to be the expected message but its header cannot be right
  foreign,   ///< the slot's word is neither the expected message nor an older one
};

/// A decoded slot.
struct slot_view {
  slot_state state = slot_state::empty;
  slot_kind kind = slot_kind::null;
  std::span<const std::byte> payload;
};

/// Validates the slot at `slot` (layout.slot_bytes bytes) as message n of `view`: its word must
/// be seq_word(view, n) (an older message of this slot, or 0: empty), its size at most
/// max_message and its kind a known one (a null carries nothing; a large one, only where the
/// layout has large messages, a large_descriptor of more than max_message and at most max_large
/// bytes). Reads the word first (acquire), then the header.
inline slot_view decode_slot(const std::byte* slot, const table_layout& layout,
                             std::uint32_t view, std::uint64_t n) noexcept {
  slot_view v;
  const std::uint64_t seq = load_word(slot, 0);
  if (seq != seq_word(view, n)) {
    const bool older = seq == 0 || (seq >> 40) < view ||
                       ((seq >> 40) == view && n >= layout.window &&
                        seq == seq_word(view, n - layout.window));
    v.state = older ? slot_state::empty : slot_state::foreign;
    return v;
  }
  std::uint64_t header;
  std::memcpy(&header, slot + 8, sizeof header);
  const auto size = static_cast<std::uint32_t>(header);
  const auto kind = static_cast<std::uint32_t>(header >> 32);
  bool known = kind == static_cast<std::uint32_t>(slot_kind::data) ||
               kind == static_cast<std::uint32_t>(slot_kind::ordered_call) ||
               (kind == static_cast<std::uint32_t>(slot_kind::null) && size == 0);
  if (kind == static_cast<std::uint32_t>(slot_kind::large) && layout.max_large != 0 &&
      size == sizeof(large_descriptor)) {
    // A slot holds at least 48 payload bytes whatever max_message is (slots are 64-byte units).
    large_descriptor d;
    std::memcpy(&d, slot + slot_header_size, sizeof d);
    known = d.bytes > layout.max_message && d.bytes <= layout.max_large;
    if (known) {
      v.state = slot_state::ready;
      v.kind = slot_kind::large;
      v.payload = {slot + slot_header_size, size};
      return v;
    }
  }
  if (!known || size > layout.max_message) {
    v.state = slot_state::rejected;
    return v;
  }
  v.state = slot_state::ready;
  v.kind = static_cast<slot_kind>(kind);
  v.payload = {slot + slot_header_size, size};
  return v;
}

/// The words of one row as a member last accepted them.
struct row_snapshot {
  std::uint64_t view = 0;
  std::uint64_t suspected = 0;
  std::uint64_t wedged = 0;
  std::uint64_t delivered = 0;
  std::uint64_t membership = 0;
  std::uint64_t received[max_members] = {};
  std::uint64_t consumed[max_members] = {};
  std::uint64_t trim[max_members] = {};
};

/// What accept_row made of a row.
enum class row_verdict : std::uint8_t {
  accepted,   ///< copied into `last`
  unsettled,  ///< its words disagree with each other, as a push still landing can show: read later
  rejected,   ///< a word no push of an honest member could hold
};

/// Reads row m of `region` into `next` and accepts it if it can be true given `last` (what was
/// accepted before) and what the reading member knows. Each word on its own: counts never go
/// back, the phase is one, no bit names a seat past `layout.members`, the member never received
/// more of sender `self` than `self` sent (`sent`), and the row speaks of view `view`; a row
/// that fails one of these is rejected. Between words: nothing consumed that was not received,
/// nothing delivered beyond what was received; a row that fails only these is unsettled, not
/// rejected: a push lands word by word in no fixed order (a put, a write message applied by
/// memcpy, direct stores in address order), so a reader may see some words of the push under
/// way beside older ones. `last` changes only when the row is accepted.
inline row_verdict accept_row(const std::byte* region, const table_layout& layout, std::uint32_t m,
                              std::uint32_t self, std::uint64_t sent, std::uint32_t view,
                              row_snapshot& last, row_snapshot& next) noexcept {
  next.view = load_word(region, layout.control(m, word::view));
  next.suspected = load_word(region, layout.control(m, word::suspected));
  next.wedged = load_word(region, layout.control(m, word::wedged));
  next.delivered = load_word(region, layout.control(m, word::delivered));
  next.membership = load_word(region, layout.control(m, word::membership));
  std::uint64_t received_total = 0;
  for (std::uint32_t j = 0; j < layout.members; ++j) {
    next.consumed[j] = load_word(region, layout.consumed(m, j));
    next.trim[j] = load_word(region, layout.trim(m, j));
    next.received[j] = load_word(region, layout.received(m, j));
    received_total += next.received[j];
  }
  bool possible = next.view == view && next.wedged <= 2 && next.delivered >= last.delivered &&
                  (layout.members == max_members ||
                   ((next.suspected | next.membership) >> layout.members) == 0);
  bool settled = next.delivered <= received_total;
  for (std::uint32_t j = 0; j < layout.members && possible; ++j) {
    possible = next.received[j] >= last.received[j] && next.consumed[j] >= last.consumed[j] &&
               (j != self || next.received[j] <= sent);
    settled = settled && next.consumed[j] <= next.received[j];
  }
  if (!possible) return row_verdict::rejected;
  if (!settled) return row_verdict::unsettled;
  last = next;
  return row_verdict::accepted;
}

}  // namespace seriema::group::detail

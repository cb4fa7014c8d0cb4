// Fuzzes what a group member reads from memory the other members wrote: decode_slot on a slot of
// a sender's ring (its word, then its header) and accept_row on a row of control words. Whatever
// they accept must be usable: a ready slot's payload lies inside the slot and its kind is known
// (a large one only where the layout has large messages, describing a size it allows);
// an accepted row never lowers a count, never consumed more than it received, and never claims
// more of this member's messages than it sent.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <seriema/group/detail/table.hpp>
#include <vector>

namespace group = seriema::group::detail;

namespace {

void check(bool invariant) {
  if (!invariant) std::abort();
}

void check_slot(const group::slot_view& v, const std::byte* slot,
                const group::table_layout& layout) {
  if (v.state != group::slot_state::ready) return;
  check(v.payload.data() == slot + group::slot_header_size);
  check(group::slot_header_size + v.payload.size() <= layout.slot_bytes);
  if (v.kind == group::slot_kind::large) {
    check(layout.max_large != 0 && v.payload.size() == sizeof(group::large_descriptor));
    group::large_descriptor d;
    std::memcpy(&d, v.payload.data(), sizeof d);
    check(d.bytes > layout.max_message && d.bytes <= layout.max_large);
    return;
  }
  check(v.payload.size() <= layout.max_message);
  check(v.kind == group::slot_kind::data || v.kind == group::slot_kind::ordered_call ||
        (v.kind == group::slot_kind::null && v.payload.empty()));
}

void check_row(const group::row_snapshot& before, const group::row_snapshot& after,
               const group::table_layout& layout, std::uint32_t self, std::uint64_t sent) {
  check(after.delivered >= before.delivered && after.wedged <= 2);
  for (std::uint32_t j = 0; j < layout.members; ++j) {
    check(after.received[j] >= before.received[j]);
    check(after.consumed[j] >= before.consumed[j] && after.consumed[j] <= after.received[j]);
  }
  check(after.received[self] <= sent);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size <= 16) return 0;
  // The first 16 bytes: the layout (members, window, max_message, max_large), the member reading,
  // the message number it expects, the view, and how many messages it sent.
  const std::uint32_t members = 1 + data[0] % group::max_members;
  const std::uint32_t window = 1 + data[1] % 16;
  const std::uint32_t max_message = 1 + (std::uint32_t{data[2]} | std::uint32_t{data[3]} << 8);
  const std::uint32_t self = data[4] % members;
  const std::uint32_t row = data[5] % members;
  const std::uint32_t view = data[6] % 4;
  std::uint64_t n = 0, sent = 0;
  std::memcpy(&n, data + 7, 3);
  std::memcpy(&sent, data + 10, 3);
  // Byte 13: no large messages (even), or up to 255 x 4 KiB beyond max_message (odd).
  const std::uint32_t max_large = data[13] % 2 == 0 ? 0 : max_message + 4096u * (data[13] / 2);
  const group::table_layout layout =
      group::table_layout::make(members, window, max_message, max_large);
  // The region: the rest of the input, repeated up to one row's control words and one slot.
  const std::size_t bytes = layout.control_bytes + layout.slot_bytes;
  std::vector<std::uint64_t> storage(bytes / 8 + 1);
  auto* region = reinterpret_cast<std::byte*>(storage.data());
  for (std::size_t i = 0; i < bytes; ++i) {
    region[i] = static_cast<std::byte>(data[16 + i % (size - 16)]);
  }

  // A slot at the end of the control words, as slot(m, n) places one.
  const std::byte* slot = region + layout.control_bytes;
  check_slot(group::decode_slot(slot, layout, view, n), slot, layout);

  // Row 0 of a layout of `members` rows: only the control words are read, so place them at
  // row 0 and read row 0 (the row number only moves the offset).
  group::row_snapshot last;
  last.view = view;
  for (std::uint32_t j = 0; j < members; ++j) {
    last.received[j] = row * j % 5;
    last.consumed[j] = last.received[j] / 2;
  }
  group::row_snapshot before = last, next;
  if (group::accept_row(region, layout, 0, self, sent, view, last, next) ==
      group::row_verdict::accepted) {
    check_row(before, last, layout, self, sent);
  } else {
    check(std::memcmp(&before, &last, sizeof last) == 0);  // a refused row changes nothing
  }
  return 0;
}

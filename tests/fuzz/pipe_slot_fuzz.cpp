// Fuzzes what a pipe's reader reads from memory its writer wrote: decode_in_place at a position of
// a heap (next fit), decode_slot on a ring slot word and the header it names (other fit policies),
// decode_pull on a pull slot (flag, descriptor), decode_redirect on the payload of a redirect
// record, and decode_release on a release entry. Whatever they accept must lie inside the heap
// (or, for a redirect, inside its source's region).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <seriema/pipe/detail/slot.hpp>
#include <span>
#include <vector>

namespace pipe = seriema::pipe::detail;

namespace {

void check(bool invariant) {
  if (!invariant) std::abort();
}

void check_view(const pipe::slot_view& v, std::size_t heap) {
  if (v.state != pipe::slot_state::ready) return;
  check(v.offset <= heap && v.size >= 1);
  check(v.granules >= 1 && v.granules <= (heap - v.offset) / pipe::heap_granule);
  check(pipe::header_size + v.size <= v.granules * pipe::heap_granule);
  check(!v.redirect || v.size == pipe::redirect_descriptor_size ||
        v.size == pipe::source_record_size);
}

// A ready redirect record's payload, against a source region as large as `source_bytes`.
void check_redirect(const pipe::slot_view& v, const std::byte* heap, std::uint64_t source_bytes) {
  if (v.state != pipe::slot_state::ready || v.size != pipe::redirect_descriptor_size) return;
  const std::span<const std::byte, pipe::redirect_descriptor_size> d(
      heap + v.offset + pipe::header_size, pipe::redirect_descriptor_size);
  const pipe::redirect_view r = pipe::decode_redirect(d, source_bytes);
  if (r.source == 0) return;
  check(r.source == pipe::redirect_source(d));
  check(r.size >= 1 && r.offset + r.size <= source_bytes);
  check(r.offset % pipe::heap_granule == pipe::header_size);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 24) return 0;
  std::uint64_t word, position;
  std::uint32_t expected, previous;
  std::memcpy(&word, data, 8);
  std::memcpy(&position, data + 8, 8);
  std::memcpy(&expected, data + 16, 4);
  std::memcpy(&previous, data + 20, 4);
  // The heap: the rest, in whole granules (as the reader's heap is), aligned like one.
  const std::size_t heap_bytes = (size - 24) / pipe::heap_granule * pipe::heap_granule;
  std::vector<std::uint64_t> storage(heap_bytes / 8 + 1);
  auto* heap = reinterpret_cast<std::byte*>(storage.data());
  std::memcpy(heap, data + 24, heap_bytes);
  const std::span<const std::byte> bytes(heap, heap_bytes);
  auto word0_at = [&](std::uint64_t offset) {
    std::uint64_t w;
    std::memcpy(&w, heap + offset, sizeof w);
    return w;
  };

  // In place: the word the reader loads at its position (when the position is in the heap).
  const std::uint64_t descriptor = position;  // the pull slot's, below: all 64 bits
  position %= heap_bytes + 64;
  const std::uint64_t at = position + 8 <= heap_bytes ? word0_at(position) : word;
  check_view(pipe::decode_in_place(at, position, expected, bytes), heap_bytes);
  check_view(pipe::decode_in_place(word, position, expected, bytes), heap_bytes);
  // Ring: the slot word names the header.
  const pipe::slot_view ringed = pipe::decode_slot(word, expected, previous, bytes, word0_at);
  check_view(ringed, heap_bytes);
  check_redirect(ringed, heap, previous);  // a source region of any size, `previous` bytes
  // Pull: a flag and a descriptor against an exposed heap of the same size.
  const pipe::slot_view pulled = pipe::decode_pull(word, descriptor, expected, heap_bytes);
  if (pulled.state == pipe::slot_state::ready) {
    check(pulled.size >= 1 && pulled.offset + pipe::header_size + pulled.size <= heap_bytes);
  }
  std::uint32_t entry;
  if (pipe::decode_release(word, entry)) check(pipe::release_entry(entry) == word);
  return 0;
}

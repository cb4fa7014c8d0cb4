// Fuzzes what a receiver reads from memory a sender wrote: wire::check_published on a published
// word, then wire::parse_record over a published range, record after record, as
// inbound_channel::run_range walks it (docs/messenger.md). Nothing is run.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <seriema/fabric/function_registry.hpp>
#include <seriema/invoke/detail/wire.hpp>
#include <span>
#include <vector>

namespace wire = seriema::invoke::wire;
namespace fabric = seriema::fabric;

namespace {

// Two registered functions, so that records may name known ids: a function id of 1 or 2 in the
// input is replaced by theirs (ids are hashes the fuzzer would never guess).
struct plain {
  std::uint64_t x;
  void operator()() const {}
};
struct returning {
  std::uint32_t x;
  std::uint64_t operator()() const { return x; }
};
const fabric::function_id known[2] = {fabric::function_wrapper<plain, fabric::plain_shape>::id,
                                      fabric::function_wrapper<returning, fabric::return_shape>::id};

void check(bool invariant) {
  if (!invariant) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 24) return 0;
  std::uint64_t word, capacity;
  std::uint32_t lap, read_offset;
  std::memcpy(&word, data, 8);
  std::memcpy(&capacity, data + 8, 8);
  std::memcpy(&lap, data + 16, 4);
  std::memcpy(&read_offset, data + 20, 4);
  (void)wire::check_published(word, lap, capacity, read_offset);

  // The published range: a copy, aligned like a chunk's data area.
  std::vector<std::uint64_t> storage((size - 24 + 7) / 8 + 1);
  auto* range = reinterpret_cast<std::byte*>(storage.data());
  const std::size_t end = size - 24;
  std::memcpy(range, data + 24, end);
  std::size_t offset = 0;
  while (offset < end) {
    if (end - offset >= sizeof(wire::record_header)) {
      fabric::function_id id;
      std::memcpy(&id, range + offset, sizeof id);
      if (id == 1 || id == 2) std::memcpy(range + offset, &known[id - 1], sizeof id);
    }
    const std::span<std::byte> rest(range + offset, end - offset);
    const wire::parsed_record rec = wire::parse_record(rest);
    if (rec.status == wire::parse_status::malformed) break;
    // A framed record lies inside the range and moves the reader on.
    check(rec.size() >= sizeof(wire::record_header) && rec.size() <= rest.size());
    if (rec.status == wire::parse_status::ok) {
      const std::byte* first = rest.data();
      const std::byte* last = rest.data() + rec.size();
      check(rec.entry != nullptr && rec.closure >= first && rec.closure <= last);
      check(rec.buffer.data() >= first && rec.buffer.data() + rec.buffer.size() <= last);
    }
    offset += rec.size();
  }
  return 0;
}

// Wire format of one-sided calls: the chunk header (Producer / Consumer / setup parts), the
// published word, and call records, with the receiver's bounds-checked record parser. See
// docs/messenger.md for the protocol and who writes which word.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <seriema/fabric/function_registry.hpp>
#include <seriema/transfer/remote_memory.hpp>
#include <span>

namespace seriema::invoke::wire {

// Published word (Producer part). Single writer: the sending thread (remote put after a fence,
// or a release store when it maps the chunk). Bits:
//   0..31  offset: bytes of records in the chunk's data area that are complete
//   32..55 lap:    how many times the sender started filling this chunk (1 for the first fill);
//                  a word of an older lap is stale and means "nothing new yet"
//   61     closed: reserved (0)
//   62     splice: the sender grew the ring after this chunk; the receiver inserts the next
//                  batch of granted chunks right after it
//   63     full:   the sender moved on; the chunk holds exactly `offset` bytes this lap
inline constexpr std::uint64_t offset_mask = 0xFFFF'FFFFull;
inline constexpr int lap_shift = 32;
inline constexpr std::uint64_t lap_mask = 0xFF'FFFFull;
inline constexpr std::uint64_t splice_bit = 1ull << 62;
inline constexpr std::uint64_t full_bit = 1ull << 63;
inline constexpr std::uint64_t known_bits = full_bit | splice_bit | (lap_mask << lap_shift) |
                                            offset_mask;

constexpr std::uint64_t make_published(std::uint64_t offset, std::uint32_t lap, bool full,
                                       bool splice) noexcept {
  return (offset & offset_mask) | ((std::uint64_t{lap} & lap_mask) << lap_shift) |
         (full ? full_bit : 0) | (splice ? splice_bit : 0);
}
constexpr std::uint64_t published_offset(std::uint64_t word) noexcept { return word & offset_mask; }
constexpr std::uint32_t published_lap(std::uint64_t word) noexcept {
  return static_cast<std::uint32_t>((word >> lap_shift) & lap_mask);
}
constexpr std::uint32_t next_lap(std::uint32_t lap) noexcept {
  std::uint32_t next = (lap + 1) & lap_mask;
  return next == 0 ? 1 : next;  // lap 0 is "never written" (a fresh chunk's zeroed word)
}

inline constexpr std::uint32_t chunk_magic = 0x5345'524Du;  // "SERM"

// Start of every chunk, in the receiver's memory. Ownership:
//  * producer.published: written only by the sender (see above).
//  * consumer.consumed:  written only by the receiving thread, with local stores: the offset it
//    has run up to and the lap (published format without flags); the sender may read it with a
//    get (pull), but normally learns of progress by the push of `released` (see feedback).
//  * setup: written once by the allocation service (a local thread of the receiver's process)
//    before the chunk's locator is returned to the sender; read-only afterwards.
struct chunk_header {
  struct alignas(64) producer_part {
    std::uint64_t published;
  } producer;
  struct alignas(64) consumer_part {
    std::uint64_t consumed;
  } consumer;
  struct alignas(64) setup_part {
    std::uint32_t magic;
    std::uint32_t sender;    // global thread id
    std::uint32_t receiver;  // global thread id
    std::uint32_t batch;     // the sender's allocation batch this chunk came in
    std::uint64_t run;       // runtime::run epoch
    std::uint64_t capacity;  // bytes of the data area (after this header)
    // The sender thread's feedback words (registered memory of the sender): word r + 1 counts
    // the fills receiver r released (it adds 1 each time it has consumed a chunk entirely);
    // words from thread_count + 1 on are synchronizer counters; word 0 is unused.
    transfer::remote_memory_locator feedback;
  } setup;
};
inline constexpr std::size_t chunk_header_size = 384;
static_assert(sizeof(chunk_header) <= chunk_header_size);
static_assert(offsetof(chunk_header, producer) == 0);
inline constexpr std::size_t published_word_offset = 0;  // within the chunk

// A call record in a chunk's data area: this header, the closure, optional extras, the buffer,
// padding to a multiple of record_alignment. `size` covers all of it. A repeated record
// (flag_repeated, alone) is `repeat` calls of one function instead: the header, then `repeat`
// closures, each padded to fabric::closure_stride(closure_size), and nothing else; with repeat 1
// its bytes are those of a plain record of the function but for the flag and the count.
struct record_header {
  fabric::function_id function;
  std::uint32_t size;          // bytes of the whole record, multiple of record_alignment
  std::uint32_t closure_size;  // must equal the registered closure size of `function`
  std::uint32_t buffer_size;   // bytes of buffer after the closure (and extras)
  std::uint32_t flags;         // record_flag bits; unknown bits make the record malformed
  std::uint32_t repeat;        // flag_repeated: closures in the record (>= 1); 0 otherwise
};
static_assert(sizeof(record_header) == 24);
inline constexpr std::size_t record_alignment = 8;
static_assert(fabric::closure_stride(1) == record_alignment);
inline constexpr std::size_t record_size_offset = offsetof(record_header, size);
inline constexpr std::size_t record_flags_offset = offsetof(record_header, flags);
static_assert(offsetof(record_header, repeat) == record_flags_offset + 4);

enum record_flag : std::uint32_t {
  flag_reply = 1u << 0,     // extras: reply_extra; the caller waits for the function's value
  flag_notify = 1u << 1,    // extras: notify_extra; decrement the sender's counter once run
  flag_repeated = 1u << 2,  // `repeat` closures of the function, no extras, no buffer
};
inline constexpr std::uint32_t known_flags = flag_reply | flag_notify | flag_repeated;

struct reply_extra {
  std::uint32_t slot;
  std::uint32_t generation;
};
// The value a notification adds to a synchronizer word to count it down by one (words wrap).
inline constexpr std::uint64_t count_down_one = ~std::uint64_t{0};

struct notify_extra {
  std::uint32_t counter;  // index of a synchronizer word in the sender's feedback words
  std::uint32_t reserved;
};

constexpr std::size_t extras_size(std::uint32_t flags) noexcept {
  return ((flags & flag_reply) ? sizeof(reply_extra) : 0) +
         ((flags & flag_notify) ? sizeof(notify_extra) : 0);
}
constexpr std::size_t align_record(std::size_t n) noexcept {
  return (n + record_alignment - 1) & ~(record_alignment - 1);
}
// Bytes of a record with these sizes; SIZE_MAX (no record fits it) when a size is beyond what
// a record's 32-bit fields can say, so that no caller-given length can wrap the sum below a
// limit. Closure sizes are constants, so the check is one compare of the buffer's size.
inline constexpr std::size_t largest_record_field = 0xffff'0000u;
constexpr std::size_t record_size(std::size_t closure, std::size_t buffer,
                                  std::uint32_t flags) noexcept {
  if (closure > largest_record_field || buffer > largest_record_field) return SIZE_MAX;
  return align_record(sizeof(record_header) + closure + extras_size(flags) + buffer);
}

// What the receiver made of the bytes at one offset.
enum class parse_status : std::uint8_t {
  ok,
  malformed,         // the header cannot be trusted: the rest of the published range is dropped
  bad_record,        // well-framed (size is sane) but invalid: this record alone is skipped
  unknown_function,  // well-framed, function id not registered: this record alone is skipped
};

// (80 bytes, zeroed with a few vector stores: the receiver's loop makes one per record, and at
// 88 bytes GCC zeroed it with a `rep stos`, which cost the write mode a quarter of its rate.)
struct parsed_record {
  parse_status status = parse_status::malformed;
  // Calls the record stands for: `repeat` for a repeated record whose size matches it (also when
  // the record is rejected otherwise: the sender counted each call as a message), else 1.
  std::uint32_t calls = 1;
  record_header header{};
  const fabric::function_entry* entry = nullptr;
  const std::byte* closure = nullptr;
  reply_extra reply{};
  notify_extra notify{};
  std::span<std::byte> buffer;

  // Bytes to skip (valid unless malformed).
  [[nodiscard]] std::uint32_t size() const noexcept { return header.size; }
};
static_assert(sizeof(parsed_record) <= 80);

// Finds the registered functions records name, remembering the last one found: a ring carries
// mostly calls of a few functions, and the hash probe then runs only when the function changes.
// The remembered entry is kept only once the registry is frozen, when its entries never move.
class function_lookup {
 public:
  const fabric::function_entry* find(fabric::function_id id) noexcept {
    if (last_ != nullptr && last_->id == id) return last_;
    const fabric::function_entry* entry = registry_.find(id);
    if (registry_.frozen()) last_ = entry;
    return entry;
  }

 private:
  const fabric::function_registry& registry_ = fabric::function_registry::instance();
  const fabric::function_entry* last_ = nullptr;
};

// Parses the record at the start of `bytes` (the published, not yet consumed part of a chunk;
// peer-written). Every length is checked against bytes.size() in 64-bit arithmetic, so no
// value a peer writes can make the receiver read outside the range. Inline: the receiver's
// loop runs it once per record.
[[gnu::always_inline]] inline parsed_record parse_record(std::span<std::byte> bytes,
                                                         function_lookup& functions) noexcept {
  parsed_record out;
  if (bytes.size() < sizeof(record_header)) return out;  // malformed: no room for a header
  std::memcpy(&out.header, bytes.data(), sizeof out.header);
  const record_header& h = out.header;
  // Framing: a size we can trust to find the next record. All sums in 64 bits.
  if (h.size < sizeof(record_header) || h.size % record_alignment != 0 || h.size > bytes.size()) {
    return out;
  }
  if ((h.flags & flag_repeated) != 0) {
    // Exactly `repeat` padded closures and nothing else; the count is trusted (for the consumed
    // messages) only when the size agrees with it.
    const std::uint64_t needed = std::uint64_t{sizeof(record_header)} +
                                 std::uint64_t{h.repeat} * fabric::closure_stride(h.closure_size);
    if (h.flags != flag_repeated || h.buffer_size != 0 || h.repeat == 0 || needed != h.size) {
      out.status = parse_status::bad_record;
      return out;
    }
    out.calls = h.repeat;
  } else {
    const std::uint64_t needed = std::uint64_t{sizeof(record_header)} + h.closure_size +
                                 extras_size(h.flags & known_flags) + h.buffer_size;
    if ((h.flags & ~known_flags) != 0 || h.repeat != 0 || needed > h.size ||
        align_record(static_cast<std::size_t>(needed)) != h.size) {
      out.status = parse_status::bad_record;
      return out;
    }
  }
  out.entry = functions.find(h.function);
  if (out.entry == nullptr) {
    out.status = parse_status::unknown_function;
    if ((h.flags & flag_reply) != 0) {
      // The caller waits for a reply: the receiver fails its slot (not executed). In bounds:
      // needed (closure + extras + buffer) <= size was checked above.
      std::memcpy(&out.reply, bytes.data() + sizeof(record_header) + h.closure_size,
                  sizeof out.reply);
    }
    return out;
  }
  const bool wants_reply = (h.flags & flag_reply) != 0;
  if (h.closure_size != out.entry->closure_size || wants_reply != (out.entry->result_size > 0)) {
    out.status = parse_status::bad_record;
    return out;
  }
  std::byte* p = bytes.data() + sizeof(record_header);
  out.closure = p;
  p += h.closure_size;
  if (wants_reply) {
    std::memcpy(&out.reply, p, sizeof out.reply);
    p += sizeof out.reply;
  }
  if ((h.flags & flag_notify) != 0) {
    std::memcpy(&out.notify, p, sizeof out.notify);
    p += sizeof out.notify;
  }
  out.buffer = {p, h.buffer_size};
  out.status = parse_status::ok;
  return out;
}
// The same without a remembered function (tests, one-off parses).
inline parsed_record parse_record(std::span<std::byte> bytes) noexcept {
  function_lookup functions;
  return parse_record(bytes, functions);
}

// Validates a published word against the receiver's view of the chunk: lap `lap`, data area of
// `capacity` bytes, consumed up to `read_offset`. stale: nothing new (an older lap);
// invalid: a value the sender can never write (a lap it cannot be on, offset past the chunk or
// not aligned, going backwards, unknown bits).
enum class word_status : std::uint8_t { fresh, stale, invalid };
word_status check_published(std::uint64_t word, std::uint32_t lap, std::uint64_t capacity,
                            std::uint64_t read_offset) noexcept;

}  // namespace seriema::invoke::wire

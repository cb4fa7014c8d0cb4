// The per-thread state of futures: records (where a future's reply lands and its value lives,
// reused from a free list), the continuations waiting for records to end (then, co_await,
// when_all), and the deferred replies in progress. The invoke layer's thread extension in slot
// layer_slot::invoke_futures, made for workers and attached threads alike.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <span>
#include <seriema/fabric/detail/thread_extension.hpp>
#include <seriema/fabric/outcome.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <string>
#include <vector>

namespace seriema::invoke::detail {

using fabric::thread_context;
class future_table;
struct future_record;

/// The value of a future<void> (a call_return of a function returning nothing gets one byte).
struct unit {
  template <class Archive>
  void serialize(Archive&) {}
};

/// What fires once a record ended: called once, on the owner thread, inside one of its polls.
struct continuation {
  void (*fire)(void* context, future_record& ended) = nullptr;
  void* context = nullptr;
};

/// Where a record's outcome comes from.
enum class record_source : std::uint8_t {
  local,     ///< set by the owner thread (then, when_all, spawn, a reply it settled)
  cell,      ///< a reply cell of the owner thread (read with cells().collect)
  entry,     ///< a reply-table entry (the deliverer stores `state`, release, after the value)
  fetching,  ///< a large value being read from the callee's memory (`fetch`)
};

struct large_fetch;  // a large reply's read in flight (src/invoke/future_table.cpp)
struct large_piece;  // where a piece of a large value lies (future_calls.hpp)

/// One future's state. Owner thread only, except `state` of an entry record, which the thread
/// delivering its reply writes (under the reply table's mutex, after the value).
///
/// Laid out for the plain path (a fixed-size value from a call_return, waited with get()): it
/// touches the first cache line (the words before `box`) and the value in `box`. The fields after
/// `box` are used by the other paths (serialized values, failures, continuations, combinators);
/// whoever sets one sets `cold`, and only a record with `cold` set has them reset when it is
/// handed out again.
struct alignas(64) future_record {
  static constexpr std::size_t box_size = 64;

  std::atomic<int> state{0};  ///< the fabric::outcome; 0 while pending
  record_source source = record_source::local;
  bool rich = false;      ///< the reply is a serialized value (decode() makes the object)
  bool watched = false;   ///< in the table's watched list (a continuation waits)
  bool observed = false;  ///< someone looked at how it ended (a failure is then not reported)
  bool held = false;      ///< handed out (a future or a combinator owns it)
  bool cold = false;      ///< a field after `box` was set (reset when handed out again)
  std::uint32_t index = 0;       ///< cell or entry of the reply
  std::uint32_t generation = 0;  ///< and its generation
  std::uint32_t value_size = 0;  ///< bytes of a fixed-size reply
  fabric::thread_id destination = 0;  ///< where the call went (messages)
  int process = -1;
  fabric::call_status status = fabric::call_status::ok;  ///< what sending it returned
  /// A typed value (a decoded reply, a local result): in `box` when it fits, else on the heap.
  void* object = nullptr;

  /// A fixed-size reply's raw bytes land here (or in `bytes` when larger), or the typed object.
  alignas(16) std::byte box[box_size];

  // ---- used off the plain path (set `cold` with them; `rich` too is set only with `cold`)
  /// Ends the record (deadline_exceeded) once passed: wait(), co_await and the watched scan.
  fabric::deadline_clock::time_point deadline = fabric::no_deadline;
  /// A combinator that ends this (local) record: ended() drives it (true once it ended the
  /// record); `discard` destroys it when the record is given back first.
  bool (*advance)(void* node) = nullptr;
  void (*destroy)(void* object, bool in_box) = nullptr;  ///< destroys `object` (emplace_value)
  /// A rich reply's bytes (after its tag) into the typed object; false when they are not a
  /// serialization of the value type.
  bool (*decode)(future_record& record, std::span<const std::byte> bytes) = nullptr;
  std::vector<std::byte> bytes;    ///< a large fixed or rich reply's bytes (capacity kept)
  std::vector<std::byte> details;  ///< a remote failure's details (the exception's type, what())
  std::exception_ptr error;        ///< a local failure's exception (a then callback, a task)
  continuation next;               ///< fires once the record ended (when watched)
  void (*discard)(void* node) = nullptr;
  void* node = nullptr;
  large_fetch* fetch = nullptr;    ///< source fetching: the read (owned by the table)

  [[nodiscard]] fabric::outcome outcome() const noexcept {
    return static_cast<fabric::outcome>(state.load(std::memory_order_acquire));
  }
  /// Where a fixed-size reply's bytes are.
  [[nodiscard]] std::byte* raw_value() noexcept {
    return value_size <= box_size ? box : bytes.data();
  }
  /// Destroys the typed value, if any.
  void drop_value() noexcept {
    if (object == nullptr) return;
    if (destroy != nullptr) destroy(object, object == box);
    object = nullptr;
    destroy = nullptr;
  }
};

/// The thread's futures. Owner thread only (the context's); records live as long as the table
/// (the context's run, or an attached thread's slot), so a future must not outlive its run.
class future_table final : public fabric::thread_extension {
 public:
  explicit future_table(thread_context& self);
  ~future_table() override;

  [[nodiscard]] thread_context& self() const noexcept { return self_; }

  /// A free record: pending, local, held. Owner thread.
  future_record& acquire();
  /// A free record opened for the reply of a call to `dest`: a value of `value_size` bytes in
  /// a reply cell or table entry (`decode` null), or a serialized value of any size that
  /// `decode` makes into the object. Every field written once (the plain path's cost).
  future_record& open_reply(fabric::thread_id dest, std::uint32_t value_size,
                            bool (*decode)(future_record&, std::span<const std::byte>));
  /// Gives a held record back: closes its reply if still waiting, destroys its value, and
  /// counts (logging the first in this process) a failure nobody looked at.
  void release(future_record& r) noexcept {
    // The plain path: a fixed-size value read and taken, nothing after `box` used.
    if (!r.cold && !r.watched && r.source == record_source::local && r.object == nullptr &&
        r.state.load(std::memory_order_relaxed) == static_cast<int>(fabric::outcome::done)) {
      r.held = false;
      free_.push_back(&r);
      return;
    }
    release_slow(r);
  }
  /// Whether r ended (reads its cell, finishes a rich reply's decoding, drives a combinator).
  bool ended(future_record& r) noexcept {
    if (r.source == record_source::local && (!r.cold || r.advance == nullptr)) {
      return r.state.load(std::memory_order_relaxed) != 0;  // the owner's own word
    }
    return ended_slow(r);
  }
  /// Ends a pending r with `why`, closing its reply first so a late one is dropped; an r that
  /// ended meanwhile keeps its outcome.
  void end_pending(future_record& r, fabric::outcome why) noexcept;
  /// Ends a local record with `why` (its value or error set before); its continuation fires in
  /// a later poll.
  void complete(future_record& r, fabric::outcome why) noexcept;
  /// Fires `c` once r ended, in a later poll (also when r ended already). One per record.
  void watch(future_record& r, continuation c);
  /// Takes r's continuation back unfired.
  void unwatch(future_record& r) noexcept;
  /// A combinator saw one of its futures end: work for the poll that drove it (a wait that
  /// sees its combinator move is not idle, and does not back off).
  void note_advanced() noexcept { ++advanced_; }
  /// While a thread waits for a combinator's record, the futures layer's polls drive it (and
  /// count what it advanced as their work); `undrive` when the wait is over.
  void drive(future_record& r);
  void undrive(future_record& r) noexcept;

  std::size_t poll(thread_context& self) override;
  void flush(thread_context&) override {}
  void peers_failed(thread_context&) override {}
  [[nodiscard]] std::string counters_json() const override;

 private:
  void update_wants_poll() noexcept {
    set_wants_poll(!watched_.empty() || !firing_.empty() || !driven_.empty());
  }
  bool ended_slow(future_record& r) noexcept;
  void release_slow(future_record& r) noexcept;
  future_record& take_free();
  // A rich reply arrived: decode it, or start reading a large one (false while that runs).
  bool settle_rich(future_record& r) noexcept;
  bool start_fetch(future_record& r, std::span<const std::byte> reply) noexcept;
  bool pieces_fit(const std::vector<large_piece>& pieces, std::uint64_t size) const noexcept;
  void start_reads(large_fetch& fetch);
  void free_pieces(const large_fetch& fetch) noexcept;
  bool settle_fetch(future_record& r) noexcept;
  // The reply's bytes are not a value of the record's type: not_executed, counted.
  void reject_reply(future_record& r) noexcept;
  // Closes r's cell, entry or read, so that nothing lands in it any more.
  void close_reply(future_record& r) noexcept;
  // end_pending without moving r between the lists.
  void end_now(future_record& r, fabric::outcome why) noexcept;
  void remove_watched(future_record& r) noexcept;
  void scan_watched() noexcept;
  void report_unobserved(future_record& r) noexcept;
  // Resets the fields after `box` (`cold` was set).
  static void reset_cold(future_record& r) noexcept;
  // The combinator ending r goes (its futures released) without ending it.
  void discard_combinator(future_record& r) noexcept;

  thread_context& self_;
  std::deque<future_record> records_;      ///< stable addresses; never shrinks
  std::vector<future_record*> free_;       ///< records nobody holds
  std::vector<future_record*> watched_;    ///< waiting to end, a continuation set
  std::deque<future_record*> firing_;      ///< ended, continuation not fired yet (in order)
  unsigned polls_since_clock_ = 0;         ///< the watched scan reads the clock every 16 polls
  std::size_t with_deadline_ = 0;          ///< watched records with a deadline
  bool scanning_ = false;  ///< inside scan_watched: complete() leaves the lists to the scan
  std::uint64_t created_ = 0;              ///< records handed out (counters_json)
  std::uint64_t fired_ = 0;                ///< continuations fired
  std::uint64_t advanced_ = 0;             ///< futures combinators saw end (note_advanced)
  std::vector<future_record*> driven_;     ///< combinators' records a wait is on
};

[[noreturn]] void throw_no_futures(thread_context& self);

/// The futures of `self`'s thread; throws seriema::error on a context without them (a service
/// thread's).
inline future_table& futures_of(thread_context& self) {
  fabric::thread_extension* layer = self.extension(fabric::layer_slot::invoke_futures);
  if (layer == nullptr) throw_no_futures(self);
  return static_cast<future_table&>(*layer);
}

}  // namespace seriema::invoke::detail

// One-sided remote invocation (paper §4.4), sending side: the messenger of one ordered thread
// pair and its inline fast paths. The protocol and word ownership are in docs/messenger.md.
// The header the rest of seriema includes for the one-sided machinery: it brings the per-thread
// table (detail/channels.hpp), the receiving side (detail/inbound_channel.hpp), the local queue
// (detail/exceeding_queue.hpp) and the record copy (detail/record_copy.hpp) with it.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <type_traits>
#include <seriema/fabric/detail/messages.hpp>
#include <seriema/fabric/detail/thread_state.hpp>
#include <seriema/fabric/runtime.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/invoke/detail/channels.hpp>
#include <seriema/invoke/detail/exceeding_queue.hpp>
#include <seriema/invoke/detail/record_copy.hpp>
#include <seriema/invoke/detail/settings.hpp>
#include <seriema/invoke/channel.hpp>
#include <seriema/invoke/detail/wire.hpp>
#include <seriema/transfer/allocators.hpp>
#include <seriema/transfer/remote_memory.hpp>
#include <seriema/transfer/transmitter.hpp>
#include <span>
#include <string>
#include <vector>

namespace seriema::invoke {

namespace detail {
struct chunk_grant;  // what the allocation service answers (src/invoke/chunk_service.hpp)
struct pending_grant;  // a chunk request whose answer is still to come (chunk_service.hpp)

// `word`, loaded into a register on its own: the compiler may not merge it with a neighbour
// into one wider load, which a store buffer cannot forward from two separate stores.
template <class T>
[[gnu::always_inline]] inline T load_alone(const T& word) noexcept {
  T value = word;
#if defined(__GNUC__)
  asm("" : "+r"(value));
#endif
  return value;
}
}  // namespace detail

// The sending side of one ordered pair (sender thread -> destination thread). Created by
// channels::to(dest) on first use; setup (the first chunk allocation) happens on the first call.
// Owner: the sender thread.
class messenger {
 public:
  messenger(channels& owner, thread_id destination, std::uint32_t released_word);
  ~messenger();
  messenger(const messenger&) = delete;
  messenger& operator=(const messenger&) = delete;

  [[nodiscard]] thread_id destination() const noexcept { return destination_; }
  // The counters, the calls joined to the open record included.
  [[nodiscard]] messenger_counters counters() const noexcept {
    messenger_counters out = counters_;
    if (open_record_ != nullptr) {
      const std::uint32_t joined = open_repeat() - 1;
      out.calls += joined;
      out.repeated += joined;
      out.bytes += std::uint64_t{joined} * open_stride_;
    }
    return out;
  }
  [[nodiscard]] std::size_t chunks() const noexcept { return ring_.size(); }
  // True when records to this destination are written straight into its chunks (same machine,
  // mappable memory); false when they are staged and put (or sent as write messages).
  [[nodiscard]] bool direct() const noexcept { return direct_; }
  // Staged records are published with one write message (fabric::am_id_write), not puts.
  [[nodiscard]] bool publishes_by_message() const noexcept { return by_message_; }
  [[nodiscard]] bool failed() const noexcept { return failed_; }
  [[nodiscard]] std::size_t queued_bytes() const noexcept { return queue_.bytes(); }
  // Addresses (in the receiver's memory) of the ring's chunks in ring order: equal to the
  // receiver's chunk_addresses() once it has caught up (the rings are symmetric).
  [[nodiscard]] std::vector<std::uint64_t> chunk_addresses() const;

  // False once the destination's process is known dead (endpoint error); the queue is dropped
  // then, and every later call returns peer_failed.
  bool check_peer();

  // Allocates the first chunks now (otherwise the first call does). Throws seriema::error.
  void setup();

  // Writes one record. `closure` is the function's bytes, `extras` the reply/notify words.
  template <class Policy>
  call_status send(channel mode, fabric::function_id function, std::span<const std::byte> closure,
                   std::uint32_t flags, std::span<const std::byte> extras,
                   std::span<const std::byte> buffer);

  // send()'s common cases, inline in the caller so that the record's sizes are constants: a
  // trad call joining the open record through the join window (either path), or a record when
  // the ring is mapped here (direct), the current chunk has room, nothing is queued and no wait
  // is in progress. Writes the record straight into the receiver's chunk (or the closure where
  // the window says) and publishes it as send() would; returns false, having done nothing,
  // when send() must run instead.
  [[gnu::always_inline]] bool try_write_direct(channel mode, fabric::function_id function,
                                                std::span<const std::byte> closure,
                                                std::uint32_t flags,
                                                std::span<const std::byte> extras,
                                                std::span<const std::byte> buffer) noexcept;

  // A copy of the join window (see join_limit_) for a caller that keeps it in registers from
  // one call to the next (aggregator_to), so that its next closure's address does not wait for
  // a load of write_offset_ (a load of a word the previous call stored waits for the store to
  // be forwarded, several cycles, and a run of joined calls would be a chain of them). The copy
  // is current while window_epoch_ and write_offset_ still hold what it was taken from: every
  // other write changes write_offset_, and every opening or closing of the window changes
  // window_epoch_.
  struct join_view {
    std::uint64_t epoch = 0;
    std::uintptr_t base = 0;           // join_base_
    std::uint64_t at = 0;              // write_offset_
    // How far closures may go with the batch not yet due: the lower of join_limit_ and
    // publish_limit_ - 1; 0 while the window is closed. One bound instead of two keeps the
    // caller's loop a register lighter (a counter spilled to the stack is a store per call), and
    // the call that makes the batch due goes through the messenger's own join, which publishes.
    std::uint64_t quiet_limit = 0;
    fabric::function_id function = 0;  // open_function_
  };
  // Each word is loaded on its own: the window was usually just (re)opened by separate 8-byte
  // stores, and the compiler's 16-byte copy of two of them could not be forwarded from those
  // stores; it waited for them to reach the cache, behind every store of the record just
  // written into the ring (a fifth of the sender's time at 64 B, in the call after each publish).
  // For adaptive calls (`adaptive`), the window is closed until the batch's check was made: the
  // batch's first call goes through the messenger, which reads the receiver's word.
  [[nodiscard]] join_view view_join_window(bool adaptive = false) const noexcept {
    const std::uint64_t limit = detail::load_alone(join_limit_);
    std::uint64_t publish_at = detail::load_alone(publish_limit_);
    if (adaptive && detail::load_alone(checked_batch_) != detail::load_alone(published_)) {
      publish_at = 0;
    }
    return {detail::load_alone(window_epoch_), detail::load_alone(join_base_),
            detail::load_alone(write_offset_),
            publish_at == 0 ? 0 : std::min(limit, publish_at - 1),
            detail::load_alone(open_function_)};
  }
  [[nodiscard]] bool join_view_current(const join_view& view) const noexcept {
    return window_epoch_ == view.epoch && write_offset_ == view.at;
  }
  // Appends `closure` (padded to `stride`) to the open record through `view`, which the caller
  // found current, of the call's function and with room below view.quiet_limit: what
  // try_write_direct's join does for a call that leaves the batch not yet due.
  [[gnu::always_inline]] void join_through(join_view& view, std::span<const std::byte> closure,
                                           std::size_t stride) noexcept {
    const std::uint64_t at = view.at;
    view.at = at + stride;
    write_offset_ = view.at;
    append_closure(join_address(view.base, at), closure, stride);
  }

  // A seriema-internal record (a call_return's reply): written when there is room, queued
  // otherwise with no limit, so it is never dropped for lack of room.
  call_status send_unbounded(fabric::function_id function, std::span<const std::byte> closure,
                             std::span<const std::byte> buffer);

  // Publishes what was written but not yet published (trad batches). Cheap when nothing is.
  void publish();
  // Moves queued records into the ring while there is room; publishes. Returns records moved.
  std::size_t drain();
  // The idle flush (channels::flush): drain(), then publish(); but once the runtime knows the
  // destination dead, fails what is written and unpublished (not_executed) instead of
  // publishing it into a dead process's memory. (Another thread may have learned the death
  // before this thread's poll noticed it: its calls provably did not run all the same.)
  void flush();

  bool listed_as_queued = false;  // in channels' list of messengers with a queue (owner: channels)

  // Test and diagnostic hooks (docs/messenger.md, "Testing the receiver"): append `bytes` as
  // they are (they count as `messages` sent) and publish them; or write `word` as the published
  // word of the current chunk (counts as one message sent).
  call_status publish_raw_for_testing(std::span<const std::byte> bytes, std::uint64_t messages);
  call_status publish_word_for_testing(std::uint64_t word);

 private:
  struct slot {
    transfer::remote_memory_locator locator;
    std::unique_ptr<transfer::remote_memory> remote;
    std::byte* direct_data = nullptr;      // data area when mapped, else null
    std::uint64_t* direct_word = nullptr;  // published word when mapped
    std::uint64_t capacity = 0;            // data-area bytes
    std::uint32_t lap = 0;                 // lap of the fill in progress / last fill
    std::uint64_t fill = 0;                // fill number (1-based) of its last fill; 0 = never
  };

  enum class space : std::uint8_t { ok, full, failed, too_large };
  // Makes room for `size` bytes in the current chunk (moving to / growing into another chunk
  // when needed); returns where to serialize, or null with the reason.
  std::byte* reserve(std::size_t size, space& why, bool may_grow);
  std::byte* reserve_slow(std::size_t size, space& why, bool may_grow);
  // Makes `size` written bytes part of the current chunk (and staging unit); does not publish.
  void commit(std::size_t size, bool count);
  // Counts one call of `size` record bytes as sent (the messenger's and the thread's counters).
  void count_record(std::size_t size) noexcept;
  // Whether a call can be one closure of a repeated record (wire::flag_repeated): a batching
  // (trad or adaptive) call without extras or buffer.
  [[nodiscard]] static constexpr bool joinable(channel mode, std::uint32_t flags,
                                               std::span<const std::byte> buffer) noexcept {
    return batches(mode) && flags == 0 && buffer.empty();
  }
  [[nodiscard]] static constexpr bool batches(channel mode) noexcept {
    return mode == channel::trad || mode == channel::adaptive;
  }
  // adaptive's clock: whether the destination has run everything published to it in the current
  // chunk. Mapped rings only: the receiver's consumed word (its thread's plain stores, read here
  // with a relaxed load: it only decides when to publish) says the offset and lap it ran up to.
  // Nothing published in this fill counts as caught up. A staged ring cannot see the word and
  // never counts as caught up (adaptive batches as trad there). The word is read once per
  // batch, by its first call (checked_batch_ says for which publish it was read): a receiver
  // that caught up gets that call at once; otherwise the batch is a trad batch, due at the
  // flush size. Reading the word again later in the batch (every
  // 256 bytes, or at half the flush size) published smaller batches to a receiver that kept up,
  // and cost adaptive 0.4-0.7 x trad's rate at 64 and 256 B on the 2-core VM.
  [[gnu::always_inline]] bool receiver_caught_up() noexcept {
    if (!direct_) return false;
    if (published_ == 0) return true;
    const slot& s = ring_[current_];
    const std::uint64_t consumed =
        std::atomic_ref<std::uint64_t>(s.direct_word[consumed_word_index])
            .load(std::memory_order_relaxed);
    return wire::published_lap(consumed) == s.lap &&
           wire::published_offset(consumed) >= published_;
  }
  // An adaptive batch is due at its first call when the receiver caught up (read once). After
  // a full batch (the flush size reached: a flood, whose receiver is busy) the word is not read:
  // it is a cross-core miss, as the receiver writes it at every batch it runs, and one per batch
  // cost adaptive a quarter of trad's rate at 8 B. checked_batch_ still holds the previous
  // batch's start then, so the batch that ended at published_ is published_ - that long.
  [[gnu::always_inline]] bool adaptive_due() noexcept {
    if (checked_batch_ == published_) return false;
    const std::uint64_t previous = checked_batch_;
    checked_batch_ = published_;
    if (previous < published_ &&
        published_ - previous >= owner_.options().flush_size_for(by_message_)) {
      return false;
    }
    return receiver_caught_up();
  }
  // The consumed word's index from the published word (both in the mapped chunk header).
  static constexpr std::size_t consumed_word_index =
      offsetof(wire::chunk_header, consumer) / sizeof(std::uint64_t);
  // Whether a call may join the open record: a joinable call of its function.
  [[nodiscard]] bool joins_open_record(channel mode, fabric::function_id function,
                                       std::uint32_t flags,
                                       std::span<const std::byte> buffer) const noexcept {
    return joinable(mode, flags, buffer) && open_record_ != nullptr && open_function_ == function;
  }
  // Notes the record just serialized at `p` as the open record when a trad call of the same
  // function may join it, and as no open record otherwise.
  // (The record before it was ended by the caller: see end_open_record.)
  [[gnu::always_inline]] void note_written(std::byte* p, channel mode,
                                           fabric::function_id function, std::uint32_t flags,
                                           std::span<const std::byte> buffer,
                                           std::size_t closure_size) noexcept {
    if (!joinable(mode, flags, buffer)) return;
    open_record_ = p;
    open_record_at_ = write_offset_;  // (callers commit the record after noting it)
    open_function_ = function;
    open_stride_ = static_cast<std::uint32_t>(fabric::closure_stride(closure_size));
  }
  // Closures in the open record: its bytes up to the end of the written bytes (the chunk's
  // offsets, which a staged window advances as well: see join_limit_).
  [[nodiscard]] std::uint32_t open_repeat() const noexcept {
    return static_cast<std::uint32_t>(
        (write_offset_ - open_record_at_ - sizeof(wire::record_header)) / open_stride_);
  }
  // Where the window writes the closure that starts at chunk offset `at`.
  [[nodiscard]] static std::byte* join_address(std::uintptr_t base, std::uint64_t at) noexcept {
    return reinterpret_cast<std::byte*>(base + at);
  }
  // Opens the join window on the open record (see join_limit_) when nothing else may come
  // between its closures; the caller is not inside a wait (busy_ is clear).
  void open_join_window() noexcept {
    if (open_record_ == nullptr || failed_ || busy_ || closed_ || !queue_.empty()) return;
    const slot& s = ring_[current_];
    if (direct_) {
      join_base_ = reinterpret_cast<std::uintptr_t>(s.direct_data);
      join_limit_ = s.capacity;
    } else {
      // The open record is in the staging unit, whose bytes advance with the chunk's offsets
      // from here on; every record reserved publish_room, so the subtraction does not wrap.
      join_base_ = reinterpret_cast<std::uintptr_t>(staging_unit_.data + staged_) - write_offset_;
      join_limit_ = std::min<std::uint64_t>(
          s.capacity, write_offset_ + (staging_unit_.size - publish_room - staged_));
      window_offset_ = write_offset_;
    }
    ++window_epoch_;
  }
  // A trad batch the window filled is due: publishes it by the messenger's path.
  void publish_joined() {
    if (direct_) {
      publish_word(false, false);
    } else {
      publish_staged(false, false);
    }
  }
  // Where the open record's next closure goes (`stride` bytes at the end of the written bytes),
  // or null when the chunk or the staging unit has no room for it.
  [[nodiscard]] std::byte* room_to_append(std::size_t stride) const noexcept;
  // Writes `closure` at `at` (the end of the open record), padded to `stride` bytes; the caller
  // commits the bytes (uncounted: end_open_record counts the joined calls, which are the
  // record's bytes over its stride).
  void append_closure(std::byte* at, std::span<const std::byte> closure,
                      std::size_t stride) noexcept;
  // Ends the open record, if any: writes its header's size, flag and count when calls joined
  // it, and counts the joined calls as sent. Every publish runs it before its word (the header
  // words must be in place when the receiver may read them), and so does every write of bytes
  // other than a joining closure (the record no longer ends at the written bytes).
  [[gnu::always_inline]] void end_open_record() noexcept {
    if (open_record_ != nullptr) seal_open_record();
  }
  void close_join_window() noexcept {
    if (join_limit_ != 0 && !direct_) staged_ += write_offset_ - window_offset_;
    join_limit_ = 0;
    ++window_epoch_;
  }
  void seal_open_record() noexcept;
  // Whether a record just written in `mode` is to be published now: at once, or (trad) once
  // the written bytes reach publish_limit_, or (adaptive) then or once the receiver caught up.
  [[nodiscard]] bool publish_due(channel mode) noexcept;
  // After a publish's word went out: the written bytes are published and, with restart_flush,
  // the next trad batch is due flush_size bytes later. A direct write (or ovfl) call publishes
  // itself without restarting the limit: the trad batch after it is due where the limit was
  // left (at most flush_size bytes after the last trad publish; at once if write calls went
  // past it), and its publish restarts it. An early batch at a change of mode spares every
  // write call a store and a look at the options (docs/messenger.md).
  void note_published(bool restart_flush = true) noexcept;
  bool advance_chunk(bool may_grow, space& why);
  [[nodiscard]] bool slot_free(const slot& s) const noexcept;
  void start_fill(std::size_t index);
  void close_current(bool splice);
  // Obtains the next chunks (options.chunks_per_allocation, within max_chunks) from the
  // destination's process and splices them into the ring; false when none came (ring at its
  // maximum, no memory there, the deadline in force passed, or the peer failed: fail_all).
  bool grow();
  // Asks for `count` chunks, or (a request outstanding) waits for the earlier request's answer
  // and sets `count` to what it asked.
  bool request_chunks(std::uint32_t& count, detail::chunk_grant& grant);
  void warn_no_memory(std::uint32_t count);
  void adopt_chunks(const detail::chunk_grant& grant, std::uint32_t count);
  // On the first chunks: direct (mapped) writes, or staged puts / write messages, and the
  // transmitter and staging units those need.
  void choose_publishing(bool direct, transfer::ucx_endpoint& endpoint);
  // Release-stores the published word of the current (mapped) chunk: write_offset_ and its lap.
  [[gnu::always_inline]] void publish_word(bool full, bool splice,
                                           bool restart_flush = true) noexcept;
  void publish_staged(bool full, bool splice);
  // Sends the staged bytes [staged_batch_, staged_batch_ + pending) to `remote_offset` of the
  // current chunk and then `word` to its published word (put, fence, put; or one write
  // message); consumes the word's room in the unit. Returns the transmitter's status.
  transfer::op_status send_staged(std::size_t pending, std::uint64_t remote_offset,
                                  std::uint64_t word);
  // send_staged's transfer for any registered bytes: `data` (read until the tags in `data_tags`
  // complete; staging_unit_'s own bytes when `in_staging`) to `remote_offset` of the current
  // chunk, then `word` to its published word, ordered (fence, or one write message).
  transfer::op_status send_batch(std::span<const std::byte> data, transfer::unit_tags* data_tags,
                                 bool in_staging, std::uint64_t remote_offset,
                                 std::uint64_t word);
  bool start_staging_unit(std::size_t size);
  // Marks the messenger failed (its destination died); settle_failure() ends its open record and
  // fails its queued records (call_returns: not executed), at once unless a wait of it is on
  // the stack (busy_), else when that returned.
  void fail_all() noexcept;
  // False (and the messenger failed) once the runtime knows the destination's process dead,
  // whichever thread learned it; checked by every call before it writes.
  bool peer_alive();
  void settle_failure() noexcept;
  // Ends the reply slots of records written here but never published (not_executed).
  void fail_unpublished_replies(fabric::local_thread_state& state) noexcept;
  // Queues one record behind the others (or, `first`, ahead of them: see send), within the
  // limit when `bounded`.
  call_status queue_record(fabric::function_id function, std::span<const std::byte> closure,
                           std::uint32_t flags, std::span<const std::byte> extras,
                           std::span<const std::byte> buffer, bool bounded, bool first = false);
  // drain()'s steps; each returns the records it moved (0: no room, or the peer failed).
  // The oldest queued record copied into the ring (mapped chunk or staging unit).
  std::size_t copy_queued_record();
  // The longest run of queued records in one registered page that fits the current chunk, sent
  // from the queue itself and published (remote path, no copy).
  std::size_t send_queued_run();
  // Makes the current chunk one with `size` bytes free (moving on, or growing, when needed).
  bool make_room_in_chunk(std::size_t size, space& why);
  call_status write_record(channel mode, fabric::function_id function,
                           std::span<const std::byte> closure, std::uint32_t flags,
                           std::span<const std::byte> extras, std::span<const std::byte> buffer,
                           space& why);

  channels& owner_;
  thread_id destination_;
  int destination_process_;
  std::uint32_t released_word_;  // index of our `released` word in the thread's feedback area
  bool direct_ = false;
  bool by_message_ = false;  // staged publishes go as write messages (see remote_publish)
  bool failed_ = false;
  bool warned_no_memory_ = false;  // grow() said once that the destination had no memory
  bool busy_ = false;  // inside reserve/grow: a nested call (from a handler run while we wait)
                       // goes to the queue so the ring is never written re-entrantly
  std::uint32_t batches_ = 0;  // allocation batches obtained
  // A chunk request whose answer had not come when the deadline in force passed. The receiver's
  // process may have granted it already, and a receiver adopts the first grant of each batch
  // number: so the next growth waits for this answer instead of asking again for the same batch.
  std::unique_ptr<detail::pending_grant> pending_grant_;
  std::vector<slot> ring_;
  std::size_t current_ = 0;
  std::uint64_t fills_ = 0;          // fills started
  std::uint64_t write_offset_ = 0;   // bytes written in the current chunk this lap
  std::uint64_t published_ = 0;      // bytes published in the current chunk this lap
  bool closed_ = false;              // the current chunk was published full; move before writing
  // The open record (trad): the last record written, while it is unpublished and ends where the
  // written bytes end, so that a trad call of the same function appends its closure to it
  // instead of writing a record of its own (wire::flag_repeated). It points into the mapped
  // chunk (direct) or the staging unit; null when there is none. Its header still says one call
  // until end_open_record writes the count, and the joined calls are counted (counters_, the
  // thread's sent messages) only then: while it is open, its first call, counted and not yet
  // consumable, keeps runtime::run from seeing the job quiet.
  std::byte* open_record_ = nullptr;
  std::uint64_t open_record_at_ = 0;  // the open record's offset in its chunk
  fabric::function_id open_function_ = 0;
  std::uint32_t open_stride_ = 0;  // bytes of each closure, padding included
  // The join window: while join_limit_ is not 0, a trad call of open_function_ without extras
  // or buffer whose closure fits below join_limit_ writes it at join_base_ + write_offset_ with
  // no other check, and publishes once write_offset_ reaches publish_limit_. Open
  // (open_join_window) only while every other check of the general path would pass: an open
  // record, nothing queued, no wait in progress (a call made from inside a wait must queue
  // behind the waiting one), not closed, not failed. Closed by end_open_record (every publish,
  // record change, failure), by a queued record and at the start of every general-path write.
  // Direct path: join_base_ is the mapped chunk's data area, join_limit_ its capacity.
  // Staged path: join_base_ maps chunk offsets to the staging unit (the unit's bytes and the
  // chunk's advance together), join_limit_ is the lower of the chunk's capacity and the unit's
  // room less publish_room. While a staged window is open, staged_ lags: the closures written
  // through it are write_offset_ - window_offset_ bytes that close_join_window adds, and every
  // reader of staged_ runs after a close (general-path writes, queueing, publishes).
  std::uint64_t join_limit_ = 0;
  std::uintptr_t join_base_ = 0;
  std::uint64_t window_offset_ = 0;  // write_offset_ when a staged window opened
  // Counts the window's openings and closings: a join_view taken before one is stale.
  std::uint64_t window_epoch_ = 0;
  // write_offset_ at which the trad batch is due (published_ + flush size, set at each publish
  // and each new fill: a flush size set later applies from the next publish on).
  std::uint64_t publish_limit_ = 0;
  // adaptive: published_ when the current batch's first call read the receiver's consumed word
  // (see receiver_caught_up); ~0 at each new fill. Publishes leave it alone (write and ovfl pay
  // no store for adaptive): a batch whose published_ differs has not been checked yet.
  std::uint64_t checked_batch_ = ~std::uint64_t{0};
  // Remote path: records are serialized into a staging unit and put at publish.
  std::unique_ptr<transfer::transmitter> transmitter_;
  std::unique_ptr<transfer::circular_allocator> staging_;
  transfer::registered_buffer staging_unit_;
  // Room a staged publish takes in the unit after the records (the word, or the write
  // message's header): every record reserves it, so a publish with records pending fits.
  static constexpr std::size_t publish_room = sizeof(fabric::write_message);
  std::size_t staged_ = 0;          // bytes used in staging_unit_
  std::size_t staged_batch_ = 0;    // staging offset of the first unpublished record
  exceeding_queue queue_;
  messenger_counters counters_;
};

// The inline members, defined after the class because they reach the channels table (owner_),
// complete by now (detail/channels.hpp).

[[gnu::always_inline]] inline void messenger::count_record(std::size_t size) noexcept {
  ++counters_.calls;
  counters_.bytes += size;
  owner_.count_sent(1);
}

[[gnu::always_inline]] inline std::byte* messenger::room_to_append(
    std::size_t stride) const noexcept {
  const slot& s = ring_[current_];  // an open record implies a current chunk
  if (write_offset_ + stride > s.capacity) return nullptr;
  if (direct_) return s.direct_data + write_offset_;
  if (staged_ + stride + publish_room > staging_unit_.size) return nullptr;
  return staging_unit_.data + staged_;
}

[[gnu::always_inline]] inline void messenger::append_closure(std::byte* at,
                                                              std::span<const std::byte> closure,
                                                              std::size_t stride) noexcept {
  detail::copy_in_pieces<8>(at, closure.data(), closure.size());
  std::memset(at + closure.size(), 0, stride - closure.size());
}

[[gnu::always_inline]] inline void messenger::publish_word(bool full, bool splice,
                                                          bool restart_flush) noexcept {
  end_open_record();
  slot& s = ring_[current_];
  std::atomic_ref<std::uint64_t>(*s.direct_word)
      .store(wire::make_published(write_offset_, s.lap, full, splice), std::memory_order_release);
  note_published(restart_flush);
}

inline void messenger::note_published(bool restart_flush) noexcept {
  published_ = write_offset_;
  if (restart_flush) publish_limit_ = published_ + owner_.options().flush_size_for(by_message_);
  ++counters_.publishes;
}

[[gnu::always_inline]] inline bool messenger::publish_due(channel mode) noexcept {
  if (!batches(mode)) return true;
  if (write_offset_ >= publish_limit_) return true;
  return mode == channel::adaptive && adaptive_due();
}

[[gnu::always_inline]] inline bool messenger::try_write_direct(
    channel mode, fabric::function_id function, std::span<const std::byte> closure,
    std::uint32_t flags, std::span<const std::byte> extras,
    std::span<const std::byte> buffer) noexcept {
  if (joinable(mode, flags, buffer)) {
    // The join window: its conditions were checked when it opened (see join_limit_).
    const std::size_t stride = fabric::closure_stride(closure.size());
    const std::uint64_t at = write_offset_;
    if (open_function_ == function && at + stride <= join_limit_) {
      // The messenger's words first: after the stores into the ring (std::byte, which may
      // alias anything) the compiler would load them again.
      write_offset_ = at + stride;
      const bool due = at + stride >= publish_limit_ ||
                       (mode == channel::adaptive && adaptive_due());
      append_closure(join_address(join_base_, at), closure, stride);
      if (due) publish_joined();
      return true;
    }
  }
  const std::size_t size = wire::record_size(closure.size(), buffer.size(), flags);
  // direct_ is set with the first chunks, so the ring is not empty; failed_, busy_, closed_ and
  // a queue each send the call to the general path, which knows what to do with it.
  if (!direct_ || failed_ || busy_ || closed_ || !queue_.empty()) return false;
  slot& s = ring_[current_];
  if (size > owner_.options().max_record()) return false;
  if (write_offset_ + size > s.capacity) return false;
  end_open_record();
  std::byte* p = s.direct_data + write_offset_;
  detail::serialize_record(p, size, function, closure, flags, extras, buffer);
  note_written(p, mode, function, flags, buffer, closure.size());
  write_offset_ += size;
  count_record(size);
  if (publish_due(mode)) {
    publish_word(false, false, batches(mode));
  } else {
    open_join_window();
  }
  return true;
}

}  // namespace seriema::invoke

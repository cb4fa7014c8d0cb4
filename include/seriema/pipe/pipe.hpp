// Remote pipes (seed 001, rmalloc()/rpipe()): a one-way stream between two worker threads whose
// writer allocates buffers directly in a heap in the reader's memory (rmalloc, no round trip),
// fills them in place (rmem), publishes each with a notification flag (rwrite), and whose reader
// finds them in write order by polling flags (rread), uses them in place and hands them back
// (rfree). The protocol and the wire format are in docs/pipes.md and pipe/detail/slot.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <seriema/fabric/outcome.hpp>
#include <seriema/fabric/placement.hpp>
#include <seriema/invoke/future.hpp>
#include <seriema/transfer/allocators.hpp>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace seriema::fabric {
class thread_context;
}

namespace seriema::pipe {

using fabric::deadline_clock;
using fabric::no_deadline;

/// How a write travels to the reader's memory.
enum class write_protocol : std::uint8_t {
  /// one_operation on the same machine and where puts are emulated (tcp); data_then_flag where
  /// the network has RDMA (rc, dc, ugni).
  automatic,
  /// The seed's PUT_W_SYNC: payload and flag leave together, in one operation whose receiver
  /// applies them in order: plain stores into the reader's mapped heap on the same machine, one
  /// write message elsewhere.
  one_operation,
  /// The seed's 2PUT: put of header and payload, fence, put of the flag; through UCX even on the
  /// same machine (rmem is then a local copy of the heap, not the reader's memory).
  data_then_flag,
};
const char* to_string(write_protocol protocol) noexcept;  ///< "automatic", ...

/// When a reader's rfree reaches the writer.
enum class release_mode : std::uint8_t {
  automatic,  ///< deferred with next_fit, immediate with the other policies (as the seed)
  deferred,   ///< batched: release_batch frees (or the reader's idle moments) in one hand-back
  immediate,  ///< every rfree is handed back at once
};
const char* to_string(release_mode mode) noexcept;  ///< "automatic", ...

/// A pipe's settings; both ends must open it with equal options (open refuses a mismatch).
struct pipe_options {
  /// Bytes of the heap in the reader's memory; a multiple of 64, at least 4096, and with the
  /// notification ring at most 2 MiB (one allocation of the allocation service).
  std::size_t heap_bytes = std::size_t{1} << 20;
  /// Buffers live at most (allocated and not yet handed back) and slots of the notification
  /// ring; a power of two, 1 .. 4096.
  std::uint32_t width = 256;
  /// How rmalloc chooses a range: next_fit is a circular heap (the seed's default, the fastest);
  /// best_fit, worst_fit and first_fit search the free ranges (less fragmentation).
  transfer::fit_policy fit = transfer::fit_policy::next_fit;
  release_mode release = release_mode::automatic;  ///< see release_mode
  write_protocol protocol = write_protocol::automatic;  ///< see write_protocol
  /// Deferred releases handed back together; 0: width / 4 (at least 1).
  std::uint32_t release_batch = 0;
  /// Bytes of the writer's exposed heap for the pull direction (rstage / rpost / rget): a
  /// multiple of 64 up to 2 MiB less the release area; 0 (the default): no pull direction.
  std::size_t pull_heap_bytes = 0;

  /// Throws config_error naming the field when a value is out of range.
  void validate() const;
  /// Field by field (open compares the two ends' options).
  [[nodiscard]] bool operator==(const pipe_options&) const = default;
};

/// How a pipe operation ended. Data path: returned, never thrown.
enum class pipe_status : std::uint8_t {
  ok,
  empty,              ///< rread: nothing written yet (the wait, if any, found nothing either)
  zero_size,          ///< rmalloc(0): nothing allocated
  too_large,          ///< rmalloc: larger than the heap can ever hold
  exhausted,          ///< rmalloc: the heap or the width is full now (nothing allocated)
  not_owner,          ///< the buffer is not one of this pipe end's (nothing done)
  stale,              ///< the buffer was already written (rwrite) or freed (rfree): nothing done
  closed,             ///< the end is closed, or (rread) the writer closed and all was read
  peer_failed,        ///< the other end's process died: nothing done (not_executed)
  deadline_exceeded,  ///< the wait ended at its deadline with nothing to show
  error,              ///< the transport refused the operation (nothing done; see the log)
  mismatch,           ///< reduction: a round's contributions differ in size (round dropped)
};
const char* to_string(pipe_status status) noexcept;  ///< "ok", "peer failed", ...

/// A buffer of a pipe: where its payload lies in the heap, how long it is, and the end's
/// bookkeeping (so that rwrite and rfree can refuse a buffer that is not theirs or not live). A
/// plain value; meaningful only to the end that returned it.
struct rbuffer {
  std::uint64_t offset = 0;  ///< payload offset in the heap
  std::uint64_t size = 0;    ///< payload bytes
  std::uint32_t ticket = 0;  ///< writer: allocation entry; reader: the write's tag
  std::uint32_t end = 0;     ///< the pipe end that handed it out (0: none)
};

/// rmalloc's answer.
struct reservation {
  rbuffer buffer;                          ///< valid when status == ok
  pipe_status status = pipe_status::ok;    ///< ok, zero_size, too_large, exhausted, closed, ...
  /// True when a buffer was allocated.
  [[nodiscard]] explicit operator bool() const noexcept { return status == pipe_status::ok; }
};

/// rget's answer.
struct get_result {
  std::size_t size = 0;                  ///< bytes copied (ok), or needed (too_large)
  pipe_status status = pipe_status::ok;  ///< ok, empty, too_large, closed, peer_failed, ...
  /// True when a buffer was pulled.
  [[nodiscard]] explicit operator bool() const noexcept { return status == pipe_status::ok; }
};

/// rread's answer.
struct read_result {
  rbuffer buffer;                        ///< valid when status == ok
  pipe_status status = pipe_status::ok;  ///< ok, empty, closed, peer_failed, deadline_exceeded
  /// True when a buffer was read.
  [[nodiscard]] explicit operator bool() const noexcept { return status == pipe_status::ok; }
};

/// What an end counted (statistics; the owner thread reads them).
struct pipe_counters {
  std::uint64_t buffers = 0;          ///< written (writer) or read (reader)
  std::uint64_t bytes = 0;            ///< payload bytes written or read
  std::uint64_t releases = 0;         ///< buffers handed back (reader) or taken back (writer)
  std::uint64_t hand_backs = 0;       ///< release publications (reader)
  std::uint64_t exhausted = 0;        ///< rmalloc calls that found the heap or width full
  std::uint64_t rejected_slots = 0;   ///< slots that failed validation (reader; never used)
  std::uint64_t rejected_releases = 0;  ///< release entries that named no written buffer
  std::uint64_t peak_heap_bytes = 0;  ///< highest end of a live buffer in the heap (writer)
  std::uint64_t peak_live_bytes = 0;  ///< most heap bytes live at once (writer)
  std::uint64_t forwarded = 0;  ///< rforward by reference, not copied (writer)
  std::uint64_t redirected = 0;  ///< buffers read in place in another pipe's heap (reader)
};

namespace detail {
class writer_state;
class reader_state;
}  // namespace detail

class reader;

/// The writing end of a pipe. Owner thread only (the worker that opened it).
class writer {
 public:
  /// Opens the pipe to `reader` (a worker thread, not this one), which opens its end with
  /// reader::open(ctx, this thread, options). The n-th writer opened from this thread to `reader`
  /// meets the n-th reader opened there from this thread. Waits, serving calls, for the reader's
  /// heap until `deadline` (or the deadline in force). Throws config_error for bad options,
  /// seriema::error when the reader is not a worker, dead, opened with other options, or did not
  /// come by the deadline (deadline_error).
  static writer open(fabric::thread_context& ctx, fabric::thread_id reader,
                     const pipe_options& options = {},
                     deadline_clock::time_point deadline = no_deadline);

  /// Allocates a buffer of `n` payload bytes in the reader's heap; no round trip, never waits.
  [[nodiscard]] reservation rmalloc(std::size_t n);
  /// rmalloc that waits for the reader to hand buffers back (serving calls) until `deadline`,
  /// when the heap or the width is full: exhausted then.
  [[nodiscard]] reservation rmalloc(std::size_t n, deadline_clock::time_point deadline);
  /// rmalloc(n, deadline) as a future of this thread (get, co_await, then): it ends done with
  /// the reservation once there is room, a refusal, or the deadline (exhausted). The thread's
  /// polls drive it; an end closed first ends it with closed.
  [[nodiscard]] invoke::future<reservation> rmalloc_async(std::size_t n,
                                                          deadline_clock::time_point deadline);
  /// The payload bytes of a buffer rmalloc returned and not yet written: on the same machine
  /// with one_operation, the reader's memory itself (filling it is the transfer); otherwise a
  /// local copy of the heap that rwrite sends. Empty for a buffer that is not live here.
  [[nodiscard]] std::span<std::byte> rmem(const rbuffer& buffer) const noexcept;
  /// Publishes a buffer filled through rmem: the reader's next rread returns it (writes are
  /// read in the order of rwrite). After it the buffer is the reader's: do not touch it.
  [[nodiscard]] pipe_status rwrite(const rbuffer& buffer);
  /// rwrite of only the first `used` bytes (1 .. buffer.size): the reader's rread sees a buffer
  /// of `used` bytes, and only those travel (a record shorter than the room reserved for it).
  /// Anything else: not_owner.
  [[nodiscard]] pipe_status rwrite(const rbuffer& buffer, std::size_t used);
  /// Redirection: hands a buffer this thread read from `from` (another pipe's reader end of
  /// this thread, not yet freed) on to this pipe's reader, in order with the rwrites. When that
  /// reader is on this machine the payload is not copied: a 16-byte redirect record names it
  /// where it lies, the next hop reads it there in place, and its rfree frees it in `from` (the
  /// buffer stays out of `from`'s heap until then). Elsewhere it is copied once, straight from
  /// `from`'s heap into this pipe's, and freed in `from` at once. A buffer that was itself
  /// forwarded to this thread is copied. Never waits: exhausted when this pipe's heap or width
  /// is full (the buffer stays `from`'s). not_owner / stale as for rfree on `from`.
  [[nodiscard]] pipe_status rforward(reader& from, const rbuffer& buffer);
  /// rforward that waits (serving calls) until `deadline` for room in this pipe's heap.
  [[nodiscard]] pipe_status rforward(reader& from, const rbuffer& buffer,
                                     deadline_clock::time_point deadline);
  /// rforward(from, buffer, deadline) as a future of this thread: its polls try the forward
  /// (never waiting inside a poll) until it is done or refused, or the deadline (exhausted);
  /// closed when either end closes first. The buffer is `from`'s until the future ends ok.
  [[nodiscard]] invoke::future<pipe_status> rforward_async(reader& from, const rbuffer& buffer,
                                                           deadline_clock::time_point deadline);
  /// Pull direction (pipe_options::pull_heap_bytes): a buffer of `n` bytes in this thread's own
  /// exposed heap, filled through rmem, then offered with rpost for the reader to pull (rget).
  /// The same refusals as rmalloc; closed when the pipe has no pull direction.
  [[nodiscard]] reservation rstage(std::size_t n);
  /// Offers a staged buffer to the reader (the seed's rread source): its next rget copies it
  /// straight out of this thread's memory (one get, or a copy on the same machine) and hands
  /// it back. Buffers are pulled in rpost order.
  [[nodiscard]] pipe_status rpost(const rbuffer& staged);
  /// Ends the stream: the reader reads what was written, then rread says closed. Idempotent;
  /// never waits for the reader. The destructor closes.
  void close() noexcept;

  [[nodiscard]] const pipe_options& options() const noexcept;  ///< as opened
  [[nodiscard]] write_protocol protocol() const noexcept;  ///< the protocol in use (resolved)
  [[nodiscard]] bool direct() const noexcept;  ///< rmem is the reader's memory itself
  [[nodiscard]] const pipe_counters& counters() const noexcept;  ///< this end's counters
  [[nodiscard]] std::size_t live_buffers() const noexcept;  ///< allocated, not handed back

  /// Takes over the end; `other` may then only be destroyed or assigned to.
  writer(writer&& other) noexcept;
  /// Closes this end, then takes over `other`.
  writer& operator=(writer&& other) noexcept;
  ~writer();  ///< close()

 private:
  explicit writer(std::unique_ptr<detail::writer_state> state) noexcept;
  std::unique_ptr<detail::writer_state> state_;
  friend struct duplex;
};

/// The reading end of a pipe. Owner thread only (the worker that opened it).
class reader {
 public:
  /// Opens the pipe from `writer` (see writer::open): allocates the heap and the notification
  /// ring in this thread's NUMA zone and hands them to the writer. Throws as writer::open does.
  static reader open(fabric::thread_context& ctx, fabric::thread_id writer,
                     const pipe_options& options = {},
                     deadline_clock::time_point deadline = no_deadline);

  /// The next buffer in write order, if it was published; never waits (empty if not).
  [[nodiscard]] read_result rread();
  /// The next buffer, waiting for it (serving calls) until `deadline` (or the deadline in force).
  [[nodiscard]] read_result rread(deadline_clock::time_point deadline);
  /// rread(deadline) as a future of this thread (get, co_await, then): it ends done with the
  /// result (deadline_exceeded when the deadline passed first). The thread's polls drive it; an
  /// end closed first ends it with closed.
  [[nodiscard]] invoke::future<read_result> rread_async(deadline_clock::time_point deadline);
  /// The payload of a buffer rread returned and not yet freed, in place; empty otherwise.
  [[nodiscard]] std::span<std::byte> rmem(const rbuffer& buffer) const noexcept;
  /// Gives a buffer back to the writer (deferred or immediate, per release_mode). After it the
  /// buffer is the writer's: do not touch it.
  [[nodiscard]] pipe_status rfree(const rbuffer& buffer);
  /// Pull direction: copies the next posted buffer into `into` (one get from the writer's
  /// memory, or a copy on the same machine; the wait for it serves calls until the deadline in
  /// force) and hands it back; never waits for a post (empty). too_large (with the size needed,
  /// nothing consumed) when `into` is shorter than the buffer; closed when the writer closed and
  /// every post was pulled, or the pipe has no pull direction.
  [[nodiscard]] get_result rget(std::span<std::byte> into);
  /// rget that waits (serving calls) for a post until `deadline` (or the deadline in force).
  [[nodiscard]] get_result rget(std::span<std::byte> into, deadline_clock::time_point deadline);
  /// rget(into, deadline) as a future of this thread: its polls look for a post, start its get
  /// (a copy on the same machine) and see it land, never waiting inside a poll; it ends done
  /// with the result (deadline_exceeded when the deadline passed first; a get already started
  /// may then still land in `into`, which must stay alive until this end closes). `into` must
  /// stay alive until the future ends.
  [[nodiscard]] invoke::future<get_result> rget_async(std::span<std::byte> into,
                                                      deadline_clock::time_point deadline);
  /// Hands back the deferred releases now (rread does when it finds nothing, and the thread's
  /// idle moments do).
  void flush_releases();
  /// Closes this end: buffers not freed are given up. Idempotent; the destructor closes.
  void close() noexcept;

  [[nodiscard]] const pipe_options& options() const noexcept;  ///< as opened
  [[nodiscard]] const pipe_counters& counters() const noexcept;  ///< this end's counters

  /// Takes over the end; `other` may then only be destroyed or assigned to.
  reader(reader&& other) noexcept;
  /// Closes this end, then takes over `other`.
  reader& operator=(reader&& other) noexcept;
  ~reader();  ///< close()

 private:
  explicit reader(std::unique_ptr<detail::reader_state> state) noexcept;
  std::unique_ptr<detail::reader_state> state_;
  friend struct duplex;
  friend class writer;
  friend class reduction_reader;
};

/// A full-duplex pipe: one pipe each way between two threads, opened in one rendezvous.
struct duplex {
  writer out;  ///< this thread writes, the peer reads
  reader in;   ///< the peer writes, this thread reads
  /// Both ends call it with each other's id. Throws as writer::open does.
  static duplex open(fabric::thread_context& ctx, fabric::thread_id peer,
                     const pipe_options& options = {},
                     deadline_clock::time_point deadline = no_deadline) {
    return open(ctx, peer, peer, options, deadline);
  }
  /// A pipe to `write_to` and one from `read_from`, both hellos sent before either end waits:
  /// threads that each write to the next and read from the previous (a ring) open without
  /// waiting for one another in turn. Throws as writer::open does.
  static duplex open(fabric::thread_context& ctx, fabric::thread_id write_to,
                     fabric::thread_id read_from, const pipe_options& options = {},
                     deadline_clock::time_point deadline = no_deadline);
};

/// A reduction pipe: k writers into one reader, combined element by element. One pipe from each
/// writer (each opens an ordinary writer to this thread), all opened in one rendezvous; round n
/// is the n-th buffer of every writer, combined in writer order into the first writer's buffer
/// in place (nothing copied), which rreduce returns: use it through rmem, give it back with
/// rfree. Owner thread only.
class reduction_reader {
 public:
  /// Opens a reader from each of `writers` (the n-th reduction opened here from a writer meets
  /// the n-th writer it opens to this thread, as reader::open). Throws as reader::open does.
  static reduction_reader open(fabric::thread_context& ctx,
                               std::span<const fabric::thread_id> writers,
                               const pipe_options& options = {},
                               deadline_clock::time_point deadline = no_deadline);

  /// The next round combined with `op` (T(T accumulated, T next), e.g. std::plus<T>{}), if
  /// every writer's buffer of it was written; never waits (empty if not). mismatch when the
  /// buffers differ in size or are not whole elements (the round's buffers are freed); closed
  /// once a writer closed and every round it wrote was combined; peer_failed when one died.
  template <class T, class Op>
  [[nodiscard]] read_result rreduce(Op op) {
    if (!rounds_) return {{}, pipe_status::closed};  // moved from
    return combine<T>(*rounds_, op, gather(*rounds_, sizeof(T), false), false);
  }
  /// rreduce that waits (serving calls) for the round until `deadline` (or the deadline in
  /// force): deadline_exceeded then (the writers' buffers already here stay for the next call).
  template <class T, class Op>
  [[nodiscard]] read_result rreduce(Op op, deadline_clock::time_point deadline) {
    if (!rounds_) return {{}, pipe_status::closed};  // moved from
    return combine<T>(*rounds_, op, gather(*rounds_, sizeof(T), deadline), false);
  }
  /// rreduce(op, deadline) as a future of this thread (get, co_await, then): the thread's polls
  /// gather the round (never waiting inside a poll) and combine it once complete; it ends with
  /// the result, deadline_exceeded when the deadline passed first, closed when the reader closed
  /// first. One such future at a time per reduction; throws seriema::error when moved from.
  template <class T, class Op>
  [[nodiscard]] invoke::future<read_result> rreduce_async(Op op,
                                                          deadline_clock::time_point deadline) {
    std::shared_ptr<rounds> r = rounds_;
    return reduce_future(
        [r, op]() mutable { return combine<T>(*r, op, gather(*r, sizeof(T), true), true); },
        deadline);
  }
  /// The combined payload of a buffer rreduce returned and not yet freed, in place.
  [[nodiscard]] std::span<std::byte> rmem(const rbuffer& buffer) const noexcept;
  /// Gives the combined buffer back (to the first writer).
  [[nodiscard]] pipe_status rfree(const rbuffer& buffer);
  /// Closes every end. Idempotent; the destructor closes.
  void close() noexcept;

  /// How many writers it reduces (0 once moved from).
  [[nodiscard]] std::size_t writers() const noexcept { return rounds_ ? rounds_->ends.size() : 0; }
  /// The reader end of the i-th writer's pipe (its counters, its options); throws
  /// seriema::error when there is no i-th writer.
  [[nodiscard]] const reader& end(std::size_t i) const;

  reduction_reader(reduction_reader&&) noexcept = default;  ///< the other may only be destroyed
  reduction_reader& operator=(reduction_reader&& other) noexcept;  ///< closes this one first
  ~reduction_reader();  ///< close()

 private:
  /// The ends and the round being gathered, shared with the futures of rreduce_async.
  struct rounds {
    std::vector<reader> ends;
    std::vector<read_result> held;  ///< this round's buffers so far (status ok: held)
  };
  explicit reduction_reader(std::vector<reader> ends);
  /// ok once every writer's buffer of the round is held (sizes equal, whole `element` bytes);
  /// `in_poll`: a future's attempt (neither polls nor waits to publish).
  static pipe_status gather(rounds& r, std::size_t element, bool in_poll);
  static pipe_status gather(rounds& r, std::size_t element, deadline_clock::time_point deadline);
  /// Frees the round's other buffers and hands out the first.
  static read_result finish_round(rounds& r, bool in_poll);
  invoke::future<read_result> reduce_future(std::function<read_result()> attempt,
                                            deadline_clock::time_point deadline);

  template <class T, class Op>
  static read_result combine(rounds& r, Op& op, pipe_status gathered, bool in_poll) {
    static_assert(std::is_trivially_copyable_v<T> && alignof(T) <= 16,
                  "a reduction combines trivially copyable elements aligned to at most 16");
    if (gathered != pipe_status::ok) return {{}, gathered};
    // Payloads start 16 bytes into 64-byte aligned ranges: aligned for T.
    auto* acc = reinterpret_cast<T*>(r.ends[0].rmem(r.held[0].buffer).data());
    const std::size_t n = r.held[0].buffer.size / sizeof(T);
    for (std::size_t w = 1; w < r.ends.size(); ++w) {
      const auto* next = reinterpret_cast<const T*>(r.ends[w].rmem(r.held[w].buffer).data());
      for (std::size_t i = 0; i < n; ++i) acc[i] = op(acc[i], next[i]);
    }
    return finish_round(r, in_poll);
  }

  std::shared_ptr<rounds> rounds_;
};

/// Regions of this worker's closed pipe ends that it keeps until their peers close or die (a
/// peer that is alive and open could still write into them); 0 once every peer is done.
std::size_t regions_awaiting_peers(fabric::thread_context& ctx);

}  // namespace seriema::pipe

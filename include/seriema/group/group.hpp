// Ordered multicast groups (seed 004, Derecho): worker threads that form a group keep a shared
// state table in each member's memory, pushed by one-sided writes, and multicast messages through
// slot rings in the same table. Every member delivers every message in one total order (round
// robin over senders), each only once it is stable (every member received it): receivers batch,
// nobody runs a commit per message. The protocol is in docs/group.md and group/detail/table.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <seriema/fabric/function_registry.hpp>
#include <seriema/fabric/outcome.hpp>
#include <seriema/fabric/placement.hpp>
#include <seriema/invoke/future.hpp>
#include <span>
#include <string>
#include <vector>

namespace seriema::fabric {
class thread_context;
}

namespace seriema::group {

using fabric::deadline_clock;
using fabric::no_deadline;

/// When a member hands a message to its application.
enum class delivery : std::uint8_t {
  ordered,    ///< in one total order at every member, once every member received it
  unordered,  ///< as soon as it arrived, in each sender's order (no order across senders)
};
const char* to_string(delivery mode) noexcept;  ///< "ordered", "unordered"

/// How a member's pushes reach a member on another machine (on one machine: direct stores).
enum class remote_push : std::uint8_t {
  automatic,  ///< SERIEMA_REMOTE_PUBLISH: put where the network has RDMA, else write messages
  put,        ///< put of the data, fence, put of the word that publishes it
  message,    ///< one write message, which the receiving process applies in order
};
const char* to_string(remote_push push) noexcept;  ///< "automatic", "put", "message"

/// A group's settings; every member must create it with equal options (create refuses a
/// mismatch).
struct group_options {
  /// Payload bytes of the largest message (Derecho's max_smc_payload_size); 1 .. 1 MiB.
  std::uint32_t max_message = 10240;
  /// Messages of one sender in flight (sent, not yet delivered everywhere); 1 .. 4096.
  std::uint32_t window = 16;
  delivery mode = delivery::ordered;  ///< see delivery
  remote_push push = remote_push::automatic;  ///< see remote_push
  /// A member whose row has not changed for this long (it pushes it at least 4 times as often
  /// while it polls) is suspected, as is one whose process died; 10 .. 3 600 000 ms. A member
  /// that does not poll for this long is taken for stalled.
  std::uint32_t suspect_after_ms = 2000;
  /// Seats: the members the group can ever have, founders and every thread that joins later
  /// (a seat is never reused: a member removed by a view change keeps its seat); 0 means the
  /// founders' count (no joins); at most 64. Each member's region holds a row per seat.
  std::uint32_t capacity = 0;
  /// Payload bytes of the largest *large* message: a send of more than max_message bytes goes
  /// by a pipelined chain of puts through a registered region beside the table (each member
  /// passes it on block by block to the next), still delivered in the one total order with the
  /// small ones. 0 (default): no large messages (such a send is too_large). At most 1 GiB, and
  /// more than max_message. Each member registers capacity x capacity x large_window areas of
  /// this size (a chain may run through any pair of seats), so keep it to what is needed.
  std::uint32_t max_large_message = 0;
  /// Large messages of one sender in flight (sent, not yet delivered everywhere); 1 .. 16.
  std::uint32_t large_window = 2;

  /// Throws config_error naming the field when a value is out of range.
  void validate() const;
  /// Field by field (create compares the members' options).
  [[nodiscard]] bool operator==(const group_options&) const = default;
};

/// How a group operation ended. Data path: returned, never thrown.
enum class group_status : std::uint8_t {
  ok,
  too_large,          ///< the message exceeds max_message (nothing sent)
  full,               ///< the window is full now, or a view change is under way (nothing sent)
  closed,             ///< the group was closed (nothing sent)
  deadline_exceeded,  ///< the wait ended at its deadline (nothing sent)
  error,              ///< the transport refused a push (see the log)
};
const char* to_string(group_status status) noexcept;  ///< "ok", "window full", ...

/// A delivered message, as on_deliver sees it (valid during the callback only).
struct message {
  std::uint32_t sender = 0;         ///< the sender's index in the group (0 .. size - 1)
  fabric::thread_id thread = 0;     ///< the sender's thread
  std::uint64_t index = 0;          ///< the sender's message number (0, 1, ...: its sends)
  std::uint64_t position = 0;       ///< place in this member's delivery order (0, 1, ...)
  std::span<const std::byte> payload;  ///< the bytes sent (in the group's memory)
};

/// A view of the group: who is in it. Views change when members fail: the survivors (more than
/// half of the view before) agree on the last message delivered from each sender, deliver exactly
/// that prefix, and install the next view.
struct view {
  std::uint32_t id = 0;                          ///< 0 at creation, +1 per change
  std::vector<fabric::thread_id> members;        ///< in the group's order; empty: this member left
  std::vector<fabric::thread_id> removed;        ///< members the change removed
  std::vector<fabric::thread_id> joined;         ///< threads the change admitted (group::join)
  std::uint64_t trimmed = 0;  ///< this member's messages of the ended view never delivered
};

/// What a member counted (statistics; the owner thread reads them).
struct group_counters {
  std::uint64_t sent = 0;             ///< messages this member sent (nulls excluded)
  std::uint64_t nulls = 0;            ///< null messages this member sent to keep the order going
  std::uint64_t delivered = 0;        ///< messages delivered here (nulls excluded)
  std::uint64_t delivered_bytes = 0;  ///< their payload bytes
  std::uint64_t calls_run = 0;        ///< ordered calls run here
  std::uint64_t calls_threw = 0;      ///< ordered calls that threw here (counted, not raised)
  std::uint64_t window_full = 0;      ///< sends refused or delayed for a full window
  std::uint64_t pushes = 0;           ///< control pushes to other members
  std::uint64_t message_pushes = 0;   ///< pushes of a run of messages to another member
  std::uint64_t pushes_held = 0;      ///< a send's push left for later (member had not answered)
  std::uint64_t rejected_slots = 0;   ///< slots that failed validation (never used)
  std::uint64_t rejected_rows = 0;    ///< control rows that failed validation (not believed)
  std::uint64_t views = 0;            ///< view changes installed here
  std::uint64_t trimmed = 0;          ///< this member's messages dropped by view changes
  std::uint64_t large_sent = 0;       ///< large messages this member sent (among `sent`)
  std::uint64_t large_pushed_bytes = 0;  ///< large payload bytes this member pushed onward
};

namespace detail {
class member_state;
}  // namespace detail

/// A worker thread's membership in a group. Owner thread only (the worker that created it);
/// move-only. The thread's polls (every wait, every poll()) receive, push and deliver.
class group {
 public:
  /// Forms a group of `members` (worker threads, each listed once, this thread among them; the
  /// same list in the same order at every member: the order is the round-robin order of
  /// delivery). Collective: every member calls it; the n-th group a thread creates with a
  /// member list meets the n-th created with that list at the others. Waits, serving calls, for
  /// every member until `deadline` (or the deadline in force). Throws config_error for bad
  /// options, seriema::error when a member is not a worker or dead, listed twice, when this
  /// thread is not listed, a member created with other options, or did not come by the deadline
  /// (deadline_error). `on_deliver`, when given, is the delivery handler from the start (see
  /// on_deliver): messages may be delivered while create still waits for slower members.
  static group create(fabric::thread_context& ctx, std::span<const fabric::thread_id> members,
                      const group_options& options = {},
                      deadline_clock::time_point deadline = no_deadline,
                      std::function<void(const message&)> on_deliver = {});

  /// Joins a running group that `founders` created (the same list, in the same order, as they
  /// gave to create, and equal options; capacity must leave a free seat): the n-th group this
  /// thread creates or joins with that list meets the n-th the founders created. Asks every
  /// founder whose process lives; the group's leader admits this thread by a view change (the
  /// members finish delivering what was sent before it, nothing is dropped unless a member fails
  /// meanwhile), then one member that delivered exactly the prefix before the new view hands over
  /// the replicated state: its on_state_transfer saver's bytes, which `load_state` receives here
  /// before this member delivers anything. The joined member delivers every message from the
  /// new view on, in the same order as the others. Waits (serving calls) until `deadline` (or the
  /// deadline in force). Throws config_error for bad options; seriema::error when this thread is
  /// a founder or not a worker, when the group refused (no free seat, other options: the message
  /// says which), or when the member holding the state died; deadline_error at the deadline.
  static group join(fabric::thread_context& ctx, std::span<const fabric::thread_id> founders,
                    const group_options& options, deadline_clock::time_point deadline,
                    std::function<void(const message&)> on_deliver,
                    std::function<void(std::span<const std::byte>)> load_state);

  group(group&&) noexcept;             ///< takes the membership over
  group& operator=(group&&) noexcept;  ///< closes this one's membership, takes the other's
  ~group();  ///< close()

  /// Sends a message of `n` bytes to every member (this one included): `fill(std::span<std::
  /// byte>)` writes it in place in this member's slot ring, whence it is pushed (or, above
  /// max_message, in this member's large area, whence it travels down the chain). Across
  /// machines the push waits while a member has not answered for the last one, until a later
  /// send, this thread's next poll or close() (docs/group.md, "Message push"). Never waits:
  /// full when the window (or the large window) is full, too_large past max_message (or
  /// max_large_message where the group has large messages), closed.
  template <class Fill>
  [[nodiscard]] group_status send(std::size_t n, Fill&& fill) {
    std::span<std::byte> room;
    const group_status status = begin_send(n, room);
    if (status != group_status::ok) return status;
    fill(room);
    return end_send(n);
  }
  /// send that waits (serving calls) until `deadline` while the window (or, for a large
  /// message, the large window) is full.
  template <class Fill>
  [[nodiscard]] group_status send(std::size_t n, Fill&& fill,
                                  deadline_clock::time_point deadline) {
    const group_status room = wait_for_room(n, deadline);
    if (room != group_status::ok) return room;
    return send(n, std::forward<Fill>(fill));
  }

  /// Every member runs f(args...) (or f(ctx, args...)) on its thread, all in the same order
  /// among themselves and with the messages (state-machine replication). Arguments of any type
  /// cereal serializes. The future ends done once f ran here; threw when it threw here (the
  /// exception is counted at the others); closed or too_large fail it at once (not_executed).
  /// Waits (serving calls) until `deadline` for room in the window.
  template <class F, class... Args>
  invoke::future<void> ordered_call(F f, const Args&... args);
  /// ordered_call with a deadline for the window (deadline_exceeded when it stays full).
  template <class F, class... Args>
  invoke::future<void> ordered_call_until(deadline_clock::time_point deadline, F f,
                                          const Args&... args);

  /// Runs `handler` for each message delivered here from now on (not for nulls or ordered
  /// calls), on this thread, inside its polls; messages delivered while no handler was set are
  /// counted only (give the handler to create to see them all). It may send, not wait.
  void on_deliver(std::function<void(const message&)> handler);

  /// Runs `handler` on this thread (inside its polls) when a view change was installed here,
  /// after the ended view's last delivery: the new view, who left, and how many of this member's
  /// messages were dropped (never delivered anywhere; its ordered calls among them end
  /// not_executed). A member that finds itself among fewer than half of its view leaves: the
  /// handler sees no members, and the group is closed.
  void on_view_change(std::function<void(const view&)> handler);
  /// Sets the saver of the replicated state that a joining thread receives (group::join's
  /// load_state): called on this thread, inside its polls, when this member hands the state to a
  /// joiner, right after the last delivery of the view before the join. Every member should set
  /// it (whichever admits the joiner saves); without one the joiner receives no bytes.
  void on_state_transfer(std::function<std::vector<std::byte>()> save);
  /// The view this member is in.
  [[nodiscard]] view current_view() const;

  /// Waits (serving calls) until this member delivered `count` messages in all (nulls and
  /// ordered calls included, so: every sender's messages up to that position), or `deadline`.
  [[nodiscard]] group_status wait_delivered(std::uint64_t count,
                                            deadline_clock::time_point deadline);
  /// Waits (serving calls) until everything this member sent so far was delivered here (in the
  /// ordered mode that means: stable, received by every member), or `deadline`.
  [[nodiscard]] group_status flush(deadline_clock::time_point deadline);

  /// Positions delivered here so far (nulls and ordered calls included).
  [[nodiscard]] std::uint64_t delivered() const noexcept;
  /// This member's index in the group (its seat: its place in members()).
  [[nodiscard]] std::uint32_t rank() const noexcept;
  /// The thread of each seat taken so far, in the group's order: the founders, then the threads
  /// that joined (removed members keep their seats; current_view() says who is in).
  [[nodiscard]] const std::vector<fabric::thread_id>& members() const noexcept;
  [[nodiscard]] const group_options& options() const noexcept;  ///< as created
  [[nodiscard]] const group_counters& counters() const noexcept;  ///< see group_counters
  /// How this member's pushes reach member m ("direct stores", "put, fence, put", "write
  /// message"; "self" for this member).
  [[nodiscard]] std::string path_to(std::uint32_t m) const;

  /// Leaves the group: nothing more is sent or delivered here. The region stays with the
  /// allocation service until every other member closed too or died. Idempotent.
  void close() noexcept;

 private:
  explicit group(std::unique_ptr<detail::member_state> state) noexcept;
  group_status begin_send(std::size_t n, std::span<std::byte>& room);
  group_status end_send(std::size_t n);
  group_status wait_for_room(std::size_t n, deadline_clock::time_point deadline);
  invoke::future<void> send_call(fabric::function_id id, std::span<const std::byte> closure,
                                 std::span<const std::byte> arguments,
                                 deadline_clock::time_point deadline);

  std::unique_ptr<detail::member_state> state_;
};

}  // namespace seriema::group

#include <seriema/group/detail/ordered_call.hpp>

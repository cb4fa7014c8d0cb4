// A member's state (member_state: its region, its pushes, receipt, stability and delivery) and the
// per-thread group layer that polls the members of its thread and meets members at creation.
#pragma once

#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>
#include <compare>
#include <cstdint>
#include <optional>
#include <map>
#include <memory>
#include <seriema/fabric/detail/region_publisher.hpp>
#include <seriema/fabric/detail/thread_extension.hpp>
#include <seriema/fabric/thread_context.hpp>
#include <seriema/group/detail/table.hpp>
#include <seriema/group/group.hpp>
#include <seriema/invoke/detail/future_table.hpp>
#include <seriema/transfer/memory.hpp>
#include <seriema/transfer/remote_memory.hpp>
#include <seriema/transfer/shared_region.hpp>
#include <string>
#include <vector>

namespace seriema::group::detail {

/// Names one group job-wide: the n-th group created with one member list.
struct group_key {
  std::uint64_t members_hash = 0;
  std::uint32_t ordinal = 0;
  auto operator<=>(const group_key&) const = default;
};

/// What a member tells every other member at creation (and a joiner, once admitted).
struct hello {
  transfer::remote_memory_locator region;  ///< its region, layout as table_layout says
  group_options options;
  transfer::remote_memory_locator large;  ///< its large region (large_layout); none: invalid
};

/// What a thread that asks to join tells every founder (kept by each member's layer until the
/// thread is admitted, refused, or its process died).
struct join_request {
  fabric::thread_id thread = 0;
  hello region;  ///< its region and options
};

/// The leader's answer to a join request: the view that admits the joiner, or why not.
struct admission {
  std::string refusal;                           ///< empty: admitted
  std::uint32_t view = 0;                        ///< the view that admits it
  std::uint32_t seat = 0;                        ///< its seat (index)
  std::uint32_t leader = 0;                      ///< the seat that holds the state for it
  std::uint64_t view_mask = 0;                   ///< the view's seats
  std::uint64_t position = 0;                    ///< positions delivered before the view
  std::vector<fabric::thread_id> seats;          ///< the thread of every seat taken, its own too
  std::vector<std::uint64_t> data_delivered;     ///< per seat: its data messages delivered
  template <class Archive>
  void serialize(Archive& a) {
    a(refusal, view, seat, leader, view_mask, position, seats, data_delivered);
  }
};

class member_state;
class large_region;

/// Keeps `region` mapped (and open to write messages) until the process ends: a member that
/// never closed may still push into it. Held where a leak checker sees it reachable.
void hold_until_exit(std::unique_ptr<large_region> region);

/// A member's large region (large_layout): registered memory UCX allocates (so members on this
/// machine map it), open to write messages while it lives.
class large_region {
 public:
  /// Throws ucx_error when UCX cannot allocate `bytes`.
  large_region(fabric::runtime& rt, std::size_t bytes);
  ~large_region();  ///< withdraws it from write messages, then unmaps it
  large_region(const large_region&) = delete;
  large_region& operator=(const large_region&) = delete;
  [[nodiscard]] std::byte* base() const noexcept { return memory_.bytes().data(); }
  [[nodiscard]] transfer::remote_memory_locator locator(int rank) const {
    return memory_.locator(rank);
  }

 private:
  fabric::runtime& rt_;
  transfer::shared_region memory_;
};

/// How a member's pushes to another process travel, as `push` (and the settings) say.
fabric::detail::publish_route route_of(fabric::thread_context& ctx, remote_push push);

/// The group layer of each worker: hellos, the members to poll, and the regions of closed members
/// kept until every other member closed or died. Owner thread only.
class group_layer final : public fabric::thread_extension {
 public:
  /// The calling worker's layer; throws seriema::error on a thread that is not a worker.
  static group_layer& of(fabric::thread_context& ctx);
  ~group_layer() override;

  std::size_t poll(fabric::thread_context& self) override;  ///< receives, delivers, pushes
  void flush(fabric::thread_context&) override {}
  void peers_failed(fabric::thread_context& self) override;  ///< frees regions of dead members
  [[nodiscard]] std::string counters_json() const override;

  group_key next_key(std::uint64_t members_hash) { return {members_hash, ordinals_[members_hash]++}; }
  void on_hello(const group_key& key, std::uint32_t from, const hello& h) { hellos_[{key, from}] = h; }
  /// The hello member `from` sent for `key`, taken out; false when none arrived yet.
  bool take_hello(const group_key& key, std::uint32_t from, hello& out);
  void on_join_request(const group_key& key, const join_request& r);
  /// The oldest join request for `key` from a thread not in `seats` (its process alive), if any.
  std::optional<join_request> pending_join(fabric::thread_context& self, const group_key& key,
                                           const std::vector<fabric::thread_id>& seats);
  /// The request `thread` sent for `key`, if it arrived.
  std::optional<join_request> join_request_of(const group_key& key, fabric::thread_id thread);
  void drop_join_request(const group_key& key, fabric::thread_id thread);
  void on_admission(const group_key& key, admission a) { admissions_[key] = std::move(a); }
  /// The admission for `key`, taken out; false when none arrived yet.
  bool take_admission(const group_key& key, admission& out);
  /// Keeps the state saved for the joiner of seat `seat` until it fetches it (or dies).
  void keep_state(const group_key& key, std::uint32_t seat, int process,
                  std::vector<std::uint8_t> bytes);
  /// The state kept for seat `seat`, taken out; nullopt when none is kept.
  std::optional<std::vector<std::uint8_t>> take_state(const group_key& key, std::uint32_t seat);
  /// Member `from` of `key` closed: it writes into no region of ours any more.
  void on_closed(fabric::thread_context& self, const group_key& key, std::uint32_t from);

  void add(member_state* m);
  void remove(member_state* m);
  /// Keeps `region` until every member in `peers` (index -> process) closed or died.
  /// (`large`, the member's large region, if any, goes with it.)
  void retire(fabric::thread_context& self, const group_key& key,
              const transfer::registered_buffer& region,
              std::unique_ptr<large_region> large, std::map<std::uint32_t, int> peers);
  void account(const group_counters& c);  ///< adds a closed member's counters to the totals
  /// Keeps the publisher to a member a view change removed until the runtime ends (its
  /// destructor may wait for what is in flight) or that member's process died.
  void keep(std::unique_ptr<fabric::detail::region_publisher> to_removed);

 private:
  struct kept_region {
    group_key key;
    transfer::registered_buffer region;
    std::unique_ptr<large_region> large;
    std::map<std::uint32_t, int> waiting;  ///< members (index -> process) not yet closed
  };
  void free_settled(fabric::thread_context& self);

  struct kept_state {
    int process = 0;  ///< the joiner's
    std::vector<std::uint8_t> bytes;
  };
  std::map<std::uint64_t, std::uint32_t> ordinals_;
  std::map<group_key, std::vector<join_request>> join_requests_;
  std::map<group_key, admission> admissions_;
  std::map<std::pair<group_key, std::uint32_t>, kept_state> states_;
  std::map<std::pair<group_key, std::uint32_t>, hello> hellos_;
  std::map<group_key, std::vector<std::uint32_t>> closed_early_;  ///< closes before our retire
  std::vector<member_state*> members_;
  std::vector<kept_region> kept_;
  std::vector<std::unique_ptr<fabric::detail::region_publisher>> removed_publishers_;
  group_counters closed_totals_;
};

/// One member of one group (owner thread only). The group's API forwards here.
class member_state {
 public:
  /// Validates, allocates the region, sends the hellos, waits for the others' and connects.
  /// Throws as group::create says.
  member_state(fabric::thread_context& ctx, std::span<const fabric::thread_id> members,
               const group_options& options, deadline_clock::time_point deadline,
               std::function<void(const message&)> on_deliver);
  /// Asks the founders' group for a seat and waits until admitted and given the state.
  /// Throws as group::join says.
  static std::unique_ptr<member_state> join(
      fabric::thread_context& ctx, std::span<const fabric::thread_id> founders,
      const group_options& options, deadline_clock::time_point deadline,
      std::function<void(const message&)> on_deliver,
      std::function<void(std::span<const std::byte>)> load_state);
  ~member_state();
  member_state(const member_state&) = delete;
  member_state& operator=(const member_state&) = delete;

  group_status begin_send(std::size_t n, std::span<std::byte>& room);
  group_status end_send(std::size_t n) {
    return n > options_.max_message ? commit_large(n) : commit(slot_kind::data, n);
  }
  /// Waits (serving calls) until a message of n bytes may be sent (window and large window).
  group_status wait_for_room(std::size_t n, deadline_clock::time_point deadline);
  /// Whether a message of n bytes may be sent now.
  bool room_for(std::size_t n);
  invoke::future<void> send_call(fabric::function_id id, std::span<const std::byte> closure,
                                 std::span<const std::byte> arguments,
                                 deadline_clock::time_point deadline);
  /// One round of progress (the layer's poll): receipt, delivery, nulls, pushes. Not reentrant:
  /// a nested call (a handler's wait) does nothing.
  std::size_t progress();
  group_status wait_delivered(std::uint64_t count, deadline_clock::time_point deadline);
  group_status flush(deadline_clock::time_point deadline);
  void close() noexcept;
  /// Some process died: the next progress looks for suspects at once.
  void peers_failed() noexcept { check_now_ = true; }

  [[nodiscard]] std::string path_to(std::uint32_t m) const;
  [[nodiscard]] view current_view() const;

  std::function<void(const message&)> handler_;
  std::function<void(const view&)> view_handler_;
  std::function<std::vector<std::byte>()> state_saver_;
  group_options options_;
  std::vector<fabric::thread_id> members_;
  std::uint32_t me_ = 0;
  std::uint64_t delivered_ = 0;  ///< positions delivered here (ordered: the total order's)
  group_counters counters_;

 private:
  [[nodiscard]] std::byte* slot(std::uint32_t m, std::uint64_t n) const noexcept {
    return base_ + layout_.slot(m, n);
  }
  struct joiner_tag {};
  /// A joiner before admission: its region and per-seat state, no seat yet.
  member_state(joiner_tag, fabric::thread_context& ctx,
               std::span<const fabric::thread_id> founders, const group_options& options,
               std::function<void(const message&)> on_deliver);
  /// Sizes the per-seat state and allocates the region (every word 0).
  void prepare();
  void connect(deadline_clock::time_point deadline);
  // large.cpp: the large region, the chain that carries large messages, and the publishers.
  void prepare_large();
  [[nodiscard]] hello my_hello() const;
  /// Whether `h` can be the regions of a member of this group in `process`.
  [[nodiscard]] bool hello_fits(const hello& h, int process) const noexcept;
  /// Builds the publishers to member m's regions.
  void connect_to(std::uint32_t m, const hello& h);
  group_status begin_large(std::size_t n, std::span<std::byte>& room);
  group_status commit_large(std::size_t n);
  /// Whether the payload a large slot of `sender` describes is all here.
  [[nodiscard]] bool large_complete(std::uint32_t sender,
                                    std::span<const std::byte> descriptor) const noexcept;
  /// The payload a large slot of `sender` describes, where it lies here.
  [[nodiscard]] std::span<const std::byte> large_payload(
      std::uint32_t sender, std::span<const std::byte> descriptor) const noexcept;
  /// Pushes what arrived of large messages on to the next member of the chain.
  std::size_t forward_large();
  /// At a view change: what the new chain's areas hold counts as passed on (it is of the ended
  /// view: delivered everywhere or dropped everywhere), so nothing of it travels again.
  void settle_large_chain();
  /// The view's member `step` places after this one in the round-robin order (cyclic).
  [[nodiscard]] std::uint32_t neighbour(int step) const noexcept;
  /// The fewest of this member's messages consumed by a member of the view (this one too), as
  /// the rows say after reading them again (`reread`) or as last read: a lower bound either way
  /// (counts only rise), so a test it passes without rereading holds.
  std::uint64_t least_consumed_mine(bool reread = true);
  // join.cpp: asking, admission, state transfer; the leader's side of admitting.
  void ask_to_join(std::span<const fabric::thread_id> founders);
  void take_seat(const admission& a, deadline_clock::time_point deadline);
  void keep_alive();
  std::size_t admit_next();
  bool adopt_join();
  void refuse(const join_request& r, const std::string& why);
  void send_admission(fabric::thread_id joiner, const admission& a);
  void seat_joiner(std::uint32_t seat, fabric::thread_id thread);
  void welcome_joiner(std::uint32_t seat, bool leading);
  [[nodiscard]] bool draining() const noexcept {
    return phase_ == phase::wedged && suspected_ == 0 && joining_ != 0;
  }
  [[nodiscard]] bool drained();
  [[nodiscard]] bool in_view(std::uint32_t m) const noexcept { return (view_mask_ >> m) & 1; }
  // membership.cpp: suspicion, wedging, the ragged trim, the next view.
  std::size_t watch_members();
  void suspect(std::uint64_t members);
  std::size_t advance_view_change();
  bool adopt_trim();
  bool publish_trim();
  void install(const std::vector<std::uint64_t>& trim, bool leading);
  void cut_at_order(std::vector<std::uint64_t>& trim) const;
  [[nodiscard]] std::uint64_t next_members() const noexcept;  ///< the next view's seats
  void set_phase(phase p) noexcept;
  void leave(const std::string& why);
  bool window_free(bool for_null = false);
  group_status commit(slot_kind kind, std::size_t n);
  void refresh_rows();
  std::size_t receive();
  std::size_t deliver_ordered();
  std::size_t deliver_unordered();
  std::size_t send_nulls();
  void deliver(std::uint32_t sender, std::uint64_t n);
  void run_call(std::uint32_t sender, std::uint64_t n, std::span<const std::byte> payload);
  void set_own(std::uint64_t offset, std::uint64_t value) noexcept;
  /// Whether member p is in this member's view (its row says so).
  [[nodiscard]] bool in_my_view(std::uint32_t p) const noexcept;
  /// Pushes this member's messages not yet pushed to each member of the view, then its control
  /// words where they changed (at the end of a poll).
  void push_all();
  /// At a send: pushes the messages not yet pushed to each member of the view that answered for
  /// every message pushed to it before (Nagle's rule across machines; stores always go).
  void push_sent();
  std::uint64_t used_bytes(std::uint64_t n) const noexcept;  ///< header + payload of my slot n
  bool push_messages(std::uint32_t p);
  bool push_control(std::uint32_t p);
  void fail_calls(fabric::outcome how, fabric::call_status status) noexcept;

  fabric::thread_context& ctx_;
  group_layer& layer_;
  group_key key_;
  table_layout layout_;
  std::vector<int> processes_;
  transfer::registered_buffer region_;
  std::byte* base_ = nullptr;
  std::uint32_t view_ = 0;
  std::vector<std::uint32_t> order_;  ///< the view's members (indices), the round-robin order
  std::uint64_t view_mask_ = 0;       ///< bit m: member m is in the view
  std::uint64_t view_start_ = 0;      ///< delivered_ when the view began
  std::uint64_t suspected_ = 0;       ///< bit m: this member suspects m (this view)
  std::uint64_t joining_ = 0;         ///< the joining word this member agreed to (this view)
  phase phase_ = phase::running;
  std::vector<std::uint64_t> heard_version_;  ///< each member's version word as last seen
  std::vector<fabric::deadline_clock::time_point> heard_at_;  ///< and when it last changed
  fabric::deadline_clock::time_point next_heartbeat_{};
  std::uint32_t polls_ = 0;  ///< progress calls (the clock is read every 64th)
  bool check_now_ = true;    ///< the next progress watches the members whatever polls_ says
  std::vector<fabric::thread_id> removed_;  ///< by the last view change
  std::vector<fabric::thread_id> joined_;   ///< by the last view change
  std::vector<std::unique_ptr<fabric::detail::region_publisher>> publishers_;  ///< null at me_
  std::uint64_t sent_ = 0;              ///< this member's messages, nulls included
  std::vector<std::uint64_t> pushed_;   ///< this member's messages pushed to each member
  std::vector<bool> control_dirty_;     ///< a control push to each member is due
  std::uint64_t version_ = 0;
  std::vector<std::uint64_t> received_;  ///< mirror of this row's received words
  std::vector<std::uint64_t> consumed_;  ///< and consumed words
  std::vector<std::uint64_t> rejected_at_;  ///< per sender: message number last rejected + 1
  std::vector<std::uint64_t> data_delivered_;  ///< per sender: its data messages delivered here
  std::vector<row_snapshot> rows_;  ///< each other member's row as last accepted
  std::vector<std::uint64_t> row_versions_;  ///< the version word each was accepted at
  row_snapshot scratch_row_;
  std::vector<invoke::detail::future_record*> calls_;  ///< this member's ordered calls by slot
  // Large messages (large.cpp); large_base_ null when the group has none.
  std::unique_ptr<large_region> large_region_;
  std::byte* large_base_ = nullptr;
  large_layout large_layout_;
  std::vector<std::unique_ptr<fabric::detail::region_publisher>> large_publishers_;
  std::uint64_t large_sent_ = 0;  ///< this member's large messages (ordinals; never reset)
  /// Per large slot: 1 + the message number (this view) of the large message there; 0: free.
  std::vector<std::uint64_t> large_busy_;
  /// Per (sender, large slot): the ordinal tag and bytes of what this member pushed on.
  struct pushed_on {
    std::uint64_t tag = 0;
    std::uint64_t bytes = 0;
  };
  std::vector<pushed_on> pushed_on_;
  invoke::detail::future_table* futures_ = nullptr;
  bool polling_ = false;
  bool closed_ = false;
};

}  // namespace seriema::group::detail

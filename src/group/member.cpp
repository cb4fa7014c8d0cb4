// A member's life and send side: creation (validation, region, hellos, connection to every other
// member's region), sends into its own slot ring, ordered calls, waits and close.
#include "member.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <seriema/base/error.hpp>
#include <seriema/base/log.hpp>
#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/detail/publish_choice.hpp>
#include <seriema/transfer/ucx.hpp>
#include <set>

namespace seriema::group::detail {

namespace {

std::uint64_t hash_members(std::span<const fabric::thread_id> members) noexcept {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the ids, in order
  for (fabric::thread_id id : members) {
    for (int b = 0; b < 4; ++b) {
      h ^= (id >> (8 * b)) & 0xFF;
      h *= 1099511628211ull;
    }
  }
  return h;
}

std::uint32_t check_members(fabric::thread_context& ctx,
                            std::span<const fabric::thread_id> members) {
  fabric::runtime& rt = ctx.rt();
  if (members.empty() || members.size() > max_members) {
    throw error(fmt::format("group: {} members given; a group has 1 to {}", members.size(),
                            max_members));
  }
  std::set<fabric::thread_id> seen;
  for (fabric::thread_id id : members) {
    if (id >= rt.placement().thread_count()) {
      throw error(fmt::format("group: thread {} is not a worker (the job has {} workers)", id,
                              rt.placement().thread_count()));
    }
    if (!seen.insert(id).second) throw error(fmt::format("group: thread {} listed twice", id));
    if (rt.peer_failed(rt.process_of_thread(id))) {
      throw error(fmt::format("group: thread {} is on rank {}, which is dead", id,
                              rt.process_of_thread(id)));
    }
  }
  const auto me = std::find(members.begin(), members.end(), ctx.id());
  if (me == members.end()) {
    throw error(fmt::format("group: thread {} creates a group it is not a member of", ctx.id()));
  }
  return static_cast<std::uint32_t>(me - members.begin());
}

std::uint32_t seats_for(const group_options& options, std::size_t founders) {
  if (options.capacity != 0 && options.capacity < founders) {
    throw config_error(fmt::format("group_options::capacity {} is less than the {} founders",
                                   options.capacity, founders));
  }
  return options.capacity != 0 ? options.capacity : static_cast<std::uint32_t>(founders);
}

}  // namespace

fabric::detail::publish_route route_of(fabric::thread_context& ctx, remote_push push) {
  if (push == remote_push::automatic) {
    return {true,
            invoke::detail::publishes_by_put_from_environment(ctx.rt().context().network_rdma())};
  }
  return {true, push == remote_push::put};
}

member_state::member_state(fabric::thread_context& ctx,
                           std::span<const fabric::thread_id> members,
                           const group_options& options, deadline_clock::time_point deadline,
                           std::function<void(const message&)> on_deliver)
    : handler_(std::move(on_deliver)),
      options_(options),
      members_(members.begin(), members.end()),
      me_(check_members(ctx, members)),
      ctx_(ctx),
      layer_(group_layer::of(ctx)),
      key_(layer_.next_key(hash_members(members))),
      layout_(table_layout::make(seats_for(options, members.size()), options.window,
                                 options.max_message, options.max_large_message)) {
  prepare();
  for (std::uint32_t m = 0; m < members_.size(); ++m) order_.push_back(m);
  view_mask_ = members_.size() == 64 ? ~std::uint64_t{0}
                                     : (std::uint64_t{1} << members_.size()) - 1;
  set_own(layout_.control(me_, word::membership), view_mask_);
  try {
    connect(deadline);
  } catch (...) {
    close();
    throw;
  }
  layer_.add(this);
}

member_state::member_state(joiner_tag, fabric::thread_context& ctx,
                           std::span<const fabric::thread_id> founders,
                           const group_options& options,
                           std::function<void(const message&)> on_deliver)
    : handler_(std::move(on_deliver)),
      options_(options),
      ctx_(ctx),
      layer_(group_layer::of(ctx)),
      key_(layer_.next_key(hash_members(founders))),
      layout_(table_layout::make(seats_for(options, founders.size()), options.window,
                                 options.max_message, options.max_large_message)) {
  prepare();
}

void member_state::prepare() {
  options_.validate();
  const std::uint32_t k = layout_.members;
  if (layout_.region_bytes() > transfer::block_size) {
    throw config_error(fmt::format(
        "group_options: {} seats x (window {} x {}-byte slots + control) need {} bytes per "
        "member, more than one allocation ({}); lower window or max_message",
        k, options_.window, layout_.slot_bytes, layout_.region_bytes(), transfer::block_size));
  }
  fabric::runtime& rt = ctx_.rt();
  for (fabric::thread_id id : members_) processes_.push_back(rt.process_of_thread(id));
  pushed_.assign(k, 0);
  control_dirty_.assign(k, false);
  received_.assign(k, 0);
  consumed_.assign(k, 0);
  rejected_at_.assign(k, 0);
  data_delivered_.assign(k, 0);
  rows_.assign(k, row_snapshot{});
  row_versions_.assign(k, 0);
  calls_.assign(options_.window, nullptr);
  heard_version_.assign(k, 0);
  heard_at_.assign(k, fabric::deadline_clock::now());
  publishers_.resize(k);
  futures_ = &invoke::detail::futures_of(ctx_);
  const int zone = rt.placement().locate(ctx_.id()).zone;
  region_ = rt.service_allocate(zone, static_cast<std::size_t>(layout_.region_bytes()));
  if (!region_) {
    throw error(fmt::format("group: rank {} could not allocate {} bytes in zone {}", rt.rank(),
                            layout_.region_bytes(), zone));
  }
  base_ = static_cast<std::byte*>(region_.data);
  std::memset(base_, 0, region_.size);  // every word 0: "nothing received, nothing published"
  prepare_large();
}

void member_state::connect(deadline_clock::time_point deadline) {
  fabric::runtime& rt = ctx_.rt();
  const hello mine = my_hello();
  const group_key key = key_;
  const std::uint32_t from = me_;
  for (std::uint32_t m = 0; m < members_.size(); ++m) {
    if (m == me_) continue;
    const fabric::call_status sent = ctx_.call(members_[m], [key, from, mine](
                                                                fabric::thread_context& self) {
      group_layer::of(self).on_hello(key, from, mine);
    });
    if (sent != fabric::call_status::ok) {
      throw error(fmt::format("group: the hello to member {} (thread {}) was not sent: {}", m,
                              members_[m], fabric::to_string(sent)));
    }
  }
  deadline = ctx_.deadline_in_force(deadline);
  for (std::uint32_t m = 0; m < members_.size(); ++m) {
    if (m == me_) continue;
    hello got;
    const auto dead = [&] { return rt.peer_failed(processes_[m]); };
    ctx_.wait_until([&] { return layer_.take_hello(key_, m, got) || dead(); }, deadline);
    std::string problem;
    if (dead()) {
      problem = fmt::format("rank {} died", processes_[m]);
    } else if (got.region.rkey_size == 0) {
      problem = "the deadline passed";
    } else if (!(got.options == options_)) {
      problem = "it created the group with other group_options";
    } else if (!hello_fits(got, processes_[m])) {
      problem = "its region does not match the group's layout";
    }
    if (!problem.empty()) {
      const std::string message =
          fmt::format("group of {} members: member {} (thread {}) did not join: {}",
                      members_.size(), m, members_[m], problem);
      if (got.region.rkey_size == 0 && !dead()) throw deadline_error(message);
      throw error(message);
    }
    connect_to(m, got);
  }
}

member_state::~member_state() { close(); }

void member_state::close() noexcept {
  if (closed_) return;
  closed_ = true;
  fail_calls(fabric::outcome::not_executed, fabric::call_status::bad_destination);
  layer_.remove(this);
  if (!region_) {
    large_region_.reset();
    return;
  }
  std::map<std::uint32_t, int> peers;
  const group_key key = key_;
  const std::uint32_t from = me_;
  try {
    // Messages a send held back (Nagle's rule, push_sent) leave now: no poll of this member will.
    for (std::uint32_t p : order_) {
      if (p != me_ && publishers_[p] && in_my_view(p)) (void)push_messages(p);
    }
    for (std::uint32_t m = 0; m < members_.size(); ++m) {
      if (m == me_) continue;
      // A member removed by a view change may still write here (a stalled one that resumes)
      // until it finds itself removed and closes, or dies: the region waits for it too.
      peers[m] = processes_[m];
      if (!in_view(m)) continue;  // it may be stalled: no call that could wait on it
      // Lost when the member is dead, which releases our region in the layer as well.
      (void)ctx_.call(members_[m], [key, from](fabric::thread_context& self) {
        group_layer::of(self).on_closed(self, key, from);
      });
    }
    publishers_.clear();  // each waits (bounded) for what it has in flight
    large_publishers_.clear();
    layer_.account(counters_);
    layer_.retire(ctx_, key_, region_, std::move(large_region_), std::move(peers));
  } catch (...) {  // a full map or log: the region then stays with the allocation service
    hold_until_exit(std::move(large_region_));  // and the large region mapped
  }
  region_ = {};
  base_ = nullptr;
}

void member_state::fail_calls(fabric::outcome how, fabric::call_status status) noexcept {
  for (invoke::detail::future_record*& r : calls_) {
    if (r == nullptr) continue;
    if (r->outcome() == fabric::outcome::pending && r->held) {
      r->cold = true;
      r->status = status;
    }
    futures_->complete(*r, how);
    r = nullptr;
  }
}

void member_state::set_own(std::uint64_t offset, std::uint64_t value) noexcept {
  store_word(base_, offset, value);
}

bool member_state::window_free(bool for_null) {
  // Data waits while the view changes; nulls still flow while a join drains the view.
  if (closed_ || !(phase_ == phase::running || (for_null && draining()))) return false;
  if (sent_ < options_.window) return true;
  // The rows as last read first: reading them again costs a cache miss per changed row.
  if (sent_ - least_consumed_mine(false) < options_.window) return true;
  return sent_ - least_consumed_mine() < options_.window;
}

group_status member_state::begin_send(std::size_t n, std::span<std::byte>& room) {
  if (closed_) return group_status::closed;
  if (n > options_.max_message) return begin_large(n, room);
  if (!window_free()) {
    ++counters_.window_full;
    return group_status::full;
  }
  room = {slot(me_, sent_) + slot_header_size, n};
  return group_status::ok;
}

group_status member_state::commit(slot_kind kind, std::size_t n) {
  std::byte* s = slot(me_, sent_);
  const std::uint64_t header = (std::uint64_t{static_cast<std::uint32_t>(kind)} << 32) | n;
  std::memcpy(s + 8, &header, sizeof header);
  std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(s))
      .store(seq_word(view_, sent_), std::memory_order_release);
  ++sent_;
  received_[me_] = sent_;
  set_own(layout_.received(me_, me_), sent_);
  set_own(layout_.control(me_, word::sent), sent_word(view_, sent_));
  if (kind == slot_kind::null) {
    ++counters_.nulls;
  } else {
    ++counters_.sent;
  }
  std::fill(control_dirty_.begin(), control_dirty_.end(), true);
  // The message goes at once (across machines: once the member answered for the last push,
  // push_sent); the control words (what this member received and consumed) at its next poll, in
  // one push for any number of sends: nobody waits for them to deliver this one.
  if (!polling_) push_sent();
  return group_status::ok;
}

bool member_state::room_for(std::size_t n) {
  // A large message's slot must also be consumed everywhere: its bytes are read until then.
  const std::uint64_t busy = n > options_.max_message && large_region_
                                 ? large_busy_[large_sent_ % options_.large_window]
                                 : 0;
  if (busy == 0) return window_free();
  if (closed_ || phase_ != phase::running) return false;
  const auto fits = [&](std::uint64_t least) {
    return least >= busy && sent_ - least < options_.window;
  };
  return fits(least_consumed_mine(false)) || fits(least_consumed_mine());  // as window_free
}

group_status member_state::wait_for_room(std::size_t n, deadline_clock::time_point deadline) {
  if (closed_) return group_status::closed;
  if (room_for(n)) return group_status::ok;
  ++counters_.window_full;
  ctx_.wait_until([&] { return closed_ || room_for(n); }, ctx_.deadline_in_force(deadline));
  if (closed_) return group_status::closed;
  return room_for(n) ? group_status::ok : group_status::deadline_exceeded;
}

invoke::future<void> member_state::send_call(fabric::function_id id,
                                             std::span<const std::byte> closure,
                                             std::span<const std::byte> arguments,
                                             deadline_clock::time_point deadline) {
  auto out = invoke::detail::make_local_future<void>(*futures_);
  invoke::detail::future_record& r = *out.record();
  const std::size_t n = 8 + closure.size() + arguments.size();
  group_status status = n > options_.max_message ? group_status::too_large
                                                 : wait_for_room(n, deadline);
  std::span<std::byte> room;
  if (status == group_status::ok) status = begin_send(n, room);
  if (status != group_status::ok) {
    r.cold = true;
    r.status = status == group_status::too_large ? fabric::call_status::too_large
               : status == group_status::deadline_exceeded
                   ? fabric::call_status::deadline_exceeded
                   : fabric::call_status::bad_destination;
    futures_->complete(r, status == group_status::deadline_exceeded
                              ? fabric::outcome::deadline_exceeded
                              : fabric::outcome::not_executed);
    return out;
  }
  const std::uint32_t sizes[2] = {id, static_cast<std::uint32_t>(closure.size())};
  std::memcpy(room.data(), sizes, sizeof sizes);
  std::memcpy(room.data() + 8, closure.data(), closure.size());
  if (!arguments.empty()) {
    std::memcpy(room.data() + 8 + closure.size(), arguments.data(), arguments.size());
  }
  calls_[sent_ % options_.window] = &r;
  (void)commit(slot_kind::ordered_call, n);
  return out;
}

group_status member_state::wait_delivered(std::uint64_t count,
                                          deadline_clock::time_point deadline) {
  ctx_.wait_until([&] { return closed_ || delivered_ >= count; },
                  ctx_.deadline_in_force(deadline));
  if (delivered_ >= count) return group_status::ok;
  return closed_ ? group_status::closed : group_status::deadline_exceeded;
}

group_status member_state::flush(deadline_clock::time_point deadline) {
  const std::uint64_t target = sent_;
  const auto everywhere = [&] {
    refresh_rows();
    if (consumed_[me_] < target) return false;
    for (std::uint32_t m : order_) {
      if (m != me_ && rows_[m].consumed[me_] < target) return false;
    }
    return true;
  };
  ctx_.wait_until([&] { return closed_ || everywhere(); }, ctx_.deadline_in_force(deadline));
  if (!closed_ && everywhere()) return group_status::ok;
  return closed_ ? group_status::closed : group_status::deadline_exceeded;
}

view member_state::current_view() const {
  view v;
  v.id = view_;
  if (!closed_ || !removed_.empty()) {
    for (std::uint32_t m : order_) v.members.push_back(members_[m]);
  }
  v.removed = removed_;
  v.joined = joined_;
  return v;
}

std::string member_state::path_to(std::uint32_t m) const {
  if (m == me_) return "self";
  if (m >= publishers_.size() || !publishers_[m]) return "none";
  return fabric::detail::to_string(publishers_[m]->path());
}

}  // namespace seriema::group::detail

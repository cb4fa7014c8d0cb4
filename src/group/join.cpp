// Joins (docs/group.md, "Joins"): a thread asks the founders for a seat; the view's leader names
// it in its row's joining word and wedges; the members adopt the join once they hold the joiner's
// request, drain the view (everything sent before is delivered everywhere) and install the next
// view with the joiner's seat in it. Then each member sends the joiner its region (a hello), and
// the leader keeps the replicated state it saved right after the view's last delivery, which the
// joiner fetches (call_return: any size) before it delivers anything.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <seriema/base/error.hpp>
#include <seriema/base/log.hpp>
#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/invoke.hpp>

#include "member.hpp"

namespace seriema::group::detail {

namespace {

void check_founders(fabric::thread_context& ctx, std::span<const fabric::thread_id> founders) {
  const fabric::runtime& rt = ctx.rt();
  if (founders.empty() || founders.size() > max_members) {
    throw error(fmt::format("group::join: {} founders given; a group has 1 to {}",
                            founders.size(), max_members));
  }
  for (fabric::thread_id id : founders) {
    if (id >= rt.placement().thread_count()) {
      throw error(fmt::format("group::join: founder {} is not a worker (the job has {} workers)",
                              id, rt.placement().thread_count()));
    }
    if (id == ctx.id()) {
      throw error(fmt::format("group::join: thread {} is a founder of the group: it creates it "
                              "(group::create), it does not join it",
                              id));
    }
  }
}

}  // namespace

std::unique_ptr<member_state> member_state::join(
    fabric::thread_context& ctx, std::span<const fabric::thread_id> founders,
    const group_options& options, deadline_clock::time_point deadline,
    std::function<void(const message&)> on_deliver,
    std::function<void(std::span<const std::byte>)> load_state) {
  check_founders(ctx, founders);
  std::unique_ptr<member_state> m(
      new member_state(joiner_tag{}, ctx, founders, options, std::move(on_deliver)));
  deadline = ctx.deadline_in_force(deadline);
  m->ask_to_join(founders);
  const fabric::runtime& rt = ctx.rt();
  const auto founders_dead = [&] {
    return std::all_of(founders.begin(), founders.end(), [&](fabric::thread_id id) {
      return rt.peer_failed(rt.process_of_thread(id));
    });
  };
  admission a;
  group_layer& layer = m->layer_;
  const group_key key = m->key_;
  ctx.wait_until([&] { return layer.take_admission(key, a) || founders_dead(); }, deadline);
  if (a.refusal.empty() && a.seats.empty()) {
    const std::string why = fmt::format(
        "group::join: thread {} was not admitted to the group of {} founders: {}", ctx.id(),
        founders.size(), founders_dead() ? "every founder's process died" : "the deadline passed");
    if (founders_dead()) throw error(why);
    throw deadline_error(why);
  }
  if (!a.refusal.empty()) {
    throw error(fmt::format("group::join: the group refused thread {}: {}", ctx.id(), a.refusal));
  }
  m->take_seat(a, deadline);
  auto state = invoke::call_return(
      ctx, a.seats.at(a.leader), [key, seat = a.seat](fabric::thread_context& self) {
        std::optional<std::vector<std::uint8_t>> bytes = group_layer::of(self).take_state(key, seat);
        if (!bytes) throw error("group::join: the member that admitted the joiner keeps no state");
        return std::move(*bytes);
      });
  ctx.wait_until([&] {
    m->keep_alive();
    return state.ready();
  }, deadline);
  if (!state.ready() || state.result() != fabric::outcome::done) {
    const std::string why =
        fmt::format("group::join: thread {} got no state from member {} (thread {}): {}", ctx.id(),
                    a.leader, a.seats.at(a.leader),
                    state.ready() ? state.describe() : std::string("the deadline passed"));
    if (!state.ready()) throw deadline_error(why);
    throw error(why);
  }
  const std::vector<std::uint8_t> bytes = state.get();
  if (load_state) load_state(std::as_bytes(std::span(bytes)));
  log::info("group: thread {} joined as member {} in view {} ({} state bytes)", ctx.id(), m->me_,
            m->view_, bytes.size());
  m->layer_.add(m.get());
  return m;
}

void member_state::ask_to_join(std::span<const fabric::thread_id> founders) {
  fabric::runtime& rt = ctx_.rt();
  const join_request request{ctx_.id(), my_hello()};
  const group_key key = key_;
  std::size_t asked = 0;
  for (fabric::thread_id founder : founders) {
    if (rt.peer_failed(rt.process_of_thread(founder))) continue;
    const fabric::call_status sent =
        invoke::call<invoke::channel::write, invoke::policy::retry_async>(
            ctx_, founder, [key, request](fabric::thread_context& self) {
              group_layer::of(self).on_join_request(key, request);
            });
    if (sent == fabric::call_status::ok) ++asked;
  }
  if (asked == 0) {
    throw error(fmt::format("group::join: thread {} could reach none of the {} founders", ctx_.id(),
                            founders.size()));
  }
}

void member_state::take_seat(const admission& a, deadline_clock::time_point deadline) {
  const fabric::runtime& rt = ctx_.rt();
  if (a.seat >= layout_.members || a.seats.size() != a.seat + 1 || a.seats[a.seat] != ctx_.id() ||
      a.leader >= a.seats.size() || (a.view_mask & seat_bit(a.seat)) == 0 ||
      a.data_delivered.size() > layout_.members) {
    throw error(fmt::format("group::join: thread {} got an admission that does not fit the "
                            "group's {} seats",
                            ctx_.id(), layout_.members));
  }
  members_ = a.seats;
  for (fabric::thread_id id : members_) processes_.push_back(rt.process_of_thread(id));
  me_ = a.seat;
  view_ = a.view;
  view_mask_ = a.view_mask;
  for (std::uint32_t s = 0; s < members_.size(); ++s) {
    if ((view_mask_ & seat_bit(s)) != 0) order_.push_back(s);
  }
  delivered_ = view_start_ = a.position;
  std::copy(a.data_delivered.begin(), a.data_delivered.end(), data_delivered_.begin());
  set_own(layout_.control(me_, word::view), view_);
  set_own(layout_.control(me_, word::membership), view_mask_);
  set_own(layout_.control(me_, word::sent), sent_word(view_, 0));
  set_phase(phase::running);
  // Each member's region; this member's row goes to each as soon as it is known, which tells
  // the member that this one is in the view (its messages follow).
  for (std::uint32_t m : order_) {
    if (m == me_) continue;
    hello got;
    const auto dead = [&] { return rt.peer_failed(processes_[m]); };
    ctx_.wait_until([&] {
      keep_alive();
      return layer_.take_hello(key_, m, got) || dead();
    }, deadline);
    if (dead() || !hello_fits(got, processes_[m]) || !(got.options == options_)) {
      const std::string why = fmt::format(
          "group::join: member {} (thread {}) of view {} {}", m, members_[m], view_,
          dead()                         ? "died"
          : got.region.rkey_size == 0    ? "sent no region by the deadline"
                                         : "sent a region that does not fit the group's layout");
      if (got.region.rkey_size == 0 && !dead()) throw deadline_error(why);
      throw error(why);
    }
    connect_to(m, got);
    control_dirty_[m] = true;
    (void)push_control(m);
  }
}

void member_state::keep_alive() {
  const auto now = deadline_clock::now();
  if (now < next_heartbeat_) return;
  next_heartbeat_ = now + std::chrono::milliseconds(options_.suspect_after_ms / 4);
  for (std::uint32_t m : order_) {
    if (m == me_ || !publishers_[m]) continue;
    control_dirty_[m] = true;
    (void)push_control(m);
  }
}

std::size_t member_state::admit_next() {
  if (phase_ != phase::running || joining_ != 0 || order_.empty() || order_.front() != me_) {
    return 0;
  }
  const std::optional<join_request> r = layer_.pending_join(ctx_, key_, members_);
  if (!r) return 0;
  if (!(r->region.options == options_)) {
    refuse(*r, "it asked with other group_options than the group's");
    return 1;
  }
  if (members_.size() >= layout_.members) {
    refuse(*r, fmt::format("the group's {} seats are taken (group_options::capacity)",
                           layout_.members));
    return 1;
  }
  if (!hello_fits(r->region, ctx_.rt().process_of_thread(r->thread))) {
    refuse(*r, "its region does not fit the group's layout");
    return 1;
  }
  joining_ = joining_word(static_cast<std::uint32_t>(members_.size()), r->thread);
  set_own(layout_.control(me_, word::joining), joining_);
  log::info("group: member {} (thread {}) admits thread {} into seat {} at the end of view {}",
            me_, ctx_.id(), r->thread, members_.size(), view_);
  set_phase(phase::wedged);
  return 1;
}

bool member_state::adopt_join() {
  if (joining_ != 0) return false;
  const fabric::runtime& rt = ctx_.rt();
  for (std::uint32_t m : order_) {
    if (m == me_) continue;
    const std::uint64_t version = load_word(base_, layout_.control(m, word::version));
    if (view_of_version(version) != view_) continue;
    const std::uint64_t w = load_word(base_, layout_.control(m, word::joining));
    if (w == 0) continue;
    const fabric::thread_id thread = thread_of_joining(w);
    if (seat_of_joining(w) != members_.size() || seat_of_joining(w) >= layout_.members ||
        thread >= rt.placement().thread_count() ||
        std::find(members_.begin(), members_.end(), thread) != members_.end()) {
      ++counters_.rejected_rows;  // a joiner that cannot be: not believed
      continue;
    }
    // Its region is needed to install the view: wait for its request (unless it died, then
    // its seat is taken empty and the next view change removes it).
    if (!layer_.join_request_of(key_, thread) && !rt.peer_failed(rt.process_of_thread(thread))) {
      return false;
    }
    joining_ = w;
    set_own(layout_.control(me_, word::joining), joining_);
    if (phase_ == phase::running) set_phase(phase::wedged);
    std::fill(control_dirty_.begin(), control_dirty_.end(), true);
    return true;
  }
  return false;
}

void member_state::refuse(const join_request& r, const std::string& why) {
  log::warning("group: member {} (thread {}) refuses thread {}: {}", me_, ctx_.id(), r.thread, why);
  layer_.drop_join_request(key_, r.thread);
  admission no;
  no.refusal = why;
  send_admission(r.thread, no);
}

void member_state::send_admission(fabric::thread_id joiner, const admission& a) {
  const group_key key = key_;
  (void)invoke::call<invoke::channel::write, invoke::policy::retry_async>(
      ctx_, joiner,
      [key](fabric::thread_context& self, const admission& got) {
        group_layer::of(self).on_admission(key, got);
      },
      a);
}

void member_state::seat_joiner(std::uint32_t seat, fabric::thread_id thread) {
  fabric::runtime& rt = ctx_.rt();
  members_.push_back(thread);
  processes_.push_back(rt.process_of_thread(thread));
  joined_.push_back(thread);
  const std::optional<join_request> r = layer_.join_request_of(key_, thread);
  layer_.drop_join_request(key_, thread);
  if (!r || rt.peer_failed(processes_[seat]) || !hello_fits(r->region, processes_[seat])) {
    log::warning("group: member {} (thread {}) seats thread {} without its region (it died or "
                 "sent none that fits): it will be suspected",
                 me_, ctx_.id(), thread);
    return;
  }
  connect_to(seat, r->region);
}

void member_state::welcome_joiner(std::uint32_t seat, bool leading) {
  if (!publishers_[seat]) return;
  const group_key key = key_;
  const fabric::thread_id joiner = members_[seat];
  const hello mine = my_hello();
  (void)invoke::call<invoke::channel::write, invoke::policy::retry_async>(
      ctx_, joiner, [key, from = me_, mine](fabric::thread_context& self) {
        group_layer::of(self).on_hello(key, from, mine);
      });
  if (!leading) return;
  std::vector<std::uint8_t> bytes;
  if (state_saver_) {
    const std::vector<std::byte> saved = state_saver_();
    const auto* first = reinterpret_cast<const std::uint8_t*>(saved.data());
    bytes.assign(first, first + saved.size());
  }
  layer_.keep_state(key_, seat, processes_[seat], std::move(bytes));
  admission yes;
  yes.view = view_;
  yes.seat = seat;
  yes.leader = me_;
  yes.view_mask = view_mask_;
  yes.position = view_start_;
  yes.seats = members_;
  yes.data_delivered.assign(data_delivered_.begin(), data_delivered_.begin() + members_.size());
  send_admission(joiner, yes);
}

}  // namespace seriema::group::detail

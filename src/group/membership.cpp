// A member's part in view changes (docs/group.md, "Views"): it suspects members whose process died
// or whose row stopped changing, and those other members suspect; it then wedges (sends, receives
// and delivers nothing more in the view) and pushes its row. The leader (the first member of the
// view not suspected) waits until every survivor's row is wedged with the same suspicions, takes
// for each sender the least count any survivor received (the ragged trim), publishes it in its
// row and installs the next view; every other survivor adopts the trim from any survivor's row
// that has it. Installing delivers the ended view's order exactly up to the trim, so every
// survivor delivered the same messages; what lies beyond is dropped everywhere. A join is a view
// change too (join.cpp): the leader names the joiner, the members wedge but go on receiving,
// delivering and sending nulls until everything sent is delivered everywhere (drained), so that
// a join without a failure drops nothing.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <seriema/base/log.hpp>
#include <seriema/fabric/runtime.hpp>

#include "member.hpp"

namespace seriema::group::detail {

void member_state::set_phase(phase p) noexcept {
  phase_ = p;
  set_own(layout_.control(me_, word::wedged), static_cast<std::uint64_t>(p));
  std::fill(control_dirty_.begin(), control_dirty_.end(), true);
}

std::size_t member_state::watch_members() {
  // While running, every 64th poll (and at once after a process died); during a change, always.
  if (phase_ == phase::running && !check_now_ && (++polls_ & 63) != 0) return 0;
  check_now_ = false;
  const auto now = deadline_clock::now();
  if (now >= next_heartbeat_) {  // pushed even when nothing changed: the others hear us alive
    std::fill(control_dirty_.begin(), control_dirty_.end(), true);
    next_heartbeat_ = now + std::chrono::milliseconds(options_.suspect_after_ms / 4);
  }
  const fabric::runtime& rt = ctx_.rt();
  const auto silence = std::chrono::milliseconds(options_.suspect_after_ms);
  std::uint64_t newly = 0;
  bool excluded = false;
  for (std::uint32_t m : order_) {
    if (m == me_) continue;
    const std::uint64_t version = load_word(base_, layout_.control(m, word::version));
    if (version != heard_version_[m]) {
      heard_version_[m] = version;
      heard_at_[m] = now;
    }
    if ((suspected_ & seat_bit(m)) != 0) continue;
    if (rt.peer_failed(processes_[m]) || now - heard_at_[m] > silence) newly |= seat_bit(m);
    const std::uint32_t their_view = view_of_version(version);
    if (their_view == view_) {
      const std::uint64_t theirs = load_word(base_, layout_.control(m, word::suspected));
      excluded = excluded || (theirs & seat_bit(me_)) != 0;
      newly |= theirs & view_mask_ & ~seat_bit(me_);
    } else if (their_view == view_ + 1) {
      const std::uint64_t next = load_word(base_, layout_.control(m, word::membership));
      excluded = excluded || (next & seat_bit(me_)) == 0;
      newly |= view_mask_ & ~next;
    }
  }
  if (excluded) {
    leave("the other members removed it from the view");
    return 1;
  }
  newly &= ~suspected_;
  if (newly != 0) {
    suspect(newly);
    return 1;
  }
  return adopt_join() ? 1 : admit_next();
}

void member_state::suspect(std::uint64_t members) {
  suspected_ |= members;
  log::info("group: member {} (thread {}) suspects {:#x} in view {}; wedging", me_, ctx_.id(),
            members, view_);
  const std::uint64_t survivors = view_mask_ & ~suspected_;
  if (2 * std::popcount(survivors) <= std::popcount(view_mask_)) {
    leave(fmt::format("only {} of the view's {} members are left, not a majority",
                      std::popcount(survivors), std::popcount(view_mask_)));
    return;
  }
  set_own(layout_.control(me_, word::suspected), suspected_);
  if (phase_ == phase::running) set_phase(phase::wedged);
  std::fill(control_dirty_.begin(), control_dirty_.end(), true);
}

void member_state::leave(const std::string& why) {
  log::warning("group: member {} (thread {}) leaves the group in view {}: {}", me_, ctx_.id(),
               view_, why);
  removed_.clear();
  std::function<void(const view&)> handler = view_handler_;
  view gone;
  gone.id = view_;
  gone.trimmed = sent_;
  close();
  if (handler) handler(gone);
}

std::size_t member_state::advance_view_change() {
  if (adopt_trim()) return 1;
  std::uint32_t leader = me_;
  for (std::uint32_t m : order_) {
    if ((suspected_ & seat_bit(m)) == 0) {
      leader = m;
      break;
    }
  }
  return leader == me_ && publish_trim() ? 1 : 0;
}

std::uint64_t member_state::next_members() const noexcept {
  const std::uint64_t survivors = view_mask_ & ~suspected_;
  return joining_ == 0 ? survivors : survivors | seat_bit(seat_of_joining(joining_));
}

bool member_state::adopt_trim() {
  const std::uint64_t survivors = next_members();
  for (std::uint32_t m : order_) {
    if (m == me_ || (suspected_ & seat_bit(m)) != 0) continue;
    // The version word first (acquire): the words read after it are of that push or later.
    const std::uint64_t version = load_word(base_, layout_.control(m, word::version));
    const bool trimmed_here = view_of_version(version) == view_ &&
                              phase_of_version(version) == phase::trimmed &&
                              load_word(base_, layout_.control(m, word::suspected)) == suspected_ &&
                              load_word(base_, layout_.control(m, word::joining)) == joining_;
    const bool installed = view_of_version(version) == view_ + 1 &&
                           load_word(base_, layout_.control(m, word::membership)) == survivors;
    if (!trimmed_here && !installed) continue;
    std::vector<std::uint64_t> trim(layout_.members, 0);
    for (std::uint32_t s : order_) trim[s] = load_word(base_, layout_.trim(m, s));
    for (std::uint32_t s : order_) {
      if (trim[s] > received_[s]) {  // a trim past what we hold cannot be right: wait for another
        ++counters_.rejected_rows;
        return false;
      }
    }
    install(trim, false);
    return true;
  }
  return false;
}

bool member_state::publish_trim() {
  const std::uint64_t survivors = view_mask_ & ~suspected_;
  std::vector<std::uint64_t> trim(layout_.members, 0);
  for (std::uint32_t s : order_) trim[s] = received_[s];
  for (std::uint32_t m : order_) {
    if (m == me_ || (survivors & seat_bit(m)) == 0) continue;
    const std::uint64_t version = load_word(base_, layout_.control(m, word::version));
    if (view_of_version(version) != view_ || phase_of_version(version) == phase::running ||
        load_word(base_, layout_.control(m, word::suspected)) != suspected_ ||
        load_word(base_, layout_.control(m, word::joining)) != joining_) {
      return false;  // not every survivor wedged with the same suspicions and joiner yet
    }
    // Members wedged by a suspicion receive nothing more: these counts are final. (Draining
    // ones still receive; drained() below waits until nothing is left in flight.)
    for (std::uint32_t s : order_) {
      trim[s] = std::min(trim[s], load_word(base_, layout_.received(m, s)));
    }
  }
  if (draining() && !drained()) return false;
  if (options_.mode == delivery::ordered) cut_at_order(trim);
  install(trim, true);
  return true;
}

void member_state::cut_at_order(std::vector<std::uint64_t>& trim) const {
  // The view's prefix ends at the first position of its order whose message lies beyond its
  // sender's trim; a sender's messages after that position are not delivered either, so its
  // trim is what lies before (and its sender counts the rest as dropped).
  const std::uint64_t k = order_.size();
  std::uint64_t cut = ~std::uint64_t{0};
  for (std::uint64_t i = 0; i < k; ++i) cut = std::min(cut, trim[order_[i]] * k + i);
  for (std::uint64_t i = 0; i < k; ++i) trim[order_[i]] = cut / k + (i < cut % k ? 1 : 0);
}

bool member_state::drained() {
  refresh_rows();
  std::uint64_t total = 0;
  for (std::uint32_t s : order_) {
    const std::uint64_t sent =
        s == me_ ? sent_ : sent_in(load_word(base_, layout_.control(s, word::sent)), view_);
    if (received_[s] != sent) return false;
    total += sent;
  }
  if (delivered_ - view_start_ != total) return false;
  for (std::uint32_t m : order_) {
    if (m == me_) continue;
    if (rows_[m].delivered != total) return false;
    for (std::uint32_t s : order_) {
      if (rows_[m].received[s] != received_[s]) return false;
    }
  }
  return true;
}

void member_state::install(const std::vector<std::uint64_t>& trim, bool leading) {
  // The trim goes into this row first, so that a survivor that has not seen it yet finds it here.
  for (std::uint32_t s = 0; s < layout_.members; ++s) set_own(layout_.trim(me_, s), trim[s]);
  // 1. The ended view's messages up to the trim, in its order (unordered: what had arrived).
  const std::uint64_t k = order_.size();
  if (options_.mode == delivery::ordered) {
    for (;;) {
      const std::uint64_t g = delivered_ - view_start_;
      const std::uint32_t s = order_[g % k];
      const std::uint64_t n = g / k;
      if (n >= trim[s] || n >= received_[s]) break;
      deliver(s, n);
    }
  } else {
    for (std::uint32_t s : order_) {
      while (consumed_[s] < std::min(trim[s], received_[s])) deliver(s, consumed_[s]);
    }
  }
  // 2. This member's messages past the trim are delivered nowhere.
  std::uint64_t dropped = 0;
  for (std::uint64_t n = std::min(trim[me_], sent_); n < sent_; ++n) {
    std::uint64_t header;
    std::memcpy(&header, slot(me_, n) + 8, sizeof header);
    if (static_cast<slot_kind>(header >> 32) != slot_kind::null) ++dropped;
  }
  fail_calls(fabric::outcome::not_executed, fabric::call_status::ok);
  // 3. The next view: the survivors in the same order (then the joiner: seats only grow, so
  // the order stays by seat), every count from 0.
  const std::uint64_t next_mask = next_members();
  removed_.clear();
  joined_.clear();
  std::vector<std::uint32_t> next;
  for (std::uint32_t m : order_) {
    if ((next_mask & seat_bit(m)) != 0) {
      next.push_back(m);
    } else {
      removed_.push_back(members_[m]);
      // What is in flight to it may never complete (a stalled member): the layer keeps the
      // publisher, so this thread does not wait for it now.
      layer_.keep(std::move(publishers_[m]));
      if (large_region_) layer_.keep(std::move(large_publishers_[m]));
    }
  }
  const std::uint64_t joiner = joining_;
  if (joiner != 0) {
    next.push_back(seat_of_joining(joiner));
    seat_joiner(seat_of_joining(joiner), thread_of_joining(joiner));
  }
  order_ = std::move(next);
  view_mask_ = next_mask;
  ++view_;
  suspected_ = 0;
  joining_ = 0;
  sent_ = 0;
  view_start_ = delivered_;
  std::fill(pushed_.begin(), pushed_.end(), 0);
  std::fill(received_.begin(), received_.end(), 0);
  std::fill(consumed_.begin(), consumed_.end(), 0);
  std::fill(rejected_at_.begin(), rejected_at_.end(), 0);
  std::fill(rows_.begin(), rows_.end(), row_snapshot{});
  std::fill(row_versions_.begin(), row_versions_.end(), 0);
  // Every large message of the ended view was delivered everywhere or dropped everywhere.
  std::fill(large_busy_.begin(), large_busy_.end(), 0);
  settle_large_chain();
  for (std::uint32_t s = 0; s < layout_.members; ++s) {
    set_own(layout_.received(me_, s), 0);
    set_own(layout_.consumed(me_, s), 0);
  }
  set_own(layout_.control(me_, word::view), view_);
  set_own(layout_.control(me_, word::suspected), 0);
  set_own(layout_.control(me_, word::joining), 0);
  set_own(layout_.control(me_, word::delivered), 0);
  set_own(layout_.control(me_, word::membership), view_mask_);
  set_own(layout_.control(me_, word::sent), sent_word(view_, 0));
  std::fill(heard_at_.begin(), heard_at_.end(), deadline_clock::now());
  set_phase(phase::running);
  ++counters_.views;
  counters_.trimmed += dropped;
  log::info("group: member {} (thread {}) installed view {} of {} members ({} of its messages "
            "dropped)",
            me_, ctx_.id(), view_, order_.size(), dropped);
  if (joiner != 0) welcome_joiner(seat_of_joining(joiner), leading);
  if (view_handler_) {
    view v = current_view();
    v.trimmed = dropped;
    view_handler_(v);
  }
}

}  // namespace seriema::group::detail

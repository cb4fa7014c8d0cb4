// A member's progress, run by its thread's polls: receipt of the others' messages from its own
// region, delivery (in the total order once stable, or as received), null messages for a quiet
// sender, and the pushes of its messages and control words into the other members' regions.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <seriema/base/log.hpp>
#include <seriema/fabric/function_registry.hpp>

#include "member.hpp"

namespace seriema::group::detail {

namespace {

// Resets a flag when the scope ends (also when a handler throws through it).
struct flag_scope {
  bool& flag;
  explicit flag_scope(bool& f) : flag(f) { flag = true; }
  ~flag_scope() { flag = false; }
  flag_scope(const flag_scope&) = delete;
  flag_scope& operator=(const flag_scope&) = delete;
};

}  // namespace

std::size_t member_state::progress() {
  if (polling_ || closed_) return 0;
  const flag_scope in_progress(polling_);
  std::size_t work = watch_members();
  if (closed_) return work;  // this member left (it found itself in a minority)
  // A member wedged for a join (no suspicion) goes on receiving and delivering what was sent
  // before, and sending nulls, until the view change finds everything delivered everywhere.
  if (phase_ == phase::running || draining()) {
    work += forward_large();
    work += receive();
    if (options_.mode == delivery::ordered) {
      work += deliver_ordered();
      work += send_nulls();
    } else {
      work += deliver_unordered();
    }
  }
  if (phase_ != phase::running && !closed_) work += advance_view_change();
  if (!closed_) push_all();
  return work;
}

void member_state::refresh_rows() {
  for (std::uint32_t m : order_) {
    if (m == me_) continue;
    // A row of another view (its member installed the next one first) says nothing of this one.
    // The version word decides (acquire): it is stored after every word of its push, so the
    // words read after it are of a push of this view, while the view word alone may already be
    // the next view's in the middle of a push whose other words still hold the ended view's.
    const std::uint64_t version = load_word(base_, layout_.control(m, word::version));
    if (view_of_version(version) != view_) continue;
    // Only m's control pushes write its row here, each with a new version word stored last: a
    // row accepted at this version is still what they wrote (words of a later push already
    // landing only raise counts; its version will bring them). Reading it again would cost a
    // cache miss per word on one machine, on every send with a full window.
    if (version == row_versions_[m]) continue;
    const row_verdict verdict = accept_row(base_, layout_, m, me_, sent_, view_, rows_[m],
                                           scratch_row_);
    if (verdict == row_verdict::accepted) row_versions_[m] = version;
    if (verdict == row_verdict::rejected) ++counters_.rejected_rows;
  }
}

std::size_t member_state::receive() {
  std::size_t got = 0;
  for (std::uint32_t i : order_) {
    if (i == me_) continue;
    // What the sender pushed so far in this view (acquire: those slots are in place), at most a
    // window ahead of what this member consumed (more would be a lie: its slots are not there).
    const std::uint64_t pushed =
        std::min(sent_in(load_word(base_, layout_.control(i, word::sent)), view_),
                 consumed_[i] + layout_.window);
    const std::uint64_t before = received_[i];
    while (received_[i] < pushed) {
      const std::uint64_t n = received_[i];
      const slot_view v = decode_slot(slot(i, n), layout_, view_, n);
      if (v.state == slot_state::empty) break;  // an earlier view's: not rewritten yet
      // A large message is received once all its bytes came down the chain.
      if (v.state == slot_state::ready && v.kind == slot_kind::large &&
          !large_complete(i, v.payload)) {
        break;
      }
      if (v.state != slot_state::ready) {
        if (rejected_at_[i] != n + 1) {
          rejected_at_[i] = n + 1;  // counted once; the slot stays refused until it is right
          ++counters_.rejected_slots;
          log::warning("group: member {} refused slot {} of member {} (message {}): {}", me_,
                       n % layout_.window, i, n,
                       v.state == slot_state::rejected ? "bad header" : "not this message's word");
        }
        break;
      }
      received_[i] = n + 1;
    }
    if (received_[i] != before) {
      got += received_[i] - before;
      set_own(layout_.received(me_, i), received_[i]);
    }
  }
  if (got != 0) std::fill(control_dirty_.begin(), control_dirty_.end(), true);
  return got;
}

std::size_t member_state::deliver_ordered() {
  const std::uint64_t k = order_.size();
  // Cheap test first: this member must hold the next message in the order.
  std::uint64_t g = delivered_ - view_start_;
  if (received_[order_[g % k]] <= g / k) return 0;
  refresh_rows();
  std::size_t done = 0;
  for (;; g = delivered_ - view_start_) {
    const std::uint32_t i = order_[g % k];
    const std::uint64_t n = g / k;
    bool stable = received_[i] > n;
    for (std::uint32_t m : order_) {
      if (!stable) break;
      // The sender holds its own messages: stability waits for no control push of its.
      if (m != me_ && m != i) stable = rows_[m].received[i] > n;
    }
    if (!stable) break;
    deliver(i, n);
    ++done;
  }
  return done;
}

std::size_t member_state::deliver_unordered() {
  std::size_t done = 0;
  for (std::uint32_t i : order_) {
    while (consumed_[i] < received_[i]) {
      deliver(i, consumed_[i]);
      ++done;
    }
  }
  return done;
}

std::size_t member_state::send_nulls() {
  // Message n of a sender is delivered after message n - 1 of every later sender and message n
  // of every earlier one: a member that sent fewer than another holds the order up, so it sends
  // nulls up to the most any sender sent (as far as its window allows).
  std::uint64_t target = 0;
  for (std::uint32_t i : order_) target = std::max(target, received_[i]);
  std::size_t nulls = 0;
  while (sent_ < target && window_free(true)) {
    (void)commit(slot_kind::null, 0);
    ++nulls;
  }
  return nulls;
}

void member_state::deliver(std::uint32_t sender, std::uint64_t n) {
  // Bookkeeping first: the handler may send (and a message it sends is ordered after this one).
  const std::uint64_t position = delivered_;
  consumed_[sender] = n + 1;
  ++delivered_;
  set_own(layout_.consumed(me_, sender), consumed_[sender]);
  set_own(layout_.control(me_, word::delivered), delivered_ - view_start_);
  std::fill(control_dirty_.begin(), control_dirty_.end(), true);
  const slot_view v = decode_slot(slot(sender, n), layout_, view_, n);
  if (v.state != slot_state::ready) {
    ++counters_.rejected_slots;  // changed after receipt: nobody writes it now but its sender
    return;
  }
  if (v.kind == slot_kind::ordered_call) {
    run_call(sender, n, v.payload);
  } else if (v.kind == slot_kind::data || v.kind == slot_kind::large) {
    const std::span<const std::byte> payload =
        v.kind == slot_kind::large ? large_payload(sender, v.payload) : v.payload;
    ++counters_.delivered;
    counters_.delivered_bytes += payload.size();
    const std::uint64_t index = data_delivered_[sender]++;
    if (handler_) handler_(message{sender, members_[sender], index, position, payload});
  }
}

void member_state::run_call(std::uint32_t sender, std::uint64_t n,
                            std::span<const std::byte> payload) {
  invoke::detail::future_record* mine = nullptr;
  if (sender == me_) std::swap(mine, calls_[n % options_.window]);
  std::uint32_t sizes[2] = {0, 0};
  const fabric::function_entry* entry = nullptr;
  if (payload.size() >= sizeof sizes) {
    std::memcpy(sizes, payload.data(), sizeof sizes);
    entry = fabric::function_registry::instance().find(sizes[0]);
  }
  if (entry == nullptr || entry->closure_size != sizes[1] ||
      payload.size() < sizeof sizes + sizes[1]) {
    ++counters_.rejected_slots;
    log::warning("group: member {} refused ordered call {} of member {}: {}", me_, n, sender,
              entry == nullptr ? "unknown function" : "closure size differs");
    if (mine != nullptr) futures_->complete(*mine, fabric::outcome::not_executed);
    return;
  }
  const std::byte* closure = payload.data() + sizeof sizes;
  std::span<const std::byte> arguments = payload.subspan(sizeof sizes + sizes[1]);
  fabric::invocation call;
  call.self = &ctx_;
  call.source = members_[sender];
  // with_arguments only reads the buffer; it lies in this member's region.
  call.buffer = {const_cast<std::byte*>(arguments.data()), arguments.size()};
  ++counters_.calls_run;
  try {
    entry->invoke(closure, call);
  } catch (...) {
    ++counters_.calls_threw;
    if (mine != nullptr) invoke::detail::fail_with(*futures_, *mine, std::current_exception());
    return;
  }
  if (mine != nullptr) invoke::detail::fulfil<invoke::detail::unit>(*futures_, *mine);
}

bool member_state::in_my_view(std::uint32_t p) const noexcept {
  // A row accepted in this view was pushed by p in it (views only advance): no load of p's view
  // word, which p's every control push rewrites (a cache miss on one machine). p may have
  // installed the next view since: it then gets this view's messages too, which it ignores (every
  // slot word and `sent` word names its view, and only this member writes its slots there).
  return rows_[p].view == view_ || load_word(base_, layout_.control(p, word::view)) == view_;
}

void member_state::push_all() {
  for (std::uint32_t p : order_) {
    if (p == me_ || !publishers_[p]) continue;
    // Messages of this view go to a member only once it is in this view too: until then it may
    // still deliver the ended view's messages from the slots they would overwrite.
    if (!in_my_view(p)) {
      (void)push_control(p);
      continue;
    }
    if (push_messages(p)) (void)push_control(p);
  }
}

void member_state::push_sent() {
  for (std::uint32_t p : order_) {
    if (p == me_ || !publishers_[p]) continue;
    if (!in_my_view(p)) continue;  // as push_all
    // Nagle's rule: across machines, while member p has not answered for every message pushed to
    // it (its received word for this member, in this member's region), this send's message
    // waits for a later send that finds p answered, or for the next poll, and goes with the
    // others in one run: a burst travels as a few write messages instead of one per message,
    // and a lone message still goes at once. Stores cost no message: they always go.
    if (publishers_[p]->direct() == nullptr &&
        load_word(base_, layout_.received(p, me_)) < pushed_[p]) {
      ++counters_.pushes_held;
      continue;
    }
    (void)push_messages(p);
  }
}

std::uint64_t member_state::used_bytes(std::uint64_t n) const noexcept {
  std::uint64_t header;
  std::memcpy(&header, slot(me_, n) + 8, sizeof header);
  return slot_header_size + static_cast<std::uint32_t>(header);
}

bool member_state::push_messages(std::uint32_t p) {
  fabric::detail::region_publisher& out = *publishers_[p];
  while (pushed_[p] < sent_) {
    if (!out.free_cells(1)) return false;  // never wait: this may run inside a poll
    // A run of consecutive slots (not across the ring's end) in one push, while the bytes it
    // carries beyond the messages' own stay small: 4 KiB, or as much as the messages.
    const std::uint64_t first = pushed_[p];
    const std::uint64_t offset = layout_.slot(me_, first);
    std::uint64_t last = first;
    std::uint64_t span = used_bytes(first), used = span;
    while (last + 1 < sent_ && (last + 1) % layout_.window != 0) {
      const std::uint64_t next = used_bytes(last + 1);
      const std::uint64_t wider = layout_.slot_bytes * (last + 1 - first) + next;
      if (wider > 4096 && wider > 2 * (used + next)) break;
      span = wider;
      used += next;
      ++last;
    }
    const auto status = out.publish({base_ + offset, span}, offset,
                                    layout_.control(me_, word::sent), sent_word(view_, last + 1));
    if (status != fabric::detail::publish_status::ok) return false;
    pushed_[p] = last + 1;
    ++counters_.message_pushes;
  }
  return true;
}

bool member_state::push_control(std::uint32_t p) {
  if (!control_dirty_[p]) return true;
  fabric::detail::region_publisher& out = *publishers_[p];
  if (!out.free_cells(1)) return false;
  const std::uint64_t offset = layout_.control(me_, word::first_pushed);
  const std::uint64_t bytes = layout_.pushed_control_bytes();
  std::span<const std::byte> data{base_ + offset, bytes};
  if (std::byte* peer = out.direct(); peer != nullptr) {
    // Word by word, each whole (the peer loads them while they change); then the version word.
    for (std::uint64_t w = 0; w < bytes; w += 8) {
      store_word(peer, offset + w, load_word(base_, offset + w));
    }
    data = {peer + offset, bytes};
  }
  const auto status = out.publish(data, offset, layout_.control(me_, word::version),
                                  version_word(++version_, view_, phase_));
  if (status != fabric::detail::publish_status::ok) return false;
  control_dirty_[p] = false;
  ++counters_.pushes;
  return true;
}

}  // namespace seriema::group::detail

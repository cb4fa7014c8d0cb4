// Large messages: a member's large region (large_layout in group/detail/table.hpp), the sender's
// side (a large area filled in place, a descriptor in the slot ring), and the chain that carries
// the payload block by block from each member to the next in the view's order, so that every
// member receives each byte once and sends it once (per-receiver bandwidth near a single put's).
// A large message counts as received only once all its bytes are here, so the total order and
// stability of the slot rings cover it unchanged.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <seriema/base/error.hpp>
#include <seriema/fabric/runtime.hpp>

#include "member.hpp"

namespace seriema::group::detail {

namespace {

/// Bytes a member pushes on in one publication: small enough that the next member starts
/// passing a message on while it still arrives, large enough that the cost per block (a fence
/// and a word put, or a write message) stays small beside the bytes. Copies on one machine
/// pipeline best in smaller blocks (measured: bench/run-groups.sh, docs/group.md).
constexpr std::uint64_t block_for(fabric::detail::publish_path path) noexcept {
  return path == fabric::detail::publish_path::direct ? std::uint64_t{64} << 10
                                                      : std::uint64_t{256} << 10;
}
/// Blocks one progress round pushes at most (the poll also serves calls and the rings).
constexpr std::size_t blocks_per_round = 16;
/// Publications in flight to the next member's large region.
constexpr std::uint32_t large_cells = 64;

large_descriptor descriptor_of(std::span<const std::byte> payload) noexcept {
  large_descriptor d;
  std::memcpy(&d, payload.data(), sizeof d);
  return d;
}

}  // namespace

large_region::large_region(fabric::runtime& rt, std::size_t bytes)
    : rt_(rt),
      memory_(rt.context(), bytes,
              "a group's large messages (capacity^2 x large_window x max_large_message bytes)") {
  // Write messages (the remote path without puts) land here as in the table's region.
  rt_.service_expose(reinterpret_cast<std::uint64_t>(base()), memory_.bytes().size());
}

large_region::~large_region() {
  rt_.service_withdraw(reinterpret_cast<std::uint64_t>(base()), memory_.bytes().size());
}

void member_state::prepare_large() {
  if (options_.max_large_message == 0) return;
  const std::uint32_t k = layout_.members;
  large_layout_ = large_layout::make(k, options_.large_window, options_.max_large_message);
  large_region_ = std::make_unique<large_region>(
      ctx_.rt(), static_cast<std::size_t>(large_layout_.region_bytes()));
  large_base_ = large_region_->base();
  large_publishers_.resize(k);
  large_busy_.assign(options_.large_window, 0);
  pushed_on_.assign(std::size_t{k} * options_.large_window, pushed_on{});
}

hello member_state::my_hello() const {
  const int rank = ctx_.rt().rank();
  hello h{transfer::remote_memory_locator::make(rank, region_), options_, {}};
  if (large_region_) h.large = large_region_->locator(rank);
  return h;
}

bool member_state::hello_fits(const hello& h, int process) const noexcept {
  const bool table = h.region.rkey_size != 0 && h.region.process == process &&
                     h.region.size >= layout_.region_bytes();
  if (!large_region_) return table;
  return table && h.large.rkey_size != 0 && h.large.process == process &&
         h.large.size >= large_layout_.region_bytes();
}

void member_state::connect_to(std::uint32_t m, const hello& h) {
  const fabric::detail::publish_route route = route_of(ctx_, options_.push);
  publishers_[m] = std::make_unique<fabric::detail::region_publisher>(ctx_, h.region, route,
                                                                      2 * options_.window + 2);
  if (large_region_) {
    large_publishers_[m] =
        std::make_unique<fabric::detail::region_publisher>(ctx_, h.large, route, large_cells);
  }
}

std::uint32_t member_state::neighbour(int step) const noexcept {
  const auto k = static_cast<int>(order_.size());
  const auto at = static_cast<int>(std::find(order_.begin(), order_.end(), me_) - order_.begin());
  return order_[static_cast<std::size_t>(((at + step) % k + k) % k)];
}

group_status member_state::begin_large(std::size_t n, std::span<std::byte>& room) {
  if (!large_region_ || n > options_.max_large_message) return group_status::too_large;
  const std::uint64_t j = large_sent_ % options_.large_window;
  if (!room_for(n)) {
    ++counters_.window_full;
    return group_status::full;
  }
  room = {large_base_ + large_layout_.area(me_, me_, j), n};
  return group_status::ok;
}

group_status member_state::commit_large(std::size_t n) {
  const std::uint64_t j = large_sent_ % options_.large_window;
  const large_descriptor d{large_sent_, n};
  std::memcpy(slot(me_, sent_) + slot_header_size, &d, sizeof d);
  // This member's own area holds it all: the word says so, and the chain starts from it.
  store_word(large_base_, large_layout_.word(me_, me_, j), large_word(large_sent_, n));
  large_busy_[j] = sent_ + 1;
  ++large_sent_;
  ++counters_.large_sent;
  const group_status status = commit(slot_kind::large, sizeof d);
  // The first blocks leave now, as the descriptor did (commit pushed it), not at the next poll.
  if (!polling_) forward_large();
  return status;
}

bool member_state::large_complete(std::uint32_t sender,
                                  std::span<const std::byte> descriptor) const noexcept {
  if (sender == me_) return true;
  const large_descriptor d = descriptor_of(descriptor);
  const std::uint64_t j = d.ordinal % large_layout_.slots;
  // The member before this one in the view pushed it here (acquire: its bytes came first).
  const std::uint64_t w = load_word(large_base_, large_layout_.word(neighbour(-1), sender, j));
  return w == large_word(d.ordinal, d.bytes);
}

std::span<const std::byte> member_state::large_payload(
    std::uint32_t sender, std::span<const std::byte> descriptor) const noexcept {
  const large_descriptor d = descriptor_of(descriptor);
  const std::uint32_t writer = sender == me_ ? me_ : neighbour(-1);
  const std::uint64_t j = d.ordinal % large_layout_.slots;
  return {large_base_ + large_layout_.area(writer, sender, j), static_cast<std::size_t>(d.bytes)};
}

std::size_t member_state::forward_large() {
  if (!large_region_ || order_.size() < 2) return 0;
  const std::uint32_t next = neighbour(1);
  const std::uint32_t prev = neighbour(-1);
  fabric::detail::region_publisher* out = large_publishers_[next].get();
  // As push_all: this view's messages go to a member once it is in this view too.
  if (out == nullptr || load_word(base_, layout_.control(next, word::view)) != view_) return 0;
  std::size_t blocks = 0;
  for (std::uint32_t s : order_) {
    if (s == next) continue;  // the next member is the sender: the chain ends here
    const std::uint32_t writer = s == me_ ? me_ : prev;
    for (std::uint32_t j = 0; j < large_layout_.slots; ++j) {
      pushed_on& done = pushed_on_[std::size_t{s} * large_layout_.slots + j];
      const std::uint64_t w = load_word(large_base_, large_layout_.word(writer, s, j));
      // Tags only grow per (sender, slot): an older one is a message this member already
      // passed on, or one every member consumed (left in an area of an earlier view).
      if (large_tag(w) == 0 || large_tag(w) < done.tag) continue;
      if (large_tag(w) > done.tag) done = {large_tag(w), 0};
      const std::uint64_t landed = large_bytes(w);
      while (done.bytes < landed) {
        if (blocks == blocks_per_round || !out->free_cells(1)) return blocks;
        const std::uint64_t n = std::min(landed - done.bytes, block_for(out->path()));
        const std::uint64_t from = large_layout_.area(writer, s, j) + done.bytes;
        const auto status = out->publish(
            {large_base_ + from, static_cast<std::size_t>(n)},
            large_layout_.area(me_, s, j) + done.bytes, large_layout_.word(me_, s, j),
            large_word(done.tag - 1, done.bytes + n));
        if (status != fabric::detail::publish_status::ok) return blocks;
        done.bytes += n;
        counters_.large_pushed_bytes += n;
        ++blocks;
      }
    }
  }
  return blocks;
}

void member_state::settle_large_chain() {
  if (!large_region_ || order_.size() < 2) return;
  // Called in install before this member's row shows the new view, so no member has pushed a
  // block of the new view here yet: every word read now is of an ended view. Without this, the
  // rest of a dropped message half passed on would go to the new successor (wasted bytes, and
  // read from an area a new message may already be filling).
  const std::uint32_t prev = neighbour(-1);
  for (std::uint32_t s : order_) {
    const std::uint32_t writer = s == me_ ? me_ : prev;
    for (std::uint32_t j = 0; j < large_layout_.slots; ++j) {
      const std::uint64_t w = load_word(large_base_, large_layout_.word(writer, s, j));
      pushed_on_[std::size_t{s} * large_layout_.slots + j] = {large_tag(w), large_bytes(w)};
    }
  }
}

std::uint64_t member_state::least_consumed_mine(bool reread) {
  if (reread) refresh_rows();
  std::uint64_t least = consumed_[me_];
  for (std::uint32_t m : order_) {
    if (m != me_) least = std::min(least, rows_[m].consumed[me_]);
  }
  return least;
}

}  // namespace seriema::group::detail

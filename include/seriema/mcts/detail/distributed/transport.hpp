// distributed_search, placement and transport: which thread owns a new node and simulates a
// leaf, whether a step is taken here or sent, and the calls that send it.
#pragma once

#include <seriema/mcts/distributed.hpp>

namespace seriema::mcts {

/// The queue of a random local worker: the shorter of two picked at random, so that a thread
/// busier with selections than the others (the root's owner, in remote-only mode) gets fewer
/// leaves instead of leaving the others idle. Each queue keeps its one consumer.
template <game G>
inline auto distributed_search<G>::simulation_queue_for(
    worker& w) -> moodycamel::ConcurrentQueue<node*>& {
  const auto count = static_cast<std::uint32_t>(workers_.size());
  auto& first = workers_[w.rng.below(count)]->simulations;
  if (count == 1) return first;
  auto& second = workers_[w.rng.below(count)]->simulations;
  return second.size_approx() < first.size_approx() ? second : first;
}

template <game G>
inline fabric::thread_id distributed_search<G>::pick_owner(worker& w, const state& s) {
  if constexpr (hashed_game<G>) {
    if (options_.placement == node_placement::hashed) {
      return static_cast<fabric::thread_id>(game_.hash(s) % thread_count_);
    }
  }
  return w.rng.below(static_cast<std::uint32_t>(thread_count_));
}

template <game G>
inline bool distributed_search<G>::steps_directly(const fabric::thread_context& me,
                                                  fabric::thread_id owner) const noexcept {
  if (options_.remote_only) return false;
  return owner == me.id() || rt_.is_local(owner);
}

template <game G>
inline void distributed_search<G>::send_select(fabric::thread_context& me, worker& w,
                                               fabric::thread_id owner, std::uint64_t address) {
  ++w.remote_calls;
  send(me, owner, [address](fabric::thread_context& target) {
    auto* self = active_;
    self->guarded(target, [&] {
      self->select(target, self->worker_of(target), reinterpret_cast<node*>(address));
    });
  });
}

template <game G>
template <class F>
inline void distributed_search<G>::send(fabric::thread_context& me, fabric::thread_id dest,
                                        const F& f) {
  check(me, options_.channel, dest, dispatch(options_.channel, [&]<invoke::channel C>() {
          return invoke::call<C, invoke::policy::retry_async>(me, dest, f);
        }));
}

template <game G>
template <class F>
inline void distributed_search<G>::invoke_buffer(fabric::thread_context& me, fabric::thread_id dest,
                                                 const F& f, std::span<const std::byte> bytes) {
  check(me, options_.channel, dest, dispatch(options_.channel, [&]<invoke::channel C>() {
          return invoke::call_buffer<C, invoke::policy::retry_async>(me, dest, f, bytes);
        }));
}

template <game G>
template <class Body>
inline auto distributed_search<G>::dispatch(invoke::channel c, Body&& body) -> call_status {
  switch (c) {
    case invoke::channel::send:
      return body.template operator()<invoke::channel::send>();
    case invoke::channel::write:
      return body.template operator()<invoke::channel::write>();
    case invoke::channel::trad:
      return body.template operator()<invoke::channel::trad>();
    case invoke::channel::ovfl:
      return body.template operator()<invoke::channel::ovfl>();
    case invoke::channel::adaptive:
      return body.template operator()<invoke::channel::adaptive>();
  }
  return call_status::error;
}

/// A rollout whose call could not be sent would never come back: the search cannot finish.
template <game G>
inline void distributed_search<G>::check(fabric::thread_context& me, invoke::channel c,
                                         fabric::thread_id dest, call_status status) {
  if (status != call_status::ok) {
    throw error(fmt::format(
        "mcts: a call to thread {} failed ({}); the search cannot go on{}", dest,
        invoke::describe(me, status, c),
        status == call_status::full
            ? " (queue room: raise SERIEMA_EXCEEDING_LIMIT or SERIEMA_MAX_CHUNKS, or lower "
              "rollouts_in_flight)"
            : ""));
  }
}

template <game G>
inline std::size_t distributed_search<G>::local_index(fabric::thread_id t) const noexcept {
  return static_cast<std::size_t>(rt_.placement().locate(t).local_thread);
}

template <game G>
inline auto distributed_search<G>::worker_of(const fabric::thread_context& me) noexcept -> worker& {
  return *workers_[local_index(me.id())];
}

template <game G>
inline std::uint64_t distributed_search<G>::address_of(const node* n) noexcept {
  return reinterpret_cast<std::uint64_t>(n);
}

/// A node's address for its parent's link (detail::child_link), which holds 48 bits of it.
template <game G>
inline std::uint64_t distributed_search<G>::link_address_of(const node* n) {
  const std::uint64_t address = address_of(n);
  if (!detail::fits_link(address)) {
    throw error(fmt::format("mcts: a tree node at {:#x} lies above the 48 address bits a link "
                            "holds",
                            address));
  }
  return address;
}

}  // namespace seriema::mcts

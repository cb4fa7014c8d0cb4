// distributed_search, the second step of a rollout: expansion, a new leaf made on the thread
// the placement picks and located at its parent, where deferred selections resume.
#pragma once

#include <seriema/mcts/distributed.hpp>

namespace seriema::mcts {

/// Creates the child for edge `index` of n on a thread picked by the placement policy.
template <game G>
inline void distributed_search<G>::expand(fabric::thread_context& me, worker& w, node* n,
                                          std::uint32_t index, move m) {
  state child = n->state;
  game_.apply(child, m);
  const fabric::thread_id owner = pick_owner(w, child);
  const fabric::thread_id parent_owner = n->owner;
  const std::uint64_t parent = address_of(n);
  if (steps_directly(me, owner)) {
    create(me, w, owner, child, parent_owner, parent, index);
    return;
  }
  ++w.remote_calls;
  invoke_buffer(
      me, owner,
      [parent_owner, parent, index](fabric::thread_context& target, std::span<std::byte> bytes) {
        auto* self = active_;
        self->guarded(target, [&] {
          state s;
          if (bytes.size() != sizeof s) {
            throw error(fmt::format("mcts: a node's state arrived with {} bytes, expected {}",
                                    bytes.size(), sizeof s));
          }
          std::memcpy(&s, bytes.data(), sizeof s);
          self->create(target, self->worker_of(target), target.id(), s, parent_owner, parent,
                       index);
        });
      },
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(&child), sizeof child));
}

/// The new leaf: tells its parent where it is, then goes to a random local worker's
/// simulation queue. Without room for it (memory budget), tells the parent so instead.
template <game G>
inline void distributed_search<G>::create(
    fabric::thread_context& me, worker& w, fabric::thread_id owner, const state& s,
    fabric::thread_id parent_owner, std::uint64_t parent, std::uint32_t index) {
  node* leaf = w.pool.template try_create<node>();
  if (leaf == nullptr) {
    note_budget_reached();
    tell_not_stored(me, w, parent_owner, parent, index);
    return;
  }
  leaf->state = s;
  leaf->parent = parent;
  leaf->parent_owner = static_cast<std::uint16_t>(parent_owner);  // < max_link_threads
  leaf->owner = static_cast<std::uint16_t>(owner);
  leaf->index_in_parent = static_cast<std::uint16_t>(index);  // < max_edges
  leaf->winner = game_.winner(s);
  ++w.nodes_created;
  ++w.nodes_held;
  const std::uint64_t address = link_address_of(leaf);
  if (steps_directly(me, parent_owner)) {
    located(me, w, reinterpret_cast<node*>(parent), index, owner, address);
  } else {
    ++w.remote_calls;
    send(me, parent_owner, [parent, index, owner, address](fabric::thread_context& target) {
      auto* self = active_;
      self->guarded(target, [&] {
        self->located(target, self->worker_of(target), reinterpret_cast<node*>(parent), index,
                      owner, address);
      });
    });
  }
  simulation_queue_for(w).enqueue(leaf);
}

/// The child of edge `index` of n is at (owner, address): publish it and resume the
/// selections deferred on it.
template <game G>
inline void distributed_search<G>::located(fabric::thread_context& me, worker& w, node* n,
                                           std::uint32_t index, fabric::thread_id owner,
                                           std::uint64_t address) {
  std::atomic<std::uint64_t>& child = n->edges.load(std::memory_order_acquire)->child_word(index);
  const std::uint64_t previous =
      child.exchange(detail::child_link(address, owner), std::memory_order_acq_rel);
  for (std::uint64_t deferred = previous >> 1; deferred > 0; --deferred) {
    if (steps_directly(me, owner)) {
      select(me, w, reinterpret_cast<node*>(address));
    } else {
      send_select(me, w, owner, address);
    }
  }
}

/// The owner of edge `index` of the node at `parent` had no room for its child: the parent's
/// owner learns it (directly when reachable, by a call otherwise).
template <game G>
inline void distributed_search<G>::tell_not_stored(fabric::thread_context& me, worker& w,
                                                   fabric::thread_id parent_owner,
                                                   std::uint64_t parent, std::uint32_t index) {
  if (steps_directly(me, parent_owner)) {
    not_stored(me, w, reinterpret_cast<node*>(parent), index);
    return;
  }
  ++w.remote_calls;
  send(me, parent_owner, [parent, index](fabric::thread_context& target) {
    auto* self = active_;
    self->guarded(target, [&] {
      self->not_stored(target, self->worker_of(target), reinterpret_cast<node*>(parent), index);
    });
  });
}

/// Edge `index` of n will have no child: mark it so (later selections play out from its
/// position), and play out for the selection that tried to create it and those deferred on it.
template <game G>
inline void distributed_search<G>::not_stored(fabric::thread_context& me, worker& w, node* n,
                                              std::uint32_t index) {
  std::atomic<std::uint64_t>& child = n->edges.load(std::memory_order_acquire)->child_word(index);
  const std::uint64_t previous =
      child.exchange(detail::unstored_child, std::memory_order_acq_rel);
  for (std::uint64_t waiting = (previous >> 1) + 1; waiting > 0; --waiting) {
    play_out_unstored(me, w, n, index);
  }
}

}  // namespace seriema::mcts

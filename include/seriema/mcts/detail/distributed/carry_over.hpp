// distributed_search, carrying a kept tree into the next search (search_options::reuse_tree).
//
// A collective phase before the search's own run (carry_over). Rank 0's first thread follows
// the path from the kept root (descend, a call to each node's owner); the node it ends at is
// sent as an image to rank 0's first thread, which makes the new root of it (adopt_root).
// Every copied node asks the owners of its children to copy them (carry_node, on the thread
// that owns the kept child, into its next_pool); each copy reports to its parent's owner
// once its whole subtree is copied (carried), so the root hears last, and ends the phase.
// While this runs no rollout does: a node of either tree is touched only by its owner.
#pragma once

#include <seriema/mcts/distributed.hpp>

namespace seriema::mcts {

/// Every process: copies the kept subtree that command.path leads to into the next pools,
/// then frees the kept tree. Rank 0's root_ is the copy's root, or null when the path leads
/// to no node (the search then starts from an empty tree).
template <game G>
inline void distributed_search<G>::carry_over(const detail::search_command<G>& command) {
  memory_.reset_budget(command.memory_budget);  // the copy may take the other half
  carry_from_ = root_;
  root_ = nullptr;
  carrying_ = true;
  std::exception_ptr run_error;
  try {
    rt_.run([this](fabric::thread_context& me) { thread_main(me); });
  } catch (...) {
    run_error = std::current_exception();
  }
  carrying_ = false;
  carry_from_ = nullptr;
  fail_everywhere_if_failed(run_error);
  for (auto& w : workers_) {
    w->pool = std::move(w->next_pool);  // the rest of the kept tree is freed here
    w->nodes_held = w->nodes_carried;
    w->nodes_carried = 0;
    w->finished.store(false, std::memory_order_relaxed);
  }
  finish_sent_.store(false);
  memory_.reset_budget(search_budget(command));
}

/// Follows the carry path from n (depth moves of it taken so far), then sends the node at
/// its end to rank 0's first thread.
template <game G>
inline void distributed_search<G>::descend(fabric::thread_context& me, worker& w, const node* n,
                                           std::uint32_t depth) {
  if (depth == carry_path_length_) {
    send_root_image(me, w, n);
    return;
  }
  const table* t = n->edges.load(std::memory_order_acquire);
  for (std::uint32_t i = 0; t != nullptr && i < t->count; ++i) {
    const std::uint64_t word = t->child(i, std::memory_order_relaxed);
    if (t->moves()[i] != carry_path_[depth] || !detail::names_child(word)) continue;
    ++w.remote_calls;
    const std::uint64_t child = detail::child_address(word);
    send(me, detail::child_owner(word), [child, depth](fabric::thread_context& target) {
      auto* self = active_;
      self->guarded(target, [&] {
        self->descend(target, self->worker_of(target), reinterpret_cast<const node*>(child),
                      depth + 1);
      });
    });
    return;
  }
  // The tree has no node there: rank 0's first thread ends the phase without a root.
  ++w.remote_calls;
  send(me, rt_.placement().global_id(0, 0), [](fabric::thread_context& target) {
    active_->guarded(target, [&] { active_->finish(target); });
  });
}

template <game G>
inline void distributed_search<G>::send_root_image(fabric::thread_context& me, worker& w,
                                                   const node* n) {
  detail::write_image(*n, w.image);
  ++w.remote_calls;
  invoke_buffer(
      me, rt_.placement().global_id(0, 0),
      [](fabric::thread_context& target, std::span<std::byte> bytes) {
        auto* self = active_;
        self->guarded(target, [&] { self->adopt_root(target, self->worker_of(target), bytes); });
      },
      std::span<const std::byte>(w.image));
}

/// Rank 0's first thread: the carried root, from its image.
template <game G>
inline void distributed_search<G>::adopt_root(fabric::thread_context& me, worker& w,
                                              std::span<const std::byte> bytes) {
  const auto image = detail::node_image<G>::read(bytes);
  if (!image) {
    throw error(fmt::format("mcts: a carried root arrived with {} bytes, not an image of its "
                            "edge count", bytes.size()));
  }
  root_ = rebuild(me, w, *image, 0, 0, 0);
  carry_children(me, w, root_);
}

/// The owner of a kept node: its copy, under the copy of its parent (at parent_owner,
/// parent), or a report that there was no room for it.
template <game G>
inline void distributed_search<G>::carry_node(fabric::thread_context& me, worker& w,
                                              const node* kept, fabric::thread_id parent_owner,
                                              std::uint64_t parent, std::uint32_t index) {
  detail::write_image(*kept, w.image);
  const auto image = detail::node_image<G>::read(w.image);
  node* copy = rebuild(me, w, *image, parent_owner, parent, index);
  if (copy == nullptr) {
    note_budget_reached();
    tell_carried(me, w, parent_owner, parent, index, 0);
    return;
  }
  carry_children(me, w, copy);
}

/// A node of the new tree made from `image` in w.next_pool (the root's always; another's
/// null where the budget refuses it; its table left out where the budget refuses that). Its
/// links keep the kept tree's child words until the children report (carried).
template <game G>
inline auto distributed_search<G>::rebuild(
    fabric::thread_context& me, worker& w, const detail::node_image<G>& image,
    fabric::thread_id parent_owner, std::uint64_t parent, std::uint32_t index) -> node* {
  const bool root = parent == 0;
  node* copy = root ? w.next_pool.template create<node>()
                    : w.next_pool.template try_create<node>();
  if (copy == nullptr) return nullptr;
  const auto& head = image.head();
  copy->state = head.state;
  copy->parent = parent;
  copy->parent_owner = static_cast<std::uint16_t>(parent_owner);
  copy->owner = static_cast<std::uint16_t>(me.id());
  copy->index_in_parent = static_cast<std::uint16_t>(index);
  copy->winner = head.winner;
  copy->visits.store(head.visits, std::memory_order_relaxed);
  ++w.nodes_carried;
  if (head.count == 0) return copy;
  table* t = allocate_table(w.next_pool, head.count, root);
  if (t == nullptr) {  // a leaf again: the budget had no room for its edges
    note_budget_reached();
    return copy;
  }
  t->decided.store(head.decided, std::memory_order_relaxed);
  t->won_edge = head.won_edge;
  for (std::uint32_t i = 0; i < head.count; ++i) copy_edge(w, *t, i, image.edge(i));
  copy->edges.store(t, std::memory_order_release);
  return copy;
}

/// Edge i of the copy from its image; a kept child whose block the budget has no room for is
/// dropped (the edge keeps its statistics and is expanded again when chosen).
template <game G>
inline void distributed_search<G>::copy_edge(worker& w, table& t, std::uint32_t i,
                                             const detail::carried_edge<G>& e) {
  t.statistics()[i].store(e.visits, e.points);
  if (t.amaf() != nullptr) t.amaf()[i].store(e.amaf_visits, e.amaf_points);
  if (t.lost() != nullptr && e.lost != 0) {
    t.lost()[i / 64].fetch_or(std::uint64_t{1} << (i % 64), std::memory_order_relaxed);
    t.lost_count.fetch_add(1, std::memory_order_relaxed);
  }
  t.moves()[i] = e.move;
  if (t.priors() != nullptr) t.priors()[i] = e.prior;
  if (!detail::names_child(e.child)) return;
  std::atomic<std::uint64_t>* slot = child_slot(w.next_pool, t, i);
  if (slot == nullptr) {
    note_budget_reached();
    return;
  }
  slot->store(e.child, std::memory_order_relaxed);
}

/// Asks the owner of each kept child of `copy` to copy it; with none, the copy is complete.
template <game G>
inline void distributed_search<G>::carry_children(fabric::thread_context& me, worker& w,
                                                  node* copy) {
  table* t = copy->edges.load(std::memory_order_relaxed);
  std::uint32_t pending = 0;
  for (std::uint32_t i = 0; t != nullptr && i < t->count; ++i) {
    pending += t->child(i, std::memory_order_relaxed) != 0 ? 1 : 0;
  }
  if (pending == 0) {
    report_carried(me, w, copy);
    return;
  }
  t->carry_pending = pending;  // before any child is asked: none reports before
  const fabric::thread_id owner = me.id();
  const std::uint64_t parent = address_of(copy);
  for (std::uint32_t i = 0; i < t->count; ++i) {
    const std::uint64_t word = t->child(i, std::memory_order_relaxed);
    if (word == 0) continue;
    ++w.remote_calls;
    const std::uint64_t kept = detail::child_address(word);
    send(me, detail::child_owner(word), [kept, owner, parent, i](fabric::thread_context& target) {
      auto* self = active_;
      self->guarded(target, [&] {
        self->carry_node(target, self->worker_of(target), reinterpret_cast<const node*>(kept),
                         owner, parent, i);
      });
    });
  }
}

/// `copy`'s subtree is copied: its parent's owner learns where it is; the root ends the phase.
template <game G>
inline void distributed_search<G>::report_carried(fabric::thread_context& me, worker& w,
                                                  node* copy) {
  if (copy->parent == 0) {
    finish(me);
    return;
  }
  tell_carried(me, w, copy->parent_owner, copy->parent, copy->index_in_parent,
               link_address_of(copy));
}

template <game G>
inline void distributed_search<G>::tell_carried(
    fabric::thread_context& me, worker& w, fabric::thread_id parent_owner, std::uint64_t parent,
    std::uint32_t index, std::uint64_t address) {
  ++w.remote_calls;
  const fabric::thread_id owner = me.id();
  send(me, parent_owner, [parent, index, owner, address](fabric::thread_context& target) {
    auto* self = active_;
    self->guarded(target, [&] {
      self->carried(target, self->worker_of(target), reinterpret_cast<node*>(parent), index,
                    owner, address);
    });
  });
}

/// The parent's owner: edge `index` of the copy `parent` leads to (owner, address), or to
/// nothing (address 0: no room for the child); the last child to report completes `parent`.
template <game G>
inline void distributed_search<G>::carried(fabric::thread_context& me, worker& w, node* parent,
                                           std::uint32_t index, fabric::thread_id owner,
                                           std::uint64_t address) {
  table& t = *parent->edges.load(std::memory_order_relaxed);
  t.child_word(index).store(address == 0 ? 0 : detail::child_link(address, owner),
                          std::memory_order_relaxed);
  if (--t.carry_pending == 0) report_carried(me, w, parent);
}

}  // namespace seriema::mcts

// Tree reuse in the distributed search: a node and its edge table as bytes (a node image), the
// form in which a kept node is copied into the next search's tree, in its own process or, for
// the new root, to rank 0's first thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <seriema/fabric/placement.hpp>
#include <seriema/mcts/detail/tree.hpp>
#include <seriema/mcts/game.hpp>
#include <span>
#include <vector>

namespace seriema::mcts::detail {

/// What a node image says of the node itself; `count` carried_edge records follow it.
template <class G>
struct carried_node {
  typename G::state state{};
  std::uint64_t visits = 0;
  std::uint32_t count = 0;     ///< edges (0: the node had no edge table)
  std::uint32_t won_edge = 0;  ///< edge_table::won_edge
  player winner = nobody;      ///< tree_node::winner
  player decided = nobody;     ///< edge_table::decided
};

/// One edge of a node image: its statistics, proof bit and link (child: the kept tree's link
/// word, which names the child's owner and address where names_child says so).
template <class G>
struct carried_edge {
  std::uint64_t visits = 0;
  std::uint64_t points = 0;
  std::uint64_t amaf_visits = 0;  ///< 0 where the kept tree had no RAVE statistics
  std::uint64_t amaf_points = 0;
  std::uint64_t child = 0;
  typename G::move move{};
  std::uint8_t lost = 0;          ///< 1: proven lost for the player choosing it
  float prior = 0;                ///< its prior share; 0 where the kept tree had no priors
};

/// Writes n (and its edge table, if it has one) into `out`, replacing its contents. Called by
/// the thread that owns n, once the threads of the search that grew it have stopped.
template <class G>
void write_image(const tree_node<G>& n, std::vector<std::byte>& out) {
  carried_node<G> head;
  head.state = n.state;
  head.visits = n.visits.load(std::memory_order_relaxed);
  head.winner = n.winner;
  const edge_table<G>* t = n.edges.load(std::memory_order_acquire);
  if (t != nullptr) {
    head.count = t->count;
    head.won_edge = t->won_edge;
    head.decided = t->decided.load(std::memory_order_relaxed);
  }
  out.resize(sizeof head + head.count * sizeof(carried_edge<G>));
  std::memcpy(out.data(), &head, sizeof head);
  for (std::uint32_t i = 0; i < head.count; ++i) {
    carried_edge<G> e;
    const auto statistics = t->statistics()[i].load();
    e.visits = statistics.visits;
    e.points = statistics.points;
    if (t->amaf() != nullptr) {
      const auto amaf = t->amaf()[i].load();
      e.amaf_visits = amaf.visits;
      e.amaf_points = amaf.points;
    }
    e.child = t->child(i, std::memory_order_relaxed);
    e.move = t->moves()[i];
    if (t->priors() != nullptr) e.prior = t->priors()[i];
    if (t->lost() != nullptr) {
      e.lost = (t->lost()[i / 64].load(std::memory_order_relaxed) >> (i % 64)) & 1;
    }
    std::memcpy(out.data() + sizeof head + i * sizeof e, &e, sizeof e);
  }
}

/// A node image read back: its head, and its edges one at a time (the bytes may come from a
/// call's buffer, with no alignment).
template <class G>
class node_image {
 public:
  /// The image in `bytes`; nullopt when its size does not match its edge count, or its winning
  /// edge or players are out of range (bytes another process wrote are checked before use).
  static std::optional<node_image> read(std::span<const std::byte> bytes) {
    carried_node<G> head;
    if (bytes.size() < sizeof head) return std::nullopt;
    std::memcpy(&head, bytes.data(), sizeof head);
    if (bytes.size() != sizeof head + std::size_t{head.count} * sizeof(carried_edge<G>)) {
      return std::nullopt;
    }
    const auto is_player = [](player p) { return p == nobody || p == 1 || p == 2; };
    if ((head.count > 0 && head.won_edge >= head.count) || !is_player(head.winner) ||
        !is_player(head.decided)) {
      return std::nullopt;
    }
    return node_image(head, bytes.subspan(sizeof head));
  }
  [[nodiscard]] const carried_node<G>& head() const noexcept { return head_; }  ///< the node
  /// Edge i < head().count.
  [[nodiscard]] carried_edge<G> edge(std::uint32_t i) const noexcept {
    carried_edge<G> e;
    std::memcpy(&e, edges_.data() + i * sizeof e, sizeof e);
    return e;
  }

 private:
  node_image(const carried_node<G>& head, std::span<const std::byte> edges)
      : head_(head), edges_(edges) {}
  carried_node<G> head_;
  std::span<const std::byte> edges_;
};

}  // namespace seriema::mcts::detail

// The distributed search's tree: nodes owned by threads, links that name a child's owner and
// address, per-edge statistics.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <seriema/fabric/placement.hpp>
#include <seriema/mcts/game.hpp>
#include <seriema/mcts/search.hpp>
#include <type_traits>

namespace seriema::mcts {

namespace detail {

template <class G>
struct tree_node;

/// Where one move out of a node leads: one word per edge, the only one written concurrently:
///   0                  not expanded;
///   odd                being created: (word >> 1) selections are deferred on it (a selection
///                      CASes +2 onto it);
///   2 (unstored_child) the owner had no room for the child (memory budget): selections through
///                      this edge play out from the child's position without a node;
///   even, > 2          the child (child_link): its address in the process of its owner in the
///                      low 48 bits, the owner's thread id in the high 16.
/// The creating thread CASes 0 -> 1; the child's location notice exchanges the odd word for the
/// child's link (release), and resumes the deferred selections it took out; an owner without
/// room sends a notice that exchanges it for unstored_child instead. One word holds both halves
/// so that a reader that sees the address sees its owner (no second field to order).
constexpr std::uint64_t unstored_child = 2;  ///< never a node's link (aligned address, > 2)
constexpr int child_address_bits = 48;
/// Job-wide thread ids a link (and a node's owner fields) can name: the search refuses larger
/// jobs.
constexpr std::uint64_t max_link_threads = std::uint64_t{1} << (64 - child_address_bits);
/// Moves a position can have (max_moves()) for a node's index in its parent's table: the
/// search refuses games with more.
constexpr std::uint64_t max_edges = std::uint64_t{1} << 16;
constexpr std::uint64_t child_address_mask = (std::uint64_t{1} << child_address_bits) - 1;

/// Whether a node's address fits a link (user-space addresses of x86-64 and AArch64 with
/// 4-level page tables do; the search checks each node it makes).
[[nodiscard]] inline bool fits_link(std::uint64_t address) noexcept {
  return (address & ~child_address_mask) == 0;
}
/// The link word of a child at `address` (fits_link) in the process of thread `owner`
/// (< max_link_threads).
[[nodiscard]] inline std::uint64_t child_link(std::uint64_t address,
                                              fabric::thread_id owner) noexcept {
  return address | std::uint64_t{owner} << child_address_bits;
}
[[nodiscard]] inline std::uint64_t child_address(std::uint64_t link) noexcept {
  return link & child_address_mask;
}
[[nodiscard]] inline fabric::thread_id child_owner(std::uint64_t link) noexcept {
  return static_cast<fabric::thread_id>(link >> child_address_bits);
}
/// Whether a link word names a child node (not 0, not being created, not unstored_child).
[[nodiscard]] inline bool names_child(std::uint64_t word) noexcept {
  return word > unstored_child && (word & 1) == 0;
}

/// Visits and points of one move in one word: visits in the high 32 bits, points (half wins of
/// the player choosing the move: a won playout is 2, a drawn one 1) in the low 32. A selection's
/// UCB1 scan reads 8 bytes per move, and a result is one atomic add. For an edge, visits grow
/// by K on the way down (the virtual loss) and points on the way up; for RAVE's all-moves-as-
/// first statistics both grow together. Relaxed: they are statistics.
///
/// No half wraps: the one add that takes a word's visits to rescale_at (each crossing is one
/// add, fetch_add orders them) says so, and its caller halves every word of that array
/// (halve_all), which keeps each move's win rate and the order of their visits. Let F be the
/// visits the rollouts in flight can add (window x K; the search refuses more than
/// max_in_flight_visits). Visits stay below rescale_at + F (the crossing add, and those of
/// the rollouts in flight before the halving reaches the word). Points stay below twice that
/// plus 2F: the virtual loss of a rollout in flight across a halving is halved, its points are
/// not, and each halving halves that excess too. With F <= 2^28 that is under 2^32 - 2^29.
/// A long analysis gets to rescale_at (2^30 playouts through one move: minutes on many cores),
/// and from then on a table's counts are relative: UCB1's exploration term of its moves grows
/// by sqrt(2) at each halving (the node's own visits are not halved), negligible there
/// (sqrt(ln N / n) is about 1e-4 at n = 2^29).
class packed_counts {
 public:
  static constexpr std::uint64_t rescale_at = std::uint64_t{1} << 30;
  /// The most visits rollouts in flight may add to one word (see above).
  static constexpr std::uint64_t max_in_flight_visits = std::uint64_t{1} << 28;

  struct counts {
    std::uint64_t visits = 0;
    std::uint64_t points = 0;
  };
  [[nodiscard]] counts load() const noexcept {
    const std::uint64_t word = word_.load(std::memory_order_relaxed);
    return {word >> 32, word & low_mask};
  }
  /// Adds both; true for the add that takes visits to rescale_at: then halve_all the array.
  [[nodiscard]] bool add(std::uint32_t visits, std::uint32_t points) noexcept {
    const std::uint64_t before =
        word_.fetch_add(std::uint64_t{visits} << 32 | points, std::memory_order_relaxed);
    return (before >> 32) < rescale_at && (before >> 32) + visits >= rescale_at;
  }
  /// Points alone (a result coming up): visits do not grow, so no rescale is due.
  void add_points(std::uint32_t points) noexcept {
    word_.fetch_add(points, std::memory_order_relaxed);
  }
  /// Sets both (a kept tree's copy, before the node is published); counts from a tree that
  /// kept them below rescale_at plus what was in flight fit.
  void store(std::uint64_t visits, std::uint64_t points) noexcept {
    word_.store(visits << 32 | (points & low_mask), std::memory_order_relaxed);
  }
  /// Halves visits (rounded up: a visited move stays visited) and points of each of `count`
  /// words (adds that race with it land before or after its compare-exchange, none is lost).
  static void halve_all(packed_counts* words, std::size_t count) noexcept {
    for (std::size_t i = 0; i < count; ++i) words[i].halve();
  }

 private:
  static constexpr std::uint64_t low_mask = 0xffffffffu;
  void halve() noexcept {
    std::uint64_t word = word_.load(std::memory_order_relaxed);
    for (;;) {
      const std::uint64_t visits = ((word >> 32) + 1) / 2;
      const std::uint64_t points = (word & low_mask) / 2;
      if (word_.compare_exchange_weak(word, visits << 32 | points, std::memory_order_relaxed)) {
        return;
      }
    }
  }
  std::atomic<std::uint64_t> word_{0};
};
static_assert(sizeof(packed_counts) == 8 && std::atomic<std::uint64_t>::is_always_lock_free);

/// The links of 8 consecutive edges of a table (see unstored_child for a word's states). Made
/// when the first of them is expanded: most moves of most tables never are.
struct child_block {
  static constexpr std::size_t edges = 8;
  std::atomic<std::uint64_t> words[edges] = {};
};
static_assert(sizeof(std::atomic<child_block*>) == 8 &&
              std::atomic<child_block*>::is_always_lock_free);

/// A node's moves and their statistics: this header, then in the same allocation its arrays,
/// 8-aligned: `statistics()` [count] (UCB1 reads them), `blocks()` [(count + 7) / 8] (pointers
/// to the child_blocks that hold the links, null until one of its edges is expanded), `amaf()`
/// [count] with RAVE, `lost()` [(count + 63) / 64] with the solver, `priors()` [count] with
/// move priors (4 bytes each, the array rounded up to 8), `moves()` [count] (2 bytes each for
/// Hex; moves and priors written before the table is published). 11 bytes a move without RAVE,
/// 19 with, 4 more with priors, plus 64 bytes per block in use, and 24 for the header (32, 48
/// and 64 when each edge had its own link and the arrays were apart).
template <class G>
struct alignas(8) edge_table {
  using move = typename G::move;
  static_assert(alignof(move) <= 8, "a table's moves follow 8-aligned arrays");
  std::uint32_t count = 0;
  /// With the solver, once `decided` names the player choosing here: the edge that wins (0 for a
  /// table made decided, whose only edge is the win; else written by the step whose
  /// compare-exchange decided it, after it). Read after the search, or by a later search that
  /// keeps the node as its root (search_options::reuse_tree).
  std::uint32_t won_edge = 0;
  /// With the solver: lost_count counts the bits of lost() set (each once, by fetch_or, when
  /// its edge is proven lost for the player choosing it), so the step that sets the last one
  /// knows the node is lost.
  std::atomic<std::uint32_t> lost_count{0};
  /// While a kept tree is carried into a new one (search_options::reuse_tree), in the new copy:
  /// the node's children not yet carried (written only by the owner's thread). 0 otherwise.
  std::uint32_t carry_pending = 0;
  /// With the solver: the node's result, nobody while undecided. Set when the table is made
  /// (detail::moves_to_search), before it is published, or later once by the compare-exchange of
  /// the step that proves it.
  std::atomic<player> decided{nobody};
  bool has_amaf = false;    ///< amaf() exists (RAVE)
  bool has_lost = false;    ///< lost() exists (solver)
  bool has_priors = false;  ///< priors() exists (knowledge of a prior_game)

  /// The bytes of a table of `count` moves, its arrays included (not its child blocks).
  static constexpr std::size_t bytes(std::size_t count, bool amaf, bool lost,
                                     bool priors = false) noexcept {
    const std::size_t words =
        count * (amaf ? 2 : 1) + block_count(count) + (lost ? lost_words(count) : 0);
    return sizeof(edge_table) + 8 * words + (priors ? round_up_8(sizeof(float) * count) : 0) +
           round_up_8(sizeof(move) * count);
  }
  /// A table of `count` moves in `memory` (bytes(count, amaf, lost, priors), 8-aligned): every
  /// statistic zero, no child block, every prior zero, every move default.
  static edge_table* create(void* memory, std::size_t count, bool amaf, bool lost,
                            bool priors = false) noexcept {
    auto* t = new (memory) edge_table{};
    t->count = static_cast<std::uint32_t>(count);
    t->has_amaf = amaf;
    t->has_lost = lost;
    t->has_priors = priors;
    for (std::size_t i = 0; priors && i < count; ++i) new (&t->priors()[i]) float{0};
    for (std::size_t i = 0; i < count; ++i) {
      new (&t->statistics()[i]) packed_counts{};
      if (amaf) new (&t->amaf()[i]) packed_counts{};
      new (&t->moves()[i]) move{};
    }
    for (std::size_t b = 0; b < block_count(count); ++b) {
      new (&t->blocks()[b]) std::atomic<child_block*>{nullptr};
    }
    for (std::size_t i = 0; lost && i < lost_words(count); ++i) {
      new (&t->lost()[i]) std::atomic<std::uint64_t>{0};
    }
    return t;
  }

  /// Edge i's link word (0, not expanded, while its block is absent).
  [[nodiscard]] std::uint64_t child(std::size_t i, std::memory_order order) const noexcept {
    const child_block* block = blocks()[i / child_block::edges].load(std::memory_order_acquire);
    return block == nullptr ? 0 : block->words[i % child_block::edges].load(order);
  }
  /// Edge i's link word in its block, which exists: its callers (a location or no-room notice,
  /// a carried child's report) answer the compare-exchange of that word from 0 to 1, or the
  /// copy of a child into it, each made after the block was installed.
  std::atomic<std::uint64_t>& child_word(std::size_t i) noexcept {
    return blocks()[i / child_block::edges].load(std::memory_order_acquire)
        ->words[i % child_block::edges];
  }
  /// Edge i's link word, its block made when absent in the memory `allocate()` returns
  /// (sizeof(child_block), 8-aligned, from the caller's pool; called only then); null when
  /// absent and allocate() returns null. A thread that loses the race to install a block
  /// leaves its memory unused.
  template <class Allocate>
  std::atomic<std::uint64_t>* child_slot(std::size_t i, Allocate&& allocate) noexcept {
    std::atomic<child_block*>& entry = blocks()[i / child_block::edges];
    child_block* block = entry.load(std::memory_order_acquire);
    if (block == nullptr) {
      void* memory = allocate();
      if (memory == nullptr) return nullptr;
      auto* fresh = new (memory) child_block{};
      if (entry.compare_exchange_strong(block, fresh, std::memory_order_acq_rel,
                                        std::memory_order_acquire)) {
        block = fresh;
      }
    }
    return &block->words[i % child_block::edges];
  }

  packed_counts* statistics() noexcept { return at<packed_counts>(0); }
  const packed_counts* statistics() const noexcept { return at<packed_counts>(0); }
  std::atomic<child_block*>* blocks() noexcept {
    return at<std::atomic<child_block*>>(8 * count);
  }
  const std::atomic<child_block*>* blocks() const noexcept {
    return at<std::atomic<child_block*>>(8 * count);
  }
  /// Null without RAVE.
  packed_counts* amaf() noexcept { return has_amaf ? at<packed_counts>(amaf_offset()) : nullptr; }
  const packed_counts* amaf() const noexcept {
    return has_amaf ? at<packed_counts>(amaf_offset()) : nullptr;
  }
  /// Bit i of lost()[i / 64]: edge i is proven lost for the player choosing it. Null without
  /// the solver.
  std::atomic<std::uint64_t>* lost() noexcept {
    return has_lost ? at<std::atomic<std::uint64_t>>(lost_offset()) : nullptr;
  }
  const std::atomic<std::uint64_t>* lost() const noexcept {
    return has_lost ? at<std::atomic<std::uint64_t>>(lost_offset()) : nullptr;
  }
  /// Edge i's prior share (search_options::prior_bias). Null without priors.
  float* priors() noexcept { return has_priors ? at<float>(priors_offset()) : nullptr; }
  const float* priors() const noexcept {
    return has_priors ? at<float>(priors_offset()) : nullptr;
  }
  move* moves() noexcept { return at<move>(moves_offset()); }
  const move* moves() const noexcept { return at<move>(moves_offset()); }

 private:
  static constexpr std::size_t block_count(std::size_t count) noexcept {
    return (count + child_block::edges - 1) / child_block::edges;
  }
  static constexpr std::size_t lost_words(std::size_t count) noexcept { return (count + 63) / 64; }
  static constexpr std::size_t round_up_8(std::size_t n) noexcept {
    return (n + 7) & ~std::size_t{7};
  }
  [[nodiscard]] std::size_t amaf_offset() const noexcept {
    return 8 * (count + block_count(count));
  }
  [[nodiscard]] std::size_t lost_offset() const noexcept {
    return amaf_offset() + (has_amaf ? 8 * count : 0);
  }
  [[nodiscard]] std::size_t priors_offset() const noexcept {
    return lost_offset() + (has_lost ? 8 * lost_words(count) : 0);
  }
  [[nodiscard]] std::size_t moves_offset() const noexcept {
    return priors_offset() + (has_priors ? round_up_8(sizeof(float) * count) : 0);
  }
  /// The array at `offset` bytes after the header.
  template <class T>
  T* at(std::size_t offset) noexcept {
    return reinterpret_cast<T*>(reinterpret_cast<std::byte*>(this + 1) + offset);
  }
  template <class T>
  const T* at(std::size_t offset) const noexcept {
    return reinterpret_cast<const T*>(reinterpret_cast<const std::byte*>(this + 1) + offset);
  }
};

/// A node lives in the tree_pool of the thread that created it, in the process of `owner`.
/// Everything but `visits` and `edges` is written once, before the node's address is published
/// (by a call, or the release exchange of the parent's edge).
template <class G>
struct tree_node {
  typename G::state state{};
  std::uint64_t parent = 0;  ///< the parent's address in parent_owner's process; 0 at the root
  /// Thread ids and the edge index in 16 bits each (a search refuses jobs of more than
  /// max_link_threads threads and games of more than max_edges moves): 8 bytes less a node.
  std::uint16_t parent_owner = 0;
  std::uint16_t owner = 0;
  std::uint16_t index_in_parent = 0;
  player winner = nobody;  ///< the game is over here
  std::atomic<std::uint64_t> visits{0};  ///< playouts through this node, virtual ones included
  std::atomic<edge_table<G>*> edges{nullptr};  ///< created by the first selection through here
};

}  // namespace detail

}  // namespace seriema::mcts

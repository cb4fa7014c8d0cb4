// The game specification the MCTS framework runs (a C++20 concept), and the random generator
// handed to playouts. A user writes only a type satisfying seriema::mcts::game.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

namespace seriema::mcts {

/// Player numbers: 1 moves first, 2 second; 0 means "nobody" (no winner yet).
using player = std::uint8_t;
inline constexpr player nobody = 0;  ///< no player: no winner yet
/// The other player.
[[nodiscard]] constexpr player opponent(player p) noexcept { return static_cast<player>(3 - p); }

/// xoshiro256** (Blackman & Vigna): fast, 2^256 - 1 period, seeded through splitmix64.
/// A UniformRandomBitGenerator, plus below(n) for bounded draws without division.
/// Thread-safety: none (one per thread).
class random {
 public:
  using result_type = std::uint64_t;  ///< 64 random bits per draw
  /// A generator seeded with `seed` (equal seeds give equal sequences).
  explicit random(std::uint64_t seed = 0x5e21e3a) noexcept { reseed(seed); }
  /// Restarts the sequence from `seed`.
  void reseed(std::uint64_t seed) noexcept {
    for (auto& word : s_) {
      seed += 0x9e3779b97f4a7c15ULL;
      std::uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      word = z ^ (z >> 31);
    }
  }
  static constexpr result_type min() noexcept { return 0; }  ///< smallest draw
  /// Largest draw.
  static constexpr result_type max() noexcept { return std::numeric_limits<result_type>::max(); }
  /// The next 64 random bits.
  result_type operator()() noexcept {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  /// Uniform in [0, n) for n >= 1 (Lemire's multiply-shift; the bias is below 2^-32 for the
  /// n this is used with: move counts).
  std::uint32_t below(std::uint32_t n) noexcept {
    return static_cast<std::uint32_t>(((*this)() >> 32) * n >> 32);
  }

 private:
  static constexpr std::uint64_t rotl(std::uint64_t x, int k) noexcept {
    return (x << k) | (x >> (64 - k));
  }
  std::uint64_t s_[4];
};

/// A sequential game specification. The framework copies states between threads, processes and
/// machines as bytes (call_buffer), hence trivially copyable states and moves. All member
/// functions are const and must be safe to call from many threads at once on one game object
/// (the object holds configuration, e.g. the board size, identical in every process).
///
///   G::state                  a position, including whose turn it is
///   G::move                   a move (small, trivially copyable, equality-comparable)
///   g.initial_state()         the empty position
///   g.to_move(s)              the player to move in s (1 or 2)
///   g.max_moves()             an upper bound on legal_moves() of any state
///   g.legal_moves(s, out)     writes the legal moves of s into out (out.size() >= max_moves()),
///                             returns how many; 0 exactly when the game is over
///   g.apply(s, m)             plays legal move m in s (s then has the other player to move)
///   g.winner(s)               the winner once the game is over, nobody before
///   g.playout(s, rng)         plays uniformly random moves from s to the end; returns the winner
///   g.move_name(m)            text of a move ("c4"); g.parse_move(s, text): the legal move of s
///                             that text names, or nullopt
///   g.render(s)               the position as text for people
template <class G>
concept game = requires(const G& g, const typename G::state& s, typename G::state& mutable_state,
                        const typename G::move& m, std::span<typename G::move> out, random& rng,
                        std::string_view text) {
  typename G::state;
  typename G::move;
  requires std::is_trivially_copyable_v<typename G::state>;
  requires std::is_trivially_copyable_v<typename G::move>;
  requires std::equality_comparable<typename G::move>;
  { g.initial_state() } -> std::same_as<typename G::state>;
  { g.to_move(s) } -> std::same_as<player>;
  { g.max_moves() } -> std::convertible_to<std::size_t>;
  { g.legal_moves(s, out) } -> std::convertible_to<std::size_t>;
  { g.apply(mutable_state, m) } -> std::same_as<void>;
  { g.winner(s) } -> std::same_as<player>;
  { g.playout(s, rng) } -> std::same_as<player>;
  { g.move_name(m) } -> std::convertible_to<std::string>;
  { g.parse_move(s, text) } -> std::same_as<std::optional<typename G::move>>;
  { g.render(s) } -> std::convertible_to<std::string>;
};

/// Optional: playouts that say who played which move, for all-moves-as-first statistics
/// (RAVE, search_options::rave). `g.move_index(m)` numbers the moves densely in
/// [0, max_moves()). `g.playout(s, rng, played_by)`, with played_by.size() >= max_moves(),
/// plays out from s as `g.playout(s, rng)` does (same distribution, same result) and sets
/// played_by[move_index(m)] to the player of each move m it plays (of its first play, in a game
/// that can repeat a move); the other entries are left as they were.
template <class G>
concept amaf_game = game<G> && requires(const G& g, const typename G::state& s,
                                        const typename G::move& m, random& rng,
                                        std::span<player> played_by) {
  { g.move_index(m) } -> std::convertible_to<std::size_t>;
  { g.playout(s, rng, played_by) } -> std::same_as<player>;
};

/// Optional: one-move threats, for the search's solver (search_options::solver).
/// `g.threats(s, who, out)` writes the legal moves with which `who` would win at once in s if it
/// were `who`'s turn, and returns how many (0 once the game is over). The solver relies on a
/// threat being answerable only by playing on it (true of Hex and other games where stones
/// stay): with a threat of its own the player to move has won; otherwise against one threat it
/// must play there, and against two or more it has lost.
template <class G>
concept solver_game = game<G> && requires(const G& g, const typename G::state& s, player who,
                                          std::span<typename G::move> out) {
  { g.threats(s, who, out) } -> std::convertible_to<std::size_t>;
};

/// What a game's knowledge keeps of a position's moves (pruning_game).
struct pruned {
  std::size_t count = 0;    ///< the moves kept: the first `count` of the span, at least 1
  player decided = nobody;  ///< who wins with best play, where the knowledge proves it
};

/// Optional: knowledge that narrows a node's moves (search_options::knowledge). Given the legal
/// moves of s (the game not over) in `moves`, `g.prune(s, moves)` reorders them so that the
/// ones worth searching come first and returns how many (at least 1), and who wins with best
/// play where it can prove it. A move left out must be provably no better for the player to
/// move than some move kept (for Hex: a dead cell, a captured one). When the player to move
/// wins, moves[0] must be a winning move; when the opponent wins, every move loses and the kept
/// ones are what a root still names.
template <class G>
concept pruning_game = game<G> && requires(const G& g, const typename G::state& s,
                                           std::span<typename G::move> moves) {
  { g.prune(s, moves) } -> std::same_as<pruned>;
};

/// Optional: move priors (search_options::knowledge and prior_bias). Given the moves a node's
/// edges are made of (s not over), `g.priors(s, moves, weights)` writes one weight per move,
/// non-negative and finite, larger for a move more likely to be the best (for Hex: the gammas
/// of trained local patterns). The engines divide them by their sum (equal shares when all
/// are 0) and use the shares as progressive bias and to order first visits.
/// `g.gives_priors()` says whether this game object gives them at all (a game may switch its
/// source off); read once per search: without, edge tables hold no priors.
template <class G>
concept prior_game = game<G> && requires(const G& g, const typename G::state& s,
                                         std::span<const typename G::move> moves,
                                         std::span<float> weights) {
  g.priors(s, moves, weights);
  { g.gives_priors() } -> std::convertible_to<bool>;
};

/// Optional: a Zobrist-style hash of a position (equal positions, equal hashes). With it, the
/// distributed search can place a new node on the thread its hash names (node_placement::hashed,
/// the partitioning of the paper's ref. [25]) instead of on a uniformly random thread.
template <class G>
concept hashed_game = game<G> && requires(const G& g, const typename G::state& s) {
  { g.hash(s) } -> std::convertible_to<std::uint64_t>;
};

}  // namespace seriema::mcts

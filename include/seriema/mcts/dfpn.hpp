// A depth-first proof-number solver (df-pn) for any game of the MCTS framework, using the game's
// knowledge (threats, prune) as the search's expansion does, and a search of either engine run
// beside it on the same position whose first proof ends both (search_beside_solver).
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <seriema/mcts/detail/solver.hpp>
#include <seriema/mcts/game.hpp>
#include <seriema/mcts/search.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace seriema::mcts {

/// How one df-pn solver runs.
struct dfpn_options {
  /// Bytes of the transposition table, kept between solve() calls of one solver (positions
  /// proved for one move stay proved for the next): three quarters for the proof numbers, a
  /// quarter for the moves of expanded positions. At least 1 MiB.
  std::size_t table_bytes = std::size_t{64} << 20;
  /// Seconds one solve() may take (0: no bound); a stop flag may end it earlier.
  double seconds = 0;
  /// Positions one solve() may expand (0: no bound).
  std::uint64_t max_expansions = 0;
  /// Knowledge as the search's: threats (solver_game) and prune() (pruning_game) decide and
  /// narrow positions. Off: legal moves and winner() only (the reference the tests check).
  bool knowledge = true;
  /// The 1 + epsilon trick (Pawlewicz & Lew 2007): a child is searched until its disproof
  /// number passes (1 + epsilon) times the second best's, not just the second best's + 1, so
  /// that the search switches between siblings less often. 0: plain df-pn (Nagai 2002).
  double epsilon = 0.25;
};

/// What one solve() proved of its root: that the player to move there wins, or that it does
/// not (in a game that always ends with a winner: that the opponent wins), or nothing yet.
enum class dfpn_outcome : std::uint8_t { unknown, win, no_win };

/// One solve()'s result.
template <class Move>
struct dfpn_result {
  dfpn_outcome outcome = dfpn_outcome::unknown;  ///< see dfpn_outcome
  Move winning_move{};        ///< with outcome win: a move that wins
  std::uint64_t expansions = 0;  ///< positions expanded by this solve()
  double seconds = 0;         ///< its wall time
};

/// Df-pn (Nagai 2002) in its negamax form over the positions of game G from one root's player
/// (the attacker) to move: each position's pair (phi, delta) is the proof and disproof number of
/// "the player to move reaches its goal" (the attacker's: to win; the defender's: to keep the
/// attacker from winning). A position reaches its goal when one move leads to a position where
/// the other player does not (phi = min of the children's delta, delta = sum of their phi).
/// Positions are keyed by g.hash() and the attacker; the table is a fixed array, two entries
/// per bucket, the one with less work replaced. For games whose positions never repeat (Hex:
/// stones stay); a line longer than max_moves() is not searched. Thread-safety: one solver per
/// thread; the game object is shared as in the engines.
template <game G>
  requires hashed_game<G>
class dfpn_solver {
 public:
  using state = typename G::state;  ///< the game's position
  using move = typename G::move;    ///< the game's move

  /// Throws std::invalid_argument when options.table_bytes is under 1 MiB, seconds is
  /// negative or epsilon is outside [0, 10].
  dfpn_solver(const G& g, dfpn_options options = {}) : g_(g), options_(options) {
    if (options.table_bytes < (std::size_t{1} << 20)) {
      throw std::invalid_argument("dfpn_solver: table_bytes must be at least 1 MiB");
    }
    if (!(options.seconds >= 0) || !(options.epsilon >= 0 && options.epsilon <= 10)) {
      throw std::invalid_argument("dfpn_solver: seconds must be >= 0, epsilon in [0, 10]");
    }
    // Three quarters of the bytes for the numbers, a quarter for the moves of expanded
    // positions.
    const std::size_t numbers_bytes = options.table_bytes / 4 * 3;
    table_.assign(std::bit_floor(numbers_bytes / sizeof(entry)), entry{});
    moves_per_slot_ = g.max_moves();
    const std::size_t slot_bytes =
        moves_per_slot_ * sizeof(move) + sizeof(std::uint64_t) + sizeof(std::uint32_t);
    const std::size_t slots = std::bit_floor(
        std::max<std::size_t>(1, (options.table_bytes - numbers_bytes) / slot_bytes));
    cache_keys_.assign(slots, 0);
    cache_counts_.assign(slots, 0);
    cache_moves_.resize(slots * moves_per_slot_);
    frames_.resize(g.max_moves() + 2);
    for (frame& f : frames_) {
      f.moves.resize(g.max_moves());
      f.keys.resize(g.max_moves());
    }
  }

  /// Proves or disproves `root` (the game not over) for its player to move, until a proof, the
  /// options' budget, or `stop` (set by another thread) ends it.
  dfpn_result<move> solve(const state& root, const std::atomic<bool>* stop = nullptr) {
    const auto start = clock::now();
    attacker_ = g_.to_move(root);
    stop_ = stop;
    out_of_budget_ = false;
    expansions_ = 0;
    has_deadline_ = options_.seconds > 0;
    deadline_ = start + std::chrono::duration_cast<clock::duration>(
                            std::chrono::duration<double>(options_.seconds));
    root_numbers_ = {};
    search(root, 0, infinity - 1, infinity - 1);
    dfpn_result<move> result;
    if (root_numbers_.phi == 0) {
      result.outcome = dfpn_outcome::win;
      result.winning_move = root_move_;
    } else if (root_numbers_.delta == 0) {
      result.outcome = dfpn_outcome::no_win;
    }
    result.expansions = expansions_;
    result.seconds = std::chrono::duration<double>(clock::now() - start).count();
    return result;
  }

  /// Forgets every position (a new game, or another game object's positions).
  void clear() {
    std::fill(table_.begin(), table_.end(), entry{});
    std::fill(cache_keys_.begin(), cache_keys_.end(), 0);
  }
  /// The game whose positions it solves.
  [[nodiscard]] const G& game() const noexcept { return g_; }

 private:
  using clock = std::chrono::steady_clock;
  static constexpr std::uint32_t infinity = 0xffffffff;
  static constexpr std::uint32_t undecided_limit = infinity - 2;  // see exact_when_decided
  // A proof number of a position not yet expanded (df-pn's usual 1).
  static constexpr std::uint32_t unexpanded = 1;

  struct numbers {
    std::uint32_t phi = unexpanded;
    std::uint32_t delta = unexpanded;
  };
  // One bucket slot. key 0 is an empty slot (a position whose key is 0 is stored as 1: a
  // collision costs a re-search, never a wrong proof, as proofs are kept only under their key).
  struct entry {
    std::uint64_t key = 0;
    numbers value;
    std::uint32_t work = 0;  // expansions below it when last stored (saturating)
  };
  // The moves of the position at one depth and their children's keys, reused by every visit
  // at that depth (no allocation while solving).
  struct frame {
    std::vector<move> moves;
    std::vector<std::uint64_t> keys;
  };

  static std::uint32_t saturated_sum(std::uint32_t a, std::uint32_t b) noexcept {
    const std::uint64_t sum = std::uint64_t{a} + b;
    return sum >= infinity ? infinity : static_cast<std::uint32_t>(sum);
  }

  [[nodiscard]] std::uint64_t key_of(const state& s) const noexcept {
    const std::uint64_t salted = g_.hash(s) ^ (attacker_ == 2 ? 0x9e3779b97f4a7c15ULL : 0);
    return salted == 0 ? 1 : salted;
  }
  [[nodiscard]] std::size_t bucket_of(std::uint64_t key) const noexcept {
    return static_cast<std::size_t>(key) & (table_.size() - 2);
  }
  [[nodiscard]] numbers lookup(std::uint64_t key) const noexcept {
    const std::size_t b = bucket_of(key);
    if (table_[b].key == key) return table_[b].value;
    if (table_[b + 1].key == key) return table_[b + 1].value;
    return {};
  }
  void store(std::uint64_t key, numbers value, std::uint64_t work) noexcept {
    const std::size_t b = bucket_of(key);
    entry* slot = &table_[b];
    if (slot->key != key) {
      entry* other = &table_[b + 1];
      slot = other->key == key || other->work < slot->work ? other : slot;
    }
    slot->key = key;
    slot->value = value;
    slot->work = static_cast<std::uint32_t>(std::min<std::uint64_t>(work, infinity));
  }

  // Whether the budget or the stop flag ends the solve (the clock read every 256 expansions).
  bool budget_spent() noexcept {
    if (out_of_budget_) return true;
    if (options_.max_expansions != 0 && expansions_ >= options_.max_expansions) {
      out_of_budget_ = true;
    } else if (stop_ != nullptr && stop_->load(std::memory_order_relaxed)) {
      out_of_budget_ = true;
    } else if (has_deadline_ && expansions_ % 256 == 0 && clock::now() >= deadline_) {
      out_of_budget_ = true;
    }
    return out_of_budget_;
  }

  // A decided position's numbers for its player to move: (0, inf) when that player reaches
  // its goal (the attacker wins, or the defender keeps it from winning), (inf, 0) otherwise.
  [[nodiscard]] numbers decided(const state& s, player winner) const noexcept {
    const bool attacker_moves = g_.to_move(s) == attacker_;
    const bool goal = attacker_moves == (winner == attacker_);
    return goal ? numbers{0, infinity} : numbers{infinity, 0};
  }

  // The moves of s into f (their count), or its numbers when it is decided at once.
  std::size_t expand(const state& s, std::uint64_t key, frame& f, numbers& decided_numbers) {
    ++expansions_;
    std::size_t count = cached_moves(key, f);
    if (count == 0) {
      if (const player w = g_.winner(s); w != nobody || g_.legal_moves(s, f.moves) == 0) {
        decided_numbers = decided(s, w);
        return 0;
      }
      const detail::expansion e =
          detail::moves_to_search(g_, s, std::span<move>(f.moves), options_.knowledge,
                                  options_.knowledge);
      if (e.decided != nobody) {
        decided_numbers = decided(s, e.decided);
        return 0;
      }
      count = e.count;
      cache_moves(key, f, count);
    }
    for (std::size_t i = 0; i < count; ++i) {
      state child = s;
      g_.apply(child, f.moves[i]);
      f.keys[i] = key_of(child);
    }
    return count;
  }

  // The moves kept when the position of `key` was last expanded, copied into f (their count),
  // or 0 when the cache no longer holds them. A position is re-entered each time its parent's
  // thresholds grow; with H-search its expansion costs far more than the copy.
  std::size_t cached_moves(std::uint64_t key, frame& f) const noexcept {
    const std::size_t slot = static_cast<std::size_t>(key) & (cache_keys_.size() - 1);
    if (cache_keys_[slot] != key) return 0;
    const std::size_t count = cache_counts_[slot];
    std::copy_n(cache_moves_.begin() + static_cast<std::ptrdiff_t>(slot * moves_per_slot_),
                count, f.moves.begin());
    return count;
  }
  void cache_moves(std::uint64_t key, const frame& f, std::size_t count) noexcept {
    const std::size_t slot = static_cast<std::size_t>(key) & (cache_keys_.size() - 1);
    cache_keys_[slot] = key;
    cache_counts_[slot] = static_cast<std::uint32_t>(count);
    std::copy_n(f.moves.begin(), count,
                cache_moves_.begin() + static_cast<std::ptrdiff_t>(slot * moves_per_slot_));
  }

  // Df-pn's multiple iterative deepening at s: searches below it until its phi reaches
  // threshold_phi or its delta threshold_delta (or the budget ends), then stores its numbers.
  void search(const state& s, std::size_t depth, std::uint32_t threshold_phi,
              std::uint32_t threshold_delta) {
    const std::uint64_t key = key_of(s);
    // The root is always expanded: its winning move is read from its children, which the
    // table may have lost since it was proved.
    if (const numbers known = lookup(key);
        depth > 0 && (known.phi >= threshold_phi || known.delta >= threshold_delta)) {
      return;
    }
    if (depth + 1 >= frames_.size()) out_of_budget_ = true;  // a line longer than any game
    if (budget_spent()) return;
    const std::uint64_t expansions_before = expansions_;
    frame& f = frames_[depth];
    numbers own;
    const std::size_t count = expand(s, key, f, own);
    if (count == 0) {
      store(key, own, 1);
      if (depth == 0) {  // a root decided at once: moves_to_search put its win first
        root_numbers_ = own;
        root_move_ = f.moves[0];
      }
      return;
    }
    std::size_t best = 0;  // the child searched last: once s is proved, one that wins
    for (;;) {
      best = 0;
      std::uint32_t best_phi = 0;
      std::uint32_t delta1 = infinity;  // the smallest child delta, and the second smallest
      std::uint32_t delta2 = infinity;
      own = {infinity, 0};
      for (std::size_t i = 0; i < count; ++i) {
        const numbers c = lookup(f.keys[i]);
        own.delta = saturated_sum(own.delta, c.phi);
        if (c.delta < delta1) {
          delta2 = delta1;
          delta1 = c.delta;
          best = i;
          best_phi = c.phi;
        } else if (c.delta < delta2) {
          delta2 = c.delta;
        }
      }
      own.phi = delta1;
      exact_when_decided(own);
      if (own.phi >= threshold_phi || own.delta >= threshold_delta || budget_spent()) break;
      // The child's thresholds: its delta may grow until the node's phi would pass its own
      // threshold or the second child would be better; its phi until the node's delta would.
      const auto widened = static_cast<std::uint64_t>(
          static_cast<double>(delta2) * (1.0 + options_.epsilon));
      const std::uint32_t child_delta = static_cast<std::uint32_t>(std::min<std::uint64_t>(
          threshold_phi, std::max<std::uint64_t>(std::uint64_t{delta2} + 1, widened)));
      const std::uint32_t child_phi = threshold_delta - (own.delta - best_phi);
      state child = s;
      g_.apply(child, f.moves[best]);
      search(child, depth + 1, child_phi, child_delta);
    }
    if (!out_of_budget_ || own.phi == 0 || own.delta == 0) {
      store(key, own, expansions_ - expansions_before + 1);
    }
    if (depth == 0) {
      root_numbers_ = own;
      // best has delta 0 when the root is proved (read before the store above could evict
      // it from the table).
      if (own.phi == 0) root_move_ = f.moves[best];
    }
  }

  // Infinity means decided, and only decided: a proved position is (0, infinity) and a
  // disproved one (infinity, 0) exactly, and an undecided one's sum stays below infinity - 1
  // (the root's thresholds), so that a large sum never reads as a child's proof.
  static void exact_when_decided(numbers& n) noexcept {
    if (n.phi == 0) {
      n.delta = infinity;
    } else if (n.delta == 0) {
      n.phi = infinity;
    } else {
      n.delta = std::min(n.delta, undecided_limit);
    }
  }

  const G& g_;
  dfpn_options options_;
  std::vector<entry> table_;
  std::vector<frame> frames_;  // by depth from the root
  // The moves-of-expanded-positions cache (cached_moves): one slot per key's low bits, the
  // last position stored there wins; slot i's moves at [i * moves_per_slot_, + count).
  std::size_t moves_per_slot_ = 0;
  std::vector<std::uint64_t> cache_keys_;
  std::vector<std::uint32_t> cache_counts_;
  std::vector<move> cache_moves_;
  player attacker_ = 1;
  const std::atomic<bool>* stop_ = nullptr;
  bool out_of_budget_ = false;
  bool has_deadline_ = false;
  clock::time_point deadline_;
  std::uint64_t expansions_ = 0;
  numbers root_numbers_;  // the root's numbers when its search last ended
  move root_move_{};  // the root's last best move (its winning move once it is proved)
};

/// Whether every game of G ends with a winner: G::decisive, a static constexpr bool, is true
/// (Hex). A df-pn no_win is then the opponent's win.
template <class G>
concept decisive_game = game<G> && requires { requires G::decisive; };

/// A search and the proof of the solver that ran beside it (search_beside_solver).
template <class Move>
struct search_and_proof {
  search_result<Move> search;  ///< the search's result, with the solver's proof applied
  dfpn_result<Move> proof;     ///< what the solver found meanwhile
  /// Whether search.proven_winner is the solver's proof (false: none, or the search's own).
  bool proof_applied = false;
};

/// Runs `search(options)`, an engine's search of `position` (a callable taking the options and
/// returning a search_result), while `solver` works on the same position on a thread of its
/// own. The first to end decides. A proof of the solver ends the search (it sets options.stop,
/// which must be null on entry) and is applied to the result unless the search proved the root
/// itself: proven_winner, and when the player to move wins, best the winning move (first of
/// moves) and win_rate 1. A no_win is a proof only in a decisive_game. A search that ends
/// first stops the solver. An exception of either is rethrown here once both have ended.
template <game G, class Search>
  requires hashed_game<G>
search_and_proof<typename G::move> search_beside_solver(dfpn_solver<G>& solver,
                                                        const typename G::state& position,
                                                        search_options options,
                                                        Search&& search) {
  if (options.stop != nullptr) {
    throw std::invalid_argument("search_beside_solver: options.stop is the solver's to set");
  }
  std::atomic<bool> solver_proved{false};
  std::atomic<bool> search_ended{false};
  search_and_proof<typename G::move> out;
  std::exception_ptr solver_failure;
  std::thread beside([&] {
    try {
      out.proof = solver.solve(position, &search_ended);
    } catch (...) {
      solver_failure = std::current_exception();
    }
    const bool proof = out.proof.outcome == dfpn_outcome::win ||
                       (out.proof.outcome == dfpn_outcome::no_win && decisive_game<G>);
    if (proof) solver_proved.store(true, std::memory_order_relaxed);
  });
  options.stop = &solver_proved;
  try {
    out.search = std::forward<Search>(search)(options);
  } catch (...) {
    search_ended.store(true, std::memory_order_relaxed);
    beside.join();
    throw;
  }
  search_ended.store(true, std::memory_order_relaxed);
  beside.join();
  if (solver_failure) std::rethrow_exception(solver_failure);
  search_result<typename G::move>& result = out.search;
  const player mover = solver.game().to_move(position);
  if (result.proven_winner != nobody) return out;
  if (out.proof.outcome == dfpn_outcome::win) {
    result.proven_winner = mover;
    detail::put_proven_move_first(result, out.proof.winning_move);
    result.win_rate = 1.0;
    out.proof_applied = true;
  } else if (out.proof.outcome == dfpn_outcome::no_win && decisive_game<G>) {
    result.proven_winner = opponent(mover);
    out.proof_applied = true;
  }
  return out;
}

}  // namespace seriema::mcts

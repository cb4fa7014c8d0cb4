// The all-moves-as-first record of one rollout (RAVE): who played each move below a node and
// how those playouts ended, gathered from recording playouts and carried up the tree.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <seriema/mcts/game.hpp>
#include <seriema/mcts/search.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace seriema::mcts::detail {

/// Over the K playouts of one rollout, per move index i and player p (1 or 2): in how many
/// playouts p played i first (`played`), and the points p scored in those playouts (`points`,
/// half wins: a win is 2, a draw 1). Going up, each tree move overwrites its entry (it came
/// before everything recorded below it, so it is its move's first play in all K playouts).
/// Four arrays of 16-bit words, in one vector so that a rollout's record travels between
/// processes as one buffer: played[1], played[2], points[1], points[2]. 16 bits hold K playouts
/// for K <= 32767 (points reach 2K); search validation refuses RAVE with a larger K.
/// Owned by one worker thread (or one sequential search); never shared.
class amaf_record {
 public:
  static constexpr std::uint32_t max_playouts = 0x7fff;  ///< largest K the words can count

  /// A record for games of `moves` move indices (max_moves()).
  void resize(std::size_t moves) {
    moves_ = moves;
    words_.assign(4 * moves, 0);
    played_by_.assign(moves, nobody);
  }
  /// Forgets the previous rollout.
  void clear() noexcept { std::fill(words_.begin(), words_.end(), std::uint16_t{0}); }

  /// One recording playout of game g from s; returns its winner.
  template <amaf_game G, class Random>
  player play(const G& g, const typename G::state& s, Random& rng) {
    std::fill(played_by_.begin(), played_by_.end(), nobody);
    const player winner = g.playout(s, rng, std::span<player>(played_by_));
    for (std::size_t i = 0; i < moves_; ++i) {
      const player p = played_by_[i];
      if (p == nobody) continue;
      ++played(p)[i];
      points(p)[i] = static_cast<std::uint16_t>(points(p)[i] + result_points(winner, p));
    }
    return winner;
  }
  /// Move index i was played by p above everything recorded, in all `games` playouts of the
  /// rollout, in which p scored `points_of_p` half wins.
  void play_in_tree(std::size_t i, player p, std::uint32_t games, std::uint32_t points_of_p) {
    played(p)[i] = static_cast<std::uint16_t>(games);
    points(p)[i] = static_cast<std::uint16_t>(points_of_p);
    played(opponent(p))[i] = 0;
    points(opponent(p))[i] = 0;
  }
  /// Playouts of the record in which p played move index i.
  [[nodiscard]] std::uint32_t played_by(player p, std::size_t i) const noexcept {
    return words_[(p - 1) * moves_ + i];
  }
  /// p's points (half wins) in the playouts in which p played move index i.
  [[nodiscard]] std::uint32_t points_of(player p, std::size_t i) const noexcept {
    return words_[(p + 1) * moves_ + i];
  }
  /// The record as bytes (to send), and back (a record received: false if the size is wrong).
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept {
    return std::as_bytes(std::span<const std::uint16_t>(words_));
  }
  [[nodiscard]] bool assign(std::span<const std::byte> bytes) noexcept {
    if (bytes.size() != words_.size() * sizeof(std::uint16_t)) return false;
    std::copy(bytes.begin(), bytes.end(), std::as_writable_bytes(std::span(words_)).begin());
    return true;
  }

  /// A playout's points for p: 2 for a win, 1 for a draw.
  static std::uint32_t result_points(player winner, player p) noexcept {
    return winner == p ? 2 : winner == nobody ? 1 : 0;
  }

 private:
  std::uint16_t* played(player p) noexcept { return words_.data() + (p - 1) * moves_; }
  std::uint16_t* points(player p) noexcept { return words_.data() + (p + 1) * moves_; }

  std::size_t moves_ = 0;
  std::vector<std::uint16_t> words_;
  std::vector<player> played_by_;  ///< one playout's, scratch
};

/// Refuses options the game or the record cannot serve (RAVE without recording playouts).
template <game G>
void check_rave(const search_options& options, const char* engine) {
  if (!options.rave) return;
  if constexpr (!amaf_game<G>) {
    throw std::invalid_argument(std::string(engine) +
                                ": rave needs a game whose playouts record their moves "
                                "(seriema::mcts::amaf_game)");
  }
  if (options.playouts_per_leaf > amaf_record::max_playouts) {
    throw std::invalid_argument(std::string(engine) +
                                ": rave counts at most 32767 playouts per leaf");
  }
}

}  // namespace seriema::mcts::detail

// Hex, the reference game specification of the MCTS framework (seriema::mcts::game): boards of
// 2x2 to 19x19, stones packed in bit sets, fill-the-board playouts, optional swap rule, move
// names as in Hex programs ("a1" is the top-left corner; the letter is the column, the number
// the row).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <seriema/mcts/game.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace seriema::hex {

using mcts::player;

// How a playout chooses its moves. random: the empty cells shared by alternate turns, every
// split equally likely. bridges: moves one at a time, alternately; a move into the carrier of a
// bridge of the player then to move (the two empty cells two of their stones share as
// neighbours) is answered in the other carrier cell, any other move by a uniformly random empty
// cell. Bridges to the edge are not answered. patterns: moves one at a time, alternately, each
// empty cell drawn with a probability proportional to the gamma of its pattern feature as the
// mover sees it (pattern_features_of: its ring of six neighbours and its place next to the move
// before), the weights the pattern priors give the tree.
enum class playout_policy : std::uint8_t { random, bridges, patterns };

// The Hex knowledge hex::prune uses (mcts::pruning_game, search_options::knowledge), each
// source switchable (seriema-hex --no-<name>).
struct knowledge_sources {
  // Dead and captured cells (inferior.cpp): never searched, and the position after filling
  // them in decides a node whose filled board already joins a player's edges.
  bool inferior_cells = true;
  // Move priors from local patterns (patterns.cpp): a move's ring of six neighbours and its
  // place next to the last move, weighed by gammas trained on self-play (train_patterns.py).
  // Off by default: at equal time they have not yet won more games than they cost in speed
  // (docs/mcts.md, "Pattern priors").
  bool pattern_priors = false;
  // Virtual connections (vc.cpp): a position where H-search finds the player to move a semi
  // connection between its edges, or the opponent a full one, is decided. Off by default: two
  // H-searches per expanded node cost more rollouts than they save at equal time so far
  // (docs/mcts.md, "Virtual connections").
  bool virtual_connections = false;
  // Must-play (vc.cpp): against the opponent's semi connections between its edges only the
  // cells in every one of their carriers are searched (none: the position is lost). Off by
  // default, as virtual_connections.
  bool must_play = false;

  friend bool operator==(const knowledge_sources&, const knowledge_sources&) = default;
};

// Player 1 (black, moves first) joins the top and bottom rows; player 2 (white) joins the left
// and right columns. Cell (r, c) touches (r, c-1), (r, c+1), (r-1, c), (r+1, c), (r-1, c+1) and
// (r+1, c-1).
class hex {
 public:
  static constexpr int min_size = 2;
  static constexpr int max_size = 19;
  static constexpr int default_size = 11;
  // Every game ends with a winner (mcts::decisive_game): a filled board joins one player's
  // edges.
  static constexpr bool decisive = true;

  // row * size + column for a cell; swap_move for the swap (second move only, swap rule on).
  using move = std::uint16_t;
  static constexpr move swap_move = 0xfffe;
  static constexpr move no_move = 0xffff;  // state::last_move before any move, and after place()

  // The cells of a board as a set of bits: cell (r, c) of a size x size board is bit
  // r * size + c (its move value), word i / 64, bit i % 64; bits from size * size on are 0.
  static constexpr int cell_words = (max_size * max_size + 63) / 64;
  using cell_set = std::array<std::uint64_t, cell_words>;

  // A position. Player p's stones are stones[p-1] (a cell_set: 2 x 48 bytes whatever the board
  // size, where rows of 32 bits took 2 x 76). Trivially copyable: it travels between threads
  // and machines as bytes.
  struct state {
    std::array<cell_set, 2> stones{};
    std::uint16_t moves_played = 0;
    // The move that made this position (apply), for the bridges playout's first answer; not
    // part of the position: hash() and winner() ignore it.
    move last_move = no_move;
    std::uint8_t size = default_size;
    player to_move = 1;
    bool swapped = false;  // the swap move was played
    // The same position: stones, side to move, size, swap; last_move is not compared (two
    // move orders reaching one position are one position, as for hash()).
    friend bool operator==(const state& a, const state& b) noexcept {
      return a.stones == b.stones && a.moves_played == b.moves_played && a.size == b.size &&
             a.to_move == b.to_move && a.swapped == b.swapped;
    }
  };

  // What inferior-cell analysis finds in a position (inferior_cells()). A cell is dead when
  // no minimal set of cells that would join a player's edges contains it: its colour never
  // matters. A pair of adjacent empty cells is captured by p when p's stone on either makes
  // the other dead: p answers a move on one with the other, so the pair may count as p's. Both
  // are found by patterns on a cell's six neighbours (an edge counts as a stone of its player)
  // and filled in, dead cells with black stones, captured ones with their captor's, again and
  // again until nothing more is found; the filled board has the value of the position.
  struct inferior_analysis {
    cell_set dead{};                     // empty cells found dead
    std::array<cell_set, 2> captured{};  // captured[p-1]: empty cells found captured by p
    state filled;                        // the position with those cells filled in
    player winner = mcts::nobody;        // who the filled board joins (wins with best play)
  };

  // What H-search (vc.cpp) finds between a player's two edges: full connections (the player
  // joins its edges whatever the opponent plays, moving second) and semi ones (it joins them
  // by first playing the key). H-search is sound but not complete: a connection it reports
  // holds, one it misses may still exist. Carriers are sets of empty cells.
  struct edge_connection_analysis {
    player who = mcts::nobody;
    bool full = false;         // a full connection was found
    cell_set full_carrier{};   // the smallest one's carrier
    std::size_t semis = 0;     // semi connections kept (at most 8, smallest carriers first)
    move key = no_move;        // the smallest semi connection's key, and its carrier
    cell_set semi_carrier{};
    cell_set must_play{};      // the cells common to every kept semi's carrier (keys included)
  };

  // Throws std::invalid_argument naming the size when it is outside [2, 19].
  explicit hex(int size = default_size, bool swap_rule = false,
               playout_policy policy = playout_policy::random,
               knowledge_sources knowledge = {});

  [[nodiscard]] int size() const noexcept { return size_; }
  [[nodiscard]] bool swap_rule() const noexcept { return swap_rule_; }
  [[nodiscard]] playout_policy policy() const noexcept { return policy_; }
  [[nodiscard]] knowledge_sources knowledge() const noexcept { return knowledge_; }

  // --- seriema::mcts::game ---
  [[nodiscard]] state initial_state() const noexcept;
  [[nodiscard]] player to_move(const state& s) const noexcept { return s.to_move; }
  [[nodiscard]] std::size_t max_moves() const noexcept;  // size*size (+1 with the swap rule)
  std::size_t legal_moves(const state& s, std::span<move> out) const noexcept;
  void apply(state& s, move m) const noexcept;  // m must be legal
  [[nodiscard]] player winner(const state& s) const noexcept;
  [[nodiscard]] player playout(const state& s, mcts::random& rng) const noexcept;

  // --- seriema::mcts::amaf_game ---
  // A cell's index is its move value (row * size + column); the swap's is size * size.
  [[nodiscard]] std::size_t move_index(move m) const noexcept {
    return m == swap_move ? static_cast<std::size_t>(size_ * size_) : m;
  }
  // Plays out exactly as playout(s, rng) does (equal generator states: the same draws, the same
  // winner) and sets played_by[move_index(m)] to the player of every cell m it fills. Entries of
  // cells occupied in s, and the swap's, are left as they were. played_by.size() >= max_moves().
  [[nodiscard]] player playout(const state& s, mcts::random& rng,
                               std::span<player> played_by) const noexcept;
  [[nodiscard]] std::string move_name(move m) const;
  [[nodiscard]] std::optional<move> parse_move(const state& s, std::string_view text) const;
  [[nodiscard]] std::string render(const state& s) const;
  [[nodiscard]] std::uint64_t hash(const state& s) const noexcept;  // Zobrist
  // --- seriema::mcts::solver_game ---
  // The empty cells on which `who` would win at once, whoever is to move (threats.cpp); none
  // once the game is over, and none while the swap is available (the second move of a game
  // with the swap rule), when the swap too would answer a threat.
  std::size_t threats(const state& s, player who, std::span<move> out) const noexcept;
  // --- seriema::mcts::pruning_game ---
  // Keeps the moves knowledge does not prove inferior (with inferior_cells: the cells empty
  // after inferior_cells() filled in the others) and says who wins when the filled board joins
  // a player's edges. A winner to move keeps one move, a cell it captured where there is one
  // (every move of it wins); a loser keeps the empty cells. Then, with virtual_connections and
  // must_play, H-search on the filled board (connection_pruned): the mover's semi or full
  // connection between its edges wins (its key kept), the opponent's full one loses, and
  // against the opponent's semi ones only the must-play cells are kept. Prunes nothing while
  // the swap is available or with no knowledge source on.
  mcts::pruned prune(const state& s, std::span<move> moves) const noexcept;
  // --- seriema::mcts::prior_game (patterns.cpp) ---
  // Each move's gamma: the weight trained for its pattern feature (1 for the swap).
  void priors(const state& s, std::span<const move> moves,
              std::span<float> weights) const noexcept;
  [[nodiscard]] bool gives_priors() const noexcept { return knowledge_.pattern_priors; }
  // --- knowledge, for the search and for tests (inferior.cpp, patterns.cpp) ---
  [[nodiscard]] inferior_analysis inferior_cells(const state& s) const noexcept;
  // `who`'s virtual connections between its edges in s (not over), by H-search (vc.cpp).
  [[nodiscard]] edge_connection_analysis edge_connections(const state& s, player who) const;
  // The carriers of the full connections H-search keeps between the chain of `who` through
  // the stone `from` and edge `edge` of `who` (0: top or left, 1: bottom or right); none when
  // `from` is not a stone of `who` or its chain touches an edge (then it is an edge's
  // connection: edge_connections).
  [[nodiscard]] std::vector<cell_set> full_connections(const state& s, player who, move from,
                                                       int edge) const;
  // A move's pattern feature: its ring of six neighbours as the player to move sees it (for
  // white the board transposed and the colours swapped, so that the mover joins top and
  // bottom), the same feature as the ring turned half a turn, times 3, plus where it lies
  // from the last move (0: elsewhere, 1: a neighbour, 2: a bridge away). pattern_features of
  // them; the swap has none (no_feature). The two obtuse corner cells see the point outside
  // the corner as black whoever moves, so there the two players' features differ.
  static constexpr std::uint32_t pattern_features = 4096 * 3;
  static constexpr std::uint32_t no_feature = pattern_features;
  void pattern_features_of(const state& s, std::span<const move> moves,
                           std::span<std::uint32_t> out) const noexcept;

  // --- for people, programs and tests ---
  [[nodiscard]] player cell(const state& s, int row, int column) const noexcept;  // 0 if empty
  [[nodiscard]] move at(int row, int column) const noexcept {
    return static_cast<move>(row * size_ + column);
  }
  // Parses a cell name ("b3": column 2, row 3) whether or not it is empty in any position.
  [[nodiscard]] std::optional<move> parse_cell(std::string_view text) const;
  // Places a stone of `who` on an empty cell without changing whose turn it is (set-up of
  // hand-made positions; last_move becomes no_move); false if the cell is occupied or out of
  // the board.
  bool place(state& s, int row, int column, player who) const noexcept;
  // Whether `who` has a chain joining their two edges.
  [[nodiscard]] bool connected(const state& s, player who) const noexcept;
  // The number of empty cells on the board.
  [[nodiscard]] int empty_cells(const state& s) const noexcept;

 private:
  // prune's virtual-connection and must-play part, on the board inferior-cell analysis filled
  // (moves: its empty cells).
  mcts::pruned connection_pruned(const state& filled, std::span<move> moves) const noexcept;
  // Whether `s` is the second move of a game with the swap rule, after a single stone.
  [[nodiscard]] bool swap_available(const state& s) const noexcept;
  // The playouts' recorders (hex.cpp): one that records nothing, one that writes a span.
  struct no_record;
  struct record_into;
  // The random policy's filling, both playouts' one implementation.
  template <class Recorder>
  player random_fill(const state& s, mcts::random& rng, Recorder record) const noexcept;
  // The bridges policy's move-by-move filling, both playouts' one implementation.
  template <class Recorder>
  player bridge_fill(const state& s, mcts::random& rng, Recorder record) const noexcept;
  // The patterns policy's filling (patterns.cpp), both playouts' one implementation: the
  // player of each filled cell goes to played_by[cell] unless played_by is null.
  player pattern_fill(const state& s, mcts::random& rng, player* played_by) const noexcept;

  int size_;
  bool swap_rule_;
  playout_policy policy_;
  knowledge_sources knowledge_;
  std::uint32_t row_mask_;
  cell_set board_mask_{};  // the size * size cells
  // Player p's key of cell (r, c) is zobrist_[p-1][r * size + c] (the keys of a 19x19 table
  // drawn row by row, so a cell's key does not depend on the board size).
  std::array<std::array<std::uint64_t, max_size * max_size>, 2> zobrist_{};
};

static_assert(mcts::hashed_game<hex>);
static_assert(mcts::solver_game<hex>);
static_assert(mcts::amaf_game<hex>);
static_assert(mcts::pruning_game<hex>);
static_assert(mcts::prior_game<hex>);
// A position travels in every remote call of a distributed search and sits in every node of
// its tree: keep it small (2 x 48 bytes of stones and 7 of fields, padded to 104).
static_assert(sizeof(hex::state) <= 104);

}  // namespace seriema::hex

// hex::inferior_cells and hex::prune (hex.hpp): dead and captured cells, found by patterns on
// each empty cell's ring of six neighbours and filled in until nothing more is found.
#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

#include "bitboard.hpp"
#include "hex.hpp"
#include "ring_board.hpp"

namespace seriema::hex {
namespace {

constexpr std::uint8_t empty = 0;  // a cell's byte: empty, or the player (1, 2) whose it is

// What a ring says of its cell: dead, and for each player p the empty neighbours that p's stone
// would make the cell dead with (bit d of killed_by[p-1]).
struct ring_facts {
  bool dead = false;
  std::array<std::uint8_t, 2> killed_by{};
};

using ring_labels = std::array<std::uint8_t, ring_size>;

// Whether the arc of the ring strictly between directions `from` and `to` (going up from
// `from`) holds only p's stones.
bool arc_all_of(const ring_labels& ring, int from, int to, player p) {
  for (int d = (from + 1) % ring_size; d != to; d = (d + 1) % ring_size) {
    if (ring[static_cast<std::size_t>(d)] != p) return false;
  }
  return true;
}

// Whether the cell is useless to p: a chain of p through it enters and leaves by two
// neighbours not of p's opponent; when every two such neighbours touch (adjacent in the ring) or
// are joined around the ring by p's stones alone, the chain does without the cell, so no
// minimal joining set of p holds it.
bool useless_to(const ring_labels& ring, player p) {
  const player other = mcts::opponent(p);
  for (int i = 0; i < ring_size; ++i) {
    if (ring[static_cast<std::size_t>(i)] == other) continue;
    for (int j = i + 2; j < ring_size; ++j) {
      // Directions 0 and 5 touch (the ring closes), like i and i + 1.
      if (ring[static_cast<std::size_t>(j)] == other || (i == 0 && j == ring_size - 1)) continue;
      if (!arc_all_of(ring, i, j, p) && !arc_all_of(ring, j, i, p)) return false;
    }
  }
  return true;
}

bool dead_ring(const ring_labels& ring) { return useless_to(ring, 1) && useless_to(ring, 2); }

ring_facts facts_of(std::size_t code) {
  ring_labels ring{};
  for (std::size_t d = 0; d < ring_size; ++d) {
    ring[d] = static_cast<std::uint8_t>(code >> 2 * d & 3);
  }
  ring_facts facts;
  if (std::find(ring.begin(), ring.end(), 3) != ring.end()) return facts;  // no such ring
  facts.dead = dead_ring(ring);
  for (std::size_t d = 0; d < ring_size; ++d) {
    if (ring[d] != empty) continue;
    for (player p = 1; p <= 2; ++p) {
      ring_labels with = ring;
      with[d] = p;
      if (dead_ring(with)) facts.killed_by[p - 1] |= static_cast<std::uint8_t>(1u << d);
    }
  }
  return facts;
}

// Every ring's facts, computed once (4096 rings, 3 bytes each).
const std::array<ring_facts, ring_codes>& ring_table() {
  static const auto table = [] {
    std::array<ring_facts, ring_codes> t{};
    for (std::size_t code = 0; code < ring_codes; ++code) t[code] = facts_of(code);
    return t;
  }();
  return table;
}

}  // namespace

hex::inferior_analysis hex::inferior_cells(const state& s) const noexcept {
  const auto& table = ring_table();
  inferior_analysis found;
  found.filled = s;
  fill_board board(*this, s);
  const auto fill = [&](int r, int c, player p, cell_set& into) {
    board.set(fill_board::grid(r, c), p);
    insert(into, at(r, c));
    insert(found.filled.stones[p - 1], at(r, c));
  };
  // Each fill keeps every finding before it true (a dead cell stays dead, a captured pair stays
  // captured, whatever stones are added around it), so the scan fills as it goes.
  for (bool grew = true; grew;) {
    grew = false;
    for (int r = 0; r < size_; ++r) {
      for (int c = 0; c < size_; ++c) {
        const int cell = fill_board::grid(r, c);
        if (board.at(cell) != empty) continue;
        const ring_facts& facts = table[board.ring_code(cell)];
        if (facts.dead) {
          fill(r, c, 1, found.dead);
          grew = true;
          continue;
        }
        for (player p = 1; p <= 2 && board.at(cell) == empty; ++p) {
          for (unsigned bits = facts.killed_by[p - 1]; bits != 0; bits &= bits - 1) {
            const int d = std::countr_zero(bits);
            const int other = fill_board::neighbour(cell, d);
            const unsigned back = (static_cast<unsigned>(d) + 3) % ring_size;
            if ((table[board.ring_code(other)].killed_by[p - 1] >> back & 1) == 0) continue;
            fill(r, c, p, found.captured[p - 1]);
            fill(r + ring_rows[static_cast<std::size_t>(d)],
                 c + ring_columns[static_cast<std::size_t>(d)], p, found.captured[p - 1]);
            grew = true;
            break;
          }
        }
      }
    }
  }
  found.winner = winner(found.filled);
  return found;
}

namespace {

// Moves `m` to the front of `moves` where it is one of them.
void put_first(std::span<hex::move> moves, hex::move m) {
  const auto at = std::find(moves.begin(), moves.end(), m);
  if (at != moves.end()) std::iter_swap(moves.begin(), at);
}

// The first cell of a set (a move value), or hex::no_move for an empty set.
hex::move first_cell(const hex::cell_set& cells) {
  for (std::size_t w = 0; w < cells.size(); ++w) {
    if (cells[w] != 0) return static_cast<hex::move>(w * 64 + std::countr_zero(cells[w]));
  }
  return hex::no_move;
}

}  // namespace

mcts::pruned hex::prune(const state& s, std::span<move> moves) const noexcept {
  const bool connections = knowledge_.virtual_connections || knowledge_.must_play;
  if (!(knowledge_.inferior_cells || connections) || swap_available(s)) {
    return {moves.size(), mcts::nobody};
  }
  inferior_analysis found;
  if (knowledge_.inferior_cells) {
    found = inferior_cells(s);
  } else {
    found.filled = s;
  }
  const player mover = to_move(s);
  if (found.winner == mover) {
    // Any move wins (a stone never hurts its owner in Hex); one of the mover's captured cells,
    // which its filled-in connection runs through, is the move that reads as finishing it.
    const cell_set& own = found.captured[mover - 1];
    const auto finishing = std::find_if(moves.begin(), moves.end(),
                                        [&](move m) { return m != swap_move && contains(own, m); });
    if (finishing != moves.end()) std::iter_swap(moves.begin(), finishing);
    return {1, mover};
  }
  const cell_set& filled_black = found.filled.stones[0];
  const cell_set& filled_white = found.filled.stones[1];
  const auto still_empty = [&](move m) {
    return m == swap_move || (!contains(filled_black, m) && !contains(filled_white, m));
  };
  // The order within either part does not matter: the engines shuffle a node's edges.
  const auto kept = std::partition(moves.begin(), moves.end(), still_empty);
  auto count = static_cast<std::size_t>(kept - moves.begin());
  // A filled board with no empty cell has a winner; every move is kept then (all lose, and a
  // root still names one).
  if (count == 0) count = moves.size();
  if (found.winner != mcts::nobody || !connections) return {count, found.winner};
  return connection_pruned(found.filled, moves.first(count));
}

// Virtual connections on the filled board (whose value is the position's, and whose empty
// cells are the moves kept): the mover's semi or full connection wins at its key (any move of
// the mover keeps a full one); the opponent's full connection loses every move; against the
// opponent's semi connections only the cells common to all their carriers are kept (a move
// outside one carrier leaves that semi connection, whose key then wins), and none loses.
mcts::pruned hex::connection_pruned(const state& filled, std::span<move> moves) const noexcept {
  const player mover = to_move(filled);
  const player other = mcts::opponent(mover);
  if (knowledge_.virtual_connections) {
    const edge_connection_analysis mine = edge_connections(filled, mover);
    if (mine.semis > 0 || mine.full) {
      put_first(moves, mine.semis > 0 ? mine.key : first_cell(mine.full_carrier));
      return {1, mover};
    }
  }
  const edge_connection_analysis theirs = edge_connections(filled, other);
  if (knowledge_.virtual_connections && theirs.full) return {moves.size(), other};
  if (!knowledge_.must_play || theirs.semis == 0) return {moves.size(), mcts::nobody};
  const auto inside = std::partition(moves.begin(), moves.end(), [&](move m) {
    return m != swap_move && contains(theirs.must_play, m);
  });
  const auto count = static_cast<std::size_t>(inside - moves.begin());
  if (count == 0) {
    return {moves.size(), knowledge_.virtual_connections ? other : mcts::nobody};
  }
  return {count, mcts::nobody};
}

}  // namespace seriema::hex

// Hex (hex.hpp): the rules on packed cell sets and bitboard rows, the fill-the-board playout,
// move names, the text board and the Zobrist hash.
#include "hex.hpp"

#include "bitboard.hpp"

#include <bit>
#include <stdexcept>
#include <string>
#include <utility>

namespace seriema::hex {
namespace {

// splitmix64's finalizer: a well-mixed 64-bit key from a small number.
constexpr std::uint64_t mix(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
constexpr std::uint64_t zobrist_seed = 0x4865785a6f627269ULL;  // "HexZobri"
constexpr std::uint64_t second_to_move_key = mix(0x5365636f6e64ULL);

int popcount(const hex::cell_set& cells) noexcept {
  int count = 0;
  for (const std::uint64_t word : cells) count += std::popcount(word);
  return count;
}

// The bridges playout's board: one byte per cell on a grid with a border of off-board cells, so
// a cell's six neighbours are fixed offsets, and the empty cells as a list with O(1) removal
// (empty_ holds them in no order; position_ says where each empty cell sits in it). Lives on the
// playout's stack: no allocation. Cells are grid indices (row + 1) * stride + column + 1.
class padded_board {
 public:
  static constexpr int stride = hex::max_size + 2;
  static constexpr std::uint8_t off_board = 3;  // neither player's, never empty

  // The empty cells are listed row by row, each row from column 0 up (the draws of a playout
  // depend on this order).
  padded_board(const board_rows& black_rows, const board_rows& white_rows, int size) noexcept {
    cells_.fill(off_board);
    const std::uint32_t row_mask = (std::uint32_t{1} << size) - 1;
    for (int r = 0; r < size; ++r) {
      const std::uint32_t black = black_rows[static_cast<std::size_t>(r)];
      const std::uint32_t white = white_rows[static_cast<std::size_t>(r)];
      std::uint8_t* row = &cells_[static_cast<std::size_t>(grid_cell(r, 0))];
      for (int c = 0; c < size; ++c) {
        row[c] = static_cast<std::uint8_t>((black >> c & 1) | (white >> c & 1) << 1);
      }
      for (std::uint32_t free = row_mask & ~(black | white); free != 0; free &= free - 1) {
        const int cell = grid_cell(r, std::countr_zero(free));
        position_[static_cast<std::size_t>(cell)] = static_cast<std::uint16_t>(count_);
        empty_[count_++] = static_cast<std::uint16_t>(cell);
      }
    }
  }
  static int grid_cell(int row, int column) noexcept { return (row + 1) * stride + column + 1; }
  static int row_of(int cell) noexcept { return cell / stride - 1; }
  static int column_of(int cell) noexcept { return cell % stride - 1; }

  [[nodiscard]] std::uint32_t empty_count() const noexcept { return count_; }
  [[nodiscard]] player at(int cell) const noexcept {
    return cells_[static_cast<std::size_t>(cell)];
  }
  [[nodiscard]] int random_empty(mcts::random& rng) const noexcept {
    return empty_[rng.below(count_)];
  }
  // `who` takes the empty `cell`: the list's last cell moves into its place.
  void play(int cell, player who) noexcept {
    const std::uint16_t slot = position_[static_cast<std::size_t>(cell)];
    const std::uint16_t last = empty_[--count_];
    empty_[slot] = last;
    position_[last] = slot;
    cells_[static_cast<std::size_t>(cell)] = who;
  }
  // The answer of `who` to the opponent's stone at `intrusion`, or -1 if it touches no bridge
  // of theirs. The six neighbours in cyclic order are n0..n5; n(j-1) and n(j+1) are at bridge
  // distance with common neighbours `intrusion` and n(j): when both are `who`'s and n(j) is
  // empty, n(j) saves the bridge. Several intruded bridges: one answer drawn uniformly. Built
  // from 6-bit masks without branches (which stone is whose is a coin toss to the predictor).
  [[nodiscard]] int bridge_answer(int intrusion, player who, mcts::random& rng) const noexcept {
    static constexpr std::array<int, 6> around = {1, 1 - stride, -stride, -1, stride - 1, stride};
    unsigned own = 0;
    unsigned free = 0;
#pragma GCC unroll 6
    for (std::size_t i = 0; i < 6; ++i) {
      const player p = at(intrusion + around[i]);
      own |= unsigned{p == who} << i;
      free |= unsigned{p == 0} << i;
    }
    const unsigned own_before = ((own << 1) | (own >> 5)) & 63;  // bit j: n(j-1) is who's
    const unsigned own_after = ((own >> 1) | (own << 5)) & 63;   // bit j: n(j+1) is who's
    unsigned answers = own_before & own_after & free;
    if (answers == 0) return -1;
    if ((answers & (answers - 1)) != 0) {
      for (auto skip = rng.below(static_cast<std::uint32_t>(std::popcount(answers))); skip != 0;
           --skip) {
        answers &= answers - 1;
      }
    }
    return intrusion + around[static_cast<std::size_t>(std::countr_zero(answers))];
  }

 private:
  std::array<std::uint8_t, stride * stride> cells_;  // 0 empty, 1, 2, or off_board
  std::array<std::uint16_t, hex::max_size * hex::max_size> empty_;
  std::array<std::uint16_t, stride * stride> position_;
  std::uint32_t count_ = 0;
};

int checked_size(int size) {
  if (size < hex::min_size || size > hex::max_size) {
    throw std::invalid_argument("hex board size " + std::to_string(size) + ": expected 2..19");
  }
  return size;
}

}  // namespace

// The plain playout's recorder: records nothing, so the filling compiles to what it was before
// recording existed.
struct hex::no_record {
  static constexpr bool records = false;
  void operator()(int /*cell*/, player /*who*/) const noexcept {}
};

// The recording playout's: the caller's span, of max_moves() entries or more, gets `who` at each
// filled cell's move index (row * size + column); nothing else is written.
struct hex::record_into {
  static constexpr bool records = true;
  player* played_by;
  void operator()(int cell, player who) const noexcept { played_by[cell] = who; }
};

hex::hex(int size, bool swap_rule, playout_policy policy, knowledge_sources knowledge)
    : size_(checked_size(size)),
      swap_rule_(swap_rule),
      policy_(policy),
      knowledge_(knowledge),
      row_mask_((std::uint32_t{1} << size_) - 1) {
  // A fixed seed: every process of a distributed search computes the same hashes. The keys of
  // the largest board, drawn row by row; this board keeps those of its cells.
  mcts::random rng(zobrist_seed);
  for (auto& keys : zobrist_) {
    std::array<std::uint64_t, max_size * max_size> largest;
    for (auto& key : largest) key = rng();
    for (int r = 0; r < size_; ++r) {
      for (int c = 0; c < size_; ++c) {
        keys[static_cast<std::size_t>(at(r, c))] =
            largest[static_cast<std::size_t>(r * max_size + c)];
      }
    }
  }
  for (int cell = 0; cell < size_ * size_; ++cell) insert(board_mask_, cell);
}

hex::state hex::initial_state() const noexcept {
  state s;
  s.size = static_cast<std::uint8_t>(size_);
  return s;
}

std::size_t hex::max_moves() const noexcept {
  return static_cast<std::size_t>(size_ * size_) + (swap_rule_ ? 1 : 0);
}

// The swap answers the opening stone: exactly one stone, player 1's, is on the board (counted,
// since positions set up with place() need not agree with moves_played).
bool hex::swap_available(const state& s) const noexcept {
  if (!swap_rule_ || s.moves_played != 1 || s.to_move != 2 || s.swapped) return false;
  return popcount(s.stones[1]) == 0 && popcount(s.stones[0]) == 1;
}

std::size_t hex::legal_moves(const state& s, std::span<move> out) const noexcept {
  if (winner(s) != mcts::nobody) return 0;
  std::size_t count = 0;
  for (std::size_t w = 0; w < cell_words; ++w) {
    for (std::uint64_t free = board_mask_[w] & ~(s.stones[0][w] | s.stones[1][w]); free != 0;
         free &= free - 1) {
      out[count++] = static_cast<move>(w * 64 + static_cast<unsigned>(std::countr_zero(free)));
    }
  }
  if (swap_available(s)) out[count++] = swap_move;
  return count;
}

void hex::apply(state& s, move m) const noexcept {
  if (m == swap_move) {
    // Player 1's only stone (r, c) becomes player 2's stone at (c, r).
    for (std::size_t w = 0; w < cell_words; ++w) {
      if (s.stones[0][w] == 0) continue;
      const auto cell = static_cast<int>(w * 64) + std::countr_zero(s.stones[0][w]);
      s.stones[0][w] = 0;
      insert(s.stones[1], at(cell % size_, cell / size_));
      break;
    }
    s.swapped = true;
  } else {
    insert(s.stones[s.to_move - 1], m);
  }
  ++s.moves_played;
  s.last_move = m;
  s.to_move = mcts::opponent(s.to_move);
}

// Player 2's left-right question is player 1's top-bottom question on the mirrored board.
bool hex::connected(const state& s, player who) const noexcept {
  if (who == 1) return joins_top_bottom(unpacked(s.stones[0], size_).data(), size_);
  const board_rows columns = transposed(unpacked(s.stones[1], size_), size_);
  return joins_top_bottom(columns.data(), size_);
}

player hex::winner(const state& s) const noexcept {
  if (connected(s, 1)) return 1;
  if (connected(s, 2)) return 2;
  return mcts::nobody;
}

// Fills every empty cell, then asks only whether player 1 joins top and bottom: a full Hex
// board has exactly one winner. A finished position needs no separate test: its winner's chain
// survives any filling, and the filling then cannot give the other player a chain too. The
// filling ignores the swap (random playouts need not model it).
player hex::playout(const state& s, mcts::random& rng) const noexcept {
  if (policy_ == playout_policy::bridges) return bridge_fill(s, rng, no_record{});
  if (policy_ == playout_policy::patterns) return pattern_fill(s, rng, nullptr);
  return random_fill(s, rng, no_record{});
}

// The same filling, the same draws: only the record differs.
player hex::playout(const state& s, mcts::random& rng, std::span<player> played_by) const noexcept {
  const record_into record{played_by.data()};
  if (policy_ == playout_policy::bridges) return bridge_fill(s, rng, record);
  if (policy_ == playout_policy::patterns) return pattern_fill(s, rng, played_by.data());
  return random_fill(s, rng, record);
}

template <class Recorder>
player hex::random_fill(const state& s, mcts::random& rng, Recorder record) const noexcept {
  // The rows, unpacked once: the empty cells (as row << 5 | column) are listed row by row, each
  // row from column 0 up, the order the draws below depend on; player 1's stones grow in rows,
  // over many words, so that successive ones rarely wait on the store of the one before.
  board_rows black = unpacked(s.stones[0], size_);
  const board_rows white = unpacked(s.stones[1], size_);
  std::array<std::uint16_t, max_size * max_size> empty;
  std::uint32_t count = 0;
  for (int r = 0; r < size_; ++r) {
    const auto row = static_cast<std::size_t>(r);
    for (std::uint32_t free = row_mask_ & ~(black[row] | white[row]); free != 0;
         free &= free - 1) {
      empty[count++] = static_cast<std::uint16_t>(r << 5 | std::countr_zero(free));
    }
  }
  // Alternate turns give the player to move ceil(count / 2) of the cells and the other player
  // the rest, every split equally likely: a partial Fisher-Yates shuffle drawing player 1's
  // share is the same distribution with half the draws.
  const std::uint32_t black_share = s.to_move == 1 ? (count + 1) / 2 : count / 2;
  for (std::uint32_t i = 0; i < black_share; ++i) {
    std::swap(empty[i], empty[i + rng.below(count - i)]);
    black[empty[i] >> 5] |= std::uint32_t{1} << (empty[i] & 31);
    record(at(empty[i] >> 5, empty[i] & 31), 1);
  }
  if constexpr (Recorder::records) {
    for (std::uint32_t i = black_share; i < count; ++i) {
      record(at(empty[i] >> 5, empty[i] & 31), 2);
    }
  }
  return joins_top_bottom(black.data(), size_) ? 1 : 2;
}

// One move at a time, alternately from s.to_move. A move answers the one before it (the last
// tree move, s.last_move, for the first) when that intruded into a bridge of the mover;
// otherwise it is a uniformly random empty cell. Player 1's rows are kept as the board fills,
// for the one connection check at the end.
template <class Recorder>
player hex::bridge_fill(const state& s, mcts::random& rng, Recorder record) const noexcept {
  board_rows black = unpacked(s.stones[0], size_);
  padded_board board(black, unpacked(s.stones[1], size_), size_);
  player mover = s.to_move;
  int last = -1;  // the opponent's last stone, as a grid cell (-1: none to answer)
  if (s.last_move < size_ * size_) {
    last = padded_board::grid_cell(s.last_move / size_, s.last_move % size_);
    if (board.at(last) != mcts::opponent(mover)) last = -1;  // set up by hand, not a move
  }
  while (board.empty_count() != 0) {
    int cell = last < 0 ? -1 : board.bridge_answer(last, mover, rng);
    if (cell < 0) cell = board.random_empty(rng);
    board.play(cell, mover);
    const int row = padded_board::row_of(cell);
    const int column = padded_board::column_of(cell);
    if (mover == 1) black[static_cast<std::size_t>(row)] |= std::uint32_t{1} << column;
    record(row * size_ + column, mover);
    last = cell;
    mover = mcts::opponent(mover);
  }
  return joins_top_bottom(black.data(), size_) ? 1 : 2;
}

std::string hex::move_name(move m) const {
  if (m == swap_move) return "swap-pieces";
  if (m >= size_ * size_) return "?";
  std::string name(1, static_cast<char>('a' + m % size_));
  name += std::to_string(m / size_ + 1);
  return name;
}

std::optional<hex::move> hex::parse_cell(std::string_view text) const {
  if (text.size() < 2 || text.size() > 3) return std::nullopt;
  const char letter = text[0];
  int column;
  if (letter >= 'a' && letter <= 'z') {
    column = letter - 'a';
  } else if (letter >= 'A' && letter <= 'Z') {
    column = letter - 'A';
  } else {
    return std::nullopt;
  }
  // One or two digits without a leading zero: "a01" names no cell.
  if (text[1] < '1' || text[1] > '9') return std::nullopt;
  int row_number = text[1] - '0';
  if (text.size() == 3) {
    if (text[2] < '0' || text[2] > '9') return std::nullopt;
    row_number = row_number * 10 + (text[2] - '0');
  }
  if (column >= size_ || row_number > size_) return std::nullopt;
  return at(row_number - 1, column);
}

std::optional<hex::move> hex::parse_move(const state& s, std::string_view text) const {
  auto lowered = std::string(text);
  for (char& ch : lowered) {
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
  }
  if (lowered == "swap" || lowered == "swap-pieces") {
    if (swap_available(s)) return swap_move;
    return std::nullopt;
  }
  const auto m = parse_cell(text);
  if (!m || cell(s, *m / size_, *m % size_) != mcts::nobody || winner(s) != mcts::nobody) {
    return std::nullopt;
  }
  return m;
}

std::string hex::render(const state& s) const {
  // Row r sits r spaces right of row 0, so a cell's six neighbours surround it on screen.
  std::string out = "   ";
  for (int c = 0; c < size_; ++c) {
    if (c > 0) out += ' ';
    out += static_cast<char>('a' + c);
  }
  out += '\n';
  for (int r = 0; r < size_; ++r) {
    if (r + 1 < 10) out += ' ';
    out += std::to_string(r + 1);
    out += ' ';
    out.append(static_cast<std::size_t>(r), ' ');
    for (int c = 0; c < size_; ++c) {
      if (c > 0) out += ' ';
      const player p = cell(s, r, c);
      out += p == 1 ? 'X' : p == 2 ? 'O' : '.';
    }
    out += '\n';
  }
  return out;
}

std::uint64_t hex::hash(const state& s) const noexcept {
  std::uint64_t h = mix(s.size) ^ (s.to_move == 2 ? second_to_move_key : 0);
  for (std::size_t p = 0; p < 2; ++p) {
    for (std::size_t w = 0; w < cell_words; ++w) {
      for (std::uint64_t bits = s.stones[p][w]; bits != 0; bits &= bits - 1) {
        h ^= zobrist_[p][w * 64 + static_cast<unsigned>(std::countr_zero(bits))];
      }
    }
  }
  return h;
}

player hex::cell(const state& s, int row, int column) const noexcept {
  if (row < 0 || row >= size_ || column < 0 || column >= size_) return mcts::nobody;
  if (contains(s.stones[0], at(row, column))) return 1;
  if (contains(s.stones[1], at(row, column))) return 2;
  return mcts::nobody;
}

bool hex::place(state& s, int row, int column, player who) const noexcept {
  if (row < 0 || row >= size_ || column < 0 || column >= size_ || (who != 1 && who != 2) ||
      cell(s, row, column) != mcts::nobody) {
    return false;
  }
  insert(s.stones[who - 1], at(row, column));
  s.last_move = no_move;  // a set-up stone is no move to answer
  return true;
}

int hex::empty_cells(const state& s) const noexcept {
  return size_ * size_ - popcount(s.stones[0]) - popcount(s.stones[1]);
}

}  // namespace seriema::hex

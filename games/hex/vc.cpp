// hex::edge_connections (hex.hpp): virtual connections by H-search (Anshelevich's AND and OR
// rules over a player's chains, its two edges and the empty cells, with carriers), seeded by
// adjacency and by the third- and fourth-row edge templates (the ziggurat, IV1a).
#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "hex.hpp"

namespace seriema::hex {
namespace {

// A carrier: a set of cells as bits (cell r * size + c), in as many words as the board needs
// (W: 2 for 11x11), so that the sets H-search combines by the thousand stay small.
template <std::size_t W>
using carrier_of = std::array<std::uint64_t, W>;

template <std::size_t W>
bool disjoint(const carrier_of<W>& a, const carrier_of<W>& b) noexcept {
  for (std::size_t w = 0; w < a.size(); ++w) {
    if ((a[w] & b[w]) != 0) return false;
  }
  return true;
}
template <std::size_t W>
bool subset(const carrier_of<W>& a, const carrier_of<W>& b) noexcept {  // a within b
  for (std::size_t w = 0; w < a.size(); ++w) {
    if ((a[w] & ~b[w]) != 0) return false;
  }
  return true;
}
template <std::size_t W>
bool none(const carrier_of<W>& a) noexcept {
  return std::all_of(a.begin(), a.end(), [](std::uint64_t w) { return w == 0; });
}
template <std::size_t W>
carrier_of<W> united(const carrier_of<W>& a, const carrier_of<W>& b) noexcept {
  carrier_of<W> u;
  for (std::size_t w = 0; w < a.size(); ++w) u[w] = a[w] | b[w];
  return u;
}
template <std::size_t W>
carrier_of<W> common(const carrier_of<W>& a, const carrier_of<W>& b) noexcept {
  carrier_of<W> u;
  for (std::size_t w = 0; w < a.size(); ++w) u[w] = a[w] & b[w];
  return u;
}
template <std::size_t W>
int cells_in(const carrier_of<W>& a) noexcept {
  int n = 0;
  for (const std::uint64_t w : a) n += std::popcount(w);
  return n;
}
template <std::size_t W>
bool has(const carrier_of<W>& a, int cell) noexcept {
  return (a[static_cast<unsigned>(cell) / 64] >> (static_cast<unsigned>(cell) % 64) & 1) != 0;
}
template <std::size_t W>
carrier_of<W> with(carrier_of<W> a, int cell) noexcept {
  a[static_cast<unsigned>(cell) / 64] |= std::uint64_t{1} << (static_cast<unsigned>(cell) % 64);
  return a;
}

// The connections kept between two endpoints: at most max_full full ones (the second player
// connects whatever the first does inside the carrier) and max_semi semi ones (the player
// connects by first playing the key), each list without a carrier that holds another of it,
// smallest carriers first. Larger carriers than max_carrier cells are not kept (they cost
// more to combine than they are worth; H-search is a heuristic prover, never a complete one).
constexpr std::size_t max_full = 4;
constexpr std::size_t max_semi = 8;
constexpr int max_carrier = 24;

template <std::size_t W>
struct connections {
  using carrier = carrier_of<W>;
  std::uint8_t fulls = 0;
  std::uint8_t semis = 0;
  bool changed = false;  // a semi connection was added since the OR rule last looked
  std::uint8_t stamp = 0;  // the H-search round that last added a connection (h_search::added)
  std::array<std::uint8_t, max_full> full_size{};  // cells of each carrier (kept: sorting)
  std::array<std::uint8_t, max_semi> semi_size{};
  std::array<carrier, max_full> full;
  std::array<carrier, max_semi> semi;
  std::array<std::uint16_t, max_semi> key;

  bool add_full(const carrier& c) noexcept {
    const int size = cells_in(c);
    if (size > max_carrier || holds_one_of(full, full_size, fulls, c, size)) return false;
    return insert_minimal(full, full_size, fulls, c, size, [](std::size_t, std::size_t) {}) <
           max_full;
  }
  bool add_semi(const carrier& c, int at) noexcept {
    const int size = cells_in(c);
    if (size > max_carrier) return false;
    // A full connection inside c needs no move at all; a semi one inside c is better.
    if (holds_one_of(full, full_size, fulls, c, size)) return false;
    if (holds_one_of(semi, semi_size, semis, c, size)) return false;
    const std::size_t place = insert_minimal(semi, semi_size, semis, c, size,
                                             [&](std::size_t to, std::size_t from) {
                                               key[to] = key[from];
                                             });
    if (place == max_semi) return false;
    key[place] = static_cast<std::uint16_t>(at);
    changed = true;
    return true;
  }

 private:
  // Whether c holds one of the `count` carriers of `list` (whose cell counts are `sizes`).
  template <std::size_t N>
  static bool holds_one_of(const std::array<carrier, N>& list,
                           const std::array<std::uint8_t, N>& sizes, std::uint8_t count,
                           const carrier& c, int size) noexcept {
    for (std::size_t i = 0; i < count; ++i) {
      if (sizes[i] <= size && subset(list[i], c)) return true;
    }
    return false;
  }
  // Drops the carriers of `list` that hold c, then puts c (of `size` cells) after those no
  // larger, the last one falling off a full list; returns c's place, or N when it fell off.
  // move_extra(to, from) moves what a caller keeps beside each carrier (a semi's key).
  template <std::size_t N, class MoveExtra>
  static std::size_t insert_minimal(std::array<carrier, N>& list,
                                    std::array<std::uint8_t, N>& sizes, std::uint8_t& count,
                                    const carrier& c, int size, MoveExtra&& move_extra) noexcept {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < count; ++i) {
      if (sizes[i] < size || !subset(c, list[i])) {
        move_extra(kept, i);
        sizes[kept] = sizes[i];
        list[kept++] = list[i];
      }
    }
    count = static_cast<std::uint8_t>(kept);
    std::size_t place = 0;
    while (place < count && sizes[place] <= size) ++place;
    if (place == N) return N;
    for (std::size_t i = std::min<std::size_t>(count, N - 1); i > place; --i) {
      move_extra(i, i - 1);
      list[i] = list[i - 1];
      sizes[i] = sizes[i - 1];
    }
    list[place] = c;
    sizes[place] = static_cast<std::uint8_t>(size);
    if (count < N) ++count;
    return place;
  }
};

// One player's H-search on one board. Endpoints: groups (0 and 1 the player's two edges, with
// the chains touching them; then its other chains) and empty cells. Connections are kept
// between two groups (groups_[x * G + y], x < y) and between a group and an empty cell
// (cells_[x * N + cell]); cell-to-cell connections are only adjacency, read off the board.
template <std::size_t W>
class h_search {
 public:
  using carrier = carrier_of<W>;
  using connection_list = connections<W>;

  h_search(const hex& g, const hex::state& s, player who)
      : g_(g), n_(g.size()), who_(who), group_(storage().group), owner_(storage().owner),
        pairs_(storage().pairs), to_cells_(storage().to_cells) {
    find_groups(s);
    const auto groups = static_cast<std::size_t>(group_count_);
    const auto cells = static_cast<std::size_t>(n_ * n_);
    // The lists live in this thread's storage, reused from call to call: a search calls this
    // at every node it expands, and only a larger board or more groups than before allocates.
    pairs_.assign(groups * groups, connection_list{});
    to_cells_.assign(groups * cells, connection_list{});
    seed_adjacency();
    seed_edge_templates();
    // Each round combines only connections of which one is new since the round before (the
    // others were combined then already).
    for (round_ = 2; round_ < 2 + max_rounds && combine(); ++round_) {
    }
  }
  [[nodiscard]] const connection_list& between_edges() const { return pair(0, 1); }
  [[nodiscard]] const connection_list& between(int x, int y) const { return pair(x, y); }
  [[nodiscard]] int group_of(int cell) const { return group_[static_cast<std::size_t>(cell)]; }

 private:
  static constexpr int none_group = -1;
  static constexpr std::uint8_t max_rounds = 8;

  // Notes the round in a list that `added` a connection to; returns `added`.
  bool added(connection_list& list, bool was_added) const {
    if (was_added) list.stamp = round_;
    return was_added;
  }
  // Whether a list holds a connection from the last round or this one.
  [[nodiscard]] bool fresh(const connection_list& list) const { return list.stamp + 1 >= round_; }

  [[nodiscard]] connection_list& pair(int x, int y) {
    if (x > y) std::swap(x, y);
    return pairs_[static_cast<std::size_t>(x * group_count_ + y)];
  }
  [[nodiscard]] const connection_list& pair(int x, int y) const {
    if (x > y) std::swap(x, y);
    return pairs_[static_cast<std::size_t>(x * group_count_ + y)];
  }
  [[nodiscard]] connection_list& to_cell(int x, int cell) {
    return to_cells_[static_cast<std::size_t>(x * n_ * n_ + cell)];
  }
  [[nodiscard]] bool on_board(int r, int c) const { return r >= 0 && c >= 0 && r < n_ && c < n_; }
  // The edge (0 or 1) of `who_` that row/column `r`, `c` of a cell lies on, or -1.
  [[nodiscard]] int edge_of(int r, int c) const {
    const int along = who_ == 1 ? r : c;
    return along == 0 ? 0 : along == n_ - 1 ? 1 : -1;
  }
  template <class F>
  void for_neighbours(int cell, F&& f) const {
    static constexpr std::array<int, 6> dr = {-1, -1, 0, 1, 1, 0};
    static constexpr std::array<int, 6> dc = {0, 1, 1, 0, -1, -1};
    const int r = cell / n_;
    const int c = cell % n_;
    for (std::size_t d = 0; d < 6; ++d) {
      if (on_board(r + dr[d], c + dc[d])) f((r + dr[d]) * n_ + c + dc[d]);
    }
  }

  void find_groups(const hex::state& s);
  void seed_adjacency();
  void seed_edge_templates();
  template <std::size_t Cells>
  void seed_template(int depth, const std::array<std::array<int, 2>, Cells>& shape);
  bool combine();
  bool and_through_cells();
  bool and_through_groups();
  bool or_rule(connection_list& list);

  const hex& g_;
  int n_;
  player who_;
  int group_count_ = 2;
  std::uint8_t round_ = 1;  // the seeds' round; combine()'s from 2 on
  struct scratch {
    std::vector<int> group;
    std::vector<player> owner;
    std::vector<connection_list> pairs;
    std::vector<connection_list> to_cells;
  };
  static scratch& storage() {
    thread_local scratch kept;
    return kept;
  }
  std::vector<int>& group_;   // per cell: the player's group holding its stone, or none_group
  std::vector<player>& owner_;  // per cell: 0 empty, 1, 2
  std::vector<connection_list>& pairs_;
  std::vector<connection_list>& to_cells_;
};

template <std::size_t W>
void h_search<W>::find_groups(const hex::state& s) {
  const auto cells = static_cast<std::size_t>(n_ * n_);
  group_.assign(cells, none_group);
  owner_.assign(cells, 0);
  for (int i = 0; i < n_ * n_; ++i) {
    owner_[static_cast<std::size_t>(i)] = g_.cell(s, i / n_, i % n_);
  }
  thread_local std::vector<int> stack;  // reused: no allocation once grown
  thread_local std::vector<int> chain;
  for (int i = 0; i < n_ * n_; ++i) {
    if (owner_[static_cast<std::size_t>(i)] != who_ || group_[static_cast<std::size_t>(i)] >= 0) {
      continue;
    }
    // Flood the chain; it takes an edge's number when it touches that edge.
    chain.clear();
    int edge = -1;
    stack.push_back(i);
    group_[static_cast<std::size_t>(i)] = group_count_;
    while (!stack.empty()) {
      const int cell = stack.back();
      stack.pop_back();
      chain.push_back(cell);
      if (const int e = edge_of(cell / n_, cell % n_); e >= 0) edge = edge < 0 ? e : edge;
      for_neighbours(cell, [&](int next) {
        const auto at = static_cast<std::size_t>(next);
        if (owner_[at] == who_ && group_[at] < 0) {
          group_[at] = group_count_;
          stack.push_back(next);
        }
      });
    }
    if (edge >= 0) {
      for (const int cell : chain) group_[static_cast<std::size_t>(cell)] = edge;
    } else {
      ++group_count_;
    }
  }
}

// Every group touches the empty cells next to its stones, and an edge the empty cells on it:
// full connections with empty carriers. Two groups touching make one (find_groups).
template <std::size_t W>
void h_search<W>::seed_adjacency() {
  for (int cell = 0; cell < n_ * n_; ++cell) {
    if (owner_[static_cast<std::size_t>(cell)] != 0) continue;
    if (const int e = edge_of(cell / n_, cell % n_); e >= 0) {
      added(to_cell(e, cell), to_cell(e, cell).add_full({}));
    }
    for_neighbours(cell, [&](int next) {
      const int x = group_[static_cast<std::size_t>(next)];
      if (x >= 0) added(to_cell(x, cell), to_cell(x, cell).add_full({}));
    });
  }
}

// The edge templates H-search starts from, offsets (towards the edge, along it) from the
// stone for black and the top edge; each one's mirror image, along -> towards - along (the
// reflection that keeps rows: (dr, dc) -> (dr, -dc - dr), with dr = -towards), is its other
// orientation. The tests check every orientation by exhaustive search on its carrier.
// The ziggurat (template IIIa): a stone on the third row joins its edge through 8 empty cells,
// two rows of 4 and 3 towards the edge and one beside it.
constexpr std::array<std::array<int, 2>, 8> ziggurat = {{
    {0, 1}, {1, 0}, {1, 1}, {1, 2}, {2, 0}, {2, 1}, {2, 2}, {2, 3}}};
// A fourth-row template (HexWiki's IV1a family; the "4-3-2"): a stone on the fourth row
// joins its edge through 19 empty cells, rows of 7, 6 and 5 towards the edge and one beside it.
// Found by df-pn (mcts::dfpn_solver with H-search) as a carrier from which no cell can be taken
// away, on boards where every cell outside it was the opponent's.
constexpr std::array<std::array<int, 2>, 19> fourth_row = {{
    {0, -1}, {1, -2}, {1, -1}, {1, 0}, {1, 1}, {1, 2}, {2, -2}, {2, -1}, {2, 0}, {2, 1},
    {2, 2}, {2, 3}, {3, -2}, {3, -1}, {3, 0}, {3, 1}, {3, 2}, {3, 3}, {3, 4}}};

template <std::size_t W>
void h_search<W>::seed_edge_templates() {
  seed_template(2, ziggurat);
  seed_template(3, fourth_row);
}

// Every group's stone at `depth` rows from an edge it does not touch gets the template's
// full connection to that edge, in each orientation whose cells are all empty and on the board.
template <std::size_t W>
template <std::size_t Cells>
void h_search<W>::seed_template(int depth, const std::array<std::array<int, 2>, Cells>& shape) {
  for (int cell = 0; cell < n_ * n_; ++cell) {
    const int x = group_[static_cast<std::size_t>(cell)];
    if (x < 0) continue;
    const int r = cell / n_;
    const int c = cell % n_;
    // Distance to each edge, and the cell at (towards, along) from the stone.
    for (int e = 0; e < 2; ++e) {
      if (x == e) continue;
      const int along_edge = who_ == 1 ? c : r;
      const int row = (who_ == 1 ? r : c);
      if ((e == 0 ? row : n_ - 1 - row) != depth) continue;
      for (const int mirror : {1, -1}) {
        carrier cells{};
        bool fits = true;
        for (const auto& [towards, along] : shape) {
          const int a = mirror > 0 ? along : towards - along;
          // Towards edge 0 the first coordinate falls; the template turned half a turn (the
          // board's symmetry that swaps the edges) for edge 1.
          const int depth_at = e == 0 ? row - towards : row + towards;
          const int along_at = e == 0 ? along_edge + a : along_edge - a;
          const int rr = who_ == 1 ? depth_at : along_at;
          const int cc = who_ == 1 ? along_at : depth_at;
          if (!on_board(rr, cc) || owner_[static_cast<std::size_t>(rr * n_ + cc)] != 0) {
            fits = false;
            break;
          }
          cells = with(cells, rr * n_ + cc);
        }
        if (fits) added(pair(x, e), pair(x, e).add_full(cells));
      }
    }
  }
}

// The AND rule through an empty cell z: full connections x-z and z-y with disjoint carriers
// make a semi connection x-y with key z (its carrier the two and z). And a group-to-cell semi
// x-z from a full connection x-w to a neighbour w of z (the cell-to-cell adjacency w-z).
template <std::size_t W>
bool h_search<W>::and_through_cells() {
  bool grew = false;
  thread_local std::vector<int> near;  // reused: no allocation once grown
  for (int z = 0; z < n_ * n_; ++z) {
    if (owner_[static_cast<std::size_t>(z)] != 0) continue;
    near.clear();
    for (int x = 0; x < group_count_; ++x) {
      if (to_cell(x, z).fulls > 0) near.push_back(x);
    }
    for (std::size_t i = 0; i < near.size(); ++i) {
      for (std::size_t j = i + 1; j < near.size(); ++j) {
        const connection_list& a = to_cell(near[i], z);
        const connection_list& b = to_cell(near[j], z);
        if (!fresh(a) && !fresh(b)) continue;
        connection_list& xy = pair(near[i], near[j]);
        for (std::size_t p = 0; p < a.fulls; ++p) {
          for (std::size_t q = 0; q < b.fulls; ++q) {
            if (!disjoint(a.full[p], b.full[q])) continue;
            grew |= added(xy, xy.add_semi(with(united(a.full[p], b.full[q]), z), z));
          }
        }
      }
    }
  }
  // Group to cell: x-w full and w next to z make x-z semi with key w. Only from the cells w
  // the group reaches, and only the lists new since the last round.
  for (int x = 0; x < group_count_; ++x) {
    for (int w = 0; w < n_ * n_; ++w) {
      const connection_list& to_w = to_cell(x, w);
      if (to_w.fulls == 0 || !fresh(to_w) || owner_[static_cast<std::size_t>(w)] != 0) continue;
      for_neighbours(w, [&](int z) {
        if (owner_[static_cast<std::size_t>(z)] != 0) return;
        connection_list& to_z = to_cell(x, z);
        if (to_z.fulls > 0 && to_z.full_size[0] == 0) return;  // adjacent already
        for (std::size_t p = 0; p < to_w.fulls; ++p) {
          if (!has(to_w.full[p], z)) grew |= added(to_z, to_z.add_semi(with(to_w.full[p], w), w));
        }
      });
    }
  }
  return grew;
}

// The AND rule through a group m: connections x-m and m-y (y a group or an empty cell) with
// disjoint carriers make one x-y, full when both are, semi (with the semi's key) when one is.
template <std::size_t W>
bool h_search<W>::and_through_groups() {
  bool grew = false;
  // Never through an edge (groups 0 and 1): two chains that each reach an edge are not joined
  // to each other by it. Edges are endpoints only.
  for (int m = 2; m < group_count_; ++m) {
    for (int x = 0; x < group_count_; ++x) {
      if (x == m) continue;
      const connection_list& xm = pair(x, m);
      if (xm.fulls + xm.semis == 0) continue;
      const auto join = [&](const connection_list& my, connection_list& xy, int y_cell) {
        if (my.fulls + my.semis == 0 || (!fresh(xm) && !fresh(my))) return;
        for (std::size_t p = 0; p < xm.fulls; ++p) {
          if (y_cell >= 0 && has(xm.full[p], y_cell)) continue;
          for (std::size_t q = 0; q < my.fulls; ++q) {
            if (disjoint(xm.full[p], my.full[q])) {
              grew |= added(xy, xy.add_full(united(xm.full[p], my.full[q])));
            }
          }
          for (std::size_t q = 0; q < my.semis; ++q) {
            if (disjoint(xm.full[p], my.semi[q])) {
              grew |= added(xy, xy.add_semi(united(xm.full[p], my.semi[q]), my.key[q]));
            }
          }
        }
        for (std::size_t p = 0; p < xm.semis; ++p) {
          if (y_cell >= 0 && has(xm.semi[p], y_cell)) continue;
          for (std::size_t q = 0; q < my.fulls; ++q) {
            if (disjoint(xm.semi[p], my.full[q])) {
              grew |= added(xy, xy.add_semi(united(xm.semi[p], my.full[q]), xm.key[p]));
            }
          }
        }
      };
      for (int y = x + 1; y < group_count_; ++y) {
        if (y != m) join(pair(m, y), pair(x, y), -1);
      }
      for (int z = 0; z < n_ * n_; ++z) {
        if (owner_[static_cast<std::size_t>(z)] == 0) join(to_cell(m, z), to_cell(x, z), z);
      }
    }
  }
  return grew;
}

// The OR rule: semi connections whose carriers have no cell in common make a full one (the
// opponent cannot spoil them all with one stone); the union of their carriers is its carrier.
// Greedy, from each semi in turn, adding the semis that shrink the common part.
template <std::size_t W>
bool h_search<W>::or_rule(connection_list& list) {
  if (!list.changed) return false;
  list.changed = false;
  bool grew = false;
  for (std::size_t start = 0; start < list.semis; ++start) {
    carrier shared = list.semi[start];
    carrier all = shared;
    for (std::size_t i = 0; i < list.semis && !none(shared); ++i) {
      const carrier narrower = common(shared, list.semi[i]);
      if (narrower == shared) continue;
      shared = narrower;
      all = united(all, list.semi[i]);
    }
    if (none(shared)) grew |= added(list, list.add_full(all));
  }
  return grew;
}

template <std::size_t W>
bool h_search<W>::combine() {
  bool grew = and_through_cells();
  for (auto& list : to_cells_) grew |= or_rule(list);
  grew |= and_through_groups();
  for (auto& list : pairs_) grew |= or_rule(list);
  return grew;
}

}  // namespace

namespace {

template <std::size_t W>
hex::cell_set widened(const carrier_of<W>& c) {
  hex::cell_set cells{};
  std::copy(c.begin(), c.end(), cells.begin());
  return cells;
}

template <std::size_t W>
hex::edge_connection_analysis edge_connections_of(const hex& g, const hex::state& s,
                                                  player who) {
  hex::edge_connection_analysis found;
  found.who = who;
  const h_search<W> search(g, s, who);
  const connections<W>& edges = search.between_edges();
  found.full = edges.fulls > 0;
  if (found.full) found.full_carrier = widened(edges.full[0]);
  found.semis = edges.semis;
  if (edges.semis == 0) return found;
  found.key = edges.key[0];
  found.semi_carrier = widened(edges.semi[0]);
  carrier_of<W> common_cells = edges.semi[0];
  for (std::size_t i = 1; i < edges.semis; ++i) common_cells = common(common_cells, edges.semi[i]);
  found.must_play = widened(common_cells);
  return found;
}

template <std::size_t W>
std::vector<hex::cell_set> full_connections_of(const hex& g, const hex::state& s, player who,
                                               hex::move from, int edge) {
  const h_search<W> search(g, s, who);
  const int x = search.group_of(from);
  std::vector<hex::cell_set> carriers;
  if (x < 0 || x < 2) return carriers;  // not a stone of who's, or its chain is an edge's
  const connections<W>& list = search.between(x, edge);
  for (std::size_t i = 0; i < list.fulls; ++i) carriers.push_back(widened(list.full[i]));
  return carriers;
}

// Calls f.template operator()<W>() with W the words a board of `size` needs.
template <class F>
decltype(auto) with_words(int size, F&& f) {
  switch ((size * size + 63) / 64) {
    case 1: return f.template operator()<1>();
    case 2: return f.template operator()<2>();
    case 3: return f.template operator()<3>();
    case 4: return f.template operator()<4>();
    case 5: return f.template operator()<5>();
    default: return f.template operator()<hex::cell_words>();
  }
}

}  // namespace

hex::edge_connection_analysis hex::edge_connections(const state& s, player who) const {
  return with_words(size_, [&]<std::size_t W>() { return edge_connections_of<W>(*this, s, who); });
}

std::vector<hex::cell_set> hex::full_connections(const state& s, player who, move from,
                                                 int edge) const {
  return with_words(size_, [&]<std::size_t W>() {
    return full_connections_of<W>(*this, s, who, from, edge);
  });
}

}  // namespace seriema::hex

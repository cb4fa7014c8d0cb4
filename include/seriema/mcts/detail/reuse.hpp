// Tree reuse, shared by both engines (search_options::reuse_tree): which moves lead from the
// kept tree's root to the next search's root.
#pragma once

#include <concepts>
#include <cstddef>
#include <optional>
#include <seriema/mcts/game.hpp>
#include <seriema/mcts/search.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace seriema::mcts {

/// A game whose positions compare equal (operator==) when they are the same position: the
/// engines find the next root in a kept tree by comparing positions (search_options::reuse_tree).
template <class G>
concept reusable_game = game<G> && std::equality_comparable<typename G::state>;

namespace detail {

/// How many moves after the kept root the next root may be (a move of each side).
inline constexpr std::size_t reuse_depth = 2;

/// Throws std::invalid_argument, naming `engine`, for reuse_tree on a game whose states do not
/// compare equal.
template <game G>
void check_reuse(const search_options& options, const char* engine) {
  if constexpr (!reusable_game<G>) {
    if (options.reuse_tree) {
      throw std::invalid_argument(std::string(engine) +
                                  ": reuse_tree needs a game whose states compare equal "
                                  "(seriema::mcts::reusable_game)");
    }
  }
}

/// The moves (at most reuse_depth) that lead from `from` to `to`, the first such sequence in
/// legal-move order; nullopt when `to` is not that close. Empty when they are equal.
template <game G>
std::optional<std::vector<typename G::move>> moves_between(const G& g,
                                                           const typename G::state& from,
                                                           const typename G::state& to) {
  using move = typename G::move;
  if constexpr (reusable_game<G>) {
    if (from == to) return std::vector<move>{};
    std::vector<move> first(g.max_moves());
    std::vector<move> second(g.max_moves());
    const std::size_t n = g.legal_moves(from, std::span<move>(first));
    for (std::size_t i = 0; i < n; ++i) {
      auto after = from;
      g.apply(after, first[i]);
      if (after == to) return std::vector<move>{first[i]};
      const std::size_t replies = g.legal_moves(after, std::span<move>(second));
      for (std::size_t j = 0; j < replies; ++j) {
        auto next = after;
        g.apply(next, second[j]);
        if (next == to) return std::vector<move>{first[i], second[j]};
      }
    }
  }
  return std::nullopt;
}

}  // namespace detail

}  // namespace seriema::mcts

// The search command rank 0 sends every rank of a distributed search (a search to run, or that
// the service is closing), and its exchange over the runtime's control path.
#pragma once

#include <cstdint>
#include <cstring>
#include <seriema/base/error.hpp>
#include <seriema/fabric/runtime.hpp>
#include <seriema/mcts/detail/reuse.hpp>
#include <seriema/mcts/game.hpp>
#include <span>
#include <type_traits>

namespace seriema::mcts::detail {

/// What a search command asks of every rank. `none` is what a rank that is not rank 0 passes
/// to the exchange (rank 0's command replaces it).
enum class command_kind : std::uint32_t { none = 0, search = 1, close = 2 };

/// What a search starts from (search_options::reuse_tree): an empty tree (a kept one is freed),
/// the kept tree as it is (same root), or the kept subtree `path` leads to (copied, the rest
/// freed).
enum class carry_kind : std::uint8_t { fresh = 0, same_root = 1, subtree = 2 };

/// What rank 0 tells the other ranks (a search to run, or that the service is closing).
template <class G>
struct search_command {
  command_kind kind = command_kind::none;
  std::uint32_t playouts_per_leaf = 16;
  std::uint64_t rollouts = 0;
  double seconds = 0;
  double exploration = 1.0;
  std::uint64_t seed = 1;
  std::uint64_t memory_budget = 0;  ///< bytes of tree per process (0: no limit)
  std::uint32_t rave = 0;           ///< 1: RAVE (search_options::rave)
  std::uint32_t solver = 0;         ///< 1: the solver (search_options::solver)
  std::uint32_t knowledge = 0;      ///< 1: game knowledge (search_options::knowledge)
  std::uint32_t priors = 0;         ///< 1: edge tables hold move priors (uses_priors, rank 0's)
  std::uint32_t expansion_visits = 1;  ///< search_options::expansion_visits
  double rave_equivalence = 1000;   ///< search_options::rave_equivalence
  double prior_bias = 1.0;          ///< search_options::prior_bias
  std::uint8_t reuse_tree = 0;      ///< 1: keep the tree after this search
  carry_kind carry = carry_kind::fresh;  ///< what of the kept tree this search starts from
  std::uint8_t path_length = 0;     ///< carry_kind::subtree: moves from the kept root
  typename G::move path[reuse_depth]{};  ///< the moves, path_length of them
  typename G::state root{};
};

/// Throws seriema::error for a command whose carry fields no rank 0 writes (they index the
/// path and pick the phase every rank runs).
template <class G>
void check_carry(const search_command<G>& c) {
  const auto kind = static_cast<std::uint8_t>(c.carry);
  if (kind > static_cast<std::uint8_t>(carry_kind::subtree) || c.path_length > reuse_depth ||
      (c.carry == carry_kind::subtree) != (c.path_length > 0)) {
    throw error("distributed_search: rank 0 sent a malformed search command (tree reuse)");
  }
}

/// A trivially copyable game (its configuration, e.g. a board size) travels with each command,
/// so rank 0 may change it between searches (GTP's boardsize).
template <class G, bool = std::is_trivially_copyable_v<G>>
struct command_with_game {
  search_command<G> command;
  G game;
};
template <class G>
struct command_with_game<G, false> {
  search_command<G> command;
};

/// Rank 0's command reaches every rank (control path: a progressing barrier, then allgather);
/// a trivially copyable game travels with it and replaces `game` on the other ranks. The other
/// ranks' `mine` is ignored.
template <class G>
search_command<G> exchange_command(fabric::runtime& rt, G& game, const search_command<G>& mine) {
  if (rt.size() == 1) return mine;
  auto message = [&] {
    if constexpr (std::is_trivially_copyable_v<G>) {
      return command_with_game<G>{mine, game};
    } else {
      return command_with_game<G>{mine};
    }
  }();
  std::span<const std::byte> bytes;
  if (rt.rank() == 0) bytes = {reinterpret_cast<const std::byte*>(&message), sizeof message};
  auto all = rt.allgather(bytes);
  if (all.at(0).size() != sizeof message) {
    throw error("distributed_search: rank 0 sent a malformed search command");
  }
  std::memcpy(static_cast<void*>(&message), all[0].data(), sizeof message);
  if constexpr (std::is_trivially_copyable_v<G>) game = message.game;
  return message.command;
}

}  // namespace seriema::mcts::detail

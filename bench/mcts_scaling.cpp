// MCTS scaling and strength on this machine (the paper's Fig. 3): rollouts/s of the distributed
// search in the job's configuration against the sequential reference measured in the same run,
// and games of the distributed search against the sequential one at equal rollouts.
//   SERIEMA_THREADS=2 seriema-run -n 1 -- mcts_scaling rate --rollouts 300000 --json out.json
//   seriema-run -n 2 -- mcts_scaling strength --games 200 --size 9 --rollouts 1000
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <hex.hpp>
#include <seriema/fabric/runtime.hpp>
#include <seriema/mcts/distributed.hpp>
#include <seriema/mcts/sequential.hpp>
#include <string>
#include <vector>

#include "bench_support.hpp"

namespace {

using seriema::hex::hex;
namespace mcts = seriema::mcts;
using seriema::bench::machine_info;
using seriema::bench::median;
using seriema::bench::rounded;
using seriema::bench::rounded_array;

struct settings {
  int size = 0;  // 0: 11 for rate, 9 for strength
  double seconds = 2;
  std::uint64_t rate_rollouts = 0;  // rate: a budget of rollouts per search instead of seconds
  int reps = 3;
  unsigned playouts = 16;
  bool remote_only = false;
  std::string channel = "trad";
  std::uint32_t in_flight = 0;
  std::string label;
  std::string json;
  std::string knowledge = "none";  // rate: Hex knowledge sources on (issue 46's cost)
  // strength
  int games = 200;
  std::uint64_t rollouts = 1000;
  std::uint64_t seed = 1;
};

mcts::distributed_options distributed_options_of(const settings& s) {
  mcts::distributed_options options;
  options.remote_only = s.remote_only;
  options.channel = *seriema::invoke::channel_from_string(s.channel);
  options.rollouts_in_flight = s.in_flight;
  return options;
}

std::string configuration(seriema::fabric::runtime& rt) {
  return fmt::format("{}x{}", rt.size(), rt.placement().threads_per_process());
}

// Rollouts/s from the empty board: the sequential reference (rank 0 alone, the other ranks
// waiting), then the distributed search on every thread of the job, alternated per repetition
// so that drifts of the machine hit both alike.
// --knowledge's sources: none, inferior (dead and captured cells), priors (pattern priors),
// vc (dead and captured cells, virtual connections and must-play: seriema-hex's default) or
// all; search_options::knowledge is on with any.
seriema::hex::knowledge_sources knowledge_of(const std::string& name) {
  const bool all = name == "all";
  const bool vc = name == "vc" || all;
  return {name == "inferior" || vc, name == "priors" || all, vc, vc};
}

int rate(seriema::fabric::runtime& rt, const settings& s) {
  const hex game(s.size, false, seriema::hex::playout_policy::random, knowledge_of(s.knowledge));
  mcts::distributed_search<hex> distributed(rt, game, distributed_options_of(s));
  mcts::search_options options;
  options.knowledge = s.knowledge != "none";
  // A budget of rollouts compares configurations on trees of the same size (a faster one
  // searching for the same seconds builds a deeper tree, whose selections cost more).
  options.rollouts = s.rate_rollouts;
  options.seconds = s.rate_rollouts != 0 ? 0 : s.seconds;
  options.playouts_per_leaf = s.playouts;
  std::vector<double> sequential_rates, distributed_rates, calls_per_second;
  for (int rep = 0; rep < s.reps; ++rep) {
    options.seed = s.seed + static_cast<std::uint64_t>(rep);
    if (rt.rank() == 0) {
      const auto seq = mcts::sequential_search(game, game.initial_state(), options);
      sequential_rates.push_back(seq.rollouts_per_second());
    }
    rt.barrier();
    const auto result = distributed.search(game.initial_state(), options);
    distributed_rates.push_back(result.rollouts_per_second());
    calls_per_second.push_back(static_cast<double>(result.remote_calls) / result.seconds);
  }
  if (rt.rank() != 0) return 0;
  const double seq = median(sequential_rates);
  const double dist = median(distributed_rates);
  const std::string config = configuration(rt);
  const std::string label = s.label.empty() ? config : s.label;
  fmt::print("{:<22} {:>8} {:>12.0f} {:>12.0f} {:>7.3f} {:>12.0f}\n", label,
             s.remote_only ? "remote" : "local", dist, seq, dist / seq, median(calls_per_second));
  if (!s.json.empty()) {
    seriema::bench::write_report(
        s.json, {{"benchmark", "mcts_scaling"},
                 {"kind", "rate"},
                 {"label", label},
                 {"configuration", config},
                 {"processes", rt.size()},
                 {"threads_per_process", rt.placement().threads_per_process()},
                 {"remote_only", s.remote_only},
                 {"channel", s.channel},
                 {"knowledge", s.knowledge},
                 {"board", s.size},
                 {"playouts_per_leaf", s.playouts},
                 {"seconds", s.rate_rollouts != 0 ? 0.0 : s.seconds},
                 {"rollouts", s.rate_rollouts},
                 {"reps", s.reps},
                 {"distributed_rollouts_per_s", rounded_array(distributed_rates, 1)},
                 {"sequential_rollouts_per_s", rounded_array(sequential_rates, 1)},
                 {"median_distributed", rounded(dist, 1)},
                 {"median_sequential", rounded(seq, 1)},
                 {"ratio", rounded(dist / seq, 4)},
                 {"remote_calls_per_s", rounded_array(calls_per_second, 1)},
                 {"machine", machine_info::here().json()}});
  }
  return 0;
}

// Games distributed vs sequential at equal rollouts per move, colours alternated. Rank 0 plays;
// the other ranks serve the distributed searches.
int strength(seriema::fabric::runtime& rt, const settings& s) {
  const hex game(s.size);
  mcts::distributed_search<hex> distributed(rt, game, distributed_options_of(s));
  if (rt.rank() != 0) {
    distributed.serve();
    return 0;
  }
  mcts::search_options options;
  options.rollouts = s.rollouts;
  options.playouts_per_leaf = s.playouts;
  int distributed_wins = 0, wins_as_black = 0, games_as_black = 0;
  std::uint64_t moves_played = 0;
  for (int g = 0; g < s.games; ++g) {
    const mcts::player distributed_player = g % 2 == 0 ? 1 : 2;
    games_as_black += distributed_player == 1 ? 1 : 0;
    auto position = game.initial_state();
    while (game.winner(position) == mcts::nobody) {
      options.seed = s.seed + static_cast<std::uint64_t>(g) * 1000 + position.moves_played;
      const auto result = game.to_move(position) == distributed_player
                              ? distributed.search(position, options)
                              : mcts::sequential_search(game, position, options);
      game.apply(position, result.best);
    }
    moves_played += position.moves_played;
    if (game.winner(position) == distributed_player) {
      ++distributed_wins;
      wins_as_black += distributed_player == 1 ? 1 : 0;
    }
    if ((g + 1) % 20 == 0) {
      fmt::print(stderr, "mcts_scaling: {} of {} games, distributed won {}\n", g + 1, s.games,
                 distributed_wins);
    }
  }
  distributed.close();
  const double n = s.games;
  const double p = distributed_wins / n;
  const double standard_error = std::sqrt(p * (1 - p) / n);
  fmt::print("strength {}x{} {}x{} board, {} rollouts/move, {} games: distributed won {} "
             "({:.1f}% +- {:.1f}), as black {}/{}, as white {}/{}\n",
             rt.size(), rt.placement().threads_per_process(), s.size, s.size, s.rollouts, s.games,
             distributed_wins, 100 * p, 100 * standard_error, wins_as_black, games_as_black,
             distributed_wins - wins_as_black, s.games - games_as_black);
  if (!s.json.empty()) {
    seriema::bench::write_report(
        s.json, {{"benchmark", "mcts_scaling"},
                 {"kind", "strength"},
                 {"configuration", configuration(rt)},
                 {"remote_only", s.remote_only},
                 {"channel", s.channel},
                 {"knowledge", s.knowledge},
                 {"board", s.size},
                 {"rollouts_per_move", s.rollouts},
                 {"playouts_per_leaf", s.playouts},
                 {"games", s.games},
                 {"distributed_wins", distributed_wins},
                 {"win_rate", rounded(p, 4)},
                 {"standard_error", rounded(standard_error, 4)},
                 {"wins_as_black", wins_as_black},
                 {"games_as_black", games_as_black},
                 {"average_game_length", rounded(static_cast<double>(moves_played) / n, 1)},
                 {"machine", machine_info::here().json()}});
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  settings s;
  CLI::App app{"mcts_scaling: distributed MCTS rollouts/s and strength vs the sequential one"};
  app.require_subcommand(1);
  app.fallthrough();
  app.option_defaults()->always_capture_default();
  app.add_option("--playouts", s.playouts, "random playouts per leaf (K)")
      ->check(CLI::Range(1, 65535));
  app.add_flag("--remote-only", s.remote_only, "every step of a rollout is a remote call");
  app.add_option("--channel", s.channel, "how the search's calls travel")
      ->check(CLI::IsMember({"send", "write", "trad", "ovfl"}));
  app.add_option("--in-flight", s.in_flight, "rollouts in flight at most (0: 16 per thread)");
  app.add_option("--json", s.json, "write the result as JSON here");
  app.add_option("--seed", s.seed, "random seed");
  auto* rate_cmd = app.add_subcommand("rate", "rollouts/s vs the sequential reference");
  rate_cmd->add_option("--size", s.size, "board size (default 11)")->check(CLI::Range(2, 19));
  rate_cmd->add_option("--seconds", s.seconds, "seconds per search")->check(CLI::PositiveNumber);
  rate_cmd->add_option("--rollouts", s.rate_rollouts, "rollouts per search (instead of --seconds)")
      ->check(CLI::PositiveNumber);
  rate_cmd->add_option("--reps", s.reps, "repetitions (medians)")->check(CLI::PositiveNumber);
  rate_cmd->add_option("--knowledge", s.knowledge,
                       "Hex knowledge in both engines: none, inferior (dead and captured "
                       "cells), priors (pattern priors), vc (inferior, virtual connections and "
                       "must-play) or all")
      ->check(CLI::IsMember({"none", "inferior", "priors", "vc", "all"}));
  rate_cmd->add_option("--label", s.label, "row name in the table");
  auto* strength_cmd = app.add_subcommand("strength", "distributed vs sequential games");
  strength_cmd->add_option("--size", s.size, "board size (default 9)")
      ->check(CLI::Range(2, 19));
  strength_cmd->add_option("--games", s.games, "games (colours alternate)")
      ->check(CLI::PositiveNumber);
  strength_cmd->add_option("--rollouts", s.rollouts, "rollouts per move, both engines")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (s.size == 0) s.size = *rate_cmd ? 11 : 9;
  try {
    seriema::fabric::runtime rt;
    const int status = *rate_cmd ? rate(rt, s) : strength(rt, s);
    rt.finalize();
    return status;
  } catch (const std::exception& e) {
    fmt::print(stderr, "mcts_scaling: {}\n", e.what());
    return 1;
  }
}

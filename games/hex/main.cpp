// seriema-hex: analyzes Hex positions, plays games and speaks GTP, searching with the
// distributed MCTS over every thread and process of the job (or the sequential reference).
//   build/tools/seriema-run -n 2 -- build/games/hex/seriema-hex analyze --seconds 5
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <seriema/base/settings.hpp>
#include <seriema/fabric/runtime.hpp>
#include <seriema/mcts/dfpn.hpp>
#include <seriema/mcts/distributed.hpp>
#include <seriema/mcts/sequential.hpp>
#include <seriema/version.hpp>
#include <string>
#include <vector>

#include "gtp.hpp"
#include "hex.hpp"
#include "progress.hpp"

namespace {

using seriema::hex::gtp_session;
using seriema::hex::hex;
using seriema::hex::progress_bar;
namespace mcts = seriema::mcts;

struct settings {
  int size = hex::default_size;
  bool swap_rule = false;
  std::string engine = "distributed";
  std::uint64_t rollouts = 20'000;
  bool rollouts_given = false;  // --rollouts on the command line (it then also bounds timed moves)
  double seconds = 0;
  unsigned playouts = 1;  // per leaf: the strong setting at every budget (docs/mcts.md)
  // The strong setting by default (docs/mcts.md, "Playing strength"): RAVE, the solver and
  // bridges playouts on, and exploration 0.3 with RAVE (0.7 without: the textbook 1.4 on values
  // in [-1, 1]).
  double exploration = 0.3;
  bool rave = true;
  bool solver = true;
  std::uint32_t expansion_visits = mcts::search_options{}.expansion_visits;
  double rave_equivalence = mcts::search_options{}.rave_equivalence;
  std::string playout_policy = "bridges";
  // Hex knowledge (search_options::knowledge, hex::knowledge_sources), each source on unless
  // --no-<name>.
  bool inferior_cells = true;
  bool pattern_priors = false;  // --pattern-priors: not yet a gain at equal time (docs/mcts.md)
  bool virtual_connections = false;  // --virtual-connections: not yet a gain at equal time
  bool must_play = false;            // --must-play: likewise
  double prior_bias = mcts::search_options{}.prior_bias;
  // A df-pn solver on a thread beside each search (mcts::search_beside_solver), its table of
  // dfpn_memory bytes kept between the moves of a game.
  bool dfpn = false;
  std::string dfpn_memory = "64M";
  std::size_t dfpn_table_bytes = 0;  // --dfpn-memory, parsed
  // Between the moves of play and gtp, the searched subtree is the next search's start
  // (analyze searches once and keeps nothing).
  bool reuse_tree = true;
  std::uint64_t seed = 1;
  bool remote_only = false;
  std::string channel = "trad";
  std::uint32_t in_flight = 0;
  std::string placement = "random";
  bool quiet = false;  // no progress bar
  std::string max_memory;  // --max-memory as given (empty: the default rule)
  std::uint64_t memory_budget = 0;  // bytes of tree per process (0: no limit)
  // analyze
  std::vector<std::string> moves;
  std::size_t top = 8;
  // play
  std::string opponent = "random";
  std::string engine_color = "black";
  std::uint64_t opponent_rollouts = 0;  // 0: the engine's budget
  // selfplay
  std::uint64_t games = 100;
  std::string out;
  // gtp
  double resign_threshold = seriema::hex::gtp_options{}.resign_threshold;
};

mcts::search_options search_options_of(const settings& s) {
  mcts::search_options options;
  options.rollouts = s.rollouts;
  options.seconds = s.seconds;
  options.playouts_per_leaf = s.playouts;
  options.exploration = s.exploration;
  options.rave = s.rave;
  options.solver = s.solver;
  options.knowledge = true;  // what it uses is the game's knowledge_sources
  options.prior_bias = s.prior_bias;
  options.expansion_visits = s.expansion_visits;
  options.rave_equivalence = s.rave_equivalence;
  options.seed = s.seed;
  options.memory_budget = s.memory_budget;
  options.reuse_tree = s.reuse_tree;
  return options;
}

// The first number after `key` in the file at `path` (0 if there is none).
std::uint64_t number_after(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string word;
  while (in >> word) {
    if (word != key) continue;
    std::uint64_t value = 0;
    return in >> value ? value : 0;
  }
  return 0;
}
// The memory this process may use: MemTotal, or the cgroup's limit (v2 memory.max, or v1's
// limit_in_bytes) where lower. 0 if /proc/meminfo cannot be read.
std::uint64_t machine_memory() {
  std::uint64_t total = number_after("/proc/meminfo", "MemTotal:") << 10;
  for (const char* path : {"/sys/fs/cgroup/memory.max",
                           "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(path);
    std::uint64_t limit = 0;
    if (in >> limit && limit > 0 && (total == 0 || limit < total)) total = limit;  // "max": none
  }
  return total;
}
// --max-memory's default: half of the machine's memory (machine_memory()) shared by the
// processes of the job on rank 0's machine.
std::uint64_t default_memory_budget(const seriema::fabric::runtime& rt) {
  const auto& placement = rt.placement();
  const int machine = placement.machine_of_process(rt.rank());
  std::uint64_t processes = 0;
  for (int p = 0; p < placement.process_count(); ++p) {
    if (placement.machine_of_process(p) == machine) ++processes;
  }
  return machine_memory() / 2 / std::max<std::uint64_t>(processes, 1);
}
std::string mebibytes(std::uint64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}
// One line saying the memory budget was reached in `result` (which must say it was).
template <class Result>
std::string budget_reached_line(const Result& result) {
  return fmt::format(
      "memory budget of {} per process reached after {:.2f} s{}: the tree stopped growing "
      "there and the search went on",
      mebibytes(result.memory_budget), result.memory_budget_reached_seconds,
      result.memory_budget_reached_rollouts != 0
          ? fmt::format(" ({} rollouts)", result.memory_budget_reached_rollouts)
          : "");
}

// The engine behind every subcommand: the distributed search (rank 0 drives, the other ranks
// serve its searches) or the sequential reference (rank 0 alone).
class engine {
 public:
  engine(seriema::fabric::runtime& rt, const hex& game, const settings& s) : s_(s) {
    if (s.engine == "distributed") {
      mcts::distributed_options options;
      options.remote_only = s.remote_only;
      options.channel = *seriema::invoke::channel_from_string(s.channel);
      options.rollouts_in_flight = s.in_flight;
      options.placement =
          s.placement == "hashed" ? mcts::node_placement::hashed : mcts::node_placement::random;
      distributed_ = std::make_unique<mcts::distributed_search<hex>>(rt, game, options);
    } else {
      sequential_ = std::make_unique<mcts::sequential_engine<hex>>(game);
    }
  }
  // Rank 0. `bar_file`: where a progress bar may go (null: none). `seconds` > 0: a GTP clock's
  // budget for this move, bounded also by --rollouts when that was given.
  mcts::search_result<hex::move> search(const hex& game, const hex::state& position,
                                        std::FILE* bar_file, double seconds = 0) {
    auto options = search_options_of(s_);
    if (seconds > 0) {
      options.seconds = seconds;
      options.rollouts = s_.rollouts_given ? s_.rollouts : 0;
    }
    // Each search its own seed: a position searched again (another game, another genmove) need
    // not get the same move. A session is reproducible with --seed.
    options.seed = s_.seed + searches_++;
    std::optional<progress_bar> bar;
    if (bar_file != nullptr && !s_.quiet) {
      bar.emplace(options.rollouts, options.seconds, bar_file);
      if (bar->active()) options.progress = bar->callback();
    }
    auto result = s_.dfpn ? search_beside_solver(game, position, options)
                          : engine_search(game, position, options);
    if (tell_reuse_ && result.reused_nodes != 0) {
      fmt::print(stderr, "seriema-hex: the search started from {} playouts and {} nodes kept "
                 "from the last one\n", result.reused_visits, result.reused_nodes);
    }
    if (result.memory_budget_reached && tell_budget_ && !budget_told_) {
      budget_told_ = true;
      fmt::print(stderr, "seriema-hex: {} (said once)\n", budget_reached_line(result));
    }
    return result;
  }
  // What the last search's solver proved (outcome unknown without --dfpn).
  [[nodiscard]] const mcts::dfpn_result<hex::move>& last_proof() const { return last_proof_; }
  // Whether the last search's proven winner is the solver's proof (not the search's own).
  [[nodiscard]] bool last_proof_applied() const { return last_proof_applied_; }
  // play and gtp: say on stderr, once, that a search reached the memory budget (analyze
  // prints it with its result).
  void tell_when_budget_reached() { tell_budget_ = true; }
  // gtp (not --quiet): say on stderr when a search started from a kept subtree.
  void tell_reuse() { tell_reuse_ = !s_.quiet; }
  [[nodiscard]] const mcts::distributed_counters* counters() const {
    return distributed_ ? &distributed_->last_counters() : nullptr;
  }
  // Ranks other than 0: serve rank 0's searches until it closes.
  void serve() {
    if (distributed_) distributed_->serve();
  }
  void close() {
    if (distributed_) distributed_->close();
  }

 private:
  const settings& s_;
  std::uint64_t searches_ = 0;
  bool tell_budget_ = false;
  bool budget_told_ = false;
  bool tell_reuse_ = false;
  // One search of the engine chosen. GTP's boardsize may have changed the game (then the tree
  // is not reused).
  mcts::search_result<hex::move> engine_search(const hex& game, const hex::state& position,
                                               const mcts::search_options& options) {
    if (distributed_) {
      if (!same_game(distributed_->game(), game)) distributed_->set_game(game);
      return distributed_->search(position, options);
    }
    if (!same_game(sequential_->game(), game)) {
      sequential_ = std::make_unique<mcts::sequential_engine<hex>>(game);
    }
    return sequential_->search(position, options);
  }
  // The search with the df-pn solver beside it, on a game of its own: the session's with every
  // knowledge source that proves or prunes (inferior cells, H-search, must-play) on, whatever
  // the search uses, since they are what lets a proof-number search prove anything (GTP's
  // boardsize replaces the session's game; the solver and its table are then made anew).
  mcts::search_result<hex::move> search_beside_solver(const hex& game,
                                                      const hex::state& position,
                                                      const mcts::search_options& options) {
    if (!solver_ || !same_game(solver_made_for_, game)) {
      solver_.reset();
      solver_made_for_ = game;
      seriema::hex::knowledge_sources proving = game.knowledge();
      proving.inferior_cells = proving.virtual_connections = proving.must_play = true;
      solver_game_ = hex(game.size(), game.swap_rule(), game.policy(), proving);
      mcts::dfpn_options solver_options;
      solver_options.table_bytes = s_.dfpn_table_bytes;
      solver_ = std::make_unique<mcts::dfpn_solver<hex>>(solver_game_, solver_options);
    }
    auto both = mcts::search_beside_solver(
        *solver_, position, options,
        [&](const mcts::search_options& with_stop) {
          return engine_search(game, position, with_stop);
        });
    last_proof_ = both.proof;
    last_proof_applied_ = both.proof_applied;
    return std::move(both.search);
  }
  static bool same_game(const hex& a, const hex& b) {
    return a.size() == b.size() && a.swap_rule() == b.swap_rule() && a.policy() == b.policy() &&
           a.knowledge() == b.knowledge();
  }
  std::unique_ptr<mcts::distributed_search<hex>> distributed_;
  std::unique_ptr<mcts::sequential_engine<hex>> sequential_;  // --engine sequential
  hex solver_made_for_;  // --dfpn: the session's game when the solver was made
  hex solver_game_;      // and the solver's own (see search_beside_solver)
  std::unique_ptr<mcts::dfpn_solver<hex>> solver_;
  mcts::dfpn_result<hex::move> last_proof_;
  bool last_proof_applied_ = false;
};

// A subcommand's --help lists only its own options; the program-wide ones that matter to it
// (given before or after the subcommand) are listed in its footer, with their defaults.
std::string options_footer(const CLI::App& app, std::initializer_list<const char*> names) {
  std::string out = "Search and board options (before or after the subcommand):\n";
  for (const char* name : names) {
    const CLI::Option* option = app.get_option(name);
    std::string line = fmt::format("  {:<20}{}", name, option->get_description());
    if (!option->get_default_str().empty() && option->get_type_size() != 0) {
      line += fmt::format(" [{}]", option->get_default_str());
    }
    out += line + "\n";
  }
  return out;
}

// Without --seed every run differs (a fixed seed makes a deterministic, exploitable player).
std::uint64_t seed_from_clock() {
  const auto ticks = std::chrono::steady_clock::now().time_since_epoch().count();
  return static_cast<std::uint64_t>(ticks) ^ (std::uint64_t{std::random_device{}()} << 32);
}

hex::state position_of(const hex& game, const std::vector<std::string>& moves) {
  auto state = game.initial_state();
  std::size_t number = 0;
  for (const auto& word : moves) {
    std::string text = word;
    std::replace(text.begin(), text.end(), ',', ' ');
    std::size_t start = 0;
    while (start < text.size()) {
      const std::size_t end = std::min(text.find(' ', start), text.size());
      const std::string name = text.substr(start, end - start);
      start = end + 1;
      if (name.empty()) continue;
      ++number;
      if (game.winner(state) != mcts::nobody) {
        throw CLI::ValidationError(fmt::format("move {} ({}): the game is already over", number,
                                               name));
      }
      const auto move = game.parse_move(state, name);
      if (!move) {
        throw CLI::ValidationError(fmt::format(
            "move {} ({}): not a legal move here (a cell such as c4 on a {}x{} board, empty{})",
            number, name, game.size(), game.size(), game.swap_rule() ? ", or swap-pieces" : ""));
      }
      game.apply(state, *move);
    }
  }
  return state;
}

seriema::hex::knowledge_sources knowledge_of(const settings& s) {
  seriema::hex::knowledge_sources sources;
  sources.inferior_cells = s.inferior_cells;
  sources.pattern_priors = s.pattern_priors;
  sources.virtual_connections = s.virtual_connections;
  sources.must_play = s.must_play;
  return sources;
}

seriema::hex::playout_policy playout_policy_of(const std::string& name) {
  if (name == "bridges") return seriema::hex::playout_policy::bridges;
  if (name == "patterns") return seriema::hex::playout_policy::patterns;
  return seriema::hex::playout_policy::random;
}

const char* color_name(mcts::player p) { return p == 1 ? "black (X)" : "white (O)"; }

// analyze's memory lines: the tree's bytes per process, nodes, the budget and whether it was
// reached, and this process's peak resident set (VmHWM).
// `all_tree_bytes`: every process's together.
void print_memory(const seriema::fabric::runtime& rt,
                  const mcts::search_result<hex::move>& result, std::uint64_t all_tree_bytes) {
  fmt::print("memory: tree {} in the largest of {} processes, {} nodes, {:.0f} bytes/node; "
             "budget {} per process; peak RSS of rank 0 {}\n",
             mebibytes(result.tree_bytes), rt.size(), result.tree_nodes,
             result.tree_nodes != 0
                 ? static_cast<double>(all_tree_bytes) / static_cast<double>(result.tree_nodes)
                 : 0.0,
             result.memory_budget != 0 ? mebibytes(result.memory_budget) : "none",
             mebibytes(number_after("/proc/self/status", "VmHWM:") << 10));
  fmt::print("{}\n", result.memory_budget_reached ? budget_reached_line(result)
                                                  : "memory budget not reached");
}

int analyze(seriema::fabric::runtime& rt, engine& e, const hex& game, const settings& s) {
  const auto position = position_of(game, s.moves);
  if (game.winner(position) != mcts::nobody) {
    fmt::print("{}\nthe game is over: {} won\n", game.render(position),
               color_name(game.winner(position)));
    return 0;
  }
  fmt::print("{}\n{} to move; searching with {} ({} x {} threads, {})\n", game.render(position),
             color_name(game.to_move(position)), s.engine, rt.size(),
             rt.placement().threads_per_process(),
             s.seconds > 0 ? fmt::format("{} s", s.seconds) : fmt::format("{} rollouts", s.rollouts));
  std::fflush(stdout);
  const auto result = e.search(game, position, stdout);
  fmt::print("best move: {}   win rate {:.1f}%\n", game.move_name(result.best),
             100 * result.win_rate);
  const auto& proof = e.last_proof();
  if (result.proven_winner != mcts::nobody) {
    fmt::print("proven: {} wins ({} ended the search)\n", color_name(result.proven_winner),
               e.last_proof_applied() ? "df-pn" : "the search's solver");
  }
  if (s.dfpn) {
    fmt::print("df-pn: {} after {} expansions in {:.2f} s\n",
               proof.outcome == mcts::dfpn_outcome::unknown ? "no proof" : "proved",
               proof.expansions, proof.seconds);
  }
  fmt::print("{:>6} {:>10} {:>9}\n", "move", "visits", "win rate");
  for (std::size_t i = 0; i < std::min(s.top, result.moves.size()); ++i) {
    const auto& m = result.moves[i];
    fmt::print("{:>6} {:>10} {:>8.1f}%\n", game.move_name(m.move), m.visits, 100 * m.win_rate());
  }
  fmt::print("rollouts: {} in {:.2f} s = {:.0f} rollouts/s ({} playouts)\n", result.rollouts,
             result.seconds, result.rollouts_per_second(), result.playouts);
  fmt::print("tree: {} nodes", result.tree_nodes);
  if (const auto* c = e.counters()) {
    fmt::print(", {:.1f} MiB; remote calls: {} = {:.0f}/s; deferred selections: {}",
               static_cast<double>(c->tree_bytes_allocated) / (1 << 20), c->remote_calls,
               result.seconds > 0 ? static_cast<double>(c->remote_calls) / result.seconds : 0.0,
               c->deferred_selections);
  }
  fmt::print("\n");
  const auto* counters = e.counters();
  print_memory(rt, result, counters ? counters->tree_bytes_allocated : result.tree_bytes);
  return 0;
}

int play(engine& e, const hex& game, const settings& s) {
  const mcts::player engine_player = s.engine_color == "white" ? 2 : 1;
  settings opponent_settings = s;
  if (s.opponent_rollouts != 0) opponent_settings.rollouts = s.opponent_rollouts;
  mcts::random rng(s.seed ^ 0xabcdef);
  auto position = game.initial_state();
  std::vector<hex::move> legal(game.max_moves());
  fmt::print("{} plays {}; opponent: {}\n", s.engine, color_name(engine_player), s.opponent);
  while (game.winner(position) == mcts::nobody) {
    const mcts::player mover = game.to_move(position);
    hex::move move{};
    std::string how;
    if (mover == engine_player || s.opponent == "self") {
      const auto result = e.search(game, position, stdout);
      move = result.best;
      how = fmt::format("{}, win rate {:.1f}%, {:.0f} rollouts/s{}", s.engine,
                        100 * result.win_rate, result.rollouts_per_second(),
                        result.reused_nodes != 0
                            ? fmt::format(", {} playouts kept from the last search",
                                          result.reused_visits)
                            : "");
    } else if (s.opponent == "sequential") {
      auto options = search_options_of(opponent_settings);
      options.seed = s.seed + position.moves_played;
      const auto result = mcts::sequential_search(game, position, options);
      move = result.best;
      how = fmt::format("sequential, win rate {:.1f}%", 100 * result.win_rate);
    } else {
      legal.resize(game.max_moves());
      legal.resize(game.legal_moves(position, legal));
      move = legal[rng.below(static_cast<std::uint32_t>(legal.size()))];
      how = "random";
    }
    game.apply(position, move);
    fmt::print("{}. {} {} ({})\n{}\n", position.moves_played, color_name(mover),
               game.move_name(move), how, game.render(position));
    std::fflush(stdout);
  }
  const auto winner = game.winner(position);
  fmt::print("{} wins after {} moves{}\n", color_name(winner), position.moves_played,
             s.opponent == "self"       ? ""
             : winner == engine_player ? fmt::format(" ({} won)", s.engine)
                                       : fmt::format(" ({} won)", s.opponent));
  return 0;
}

// The moves a search chooses among in `position` (the legal ones less those knowledge prunes),
// or none where there is no choice to learn from: a win in one or a threat to block (the
// solver decides those), a position the knowledge proves or where it keeps a single move, and
// while the swap is available (it has no pattern).
std::vector<hex::move> candidates(const hex& game, const hex::state& position) {
  std::vector<hex::move> moves(game.max_moves());
  const mcts::player mover = game.to_move(position);
  if (game.threats(position, mover, moves) > 0 ||
      game.threats(position, mcts::opponent(mover), moves) > 0) {
    return {};
  }
  moves.resize(game.legal_moves(position, moves));
  const mcts::pruned kept = game.prune(position, moves);
  moves.resize(kept.count);
  const bool swap = std::find(moves.begin(), moves.end(), hex::swap_move) != moves.end();
  if (moves.size() < 2 || kept.decided != mcts::nobody || swap) moves.clear();
  return moves;
}

// Self-play games, written for the pattern trainer (games/hex/train_patterns.py): one line per
// position with a choice, the chosen move's pattern feature then every candidate's
// (hex::pattern_features_of). Each game opens with a uniformly random move (not written) so
// that the games differ; the rest are the engine's.
int selfplay(engine& e, const hex& game, const settings& s) {
  std::ofstream out(s.out);
  if (!out) throw CLI::ValidationError(fmt::format("--out {}: cannot write there", s.out));
  mcts::random rng(s.seed ^ 0x5e1f);
  std::uint64_t positions = 0;
  std::vector<std::uint32_t> features(game.max_moves());
  for (std::uint64_t g = 0; g < s.games; ++g) {
    auto position = game.initial_state();
    std::vector<hex::move> first(game.max_moves());
    first.resize(game.legal_moves(position, first));
    game.apply(position, first[rng.below(static_cast<std::uint32_t>(first.size()))]);
    while (game.winner(position) == mcts::nobody) {
      const auto moves = candidates(game, position);
      const auto result = e.search(game, position, nullptr);
      const hex::move best = result.best;
      // A proven root's move is the proof's, not a choice the patterns could learn from.
      if (!moves.empty() && result.proven_winner == mcts::nobody) {
        game.pattern_features_of(position, std::span<const hex::move>(&best, 1),
                                 std::span<std::uint32_t>(features.data(), 1));
        out << features[0];
        game.pattern_features_of(position, moves,
                                 std::span<std::uint32_t>(features.data(), moves.size()));
        for (std::size_t i = 0; i < moves.size(); ++i) out << ' ' << features[i];
        out << '\n';
        ++positions;
      }
      game.apply(position, best);
    }
    fmt::print("game {} of {}: {} won after {} moves; {} positions so far\n", g + 1, s.games,
               color_name(game.winner(position)), position.moves_played, positions);
    std::fflush(stdout);
  }
  if (!out.flush()) throw std::runtime_error(fmt::format("--out {}: write failed", s.out));
  return 0;
}

int gtp(engine& e, const settings& s) {
  std::FILE* bar_file = isatty(fileno(stderr)) ? stderr : nullptr;
  seriema::hex::gtp_options options;
  options.size = s.size;
  options.swap_rule = s.swap_rule;
  options.policy = playout_policy_of(s.playout_policy);
  options.knowledge = knowledge_of(s);
  options.resign_threshold = s.resign_threshold;
  options.log = &std::cerr;
  gtp_session session(
      [&](const hex& game, const hex::state& position, double seconds) {
        return e.search(game, position, bar_file, seconds);
      },
      "seriema-hex", SERIEMA_VERSION, options);
  session.run(std::cin, std::cout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  settings s;
  CLI::App app{"seriema-hex: Hex analysis, play and GTP on the distributed MCTS of seriema"};
  app.require_subcommand(1);
  app.fallthrough();  // global options may follow the subcommand too
  app.option_defaults()->always_capture_default();
  app.add_option("--size", s.size, "board size (2..19)")->check(CLI::Range(2, 19));
  app.add_flag("--swap", s.swap_rule, "allow the swap rule (swap-pieces as move 2)");
  app.add_option("--engine", s.engine, "search engine")
      ->check(CLI::IsMember({"distributed", "sequential"}));
  auto* rollouts_option = app.add_option(
      "--rollouts", s.rollouts, "rollout budget per move (0: none; unbounded with --seconds)");
  app.add_option("--seconds", s.seconds, "time budget per move (0: none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--playouts", s.playouts, "random playouts per new leaf (K)")
      ->check(CLI::Range(1, 65535));
  auto* exploration_option =
      app.add_option("--exploration", s.exploration,
                     "UCB1 exploration constant (default 0.3 with RAVE, 0.7 without)")
          ->check(CLI::NonNegativeNumber);
  exploration_option->default_str("");  // it depends on --rave
  app.add_option("--rave", s.rave,
                 "RAVE: blend each move's win rate with its all-moves-as-first rate (0 or 1)");
  app.add_option("--rave-equivalence", s.rave_equivalence,
                 "visits at which a move's RAVE weight has halved (k in sqrt(k / (3n + k)))")
      ->check(CLI::PositiveNumber);
  app.add_option("--solver", s.solver,
                 "play a win in one and block the opponent's at once, score decided nodes "
                 "without playouts (0 or 1)");
  app.add_option("--playout-policy", s.playout_policy,
                 "playout moves: random, bridges (random, but a move into a bridge of the "
                 "player to move is answered), or patterns (drawn by the pattern priors' "
                 "trained weights)")
      ->check(CLI::IsMember({"random", "bridges", "patterns"}));
  app.add_flag("!--no-inferior-cells", s.inferior_cells,
               "knowledge: do not prune dead and captured cells nor decide positions by "
               "filling them in");
  app.add_flag("--virtual-connections,!--no-virtual-connections", s.virtual_connections,
               "knowledge: decide positions by the virtual connections H-search finds between "
               "a player's edges (off by default)");
  app.add_flag("--must-play,!--no-must-play", s.must_play,
               "knowledge: search only the cells common to the opponent's semi connections "
               "between its edges (off by default)");
  app.add_flag("--pattern-priors,!--no-pattern-priors", s.pattern_priors,
               "knowledge: move priors from trained local patterns (off by default)");
  app.add_flag("--dfpn,!--no-dfpn", s.dfpn,
               "a df-pn solver (with inferior cells, H-search and must-play) on a thread "
               "beside each search; its proof ends the search (off by default)");
  app.add_option("--dfpn-memory", s.dfpn_memory,
                 "the df-pn solver's table, kept between moves, e.g. 64M or 1G (at least 1M)");
  app.add_option("--prior-bias", s.prior_bias,
                 "weight of a move's pattern prior in its score, fading as 1/sqrt(visits+1)")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--reuse-tree", s.reuse_tree,
                 "play and gtp: start each search from the subtree of the last search's tree "
                 "that the moves played since lead to (0 or 1; with --max-memory the tree then "
                 "grows to half of it, the other half is for that copy)");
  app.add_option("--expansion-visits", s.expansion_visits,
                 "playouts a node needs (as a leaf) before its moves are expanded: fewer edge "
                 "tables, less memory")
      ->check(CLI::Range(1u, 1u << 20));
  auto* seed_option = app.add_option("--seed", s.seed, "random seed (default: from the clock)");
  seed_option->default_str("");  // not the placeholder 1 in settings
  app.add_flag("--remote-only", s.remote_only,
               "every step between threads is a remote call, even inside a process");
  app.add_option("--channel", s.channel, "how the search's calls travel")
      ->check(CLI::IsMember({"send", "write", "trad", "ovfl", "adaptive"}));
  app.add_option("--in-flight", s.in_flight, "rollouts in flight at most (0: 16 per thread)");
  app.add_option("--placement", s.placement, "owner of a new node")
      ->check(CLI::IsMember({"random", "hashed"}));
  app.add_flag("--quiet", s.quiet, "no progress bar");
  app.add_option("--max-memory", s.max_memory,
                 "search tree memory per process, e.g. 512M or 2G (0: no limit; default: half "
                 "the machine's memory or cgroup limit, shared by its processes)");

  auto* analyze_cmd = app.add_subcommand("analyze", "search a position given as a move list");
  analyze_cmd->add_option("moves", s.moves, "moves from the empty board, e.g. a1 b2 (or a1,b2)");
  analyze_cmd->add_option("--top", s.top, "how many root moves to list");
  auto* play_cmd = app.add_subcommand("play", "play a game and print the board");
  play_cmd->add_option("--opponent", s.opponent, "who the engine plays against")
      ->check(CLI::IsMember({"random", "sequential", "self"}));
  play_cmd->add_option("--color", s.engine_color, "the engine's colour (black moves first)")
      ->check(CLI::IsMember({"black", "white"}));
  play_cmd->add_option("--opponent-rollouts", s.opponent_rollouts,
                       "the sequential opponent's rollouts per move (0: same as the engine)");
  auto* selfplay_cmd = app.add_subcommand(
      "selfplay", "play the engine against itself and write each position's pattern features "
                  "(training data for games/hex/train_patterns.py)");
  selfplay_cmd->add_option("--games", s.games, "games to play")->check(CLI::PositiveNumber);
  selfplay_cmd->add_option("--out", s.out, "the file to write")->required();
  auto* gtp_cmd = app.add_subcommand("gtp", "speak the Go Text Protocol on stdin/stdout");
  gtp_cmd->add_option("--resign-threshold", s.resign_threshold,
                      "genmove answers resign below this win rate, after 1000 rollouts or more "
                      "and once --size moves are on the board (0: never)")
      ->check(CLI::Range(0.0, 1.0));
  gtp_cmd->footer(
      options_footer(app, {"--rollouts", "--seconds", "--playouts", "--exploration",
                           "--playout-policy", "--rave", "--rave-equivalence", "--solver",
                           "--no-inferior-cells", "--virtual-connections",
                           "--must-play", "--pattern-priors", "--prior-bias", "--dfpn",
                           "--dfpn-memory",
                           "--expansion-visits", "--reuse-tree", "--seed", "--engine", "--size",
                           "--swap", "--quiet", "--max-memory"}) +
      "Clock: after time_settings (or time_left) each genmove's budget comes from the time left\n"
      "instead of --seconds, a critical move up to twice as much (docs/mcts.md). The swap rule\n"
      "is also set by param_game allow_swap 0|1.\n");
  CLI11_PARSE(app, argc, argv);

  try {
    // A time budget alone bounds the search; with both, the first reached ends it.
    s.rollouts_given = rollouts_option->count() != 0;
    if (exploration_option->count() == 0) s.exploration = s.rave ? 0.3 : 0.7;
    if (s.seconds > 0 && !s.rollouts_given) s.rollouts = 0;
    if (s.rollouts == 0 && s.seconds <= 0) {
      throw CLI::ValidationError("--rollouts 0 needs a --seconds budget");
    }
    if (seed_option->count() == 0) s.seed = seed_from_clock();
    if (*analyze_cmd) s.reuse_tree = false;  // one search: nothing to keep, the whole budget
    if (!s.max_memory.empty()) {
      try {
        s.memory_budget = seriema::config::parse_bytes("--max-memory", s.max_memory);
      } catch (const seriema::config_error& error) {
        throw CLI::ValidationError(error.what());
      }
    }
    try {
      s.dfpn_table_bytes = seriema::config::parse_bytes("--dfpn-memory", s.dfpn_memory);
    } catch (const seriema::config_error& error) {
      throw CLI::ValidationError(error.what());
    }
    if (s.dfpn_table_bytes < (std::size_t{1} << 20)) {
      throw CLI::ValidationError("--dfpn-memory must be at least 1M, not " + s.dfpn_memory);
    }
    seriema::fabric::runtime rt;
    if (s.max_memory.empty()) {
      s.memory_budget = default_memory_budget(rt);
      if (s.memory_budget == 0 && rt.rank() == 0) {
        fmt::print(stderr, "seriema-hex: /proc/meminfo unreadable: no tree memory budget unless "
                           "--max-memory sets one\n");
      }
    }
    const hex game(s.size, s.swap_rule, playout_policy_of(s.playout_policy), knowledge_of(s));
    engine e(rt, game, s);
    if (rt.rank() != 0) {
      e.serve();
      rt.finalize();
      return 0;
    }
    int status = 0;
    try {
      if (*analyze_cmd) status = analyze(rt, e, game, s);
      if (*play_cmd || *gtp_cmd) e.tell_when_budget_reached();
      if (*play_cmd) status = play(e, game, s);
      if (*selfplay_cmd) status = selfplay(e, game, s);
      if (*gtp_cmd) e.tell_reuse();
      if (*gtp_cmd) status = gtp(e, s);
    } catch (const CLI::ValidationError& error) {
      e.close();
      fmt::print(stderr, "seriema-hex: {}\n", error.what());
      return 2;
    }
    e.close();
    rt.finalize();
    return status;
  } catch (const CLI::ValidationError& error) {
    fmt::print(stderr, "seriema-hex: {}\n", error.what());
    return 2;
  } catch (const std::exception& error) {
    fmt::print(stderr, "seriema-hex: {}\n", error.what());
    return 1;
  }
}

// The Go Text Protocol session of the Hex program: line preprocessing, command dispatch and
// response framing (see gtp.hpp).
#include "gtp.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <exception>
#include <istream>
#include <optional>
#include <ostream>
#include <utility>

namespace seriema::hex {
namespace {

constexpr std::array<std::string_view, 17> command_names{
    "protocol_version", "name", "version", "known_command", "list_commands", "boardsize",
    "clear_board", "play", "genmove", "showboard", "final_score", "undo", "quit",
    "time_settings", "time_left", "param_game", "hexgui-analyze_commands"};

// What HexGui offers in its analyze menu ("type/label/command" per line, as GoGui reads them).
// HexGui asks for this list on every connect and shows an error when the command is unknown.
// "param" entries open a dialog of the "[bool] name value" lines the command answers.
constexpr std::string_view hexgui_analyze_commands =
    "param/Game Param/param_game\nstring/Show Board/showboard\nstring/Final Score/final_score";

// The answer of genmove when there is no move to make: the game is over (for either colour,
// as MoHex answers) or the engine gives up.
constexpr std::string_view resign_answer = "resign";

char lower(char c) noexcept {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

std::string lowered(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), lower);
  return out;
}

// GTP preprocessing: control characters other than tab and newline dropped (a '\r' from a
// Windows peer among them), tabs turned into spaces, everything from '#' on discarded.
std::string preprocess(std::string_view line) {
  std::string out;
  out.reserve(line.size());
  for (const char c : line) {
    if (c == '#') break;
    if (c == '\t') {
      out += ' ';
    } else if (static_cast<unsigned char>(c) >= 32 && c != 127) {
      out += c;
    }
  }
  return out;
}

std::vector<std::string_view> split(std::string_view text) {
  std::vector<std::string_view> tokens;
  std::size_t at = 0;
  while (true) {
    at = text.find_first_not_of(' ', at);
    if (at == std::string_view::npos) return tokens;
    const std::size_t end = std::min(text.find(' ', at), text.size());
    tokens.push_back(text.substr(at, end - at));
    at = end;
  }
}

bool all_digits(std::string_view text) noexcept {
  return !text.empty() && std::all_of(text.begin(), text.end(),
                                      [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<int> parse_int(std::string_view text) noexcept {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// A GTP time: seconds, a non-negative integer as GTP 2 has it (a decimal fraction is accepted,
// as some controllers send one).
std::optional<double> parse_seconds(std::string_view text) noexcept {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value,
                                            std::chars_format::fixed);
  if (error != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  if (!std::isfinite(value) || value < 0) return std::nullopt;
  return value;
}

std::optional<int> parse_count(std::string_view text) noexcept {
  if (!all_digits(text)) return std::nullopt;
  return parse_int(text);
}

std::optional<bool> parse_bool(std::string_view text) {
  const std::string value = lowered(text);
  if (value == "1" || value == "true") return true;
  if (value == "0" || value == "false") return false;
  return std::nullopt;
}

std::optional<player> parse_color(std::string_view text) {
  const std::string name = lowered(text);
  if (name == "b" || name == "black") return player{1};
  if (name == "w" || name == "white") return player{2};
  return std::nullopt;
}

// Whether `text` names a cell of some Hex board: a column letter of the largest board (a to s)
// and a row number 1 to 19 without leading zeros. Such a name off the current board is an
// invalid move; anything else is a syntax error.
bool well_formed_cell(std::string_view text) noexcept {
  if (text.size() < 2 || text.size() > 3) return false;
  const char column = lower(text[0]);
  if (column < 'a' || column >= 'a' + hex::max_size) return false;
  const std::string_view row = text.substr(1);
  if (!all_digits(row) || row[0] == '0') return false;
  const std::optional<int> number = parse_int(row);
  return number && *number <= hex::max_size;
}

// What an error shows of the input it refuses: all of a short token, else its first bytes and
// its length (a refused 100 MB move name must not come back whole).
std::string shown(std::string_view text) {
  constexpr std::size_t shown_bytes = 32;
  if (text.size() <= shown_bytes) return std::string(text);
  return fmt::format("{}... ({} bytes)", text.substr(0, shown_bytes), text.size());
}

// The longest failure text sent back: a backstop for messages that carry input (an exception's
// text, say), beyond the tokens shown() cuts.
constexpr std::size_t max_error_bytes = 512;

// The id of a command line (its leading number, as handle() takes it), from the part kept of
// a line too long to handle; empty when it has none.
std::string_view id_of(std::string_view line) {
  const std::size_t start = line.find_first_not_of(" \t");
  if (start == std::string_view::npos) return {};
  std::size_t end = start;
  while (end < line.size() && line[end] >= '0' && line[end] <= '9') ++end;
  if (end == start || (end < line.size() && line[end] != ' ' && line[end] != '\t')) return {};
  return line.substr(start, end - start);
}

// One response in GTP framing. The text loses its trailing newlines and any empty line inside
// it, since an empty line ends a response. A failure's text is cut at max_error_bytes.
std::string framed(bool success, std::string_view id, std::string_view text) {
  if (!success && text.size() > max_error_bytes) text = text.substr(0, max_error_bytes);
  std::string out(success ? "=" : "?");
  out += id;
  out += ' ';
  for (const char c : text) {
    if (c == '\n' && out.back() == '\n') continue;
    out += c;
  }
  while (out.back() == '\n') out.pop_back();
  out += "\n\n";
  return out;
}

// The answer to a line of `length` bytes, longer than the session takes; `kept` is its start.
std::string line_too_long(std::string_view kept, std::size_t length) {
  return framed(false, id_of(kept),
                fmt::format("line too long ({} bytes, limit {})", length,
                            gtp_session::max_line_bytes));
}

// Reads one line of `in` (up to '\n', which is dropped) into `line`, keeping its first `limit`
// bytes and reading the rest in fixed chunks without keeping it. Returns the line's whole length,
// or nullopt at the end of the input (or when it cannot be read).
std::optional<std::size_t> read_line(std::istream& in, std::string& line, std::size_t limit) {
  line.clear();
  std::size_t length = 0;
  bool read_any = false;
  std::array<char, 4096> chunk;
  while (true) {
    in.getline(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    if (in.bad()) return std::nullopt;
    auto got = static_cast<std::size_t>(in.gcount());
    const bool ended = !in.fail();  // the delimiter was extracted (counted in gcount), or EOF
    const bool full = in.fail() && !in.eof();  // the chunk filled before the line ended
    if (ended && !in.eof()) --got;  // the '\n'
    if (got > 0 || ended) read_any = true;
    line.append(chunk.data(), std::min(got, limit - std::min(limit, line.size())));
    length += got;
    if (!full) break;
    in.clear();  // go on with the rest of the line
  }
  if (!read_any) return std::nullopt;
  return length;
}

}  // namespace

gtp_session::gtp_session(engine genmove, std::string name, std::string version, int size,
                         bool swap_rule)
    : gtp_session(std::move(genmove), std::move(name), std::move(version),
                  gtp_options{.size = size, .swap_rule = swap_rule}) {}

gtp_session::gtp_session(engine genmove, std::string name, std::string version,
                         gtp_options options)
    : genmove_(std::move(genmove)),
      name_(std::move(name)),
      version_(std::move(version)),
      options_(options),
      game_(options.size, options.swap_rule, options.policy, options.knowledge),
      position_(game_.initial_state()) {}

std::string gtp_session::handle(std::string_view line) {
  if (line.size() > max_line_bytes) {
    return line_too_long(line.substr(0, max_line_bytes), line.size());
  }
  std::string id;
  try {
    const std::string text = preprocess(line);
    std::vector<std::string_view> tokens = split(text);
    if (tokens.empty()) return {};
    if (all_digits(tokens.front())) {
      id = tokens.front();
      tokens.erase(tokens.begin());
    }
    if (tokens.empty()) return framed(false, id, "syntax error: missing command");
    const std::string_view command = tokens.front();
    tokens.erase(tokens.begin());
    const reply answer = dispatch(command, tokens);
    return framed(answer.success, id, answer.text);
  } catch (const std::exception& error) {
    return framed(false, id, std::string("internal error: ") + error.what());
  } catch (...) {
    return framed(false, id, "internal error");
  }
}

void gtp_session::run(std::istream& in, std::ostream& out) {
  std::string line;
  while (!quit_requested_) {
    const std::optional<std::size_t> length = read_line(in, line, max_line_bytes);
    if (!length) break;
    const std::string response =
        *length > max_line_bytes ? line_too_long(line, *length) : handle(line);
    if (response.empty()) continue;
    out << response << std::flush;
  }
}

gtp_session::reply gtp_session::dispatch(std::string_view command,
                                         const std::vector<std::string_view>& args) {
  const auto usage = [](std::string_view form) {
    return reply{false, "syntax error: expected " + std::string(form)};
  };

  if (command == "protocol_version") {
    if (!args.empty()) return usage("protocol_version");
    return {true, "2"};
  }
  if (command == "name") {
    if (!args.empty()) return usage("name");
    return {true, name_};
  }
  if (command == "version") {
    if (!args.empty()) return usage("version");
    return {true, version_};
  }
  if (command == "known_command") {
    if (args.size() != 1) return usage("known_command NAME");
    const bool known = std::find(command_names.begin(), command_names.end(), args[0]) !=
                       command_names.end();
    return {true, known ? "true" : "false"};
  }
  if (command == "list_commands") {
    if (!args.empty()) return usage("list_commands");
    std::string list;
    for (const std::string_view name : command_names) {
      list += name;
      list += '\n';
    }
    return {true, list};
  }
  if (command == "hexgui-analyze_commands") {
    if (!args.empty()) return usage("hexgui-analyze_commands");
    return {true, std::string(hexgui_analyze_commands)};
  }
  return dispatch_game(command, args);
}

gtp_session::reply gtp_session::dispatch_game(std::string_view command,
                                              const std::vector<std::string_view>& args) {
  const auto usage = [](std::string_view form) {
    return reply{false, "syntax error: expected " + std::string(form)};
  };
  if (command == "boardsize") return boardsize(args);
  if (command == "clear_board") {
    if (!args.empty()) return usage("clear_board");
    reset(game_.size());
    return {true, ""};
  }
  if (command == "play") return play(args);
  if (command == "genmove") return genmove(args);
  if (command == "showboard") {
    if (!args.empty()) return usage("showboard");
    return {true, "\n" + game_.render(position_)};
  }
  if (command == "final_score") {
    if (!args.empty()) return usage("final_score");
    if (game_.connected(position_, 1)) return {true, "B+"};
    if (game_.connected(position_, 2)) return {true, "W+"};
    return {false, "game not over"};
  }
  if (command == "undo") {
    if (!args.empty()) return usage("undo");
    return undo();
  }
  if (command == "time_settings") return time_settings_command(args);
  if (command == "time_left") return time_left(args);
  if (command == "param_game") return param_game(args);
  if (command == "quit") {
    if (!args.empty()) return usage("quit");
    quit_requested_ = true;
    return {true, ""};
  }
  return {false, "unknown command"};
}

gtp_session::reply gtp_session::boardsize(const std::vector<std::string_view>& args) {
  if (args.empty() || args.size() > 2) return {false, "syntax error: expected boardsize N [N]"};
  const std::optional<int> columns = parse_int(args[0]);
  const std::optional<int> rows = args.size() == 2 ? parse_int(args[1]) : columns;
  if (!columns || !rows) return {false, "syntax error: expected boardsize N [N]"};
  if (*columns != *rows) return {false, "non-square boards are not supported"};
  if (*columns < hex::min_size || *columns > hex::max_size) return {false, "invalid board size"};
  reset(*columns);
  return {true, ""};
}

gtp_session::reply gtp_session::play(const std::vector<std::string_view>& args) {
  if (args.size() != 2) return {false, "syntax error: expected play COLOR MOVE"};
  const std::optional<player> color = parse_color(args[0]);
  if (!color) return {false, "syntax error: invalid color '" + shown(args[0]) + "'"};
  const std::string text = lowered(args[1]);
  if (text == resign_answer) return {true, ""};  // the game record's business, not the board's
  const bool swap = text == game_.move_name(hex::swap_move);
  if (!swap && !well_formed_cell(text)) {
    return {false, "syntax error: invalid move text '" + shown(args[1]) + "'"};
  }
  if (game_over()) return {false, "game is over"};

  hex::state next = position_;
  next.to_move = *color;
  if (!swap) {
    const std::optional<hex::move> cell = game_.parse_cell(text);
    if (!cell) return {false, "invalid move"};
    if (game_.cell(next, *cell / game_.size(), *cell % game_.size()) != mcts::nobody) {
      return {false, "cell occupied"};
    }
  }
  const std::optional<hex::move> move = game_.parse_move(next, text);
  if (!move) return {false, "illegal move"};
  game_.apply(next, *move);
  history_.push_back(position_);
  position_ = next;
  return {true, ""};
}

gtp_session::reply gtp_session::genmove(const std::vector<std::string_view>& args) {
  if (args.size() != 1) return {false, "syntax error: expected genmove COLOR"};
  const std::optional<player> color = parse_color(args[0]);
  if (!color) return {false, "syntax error: invalid color '" + shown(args[0]) + "'"};
  if (game_over()) return {true, std::string(resign_answer)};

  hex::state next = position_;
  next.to_move = *color;
  const mcts::search_result<hex::move> result = search(next);
  if (clock_set_) {
    clock_state& mine = clocks_[*color - 1];
    mine = after_move(time_settings_, mine, result.seconds);
  }
  const bool resigns = should_resign(result);
  if (options_.log != nullptr && clock_set_) {
    const std::string answer =
        resigns ? std::string(resign_answer) : game_.move_name(result.best);
    *options_.log << fmt::format("seriema-hex: genmove {}: {} after {:.2f} s, {:.2f} s left\n",
                                 *color == 1 ? 'b' : 'w', answer, result.seconds,
                                 clocks_[*color - 1].seconds)
                  << std::flush;
  }
  if (resigns) return {true, std::string(resign_answer)};
  // The engine is trusted with nothing: a move outside the legal ones would corrupt the
  // position, so it is refused here.
  std::vector<hex::move> legal(game_.max_moves());
  legal.resize(game_.legal_moves(next, legal));
  if (std::find(legal.begin(), legal.end(), result.best) == legal.end()) {
    return {false, "engine chose an illegal move"};
  }
  game_.apply(next, result.best);
  history_.push_back(position_);
  position_ = next;
  return {true, game_.move_name(result.best)};
}

mcts::search_result<hex::move> gtp_session::search(const hex::state& position) {
  if (!clock_set_) return timed_search(position, 0);
  const time_budget budget =
      plan_move_time(time_settings_, clocks_[position.to_move - 1],
                     game_.empty_cells(position));
  mcts::search_result<hex::move> first = timed_search(position, budget.base);
  const double more = budget.maximum - first.seconds;
  // A proven position (the search's solver or df-pn beside it) needs no more time.
  if (first.proven_winner != mcts::nobody) return first;
  if (more < time_policy{}.min_seconds || !worth_extending(first.moves)) return first;
  return merged(first, timed_search(position, more));
}

mcts::search_result<hex::move> gtp_session::timed_search(const hex::state& position,
                                                         double seconds) {
  const auto start = std::chrono::steady_clock::now();
  mcts::search_result<hex::move> result = genmove_(game_, position, seconds);
  // What the clock is charged: the search's own time, or more as seen from here (the search
  // command's travel to the other ranks and the collectives after it count too).
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  result.seconds = std::max(result.seconds, took.count());
  return result;
}

bool gtp_session::should_resign(const mcts::search_result<hex::move>& result) const noexcept {
  if (options_.resign_threshold <= 0) return false;
  // A loss the solver proved needs no confidence threshold.
  if (result.proven_winner == mcts::opponent(position_.to_move)) return true;
  return result.win_rate < options_.resign_threshold &&
         result.rollouts >= options_.resign_min_rollouts &&
         position_.moves_played >= game_.size();
}

gtp_session::reply gtp_session::time_settings_command(const std::vector<std::string_view>& args) {
  const reply usage{false, "syntax error: expected time_settings MAIN_TIME BYO_YOMI_TIME "
                           "BYO_YOMI_STONES (seconds, seconds, moves)"};
  if (args.size() != 3) return usage;
  const std::optional<double> main_time = parse_seconds(args[0]);
  const std::optional<double> byo_yomi_time = parse_seconds(args[1]);
  const std::optional<int> byo_yomi_stones = parse_count(args[2]);
  if (!main_time || !byo_yomi_time || !byo_yomi_stones) return usage;
  if (*byo_yomi_time == 0 && *byo_yomi_stones > 0) {
    return {false, "byo-yomi stones without byo-yomi time"};
  }
  time_settings_ = {*main_time, *byo_yomi_time, *byo_yomi_stones};
  clock_set_ = !time_settings_.unlimited();
  settings_given_ = clock_set_;
  clocks_.fill(starting_clock(time_settings_));
  return {true, ""};
}

gtp_session::reply gtp_session::time_left(const std::vector<std::string_view>& args) {
  const reply usage{false, "syntax error: expected time_left COLOR TIME STONES"};
  if (args.size() != 3) return usage;
  const std::optional<player> color = parse_color(args[0]);
  const std::optional<double> seconds = parse_seconds(args[1]);
  const std::optional<int> stones = parse_count(args[2]);
  if (!color || !seconds || !stones) return usage;
  clocks_[*color - 1] = {*seconds, *stones};
  clock_set_ = true;
  return {true, ""};
}

gtp_session::reply gtp_session::param_game(const std::vector<std::string_view>& args) {
  if (args.empty()) {
    return {true, fmt::format("\n[bool] allow_swap {}", game_.swap_rule() ? 1 : 0)};
  }
  if (args.size() != 2) return {false, "syntax error: expected param_game [NAME VALUE]"};
  if (args[0] != "allow_swap") return {false, "unknown parameter: " + shown(args[0])};
  const std::optional<bool> allow = parse_bool(args[1]);
  if (!allow) return {false, "syntax error: allow_swap takes 0 or 1"};
  options_.swap_rule = *allow;
  if (*allow != game_.swap_rule()) {
    game_ = hex(game_.size(), *allow, options_.policy, options_.knowledge);
  }
  return {true, ""};
}

gtp_session::reply gtp_session::undo() {
  if (history_.empty()) return {false, "cannot undo"};
  position_ = history_.back();
  history_.pop_back();
  return {true, ""};
}

void gtp_session::reset(int size) {
  if (size != game_.size()) {
    game_ = hex(size, options_.swap_rule, options_.policy, options_.knowledge);
  }
  position_ = game_.initial_state();
  history_.clear();
  // A new game starts both clocks afresh under the time settings (a clock only time_left
  // stated is left as it was: the controller states it again).
  if (settings_given_) clocks_.fill(starting_clock(time_settings_));
}

bool gtp_session::game_over() const noexcept {
  return game_.connected(position_, 1) || game_.connected(position_, 2);
}

}  // namespace seriema::hex

// The Go Text Protocol session of the Hex program: line preprocessing, command dispatch and
// response framing (see gtp.hpp).
#include "gtp.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <exception>
#include <istream>
#include <optional>
#include <ostream>
#include <utility>

namespace seriema::hex {
namespace {

constexpr std::array<std::string_view, 14> command_names{
    "protocol_version", "name", "version", "known_command", "list_commands", "boardsize",
    "clear_board", "play", "genmove", "showboard", "final_score", "undo", "quit",
    "hexgui-analyze_commands"};

// What HexGui offers in its analyze menu ("type/label/command" per line, as GoGui reads them).
// HexGui asks for this list on every connect and shows an error when the command is unknown.
constexpr std::string_view hexgui_analyze_commands =
    "string/Show Board/showboard\nstring/Final Score/final_score";

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

// One response in GTP framing. The text loses its trailing newlines and any empty line inside
// it, since an empty line ends a response.
std::string framed(bool success, std::string_view id, std::string_view text) {
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

}  // namespace

gtp_session::gtp_session(engine genmove, std::string name, std::string version, int size,
                         bool swap_rule)
    : genmove_(std::move(genmove)),
      name_(std::move(name)),
      version_(std::move(version)),
      swap_rule_(swap_rule),
      game_(size, swap_rule),
      position_(game_.initial_state()) {}

std::string gtp_session::handle(std::string_view line) {
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
  while (!quit_requested_ && std::getline(in, line)) {
    const std::string response = handle(line);
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
  if (!color) return {false, "syntax error: invalid color '" + std::string(args[0]) + "'"};
  const std::string text = lowered(args[1]);
  const bool swap = text == game_.move_name(hex::swap_move);
  if (!swap && !well_formed_cell(text)) {
    return {false, "syntax error: invalid move text '" + std::string(args[1]) + "'"};
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
  if (!color) return {false, "syntax error: invalid color '" + std::string(args[0]) + "'"};
  if (game_over()) return {false, "game is over"};

  hex::state next = position_;
  next.to_move = *color;
  const hex::move move = genmove_(game_, next);
  // The engine is trusted with nothing: a move outside the legal ones would corrupt the
  // position, so it is refused here.
  std::vector<hex::move> legal(game_.max_moves());
  legal.resize(game_.legal_moves(next, legal));
  if (std::find(legal.begin(), legal.end(), move) == legal.end()) {
    return {false, "engine chose an illegal move"};
  }
  game_.apply(next, move);
  history_.push_back(position_);
  position_ = next;
  return {true, game_.move_name(move)};
}

gtp_session::reply gtp_session::undo() {
  if (history_.empty()) return {false, "cannot undo"};
  position_ = history_.back();
  history_.pop_back();
  return {true, ""};
}

void gtp_session::reset(int size) {
  if (size != game_.size()) game_ = hex(size, swap_rule_);
  position_ = game_.initial_state();
  history_.clear();
}

bool gtp_session::game_over() const noexcept {
  return game_.connected(position_, 1) || game_.connected(position_, 2);
}

}  // namespace seriema::hex

// Fuzzes the GTP command parser of seriema-hex: each input is up to 64 command lines for one
// session (the engine answers genmove with the first legal move, so nothing searches). A
// session never throws: every failure is answered with "?".
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gtp.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using seriema::hex::hex;
  auto first_legal = [](const hex& game, const hex::state& s, double) {
    std::vector<hex::move> moves(game.max_moves());
    if (game.legal_moves(s, moves) == 0) __builtin_trap();  // asked to move in a game over
    seriema::mcts::search_result<hex::move> result;
    result.best = moves.front();
    return result;
  };
  seriema::hex::gtp_session session(first_legal, "fuzz", "0", 5);
  std::string_view input(reinterpret_cast<const char*>(data), size);
  for (int lines = 0; lines < 64 && !input.empty() && !session.quit_requested(); ++lines) {
    const std::size_t newline = input.find('\n');
    const std::string_view line = input.substr(0, newline);
    const std::string response = session.handle(line);
    if (!response.empty() && response[0] != '=' && response[0] != '?') __builtin_trap();
    input = newline == std::string_view::npos ? std::string_view{} : input.substr(newline + 1);
  }
  return 0;
}

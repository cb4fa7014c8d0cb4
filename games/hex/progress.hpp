// A one-line progress bar for long searches on a terminal: the fraction of the budget done,
// the rollouts done and the live rollout rate, redrawn in place with '\r'.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace seriema::hex {

// Plugs into mcts::search_options::progress through callback(). Inactive (prints nothing) unless
// the file is a terminal, so piped or redirected output stays free of control characters.
// Thread-safety: none (the search calls progress from one thread, never concurrently).
class progress_bar {
 public:
  // `rollouts` and `seconds` are the budget of the search as in search_options (0: no bound of
  // that kind). `force` draws even when `file` is not a terminal.
  progress_bar(std::uint64_t rollouts, double seconds, std::FILE* file = stdout,
               bool force = false);
  progress_bar(const progress_bar&) = delete;  // callback() holds `this`
  progress_bar& operator=(const progress_bar&) = delete;
  ~progress_bar() { finish(); }

  [[nodiscard]] bool active() const noexcept { return active_; }
  // Redraws the line, at most every redraw_interval seconds of search time (the first update
  // always draws).
  void update(std::uint64_t rollouts_done, double seconds);
  // Clears the line, leaving the cursor at its start for what is printed next.
  void finish();
  // A search_options::progress that forwards to update(); valid while this bar lives.
  [[nodiscard]] std::function<void(std::uint64_t, double)> callback();

  static constexpr double redraw_interval = 0.1;
  static constexpr int bar_width = 30;

 private:
  std::uint64_t budget_rollouts_;
  double budget_seconds_;
  std::FILE* file_;
  bool active_;
  // The last drawn line: when (search seconds), at how many rollouts (for the live rate) and how
  // wide (a shorter line is padded to cover it). drawn_ is false before the first draw and after
  // finish().
  bool drawn_ = false;
  double drawn_seconds_ = 0;
  std::uint64_t drawn_rollouts_ = 0;
  std::size_t drawn_width_ = 0;
};

}  // namespace seriema::hex

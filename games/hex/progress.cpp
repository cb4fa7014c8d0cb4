// The terminal progress bar of long searches (see progress.hpp).
#include "progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>

namespace seriema::hex {

progress_bar::progress_bar(std::uint64_t rollouts, double seconds, std::FILE* file, bool force)
    : budget_rollouts_(rollouts),
      budget_seconds_(seconds),
      file_(file),
      active_(file != nullptr && (force || isatty(fileno(file)) == 1)) {}

void progress_bar::update(std::uint64_t rollouts_done, double seconds) {
  if (!active_) return;
  if (drawn_ && seconds - drawn_seconds_ < redraw_interval) return;

  double fraction = 0;
  if (budget_rollouts_ > 0) {
    fraction = static_cast<double>(rollouts_done) / static_cast<double>(budget_rollouts_);
  }
  if (budget_seconds_ > 0) fraction = std::max(fraction, seconds / budget_seconds_);
  fraction = std::clamp(fraction, 0.0, 1.0);

  // Live: over the interval since the last draw, so a slowing search shows it at once.
  double rate = 0;
  if (drawn_ && seconds > drawn_seconds_ && rollouts_done >= drawn_rollouts_) {
    rate = static_cast<double>(rollouts_done - drawn_rollouts_) / (seconds - drawn_seconds_);
  } else if (!drawn_ && seconds > 0) {
    rate = static_cast<double>(rollouts_done) / seconds;
  }

  // Rounded down (a bar is full only when the budget is spent), past binary-fraction noise
  // such as 0.29 * 100 = 28.999...
  const int filled = static_cast<int>(fraction * bar_width + 1e-9);
  const int percent = static_cast<int>(fraction * 100 + 1e-9);
  std::string line = "\r[";
  line.append(static_cast<std::size_t>(filled), '#');
  line.append(static_cast<std::size_t>(bar_width - filled), '.');
  char numbers[96];
  std::snprintf(numbers, sizeof numbers, "] %3d%%  %" PRIu64 " rollouts  %.0f rollouts/s", percent,
                rollouts_done, rate);
  line += numbers;
  const std::size_t width = line.size() - 1;
  if (width < drawn_width_) line.append(drawn_width_ - width, ' ');

  std::fputs(line.c_str(), file_);
  std::fflush(file_);
  drawn_ = true;
  drawn_seconds_ = seconds;
  drawn_rollouts_ = rollouts_done;
  drawn_width_ = std::max(width, drawn_width_);
}

void progress_bar::finish() {
  if (!drawn_) return;
  // Character by character: this runs in the destructor, where an allocation must not throw.
  std::fputc('\r', file_);
  for (std::size_t i = 0; i < drawn_width_; ++i) std::fputc(' ', file_);
  std::fputc('\r', file_);
  std::fflush(file_);
  drawn_ = false;
  drawn_width_ = 0;
}

std::function<void(std::uint64_t, double)> progress_bar::callback() {
  return [this](std::uint64_t rollouts_done, double seconds) { update(rollouts_done, seconds); };
}

}  // namespace seriema::hex

#include "sim/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include <fmt/format.h>

namespace tpusim {

std::string duration_text(double seconds) {
  const auto s = static_cast<std::uint64_t>(std::llround(std::max(0.0, seconds)));
  if (s < 60) return fmt::format("{} s", s);
  if (s < 3600) return fmt::format("{} min {} s", s / 60, s % 60);
  return fmt::format("{} h {} min", s / 3600, s % 3600 / 60);
}

std::string time_left_text(double elapsed_s, std::uint64_t done, std::uint64_t total, double spent_on_next_s) {
  if (done == 0 || done >= total) return "";
  const double left_s = elapsed_s / static_cast<double>(done) * static_cast<double>(total - done) - spent_on_next_s;
  return left_s < 1 ? "" : "about " + duration_text(left_s) + " left";
}

ProgressLine::ProgressLine(std::string what, double quiet_s)
    : what_(std::move(what)),
      quiet_s_(quiet_s),
      terminal_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

ProgressLine::~ProgressLine() { finish(); }

void ProgressLine::set(std::uint64_t done, std::uint64_t total, const std::string& detail) {
  if (done != done_) done_at_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  done_ = done;
  total_ = total;
  detail_ = detail;
  draw(true);
}

void ProgressLine::tick() { draw(false); }

void ProgressLine::draw(bool force) {
  if (!terminal_ || finished_) return;
  const auto now = std::chrono::steady_clock::now();
  const double elapsed_s = std::chrono::duration<double>(now - start_).count();
  if (elapsed_s < quiet_s_ || (!force && now - last_draw_ < std::chrono::milliseconds(250))) return;
  last_draw_ = now;
  std::string line = fmt::format("{}: {} of {}{}, {}", what_, done_, total_, detail_, duration_text(elapsed_s));
  // From the pace of the items finished so far, less the time already spent on the next one.
  if (const std::string left = time_left_text(done_at_s_, done_, total_, elapsed_s - done_at_s_); !left.empty())
    line += ", " + left;
  std::cerr << "\r\033[K" << line << std::flush;
  drawn_ = true;
}

void ProgressLine::finish() {
  if (finished_) return;
  finished_ = true;
  if (drawn_) std::cerr << "\r\033[K" << std::flush;
}

}  // namespace tpusim

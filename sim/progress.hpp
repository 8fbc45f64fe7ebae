// Progress of work that takes a while, on stderr: one line, rewritten in place on a terminal.
// Elsewhere (a pipe, a log file, a test capturing stderr) nothing is shown, so that logs hold
// results and errors, not a line per refresh.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace tpusim {

// "45 s", "3 min 10 s", "2 h 5 min": a wall-clock duration as a person reads it.
std::string duration_text(double seconds);

// "about 3 min 10 s left" for `done` of `total` items finished `elapsed_s` in, assuming the items
// left take what the finished ones took, less `spent_on_next_s` already spent on the next; "" before
// the first is done, after the last, or under a second.
std::string time_left_text(double elapsed_s, std::uint64_t done, std::uint64_t total, double spent_on_next_s = 0);

class ProgressLine {
 public:
  // `what` leads the line ("tpusim: simulating mlp_mnist"). Nothing is drawn for the first
  // `quiet_s` seconds: short work shows no line at all.
  explicit ProgressLine(std::string what, double quiet_s = 2.0);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // `done` of `total` steps (or items) finished; `detail` follows the count.
  void set(std::uint64_t done, std::uint64_t total, const std::string& detail = "");
  // Redraws (at most a few times a second) so that the elapsed time moves between counts.
  void tick();
  // Erases the line; later calls draw nothing.
  void finish();

 private:
  void draw(bool force);

  std::string what_;
  double quiet_s_;
  bool terminal_;
  bool drawn_ = false;
  bool finished_ = false;
  std::uint64_t done_ = 0, total_ = 0;
  double done_at_s_ = 0;  // when `done_` was reached, from the start
  std::string detail_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace tpusim

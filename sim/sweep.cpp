#include "sim/sweep.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/config.hpp"
#include "sim/csv.hpp"
#include "sim/digest.hpp"
#include "sim/errors.hpp"
#include "sim/interrupt.hpp"
#include "sim/json_input.hpp"
#include "sim/output_dir.hpp"
#include "sim/params.hpp"
#include "sim/progress.hpp"
#include "traces/report.hpp"
#include "traces/summary.hpp"

namespace tpusim {
namespace {

using ojson = nlohmann::ordered_json;
namespace fs = std::filesystem;

struct Point {
  std::size_t index = 0;
  std::string id;                                          // "003_global_batch=1024"
  std::vector<std::pair<std::string, std::string>> values;  // one per axis
  std::string hw = "tpu_v2";
  std::string topology;
  std::vector<std::string> sets;
};

std::string short_key(const std::string& key) {
  if (key == "hw.slice.count") return "slices";  // "count" alone says nothing
  const auto dot = key.rfind('.');
  return dot == std::string::npos ? key : key.substr(dot + 1);
}

std::string safe(const std::string& text) {
  std::string out;
  for (char c : text) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' || c == '=') ? c : '_';
  return out.substr(0, 60);
}

std::vector<Point> expand(const SweepRequest& r) {
  std::vector<Point> points(1);
  for (const auto& axis : r.axes) {
    std::vector<Point> next;
    for (const auto& p : points)
      for (const auto& v : axis.values) {
        Point q = p;
        q.values.emplace_back(axis.key, v);
        next.push_back(q);
      }
    points = std::move(next);
  }
  for (std::size_t i = 0; i < points.size(); ++i) {
    Point& p = points[i];
    p.index = i;
    p.hw = r.fixed_hw;
    p.topology = r.fixed_topology;
    std::string name = fmt::format("{:03}", i);
    p.sets = r.sets;
    for (const auto& [key, value] : p.values) {
      name += "_" + short_key(key) + "=" + value;
      if (key == "hw") p.hw = value;
      else if (key == "topology") p.topology = value;
      else p.sets.push_back(key + "=" + value);
    }
    p.id = safe(name);
  }
  return points;
}

// The row of one point: what varied, how it ended, and its summary.
SweepRow row_of(const Point& p, const std::string& status, const std::string& reason, const ojson& summary) {
  SweepRow row;
  row.point = p.id;
  row.index = p.index;
  row.status = status;
  row.reason = reason;
  for (const auto& [key, value] : p.values) row.varied.emplace_back(key, value);
  row.summary = summary;
  return row;
}

std::string last_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

void write_atomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    if (!out) throw SimError(fmt::format("writing {} failed", tmp.string()));
  }
  fs::rename(tmp, path);
}

std::string csv_cell(const ojson& v) {
  return csv_field(v.is_string() ? v.get<std::string>() : v.is_null() ? "" : v.dump());
}

// What to pick is the question a sweep over presets and slices answers, and these orders are its
// usual answers: samples per USD (most first), time to train (least first) and, with failures
// stated, what a slice delivers once its failures and checkpoints are paid (most first). Each is a
// rank_<name> column of sweep.csv.
struct Ranking {
  const char* name;
  std::optional<double> (*figure)(const RunSummary&);  // empty: the point has none
  bool higher_is_better;
};
constexpr Ranking kRankings[] = {
    {"samples_per_usd", [](const RunSummary& s) { return s.cost ? s.cost->samples_per_usd : std::nullopt; }, true},
    {"time_to_train_s", [](const RunSummary& s) { return s.cost ? s.cost->time_to_train_s : std::nullopt; }, false},
    {"goodput_samples_per_s",
     [](const RunSummary& s) { return s.goodput ? std::optional(s.goodput->samples_per_s) : std::nullopt; }, true}};

// The summary of a row whose point finished its steps.
std::optional<RunSummary> ok_summary(const SweepRow& row) { return row.ok() ? row.run_summary() : std::nullopt; }

// One row per finished point, in point order; snake_case headers: point, status, reason, the
// varied keys, then every summary figure.
std::string csv_of(const std::vector<SweepRow>& rows, const std::vector<SweepAxisValues>& axes) {
  std::vector<std::string> columns = {"point", "status", "reason"};
  for (const auto& a : axes) columns.push_back("vary_" + safe(a.key));
  for (const Ranking& r : kRankings) columns.push_back(std::string("rank_") + r.name);
  std::vector<std::vector<std::pair<std::string, ojson>>> flat;
  for (const auto& row : rows) {
    flat.push_back(flatten_json(row.summary, "_"));
    for (const auto& [k, v] : flat.back())
      if (std::find(columns.begin(), columns.end(), k) == columns.end()) columns.push_back(k);
  }
  for (auto& c : columns)
    for (auto& ch : c)
      if (ch == '.') ch = '_';
  std::string text;
  for (std::size_t i = 0; i < columns.size(); ++i) text += (i ? "," : "") + columns[i];
  text += "\n";
  for (std::size_t r = 0; r < rows.size(); ++r) {
    std::map<std::string, ojson> cells;
    cells["point"] = rows[r].point;
    cells["status"] = rows[r].status;
    cells["reason"] = rows[r].reason;
    for (const auto& [k, v] : rows[r].rank) cells["rank_" + k] = v ? ojson(*v) : ojson(nullptr);
    for (const auto& [k, v] : rows[r].varied) {
      std::string col = "vary_" + safe(k);
      for (auto& ch : col)
        if (ch == '.') ch = '_';
      cells[col] = v;
    }
    for (const auto& [k, v] : flat[r]) {
      std::string col = k;
      for (auto& ch : col)
        if (ch == '.') ch = '_';
      cells[col] = v;
    }
    for (std::size_t i = 0; i < columns.size(); ++i) text += (i ? "," : "") + (cells.count(columns[i]) ? csv_cell(cells[columns[i]]) : "");
    text += "\n";
  }
  return text;
}

SweepDocument sweep_header(const std::string& workload_path, const std::vector<SweepAxis>& axes, std::size_t point_count) {
  SweepDocument sweep;
  sweep.workload = workload_path;
  sweep.axes.emplace();
  for (const auto& a : axes) sweep.axes->push_back({a.key, a.values});
  sweep.points = point_count;
  return sweep;
}

// Each row's place among the finished points by each ranking, 1 the best and ties sharing a
// place; null where the point has no such figure (no price, no stated dataset or failure rate,
// not finished).
std::vector<SweepRow> with_ranks(std::vector<SweepRow> rows) {
  std::vector<std::optional<RunSummary>> summaries;
  for (auto& row : rows) {
    summaries.push_back(ok_summary(row));
    row.rank.clear();  // a shard's ranks were among its own points only
  }
  for (const Ranking& r : kRankings) {
    std::vector<std::optional<double>> figures;
    std::vector<double> values;
    for (const auto& s : summaries) {
      figures.push_back(s ? r.figure(*s) : std::nullopt);
      if (figures.back()) values.push_back(*figures.back());
    }
    for (std::size_t i = 0; i < rows.size(); ++i) {
      std::optional<std::uint64_t> place;
      if (const auto x = figures[i])
        place = 1 + std::count_if(values.begin(), values.end(), [&](double y) { return r.higher_is_better ? y > *x : y < *x; });
      rows[i].rank.emplace_back(r.name, place);
    }
  }
  return rows;
}

// sweep.json, sweep.csv and report.html of the finished rows (in point order), each replaced
// atomically so that a reader never sees half a file.
void write_sweep_outputs(const fs::path& dir, SweepDocument sweep, const std::vector<SweepRow>& rows_as_run) {
  sweep.rows = with_ranks(rows_as_run);
  const std::vector<SweepRow>& rows = sweep.rows;
  // An interrupted point has a row, but it did not finish.
  const auto interrupted =
      static_cast<std::size_t>(std::count_if(rows.begin(), rows.end(), [](const SweepRow& row) { return row.interrupted(); }));
  sweep.finished = rows.size() - interrupted;
  sweep.interrupted = interrupted;
  write_atomically(dir / "sweep.json", to_json(sweep).dump(2) + "\n");
  write_atomically(dir / "sweep.csv", csv_of(rows, sweep.axes.value_or(std::vector<SweepAxisValues>{})));
  // The timeline of the point with the highest throughput, from its own directory.
  const SweepRow* best = nullptr;
  double best_samples_per_s = 0;
  for (const auto& row : rows)
    if (const auto s = ok_summary(row); s && s->samples_per_s && (!best || *s->samples_per_s > best_samples_per_s)) {
      best = &row;
      best_samples_per_s = *s->samples_per_s;
    }
  ojson timeline;
  if (best) {
    std::ifstream in(dir / "points" / best->point / "timeline.json");
    try {
      if (in) timeline = parse_bounded<ojson>(in, "timeline.json");
    } catch (const std::exception&) {  // damaged: the report goes without it
      timeline = nullptr;
    }
  }
  write_atomically(dir / "report.html",
                   render_sweep_report(sweep, timeline, best ? best->point : std::string()));
}

}  // namespace

std::pair<unsigned, unsigned> parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  const auto number = [](const std::string& t) -> unsigned {
    if (t.empty() || t.size() > 6 || t.find_first_not_of("0123456789") != std::string::npos) return 0;
    return static_cast<unsigned>(std::stoul(t));
  };
  const unsigned k = slash == std::string::npos ? 0 : number(text.substr(0, slash));
  const unsigned n = slash == std::string::npos ? 0 : number(text.substr(slash + 1));
  if (k == 0 || n == 0 || k > n)
    throw InputError(fmt::format("--shard {}: expected K/N with 1 <= K <= N (e.g. 2/4: the second of four shards)", text));
  return {k, n};
}

namespace {

constexpr const char* kSweepLock = ".tpusim-lock";

// Holds an exclusive lock on DIR/.tpusim-lock while a sweep writes into DIR, so that a second
// sweep (or merge) into the same directory is refused instead of interleaving with it. The file
// goes with the lock: a finished sweep leaves none behind.
class DirectoryLock {
 public:
  DirectoryLock(const fs::path& dir, const std::string& shown) : path_(dir / kSweepLock) {
    for (int attempt = 0;; ++attempt) {
      fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      if (fd_ < 0) throw InputError(fmt::format("-o {}: cannot create the output directory ({})", shown, std::strerror(errno)));
      if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        ::close(fd_);
        throw InputError(fmt::format("-o {}: another tpusim sweep or merge is writing into this directory", shown));
      }
      // The sweep that held the lock removes the file as it lets go: a lock on a file it had
      // just removed would keep no one out, so the lock counts only on the file at the path.
      struct stat held {}, named {};
      if (::fstat(fd_, &held) == 0 && ::stat(path_.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
          held.st_ino == named.st_ino)
        return;
      ::close(fd_);
      if (attempt == 100) throw InputError(fmt::format("-o {}: cannot lock the directory", shown));
    }
  }
  ~DirectoryLock() {
    ::unlink(path_.c_str());
    ::close(fd_);
  }
  // The point processes hold the lock too (the descriptor is inherited across their exec): a
  // sweep killed with SIGKILL leaves its points closing their outputs, and until the last has
  // ended, no second sweep or resume can start into the directory.
  void share_with_child() const { ::fcntl(fd_, F_SETFD, 0); }
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  fs::path path_;
  int fd_ = -1;
};

// Readies a locked sweep or merge directory: with `replace`, whatever an earlier sweep left there
// goes (check_replaceable vouched that tpusim wrote it all); the marker lists what this one
// writes, the logs of `point_ids` among them; points/ exists.
void ready_directory(const fs::path& dir, const std::string& shown, const std::string& kind, bool replace,
                     const std::vector<std::string>& point_ids) {
  std::error_code ec;
  if (replace)
    for (const auto& entry : fs::directory_iterator(dir, ec))
      if (entry.path().filename() != kSweepLock) fs::remove_all(entry.path(), ec);
  std::vector<std::string> written = {"sweep.json", "sweep.csv", "report.html", "points", kSweepLock};
  for (const auto& id : point_ids) written.push_back("points/" + id + ".log");
  write_output_marker(dir, kind, written);
  fs::create_directories(dir / "points", ec);
  if (ec || !fs::is_directory(dir / "points")) throw InputError(fmt::format("-o {}: cannot create the output directory", shown));
}

// Everything that decides the points' results; --resume refuses when any of it differs.
// `files_read`: every file the points' configurations read (workload, hardware files, presets,
// imported models), whose contents are recorded as digests, with the tpusim binary's own.
ojson sweep_arguments(const SweepRequest& r, const std::vector<std::string>& files_read) {
  ojson axes = ojson::array();
  for (const auto& a : r.axes) axes.push_back({{"key", a.key}, {"values", a.values}});
  return {{"workload", r.workload_path},
          {"inputs_fnv1a64", input_digests(files_read)},
          {"tpusim_fnv1a64", file_fnv1a64(r.self_exe)},
          {"hw", r.fixed_hw},
          {"topology", r.fixed_topology},
          {"sets", r.sets},
          {"axes", axes},
          {"trace", r.trace},
          {"max_memory", r.max_memory},
          {"shard", fmt::format("{}/{}", r.shard_index, r.shard_count)}};
}

// Whether a point's summary records the inputs and binary this sweep runs with: each file it
// read has the digest the sweep's arguments give it, and the tpusim binary is the same.
bool made_by_these_inputs(const RunSummary& summary, const ojson& arguments) {
  if (summary.tpusim_fnv1a64 != arguments["tpusim_fnv1a64"] || summary.inputs_fnv1a64.empty()) return false;
  const ojson recorded = digests_of_lines(summary.inputs_fnv1a64);
  if (recorded.is_null()) return false;
  const ojson& now = arguments["inputs_fnv1a64"];
  for (const auto& [file, digest] : recorded.items())
    if (!now.contains(file) || now[file] != digest) return false;
  return true;
}

// The summary of a finished point, or null: a missing or damaged summary, or an interrupted point.
ojson finished_point_summary(const fs::path& point_dir) {
  const fs::path path = point_dir / "summary.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) return nullptr;
  ojson summary;
  try {
    summary = parse_bounded<ojson>(in, path.string());
  } catch (const std::exception&) {
    return nullptr;
  }
  const RunSummary finished = run_summary_from_json(summary);
  if (finished.status.empty() || finished.interrupted()) return nullptr;
  return summary;
}

// The summary of a point that --resume keeps, or null: one not finished, or whose own record of
// its inputs and binary differs from this sweep's (a point copied in from another sweep, or
// finished by another binary), runs again.
ojson kept_point_summary(const fs::path& point_dir, const ojson& arguments) {
  ojson summary = finished_point_summary(point_dir);
  return summary.is_null() || !made_by_these_inputs(run_summary_from_json(summary), arguments) ? ojson(nullptr) : summary;
}

// --resume keeps finished points only when it can show they are this sweep's: the record of what
// they ran with (sweep.json's "arguments") must exist and match, down to the contents of every
// file read and the tpusim binary itself.
void check_same_arguments(const fs::path& dir, const ojson& arguments, const std::string& shown) {
  std::error_code ec;
  bool any_point = false;  // a point that a resume would keep
  for (fs::directory_iterator it(dir / "points", ec), end; !ec && it != end && !any_point; it.increment(ec))
    any_point = !finished_point_summary(it->path()).is_null();
  const std::string start_over = "pass --force instead of --resume to start over";
  ojson before;
  std::ifstream in(dir / "sweep.json", std::ios::binary);
  try {
    if (in) before = parse_bounded<ojson>(in, (dir / "sweep.json").string());
  } catch (const std::exception&) {
    before = nullptr;
  }
  const std::optional<ojson> recorded = sweep_document_from_json(before).arguments;
  if (!recorded || !recorded->is_object()) {
    if (!any_point) return;  // interrupted before its first point finished: nothing to keep
    throw InputError(fmt::format("--resume: -o {} holds finished points but no readable record of what they ran with "
                                 "(sweep.json); {}", shown, start_over));
  }
  const ojson& was = *recorded;
  const auto old_value = [&](const std::string& key) { return was.contains(key) ? was[key] : ojson(); };
  const ojson old_inputs = old_value("inputs_fnv1a64").is_object() ? old_value("inputs_fnv1a64") : ojson::object();
  for (const auto& [file, digest] : arguments["inputs_fnv1a64"].items()) {
    const ojson old = old_inputs.contains(file) ? old_inputs[file] : ojson();
    if (old.is_null())
      throw InputError(fmt::format("--resume: the sweep in -o {} did not read {}, this one does; {}", shown, file, start_over));
    if (old != digest)
      throw InputError(fmt::format("--resume: {} changed since the sweep in -o {} ran (its contents differ); {}", file,
                                   shown, start_over));
  }
  for (const auto& [file, digest] : old_inputs.items())
    if (!arguments["inputs_fnv1a64"].contains(file))
      throw InputError(fmt::format("--resume: the sweep in -o {} read {}, this one does not; {}", shown, file, start_over));
  if (old_value("tpusim_fnv1a64") != arguments["tpusim_fnv1a64"])
    throw InputError(fmt::format("--resume: the sweep in -o {} ran with another tpusim binary, whose results may differ; {}",
                                 shown, start_over));
  for (const auto& [key, value] : arguments.items()) {
    const ojson old = old_value(key);
    if (old != value)
      throw InputError(fmt::format("--resume: the sweep in -o {} ran with {} {}, this one with {}; resume it with the "
                                   "same arguments, or {}", shown, key, old.dump(), value.dump(), start_over));
  }
}

// The points that count against the exit code, as the closing line states them: failed (an oom
// is a result, not a failure) and interrupted (it has a row, but it did not finish).
struct Unfinished {
  std::size_t failed = 0, interrupted = 0;

  void count(const std::string& status) {
    if (status == "interrupted") ++interrupted;
    else if (status != "ok" && status != "oom") ++failed;
  }
  std::size_t total() const { return failed + interrupted; }
  // Follows "N failed" in the closing line, only when a point was interrupted.
  std::string interrupted_note() const { return interrupted == 0 ? "" : fmt::format(", {} interrupted", interrupted); }
};

// The mistakes a request shows by itself, refused before any configuration loads.
void check_sweep_request(const SweepRequest& r) {
  if (r.axes.empty()) throw InputError("sweep: nothing varies (give --vary KEY=V1,V2,... or --hw A,B)");
  // One axis per key: a second would label points with values that were not simulated.
  auto same_key = [](const std::string& key) { return key == "hw.slice.topology" ? std::string("topology") : key; };
  for (std::size_t i = 0; i < r.axes.size(); ++i) {
    const std::string key = same_key(r.axes[i].key);
    if (key == "topology" && !r.fixed_topology.empty())
      throw InputError(fmt::format("--vary {}: the topology is fixed by --topology {}; give the values there, "
                                   "comma-separated", r.axes[i].key, r.fixed_topology));
    for (std::size_t j = 0; j < i; ++j)
      if (same_key(r.axes[j].key) == key)
        throw InputError(fmt::format("sweep: {} varies twice ({} and {}); give its values once, comma-separated",
                                     key, r.axes[j].key == "topology" ? "--topology" : "--vary " + r.axes[j].key,
                                     r.axes[i].key == "topology" ? "--topology" : "--vary " + r.axes[i].key));
  }
  if (r.jobs == 0 || r.jobs > 256) throw InputError(fmt::format("-j {}: expected 1 to 256", r.jobs));
  if (r.shard_count == 0 || r.shard_index == 0 || r.shard_index > r.shard_count)
    throw InputError(fmt::format("--shard {}/{}: expected K/N with 1 <= K <= N", r.shard_index, r.shard_count));
}

bool in_shard(const SweepRequest& r, const Point& p) { return p.index % r.shard_count == r.shard_index - 1; }

struct PointConfigs {
  std::vector<std::string> errors;      // by point index: why its configuration is refused (empty: it loads)
  std::vector<std::string> inputs;      // what the points read: never inside the output directory
  std::vector<std::string> files_read;  // what decides their results
};

// Every point's configuration must load before anything runs: a typo fails the sweep, not 1000 points.
PointConfigs load_point_configs(const SweepRequest& r, const std::vector<Point>& points, bool hw_given) {
  PointConfigs loaded;
  loaded.errors.resize(points.size());
  for (const Point& p : points) {
    ConfigRequest c;
    c.workload_path = r.workload_path;
    c.hw = p.hw;
    c.hw_given = hw_given;
    c.topology = p.topology;
    c.sets = p.sets;
    for (auto& file : input_files(c)) loaded.inputs.push_back(std::move(file));
    try {
      const Config config = load_config(c);
      loaded.files_read.insert(loaded.files_read.end(), config.files_read.begin(), config.files_read.end());
    } catch (const InputError& e) {
      const std::string what = e.what();
      // An unknown key is the sweep's mistake; a combination the hardware or the model refuses
      // (a v4 slice of 4x4, a batch that does not divide) is that point's result, a row with
      // its reason, so that v4 and v5e can be compared at the chip counts both have.
      if (what.find("unknown key") != std::string::npos) throw InputError(fmt::format("sweep point {}: {}", p.id, what));
      loaded.errors[p.index] = what;
    }
  }
  // When no point can run, the mistake is the sweep's (a malformed value), not a combination's.
  if (std::all_of(loaded.errors.begin(), loaded.errors.end(), [](const std::string& e) { return !e.empty(); }))
    throw InputError(fmt::format("sweep point {}: {}", points.front().id, loaded.errors.front()));

  for (auto* files : {&loaded.inputs, &loaded.files_read}) {
    std::sort(files->begin(), files->end());
    files->erase(std::unique(files->begin(), files->end()), files->end());
  }
  return loaded;
}

// An existing output directory is continued only with --resume and only as a sweep's, and
// replaced only with --force and only when tpusim wrote all of it.
void check_sweep_directory(const SweepRequest& r, const fs::path& dir, bool existed) {
  if (existed && r.resume && output_kind(dir) != "sweep")
    throw InputError(fmt::format("-o {}: --resume continues a sweep, and this directory is not a sweep's output", r.out_dir));
  if (existed && !r.resume) {
    if (!r.force)
      throw InputError(fmt::format("-o {}: the directory exists; pass --resume to continue it or --force to replace it", r.out_dir));
    check_replaceable(dir, r.out_dir);
  }
}

std::vector<std::string> point_ids(const std::vector<Point>& points) {
  std::vector<std::string> ids;
  for (const Point& p : points) ids.push_back(p.id);
  return ids;
}

// This shard's points from the first result to the last: their rows, the counts and the progress
// line. The table is published again as each point ends, so that a sweep interrupted or killed
// leaves the table of what finished.
class SweepRun {
 public:
  SweepRun(const SweepRequest& r, const std::vector<Point>& points, const fs::path& dir, const ojson& arguments,
           bool hw_given, const DirectoryLock& lock)
      : r_(r),
        points_(points),
        dir_(dir),
        arguments_(arguments),
        hw_given_(hw_given),
        lock_(lock),
        shard_points_(static_cast<std::size_t>(
            std::count_if(points.begin(), points.end(), [&r](const Point& p) { return in_shard(r, p); }))),
        rows_(points.size()),
        finished_(points.size(), false),
        start_(std::chrono::steady_clock::now()) {}

  void publish() const {
    std::vector<SweepRow> ready;
    for (std::size_t i = 0; i < points_.size(); ++i)
      if (finished_[i]) ready.push_back(rows_[i]);
    SweepDocument sweep = sweep_header(r_.workload_path, r_.axes, points_.size());
    if (r_.shard_count > 1) sweep.shard = fmt::format("{}/{}", r_.shard_index, r_.shard_count);
    sweep.arguments = arguments_;
    write_sweep_outputs(dir_, sweep, ready);
  }

  // Resumed points and points whose configuration the model refuses need no process; returns the
  // shard's other points, the ones to simulate.
  std::vector<const Point*> finish_without_process(const std::vector<std::string>& config_errors) {
    std::vector<const Point*> todo;
    for (const Point& p : points_) {
      if (!in_shard(r_, p)) continue;
      const ojson resumed = r_.resume ? kept_point_summary(dir_ / "points" / p.id, arguments_) : ojson(nullptr);
      if (!resumed.is_null()) {
        finish_with_summary(p, resumed, 0);
      } else if (!config_errors[p.index].empty()) {
        finish(p, "input_error", config_errors[p.index], nullptr, 0);
      } else {
        todo.push_back(&p);
      }
    }
    return todo;
  }

  // Runs the points, -j of them at once, until all have ended or an interrupt has ended them.
  void simulate(const std::vector<const Point*>& todo) {
    struct Running {
      const Point* point;
      std::chrono::steady_clock::time_point start;
    };
    std::map<pid_t, Running> running;
    std::size_t next = 0;
    bool passed_on = false;  // an interrupt was passed on to the running points
    while (next < todo.size() || !running.empty()) {
      if (const int sig = interrupt_signal(); sig != 0 && !passed_on) {
        // Interrupted: start nothing more, pass the signal on to the running points (each closes
        // its outputs as partial) and collect them.
        next = todo.size();
        for (const auto& [child, run] : running) ::kill(child, sig);
        passed_on = true;
      }
      while (next < todo.size() && running.size() < r_.jobs) {
        const Point& p = *todo[next++];
        const pid_t pid = start_point(p);
        running[pid] = {&p, std::chrono::steady_clock::now()};
      }
      if (running.empty()) continue;
      // Polled, so that a signal arriving between the check above and a blocking wait is not
      // left waiting for a point that may run for hours.
      int wait_status = 0;
      const pid_t pid = ::waitpid(-1, &wait_status, WNOHANG);
      if (pid == 0 || (pid < 0 && errno == EINTR)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      if (pid < 0) break;
      const auto it = running.find(pid);
      if (it == running.end()) continue;
      const Point& p = *it->second.point;
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - it->second.start).count();
      running.erase(it);
      finish_ended_process(p, wait_status, secs, passed_on);
    }
  }

  // Prints the closing line; returns the number of points that did not finish ok or oom.
  int conclude() const {
    std::cerr << fmt::format("tpusim sweep: {} points in {:.1f} s, {} failed{}; {}/sweep.csv\n", shard_points_,
                             std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(),
                             unfinished_.failed, unfinished_.interrupted_note(), r_.out_dir);
    return static_cast<int>(unfinished_.total());  // an interrupted point is not a finished one
  }

 private:
  std::string log_path(const Point& p) const { return (dir_ / "points" / (p.id + ".log")).string(); }

  std::vector<std::string> run_arguments(const Point& p) const {
    const fs::path out = dir_ / "points" / p.id;
    std::vector<std::string> args = {r_.self_exe, "run", r_.workload_path, "-o", out.string(), "--force", "--trace", r_.trace};
    if (hw_given_) args.insert(args.end(), {"--hw", p.hw});
    if (!p.topology.empty()) args.insert(args.end(), {"--topology", p.topology});
    if (!r_.max_memory.empty()) args.insert(args.end(), {"--max-memory", r_.max_memory});
    for (const auto& s : p.sets) args.insert(args.end(), {"--set", s});
    return args;
  }

  // Starts the point's `tpusim run` in a process of its own, its output going to its log.
  pid_t start_point(const Point& p) const {
    const std::string log = log_path(p);
    std::vector<std::string> args = run_arguments(p);
    const pid_t sweep_pid = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) throw SimError("sweep: cannot start a process");
    if (pid == 0) {
      // The point ends as interrupted (its outputs closed as partial) when the sweep dies,
      // even by SIGKILL, which the sweep cannot pass on; a sweep already gone by now is seen
      // by the parent's pid.
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != sweep_pid) ::_exit(128 + SIGTERM);
      lock_.share_with_child();
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(r_.self_exe.c_str(), argv.data());
      ::_exit(127);
    }
    return pid;
  }

  // The row of a point whose process ended: what its summary says, if it wrote one; otherwise
  // interrupted, or failed with the last line of its log as the reason.
  void finish_ended_process(const Point& p, int wait_status, double secs, bool passed_on) {
    const int code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
    const fs::path summary = dir_ / "points" / p.id / "summary.json";
    const std::string log = log_path(p);
    const auto interrupt = [](int sig) { return sig == SIGINT || sig == SIGTERM || sig == SIGHUP; };
    const bool stopped = interrupt(code - 128);
    if ((code == 0 || stopped) && fs::exists(summary)) {
      std::ifstream in(summary);
      const ojson s = parse_bounded<ojson>(in, summary.string());
      finish_with_summary(p, s, secs);
    } else if (passed_on && (stopped || (WIFSIGNALED(wait_status) && interrupt(WTERMSIG(wait_status))))) {
      // The interrupt reached the point before it could close its outputs (still starting up,
      // its handler not yet installed): interrupted like the others, not a failure, and run
      // again by --resume.
      finish(p, "interrupted", "interrupted before it wrote a summary", nullptr, secs);
    } else {
      std::string reason = last_line(log);
      for (const std::string prefix : {"tpusim: ", "error: ", "simulation error: "})
        if (reason.rfind(prefix, 0) == 0) reason = reason.substr(prefix.size());
      finish(p, code == 2 ? "input_error" : "sim_error", reason, nullptr, secs);
    }
  }

  // A point's own summary gives its status; its first warning says why it is not ok.
  void finish_with_summary(const Point& p, const ojson& summary, double secs) {
    const RunSummary s = run_summary_from_json(summary);
    finish(p, s.status, s.ok() || s.warnings.empty() ? "" : s.warnings[0], summary, secs);
  }

  void finish(const Point& p, const std::string& status, const std::string& reason, const ojson& summary, double secs) {
    rows_[p.index] = row_of(p, status, reason, summary);
    finished_[p.index] = true;
    ++done_;
    unfinished_.count(status);
    publish();
    std::string what = status;
    if (status == "ok") {
      if (const auto step_s = run_summary_from_json(summary).step_time_s) what = fmt::format("ok, step {:.3f} ms", *step_s * 1e3);
    } else if (!reason.empty()) what += ": " + reason;
    // The time left from the points simulated so far: resumed and refused ones took none.
    if (secs > 0) ++simulated_;
    const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const std::string left = simulated_ == 0 ? "" : time_left_text(elapsed_s, simulated_, simulated_ + (shard_points_ - done_));
    std::cerr << fmt::format("tpusim sweep: [{}/{}] {}: {} ({:.1f} s{})\n", done_, shard_points_, p.id, what, secs,
                             left.empty() ? "" : "; " + left);
  }

  const SweepRequest& r_;
  const std::vector<Point>& points_;
  const fs::path dir_;
  const ojson& arguments_;
  const bool hw_given_;
  const DirectoryLock& lock_;
  const std::size_t shard_points_;
  std::vector<SweepRow> rows_;
  std::vector<bool> finished_;
  std::size_t done_ = 0, simulated_ = 0;
  Unfinished unfinished_;
  const std::chrono::steady_clock::time_point start_;
};

using MergedRows = std::map<std::size_t, std::pair<SweepRow, fs::path>>;  // point index -> row, the shard it came from

// A shard's sweep.json, with what merge reads of it (its rows are checked one by one, by
// check_shard_row). `shown`: the shard's directory as given.
ojson read_shard_sweep(const fs::path& dir, const std::string& shown) {
  std::ifstream in(dir / "sweep.json");
  if (!in) throw InputError(fmt::format("merge: {}: no sweep.json (not the output directory of a sweep)", shown));
  ojson sweep;
  try {
    sweep = parse_bounded<ojson>(in, shown + "/sweep.json");
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("merge: {}/sweep.json: not JSON: {}", shown, e.what()));
  }
  std::vector<std::string> unread;
  const SweepDocument read = sweep_document_from_json(sweep, &unread);
  if (!read.axes) unread.push_back("axes");
  if (!sweep.is_object() || !unread.empty())
    throw InputError(fmt::format("merge: {}/sweep.json: no \"{}\" as a sweep writes it", shown,
                                 unread.empty() ? "workload" : unread.front()));
  return sweep;
}

// The shards of one sweep differ only in which shard they are.
void check_same_sweep(const ojson& sweep_json, const ojson& first_json, const std::string& shown, const std::string& first_shown) {
  // What the shards of one sweep must share: everything but the shard's place and its rows.
  auto unsharded = [](const ojson& json) {
    SweepDocument s = sweep_document_from_json(json);
    if (s.arguments && s.arguments->is_object()) s.arguments->erase("shard");
    s.shard.reset();
    s.finished.reset();
    s.interrupted.reset();
    s.rows.clear();
    return to_json(s);
  };
  const ojson sweep = unsharded(sweep_json), first = unsharded(first_json);
  std::vector<std::string> keys;
  for (const ojson* s : {&sweep, &first})
    for (const auto& [key, value] : s->items())
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  for (const std::string& key : keys)
    if (!sweep.contains(key) || !first.contains(key) || sweep[key] != first[key])
      throw InputError(fmt::format("merge: {}/sweep.json: \"{}\" differ{} from {}'s: not a shard of the same sweep", shown, key,
                                   key == "arguments" ? "" : "s", first_shown));
}

// A row of the shard in `dir` that merge can take: complete, naming its point as tpusim names them.
SweepRow check_shard_row(const ojson& json, const fs::path& dir, const std::string& shown) {
  std::vector<std::string> unread;
  SweepRow row = sweep_row_from_json(json, &unread);
  if (!row.index) unread.insert(unread.begin(), "index");
  if (!json.is_object() || !unread.empty() || !(row.summary.is_object() || row.summary.is_null()))
    throw InputError(fmt::format("merge: {}/sweep.json: a row without {} as a sweep writes them (written by an older tpusim?)",
                                 shown, json.is_object() && !unread.empty() ? fmt::format("\"{}\"", fmt::join(unread, "\", \""))
                                                                            : "its point, status and summary"));
  const std::string id = row.point;
  if (id.empty() || id == "." || id == ".." || safe(id) != id)
    throw InputError(fmt::format("merge: {}/sweep.json: point \"{}\" is not a point name tpusim writes", shown, id));
  // What merge copies must be what the shard's sweep wrote: a point directory or log that
  // is a symbolic link, or holds a file tpusim did not write, would copy another's data.
  std::error_code link_ec;
  for (const fs::path& written : {dir / "points" / id, dir / "points" / (id + ".log")})
    if (fs::is_symlink(fs::symlink_status(written, link_ec)))
      throw InputError(fmt::format("merge: {} is a symbolic link; a shard's points are what its sweep wrote", written.string()));
  if (fs::exists(dir / "points" / id))
    if (const auto foreign = foreign_entry(dir / "points" / id))
      throw InputError(fmt::format("merge: {} is not a file tpusim wrote; merge copies only a sweep's own outputs",
                                   foreign->string()));
  return row;
}

struct ShardSweeps {
  ojson first;  // the first shard's sweep.json, which the others match
  MergedRows rows;
};

// Reads and checks every shard before the output is touched. `out`: the merge's output directory,
// which no shard may be nor hold.
ShardSweeps read_shards(const std::vector<std::string>& shard_dirs, const fs::path& out, const std::string& out_dir) {
  ShardSweeps shards;
  for (const auto& d : shard_dirs) {
    const fs::path dir = fs::weakly_canonical(fs::absolute(d));
    const auto [diverge, _] = std::mismatch(dir.begin(), dir.end(), out.begin(), out.end());
    if (diverge == dir.end()) throw InputError(fmt::format("merge: -o {} is {}, or inside it: a shard being merged", out_dir, d));
    const ojson sweep = read_shard_sweep(dir, d);
    if (shards.first.is_null()) shards.first = sweep;
    check_same_sweep(sweep, shards.first, d, shard_dirs.front());
    for (const auto& json_row : sweep["rows"]) {
      SweepRow row = check_shard_row(json_row, dir, d);
      const auto index = static_cast<std::size_t>(*row.index);
      const std::string point = row.point;
      const auto [it, fresh] = shards.rows.emplace(index, std::make_pair(std::move(row), dir));
      if (!fresh)
        throw InputError(fmt::format("merge: point {} is in both {} and {}: shards must not overlap", point,
                                     it->second.second.string(), dir.string()));
    }
  }
  return shards;
}

// Copies each point's directory and log from its shard into OUT/points; returns the rows in point
// order, counted into `unfinished`.
std::vector<SweepRow> copy_merged_points(const MergedRows& rows, const fs::path& out, Unfinished& unfinished) {
  std::vector<SweepRow> ready;
  for (const auto& [index, entry] : rows) {
    const auto& [row, dir] = entry;
    const std::string& id = row.point;
    if (fs::exists(dir / "points" / id)) fs::copy(dir / "points" / id, out / "points" / id, fs::copy_options::recursive);
    if (fs::exists(dir / "points" / (id + ".log"))) fs::copy_file(dir / "points" / (id + ".log"), out / "points" / (id + ".log"));
    unfinished.count(row.status);
    ready.push_back(row);
  }
  return ready;
}

// Names the first ten points no shard had, so that the shards to run again can be found.
void report_missing_points(const MergedRows& rows, std::size_t total, std::size_t missing) {
  std::string which;
  std::size_t listed = 0;
  for (std::size_t i = 0; i < total && listed < 10; ++i)
    if (!rows.count(i)) which += fmt::format("{}{}", listed++ ? ", " : "", i);
  std::cerr << fmt::format("tpusim merge: {} point(s) missing (numbers {}{}): run or --resume their shards\n", missing,
                           which, missing > listed ? ", ..." : "");
}
}  // namespace

SweepAxis parse_vary(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw InputError(fmt::format("--vary {}: expected KEY=V1,V2,... (e.g. workload.training.global_batch=256,512)", text));
  SweepAxis axis;
  axis.key = text.substr(0, eq);
  std::stringstream values(text.substr(eq + 1));
  for (std::string v; std::getline(values, v, ',');)
    if (!v.empty()) axis.values.push_back(v);
  if (axis.values.empty()) throw InputError(fmt::format("--vary {}: no values", text));
  return axis;
}

int run_sweep(const SweepRequest& r) {
  check_sweep_request(r);
  const std::vector<Point> points = expand(r);
  if (points.size() > 10000) throw InputError(fmt::format("sweep: {} points; at most 10000", points.size()));
  const bool hw_given = r.hw_given || std::any_of(r.axes.begin(), r.axes.end(), [](const SweepAxis& a) { return a.key == "hw"; });
  const PointConfigs configs = load_point_configs(r, points, hw_given);

  const fs::path dir = checked_output_path(r.out_dir, configs.inputs);
  std::error_code ec;
  const bool existed = !empty_or_missing(dir);
  check_sweep_directory(r, dir, existed);
  fs::create_directories(dir, ec);
  const DirectoryLock lock(dir, r.out_dir);
  const ojson arguments = sweep_arguments(r, configs.files_read);
  if (existed && r.resume) check_same_arguments(dir, arguments, r.out_dir);
  ready_directory(dir, r.out_dir, "sweep", existed && !r.resume, point_ids(points));

  SweepRun run(r, points, dir, arguments, hw_given, lock);
  // The record of what the points run with exists before the first one starts, so that a resume
  // can check them however this sweep ends (even killed before a point finished).
  run.publish();
  run.simulate(run.finish_without_process(configs.errors));
  return run.conclude();
}

int merge_sweeps(const std::vector<std::string>& shard_dirs, const std::string& out_dir, bool force) {
  if (shard_dirs.empty()) throw InputError("merge: give the output directories of the shards to join");
  // Reading from a shard while replacing it would delete what is merged: no shard may hold the
  // output, nor the output a shard.
  const fs::path out = checked_output_path(out_dir, shard_dirs);
  const ShardSweeps shards = read_shards(shard_dirs, out, out_dir);

  std::error_code ec;
  const bool existed = !empty_or_missing(out);
  if (existed && !force) throw InputError(fmt::format("-o {}: the directory exists; pass --force to replace it", out_dir));
  if (existed) check_replaceable(out, out_dir);
  fs::create_directories(out, ec);
  const DirectoryLock lock(out, out_dir);
  std::vector<std::string> ids;
  for (const auto& [index, entry] : shards.rows) ids.push_back(entry.first.point);
  ready_directory(out, out_dir, "merge", existed, ids);

  Unfinished unfinished;
  const std::vector<SweepRow> ready = copy_merged_points(shards.rows, out, unfinished);
  SweepDocument sweep = sweep_document_from_json(shards.first);
  sweep.shard.reset();
  sweep.finished.reset();
  sweep.interrupted.reset();
  sweep.rows.clear();
  if (sweep.arguments && sweep.arguments->is_object()) (*sweep.arguments)["shard"] = "1/1";
  const auto total = static_cast<std::size_t>(sweep.points);
  write_sweep_outputs(out, sweep, ready);

  const std::size_t missing = total - std::min(total, ready.size());
  std::cerr << fmt::format("tpusim merge: {} of {} points from {} shard(s), {} failed{}; {}/sweep.csv\n", ready.size(), total,
                           shard_dirs.size(), unfinished.failed, unfinished.interrupted_note(), out_dir);
  if (missing > 0) report_missing_points(shards.rows, total, missing);
  return static_cast<int>(missing + unfinished.total());
}

}  // namespace tpusim

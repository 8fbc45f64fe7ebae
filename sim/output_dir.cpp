#include "sim/output_dir.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <system_error>
#include <cstring>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/errors.hpp"
#include "sim/json_input.hpp"

namespace tpusim {
namespace {

namespace fs = std::filesystem;

// ".NAME.TAG-PID", the hidden name of a folder beside `dir` that remove_stale_staging recognises;
// NAME is cut so that the whole stays within a file name's 255 bytes (a 245-byte -o was refused).
std::string hidden_beside(const fs::path& dir, const std::string& tag) {
  const std::string suffix = fmt::format(".{}-{}", tag, ::getpid());
  std::string name = dir.filename().string();
  name.resize(std::min(name.size(), std::size_t{255} - 1 - suffix.size()));
  return "." + name + suffix;
}

// A staging directory beside the destination; renamed into place only when complete, removed
// on any failure, so no half-written output ever carries the final name. It carries tpusim's
// marker from the start, so the staging folder of a killed run is recognised and cleaned up.

fs::path normalized(const std::string& text) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(text), ec);
  if (ec) p = fs::absolute(text).lexically_normal();
  // "out/new/" names the directory "new", not an empty file name inside it.
  while (!p.has_filename() && p.has_relative_path()) p = p.parent_path();
  return p;
}

// True when `inner` is `outer` or lies below it.
bool within(const fs::path& inner, const fs::path& outer) {
  const auto [diverge, _] = std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end());
  return diverge == outer.end();
}

std::optional<std::set<std::string>> marker_files(const fs::path& dir) {
  std::ifstream in(dir / kOutputMarker, std::ios::binary);
  if (!in) return std::nullopt;
  nlohmann::json marker;
  try {
    marker = parse_bounded(in, kOutputMarker);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (!marker.is_object() || !marker.contains("files") || !marker["files"].is_array()) return std::nullopt;
  std::set<std::string> files;
  for (const auto& f : marker["files"])
    if (f.is_string()) files.insert(f.get<std::string>());
  return files;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::optional<fs::path> foreign_entry(const fs::path& dir) {
  const auto listed = marker_files(dir);
  if (!listed) return dir;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end;
  if (ec) return dir;
  for (; it != end; it.increment(ec)) {
    if (ec) return dir;  // unreadable: nothing can be vouched for
    const fs::path& p = it->path();
    const std::string rel = p.lexically_relative(dir).generic_string();
    if (it->is_symlink(ec)) return p;  // tpusim writes none, whatever its name
    if (rel == kOutputMarker || rel == std::string(kOutputMarker) + ".tmp") continue;
    if (it->is_directory(ec) && !it->is_symlink(ec) && fs::exists(p / kOutputMarker, ec)) {
      if (auto inner = foreign_entry(p)) return inner;
      it.disable_recursion_pending();
      continue;
    }
    if (listed->count(rel)) continue;
    if (ends_with(rel, ".tmp") && listed->count(rel.substr(0, rel.size() - 4))) continue;  // an interrupted atomic write
    return p;
  }
  return std::nullopt;
}

fs::path checked_output_path(const std::string& shown, const std::vector<std::string>& inputs) {
  if (shown.empty()) throw InputError("-o: the output directory must not be empty");
  const fs::path dir = normalized(shown);
  if (!dir.has_relative_path()) throw InputError(fmt::format("-o {}: not usable as an output directory", shown));
  std::error_code ec;
  if (within(normalized(fs::current_path(ec).string()), dir))
    throw InputError(fmt::format("-o {}: is the working directory or one of its parents; choose a new directory", shown));
  if (const char* home = std::getenv("HOME"); home && *home && within(normalized(home), dir))
    throw InputError(fmt::format("-o {}: is the home directory or one of its parents; choose a new directory", shown));
  for (const auto& input : inputs)
    if (!input.empty() && within(normalized(input), dir))
      throw InputError(fmt::format("-o {}: holds {}, which this command reads; choose another directory", shown, input));
  return dir;
}

bool empty_or_missing(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return true;
  return fs::is_directory(dir, ec) && fs::is_empty(dir, ec) && !ec;
}

void check_replaceable(const fs::path& dir, const std::string& shown) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw InputError(fmt::format("-o {}: exists and is not a directory", shown));
  if (empty_or_missing(dir)) return;
  const auto foreign = foreign_entry(dir);
  if (!foreign) return;
  if (*foreign == dir)
    throw InputError(fmt::format("-o {}: tpusim did not write this directory (it has no {} marker), and --force "
                                 "replaces only tpusim's own outputs; choose a new directory",
                                 shown, kOutputMarker));
  throw InputError(fmt::format("-o {}: holds {}, which tpusim did not write, and --force replaces only tpusim's own "
                               "outputs; move it away or choose a new directory",
                               shown, foreign->lexically_relative(dir).generic_string()));
}

void write_output_marker(const fs::path& dir, const std::string& kind, const std::vector<std::string>& files) {
  const nlohmann::ordered_json marker = {
      {"written_by", "tpusim"},
      {"kind", kind},
      {"note", "tpusim --force replaces this directory only while it holds nothing but these files"},
      {"files", files}};
  const fs::path tmp = dir / (std::string(kOutputMarker) + ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary);
    out << marker.dump(2) << "\n";
    if (!out) throw SimError(fmt::format("writing {} failed", tmp.string()));
  }
  std::error_code ec;
  fs::rename(tmp, dir / kOutputMarker, ec);
  if (ec) throw SimError(fmt::format("writing {} failed: {}", (dir / kOutputMarker).string(), ec.message()));
}

std::string output_kind(const fs::path& dir) {
  std::ifstream in(dir / kOutputMarker, std::ios::binary);
  if (!in) return "";
  nlohmann::json marker;
  try {
    marker = parse_bounded(in, kOutputMarker);
  } catch (const std::exception&) {
    return "";
  }
  if (!marker.is_object() || !marker.contains("kind") || !marker["kind"].is_string()) return "";
  return marker["kind"].get<std::string>();
}

void remove_stale_staging(const fs::path& parent) {
  std::error_code ec;
  fs::directory_iterator it(parent, ec), end;
  if (ec) return;
  for (; it != end; it.increment(ec)) {
    if (ec) return;
    const std::string name = it->path().filename().string();
    if (name.size() < 3 || name[0] != '.') continue;
    const std::size_t dash = name.rfind('-');
    if (dash == std::string::npos || dash + 1 == name.size() || dash < 4) continue;
    const std::string tag = name.substr(dash - 4, 4);
    if (tag != ".tmp" && tag != ".old") continue;
    const std::string digits = name.substr(dash + 1);
    if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid == ::getpid() || pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;  // its run may still be going
    std::error_code entry_ec;
    if (!it->is_directory(entry_ec) || it->is_symlink(entry_ec) || foreign_entry(it->path())) continue;
    fs::remove_all(it->path(), entry_ec);
  }
}

// ---- StagedOutput ----

StagedOutput::StagedOutput(const std::string& dir, bool force, const std::vector<std::string>& inputs, std::string kind,
                           const std::vector<std::string>& may_write)
    : shown_(dir), force_(force), kind_(std::move(kind)) {
  final_ = checked_output_path(dir, inputs);
  std::error_code ec;
  if (fs::is_symlink(fs::symlink_status(final_, ec)))
    throw InputError(fmt::format("-o {}: is a symbolic link; name the directory itself", dir));
  existed_ = fs::exists(fs::symlink_status(final_, ec));
  if (!empty_or_missing(final_)) {
    if (!force) throw InputError(fmt::format("-o {}: the directory exists; pass --force to replace it", dir));
    check_replaceable(final_, dir);
  } else if (fs::exists(final_, ec) && !fs::is_directory(final_, ec)) {
    throw InputError(fmt::format("-o {}: exists and is not a directory", dir));
  }
  const fs::path parent = final_.parent_path();
  fs::create_directories(parent, ec);
  remove_stale_staging(parent);
  staging_ = parent / hidden_beside(final_, "tmp");
  fs::remove_all(staging_, ec);
  if (!fs::create_directory(staging_, ec) || ec)
    throw InputError(fmt::format("-o {}: cannot create the output directory ({})", dir,
                                 ec ? ec.message() : "permission denied"));
  try {
    // Every file the command may write, so that a killed command's staging folder holds nothing
    // foreign and the next one beside it removes it (remove_stale_staging).
    write_output_marker(staging_, kind_, may_write);
  } catch (const SimError&) {
    fs::remove_all(staging_, ec);
    throw InputError(fmt::format("-o {}: the output directory is not writable", dir));
  }
}

StagedOutput::~StagedOutput() {
  if (!committed_) {
    std::error_code ec;
    fs::remove_all(staging_, ec);
  }
}

std::string StagedOutput::file(const std::string& name) {
  written_.push_back(name);
  return (staging_ / name).string();
}

void StagedOutput::write(const std::string& name, const std::string& text) {
  const std::string path = file(name);
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw std::system_error(errno ? errno : EIO, std::generic_category(), "writing " + path);
}

void StagedOutput::commit() {
  std::sort(written_.begin(), written_.end());
  written_.erase(std::unique(written_.begin(), written_.end()), written_.end());
  write_output_marker(staging_, kind_, written_);
  // What is at -o now must still be what the checks at the start allowed: another run, or a
  // user, may have put something there while this one simulated.
  std::error_code ec;
  const fs::file_status now = fs::symlink_status(final_, ec);
  const bool replacing = fs::exists(now);
  if (replacing && (!existed_ || fs::is_symlink(now) || !fs::is_directory(now)))
    throw InputError(fmt::format("-o {}: something was created there while the simulation ran; it is left as it is "
                                 "and these outputs are discarded", shown_));
  if (replacing && !empty_or_missing(final_)) {
    if (!force_)
      throw InputError(fmt::format("-o {}: was empty when the run started and has been filled since; it is left as "
                                   "it is and these outputs are discarded (pass --force to replace it)", shown_));
    check_replaceable(final_, shown_);
  }
  // The old outputs move aside first and go only once the new ones are in place.
  const fs::path old = final_.parent_path() / hidden_beside(final_, "old");
  if (replacing) {
    fs::rename(final_, old, ec);
    if (ec) throw SimError(fmt::format("cannot replace {}: {}", final_.string(), ec.message()));
  }
  if (const int error = rename_unless_taken(staging_, final_)) {
    if (replacing) fs::rename(old, final_, ec);
    if (error == EEXIST || error == ENOTEMPTY)
      throw InputError(fmt::format("-o {}: something was created there while the simulation ran; it is left as it "
                                   "is and these outputs are discarded", shown_));
    throw SimError(fmt::format("cannot move the outputs into {}: {}", final_.string(), std::strerror(error)));
  }
  committed_ = true;
  if (replacing) fs::remove_all(old, ec);
}

int StagedOutput::rename_unless_taken(const fs::path& from, const fs::path& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return errno;
  std::error_code ec;  // a file system without RENAME_NOREPLACE: check, then rename
  if (fs::exists(fs::symlink_status(to, ec))) return EEXIST;
  fs::rename(from, to, ec);
  return ec.value();
}

}  // namespace tpusim

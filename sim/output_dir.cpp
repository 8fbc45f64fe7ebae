#include "sim/output_dir.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
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

}  // namespace tpusim

// Output directories: where tpusim may write one, and which existing directory `--force` may
// replace. The contract is that --force never deletes anything tpusim did not write itself.
//
// Every output directory tpusim creates (run, sweep, merge) carries a marker file,
// `.tpusim-output`, listing what tpusim wrote there (paths relative to the directory). A directory
// may be replaced only when it carries the marker and holds nothing else: every entry is listed
// in its marker, is an unfinished atomic write of a listed file (NAME.tmp), or is itself a
// replaceable output directory (a sweep's points, a crashed run's staging folder).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace tpusim {

inline constexpr const char* kOutputMarker = ".tpusim-output";

// The absolute, normalized path of an output directory given as `-o shown`. Throws InputError
// (naming -o) when it is `/`, the working directory or one of its parents, the home directory
// or one of its parents, or a directory holding one of `inputs` (files the command reads).
std::filesystem::path checked_output_path(const std::string& shown, const std::vector<std::string>& inputs);

// Throws InputError (naming -o shown) unless the existing directory may be replaced by --force:
// an empty directory, or one that carries the marker and holds only what tpusim wrote.
void check_replaceable(const std::filesystem::path& dir, const std::string& shown);

// The first entry under `dir` that tpusim did not write (not listed in its marker, or a symbolic
// link, which tpusim never writes), `dir` itself when it has no marker, or none.
std::optional<std::filesystem::path> foreign_entry(const std::filesystem::path& dir);

// True when the directory has no entries (or does not exist).
bool empty_or_missing(const std::filesystem::path& dir);

// Writes (replaces) the marker of `dir`: `kind` is run, sweep or merge; `files` are the paths,
// relative to dir, that tpusim writes or may write there.
void write_output_marker(const std::filesystem::path& dir, const std::string& kind, const std::vector<std::string>& files);

// The kind recorded in dir's marker, or "" when it has none (or it is unreadable).
std::string output_kind(const std::filesystem::path& dir);

// Removes, in `parent`, the staging folders (`.NAME.tmp-PID`, `.NAME.old-PID`) left by runs that
// were killed: their process is gone and they carry the marker. Never fails.
void remove_stale_staging(const std::filesystem::path& parent);

// An output directory written through a staging directory beside the destination: renamed into
// place only when complete, removed on any failure, so no half-written output ever carries the
// final name. It carries tpusim's marker from the start (`kind`, and `may_write`: every file the
// command may write), so the staging folder of a killed command is recognised and cleaned up.
// Throws InputError naming -o `dir` when the destination may not be written (see above).
class StagedOutput {
 public:
  StagedOutput(const std::string& dir, bool force, const std::vector<std::string>& inputs, std::string kind,
               const std::vector<std::string>& may_write);
  ~StagedOutput();
  StagedOutput(const StagedOutput&) = delete;
  StagedOutput& operator=(const StagedOutput&) = delete;
  // The path to write `name` at (recorded as written).
  std::string file(const std::string& name);
  void write(const std::string& name, const std::string& text);
  // Moves the outputs into place, replacing what --force allowed.
  void commit();

 private:
  static int rename_unless_taken(const std::filesystem::path& from, const std::filesystem::path& to);

  std::string shown_;
  bool force_ = false;
  bool existed_ = false;  // -o existed when the command started (and --force allowed replacing it)
  std::string kind_;
  std::filesystem::path final_;
  std::filesystem::path staging_;
  std::vector<std::string> written_;
  bool committed_ = false;
};

}  // namespace tpusim

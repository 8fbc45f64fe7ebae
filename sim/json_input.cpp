#include "sim/json_input.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "sim/errors.hpp"
#include "sim/names.hpp"

namespace tpusim {
namespace {

// " (did you mean mlp_mnist.json?)" when a file beside the missing one has nearly its name.
std::string near_file_name(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path missing(path);
  const fs::path dir = missing.has_parent_path() ? missing.parent_path() : fs::path(".");
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end && names.size() < 10000; it.increment(ec))
    names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());  // the directory's order is the file system's
  return did_you_mean(missing.filename().string(), names);
}

}  // namespace
void check_input_file(const std::string& path, std::uint64_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) throw InputError(fmt::format("{}: no such file{}", path, near_file_name(path)));
    throw InputError(fmt::format("{}: cannot read the file ({})", path, std::strerror(errno)));
  }
  if (S_ISDIR(st.st_mode)) throw InputError(fmt::format("{}: is a directory, not a file", path));
  if (!S_ISREG(st.st_mode)) throw InputError(fmt::format("{}: not a regular file (a device, pipe or socket)", path));
  if (max_bytes > 0 && static_cast<std::uint64_t>(st.st_size) > max_bytes)
    throw InputError(fmt::format("{}: {} bytes; a workload or hardware file has at most {}", path, st.st_size, max_bytes));
}

nlohmann::json read_json_file(const std::string& path) {
  check_input_file(path, kMaxDocumentBytes);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot read the file (does it exist?)", path));
  std::stringstream text;
  text << in.rdbuf();
  try {
    return parse_bounded(text.str(), path, /*unique_keys=*/true);
  } catch (const nlohmann::json::exception& e) {  // a syntax error, or a number beyond a double (out_of_range)
    std::string what = e.what();
    const auto close = what.find("] ");
    if (close != std::string::npos) what = what.substr(close + 2);
    throw InputError(fmt::format("{}: malformed JSON: {}", path, what));
  }
}

}  // namespace tpusim

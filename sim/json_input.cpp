#include "sim/json_input.hpp"

#include <sys/stat.h>

#include <fmt/format.h>

#include "sim/errors.hpp"

namespace tpusim {
void check_input_file(const std::string& path, std::uint64_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw InputError(fmt::format("{}: cannot read the file (does it exist?)", path));
  if (S_ISDIR(st.st_mode)) throw InputError(fmt::format("{}: is a directory, not a file", path));
  if (!S_ISREG(st.st_mode)) throw InputError(fmt::format("{}: not a regular file (a device, pipe or socket)", path));
  if (max_bytes > 0 && static_cast<std::uint64_t>(st.st_size) > max_bytes)
    throw InputError(fmt::format("{}: {} bytes; a workload or hardware file has at most {}", path, st.st_size, max_bytes));
}

}  // namespace tpusim

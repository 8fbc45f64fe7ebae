// Shared by the test suites: temporary files and running the tpusim binary.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tpusim::test {

inline std::string source_path(const std::string& relative) { return std::string(TPUSIM_SOURCE_DIR) + "/" + relative; }
inline std::string example_workload() { return source_path("workloads/examples/mlp_mnist.json"); }

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A fresh directory under the system temp dir, removed with the object.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tpusim-test-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string path(const std::string& name) const { return path_ + "/" + name; }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name), std::ios::binary) << text;
    return path(name);
  }

 private:
  std::string path_;
};

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `tpusim ARGS` (arguments already shell-quoted where needed).
inline CommandResult run_tpusim(const std::string& args) {
  TempDir capture;
  const std::string command = std::string("'") + TPUSIM_BINARY + "' " + args + " >'" + capture.path("out") +
                              "' 2>'" + capture.path("err") + "' </dev/null";
  const int status = std::system(command.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_file(capture.path("out"));
  r.err = read_file(capture.path("err"));
  return r;
}

}  // namespace tpusim::test

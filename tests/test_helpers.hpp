// Shared by the test suites: temporary files and running the tpusim binary.
#pragma once

// TPUSIM_ASAN: under AddressSanitizer, whose address space reservation is more than a test's
// `ulimit -v` allows.
#include "sim/stale_stack.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace tpusim::test {

inline std::string source_path(const std::string& relative) { return std::string(TPUSIM_SOURCE_DIR) + "/" + relative; }
inline std::string example_workload() { return source_path("workloads/examples/mlp_mnist.json"); }

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

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

// Under AddressSanitizer, an exception leaving a SystemC thread (its own coroutine stack) makes
// ASan warn, in three lines, that it cannot check that stack switch. The warning is ASan's
// (google/sanitizers#189), not tpusim's output, so tests that read stderr drop it.
inline std::string without_coroutine_stack_warning(const std::string& err) {
  std::string kept;
  std::size_t pos = 0;
  while (pos < err.size()) {
    std::size_t end = err.find('\n', pos);
    end = end == std::string::npos ? err.size() : end + 1;
    const std::string line = err.substr(pos, end - pos);
    const bool asan = line.find("ASan is ignoring requested __asan_handle_no_return") != std::string::npos ||
                      line.rfind("False positive error reports may follow", 0) == 0 ||
                      line.find("https://github.com/google/sanitizers/issues/189") != std::string::npos;
    if (!asan) kept += line;
    pos = end;
  }
  return kept;
}

// Runs `BINARY ARGS` (arguments already shell-quoted where needed), with `env` ("NAME=VALUE ...")
// added to its environment, in the working directory `cwd` (empty: the test's own).
inline CommandResult run_program(const std::string& binary, const std::string& args, const std::string& env = "",
                                 const std::string& cwd = "") {
  TempDir capture;
  const std::string command = (cwd.empty() ? "" : "cd '" + cwd + "' && ") + env + " '" + binary + "' " + args + " >'" + capture.path("out") +
                              "' 2>'" + capture.path("err") + "' </dev/null";
  const int status = std::system(command.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_file(capture.path("out"));
  r.err = without_coroutine_stack_warning(read_file(capture.path("err")));
  return r;
}

inline CommandResult run_tpusim(const std::string& args, const std::string& env = "", const std::string& cwd = "") {
  return run_program(TPUSIM_BINARY, args, env, cwd);
}

// Runs `tpusim ARGS` in the background; once `ready()` holds (polled every 20 ms, for at most
// `timeout_ms`), calls `meanwhile(pid)`, and waits for the run to exit.
inline CommandResult run_tpusim_meanwhile(const std::string& args, const std::function<bool()>& ready,
                                          const std::function<void(pid_t)>& meanwhile, int timeout_ms = 300000) {
  TempDir capture;
  const std::string command = std::string("exec '") + TPUSIM_BINARY + "' " + args + " >'" + capture.path("out") +
                              "' 2>'" + capture.path("err") + "' </dev/null";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (int waited = 0; waited < timeout_ms && !ready(); waited += 20)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  meanwhile(pid);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_file(capture.path("out"));
  r.err = without_coroutine_stack_warning(read_file(capture.path("err")));
  return r;
}

// Runs `tpusim ARGS`, sends it `signal` `delay_ms` after `ready_file` exists, and waits for it to exit.
inline CommandResult run_tpusim_interrupted_after(const std::string& args, int signal, const std::string& ready_file,
                                                  int delay_ms, int timeout_ms = 300000) {
  return run_tpusim_meanwhile(
      args, [&] { return !ready_file.empty() && std::filesystem::exists(ready_file); },
      [&](pid_t pid) {
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
        ::kill(pid, signal);
      },
      timeout_ms);
}

// Runs `tpusim ARGS`, sends it `signal` after `delay_ms`, and waits for it to exit.
inline CommandResult run_tpusim_interrupted(const std::string& args, int signal, int delay_ms) {
  return run_tpusim_interrupted_after(args, signal, "", delay_ms, /*timeout_ms=*/0);
}

}  // namespace tpusim::test

// setup.sh: quiet unless asked, and building only what the command needs. Runs a copy of the
// script against stand-ins for dpkg-query, apt-get, cmake and sudo that record their calls.
#define BOOST_TEST_MODULE setup
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <filesystem>

#include "test_helpers.hpp"

using namespace tpusim::test;
namespace fs = std::filesystem;

namespace {

struct Setup {
  TempDir dir;
  // `missing`: what dpkg-query reports as not installed; `cmake_fails`: the build step fails.
  Setup(bool missing, bool cmake_fails) {
    fs::create_directories(dir.path("repo"));
    fs::create_directories(dir.path("bin"));
    fs::copy_file(source_path("setup.sh"), dir.path("repo/setup.sh"));
    const std::string calls = dir.path("calls");
    auto stub = [&](const std::string& name, const std::string& body) {
      dir.write("bin/" + name, "#!/bin/sh\necho \"" + name + " $*\" >> '" + calls + "'\n" + body + "\n");
      fs::permissions(dir.path("bin/" + name), fs::perms::owner_all);
    };
    stub("dpkg-query", missing ? "exit 1" : "echo 'install ok installed'");
    for (const char* name : {"apt-get", "sudo"})
      stub(name, std::string(name) == "sudo" ? "exec \"$@\"" : "i=0; while [ $i -lt 400 ]; do echo apt line $i; i=$((i+1)); done");
    stub("cmake", cmake_fails ? "echo 'error: it broke'; exit 1" : "echo compiler line; echo another compiler line");
  }
  CommandResult run(const std::string& args) const {
    TempDir capture;
    const std::string command = "PATH='" + dir.path("bin") + ":/usr/bin:/bin' '" + dir.path("repo/setup.sh") + "' " + args +
                                " >'" + capture.path("out") + "' 2>'" + capture.path("err") + "'";
    const int status = std::system(command.c_str());
    CommandResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = read_file(capture.path("out"));
    r.err = read_file(capture.path("err"));
    return r;
  }
  std::string calls() const { return read_file(dir.path("calls")); }
};

std::size_t line_count(const std::string& text) { return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')); }

}  // namespace

// Issue 18: about 400 lines of package-manager output, and the tests built without --tests.
BOOST_AUTO_TEST_CASE(setup_is_quiet_and_builds_only_tpusim_without_tests) {
  const Setup setup(/*missing=*/true, /*cmake_fails=*/false);
  const CommandResult r = setup.run("");
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(line_count(r.out + r.err) <= 5u, r.err);
  BOOST_TEST(r.err.find("apt line") == std::string::npos);
  BOOST_TEST(setup.calls().find("cmake --build build -j") != std::string::npos);
  BOOST_TEST(setup.calls().find("--target tpusim") != std::string::npos, setup.calls());
}

BOOST_AUTO_TEST_CASE(setup_with_tests_builds_everything_and_verbose_shows_the_output) {
  const Setup setup(/*missing=*/true, /*cmake_fails=*/false);
  const CommandResult r = setup.run("--tests --verbose");
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.err.find("apt line 399") != std::string::npos);
  BOOST_TEST(r.err.find("compiler line") != std::string::npos);
  BOOST_TEST(setup.calls().find("--target") == std::string::npos, setup.calls());
  BOOST_TEST(setup.calls().find("chromium") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_failing_step_shows_the_end_of_its_output) {
  const Setup setup(/*missing=*/false, /*cmake_fails=*/true);
  const CommandResult r = setup.run("");
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(r.err.find("setup: failed: configuring build/") != std::string::npos, r.err);
  BOOST_TEST(r.err.find("error: it broke") != std::string::npos, r.err);
  BOOST_TEST(setup.calls().find("apt-get") == std::string::npos);  // nothing was missing
  BOOST_TEST(setup.run("--bogus").exit_code == 2);
}

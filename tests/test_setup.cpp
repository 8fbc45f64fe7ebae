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
  // `missing`: what dpkg-query reports as not installed; `cmake_fails`: the build step fails;
  // `percentages`: apt and cmake report their progress as the real ones do.
  Setup(bool missing, bool cmake_fails, bool percentages = false) {
    fs::create_directories(dir.path("repo"));
    fs::create_directories(dir.path("bin"));
    fs::copy_file(source_path("setup.sh"), dir.path("repo/setup.sh"));
    const std::string calls = dir.path("calls");
    auto stub = [&](const std::string& name, const std::string& body) {
      dir.write("bin/" + name, "#!/bin/sh\necho \"" + name + " $*\" >> '" + calls + "'\n" + body + "\n");
      fs::permissions(dir.path("bin/" + name), fs::perms::owner_all);
    };
    stub("dpkg-query", missing ? "exit 1" : "echo 'install ok installed'");
    const std::string apt_status = percentages ? "echo '0 upgraded, 2 newly installed, 0 to remove and 0 not upgraded.'; "
                                                 "echo 'Get:1 http://deb.debian.org/debian bookworm/main amd64 g++ 12'; "
                                                 "echo 'Get:2 http://deb.debian.org/debian bookworm/main amd64 make 4.3'; "
                                                 "echo 'Unpacking g++ (12) ...'; echo 'Unpacking make (4.3) ...'; "
                                                 "echo 'Setting up g++ (12) ...'; "
                                               : "";
    for (const char* name : {"apt-get", "sudo"})
      stub(name, std::string(name) == "sudo" ? "exec \"$@\"" : apt_status + "i=0; while [ $i -lt 400 ]; do echo apt line $i; i=$((i+1)); done");
    const std::string make_percent = percentages ? "echo '[ 12%] Building CXX object a.o'; echo '[ 57%] Building CXX object b.o'; " : "";
    stub("cmake", cmake_fails ? "echo 'error: it broke'; exit 1" : make_percent + "echo compiler line; echo another compiler line");
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

// Issue 43: the build printed "setup: building build/tpusim" and then nothing for 13 minutes. Off
// a terminal (a log, CI) it now prints the percentage make and apt report, a line per tenth.
BOOST_AUTO_TEST_CASE(long_steps_report_their_percentage) {
  const Setup setup(/*missing=*/true, /*cmake_fails=*/false, /*percentages=*/true);
  const CommandResult r = setup.run("");
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.err.find("setup: building: 12% (") != std::string::npos, r.err);
  BOOST_TEST(r.err.find("setup: building: 57% (") != std::string::npos, r.err);
  // apt's lines against the 2 packages it announced: a download 40% / 2, an unpacking 30% / 2,
  // a package set up 30% / 2
  BOOST_TEST(r.err.find(" packages: 20% (") != std::string::npos, r.err);
  BOOST_TEST(r.err.find(" packages: 40% (") != std::string::npos, r.err);
  BOOST_TEST(r.err.find(" packages: 70% (") != std::string::npos, r.err);
  BOOST_TEST(r.err.find(" packages: 85% (") != std::string::npos, r.err);
  BOOST_TEST(r.err.find("apt line") == std::string::npos);  // the rest still goes to the log only
  BOOST_TEST(r.err.find("\r") == std::string::npos);       // no terminal, no line rewritten in place
}

// tests/run.sh, the README's test command: CTest prints nothing while a test runs, and the slowest
// validation points run for minutes. The script names what is still running after each silence
// and passes CTest's exit code on.
BOOST_AUTO_TEST_CASE(the_test_runner_names_what_is_still_running_and_keeps_the_exit_code) {
  TempDir dir;
  fs::create_directories(dir.path("repo/tests"));
  fs::create_directories(dir.path("bin"));
  fs::copy_file(source_path("tests/run.sh"), dir.path("repo/tests/run.sh"));
  dir.write("bin/ctest",
            "#!/bin/sh\necho \"ctest $*\" > '" + dir.path("args") +
                "'\necho '      Start  1: slow_one'\nsleep 3\necho '1/1 Test  #1: slow_one .......   Failed    3.00 sec'\nexit 8\n");
  fs::permissions(dir.path("bin/ctest"), fs::perms::owner_all);
  const std::string command = "PATH='" + dir.path("bin") + ":/usr/bin:/bin' TPUSIM_TESTS_HEARTBEAT_S=1 '" +
                              dir.path("repo/tests/run.sh") + "' -R slow >'" + dir.path("out") + "' 2>&1";
  const int status = std::system(command.c_str());
  const std::string out = read_file(dir.path("out"));
  BOOST_TEST(WIFEXITED(status));
  BOOST_TEST(WEXITSTATUS(status) == 8, out);
  // (the seconds shown depend on when the machine got to each line)
  const auto heartbeat = out.find("tests: still running after 0 min ");
  BOOST_TEST(heartbeat != std::string::npos, out);
  BOOST_TEST(out.find(": slow_one (", heartbeat) != std::string::npos, out);
  BOOST_TEST(out.find("Failed    3.00 sec") != std::string::npos, out);
  BOOST_TEST(read_file(dir.path("args")).find("--output-on-failure -j") != std::string::npos);
  BOOST_TEST(read_file(dir.path("args")).find("-R slow") != std::string::npos);
}

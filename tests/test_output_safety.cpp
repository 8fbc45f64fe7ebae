// Never lose a user's data: --force replaces only directories tpusim wrote, never the working
// directory, the home directory, a parent of either, or a directory holding an input; sweep and
// merge keep out of the directories they read; two sweeps cannot share one directory; a killed
// run's staging folder is cleaned up by the next run beside it. Every -o points into a fresh
// temporary directory.
#define BOOST_TEST_MODULE output_safety
#include <boost/test/unit_test.hpp>

#include <filesystem>

#include "test_helpers.hpp"

using namespace tpusim::test;
namespace fs = std::filesystem;

namespace {

const std::string kSweepArgs = " --vary workload.training.global_batch=256,512 --trace none";

std::string quoted(const std::string& path) { return "'" + path + "'"; }

void expect_refused(const CommandResult& r, const std::string& expected) {
  BOOST_TEST_CONTEXT("stderr: " << r.err) {
    BOOST_TEST(r.exit_code == 2);
    BOOST_TEST(r.err.find(expected) != std::string::npos);
    BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(run_force_keeps_a_directory_tpusim_did_not_write) {
  TempDir dir;
  fs::create_directory(dir.path("mine"));
  dir.write("mine/precious", "x");
  expect_refused(run_tpusim("run " + quoted(example_workload()) + " -o " + quoted(dir.path("mine")) + " --force --trace none"),
                 "tpusim did not write this directory");
  BOOST_TEST(read_file(dir.path("mine/precious")) == "x");
}

BOOST_AUTO_TEST_CASE(run_force_replaces_its_own_output_but_not_a_file_added_to_it) {
  TempDir dir;
  const std::string out = dir.path("out");
  const std::string run = "run " + quoted(example_workload()) + " -o " + quoted(out) + " --trace none";
  BOOST_REQUIRE(run_tpusim(run).exit_code == 0);
  BOOST_TEST(fs::exists(out + "/.tpusim-output"));
  BOOST_TEST(run_tpusim(run + " --force").exit_code == 0);  // its own output: replaced
  dir.write("out/notes.txt", "mine");
  expect_refused(run_tpusim(run + " --force"), "holds notes.txt, which tpusim did not write");
  BOOST_TEST(read_file(out + "/notes.txt") == "mine");
  BOOST_TEST(fs::exists(out + "/summary.json"));
}

BOOST_AUTO_TEST_CASE(an_empty_existing_directory_is_used_as_a_new_one) {
  TempDir dir;
  fs::create_directory(dir.path("empty"));
  const CommandResult r = run_tpusim("run " + quoted(example_workload()) + " -o " + quoted(dir.path("empty")) + " --trace none");
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(fs::exists(dir.path("empty/summary.json")));
}

// Found by the adversarial pass: "-o new/" (a trailing slash) staged inside the new directory
// and then could not move the outputs into it.
BOOST_AUTO_TEST_CASE(a_trailing_slash_names_the_directory) {
  TempDir dir;
  const CommandResult r = run_tpusim("run " + quoted(example_workload()) + " -o " + quoted(dir.path("new/")) + " --trace none");
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(fs::exists(dir.path("new/summary.json")));
  for (const auto& entry : fs::directory_iterator(dir.path("")))
    BOOST_TEST(entry.path().filename().string().find("tmp") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(force_never_replaces_the_working_directory_or_a_parent) {
  TempDir dir;
  fs::create_directories(dir.path("a/b"));
  dir.write("a/precious", "x");
  const std::string workload = quoted(example_workload());
  expect_refused(run_tpusim("run " + workload + " -o . --force --trace none", "", dir.path("a")),
                 "is the working directory or one of its parents");
  expect_refused(run_tpusim("run " + workload + " -o .. --force --trace none", "", dir.path("a/b")),
                 "is the working directory or one of its parents");
  expect_refused(run_tpusim("sweep " + workload + kSweepArgs + " -o .. --force", "", dir.path("a/b")),
                 "is the working directory or one of its parents");
  BOOST_TEST(read_file(dir.path("a/precious")) == "x");
}

BOOST_AUTO_TEST_CASE(force_never_replaces_the_home_directory_or_a_parent) {
  TempDir dir;
  fs::create_directories(dir.path("home/user"));
  dir.write("home/user/precious", "x");
  const std::string env = "HOME=" + quoted(dir.path("home/user"));
  const std::string workload = quoted(example_workload());
  expect_refused(run_tpusim("run " + workload + " -o " + quoted(dir.path("home/user")) + " --force --trace none", env),
                 "is the home directory or one of its parents");
  expect_refused(run_tpusim("run " + workload + " -o " + quoted(dir.path("home")) + " --force --trace none", env),
                 "is the home directory or one of its parents");
  BOOST_TEST(read_file(dir.path("home/user/precious")) == "x");
}

BOOST_AUTO_TEST_CASE(no_output_directory_may_hold_an_input) {
  TempDir dir;
  fs::create_directory(dir.path("out"));
  const std::string workload = dir.write("out/w.json", read_file(example_workload()));
  expect_refused(run_tpusim("run " + quoted(workload) + " -o " + quoted(dir.path("out")) + " --force --trace none"),
                 "which this command reads");
  expect_refused(run_tpusim("sweep " + quoted(workload) + kSweepArgs + " -o " + quoted(dir.path("out")) + " --force"),
                 "which this command reads");
  const std::string hw = dir.write("out/hw.json", R"({"base": "tpu_v4", "name": "mine"})");
  expect_refused(run_tpusim("run " + quoted(example_workload()) + " --hw " + quoted(hw) + " -o " + quoted(dir.path("out")) +
                            " --force --trace none"),
                 "which this command reads");
  BOOST_TEST(fs::exists(workload));
  BOOST_TEST(fs::exists(hw));
}

BOOST_AUTO_TEST_CASE(sweep_force_replaces_only_a_sweep_output) {
  TempDir dir;
  const std::string out = dir.path("sweep");
  fs::create_directory(out);
  dir.write("sweep/precious", "x");
  const std::string sweep = "sweep " + quoted(example_workload()) + kSweepArgs + " -o " + quoted(out);
  expect_refused(run_tpusim(sweep + " --force"), "tpusim did not write this directory");
  BOOST_TEST(read_file(dir.path("sweep/precious")) == "x");
  fs::remove(dir.path("sweep/precious"));
  BOOST_REQUIRE(run_tpusim(sweep).exit_code == 0);
  const CommandResult again = run_tpusim(sweep + " --force");  // its own output, points and logs included
  BOOST_TEST(again.exit_code == 0, again.err);
  dir.write("sweep/points/mine.txt", "x");
  expect_refused(run_tpusim(sweep + " --force"), "holds points/mine.txt, which tpusim did not write");
  BOOST_TEST(read_file(dir.path("sweep/points/mine.txt")) == "x");
}

BOOST_AUTO_TEST_CASE(merge_never_writes_into_a_shard_it_reads) {
  TempDir dir;
  const std::string base = "sweep " + quoted(example_workload()) + kSweepArgs;
  BOOST_REQUIRE(run_tpusim(base + " --shard 1/2 -o " + quoted(dir.path("X/s1"))).exit_code == 0);
  BOOST_REQUIRE(run_tpusim(base + " --shard 2/2 -o " + quoted(dir.path("X/s2"))).exit_code == 0);
  const std::string shards = quoted(dir.path("X/s1")) + " " + quoted(dir.path("X/s2"));
  expect_refused(run_tpusim("merge " + shards + " -o " + quoted(dir.path("X")) + " --force"), "which this command reads");
  expect_refused(run_tpusim("merge " + shards + " -o " + quoted(dir.path("X/s1")) + " --force"), "which this command reads");
  expect_refused(run_tpusim("merge " + shards + " -o " + quoted(dir.path("X/s1/in")) + " --force"), "a shard being merged");
  BOOST_TEST(fs::exists(dir.path("X/s1/sweep.json")));
  BOOST_TEST(fs::exists(dir.path("X/s2/sweep.json")));
  BOOST_TEST(run_tpusim("merge " + shards + " -o " + quoted(dir.path("M"))).exit_code == 0);
  BOOST_TEST(run_tpusim("merge " + shards + " -o " + quoted(dir.path("M")) + " --force").exit_code == 0);
  BOOST_TEST(fs::exists(dir.path("M/points/000_global_batch=256/summary.json")));
  BOOST_TEST(fs::exists(dir.path("M/points/001_global_batch=512/summary.json")));
}

BOOST_AUTO_TEST_CASE(merge_refuses_a_point_name_that_leaves_its_directory) {
  TempDir dir;
  BOOST_REQUIRE(run_tpusim("sweep " + quoted(example_workload()) + kSweepArgs + " -o " + quoted(dir.path("s"))).exit_code == 0);
  std::string sweep = read_file(dir.path("s/sweep.json"));
  const std::string from = "\"point\": \"000_global_batch=256\"";
  BOOST_REQUIRE(sweep.find(from) != std::string::npos);
  sweep.replace(sweep.find(from), from.size(), "\"point\": \"../../escaped\"");
  dir.write("s/sweep.json", sweep);
  expect_refused(run_tpusim("merge " + quoted(dir.path("s")) + " -o " + quoted(dir.path("m"))), "is not a point name");
  BOOST_TEST(!fs::exists(dir.path("escaped")));
}

// Issue 41: merge followed a point directory that was a symbolic link and copied what it found.
BOOST_AUTO_TEST_CASE(merge_copies_only_what_the_shards_sweep_wrote) {
  TempDir dir;
  BOOST_REQUIRE(run_tpusim("sweep " + quoted(example_workload()) + kSweepArgs + " -o " + quoted(dir.path("s"))).exit_code == 0);
  const std::string point = dir.path("s/points/000_global_batch=256");
  fs::rename(point, dir.path("elsewhere"));
  dir.write("elsewhere/secret.txt", "not tpusim's");
  fs::create_directory_symlink(dir.path("elsewhere"), point);
  expect_refused(run_tpusim("merge " + quoted(dir.path("s")) + " -o " + quoted(dir.path("m"))), "is a symbolic link");
  fs::remove(point);
  fs::rename(dir.path("elsewhere"), point);  // a real directory again, with a file tpusim never wrote
  expect_refused(run_tpusim("merge " + quoted(dir.path("s")) + " -o " + quoted(dir.path("m"))), "secret.txt is not a file tpusim wrote");
  fs::remove(point + "/secret.txt");
  BOOST_TEST(run_tpusim("merge " + quoted(dir.path("s")) + " -o " + quoted(dir.path("m"))).exit_code == 0);
}

// Issue 41: an output name of 245 bytes was refused as too long: the staging folder beside it
// added ".NAME.tmp-PID" to the name. Every name a file system takes (255 bytes) is written, and
// a --force replacement of it too.
BOOST_AUTO_TEST_CASE(the_longest_output_names_are_written) {
  TempDir dir;
  for (const std::size_t length : {245u, 255u}) {
    const std::string out = dir.path(std::string(length, 'n'));
    for (const char* force : {"", " --force"}) {
      const CommandResult r = run_tpusim("run " + quoted(example_workload()) + " -o " + quoted(out) + " --trace none" + force);
      BOOST_TEST(r.exit_code == 0, length << force << ": " << r.err);
      BOOST_TEST(fs::exists(out + "/summary.json"));
    }
  }
  for (const auto& entry : fs::directory_iterator(dir.path("")))  // nothing hidden left beside them
    BOOST_TEST(entry.path().filename().string()[0] != '.', entry.path());
}

BOOST_AUTO_TEST_CASE(resume_refuses_different_arguments) {
  TempDir dir;
  const std::string sweep = "sweep " + quoted(example_workload()) + " --vary workload.training.global_batch=256,512 -o " +
                            quoted(dir.path("s"));
  BOOST_REQUIRE(run_tpusim(sweep + " --trace none").exit_code == 0);
  expect_refused(run_tpusim(sweep + " --trace ops --resume"), "ran with trace \"none\", this one with \"ops\"");
  expect_refused(run_tpusim(sweep + " --trace none --set workload.training.steps=3 --resume"), "ran with sets");
  BOOST_TEST(run_tpusim(sweep + " --trace none --resume").exit_code == 0);
  fs::create_directory(dir.path("plain"));
  dir.write("plain/x", "x");
  expect_refused(run_tpusim("sweep " + quoted(example_workload()) + kSweepArgs + " -o " + quoted(dir.path("plain")) + " --resume"),
                 "is not a sweep's output");
}

BOOST_AUTO_TEST_CASE(a_killed_runs_staging_folder_is_removed_by_the_next_run_beside_it) {
  TempDir dir;
  // What SIGKILL leaves: a staging folder with the marker, of a process that no longer exists.
  const std::string stale = dir.path(".old.tmp-999999999");
  fs::create_directory(stale);
  dir.write(".old.tmp-999999999/.tpusim-output", R"({"written_by": "tpusim", "kind": "run", "files": ["summary.json"]})");
  dir.write(".old.tmp-999999999/summary.json", "{}");
  // A look-alike that tpusim did not write is kept.
  fs::create_directory(dir.path(".mine.tmp-999999998"));
  dir.write(".mine.tmp-999999998/data", "x");
  BOOST_REQUIRE(run_tpusim("run " + quoted(example_workload()) + " -o " + quoted(dir.path("out")) + " --trace none").exit_code == 0);
  BOOST_TEST(!fs::exists(stale));
  BOOST_TEST(read_file(dir.path(".mine.tmp-999999998/data")) == "x");
}

namespace {

// The staging folder `.NAME.tmp-PID` of a run writing `dir/NAME`, once it holds `file`.
bool staging_holds(const TempDir& dir, const std::string& name, const std::string& file) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir.path(""), ec))
    if (entry.path().filename().string().rfind("." + name + ".tmp-", 0) == 0 && fs::exists(entry.path() / file, ec)) return true;
  return false;
}

const std::string kLongRun = " --hw tpu_v5e --topology 4x4 --set workload.training.steps=1";

}  // namespace

// What appears at -o while a run simulates (a user's files, another run's outputs) is left as it
// is, with or without --force: the run's outputs are discarded and it says why.
BOOST_AUTO_TEST_CASE(what_appears_at_the_output_path_during_a_run_is_left_alone) {
  for (const std::string force : {"", " --force"}) {
    TempDir dir;
    const CommandResult r = run_tpusim_meanwhile(
        "run " + quoted(source_path("workloads/examples/bert_large_128.json")) + kLongRun + force + " -o " + quoted(dir.path("out")),
        [&] { return staging_holds(dir, "out", ".tpusim-output"); },
        [&](pid_t) {
          fs::create_directories(dir.path("out/sub"));
          dir.write("out/precious.txt", "keep");
        });
    // A slow run (a sanitizer build) prints its progress before the error: the error is the last line.
    BOOST_TEST(r.exit_code == 2);
    BOOST_TEST(r.err.rfind("tpusim: error: -o " + dir.path("out") + ": something was created there while the simulation ran; it "
                           "is left as it is") != std::string::npos, r.err);
    BOOST_TEST(r.err.back() == '\n');
    BOOST_TEST(r.err.find('\n', r.err.rfind("tpusim: error:")) == r.err.size() - 1);
    BOOST_TEST(read_file(dir.path("out/precious.txt")) == "keep");
    BOOST_TEST(fs::exists(dir.path("out/sub")));
    BOOST_TEST(!staging_holds(dir, "out", ".tpusim-output"));
  }
}

// A link to a directory names that directory; a link that leads nowhere (dangling, or a loop) is
// refused before the run, not after it.
BOOST_AUTO_TEST_CASE(an_output_path_that_is_a_broken_symbolic_link_is_refused_before_the_run) {
  TempDir dir;
  fs::create_directory_symlink(dir.path("missing"), dir.path("dangling"));
  fs::create_symlink(dir.path("loop"), dir.path("loop"));
  for (const std::string name : {"dangling", "loop"})
    expect_refused(run_tpusim("run " + quoted(example_workload()) + " -o " + quoted(dir.path(name)) + " --force"),
                   "is a symbolic link; name the directory itself");
  fs::create_directory(dir.path("target"));
  fs::create_directory_symlink(dir.path("target"), dir.path("link"));
  BOOST_TEST(run_tpusim("run " + quoted(example_workload()) + " -o " + quoted(dir.path("link")) + " --trace none").exit_code == 0);
  BOOST_TEST(fs::exists(dir.path("target/summary.json")));
  BOOST_TEST(fs::is_symlink(dir.path("link")));
}

// A run killed while it wrote its trace leaves a staging folder that the next run beside it
// removes (the marker lists every file a run may write from the start); SIGHUP ends a run like
// SIGTERM, with its outputs closed as partial.
BOOST_AUTO_TEST_CASE(a_killed_run_is_cleaned_up_and_a_hung_up_one_closes_its_outputs) {
  TempDir dir;
  const std::string workload = quoted(source_path("workloads/examples/bert_large_128.json"));
  const CommandResult killed = run_tpusim_meanwhile(
      "run " + workload + kLongRun + " -o " + quoted(dir.path("out")), [&] { return staging_holds(dir, "out", "trace.json"); },
      [](pid_t pid) { ::kill(pid, SIGKILL); });
  BOOST_TEST(killed.exit_code == -1);  // killed
  BOOST_REQUIRE(staging_holds(dir, "out", "trace.json"));
  BOOST_REQUIRE(run_tpusim("run " + quoted(example_workload()) + " -o " + quoted(dir.path("next")) + " --trace none").exit_code == 0);
  BOOST_TEST(!staging_holds(dir, "out", ".tpusim-output"));
  const CommandResult hung_up = run_tpusim_meanwhile(
      "run " + workload + kLongRun + " -o " + quoted(dir.path("hup")), [&] { return staging_holds(dir, "hup", "trace.json"); },
      [](pid_t pid) { ::kill(pid, SIGHUP); });
  BOOST_TEST(hung_up.exit_code == 128 + SIGHUP, hung_up.err);
  BOOST_TEST(read_file(dir.path("hup/summary.json")).find("\"status\": \"interrupted\"") != std::string::npos);
}

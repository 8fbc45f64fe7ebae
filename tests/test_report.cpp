// The HTML report as a person sees it: loaded in headless Chromium (Debian's, installed by
// `./setup.sh --tests`), it renders every chart and table without console errors, and a
// screenshot of it is not blank.
#define BOOST_TEST_MODULE report
#include <boost/test/unit_test.hpp>

#include <zlib.h>

#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "test_helpers.hpp"

using namespace tpusim::test;

namespace {

const char* const kChromium =
    "chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking "
    "--disable-component-update --disable-sync --enable-logging=stderr --v=0";

bool have_chromium() { return std::system("command -v chromium >/dev/null 2>&1") == 0; }

// The distinct byte values of a PNG's decompressed image data: a blank page has only a few.
std::size_t distinct_image_bytes(const std::string& png) {
  if (png.size() < 8 || std::memcmp(png.data(), "\x89PNG\r\n\x1a\n", 8) != 0) return 0;
  std::string idat;
  for (std::size_t at = 8; at + 8 <= png.size();) {
    const auto* p = reinterpret_cast<const unsigned char*>(png.data() + at);
    const std::size_t length = (std::size_t{p[0]} << 24) | (p[1] << 16) | (p[2] << 8) | p[3];
    const std::string type = png.substr(at + 4, 4);
    if (type == "IDAT") idat += png.substr(at + 8, length);
    at += 12 + length;
  }
  std::string raw(64 << 20, '\0');
  uLongf size = raw.size();
  if (uncompress(reinterpret_cast<Bytef*>(raw.data()), &size, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) != Z_OK)
    return 0;
  std::set<unsigned char> values(raw.begin(), raw.begin() + static_cast<std::ptrdiff_t>(size));
  return values.size();
}

}  // namespace

BOOST_AUTO_TEST_CASE(report_renders_in_headless_chromium) {
  BOOST_REQUIRE_MESSAGE(have_chromium(), "chromium is not installed: run ./setup.sh --tests");
  TempDir dir;
  const CommandResult sweep = run_tpusim("sweep '" + example_workload() + "' -o '" + dir.path("s") +
                                         "' --vary workload.training.global_batch=512,1024,2048 --hw tpu_v2,tpu_v4");
  BOOST_REQUIRE_MESSAGE(sweep.exit_code == 0, sweep.err);
  const std::string url = "file://" + dir.path("s/report.html");
  const std::string profile = dir.path("profile");

  // The DOM after the page loaded: every chart and the table are there.
  const std::string dom = dir.path("dom.html"), log = dir.path("chromium.log");
  BOOST_REQUIRE(std::system((std::string(kChromium) + " --user-data-dir='" + profile + "' --dump-dom '" + url + "' >'" + dom +
                             "' 2>'" + log + "'").c_str()) == 0);
  const std::string rendered = read_file(dom);
  for (const char* id : {"throughput", "step_time", "breakdown", "utilization", "memory", "timeline", "points"})
    BOOST_TEST(rendered.find(std::string("id=\"") + id + "\"") != std::string::npos, id);
  BOOST_TEST(rendered.find("005_hw=tpu_v4_global_batch=2048") != std::string::npos);
  const std::string messages = read_file(log);
  BOOST_TEST(messages.find("CONSOLE") == std::string::npos, messages);  // no console messages, errors or otherwise
  BOOST_TEST(messages.find("Uncaught") == std::string::npos);

  // A screenshot with charts in it, not a blank page.
  const std::string shot = dir.path("report.png");
  BOOST_REQUIRE(std::system((std::string(kChromium) + " --user-data-dir='" + profile + "' --window-size=900,1400 --screenshot='" +
                             shot + "' '" + url + "' >/dev/null 2>&1").c_str()) == 0);
  BOOST_TEST(distinct_image_bytes(read_file(shot)) > 40u);
  // The same check on a blank page fails, so it can tell.
  const std::string blank = dir.write("blank.html", "<html><body></body></html>");
  const std::string blank_shot = dir.path("blank.png");
  BOOST_REQUIRE(std::system((std::string(kChromium) + " --user-data-dir='" + profile + "' --window-size=900,1400 --screenshot='" +
                             blank_shot + "' 'file://" + blank + "' >/dev/null 2>&1").c_str()) == 0);
  BOOST_TEST(distinct_image_bytes(read_file(blank_shot)) <= 40u);
}

BOOST_AUTO_TEST_CASE(run_writes_a_report_for_its_single_point) {
  TempDir dir;
  const CommandResult r = run_tpusim("run '" + example_workload() + "' -o '" + dir.path("out") + "' --trace none");
  BOOST_REQUIRE(r.exit_code == 0);
  const std::string html = read_file(dir.path("out/report.html"));
  BOOST_TEST(html.find("id=\"breakdown\"") != std::string::npos);
  BOOST_TEST(html.find("1 of 1 points finished") != std::string::npos);
  BOOST_TEST(html.find("id=\"timeline\"") != std::string::npos);

  // The timeline behind it: chip 0's units over the steady step, each track's intervals sorted,
  // disjoint and inside the step.
  const auto timeline = nlohmann::json::parse(read_file(dir.path("out/timeline.json")));
  const auto summary = nlohmann::json::parse(read_file(dir.path("out/summary.json")));
  const double window_ps = timeline["window_ps"].get<double>();
  BOOST_TEST(window_ps == summary["step_time_s"].get<double>() * 1e12, boost::test_tools::tolerance(1e-9));
  std::set<std::string> labels;
  for (const auto& track : timeline["tracks"]) {
    labels.insert(track["label"].get<std::string>());
    double last_end = -1;
    for (const auto& interval : track["busy_ps"]) {
      BOOST_TEST(interval[0].get<double>() > last_end);
      BOOST_TEST(interval[1].get<double>() > interval[0].get<double>());
      BOOST_TEST(interval[1].get<double>() <= window_ps);
      last_end = interval[1].get<double>();
    }
  }
  for (const char* unit : {"core0.mxu0", "core1.vpu", "core0.ops.matmul", "ici.x+ -> chip1"})
    BOOST_TEST(labels.count(unit) == 1u, unit);
}

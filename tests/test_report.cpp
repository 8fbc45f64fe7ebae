// The HTML report as a person sees it: loaded in headless Chromium (Debian's, installed by
// `./setup.sh --tests`), it renders every chart and table without console errors, and a
// screenshot of it is not blank.
#define BOOST_TEST_MODULE report
#include <boost/test/unit_test.hpp>

#include <zlib.h>

#include <cmath>
#include <cstring>
#include <map>
#include <regex>
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

// Every match of `pattern`'s first group in `text`.
std::vector<std::string> matches(const std::string& text, const std::string& pattern) {
  std::vector<std::string> out;
  const std::regex re(pattern);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) out.push_back((*it)[1].str());
  return out;
}

// The <svg id="ID"> element of the page, or "".
std::string chart_of(const std::string& html, const std::string& id) {
  const auto start = html.find("<svg id=\"" + id + "\"");
  if (start == std::string::npos) return "";
  return html.substr(start, html.find("</svg>", start) - start);
}

// Every chart's axis ticks ("0 µs", "$0.05", "20%", "2 GiB", "10M") are 0, d, 2d, ... with d 1, 2 or
// 5 x 10^k: no axis is the largest value divided by four.
void check_round_ticks(const std::string& html) {
  std::size_t axes = 0;
  for (const auto& id : matches(html, "<svg id=\"([a-z_0-9]+)\"")) {
    const std::string svg = chart_of(html, id);
    std::vector<std::string> kinds = {"ytick"};
    // Numeric x axes: the time-against-cost chart, the timeline, a single run's bar lists.
    if (!contains(svg, "class=\"tick ytick\"")) kinds = {"xtick"};
    if (id == "pareto") kinds.push_back("xtick");
    for (const auto& kind : kinds) {
      std::vector<double> values;
      for (auto label : matches(svg, "class=\"tick " + kind + "\"[^>]*>([^<]*)<")) {
        if (!label.empty() && label[0] == '$') label = label.substr(1);
        char* end = nullptr;
        values.push_back(std::strtod(label.c_str(), &end));
        BOOST_TEST((end != label.c_str()), id + ": tick label " + label);
      }
      BOOST_TEST_REQUIRE(values.size() >= 2u, id + " " + kind);
      ++axes;
      BOOST_TEST(values[0] == 0.0, id);
      const double step = values[1] - values[0];
      BOOST_TEST_REQUIRE(step > 0, id);
      const double mantissa = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
      BOOST_TEST((std::fabs(mantissa - 1) < 1e-6 || std::fabs(mantissa - 2) < 1e-6 || std::fabs(mantissa - 5) < 1e-6),
                 id + ": tick step " + std::to_string(step));
      for (std::size_t i = 1; i < values.size(); ++i)
        BOOST_TEST(std::fabs(values[i] - values[i - 1] - step) < 1e-6 * step, id + ": ticks evenly spaced");
    }
  }
  BOOST_TEST(axes >= 3u);
}

// Every figure in a table cell carries its unit: "34.5 ms", "46.4%", "2.07 GiB", "$0.30", not
// "34.5m" or "0.464".
void check_units_in_cells(const std::string& html) {
  const auto cells = matches(html, "<td class=\"num[^\"]*\">([^<]*)</td>");
  BOOST_TEST(cells.size() >= 5u);
  const std::regex bare(R"(^[-+0-9.,e]+[kMGTmunp]?( \(#[0-9]+\))?$)");
  for (const auto& cell : cells) {
    if (cell.find_first_of("0123456789") == std::string::npos) continue;
    BOOST_TEST(!std::regex_match(cell, bare), "a number without its unit: " + cell);
    BOOST_TEST(!contains(cell, "µ ") , cell);
  }
}

// Loads the page in Chromium: no console messages, and a screenshot with something on it.
void check_renders(const TempDir& dir, const std::string& page, const std::string& name) {
  const std::string url = "file://" + page, profile = dir.path("profile");
  const std::string dom = dir.path(name + ".dom.html"), log = dir.path(name + ".log"), shot = dir.path(name + ".png");
  BOOST_REQUIRE(std::system((std::string(kChromium) + " --user-data-dir='" + profile + "' --dump-dom '" + url + "' >'" + dom + "' 2>'" + log +
                             "'").c_str()) == 0);
  BOOST_TEST(!contains(read_file(log), "CONSOLE"), read_file(log));
  BOOST_REQUIRE(std::system((std::string(kChromium) + " --user-data-dir='" + profile + "' --window-size=1000,1400 --screenshot='" + shot +
                             "' '" + url + "' >/dev/null 2>&1").c_str()) == 0);
  BOOST_TEST(distinct_image_bytes(read_file(shot)) > 40u);
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
  for (const char* id : {"throughput", "throughput_per_chip", "step_time", "mfu", "cost", "energy", "breakdown", "utilization", "memory",
                         "hbm_fraction", "pareto", "ranking", "timeline", "points"})
    BOOST_TEST(rendered.find(std::string("id=\"") + id + "\"") != std::string::npos, id);
  BOOST_TEST(rendered.find("005_hw=tpu_v4_global_batch=2048") != std::string::npos);
  // Two keys varied: one line per preset across the batch sizes, never one line through all six points.
  const std::string throughput = chart_of(rendered, "throughput");
  BOOST_TEST(matches(throughput, "<path d=\"([^\"]*)\"").size() == 2u);
  for (const auto& path : matches(throughput, "<path d=\"([^\"]*)\"")) BOOST_TEST(std::count(path.begin(), path.end(), 'L') == 2);
  BOOST_TEST((matches(throughput, "class=\"tick legend\"[^>]*>([^<]*)<") == std::vector<std::string>{"tpu_v2", "tpu_v4"}));
  BOOST_TEST((matches(throughput, "class=\"tick xtick\"[^>]*>([^<]*)<") == std::vector<std::string>{"512", "1024", "2048"}));
  check_round_ticks(rendered);
  check_units_in_cells(rendered);
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
  BOOST_TEST(html.find("id=\"timeline\"") != std::string::npos);
  // A single run's page: titled as a run, bars and a table of its figures, no one-dot line charts.
  BOOST_TEST(contains(html, "<title>tpusim run: mlp_mnist on tpu_v2 2x2</title>"));
  BOOST_TEST(contains(html, "<h1>tpusim run: mlp_mnist on tpu_v2 2x2</h1>"));
  std::string lower = html;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  BOOST_TEST(!contains(lower, "sweep"));
  BOOST_TEST(!contains(html, "<circle"));
  BOOST_TEST(!contains(html, "<path"));
  BOOST_TEST(!contains(html, "points finished"));
  BOOST_TEST(contains(html, "id=\"figures\""));
  BOOST_TEST(contains(html, "data-hw=\"tpu_v2\" data-bytes=\"8589934592\""));
  check_round_ticks(html);
  check_units_in_cells(html);

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

// Presets of different HBM capacities in one sweep, with impossible preset/slice pairs among the
// points: every preset is drawn against its own capacity, one line per (preset, slice) that ran,
// and the ranking agrees with sweep.json's.
BOOST_AUTO_TEST_CASE(mixed_preset_sweep_compares_each_point_with_its_own_hardware) {
  BOOST_REQUIRE_MESSAGE(have_chromium(), "chromium is not installed: run ./setup.sh --tests");
  TempDir dir;
  const std::string args = "sweep '" + example_workload() +
                           "' --hw tpu_v4,tpu_v5e,tpu_v6e --topology 2x2x1,2x4 --vary workload.training.global_batch=512,2048"
                           " --set workload.training.dataset_examples=60000 -j 2 -o ";
  const CommandResult sweep = run_tpusim(args + "'" + dir.path("s") + "'");
  BOOST_REQUIRE_MESSAGE(sweep.exit_code == 1, sweep.err);  // v4 comes in 3D slices, v5e and v6e in 2D: some points cannot exist
  const std::string html = read_file(dir.path("s/report.html"));
  const auto json = nlohmann::json::parse(read_file(dir.path("s/sweep.json")));

  // One capacity per preset that ran, each that preset's own.
  std::set<std::pair<std::string, std::string>> expected, drawn;
  std::map<std::string, int> time_rank;
  std::size_t ok = 0;
  for (const auto& row : json["rows"]) {
    if (row["status"] != "ok") continue;
    ++ok;
    expected.emplace(row["summary"]["hw"].get<std::string>(),
                     std::to_string(row["summary"]["memory"]["hbm_capacity_bytes"].get<std::uint64_t>()));
    time_rank[row["point"].get<std::string>()] = row["rank"]["time_to_train_s"].get<int>();
  }
  BOOST_TEST_REQUIRE(ok == 6u);
  BOOST_TEST(expected.size() == 3u);
  const std::regex capacity("class=\"capacity[^\"]*\"[^>]*data-hw=\"([^\"]*)\" data-bytes=\"([0-9]+)\"");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), capacity); it != std::sregex_iterator(); ++it)
    drawn.emplace((*it)[1].str(), (*it)[2].str());
  BOOST_TEST((drawn == expected));
  BOOST_TEST(!contains(html, "HBM 8 GiB"));  // no other preset's capacity

  // Lines: one per preset and slice that ran, across the two batch sizes.
  for (const char* id : {"throughput", "throughput_per_chip", "step_time", "cost", "energy"}) {
    const std::string chart = chart_of(html, id);
    BOOST_TEST((matches(chart, "class=\"tick legend\"[^>]*>([^<]*)<") ==
                std::vector<std::string>{"tpu_v4, 2x2x1", "tpu_v5e, 2x4", "tpu_v6e, 2x4"}), id);
    BOOST_TEST(matches(chart, "<path d=\"([^\"]*)\"").size() == 3u, id);
  }
  BOOST_TEST(contains(html, "<title>tpusim sweep: mlp_mnist</title>"));

  // The ranking: every point that ran, by time to train as sweep.json ranks them, the fastest on the Pareto front.
  const std::regex ranking_row(R"re(<tr( class="front")?><td class="rank">#([0-9]+)</td><td class="left" title="([^"]+)">)re");
  std::size_t ranked = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), ranking_row); it != std::sregex_iterator(); ++it, ++ranked) {
    const int rank = std::stoi((*it)[2].str());
    BOOST_TEST(rank == time_rank[(*it)[3].str()], (*it)[3].str());
    if (rank == 1) BOOST_TEST((*it)[1].matched);
  }
  BOOST_TEST(ranked == ok);
  BOOST_TEST(!matches(html, "(class=\"onfront\")").empty());

  check_round_ticks(html);
  check_units_in_cells(html);
  check_renders(dir, dir.path("s/report.html"), "mixed");

  // The same sweep again: the same bytes.
  const CommandResult again = run_tpusim(args + "'" + dir.path("again") + "'");
  BOOST_REQUIRE(again.exit_code == 1);
  BOOST_TEST((read_file(dir.path("again/report.html")) == html));
}

// Three keys varied at once: the last numeric one is the x axis, every combination of the other
// two a line of its own, and the per-point labels name each point's values.
BOOST_AUTO_TEST_CASE(multi_key_sweep_draws_one_line_per_combination) {
  TempDir dir;
  const CommandResult sweep = run_tpusim("sweep '" + example_workload() +
                                         "' --vary workload.training.precision=float32,mixed_bfloat16 --vary workload.training.global_batch=512,1024"
                                         " --vary hw.hbm.bw_gbps=500,700 -j 2 -o '" + dir.path("s") + "'");
  BOOST_REQUIRE_MESSAGE(sweep.exit_code == 0, sweep.err);
  const std::string html = read_file(dir.path("s/report.html"));
  const std::string throughput = chart_of(html, "throughput");
  BOOST_TEST((matches(throughput, "class=\"tick legend\"[^>]*>([^<]*)<") ==
              std::vector<std::string>{"precision=float32, global_batch=512", "precision=float32, global_batch=1024",
                                       "precision=mixed_bfloat16, global_batch=512", "precision=mixed_bfloat16, global_batch=1024"}));
  BOOST_TEST((matches(throughput, "class=\"tick xtick\"[^>]*>([^<]*)<") == std::vector<std::string>{"500", "700"}));
  BOOST_TEST(contains(throughput, ">bw_gbps<"));
  const auto paths = matches(throughput, "<path d=\"([^\"]*)\"");
  BOOST_TEST(paths.size() == 4u);
  for (const auto& path : paths) BOOST_TEST(std::count(path.begin(), path.end(), 'L') == 1);
  // Each bar of the breakdown is labelled with all three of its values (whole, or cut with the whole as a tooltip).
  BOOST_TEST(matches(chart_of(html, "breakdown"), "class=\"tick xtick\"[^>]*>([^<]*)<").size() == 8u * 3u);
  // No per-point label runs out of its chart: an SVG text cannot wrap.
  for (const auto& label : matches(html, "class=\"tick xtick\"[^>]*>([^<]*)<")) BOOST_TEST(label.size() <= 40u, label);
  check_round_ticks(html);
  check_units_in_cells(html);
}

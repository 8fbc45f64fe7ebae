#include "traces/report.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

namespace tpusim {
namespace {

using ojson = nlohmann::ordered_json;

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

double number_at(const ojson& row, std::initializer_list<const char*> path) {
  const ojson* j = &row["summary"];
  for (const char* key : path) {
    if (!j->is_object() || !j->contains(key)) return NAN;
    j = &(*j)[key];
  }
  return j->is_number() ? j->get<double>() : NAN;
}

// The point's values of the keys that differ between points, e.g. "global_batch=1024, hw=tpu_v4".
std::string label_of(const ojson& row, const std::vector<std::string>& differing) {
  std::string label;
  for (const auto& [k, v] : row["varied"].items()) {
    if (std::find(differing.begin(), differing.end(), k) == differing.end()) continue;
    const auto dot = k.rfind('.');
    label += (label.empty() ? "" : ", ") + (dot == std::string::npos ? k : k.substr(dot + 1)) + "=" + v.get<std::string>();
  }
  return label;
}

std::string format_value(double v, bool percent = false) {
  if (percent) return fmt::format("{:.3g}%", 100 * v);
  const double a = std::fabs(v);
  if (a >= 1e9) return fmt::format("{:.3g}G", v / 1e9);
  if (a >= 1e6) return fmt::format("{:.3g}M", v / 1e6);
  if (a >= 1e3) return fmt::format("{:.3g}k", v / 1e3);
  if (a >= 1 || a == 0) return fmt::format("{:.3g}", v);
  if (a >= 1e-3) return fmt::format("{:.3g}m", v * 1e3);
  return fmt::format("{:.3g}µ", v * 1e6);
}

// "chip5.core0, 1.61 ms lost" when the slice loses at least 1% of the step waiting for one core
// (a slow chip, a slow link's neighbour); empty on a slice whose cores keep pace.
std::string straggler_of(const ojson& row) {
  const double lost = number_at(row, {"straggler", "time_lost_s"}), step = number_at(row, {"step_time_s"});
  if (std::isnan(lost) || std::isnan(step) || lost < 0.01 * step) return "";
  return fmt::format("{}, {}s lost", row["summary"]["straggler"]["core"].get<std::string>(), format_value(lost));
}

struct Series {
  std::string name;
  std::string color;
  std::vector<double> values;  // one per point; NaN: no value (failed or OOM)
};

constexpr int kWidth = 860, kHeight = 330, kLeft = 70, kRight = 130, kTop = 46, kBottom = 120;  // labels run right

// Bars per point (stacked when `stacked`), or lines through the points.
std::string chart(const std::string& id, const std::string& title, const std::string& unit,
                  const std::vector<std::string>& labels, const std::vector<Series>& series, bool bars, bool stacked,
                  const std::vector<bool>& marked = {}, double reference = NAN, const std::string& reference_name = "",
                  bool percent = false) {
  const std::size_t n = labels.size();
  double top = std::isnan(reference) ? 0 : reference;
  for (std::size_t i = 0; i < n; ++i) {
    double sum = 0;
    for (const auto& s : series)
      if (!std::isnan(s.values[i])) {
        sum = stacked ? sum + s.values[i] : std::max(sum, s.values[i]);
      }
    top = std::max(top, sum);
  }
  if (top <= 0) top = 1;
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  auto x_of = [&](std::size_t i) { return kLeft + plot_w * (static_cast<double>(i) + 0.5) / static_cast<double>(n); };
  auto y_of = [&](double v) { return kTop + plot_h * (1 - v / top); };
  std::string svg = fmt::format(R"(<svg id="{}" class="chart" width="{}" height="{}" viewBox="0 0 {} {}" role="img">)", id, kWidth,
                                kHeight, kWidth, kHeight);
  svg += fmt::format(R"(<text x="{}" y="18" class="title">{} ({})</text>)", kLeft, escape(title), escape(unit));
  for (int t = 0; t <= 4; ++t) {
    const double v = top * t / 4;
    svg += fmt::format(R"(<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" class="grid"/><text x="{}" y="{:.1f}" class="tick" text-anchor="end">{}</text>)",
                       kLeft, kWidth - kRight, y_of(v), y_of(v), kLeft - 6, y_of(v) + 4, format_value(v, percent));
  }
  const double bar_w = std::max(2.0, plot_w / static_cast<double>(n) * (bars && !stacked ? 0.8 / static_cast<double>(series.size()) : 0.6));
  for (std::size_t i = 0; i < n; ++i) {
    double base = 0;
    for (std::size_t k = 0; k < series.size(); ++k) {
      const double v = series[k].values[i];
      if (std::isnan(v)) continue;
      if (bars) {
        const double x = stacked ? x_of(i) - bar_w / 2
                                 : x_of(i) - bar_w * static_cast<double>(series.size()) / 2 + bar_w * static_cast<double>(k);
        const double y0 = stacked ? base : 0;
        svg += fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}"><title>{}: {}</title></rect>)",
                           x, y_of(y0 + v), bar_w, y_of(y0) - y_of(y0 + v), series[k].color, escape(series[k].name), format_value(v, percent));
        if (stacked) base += v;
      }
    }
    if (i < marked.size() && marked[i])
      svg += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" class="mark" text-anchor="middle">OOM</text>)", x_of(i), kTop + plot_h - 4);
    svg += fmt::format(R"svg(<text x="{:.1f}" y="{}" class="tick" text-anchor="start" transform="rotate(30 {:.1f} {})">{}</text>)svg",
                       x_of(i), kTop + plot_h + 16, x_of(i), kTop + plot_h + 16, escape(labels[i]));
  }
  if (!bars)
    for (const auto& s : series) {
      std::string path;
      for (std::size_t i = 0; i < n; ++i) {
        if (std::isnan(s.values[i])) continue;
        path += fmt::format("{}{:.1f},{:.1f} ", path.empty() ? "M" : "L", x_of(i), y_of(s.values[i]));
        svg += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="3.5" fill="{}"><title>{}: {}</title></circle>)", x_of(i),
                           y_of(s.values[i]), s.color, escape(s.name), format_value(s.values[i], percent));
      }
      if (!path.empty()) svg += fmt::format(R"(<path d="{}" fill="none" stroke="{}" stroke-width="2"/>)", path, s.color);
    }
  if (!std::isnan(reference))
    svg += fmt::format(R"(<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" class="reference"/><text x="{}" y="{:.1f}" class="tick">{}</text>)",
                       kLeft, kWidth - kRight, y_of(reference), y_of(reference), kLeft + 4, y_of(reference) - 4, escape(reference_name));
  int lx = kLeft;
  for (const auto& s : series) {
    svg += fmt::format(R"(<rect x="{}" y="26" width="10" height="10" fill="{}"/><text x="{}" y="35" class="tick">{}</text>)", lx,
                       s.color, lx + 14, escape(s.name));
    lx += 28 + 6 * static_cast<int>(s.name.size());
  }
  return svg + "</svg>\n";
}

}  // namespace

// One row per unit, its busy intervals as bars across the step.
std::string timeline_chart(const ojson& timeline) {
  const auto& tracks = timeline["tracks"];
  const double window_ps = std::max(1.0, timeline["window_ps"].get<double>());
  constexpr int kLabelWidth = 150, kPlotWidth = 760, kRow = 16, kAxis = 34;
  const int height = kAxis + kRow * static_cast<int>(tracks.size()) + 24;
  auto color_of = [](const std::string& kind) {
    if (kind == "mxu") return "#2ca02c";
    if (kind == "vpu") return "#17becf";
    if (kind == "dma") return "#9467bd";
    if (kind == "ici") return "#d62728";
    if (kind == "collective") return "#ff7f0e";
    if (kind == "steps") return "#7f7f7f";
    return "#1f77b4";  // op engines
  };
  std::string svg = fmt::format(R"(<svg id="timeline" class="chart" width="{0}" height="{1}" viewBox="0 0 {0} {1}" role="img">)",
                                kLabelWidth + kPlotWidth + 20, height);
  svg += fmt::format(R"(<text x="{}" y="18" class="title">Busy units of chip 0 over one step ({})</text>)", kLabelWidth,
                     escape(format_value(window_ps * 1e-12) + "s"));
  for (int tick = 0; tick <= 4; ++tick) {
    const double x = kLabelWidth + kPlotWidth * tick / 4.0;
    svg += fmt::format(R"(<line x1="{0:.1f}" x2="{0:.1f}" y1="{1}" y2="{2}" class="grid"/><text x="{0:.1f}" y="{3}" class="tick" text-anchor="middle">{4}</text>)",
                       x, kAxis - 6, height - 20, height - 6, escape(format_value(window_ps * 1e-12 * tick / 4) + "s"));
  }
  int row = 0;
  for (const auto& track : tracks) {
    const int y = kAxis + kRow * row++;
    const std::string label = track["label"].get<std::string>();
    svg += fmt::format(R"(<text x="{}" y="{}" class="tick" text-anchor="end">{}</text>)", kLabelWidth - 6, y + kRow - 4, escape(label));
    const char* color = color_of(track["kind"].get<std::string>());
    for (const auto& interval : track["busy_ps"]) {
      const double x0 = kLabelWidth + kPlotWidth * interval[0].get<double>() / window_ps;
      const double x1 = kLabelWidth + kPlotWidth * interval[1].get<double>() / window_ps;
      svg += fmt::format(R"(<rect x="{:.1f}" y="{}" width="{:.1f}" height="{}" fill="{}"/>)", x0, y + 2, std::max(0.5, x1 - x0),
                         kRow - 4, color);
    }
  }
  return svg + "</svg>\n";
}

std::string render_sweep_report(const ojson& sweep, const ojson& timeline, const std::string& timeline_point) {
  const ojson& rows = sweep["rows"];
  std::vector<std::string> differing;  // keys whose value is not the same in every row
  for (const auto& row : rows)
    for (const auto& [k, v] : row["varied"].items())
      if (std::find(differing.begin(), differing.end(), k) == differing.end() && v != rows[0]["varied"][k])
        differing.push_back(k);
  std::vector<std::string> labels;
  std::vector<bool> oom;
  for (const auto& row : rows) {
    labels.push_back(label_of(row, differing));
    oom.push_back(row["status"] == "oom");
  }
  auto series = [&](const std::string& name, const std::string& color, std::initializer_list<const char*> path, double scale = 1) {
    Series s{name, color, {}};
    for (const auto& row : rows) s.values.push_back(number_at(row, path) * scale);
    return s;
  };
  double capacity = NAN;
  for (const auto& row : rows) {
    const double c = number_at(row, {"memory", "hbm_capacity_bytes"});
    if (!std::isnan(c)) capacity = std::isnan(capacity) ? c : std::min(capacity, c);
  }

  std::string html = R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>tpusim sweep</title>
<style>
body { font-family: sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
.chart { display: block; margin: 8px 0; background: #fafafa; border: 1px solid #ddd; }
.title { font-size: 13px; font-weight: bold; } .tick { font-size: 11px; fill: #444; }
.grid { stroke: #e4e4e4; } .reference { stroke: #c00; stroke-dasharray: 4 3; } .mark { font-size: 11px; fill: #c00; font-weight: bold; }
table { border-collapse: collapse; font-size: 12px; } td, th { border: 1px solid #ccc; padding: 3px 6px; text-align: right; }
th { background: #f0f0f0; } td.left { text-align: left; } tr.failed td { color: #c00; }
</style></head><body>
)";
  const std::size_t interrupted = sweep.value("interrupted", std::size_t{0});
  html += fmt::format("<h1>tpusim sweep: {}</h1>\n<p>{} of {} points finished{}.</p>\n", escape(sweep["workload"].get<std::string>()),
                      rows.size() - interrupted, sweep["points"].get<std::size_t>(),
                      interrupted ? fmt::format(", {} interrupted (partial)", interrupted) : "");
  html += "<h2>Throughput and step time</h2>\n";
  html += chart("throughput", "Throughput", "samples/s", labels, {series("samples/s", "#1f77b4", {"samples_per_s"})}, false, false, oom);
  html += chart("step_time", "Step time (steady state)", "s", labels, {series("step time", "#ff7f0e", {"step_time_s"})}, false, false, oom);
  html += "<h2>Where the step time goes</h2>\n";
  html += chart("breakdown", "Step-time breakdown per core", "s", labels,
                {series("compute", "#2ca02c", {"breakdown", "compute_s"}),
                 series("exposed communication", "#d62728", {"breakdown", "exposed_communication_s"}),
                 series("memory-bound", "#9467bd", {"breakdown", "memory_bound_s"}),
                 series("input wait", "#8c564b", {"breakdown", "input_wait_s"}),
                 series("idle", "#bbbbbb", {"breakdown", "idle_s"})},
                true, true, oom);
  html += "<h2>Utilization</h2>\n";
  html += chart("utilization", "MFU and busy fractions", "fraction", labels,
                {series("MFU", "#000000", {"mfu"}), series("MXU", "#2ca02c", {"utilization", "mxu"}),
                 series("VPU", "#17becf", {"utilization", "vpu"}), series("HBM", "#9467bd", {"utilization", "hbm"}),
                 series("ICI", "#d62728", {"utilization", "ici"})},
                false, false, oom, NAN, "", true);
  html += "<h2>Memory per core</h2>\n";
  html += chart("memory", "Memory per core against HBM capacity", "bytes", labels,
                {series("parameters", "#1f77b4", {"memory", "per_core", "parameters_bytes"}),
                 series("gradients", "#ff7f0e", {"memory", "per_core", "gradients_bytes"}),
                 series("optimizer state", "#2ca02c", {"memory", "per_core", "optimizer_state_bytes"}),
                 series("activations", "#9467bd", {"memory", "per_core", "activations_bytes"})},
                true, true, oom, capacity, "HBM capacity");

  if (!timeline.is_null() && !timeline["tracks"].empty()) {
    html += fmt::format("<h2>Timeline of one step</h2>\n<p>Point {}: the steady-state step, chip 0, one row per unit "
                        "that was busy (intervals closer than a pixel merged; open trace.json in Perfetto for every "
                        "op).</p>\n",
                        escape(timeline_point));
    html += timeline_chart(timeline);
  }
  html += "<h2>All points</h2>\n<table id=\"points\"><tr><th>point</th><th>status</th><th>step time</th><th>samples/s</th><th>MFU</th>"
          "<th>memory/core</th><th>USD/step</th><th>samples/USD (rank)</th><th>J/sample</th><th>time to train (rank)</th>"
          "<th>USD to train</th><th>straggler</th><th>reason</th></tr>\n";
  for (const auto& row : rows) {
    const bool good = row["status"] == "ok";
    auto cell = [&](std::initializer_list<const char*> path) {
      const double v = number_at(row, path);
      return std::isnan(v) ? std::string() : format_value(v);
    };
    // A sweep ranks its points (1: best); a single run's report has nothing to rank against.
    auto ranked = [&](std::initializer_list<const char*> path, const char* rank) {
      std::string text = cell(path);
      if (!text.empty() && row.contains("rank") && row["rank"].is_object() && row["rank"][rank].is_number())
        text += fmt::format(" ({})", row["rank"][rank].get<std::uint64_t>());
      return text;
    };
    html += fmt::format("<tr{}><td class=\"left\">{}</td><td class=\"left\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
                        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"left\">{}</td><td class=\"left\">{}</td></tr>\n",
                        good ? "" : " class=\"failed\"", escape(row["point"].get<std::string>()),
                        escape(row["status"].get<std::string>()), cell({"step_time_s"}), cell({"samples_per_s"}), cell({"mfu"}),
                        cell({"memory", "per_core", "total_bytes"}), cell({"cost", "usd_per_step"}),
                        ranked({"cost", "samples_per_usd"}, "samples_per_usd"), cell({"energy", "joules_per_sample"}),
                        ranked({"cost", "time_to_train_s"}, "time_to_train_s"), cell({"cost", "usd_to_train"}),
                        escape(straggler_of(row)), escape(row["reason"].get<std::string>()));
  }
  html += "</table>\n</body></html>\n";
  return html;
}

}  // namespace tpusim

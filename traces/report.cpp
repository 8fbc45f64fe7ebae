#include "traces/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "traces/summary.hpp"

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

// A row of the sweep (its point, status, reason and varied values) and its run's summary, when
// the point ran.
struct Point {
  SweepRow row;
  std::optional<RunSummary> summary;

  explicit Point(const SweepRow& r) : row(r), summary(r.run_summary()) {}
  bool ok() const { return row.ok(); }
  bool out_of_memory() const { return row.out_of_memory(); }
};

// A figure of a summary, NaN where the run has none.
using Figure = double (*)(const RunSummary&);

double figure(const std::optional<double>& value) { return value ? *value : NAN; }
template <typename Block>
double figure(const std::optional<Block>& block, std::optional<double> Block::*member) {
  return block ? figure((*block).*member) : NAN;
}
template <typename Block>
double figure(const std::optional<Block>& block, double Block::*member) {
  return block ? (*block).*member : NAN;
}
double figure(const Point& p, Figure f) { return p.summary ? f(*p.summary) : NAN; }

// ---- Units: every figure the report shows is printed with its unit, by one routine per unit.

enum class Unit { seconds, bytes, percent, usd, samples_per_s, samples_per_usd, joules, watts };

// How a magnitude is shown: value / divisor, between `before` and `after` ("$", " ms", " GiB").
struct Scale {
  double divisor = 1;
  std::string before, after;
};

// The SI exponent (a multiple of 3) of `a` once rounded to 3 significant digits.
int exponent3(double a) {
  if (!(a > 0) || !std::isfinite(a)) return 0;
  const double p = std::pow(10.0, std::floor(std::log10(a)) - 2);
  const double rounded = std::round(a / p) * p;
  const int e = static_cast<int>(std::floor(std::log10(rounded) + 1e-12));
  return static_cast<int>(std::floor(e / 3.0)) * 3;
}

const char* si_prefix(int e3) {
  switch (e3) {
    case -12: return "p";
    case -9: return "n";
    case -6: return "µ";
    case -3: return "m";
    case 3: return "k";
    case 6: return "M";
    case 9: return "G";
    case 12: return "T";
    default: return "";
  }
}

Scale si_scale(double magnitude, int lowest, int highest, const std::string& space, const std::string& symbol) {
  const int e3 = std::clamp(exponent3(magnitude), lowest, highest);
  return {std::pow(10.0, e3), "", space + si_prefix(e3) + symbol};
}

Scale scale_for(Unit unit, double magnitude) {
  magnitude = std::fabs(magnitude);
  switch (unit) {
    case Unit::seconds:
      if (magnitude >= 7200) return {3600, "", " h"};
      if (magnitude >= 120) return {60, "", " min"};
      return si_scale(magnitude, -12, 0, " ", "s");
    case Unit::bytes: {
      static const char* const names[] = {" B", " KiB", " MiB", " GiB", " TiB"};
      int k = 0;
      while (k < 4 && magnitude >= std::pow(1024.0, k + 1)) ++k;
      return {std::pow(1024.0, k), "", names[k]};
    }
    case Unit::percent: return {0.01, "", "%"};
    case Unit::usd: return {1, "$", ""};
    case Unit::samples_per_s:
    case Unit::samples_per_usd: return si_scale(magnitude, 0, 12, "", "");
    case Unit::joules: return si_scale(magnitude, -12, 12, " ", "J");
    case Unit::watts: return si_scale(magnitude, -12, 12, " ", "W");
  }
  return {};
}

// What follows the prefix in a table cell but not on an axis (the chart's title says it): an
// axis of "20M samples/s" labels would not fit its margin.
std::string unit_tail(Unit unit) {
  if (unit == Unit::samples_per_s) return " samples/s";
  if (unit == Unit::samples_per_usd) return " samples/$";
  return "";
}

// The chart title with the unit the axis leaves out.
std::string titled(const std::string& title, Unit unit) {
  const std::string tail = unit_tail(unit);
  return tail.empty() ? title : title + " (" + tail.substr(1) + ")";
}

std::string strip_zeros(std::string text) {
  if (text.find('.') == std::string::npos) return text;
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  return text;
}

// Three significant digits with the unit: "34.5 ms", "46.4%", "2.07 GiB", "$0.30", "$0.000596".
std::string format(Unit unit, double v) {
  if (std::isnan(v)) return "";
  const Scale s = scale_for(unit, v);
  const double x = v / s.divisor;
  std::string digits;
  if (unit == Unit::usd) {
    const int decimals = std::fabs(x) >= 1 || x == 0 ? 2 : std::clamp(2 - static_cast<int>(std::floor(std::log10(std::fabs(x)))), 2, 14);
    digits = fmt::format("{:.{}f}", x, decimals);
  } else {
    const int decimals = x == 0 ? 0 : std::clamp(2 - static_cast<int>(std::floor(std::log10(std::fabs(x)))), 0, 6);
    digits = strip_zeros(fmt::format("{:.{}f}", x, decimals));
  }
  if (digits == "-0") digits = "0";
  return s.before + digits + s.after + unit_tail(unit);
}

// ---- The one axis routine every chart uses: ticks at 0, d, 2d, ... with d 1, 2 or 5 x 10^k in
// the unit the largest value is shown in, up to the first tick at or above the largest value.
struct Axis {
  Scale scale;
  double step = 1;
  int ticks = 1;  // the top tick's index; ticks 0..ticks
  int decimals = 0;
  double top() const { return step * ticks * scale.divisor; }
  double at(int i) const { return step * i * scale.divisor; }
  std::string label(int i) const {
    if (i == 0) return scale.before + "0" + (scale.after.empty() || scale.after[0] == ' ' || scale.after == "%" ? scale.after : "");  // "0", not "0k"
    return scale.before + fmt::format("{:.{}f}", step * i, decimals) + scale.after;
  }
};

Axis make_axis(Unit unit, double max_value) {
  Axis axis;
  axis.scale = scale_for(unit, std::isfinite(max_value) && max_value > 0 ? max_value : 0);
  double m = std::isfinite(max_value) && max_value > 0 ? max_value / axis.scale.divisor : 1;
  const double raw = m / 4;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / p;
  axis.step = (f <= 1 + 1e-9 ? 1 : f <= 2 + 1e-9 ? 2 : f <= 5 + 1e-9 ? 5 : 10) * p;
  axis.ticks = std::max(1, static_cast<int>(std::ceil(m / axis.step - 1e-9)));
  axis.decimals = std::max(0, -static_cast<int>(std::floor(std::log10(axis.step) + 1e-9)));
  return axis;
}

// ---- Labels

constexpr double kCharWidth = 6.6;  // an 11px sans-serif character, a little generous

// `text` cut to `chars` characters (an ellipsis at the end), with the whole of it as a tooltip
// when cut: SVG text does not wrap, so a long label would run into its neighbour or off the chart.
std::string svg_text(const std::string& attributes, const std::string& text, std::size_t chars, const std::string& tooltip = "") {
  std::string shown = text;
  // UTF-8 aware enough for the labels here (ASCII keys and values).
  if (chars >= 2 && shown.size() > chars) shown = shown.substr(0, chars - 1) + "…";
  const std::string tip = !tooltip.empty() ? tooltip : shown != text ? text : "";
  return fmt::format("<text {}>{}{}</text>", attributes, escape(shown), tip.empty() ? "" : "<title>" + escape(tip) + "</title>");
}

std::string short_key(const std::string& key) {
  const auto dot = key.rfind('.');
  return dot == std::string::npos ? key : key.substr(dot + 1);
}

// "tpu_v5e", "2x2", "per_replica_batch=128": the preset and slice by their value alone.
std::string part_label(const std::string& key, const std::string& value) {
  if (key == "hw" || key == "topology") return value;
  return short_key(key) + "=" + value;
}

bool is_number(const std::string& text) {
  if (text.empty()) return false;
  char* end = nullptr;
  std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size();
}

const char* const kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

// ---- Charts

constexpr int kWidth = 900, kLeft = 86, kRight = 24, kTop = 44, kPlotHeight = 180;
constexpr int kPlotWidth = kWidth - kLeft - kRight;

std::string svg_open(const std::string& id, int height) {
  return fmt::format(R"(<svg id="{0}" class="chart" width="{1}" height="{2}" viewBox="0 0 {1} {2}" role="img">)", id, kWidth, height);
}

// Title, horizontal grid lines and the y tick labels (class "ytick").
std::string y_axis(const std::string& title, const Axis& axis, int plot_top, int plot_h) {
  std::string svg = svg_text(fmt::format(R"(x="{}" y="18" class="title")", kLeft), title, 130);
  for (int t = 0; t <= axis.ticks; ++t) {
    const double y = plot_top + plot_h * (1 - static_cast<double>(t) / axis.ticks);
    svg += fmt::format(R"(<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" class="grid"/><text x="{}" y="{:.1f}" class="tick ytick" text-anchor="end">{}</text>)",
                       kLeft, kLeft + kPlotWidth, y, y, kLeft - 6, y + 4, escape(axis.label(t)));
  }
  return svg;
}

// A legend below the plot from `y`, wrapping onto more lines as needed; returns the height used.
int legend(std::string& svg, const std::vector<std::pair<std::string, std::string>>& entries, int y) {
  if (entries.size() <= 1 && (entries.empty() || entries[0].first.empty())) return 0;
  double x = kLeft;
  int lines = 1;
  for (const auto& [name, color] : entries) {
    const std::size_t chars = std::min<std::size_t>(name.size(), 46);
    const double w = 14 + kCharWidth * static_cast<double>(chars) + 16;
    if (x + w > kLeft + kPlotWidth && x > kLeft) {
      x = kLeft;
      ++lines;
      y += 16;
    }
    svg += fmt::format(R"(<rect x="{:.1f}" y="{}" width="10" height="10" fill="{}"/>)", x, y - 9, color);
    svg += svg_text(fmt::format(R"(x="{:.1f}" y="{}" class="tick legend")", x + 14, y), name, 46);
    x += w;
  }
  return 16 * lines + 4;
}

struct Series {
  std::string name;
  std::string color;
  std::vector<double> values;  // one per category; NaN: no value
  std::vector<bool> oom;       // one per category: the point ran out of HBM
};

// Lines across a numeric x axis (one per series), or grouped bars over categories. More than
// eight series become panels of eight on the same y axis (small multiples).
std::string series_chart(const std::string& id, const std::string& title, Unit unit, const std::string& x_name,
                         const std::vector<std::string>& categories, bool lines, const std::vector<Series>& all_series,
                         double reference = NAN, const std::string& reference_name = "") {
  const std::size_t n = categories.size();
  double top = std::isnan(reference) ? 0 : reference;
  for (const auto& s : all_series)
    for (double v : s.values)
      if (!std::isnan(v)) top = std::max(top, v);
  const Axis axis = make_axis(unit, top);
  constexpr std::size_t kPanel = 8;
  const std::size_t panels = std::max<std::size_t>(1, (all_series.size() + kPanel - 1) / kPanel);
  std::string out;
  for (std::size_t panel = 0; panel < panels; ++panel) {
    const std::vector<Series> series(all_series.begin() + static_cast<std::ptrdiff_t>(std::min(all_series.size(), panel * kPanel)),
                                     all_series.begin() + static_cast<std::ptrdiff_t>(std::min(all_series.size(), (panel + 1) * kPanel)));
    const double slot = kPlotWidth / static_cast<double>(n);
    auto x_of = [&](std::size_t i) { return kLeft + slot * (static_cast<double>(i) + 0.5); };
    auto y_of = [&](double v) { return kTop + kPlotHeight * (1 - v / axis.top()); };
    std::string svg;
    svg += y_axis(panels > 1 ? fmt::format("{} ({} of {})", titled(title, unit), panel + 1, panels) : titled(title, unit), axis, kTop, kPlotHeight);
    const double bar_w = slot * 0.8 / static_cast<double>(std::max<std::size_t>(1, series.size()));
    for (std::size_t k = 0; k < series.size(); ++k) {
      const Series& s = series[k];
      std::string path;
      for (std::size_t i = 0; i < n; ++i) {
        const std::string where = categories[i].empty() ? "" : categories[i] + ", ";
        if (i < s.oom.size() && s.oom[i]) {
          const double x = lines ? x_of(i) : x_of(i) - slot * 0.4 + bar_w * (static_cast<double>(k) + 0.5);
          svg += fmt::format(R"(<text x="{:.1f}" y="{}" class="mark" text-anchor="middle" fill="{}">OOM<title>{}{}: out of HBM</title></text>)", x,
                             kTop + kPlotHeight - 4 - (lines ? 12 * static_cast<int>(k) : 0), s.color, escape(where), escape(s.name));
        }
        const double v = s.values[i];
        if (std::isnan(v)) continue;
        const std::string tip = escape(fmt::format("{}{}: {}", where, s.name, format(unit, v)));
        if (lines) {
          path += fmt::format("{}{:.1f},{:.1f} ", path.empty() ? "M" : "L", x_of(i), y_of(v));
          svg += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="4" fill="{}"><title>{}</title></circle>)", x_of(i), y_of(v), s.color, tip);
        } else {
          const double x = x_of(i) - slot * 0.4 + bar_w * static_cast<double>(k);
          svg += fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}"><title>{}</title></rect>)", x + 1,
                             y_of(v), std::max(1.0, bar_w - 2), kTop + kPlotHeight - y_of(v), s.color, tip);
        }
      }
      if (lines && !path.empty())
        svg += fmt::format(R"(<path d="{}" fill="none" stroke="{}" stroke-width="2"/>)", path, s.color);
    }
    if (!std::isnan(reference))
      svg += fmt::format(R"(<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" class="reference"/><text x="{}" y="{:.1f}" class="tick">{}</text>)",
                         kLeft, kLeft + kPlotWidth, y_of(reference), y_of(reference), kLeft + 4, y_of(reference) - 4, escape(reference_name));
    // Category labels under the plot, the x axis's name under them.
    const auto chars = static_cast<std::size_t>(std::max(3.0, (slot - 4) / kCharWidth));
    for (std::size_t i = 0; i < n; ++i)
      svg += svg_text(fmt::format(R"(x="{:.1f}" y="{}" class="tick xtick" text-anchor="middle")", x_of(i), kTop + kPlotHeight + 16),
                      categories[i], chars);
    int y = kTop + kPlotHeight + 16;
    if (!x_name.empty()) {
      y += 16;
      svg += svg_text(fmt::format(R"(x="{}" y="{}" class="tick axisname" text-anchor="middle")", kLeft + kPlotWidth / 2, y), x_name, 120);
    }
    std::vector<std::pair<std::string, std::string>> entries;
    for (const auto& s : series) entries.emplace_back(s.name, s.color);
    const int used = legend(svg, entries, y + 22);
    out += svg_open(panel == 0 ? id : fmt::format("{}_{}", id, panel + 1), y + 12 + used) + svg + "</svg>\n";
  }
  return out;
}

// One bar (stacked components, or a group of them) per point, each point labelled under its bar:
// its varied values one per line when they fit, else one slanted line. `capacity` (per point,
// optional) draws that point's own HBM capacity over its bar.
struct PointLabel {
  std::vector<std::string> parts;  // "tpu_v5e", "2x2", "per_replica_batch=128"
  std::string full;                // the point's name, as a tooltip
};

std::string point_chart(const std::string& id, const std::string& title, Unit unit, const std::vector<PointLabel>& points,
                        const std::vector<Series>& components, bool stacked, const std::vector<bool>& oom,
                        const std::vector<double>& capacity = {}, const std::vector<std::string>& capacity_hw = {}) {
  const std::size_t n = points.size();
  double top = 0, used_top = 0, capacity_top = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double sum = 0;
    for (const auto& c : components)
      if (!std::isnan(c.values[i])) sum = stacked ? sum + c.values[i] : std::max(sum, c.values[i]);
    used_top = std::max(used_top, sum);
  }
  // Capacities far above what is used would flatten every bar: such a capacity is written at
  // the top of its bar instead of drawn.
  for (std::size_t i = 0; i < n; ++i)
    if (i < capacity.size() && capacity[i] <= 3 * used_top) capacity_top = std::max(capacity_top, capacity[i]);
  top = std::max(used_top, capacity_top);
  const Axis axis = make_axis(unit, top);
  const double slot = kPlotWidth / static_cast<double>(n);
  auto x_of = [&](std::size_t i) { return kLeft + slot * (static_cast<double>(i) + 0.5); };
  auto y_of = [&](double v) { return kTop + kPlotHeight * (1 - v / axis.top()); };
  std::string svg = y_axis(titled(title, unit), axis, kTop, kPlotHeight);
  const double group = std::min(slot * 0.7, 160.0);
  const double bar_w = stacked ? group : group / static_cast<double>(components.size());
  for (std::size_t i = 0; i < n; ++i) {
    double base = 0;
    for (std::size_t k = 0; k < components.size(); ++k) {
      const double v = components[k].values[i];
      if (std::isnan(v)) continue;
      const double x = x_of(i) - group / 2 + (stacked ? 0 : bar_w * static_cast<double>(k));
      const double y0 = stacked ? base : 0;
      svg += fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}"><title>{}: {}</title></rect>)", x + (stacked ? 0 : 0.5),
                         y_of(y0 + v), std::max(1.0, bar_w - (stacked ? 0 : 1)), y_of(y0) - y_of(y0 + v), components[k].color,
                         escape(points[i].full + ", " + components[k].name), escape(format(unit, v)));
      if (stacked) base += v;
    }
    if (i < oom.size() && oom[i])
      svg += fmt::format(R"(<text x="{:.1f}" y="{}" class="mark" text-anchor="middle">OOM</text>)", x_of(i), kTop + kPlotHeight - 4);
    if (i < capacity.size() && !std::isnan(capacity[i])) {
      const std::string hw = i < capacity_hw.size() ? capacity_hw[i] : "";
      const std::string tip = escape(fmt::format("HBM capacity per core of {}: {}", hw, format(Unit::bytes, capacity[i])));
      if (capacity[i] <= axis.top() * (1 + 1e-9))
        svg += fmt::format(R"(<line x1="{:.1f}" x2="{:.1f}" y1="{:.1f}" y2="{:.1f}" class="capacity" data-hw="{}" data-bytes="{:.0f}"><title>{}</title></line>)",
                           x_of(i) - slot * 0.45, x_of(i) + slot * 0.45, y_of(capacity[i]), y_of(capacity[i]), escape(hw), capacity[i], tip);
      else
        svg += fmt::format(R"(<text x="{:.1f}" y="{}" class="capacity mark" text-anchor="middle" data-hw="{}" data-bytes="{:.0f}">HBM {} ↑<title>{}</title></text>)",
                           x_of(i), kTop - 4, escape(hw), capacity[i], escape(format(Unit::bytes, capacity[i])), tip);
    }
  }
  // Labels: one line per varied value, "key=value" or, when that does not fit, the value alone
  // (cut if need be; the point's name as the tooltip); slanted single lines when even the slots
  // are too narrow for that.
  std::size_t line_count = 1;
  for (const auto& p : points) line_count = std::max(line_count, p.parts.size());
  int y = kTop + kPlotHeight;
  if (slot >= 48 || n == 1) {
    const auto chars = static_cast<std::size_t>(std::max(3.0, (slot - 6) / kCharWidth));
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t l = 0; l < points[i].parts.size(); ++l) {
        std::string part = points[i].parts[l];
        // "per_replica_batch=128", else "batch=128", else "128".
        if (part.size() > chars && part.find('=') != std::string::npos) {
          const std::string key = part.substr(0, part.find('=')), value = part.substr(part.find('=') + 1);
          const std::string last = key.substr(key.rfind('_') == std::string::npos ? 0 : key.rfind('_') + 1) + "=" + value;
          part = last.size() <= chars ? last : value;
        }
        svg += svg_text(fmt::format(R"(x="{:.1f}" y="{}" class="tick xtick" text-anchor="middle")", x_of(i), y + 16 + 14 * static_cast<int>(l)),
                        part, chars, points[i].full);
      }
    y += 16 + 14 * static_cast<int>(line_count - 1);
  } else {
    constexpr std::size_t kChars = 34;
    std::size_t longest_joined = 0;
    for (std::size_t i = 0; i < n; ++i) {
      std::string joined;
      for (const auto& part : points[i].parts) joined += (joined.empty() ? "" : " ") + part;
      longest_joined = std::max(longest_joined, std::min(joined.size(), kChars));
      const double x = x_of(i) + 4, ly = y + 12;
      svg += svg_text(fmt::format(R"svg(x="{0:.1f}" y="{1}" class="tick xtick" text-anchor="end" transform="rotate(-40 {0:.1f} {1})")svg", x, ly),
                      joined, kChars, points[i].full);
    }
    y += 12 + static_cast<int>(static_cast<double>(longest_joined) * kCharWidth * 0.65);
  }
  std::vector<std::pair<std::string, std::string>> entries;
  for (const auto& c : components) entries.emplace_back(c.name, c.color);
  const int used = components.size() > 1 ? legend(svg, entries, y + 24) : 0;
  return svg_open(id, y + 14 + used) + svg + "</svg>\n";
}

// One labelled horizontal bar per figure, its value written after it: a single run's chart.
std::string bar_list(const std::string& id, const std::string& title, Unit unit, const std::vector<Series>& bars,
                     const std::string& note = "", double reference = NAN) {
  constexpr int kLabel = 170, kRow = 22, kValue = 110;
  const int track = kWidth - kLabel - kValue - 20;
  double top = 0;
  for (const auto& b : bars)
    if (!std::isnan(b.values[0])) top = std::max(top, b.values[0]);
  const bool draw_reference = reference > 0 && reference <= 3 * top;  // far off the scale: the note says it
  if (draw_reference) top = std::max(top, reference);
  const Axis axis = make_axis(unit, top);
  const int height = kTop + kRow * static_cast<int>(bars.size()) + 26;
  auto x_of = [&](double v) { return kLabel + track * v / axis.top(); };
  std::string svg = svg_open(id, height) + svg_text(fmt::format(R"(x="{}" y="18" class="title")", kLabel), titled(title, unit), 120);
  if (!note.empty()) svg += note;
  for (int t = 0; t <= axis.ticks; ++t)
    svg += fmt::format(R"(<line x1="{0:.1f}" x2="{0:.1f}" y1="{1}" y2="{2}" class="grid"/><text x="{0:.1f}" y="{3}" class="tick xtick" text-anchor="middle">{4}</text>)",
                       x_of(axis.at(t)), kTop - 6, height - 22, height - 8, escape(axis.label(t)));
  for (std::size_t k = 0; k < bars.size(); ++k) {
    const int y = kTop + kRow * static_cast<int>(k);
    const double v = bars[k].values[0];
    svg += svg_text(fmt::format(R"(x="{}" y="{}" class="tick" text-anchor="end")", kLabel - 8, y + 15), bars[k].name, 25);
    if (std::isnan(v)) continue;
    svg += fmt::format(R"(<rect x="{}" y="{}" width="{:.1f}" height="{}" fill="{}"><title>{}: {}</title></rect>)", kLabel, y + 3,
                       std::max(0.5, x_of(v) - kLabel), kRow - 6, bars[k].color, escape(bars[k].name), escape(format(unit, v)));
    svg += fmt::format(R"(<text x="{:.1f}" y="{}" class="tick value">{}</text>)", x_of(v) + 6, y + 15, escape(format(unit, v)));
  }
  if (draw_reference)
    svg += fmt::format(R"(<line x1="{0:.1f}" x2="{0:.1f}" y1="{1}" y2="{2}" class="reference"/>)", x_of(reference), kTop - 6, height - 22);
  return svg + "</svg>\n";
}

// ---- The timeline of one step

std::string timeline_chart(const ojson& timeline) {
  const auto& tracks = timeline["tracks"];
  const double window_s = std::max(1.0, timeline["window_ps"].get<double>()) * 1e-12;
  constexpr int kLabelWidth = 150, kTrackWidth = kWidth - kLabelWidth - 30, kRow = 16, kAxis = 34;
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
  const Axis axis = make_axis(Unit::seconds, window_s);
  auto x_of = [&](double s) { return kLabelWidth + kTrackWidth * s / axis.top(); };
  std::string svg = svg_open("timeline", height);
  svg += fmt::format(R"(<text x="{}" y="18" class="title">Busy units of chip 0 over one step ({})</text>)", kLabelWidth,
                     escape(format(Unit::seconds, window_s)));
  for (int t = 0; t <= axis.ticks; ++t)
    svg += fmt::format(R"(<line x1="{0:.1f}" x2="{0:.1f}" y1="{1}" y2="{2}" class="grid"/><text x="{0:.1f}" y="{3}" class="tick xtick" text-anchor="middle">{4}</text>)",
                       x_of(axis.at(t)), kAxis - 6, height - 20, height - 6, escape(axis.label(t)));
  svg += fmt::format(R"(<line x1="{0:.1f}" x2="{0:.1f}" y1="{1}" y2="{2}" class="reference"><title>end of the step</title></line>)", x_of(window_s),
                     kAxis - 6, height - 20);
  int row = 0;
  for (const auto& track : tracks) {
    const int y = kAxis + kRow * row++;
    svg += svg_text(fmt::format(R"(x="{}" y="{}" class="tick" text-anchor="end")", kLabelWidth - 6, y + kRow - 4),
                    track["label"].get<std::string>(), 21);
    const char* color = color_of(track["kind"].get<std::string>());
    for (const auto& interval : track["busy_ps"]) {
      const double x0 = x_of(interval[0].get<double>() * 1e-12), x1 = x_of(interval[1].get<double>() * 1e-12);
      svg += fmt::format(R"(<rect x="{:.1f}" y="{}" width="{:.1f}" height="{}" fill="{}"/>)", x0, y + 2, std::max(0.5, x1 - x0), kRow - 4, color);
    }
  }
  return svg + "</svg>\n";
}

// ---- Which point trains first, which cheapest

struct Candidate {
  const SweepRow* row = nullptr;
  double time = NAN, usd = NAN, samples_per_usd = NAN;
  std::string label, color;
  bool front = false;
  std::size_t time_rank = 0, usd_rank = 0;
};

// Pareto scatter: time on x, cost on y, the front joined.
std::string pareto_chart(const std::vector<Candidate>& points, const std::string& time_name, const std::string& usd_name) {
  double max_t = 0, max_u = 0;
  for (const auto& p : points) {
    max_t = std::max(max_t, p.time);
    max_u = std::max(max_u, p.usd);
  }
  const Axis ax = make_axis(Unit::seconds, max_t), ay = make_axis(Unit::usd, max_u);
  constexpr int kPlotH = 260;
  auto x_of = [&](double v) { return kLeft + kPlotWidth * v / ax.top(); };
  auto y_of = [&](double v) { return kTop + kPlotH * (1 - v / ay.top()); };
  std::string svg = y_axis(fmt::format("{} against {}; the Pareto front joined", usd_name, time_name), ay, kTop, kPlotH);
  for (int t = 0; t <= ax.ticks; ++t)
    svg += fmt::format(R"(<text x="{:.1f}" y="{}" class="tick xtick" text-anchor="middle">{}</text>)", x_of(ax.at(t)), kTop + kPlotH + 16,
                       escape(ax.label(t)));
  svg += svg_text(fmt::format(R"(x="{}" y="{}" class="tick axisname" text-anchor="middle")", kLeft + kPlotWidth / 2, kTop + kPlotH + 34),
                  time_name + " (less is better; cost: less is better)", 120);
  std::vector<const Candidate*> front;
  for (const auto& p : points)
    if (p.front) front.push_back(&p);
  std::sort(front.begin(), front.end(), [](const Candidate* a, const Candidate* b) { return a->time < b->time; });
  std::string path;
  for (const Candidate* p : front) path += fmt::format("{}{:.1f},{:.1f} ", path.empty() ? "M" : "L", x_of(p->time), y_of(p->usd));
  if (front.size() > 1) svg += fmt::format(R"(<path d="{}" class="front" fill="none"/>)", path);
  for (const auto& p : points) {
    const std::string tip = escape(fmt::format("{}: {}, {}{}", p.label, format(Unit::seconds, p.time), format(Unit::usd, p.usd),
                                               p.front ? " (Pareto front)" : ""));
    svg += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="{}" fill="{}"{}><title>{}</title></circle>)", x_of(p.time), y_of(p.usd),
                       p.front ? 6 : 4, p.color, p.front ? R"( stroke="#000" stroke-width="2" class="onfront")" : "", tip);
  }
  // Front points named beside their dot, right of it unless that would leave the chart.
  for (const Candidate* p : front) {
    const double x = x_of(p->time), y = y_of(p->usd);
    const bool left = x > kLeft + kPlotWidth * 0.6;
    svg += svg_text(fmt::format(R"(x="{:.1f}" y="{:.1f}" class="tick" text-anchor="{}")", left ? x - 9 : x + 9, y - 6, left ? "end" : "start"),
                    p->label, 40);
  }
  return svg_open("pareto", kTop + kPlotH + 44) + svg + "</svg>\n";
}

const char* const kStyle = R"(<style>
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 1100px; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; } p.note { font-size: 13px; color: #444; }
.chart { display: block; margin: 8px 0; background: #fafafa; border: 1px solid #ddd; max-width: 100%; height: auto; }
.title { font-size: 13px; font-weight: bold; } .tick { font-size: 11px; fill: #444; } .axisname { font-style: italic; }
.grid { stroke: #e4e4e4; } .reference { stroke: #c00; stroke-dasharray: 4 3; } .mark { font-size: 10px; font-weight: bold; fill: #c00; }
line.capacity { stroke: #c00; stroke-width: 2; stroke-dasharray: 5 3; } .front { stroke: #000; stroke-width: 1.5; stroke-dasharray: 6 3; }
table { border-collapse: collapse; font-size: 11px; margin: 8px 0; } td, th { border: 1px solid #ccc; padding: 3px 6px; text-align: right; vertical-align: top; }
th { background: #f0f0f0; } td.left, th.left { text-align: left; } td.num { white-space: nowrap; } td.wrap { white-space: normal; min-width: 90px; } td.reason { text-align: left; font-size: 11px; }
tr.failed td { color: #c00; } div.scroll { overflow-x: auto; } tr.front td { background: #eef6ee; }
</style>)";

std::string page_head(const std::string& title) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + escape(title) + "</title>\n" + kStyle +
         "</head><body>\n";
}

// "chip5.core0, 1.61 ms lost" when the slice loses at least 1% of the step waiting for one core
// (a slow chip, a slow link's neighbour); empty on a slice whose cores keep pace.
std::string straggler_of(const Point& p) {
  if (!p.summary || !p.summary->ran()) return "";
  const StragglerSummary& straggler = p.summary->straggler;
  const double lost = straggler.time_lost_s, step = *p.summary->step_time_s;
  if (std::isnan(lost) || lost < 0.01 * step) return "";
  return fmt::format("{}, {} lost", straggler.core, format(Unit::seconds, lost));
}

// Memory per core with its share of that point's own HBM capacity: "2.07 GiB (12.9%)".
std::string memory_cell(const Point& p) {
  if (!p.summary) return "";
  const auto total = static_cast<double>(p.summary->memory.per_core.total_bytes);
  const auto capacity = static_cast<double>(p.summary->memory.hbm_capacity_bytes);
  return format(Unit::bytes, total) + (capacity > 0 ? " (" + format(Unit::percent, total / capacity) + " of " + format(Unit::bytes, capacity) + ")" : "");
}

// A bar per point of each figure, NaN where a point has none (no step ran).
struct Component {
  const char* name;
  const char* color;
  Figure figure;
};
std::vector<Series> components(const std::vector<const Point*>& points, std::initializer_list<Component> list) {
  std::vector<Series> out;
  for (const Component& c : list) {
    Series s{c.name, c.color, {}, {}};
    for (const Point* p : points) s.values.push_back(p->summary && p->summary->ran() ? figure(*p, c.figure) : NAN);
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<Series> breakdown_components(const std::vector<const Point*>& points) {
  return components(points, {{"compute", "#2ca02c", [](const RunSummary& s) { return s.breakdown.compute_s; }},
                             {"exposed communication", "#d62728", [](const RunSummary& s) { return s.breakdown.exposed_communication_s; }},
                             {"memory-bound", "#9467bd", [](const RunSummary& s) { return s.breakdown.memory_bound_s; }},
                             {"input wait", "#8c564b", [](const RunSummary& s) { return s.breakdown.input_wait_s; }},
                             {"idle", "#bbbbbb", [](const RunSummary& s) { return s.breakdown.idle_s; }}});
}

std::vector<Series> utilization_components(const std::vector<const Point*>& points) {
  std::vector<Series> out =
      components(points, {{"MFU", "#000000", [](const RunSummary& s) { return figure(s.mfu); }},
                          {"MXU", "#2ca02c", [](const RunSummary& s) { return s.utilization[UnitKind::Mxu]; }},
                          {"VPU", "#17becf", [](const RunSummary& s) { return s.utilization[UnitKind::Vpu]; }},
                          {"HBM", "#9467bd", [](const RunSummary& s) { return s.utilization[UnitKind::Hbm]; }},
                          {"ICI", "#d62728", [](const RunSummary& s) { return s.utilization[UnitKind::IciLink]; }}});
  // A program's own kinds of unit (register_unit_kind), after tpusim's.
  for (std::size_t k = std::size(kBuiltInUnitKinds); k < unit_kinds().size(); ++k) {
    if (!unit_kinds()[k].utilization) continue;
    Series own{unit_kinds()[k].name, "#7f7f7f", {}, {}};
    for (const Point* p : points)
      own.values.push_back(p->summary && p->summary->ran() ? p->summary->utilization[static_cast<UnitKind>(k)] : NAN);
    out.push_back(std::move(own));
  }
  return out;
}

std::vector<Series> memory_components(const std::vector<const Point*>& points) {
  std::vector<Series> out = {{"parameters", "#1f77b4", {}, {}}, {"gradients", "#ff7f0e", {}, {}},
                             {"optimizer state", "#2ca02c", {}, {}}, {"activations", "#9467bd", {}, {}}};
  for (const Point* p : points) {
    const std::optional<PerCoreMemory> m = p->summary ? std::optional(p->summary->memory.per_core) : std::nullopt;
    const std::uint64_t bytes[] = {m ? m->parameters_bytes : 0, m ? m->gradients_bytes : 0, m ? m->optimizer_state_bytes : 0,
                                   m ? m->activations_bytes : 0};
    for (std::size_t k = 0; k < out.size(); ++k) out[k].values.push_back(m ? static_cast<double>(bytes[k]) : NAN);
  }
  return out;
}

std::string timeline_section(const ojson& timeline, const std::string& point) {
  if (timeline.is_null() || !timeline.contains("tracks") || timeline["tracks"].empty()) return "";
  return fmt::format("<h2>Timeline of one step</h2>\n<p class=\"note\">Point {}: the steady-state step, chip 0, one row per unit "
                     "that was busy (intervals closer than a pixel merged; open trace.json in Perfetto for every op).</p>\n",
                     escape(point)) +
         timeline_chart(timeline);
}

// ---- A single run: its figures as a table, its breakdown, utilization and memory as bars.

std::string render_run_report(const SweepDocument& sweep, const ojson& timeline, const std::string& timeline_point) {
  const Point point(sweep.rows[0]);
  const SweepRow& row = point.row;
  const RunSummary none;
  const RunSummary& s = point.summary ? *point.summary : none;
  const std::string workload = s.workload.empty() ? sweep.workload : s.workload;
  const std::string& hw = s.hw;
  const std::string& topology = s.topology;
  const std::string title = fmt::format("tpusim run: {} on {} {}", workload, hw, topology);
  std::string html = page_head(title);
  html += "<h1>" + escape(title) + "</h1>\n";
  html += fmt::format("<p class=\"note\">{}; status <b>{}</b>{}.</p>\n", escape(sweep.workload),
                      escape(row.status), row.reason.empty() ? "" : ": " + escape(row.reason));
  std::vector<std::pair<std::string, std::string>> figures;
  auto add = [&](const std::string& name, const std::string& value) {
    if (!value.empty()) figures.emplace_back(name, value);
  };
  if (point.summary) {
    const std::string shape = s.slices > 1 ? fmt::format("{} slices of {}", s.slices, topology) : topology;
    add("slice", fmt::format("{} {}, {} chips, global batch {}", hw, shape, s.chips, s.global_batch));
  }
  add("step time (steady state)", format(Unit::seconds, figure(s.step_time_s)));
  add("first step", format(Unit::seconds, figure(s.first_step_time_s)));
  if (const auto& times = s.step_times; times && s.ran())
    add("steps after the first", fmt::format("mean {}, p50 {}, p99 {}, max {} ({} steps)", format(Unit::seconds, times->mean_s),
                                             format(Unit::seconds, times->p50_s), format(Unit::seconds, times->p99_s),
                                             format(Unit::seconds, times->max_s), times->steps));
  add("throughput", format(Unit::samples_per_s, figure(s.samples_per_s)));
  add("throughput per chip", format(Unit::samples_per_s, figure(s.samples_per_s_per_chip)));
  add("MFU", format(Unit::percent, figure(s.mfu)));
  if (s.ran()) add("how far to trust it", s.validation.text);
  add("memory per core", memory_cell(point));
  add("USD per step", format(Unit::usd, figure(s.cost, &CostSummary::usd_per_step)));
  add("USD per million samples", format(Unit::usd, figure(s.cost, &CostSummary::usd_per_million_samples)));
  add("samples per USD", format(Unit::samples_per_usd, figure(s.cost, &CostSummary::samples_per_usd)));
  add("energy per step", format(Unit::joules, figure(s.energy, &EnergySummary::joules_per_step)));
  add("energy per sample", format(Unit::joules, figure(s.energy, &EnergySummary::joules_per_sample)));
  add("power per chip", format(Unit::watts, figure(s.energy, &EnergySummary::chip_power_w)));
  if (const auto& p = s.pipeline; p && s.ran())
    add("pipeline bubble", fmt::format("{} ({} of the pipeline's {}; ideal {})", format(Unit::seconds, p->bubble_s),
                                       format(Unit::percent, p->bubble_fraction), format(Unit::seconds, p->time_s),
                                       format(Unit::percent, p->ideal_bubble_fraction)));
  add("time to train", format(Unit::seconds, figure(s.cost, &CostSummary::time_to_train_s)));
  add("USD to train", format(Unit::usd, figure(s.cost, &CostSummary::usd_to_train)));
  const double kwh = figure(s.energy, &EnergySummary::kwh_to_train);
  add("energy to train", std::isnan(kwh) ? "" : format(Unit::joules, kwh * 3.6e6) + fmt::format(" ({:.3g} kWh)", kwh));
  if (const auto& g = s.goodput; g && s.ran()) {
    add("goodput", fmt::format("{} (a failure every {} on this slice; a checkpoint every {}, written in {}; {} to restart)",
                               format(Unit::percent, g->goodput), format(Unit::seconds, g->mtbf_s),
                               format(Unit::seconds, g->checkpoint_interval_s), format(Unit::seconds, g->checkpoint_write_s),
                               format(Unit::seconds, g->restart_and_read_s)));
    add("time to train with failures", format(Unit::seconds, figure(g->time_to_train_s)));
    add("USD to train with failures", format(Unit::usd, figure(g->usd_to_train)));
  }
  html += "<table id=\"figures\">\n";
  for (const auto& [name, value] : figures)
    html += fmt::format("<tr><th class=\"left\">{}</th><td class=\"num\">{}</td></tr>\n", escape(name), escape(value));
  if (const std::string straggler = straggler_of(point); !straggler.empty())
    html += fmt::format("<tr><th class=\"left\">straggler</th><td class=\"left\">{}</td></tr>\n", escape(straggler));
  html += "</table>\n";
  if (point.summary) {
    const std::vector<const Point*> points = {&point};
    if (point.ok()) {  // an OOM run has no step
      html += "<h2>Where the step time goes</h2>\n";
      html += bar_list("breakdown", "Step-time breakdown per core", Unit::seconds, breakdown_components(points));
      html += "<h2>Utilization</h2>\n";
      html += bar_list("utilization", "MFU and busy fractions of the units", Unit::percent, utilization_components(points));
    }
    html += "<h2>Memory per core</h2>\n";
    std::vector<Series> memory = memory_components(points);
    memory.push_back({"total", "#444444", {static_cast<double>(s.memory.per_core.total_bytes)}, {}});
    const auto capacity = static_cast<double>(s.memory.hbm_capacity_bytes);
    const std::string note =
        fmt::format(R"(<text x="{}" y="34" class="capacity mark" data-hw="{}" data-bytes="{:.0f}">HBM capacity per core of {} (red dashes): {}{}</text>)", 170,
                    escape(hw), capacity, escape(hw), escape(format(Unit::bytes, capacity)),
                    escape(memory.back().values[0] >= 0 ? " (" + format(Unit::percent, memory.back().values[0] / capacity) + " used)" : ""));
    html += bar_list("memory", "Memory per core", Unit::bytes, memory, note, capacity);
  }
  html += timeline_section(timeline, timeline_point);
  return html + "</body></html>\n";
}

// ---- A sweep: the varied keys laid out as charts, a ranking by time and cost, the table of all points.

std::string value_of(const SweepRow& row, const std::string& key) {
  for (const auto& [varied, value] : row.varied)
    if (varied == key) return value;
  return std::string();
}

// Which varied key is the charts' x axis and which make their series, and the points they show.
struct SweepLayout {
  std::vector<Point> points;  // one per row
  std::vector<std::string> differing;
  std::string x_key;
  bool numeric_x = false;
  std::vector<std::string> categories;
  std::vector<std::string> series_keys;
  std::vector<const Point*> charted;
  std::vector<std::string> series_names;
  std::string x_name;
  bool lines = false;

  explicit SweepLayout(const SweepDocument& sweep);
  std::string series_of(const SweepRow& row) const;
  PointLabel point_label(const SweepRow& row) const;
  std::string color_of_series(const std::string& name) const;
  std::vector<Series> series(Figure figure) const;
  std::string chart(const std::string& id, const std::string& title, Unit unit, Figure figure, double reference = NAN,
                    const std::string& reference_name = "") const;
};

SweepLayout::SweepLayout(const SweepDocument& sweep) {
  for (const SweepRow& row : sweep.rows) points.emplace_back(row);
  // The keys whose value differs between points, in the order the sweep varies them.
  std::vector<std::string> keys;
  if (sweep.axes)
    for (const SweepAxisValues& axis : *sweep.axes) keys.push_back(axis.key);
  for (const Point& p : points)
    for (const auto& [k, v] : p.row.varied)
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  for (const auto& k : keys)
    if (std::any_of(points.begin(), points.end(), [&](const Point& p) { return value_of(p.row, k) != value_of(points[0].row, k); }))
      differing.push_back(k);
  // The x axis: the last varied key whose values are all numbers (lines across it), else the
  // last varied key (bars over its values). Every other varied key makes the series.
  for (auto it = differing.rbegin(); it != differing.rend() && !numeric_x; ++it) {
    const bool numeric = std::all_of(points.begin(), points.end(), [&](const Point& p) { return is_number(value_of(p.row, *it)); });
    if (numeric) x_key = *it, numeric_x = true;
  }
  if (x_key.empty() && !differing.empty()) x_key = differing.back();
  for (const Point& p : points) {
    const std::string v = value_of(p.row, x_key);
    if (std::find(categories.begin(), categories.end(), v) == categories.end()) categories.push_back(v);
  }
  if (numeric_x)
    std::stable_sort(categories.begin(), categories.end(),
                     [](const std::string& a, const std::string& b) { return std::strtod(a.c_str(), nullptr) < std::strtod(b.c_str(), nullptr); });
  for (const auto& k : differing)
    if (k != x_key) series_keys.push_back(k);
  // The points that ran (ok) or were found not to fit (oom): the charts' points. The others are
  // in the table with their reason.
  for (const Point& p : points)
    if ((p.ok() || p.out_of_memory()) && p.summary) charted.push_back(&p);
  for (const Point* p : charted)
    if (std::find(series_names.begin(), series_names.end(), series_of(p->row)) == series_names.end()) series_names.push_back(series_of(p->row));
  x_name = x_key.empty() ? "" : short_key(x_key);
  lines = numeric_x && categories.size() > 1;
}

std::string SweepLayout::series_of(const SweepRow& row) const {
  std::string name;
  for (const auto& k : series_keys) name += (name.empty() ? "" : ", ") + part_label(k, value_of(row, k));
  return name;
}

PointLabel SweepLayout::point_label(const SweepRow& row) const {
  PointLabel label{{}, row.point};
  for (const auto& k : differing) label.parts.push_back(part_label(k, value_of(row, k)));
  return label;
}

std::string SweepLayout::color_of_series(const std::string& name) const {
  const auto i = static_cast<std::size_t>(std::find(series_names.begin(), series_names.end(), name) - series_names.begin());
  return std::string(kPalette[i % 10]);
}

// One series per combination of the other varied keys, a value per x category.
std::vector<Series> SweepLayout::series(Figure f) const {
  std::vector<Series> out;
  for (const auto& name : series_names) {
    Series s{name, color_of_series(name), std::vector<double>(categories.size(), NAN), std::vector<bool>(categories.size(), false)};
    for (const Point* p : charted) {
      if (series_of(p->row) != name) continue;
      const auto i = static_cast<std::size_t>(std::find(categories.begin(), categories.end(), value_of(p->row, x_key)) - categories.begin());
      s.values[i] = figure(*p, f);
      s.oom[i] = p->out_of_memory();
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string SweepLayout::chart(const std::string& id, const std::string& title, Unit unit, Figure f, double reference,
                               const std::string& reference_name) const {
  return series_chart(id, title, unit, x_name, categories, lines, series(f), reference, reference_name);
}

std::string sweep_page_head(const SweepDocument& sweep, const SweepLayout& layout) {
  const std::vector<Point>& rows = layout.points;
  const std::vector<std::string>& differing = layout.differing;
  const std::vector<const Point*>& charted = layout.charted;
  const std::string workload = charted.empty() ? sweep.workload : charted[0]->summary->workload;
  const std::string title = "tpusim sweep: " + workload;
  std::string html = page_head(title);
  const auto interrupted = static_cast<std::size_t>(sweep.interrupted.value_or(0));
  html += "<h1>" + escape(title) + "</h1>\n";
  html += fmt::format("<p class=\"note\">{}: {} of {} points finished{}", escape(sweep.workload), rows.size() - interrupted,
                      sweep.points, interrupted ? fmt::format(", {} interrupted (partial)", interrupted) : "");
  if (charted.size() < rows.size())
    html += fmt::format("; {} did not run or did not finish (their reasons are in the table at the end)", rows.size() - charted.size());
  html += ".";
  if (!differing.empty()) {
    html += " Varied: ";
    for (std::size_t k = 0; k < differing.size(); ++k) {
      std::vector<std::string> values;
      for (const Point& p : rows)
        if (std::find(values.begin(), values.end(), value_of(p.row, differing[k])) == values.end()) values.push_back(value_of(p.row, differing[k]));
      html += fmt::format("{}<b>{}</b> ({})", k ? "; " : "", escape(differing[k]), escape(fmt::format("{}", fmt::join(values, ", "))));
    }
    html += fmt::format(". Charts: x axis {}{}.", escape(layout.x_name.empty() ? "-" : layout.x_name),
                        layout.series_keys.empty() ? "" : ", one " + std::string(layout.lines ? "line" : "bar colour") + " per " +
                                                              escape(fmt::format("{}", fmt::join(layout.series_keys, " and "))));
  }
  html += "</p>\n";
  return html;
}

std::string throughput_cost_and_energy_charts(const SweepLayout& layout) {
  std::string html = "<h2>Throughput and step time</h2>\n";
  html += layout.chart("throughput", "Throughput of the slice", Unit::samples_per_s, [](const RunSummary& s) { return figure(s.samples_per_s); });
  html += layout.chart("throughput_per_chip", "Throughput per chip", Unit::samples_per_s,
                       [](const RunSummary& s) { return figure(s.samples_per_s_per_chip); });
  html += layout.chart("step_time", "Step time (steady state)", Unit::seconds, [](const RunSummary& s) { return figure(s.step_time_s); });
  html += layout.chart("mfu", "Model FLOPs utilization (MFU)", Unit::percent, [](const RunSummary& s) { return figure(s.mfu); });
  // With the hosts' batch jitter: the tail of the step times beside their mean.
  if (std::any_of(layout.charted.begin(), layout.charted.end(), [](const Point* p) { return p->summary->step_times.has_value(); }))
    html += layout.chart("step_time_p99", "Step time's tail: p99 of the steps after the first (batch jitter)", Unit::seconds,
                         [](const RunSummary& s) { return figure(s.step_times, &StepTimesSummary::p99_s); });

  html += "<h2>Cost and energy</h2>\n<p class=\"note\">On-demand price per chip-hour and a modelled chip power "
          "(see docs/cost_energy.md: the energy figures are estimates, not measurements).</p>\n";
  html += layout.chart("cost", "USD per million samples", Unit::usd,
                       [](const RunSummary& s) { return figure(s.cost, &CostSummary::usd_per_million_samples); });
  html += layout.chart("energy", "Energy per sample", Unit::joules,
                       [](const RunSummary& s) { return figure(s.energy, &EnergySummary::joules_per_sample); });
  html += layout.chart("power", "Average power per chip", Unit::watts,
                       [](const RunSummary& s) { return figure(s.energy, &EnergySummary::chip_power_w); });
  return html;
}

std::string goodput_charts(const SweepLayout& layout) {
  const std::vector<const Point*>& charted = layout.charted;
  const auto ok = [](const Point* p) { return p->ok(); };
  const bool failures_stated = std::any_of(charted.begin(), charted.end(), ok) &&
                               std::all_of(charted.begin(), charted.end(), [&](const Point* p) {
                                 return !ok(p) || !std::isnan(figure(p->summary->goodput, &GoodputSummary::goodput));
                               });
  if (!failures_stated) return "";
  std::string html = "<h2>Goodput</h2>\n<p class=\"note\">With failures at the workload's rate per chip-hour, each restarting the job "
                     "from its last checkpoint (Young and Daly's model, docs/cost_energy.md): a larger slice fails more often, so "
                     "its goodput falls while its throughput grows.</p>\n";
  html += layout.chart("goodput", "Goodput (useful share of the wall time)", Unit::percent,
                       [](const RunSummary& s) { return figure(s.goodput, &GoodputSummary::goodput); }, 1.0, "100%");
  html += layout.chart("goodput_throughput", "Throughput with failures", Unit::samples_per_s,
                       [](const RunSummary& s) { return figure(s.goodput, &GoodputSummary::samples_per_s); });
  return html;
}

std::string breakdown_utilization_and_memory_charts(const SweepLayout& layout) {
  const std::vector<const Point*>& charted = layout.charted;
  std::vector<PointLabel> labels;
  std::vector<bool> oom;
  std::vector<double> capacity;
  std::vector<std::string> capacity_hw;
  for (const Point* p : charted) {
    labels.push_back(layout.point_label(p->row));
    oom.push_back(p->out_of_memory());
    capacity.push_back(static_cast<double>(p->summary->memory.hbm_capacity_bytes));
    capacity_hw.push_back(p->summary->hw);
  }
  std::string html = "<h2>Where the step time goes</h2>\n";
  html += point_chart("breakdown", "Step-time breakdown per core", Unit::seconds, labels, breakdown_components(charted), true, oom);
  html += "<h2>Utilization</h2>\n";
  html += point_chart("utilization", "MFU and busy fractions of the units", Unit::percent, labels, utilization_components(charted), false, oom);
  html += "<h2>Memory per core</h2>\n<p class=\"note\">Each point against its own preset's HBM capacity per core (red dashes; "
          "written at the top when it is far above the bars).</p>\n";
  html += point_chart("memory", "Memory per core and each point's HBM capacity per core", Unit::bytes, labels, memory_components(charted), true,
                      oom, capacity, capacity_hw);
  html += layout.chart("hbm_fraction", "Memory per core as a share of its own HBM capacity", Unit::percent,
                       [](const RunSummary& s) { return s.memory.hbm_fraction; }, 1.0, "100% of HBM");
  return html;
}

// Which configuration reaches the samples first, and which for the least money: with failures
// when every point states them (the goodput's time and USD to train), else without.
struct RankingBasis {
  bool with_failures = true;
  bool to_train = true;
};

// The time and USD of the training run the workload states: with failures (the goodput's) or
// without (the cost's); NaN where the run has no such figure.
std::pair<double, double> time_and_usd_to_train(const RunSummary& s, bool with_failures) {
  if (with_failures) return {figure(s.goodput, &GoodputSummary::time_to_train_s), figure(s.goodput, &GoodputSummary::usd_to_train)};
  return {figure(s.cost, &CostSummary::time_to_train_s), figure(s.cost, &CostSummary::usd_to_train)};
}

RankingBasis ranking_basis(const std::vector<const Point*>& charted) {
  const auto every_point_has = [&](bool with_failures) {
    return std::all_of(charted.begin(), charted.end(), [&](const Point* p) {
      const auto [time, usd] = time_and_usd_to_train(*p->summary, with_failures);
      return !p->ok() || (time >= 0 && usd >= 0);
    });
  };
  RankingBasis basis;
  basis.with_failures = every_point_has(true);
  basis.to_train = every_point_has(basis.with_failures);
  return basis;
}

std::vector<Candidate> ranking_candidates(const SweepLayout& layout, const RankingBasis& basis) {
  std::vector<Candidate> candidates;
  for (const Point* p : layout.charted) {
    if (!p->ok()) continue;
    const RunSummary& s = *p->summary;
    Candidate c;
    c.row = &p->row;
    const auto [time, usd] = time_and_usd_to_train(s, basis.with_failures);
    c.time = basis.to_train ? time : 1e6 / figure(s.samples_per_s);
    c.usd = basis.to_train ? usd : figure(s.cost, &CostSummary::usd_per_million_samples);
    c.samples_per_usd = figure(s.cost, &CostSummary::samples_per_usd);
    if (!(c.time > 0) || !(c.usd >= 0) || !std::isfinite(c.time)) continue;
    const PointLabel l = layout.point_label(p->row);
    c.label = fmt::format("{}", fmt::join(l.parts, " "));
    if (c.label.empty()) c.label = p->row.point;
    c.color = layout.color_of_series(layout.series_of(p->row));
    candidates.push_back(std::move(c));
  }
  for (auto& c : candidates) {
    c.time_rank = 1 + static_cast<std::size_t>(std::count_if(candidates.begin(), candidates.end(), [&](const Candidate& o) { return o.time < c.time; }));
    c.usd_rank = 1 + static_cast<std::size_t>(std::count_if(candidates.begin(), candidates.end(), [&](const Candidate& o) { return o.usd < c.usd; }));
    c.front = std::none_of(candidates.begin(), candidates.end(), [&](const Candidate& o) {
      return o.time <= c.time && o.usd <= c.usd && (o.time < c.time || o.usd < c.usd);
    });
  }
  return candidates;
}

std::string ranking_section(const SweepLayout& layout) {
  const RankingBasis basis = ranking_basis(layout.charted);
  const bool with_failures = basis.with_failures, to_train = basis.to_train;
  const std::vector<Candidate> candidates = ranking_candidates(layout, basis);
  if (candidates.empty()) return "";
  std::vector<Candidate> ordered = candidates;
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const Candidate& a, const Candidate& b) { return a.time != b.time ? a.time < b.time : a.usd < b.usd; });
  const std::string time_name = !to_train ? "time per million samples" : with_failures ? "time to train with failures" : "time to train";
  const std::string usd_name = !to_train ? "USD per million samples" : with_failures ? "USD to train with failures" : "USD to train";
  const auto cheapest = std::min_element(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) { return a.usd < b.usd; });
  std::string html = "<h2>Which configuration trains first, and which cheapest</h2>\n";
  html += fmt::format("<p class=\"note\">{} Fastest: <b>{}</b> ({}, {}). Cheapest: <b>{}</b> ({}, {}). On the Pareto front (no other point "
                      "is both faster and cheaper): {}.</p>\n",
                      !to_train       ? "The workload states no dataset (training.dataset_examples), so per million samples."
                      : with_failures ? "The training run the workload states (dataset x epochs), with its failures and checkpoints "
                                        "(the goodput), ranked here by its time and USD to train with them."
                                      : "The training run the workload states (dataset x epochs; the ranks are sweep.csv's).",
                      escape(ordered[0].label), escape(format(Unit::seconds, ordered[0].time)), escape(format(Unit::usd, ordered[0].usd)),
                      escape(cheapest->label), escape(format(Unit::seconds, cheapest->time)), escape(format(Unit::usd, cheapest->usd)),
                      std::count_if(candidates.begin(), candidates.end(), [](const Candidate& c) { return c.front; }));
  html += pareto_chart(candidates, time_name, usd_name);
  html += fmt::format("<table id=\"ranking\"><tr><th>by time</th><th class=\"left\">point</th><th>{}</th><th>{}</th><th>samples/USD</th>"
                      "<th>by cost</th><th class=\"left\">Pareto front</th></tr>\n",
                      escape(time_name), escape(usd_name));
  for (const auto& c : ordered)
    html += fmt::format("<tr{}><td class=\"rank\">#{}</td><td class=\"left\" title=\"{}\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
                        "<td class=\"num\">{}</td><td class=\"rank\">#{}</td><td class=\"left\">{}</td></tr>\n",
                        c.front ? " class=\"front\"" : "", c.time_rank, escape(c.row->point), escape(c.label),
                        escape(format(Unit::seconds, c.time)), escape(format(Unit::usd, c.usd)),
                        escape(format(Unit::samples_per_usd, c.samples_per_usd)), c.usd_rank, c.front ? "yes" : "");
  html += "</table>\n";
  return html;
}

std::string all_points_table_head(bool train_columns) {
  return fmt::format("<h2>All points</h2>\n<div class=\"scroll\"><table id=\"points\"><tr><th class=\"left\">point</th><th class=\"left\">status</th>"
                     "<th>memory/core (of HBM)</th><th>step time</th><th>samples/s</th><th>per chip</th><th>MFU</th>"
                     "<th>USD per M samples</th><th>samples/USD (rank)</th><th>J/sample</th>{}<th class=\"left\">straggler</th></tr>\n",
                     train_columns ? "<th>time to train (rank)</th><th>USD to train</th>" : "");
}

std::string all_points_row(const SweepLayout& layout, const Point& p, bool train_columns) {
  const SweepRow& row = p.row;
  const bool good = p.ok();
  auto cell = [&](Unit unit, Figure f) { return escape(format(unit, figure(p, f))); };
  // A sweep ranks its points (1: best).
  auto ranked = [&](Unit unit, Figure f, const char* rank) {
    std::string text = cell(unit, f);
    for (const auto& [ranking, place] : row.rank)
      if (!text.empty() && ranking == rank && place) text += fmt::format(" (#{})", *place);
    return text;
  };
  // The point by its number and varied values; its directory's name as the tooltip.
  const std::string& point = row.point;
  const PointLabel label = layout.point_label(row);
  const std::string number = point.size() > 3 && point[3] == '_' ? point.substr(0, 3) + " " : "";
  std::string html = fmt::format("<tr{}><td class=\"left\" title=\"{}\">{}</td><td class=\"left\">{}</td><td class=\"num wrap\">{}</td>",
                                 good ? "" : " class=\"failed\"", escape(point),
                                 escape(label.parts.empty() ? point : number + fmt::format("{}", fmt::join(label.parts, " "))),
                                 escape(row.status), escape(memory_cell(p)));
  if (!good) {  // no step: the reason in place of its figures
    html += fmt::format("<td colspan=\"{}\" class=\"reason\">{}</td></tr>\n", train_columns ? 10 : 8, escape(row.reason));
    return html;
  }
  html += fmt::format("<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
                      "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>{}<td class=\"left\">{}</td></tr>\n",
                      cell(Unit::seconds, [](const RunSummary& s) { return figure(s.step_time_s); }),
                      cell(Unit::samples_per_s, [](const RunSummary& s) { return figure(s.samples_per_s); }),
                      cell(Unit::samples_per_s, [](const RunSummary& s) { return figure(s.samples_per_s_per_chip); }),
                      cell(Unit::percent, [](const RunSummary& s) { return figure(s.mfu); }),
                      cell(Unit::usd, [](const RunSummary& s) { return figure(s.cost, &CostSummary::usd_per_million_samples); }),
                      ranked(Unit::samples_per_usd, [](const RunSummary& s) { return figure(s.cost, &CostSummary::samples_per_usd); },
                             "samples_per_usd"),
                      cell(Unit::joules, [](const RunSummary& s) { return figure(s.energy, &EnergySummary::joules_per_sample); }),
                      train_columns ? fmt::format("<td class=\"num\">{}</td><td class=\"num\">{}</td>",
                                                  ranked(Unit::seconds, [](const RunSummary& s) { return figure(s.cost, &CostSummary::time_to_train_s); },
                                                         "time_to_train_s"),
                                                  cell(Unit::usd, [](const RunSummary& s) { return figure(s.cost, &CostSummary::usd_to_train); }))
                                    : std::string(),
                      escape(straggler_of(p)));
  return html;
}

}  // namespace

std::string render_sweep_report(const SweepDocument& sweep, const ojson& timeline, const std::string& timeline_point) {
  if (!sweep.axes && sweep.rows.size() == 1) return render_run_report(sweep, timeline, timeline_point);

  const SweepLayout layout(sweep);
  std::string html = sweep_page_head(sweep, layout);
  if (!layout.charted.empty()) {
    html += throughput_cost_and_energy_charts(layout);
    html += goodput_charts(layout);
    html += breakdown_utilization_and_memory_charts(layout);
  }
  html += ranking_section(layout);
  html += timeline_section(timeline, timeline_point);

  // Time and USD to train only when the workload states its dataset.
  const bool train_columns = std::any_of(layout.points.begin(), layout.points.end(), [](const Point& p) {
    return p.summary && !std::isnan(figure(p.summary->cost, &CostSummary::time_to_train_s));
  });
  html += all_points_table_head(train_columns);
  for (const Point& p : layout.points) html += all_points_row(layout, p, train_columns);
  html += "</table></div>\n</body></html>\n";
  return html;
}

}  // namespace tpusim

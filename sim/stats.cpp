#include "sim/stats.hpp"

#include <algorithm>
#include <optional>

namespace tpusim {

namespace {
// The source a unit's busy time counts for in its core's breakdown, if any.
std::optional<BreakdownSource> breakdown_source(const UnitInfo& info) {
  if (info.core == kNoCore || !traits_of(info.kind).keeps_spans) return std::nullopt;
  if (info.kind == UnitKind::Mxu || info.kind == UnitKind::Vpu) return BreakdownSource::Compute;
  switch (info.engine) {
    case OpEngine::Matmul:
    case OpEngine::Vector: return BreakdownSource::Op;
    case OpEngine::Collective: return BreakdownSource::Collective;
    case OpEngine::Infeed: return BreakdownSource::Input;
    case OpEngine::None: break;
  }
  return std::nullopt;
}

// Adds [start, end) to a union kept in report order (CoreLogs).
void add_to_union(std::vector<Span>& log, Picos start, Picos end) {
  if (!log.empty() && start >= log.back().start && start <= log.back().end) {
    log.back().end = std::max(log.back().end, end);
    return;
  }
  log.push_back({start, end});
}
}  // namespace

std::uint32_t Recorder::add_unit(UnitInfo info) {
  const auto id = static_cast<std::uint32_t>(units_.size());
  if (trace_) trace_->add_unit(id, info);
  std::uint32_t log = kNoLog;
  if (const auto source = breakdown_source(info); source && keep_spans_) {
    const auto [slot, fresh] = core_slot_.try_emplace({info.chip, info.core}, static_cast<std::uint32_t>(core_logs_.size()));
    if (fresh) core_logs_.emplace_back();
    log = slot->second * static_cast<std::uint32_t>(kBreakdownSources) + static_cast<std::uint32_t>(*source);
  }
  log_of_.push_back(log);
  units_.push_back(std::move(info));
  logs_.emplace_back();
  totals_.resize(totals_.size() + steps_);
  last_end_ps_.push_back(0);
  keeps_.push_back(keep_spans_ && units_.back().chip == 0 && units_.back().kind != UnitKind::Hbm);
  return id;
}

void Recorder::record(const Activity& a) {
  StepTotals& t = totals_[static_cast<std::size_t>(a.unit) * steps_ + std::min(a.step, steps_ - 1)];
  t.busy_ps += a.busy_ps ? a.busy_ps : a.end_ps - a.start_ps;
  t.bytes += a.bytes;
  last_end_ps_[a.unit] = std::max<Picos>(last_end_ps_[a.unit], a.end_ps);
  if (log_of_[a.unit] != kNoLog)
    add_to_union(core_logs_[log_of_[a.unit] / kBreakdownSources][log_of_[a.unit] % kBreakdownSources], a.start_ps, a.end_ps);
  if (keeps_[a.unit]) {
    // A unit kept busy back to back (an MXU streaming block after block) continues its last
    // interval: what reads the intervals asks only which instants are busy.
    std::vector<Span>& log = logs_[a.unit];
    if (!log.empty() && log.back().end == a.start_ps) log.back().end = a.end_ps;
    else log.push_back({a.start_ps, a.end_ps});
  }
  if (trace_) trace_->slice(units_[a.unit], a);
}

nlohmann::ordered_json chip0_timeline(const Recorder& recorder, const Window& w) {
  nlohmann::ordered_json timeline;
  timeline["window_ps"] = w.length();
  timeline["tracks"] = nlohmann::ordered_json::array();
  const Picos resolution_ps = std::max<Picos>(1, w.length() / 1000);
  for (std::uint32_t u = 0; u < recorder.units().size(); ++u) {
    const UnitInfo& info = recorder.units()[u];
    if (info.chip != 0 || info.kind == UnitKind::Hbm) continue;
    std::vector<std::pair<Picos, Picos>> busy;
    for (const Span& s : recorder.spans(u)) {
      const Picos a = std::max(s.start, w.begin), b = std::min(s.end, w.end);
      if (b > a) busy.emplace_back(a - w.begin, b - w.begin);
    }
    if (busy.empty()) continue;
    std::sort(busy.begin(), busy.end());  // units book ahead of time: reports come out of order
    auto merged = nlohmann::ordered_json::array();
    std::pair<Picos, Picos> open = busy.front();
    for (const auto& interval : busy) {
      if (interval.first <= open.second + resolution_ps) {
        open.second = std::max(open.second, interval.second);
      } else {
        merged.push_back({open.first, open.second});
        open = interval;
      }
    }
    merged.push_back({open.first, open.second});
    timeline["tracks"].push_back({{"label", info.label}, {"kind", unit_kind_name(info.kind)}, {"busy_ps", merged}});
  }
  // Grouped by core ("core0.dma0", "core0.mxu0", "core0.ops.matmul", ...), then links and collective parts.
  std::stable_sort(timeline["tracks"].begin(), timeline["tracks"].end(),
                   [](const auto& a, const auto& b) { return a["label"].template get<std::string>() < b["label"].template get<std::string>(); });
  return timeline;
}

Breakdown core_breakdown(const CoreLogs& logs, const Window& w) {
  enum Source {
    kOp = static_cast<int>(BreakdownSource::Op),
    kCompute = static_cast<int>(BreakdownSource::Compute),
    kComm = static_cast<int>(BreakdownSource::Collective),
    kInput = static_cast<int>(BreakdownSource::Input),
    kSources = static_cast<int>(kBreakdownSources)
  };
  // Only whether some interval of a source covers an instant matters: each source's intervals,
  // clipped to the window and sorted (they are nearly in order already), become their union's edges.
  using Span2 = std::pair<Picos, Picos>;
  std::vector<Span2> covered[kSources];
  for (int source = 0; source < kSources; ++source) {
    std::vector<Span2>& out = covered[source];
    for (const Span& s : logs[static_cast<std::size_t>(source)]) {
      const Picos a = std::max(s.start, w.begin), b = std::min(s.end, w.end);
      if (b > a) out.emplace_back(a, b);
    }
    if (!std::is_sorted(out.begin(), out.end())) std::sort(out.begin(), out.end());
  }
  struct Edge {
    Picos t;
    int source;
    int delta;
  };
  std::vector<Edge> edges;
  for (int source = 0; source < kSources; ++source) {
    const std::vector<Span2>& spans = covered[source];
    for (std::size_t i = 0; i < spans.size();) {
      const Picos a = spans[i].first;
      Picos b = spans[i].second;
      for (++i; i < spans.size() && spans[i].first <= b; ++i) b = std::max(b, spans[i].second);
      edges.push_back({a, source, +1});
      edges.push_back({b, source, -1});
    }
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& x, const Edge& y) { return x.t < y.t; });
  Breakdown out;
  int active[kSources] = {0, 0, 0, 0};
  Picos t = w.begin;
  auto account = [&](Picos until) {
    const Picos d = until - t;
    if (active[kOp] > 0) (active[kCompute] > 0 ? out.compute : out.memory_bound) += d;
    else if (active[kComm] > 0) out.exposed_communication += d;
    else if (active[kInput] > 0) out.input_wait += d;
    else out.idle += d;
  };
  for (const Edge& e : edges) {
    if (e.t > t) {
      account(e.t);
      t = e.t;
    }
    active[e.source] += e.delta;
  }
  if (w.end > t) account(w.end);
  return out;
}

}  // namespace tpusim

#include "sim/stats.hpp"

#include <algorithm>

namespace tpusim {

std::uint32_t Recorder::add_unit(UnitInfo info) {
  const auto id = static_cast<std::uint32_t>(units_.size());
  if (trace_) trace_->add_unit(id, info);
  units_.push_back(std::move(info));
  logs_.emplace_back();
  return id;
}

void Recorder::record(const Activity& a) {
  logs_[a.unit].push_back({a.start_ps, a.end_ps, a.bytes, a.step});
  if (trace_) trace_->slice(units_[a.unit], a);
}

Picos busy_within(const std::vector<Span>& spans, const Window& w) {
  Picos busy = 0;
  for (const auto& s : spans) {
    const Picos a = std::max(s.start, w.begin), b = std::min(s.end, w.end);
    if (b > a) busy += b - a;
  }
  return busy;
}

std::uint64_t bytes_of_step(const std::vector<Span>& spans, std::uint32_t step) {
  std::uint64_t bytes = 0;
  for (const auto& s : spans)
    if (s.step == step) bytes += s.bytes;
  return bytes;
}

Breakdown core_breakdown(const Recorder& recorder, const std::string& core_path, const Window& w) {
  enum Source { kOp, kCompute, kComm, kInput, kSources };
  struct Edge {
    Picos t;
    int source;
    int delta;
  };
  std::vector<Edge> edges;
  const std::string prefix = core_path + ".";
  for (std::uint32_t u = 0; u < recorder.units().size(); ++u) {
    const UnitInfo& info = recorder.units()[u];
    if (info.path.compare(0, prefix.size(), prefix) != 0) continue;
    int source = -1;
    const std::string name = info.path.substr(prefix.size());
    if (info.kind == UnitKind::Mxu || info.kind == UnitKind::Vpu) source = kCompute;
    else if (name == "ops.matmul" || name == "ops.vector") source = kOp;
    else if (name == "ops.collective") source = kComm;
    else if (name == "ops.infeed") source = kInput;
    if (source < 0) continue;
    for (const auto& s : recorder.spans(u)) {
      const Picos a = std::max(s.start, w.begin), b = std::min(s.end, w.end);
      if (b <= a) continue;
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

#include "traces/trace_check.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

namespace tpusim {
namespace {

using json = nlohmann::json;
using Track = std::pair<std::int64_t, std::int64_t>;  // pid, tid

// Timestamps in integer nanoseconds: the format's microseconds carry three decimals.
std::int64_t ns(const json& micros) { return std::llround(micros.get<double>() * 1000.0); }

// Beyond this many microseconds (about 31 years) a time is not a trace's, and its nanoseconds
// would not add up within 64 bits.
constexpr double kLatestMicros = 1e15;
bool time_in_range(const json& micros) {
  return micros.is_number() && std::fabs(micros.get<double>()) <= kLatestMicros;
}

// An event's name, or "" when it has none or it is not a string (reported by the caller).
std::string name_of(const json& e) {
  return e.contains("name") && e["name"].is_string() ? e["name"].get<std::string>() : std::string();
}

// Every phase of the Trace Event Format (durations, complete, instant, counter, async, flow,
// sample, object, metadata, memory dump, mark, clock sync, context).
const std::set<std::string> kPhases = {"B", "E", "X", "i", "I", "C", "b", "n", "e", "S", "T", "p", "F", "s", "t", "f",
                                        "P", "N", "O", "D", "M", "V", "v", "R", "c", "(", ")"};

const json& events_of(const json& trace) {
  static const json kEmpty = json::array();
  if (trace.is_array()) return trace;
  if (trace.is_object() && trace.contains("traceEvents") && trace["traceEvents"].is_array()) return trace["traceEvents"];
  return kEmpty;
}

}  // namespace

TraceCheck check_trace(const json& trace) {
  TraceCheck r;
  auto problem = [&](std::string what) {
    if (r.problems.size() < 50) r.problems.push_back(std::move(what));
  };
  if (!(trace.is_array() || (trace.is_object() && trace.contains("traceEvents") && trace["traceEvents"].is_array()))) {
    problem("not a trace: expected a JSON array of events or an object with a traceEvents array");
    return r;
  }
  const json& events = events_of(trace);
  std::set<std::int64_t> named_processes;
  std::set<Track> named_tracks;
  std::map<Track, std::vector<std::pair<std::int64_t, std::int64_t>>> slices;
  std::map<std::pair<Track, std::string>, std::int64_t> counter_last;
  std::map<std::string, int> flows;  // id -> starts minus finishes
  std::map<Track, std::size_t> open_begins;  // B events not yet ended, per track
  for (std::size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    ++r.events;
    const std::string at = fmt::format("event {}", i);
    if (!e.is_object()) {
      problem(at + ": not an object");
      continue;
    }
    for (const char* key : {"name", "ph", "pid", "tid"})
      if (!e.contains(key)) problem(fmt::format("{}: missing \"{}\"", at, key));
    if (e.contains("name") && !e["name"].is_string()) problem(at + ": \"name\" is not a string");
    for (const char* key : {"pid", "tid"})
      if (e.contains(key) && !e[key].is_number_integer()) problem(fmt::format("{}: \"{}\" is not an integer", at, key));
    if (e.contains("ph") && (!e["ph"].is_string() || !kPhases.count(e["ph"].get<std::string>())))
      problem(fmt::format("{}: \"ph\" {} is not an event phase of the format", at, e["ph"].dump()));
    if (!e.contains("ph") || !e["ph"].is_string() || !kPhases.count(e["ph"].get<std::string>()) || !e.contains("pid") ||
        !e.contains("tid") || !e["pid"].is_number_integer() || !e["tid"].is_number_integer())
      continue;
    const std::string ph = e["ph"];
    const Track track{e["pid"].get<std::int64_t>(), e["tid"].get<std::int64_t>()};
    const bool timed = ph != "M";
    if (timed && !(e.contains("ts") && e["ts"].is_number())) {
      problem(at + ": missing a numeric \"ts\"");
      continue;
    }
    if (timed && !time_in_range(e["ts"])) {
      problem(at + ": \"ts\" is beyond any trace's time");
      continue;
    }
    if (ph == "M") {
      const std::string name = name_of(e);
      if (!e.contains("args") || !e["args"].is_object()) problem(at + ": metadata without args");
      else if (name == "process_name" && e["args"].contains("name")) named_processes.insert(track.first);
      else if (name == "thread_name" && e["args"].contains("name")) named_tracks.insert(track);
    } else if (ph == "X") {
      if (!e.contains("dur") || !e["dur"].is_number() || e["dur"].get<double>() < 0) {
        problem(at + ": a complete event needs a non-negative \"dur\"");
        continue;
      }
      if (!time_in_range(e["dur"])) {
        problem(at + ": \"dur\" is beyond any trace's time");
        continue;
      }
      ++r.slices;
      slices[track].emplace_back(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]));
    } else if (ph == "C") {
      const auto key = std::make_pair(track, name_of(e));
      const std::int64_t t = ns(e["ts"]);
      const auto it = counter_last.find(key);
      if (it != counter_last.end() && t < it->second)
        problem(fmt::format("{}: counter \"{}\" goes back in time", at, key.second));
      counter_last[key] = t;
    } else if (ph == "B") {
      ++open_begins[track];
    } else if (ph == "E") {
      if (open_begins[track] == 0) problem(fmt::format("{}: an end (E) with no begin (B) open on its track", at));
      else --open_begins[track];
    } else if (ph == "s" || ph == "f" || ph == "t") {
      const std::string id = e.contains("id") ? e["id"].dump() : "";
      if (id.empty()) problem(at + ": a flow event needs an \"id\"");
      else if (ph == "s") ++flows[id];
      else if (ph == "f") --flows[id];
    }
  }
  for (const auto& [track, open] : open_begins)
    if (open > 0) problem(fmt::format("track pid {} tid {}: {} begin (B) event(s) never ended", track.first, track.second, open));
  for (const auto& [id, open] : flows)
    if (open != 0) problem(fmt::format("flow {} has {} unmatched {}", id, std::abs(open), open > 0 ? "start(s)" : "finish(es)"));
  std::set<std::int64_t> pids;
  for (auto& [track, spans] : slices) {
    pids.insert(track.first);
    if (!named_tracks.count(track)) problem(fmt::format("track pid {} tid {} has slices but no thread_name", track.first, track.second));
    // Strict nesting: sorted by start (longest first on ties), each slice lies inside the open
    // enclosing one or starts after it ends.
    std::sort(spans.begin(), spans.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    std::vector<std::int64_t> open;
    for (const auto& [start, end] : spans) {
      while (!open.empty() && open.back() <= start) open.pop_back();
      if (!open.empty() && end > open.back()) {
        problem(fmt::format("track pid {} tid {}: a slice [{}, {}) ns overlaps another ending at {} ns without nesting",
                            track.first, track.second, start, end, open.back()));
        break;
      }
      open.push_back(end);
    }
  }
  for (auto pid : pids)
    if (!named_processes.count(pid)) problem(fmt::format("process {} has slices but no process_name", pid));
  r.processes = pids.size();
  r.tracks = slices.size();
  return r;
}

namespace {

// "core2" before "core10": runs of digits compare as numbers.
bool natural_less(const std::string& a, const std::string& b) {
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
      std::size_t ei = i, ej = j;
      while (ei < a.size() && std::isdigit(static_cast<unsigned char>(a[ei]))) ++ei;
      while (ej < b.size() && std::isdigit(static_cast<unsigned char>(b[ej]))) ++ej;
      const std::string da = a.substr(i, ei - i), db = b.substr(j, ej - j);
      const std::size_t za = da.find_first_not_of('0'), zb = db.find_first_not_of('0');
      const std::string na = za == std::string::npos ? "" : da.substr(za), nb = zb == std::string::npos ? "" : db.substr(zb);
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      i = ei;
      j = ej;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

// The core an op track belongs to: "core1" of "core1.ops.matmul" (tpusim's op engines), "" for
// any other track. Only these tracks hold the program's ops; the others hold the same work again
// as steps, batches, collective pieces or link transfers.
std::string core_of_op_track(const std::string& track) {
  const std::size_t ops = track.find(".ops.");
  if (ops == std::string::npos || track.compare(0, 4, "core") != 0) return "";
  return track.substr(0, ops);
}

}  // namespace

std::string summarize_trace(const json& trace, std::size_t top) {
  const json& events = events_of(trace);
  std::map<std::int64_t, std::string> process_names;
  std::map<std::int64_t, std::int64_t> process_order;
  std::map<Track, std::string> track_names;
  std::map<Track, std::int64_t> track_order;
  struct Total {
    double us = 0;
    std::size_t count = 0;
  };
  struct Slice {
    Track track;
    std::string name;
    double us;
    std::int64_t step;  // -1: none in args
  };
  std::vector<Slice> kept;
  std::map<Track, double> busy_us;
  double first = INFINITY, last = -INFINITY;
  // Events of the wrong shape (trace-check names them) are passed over, not trusted.
  auto integer = [](const json& e, const char* key) {
    return e.contains(key) && e[key].is_number_integer() ? e[key].get<std::int64_t>() : std::int64_t{0};
  };
  for (const auto& e : events) {
    if (!e.is_object() || !e.contains("ph") || !e["ph"].is_string()) continue;
    const std::string ph = e["ph"];
    const Track track{integer(e, "pid"), integer(e, "tid")};
    const std::string name = name_of(e);
    if (ph == "M" && e.contains("args") && e["args"].is_object()) {
      const json& args = e["args"];
      if (args.contains("name") && args["name"].is_string()) {
        if (name == "process_name") process_names[track.first] = args["name"].get<std::string>();
        if (name == "thread_name") track_names[track] = args["name"].get<std::string>();
      }
      if (args.contains("sort_index") && args["sort_index"].is_number_integer()) {
        if (name == "process_sort_index") process_order[track.first] = args["sort_index"].get<std::int64_t>();
        if (name == "thread_sort_index") track_order[track] = args["sort_index"].get<std::int64_t>();
      }
    } else if (ph == "X" && e.contains("dur") && time_in_range(e["dur"]) && e["dur"].get<double>() >= 0 && e.contains("ts") &&
               time_in_range(e["ts"])) {
      const double d = e["dur"].get<double>(), ts = e["ts"].get<double>();
      const bool has_step = e.contains("args") && e["args"].is_object() && e["args"].contains("step") &&
                            e["args"]["step"].is_number_integer();
      kept.push_back({track, name.empty() ? "?" : name, d, has_step ? e["args"]["step"].get<std::int64_t>() : -1});
      busy_us[track] += d;
      first = std::min(first, ts);
      last = std::max(last, ts + d);
    }
  }
  const auto track_name = [&](const Track& t) {
    const auto it = track_names.find(t);
    return it != track_names.end() ? it->second : fmt::format("tid {}", t.second);
  };

  // Ops: the slices of the cores' op tracks, per step and per core. A trace without such tracks
  // (not tpusim's) ranks every slice over the whole trace.
  std::set<std::pair<std::int64_t, std::string>> cores;
  std::set<std::int64_t> steps;
  for (const auto& s : kept) {
    const std::string core = core_of_op_track(track_name(s.track));
    if (core.empty()) continue;
    cores.emplace(s.track.first, core);
    if (s.step >= 0) steps.insert(s.step);
  }
  const bool per_core = !cores.empty();
  std::map<std::string, Total> by_name;
  for (const auto& s : kept) {
    if (per_core && core_of_op_track(track_name(s.track)).empty()) continue;
    Total& t = by_name[s.name];
    t.us += s.us;
    ++t.count;
  }
  const double divisor = per_core ? static_cast<double>(cores.size()) * static_cast<double>(std::max<std::size_t>(1, steps.size())) : 1.0;

  // Step time: the mean of the slices of the cores' "steps" tracks, per step.
  std::map<std::int64_t, Total> step_slices;
  for (const auto& s : kept) {
    const std::string name = track_name(s.track);
    if (s.step >= 0 && name.size() >= 6 && name.compare(name.size() - 6, 6, ".steps") == 0) {
      step_slices[s.step].us += s.us;
      ++step_slices[s.step].count;
    }
  }

  const double span = last > first ? last - first : 0;
  std::string out = fmt::format("{} events, {:.3f} ms from first to last slice\n", events.size(), span / 1000);
  double mean_step_us = 0;
  if (!step_slices.empty()) {
    for (const auto& [step, t] : step_slices) mean_step_us += t.us / static_cast<double>(t.count);
    mean_step_us /= static_cast<double>(step_slices.size());
    const auto& [first_step, first_total] = *step_slices.begin();
    const auto& [last_step, last_total] = *step_slices.rbegin();
    out += fmt::format("{} step(s): step {} {:.3f} ms, step {} {:.3f} ms, mean {:.3f} ms (averaged over the cores' steps tracks)\n",
                       step_slices.size(), first_step, first_total.us / static_cast<double>(first_total.count) / 1000, last_step,
                       last_total.us / static_cast<double>(last_total.count) / 1000, mean_step_us / 1000);
  }
  out += "\n";
  std::vector<std::pair<std::string, Total>> names(by_name.begin(), by_name.end());
  std::sort(names.begin(), names.end(), [](const auto& a, const auto& b) { return a.second.us != b.second.us ? a.second.us > b.second.us : a.first < b.first; });
  const std::size_t shown = std::min(top, names.size());
  if (per_core) {
    std::set<std::int64_t> chips;
    for (const auto& c : cores) chips.insert(c.first);
    out += fmt::format("Top {} ops by time per step per core (the coreN.ops.* tracks; {} step(s), {} core(s) on {} process(es))\n",
                       shown, std::max<std::size_t>(1, steps.size()), cores.size(), chips.size());
    out += fmt::format("{:>14}  {:>7}  {:>10}  {}\n", "us/step/core", "of step", "count", "name");
    for (std::size_t i = 0; i < shown; ++i) {
      const double us = names[i].second.us / divisor;
      out += fmt::format("{:>14.3f}  {:>7}  {:>10.4g}  {}\n", us,
                         mean_step_us > 0 ? fmt::format("{:.1f}%", 100 * us / mean_step_us) : std::string("-"),
                         static_cast<double>(names[i].second.count) / divisor, names[i].first);
    }
  } else {
    out += fmt::format("Top {} slices by total time (all tracks)\n{:>14}  {:>10}  {}\n", shown, "total ms", "count", "name");
    for (std::size_t i = 0; i < shown; ++i)
      out += fmt::format("{:>14.3f}  {:>10}  {}\n", names[i].second.us / 1000, names[i].second.count, names[i].first);
  }

  // Tracks in the order a viewer shows them: processes and tracks by their sort index (tpusim's:
  // chip, core, unit), then by name, digits compared as numbers.
  std::vector<Track> tracks;
  for (const auto& [track, us] : busy_us) tracks.push_back(track);
  const auto process_key = [&](std::int64_t pid) {
    const auto it = process_order.find(pid);
    return it != process_order.end() ? it->second : pid;
  };
  std::sort(tracks.begin(), tracks.end(), [&](const Track& a, const Track& b) {
    if (process_key(a.first) != process_key(b.first)) return process_key(a.first) < process_key(b.first);
    if (a.first != b.first) return a.first < b.first;
    const auto oa = track_order.find(a), ob = track_order.find(b);
    const bool ha = oa != track_order.end(), hb = ob != track_order.end();
    if (ha != hb) return ha;
    if (ha && oa->second != ob->second) return oa->second < ob->second;
    const std::string na = track_name(a), nb = track_name(b);
    if (na != nb) return natural_less(na, nb);
    return a.second < b.second;
  });
  out += fmt::format("\nBusy time per track\n{:>14}  {:>7}  {}\n", "busy ms", "busy", "process / track");
  for (const auto& track : tracks) {
    const double us = busy_us[track];
    const std::string process = process_names.count(track.first) ? process_names[track.first] : fmt::format("pid {}", track.first);
    out += fmt::format("{:>14.3f}  {:>6.1f}%  {} / {}\n", us / 1000, span > 0 ? 100 * us / span : 0.0, process, track_name(track));
  }
  return out;
}

}  // namespace tpusim

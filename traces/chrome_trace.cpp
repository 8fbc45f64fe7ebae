#include "traces/chrome_trace.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <system_error>
#include <map>
#include <stdexcept>

#include <zlib.h>

#include <fmt/format.h>

namespace tpusim {

TraceLevel level_of(UnitKind kind) { return traits_of(kind).shown_from; }

std::vector<std::pair<std::uint32_t, std::uint32_t>> default_traced_chips(std::uint32_t chip_count) {
  if (chip_count <= kDefaultTracedChips) return {};
  return {{0, kDefaultTracedChips - 1}};
}

std::string chip_list_string(const std::vector<std::pair<std::uint32_t, std::uint32_t>>& chips) {
  if (chips.empty()) return "all";
  std::string text;
  for (const auto& [first, last] : chips) {
    if (!text.empty()) text += ",";
    text += first == last ? std::to_string(first) : fmt::format("{}-{}", first, last);
  }
  return text;
}

std::uint32_t track_sort_index(const UnitInfo& info) {
  // Viewers order a process's tracks by this index: each core's tracks together, cores in
  // order, then the chip's shared units; on a host the input pipeline, then PCIe links by chip.
  // Units register in the order their threads start, which is not this order.
  constexpr std::uint32_t kGroup = 1u << 16, kRank = 1u << 12;
  const auto at = [&](std::uint32_t group, std::uint32_t rank, std::uint32_t position) {
    return group * kGroup + rank * kRank + std::min(position, kRank - 1);
  };
  if (info.chip == kHostChip) return info.kind == UnitKind::Pcie ? at(0, 1, info.first_served_chip) : at(0, 0, info.index);
  if (info.core == kNoCore) return at(1024, traits_of(info.kind).track_rank, info.index);
  const std::uint32_t core = info.core;
  // After the core's steps track (0): its op engines, matmul 1 to infeed 4, a track per stream.
  if (info.engine != OpEngine::None) return at(core, static_cast<std::uint32_t>(info.engine), info.stream);
  if (info.kind == UnitKind::Steps) return at(core, 0, 0);
  return at(core, traits_of(info.kind).track_rank, info.index % 16);
}

bool TraceFilter::admits_any_chip(std::uint32_t first, std::uint32_t last) const {
  return chips.empty() ||
         std::any_of(chips.begin(), chips.end(), [&](const auto& r) { return r.first <= last && first <= r.second; });
}

bool TraceFilter::admits_chips(const UnitInfo& unit) const {
  if (unit.chip != kHostChip) return admits_any_chip(unit.chip, unit.chip);
  return unit.served_chips == 0 || admits_any_chip(unit.first_served_chip, unit.first_served_chip + unit.served_chips - 1);
}

std::uint32_t TraceFilter::chip_count(std::uint32_t slice_chips) const {
  std::uint32_t count = 0;
  for (std::uint32_t chip = 0; chip < slice_chips; ++chip) count += admits_any_chip(chip, chip) ? 1 : 0;
  return count;
}

bool TraceFilter::admits(const UnitInfo& unit) const {
  if (!unit.traced || level_of(unit.kind) > level || !admits_chips(unit)) return false;
  return kinds.empty() || std::find(kinds.begin(), kinds.end(), unit.kind) != kinds.end();
}

ChromeTraceWriter::ChromeTraceWriter(const std::string& path, TraceFilter filter, bool gzip)
    : path_(path), filter_(std::move(filter)), counter_interval_ps_(filter_.counter_interval_ps) {
  if (gzip) gz_ = gzopen(path.c_str(), "wb6");
  else file_ = std::fopen(path.c_str(), "wb");
  if (!file_ && !gz_) throw std::runtime_error(fmt::format("cannot create trace file {}", path));
  write("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
}

ChromeTraceWriter::~ChromeTraceWriter() {
  if (file_) std::fclose(file_);
  if (gz_) gzclose(static_cast<gzFile>(gz_));
}

void ChromeTraceWriter::write(const char* text) {
  const bool ok = gz_ ? gzputs(static_cast<gzFile>(gz_), text) >= 0 : std::fputs(text, file_) != EOF;
  if (!ok && write_errno_ == 0) write_errno_ = errno ? errno : EIO;
}

std::string ChromeTraceWriter::micros(std::uint64_t ps) {
  const std::uint64_t ns = ps / 1000;
  return fmt::format("{}.{:03}", ns / 1000, ns % 1000);
}

void ChromeTraceWriter::emit(const std::string& event) {
  if (events_++) write(",\n");
  write(event.c_str());
}

const std::string& ChromeTraceWriter::quoted(const std::string* name) {
  static const std::string kUnnamed = "\"busy\"";
  if (!name) return kUnnamed;
  auto it = quoted_.find(name);
  if (it == quoted_.end()) it = quoted_.emplace(name, nlohmann::json(*name).dump()).first;
  return it->second;
}

void ChromeTraceWriter::add_unit(std::uint32_t unit, const UnitInfo& info) {
  if (tid_of_unit_.size() <= unit) {
    tid_of_unit_.resize(unit + 1, 0);
    admitted_.resize(unit + 1, false);
  }
  admitted_[unit] = filter_.admits(info);
  if (pid_of_unit_.size() <= unit) pid_of_unit_.resize(unit + 1, 0);
  pid_of_unit_[unit] = pid_of(info);
  // HBM and PCIe per process, ICI per link (a hot link hides in a chip's total).
  const char* kind_counter = traits_of(info.kind).counter;
  const std::string counter = !kind_counter ? "" : *kind_counter ? kind_counter : info.label + " GB/s";
  if (counter_of_unit_.size() <= unit) counter_of_unit_.resize(unit + 1, nullptr);
  const std::uint32_t pid = pid_of_unit_[unit];
  if (!counter.empty() && filter_.level >= TraceLevel::Ops && filter_.admits_chips(info))
    counter_of_unit_[unit] = &counter_bytes_[{pid, counter}];
  if (!admitted_[unit]) return;
  auto [it, first] = next_tid_.try_emplace(pid, 1);
  if (first) {
    const std::string process =
        info.chip == kHostChip ? fmt::format("host {}", info.index) : fmt::format("chip {}", info.chip);
    emit(fmt::format(R"({{"name":"process_name","ph":"M","pid":{},"tid":0,"args":{{"name":{}}}}})", pid,
                     nlohmann::json(process).dump()));
    emit(fmt::format(R"({{"name":"process_sort_index","ph":"M","pid":{},"tid":0,"args":{{"sort_index":{}}}}})",
                     pid, pid));
  }
  const std::uint32_t tid = it->second++;
  tid_of_unit_[unit] = tid;
  emit(fmt::format(R"({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":{}}}}})", pid, tid,
                   nlohmann::json(info.label).dump()));
  emit(fmt::format(R"({{"name":"thread_sort_index","ph":"M","pid":{},"tid":{},"args":{{"sort_index":{}}}}})",
                   pid, tid, track_sort_index(info)));
}

void ChromeTraceWriter::count_bytes(const Activity& a) {
  if (a.unit >= counter_of_unit_.size() || !counter_of_unit_[a.unit] || a.bytes == 0 || a.end_ps <= a.start_ps) return;
  if (!(a.end_ps > filter_.begin_ps && a.start_ps < filter_.end_ps)) return;
  auto& buckets = *counter_of_unit_[a.unit];
  // Too many samples for one counter: every counter's interval doubles, its buckets merged in pairs.
  while (buckets.size() > TraceFilter::kMaxCounterSamples) {
    counter_interval_ps_ *= 2;
    for (auto& [key, fine] : counter_bytes_) {
      std::map<std::uint64_t, double> coarse;
      for (const auto& [bucket, bytes] : fine) coarse[bucket / 2] += bytes;
      fine = std::move(coarse);
    }
  }
  // Spread the bytes evenly over the activity's time, interval by interval.
  const std::uint64_t step = counter_interval_ps_;
  const double per_ps = static_cast<double>(a.bytes) / static_cast<double>(a.end_ps - a.start_ps);
  for (std::uint64_t t = a.start_ps; t < a.end_ps;) {
    const std::uint64_t bucket = t / step, next = std::min(a.end_ps, (bucket + 1) * step);
    buckets[bucket] += per_ps * static_cast<double>(next - t);
    t = next;
  }
}

void ChromeTraceWriter::emit_counters() {
  const double seconds = static_cast<double>(counter_interval_ps_) * 1e-12;
  for (const auto& [key, buckets] : counter_bytes_) {
    if (buckets.empty()) continue;  // a unit that moved nothing in the window
    std::uint64_t expected = buckets.begin()->first;
    for (const auto& [bucket, bytes] : buckets) {
      if (bucket > expected)  // a gap: back to zero until this interval
        emit(fmt::format(R"({{"name":"{}","ph":"C","pid":{},"tid":0,"ts":{},"args":{{"GB/s":0}}}})", key.second, key.first,
                         micros(expected * counter_interval_ps_)));
      emit(fmt::format(R"({{"name":"{}","ph":"C","pid":{},"tid":0,"ts":{},"args":{{"GB/s":{:.3f}}}}})", key.second, key.first,
                       micros(bucket * counter_interval_ps_), bytes / seconds / 1e9));
      expected = bucket + 1;
    }
    emit(fmt::format(R"({{"name":"{}","ph":"C","pid":{},"tid":0,"ts":{},"args":{{"GB/s":0}}}})", key.second, key.first,
                     micros(expected * counter_interval_ps_)));
  }
}

void ChromeTraceWriter::flow(std::uint32_t from_unit, std::uint64_t from_ps, std::uint32_t to_unit, std::uint64_t to_ps,
                             const std::string* name) {
  if (from_unit >= admitted_.size() || to_unit >= admitted_.size() || !admitted_[from_unit] || !admitted_[to_unit]) return;
  if (!(to_ps > filter_.begin_ps && from_ps < filter_.end_ps)) return;
  const std::uint64_t id = ++flows_;
  // The start sits on the link's slice; the end binds to the receiving collective's slice.
  emit(fmt::format(R"({{"name":{},"cat":"flow","ph":"s","id":{},"pid":{},"tid":{},"ts":{}}})", quoted(name), id,
                   pid_of_unit_[from_unit], tid_of_unit_[from_unit], micros(from_ps)));
  emit(fmt::format(R"({{"name":{},"cat":"flow","ph":"f","bp":"e","id":{},"pid":{},"tid":{},"ts":{}}})", quoted(name), id,
                   pid_of_unit_[to_unit], tid_of_unit_[to_unit], micros(to_ps)));
}

void ChromeTraceWriter::level(std::uint32_t unit, const std::string* counter, const char* value_unit, std::uint64_t at_ps,
                              double value) {
  if (unit >= admitted_.size() || !admitted_[unit] || filter_.level < TraceLevel::Ops) return;
  if (at_ps < filter_.begin_ps || at_ps >= filter_.end_ps) return;
  const auto [it, fresh] = pending_levels_.try_emplace({unit, counter}, LevelSample{value_unit, at_ps, value});
  if (fresh) return;
  if (it->second.at_ps != at_ps) emit_level(unit, counter, it->second);
  it->second = {value_unit, at_ps, value};
}

void ChromeTraceWriter::emit_level(std::uint32_t unit, const std::string* counter, const LevelSample& sample) {
  emit(fmt::format(R"({{"name":{},"ph":"C","pid":{},"tid":0,"ts":{},"args":{{"{}":{:.6g}}}}})", quoted(counter),
                   pid_of_unit_[unit], micros(sample.at_ps), sample.value_unit, sample.value));
}

void ChromeTraceWriter::slice(const UnitInfo& info, const Activity& a) {
  count_bytes(a);
  if (!admitted_[a.unit] || !filter_.admits(a)) return;
  const std::uint64_t start_ns = a.start_ps / 1000, end_ns = a.end_ps / 1000;
  std::string args = fmt::format(R"("step":{})", a.step);
  if (info.freq_mhz > 0) {
    const double cycles_per_ps = info.freq_mhz / 1e6;
    const auto start_cycle = static_cast<std::uint64_t>(static_cast<double>(a.start_ps) * cycles_per_ps + 0.5);
    const auto end_cycle = static_cast<std::uint64_t>(static_cast<double>(a.end_ps) * cycles_per_ps + 0.5);
    args += fmt::format(R"(,"start_cycle":{},"cycles":{})", start_cycle, a.cycles ? a.cycles : end_cycle - start_cycle);
  } else {
    args += fmt::format(R"(,"start_ps":{},"dur_ps":{})", a.start_ps, a.end_ps - a.start_ps);
  }
  if (a.bytes) args += fmt::format(R"(,"bytes":{})", a.bytes);
  if (a.flops > 0) args += fmt::format(R"(,"flops":{:.0f})", a.flops);
  emit(fmt::format(R"({{"name":{},"cat":"{}","ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"args":{{{}}}}})",
                   quoted(a.name), unit_kind_name(info.kind), pid_of(info), tid_of_unit_[a.unit],
                   micros(a.start_ps), micros((end_ns - start_ns) * 1000), args));
}

void ChromeTraceWriter::close(const nlohmann::json& metadata) {
  if (!file_ && !gz_) return;
  emit_counters();
  // The last sample of each counter, in an order that does not depend on where strings live.
  std::vector<std::pair<std::pair<std::uint32_t, const std::string*>, LevelSample>> last(pending_levels_.begin(),
                                                                                        pending_levels_.end());
  std::sort(last.begin(), last.end(), [](const auto& a, const auto& b) {
    return a.first.first != b.first.first ? a.first.first < b.first.first : *a.first.second < *b.first.second;
  });
  for (const auto& [key, sample] : last) emit_level(key.first, key.second, sample);
  pending_levels_.clear();
  write(("\n],\"otherData\":" + metadata.dump() + "}\n").c_str());
  bool failed = write_errno_ != 0;
  if (file_) {
    failed = std::ferror(file_) != 0 || failed;
    if (std::fclose(file_) != 0 && write_errno_ == 0) write_errno_ = errno;
    failed = failed || write_errno_ != 0;
    file_ = nullptr;
  } else {
    if (gzclose(static_cast<gzFile>(gz_)) != Z_OK && write_errno_ == 0) write_errno_ = errno ? errno : EIO;
    failed = failed || write_errno_ != 0;
    gz_ = nullptr;
  }
  // The environment's failure (a full disk), said with its reason, not an internal error.
  if (failed) throw std::system_error(write_errno_ ? write_errno_ : EIO, std::generic_category(), "writing " + path_);
}

}  // namespace tpusim

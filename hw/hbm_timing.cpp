#include "hw/hbm_timing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace tpusim {

HbmAddressMap::HbmAddressMap(const HbmConfig& config) : burst_bytes_(config.burst_bytes()) {
  const std::string& s = config.address_mapping;
  if (burst_bytes_ == 0) throw std::invalid_argument("the burst is zero bytes");
  if (config.row_bytes % burst_bytes_ != 0 || config.row_bytes < burst_bytes_)
    throw std::invalid_argument(fmt::format("row_bytes {} is not a multiple of the {}-byte burst", config.row_bytes,
                                            burst_bytes_));
  if (s.size() % 2 != 0)
    throw std::invalid_argument(fmt::format("\"{}\" is not a sequence of two-letter fields", s));
  const std::uint64_t rows = std::max<std::uint64_t>(
      1, config.capacity_bytes / (std::uint64_t{config.channels} * config.bank_groups * config.banks_per_group *
                                  config.row_bytes));
  std::vector<Digit> most_significant_first;
  for (std::size_t i = 0; i < s.size(); i += 2) {
    const std::string f = s.substr(i, 2);
    Digit d{};
    if (f == "ro") d = {Field::Row, rows};
    else if (f == "ba") d = {Field::Bank, config.banks_per_group};
    else if (f == "bg") d = {Field::BankGroup, config.bank_groups};
    else if (f == "ch") d = {Field::Channel, config.channels};
    else if (f == "co") d = {Field::Column, config.row_bytes / burst_bytes_};
    else if (f == "ra") d = {Field::Rank, 1};
    else
      throw std::invalid_argument(fmt::format("unknown field \"{}\" in \"{}\" (fields: ro ba bg ch co ra)", f, s));
    for (const Digit& seen : most_significant_first)
      if (seen.field == d.field) throw std::invalid_argument(fmt::format("field \"{}\" appears twice in \"{}\"", f, s));
    most_significant_first.push_back(d);
  }
  for (const Field needed : {Field::Row, Field::Bank, Field::BankGroup, Field::Channel, Field::Column}) {
    if (std::none_of(most_significant_first.begin(), most_significant_first.end(),
                     [&](const Digit& d) { return d.field == needed; }))
      throw std::invalid_argument(fmt::format("\"{}\" lacks one of the fields ro ba bg ch co", s));
  }
  digits_.assign(most_significant_first.rbegin(), most_significant_first.rend());
  for (Digit& d : digits_)
    if (d.radix > 0 && (d.radix & (d.radix - 1)) == 0) d.shift = __builtin_ctzll(d.radix);
  column_run_bytes_ = digits_.front().field == Field::Column ? config.row_bytes : burst_bytes_;
}

HbmLocation HbmAddressMap::decode(std::uint64_t address) const {
  HbmLocation loc;
  std::uint64_t rest = address / burst_bytes_;
  for (std::size_t i = 0; i < digits_.size(); ++i) {
    // The most significant digit takes whatever is left: addresses past the capacity wrap rows.
    const bool last = i + 1 == digits_.size();
    const Digit& d = digits_[i];
    std::uint64_t value = rest;
    if (!last) {
      if (d.shift >= 0) {
        value = rest & (d.radix - 1);
        rest >>= d.shift;
      } else {
        value = rest % d.radix;
        rest /= d.radix;
      }
    }
    switch (digits_[i].field) {
      case Field::Row: loc.row = value; break;
      case Field::Bank: loc.bank = static_cast<std::uint32_t>(value % digits_[i].radix); break;
      case Field::BankGroup: loc.bank_group = static_cast<std::uint32_t>(value % digits_[i].radix); break;
      case Field::Channel: loc.channel = static_cast<std::uint32_t>(value % digits_[i].radix); break;
      case Field::Column: loc.column = value; break;
      case Field::Rank: break;
    }
  }
  return loc;
}

std::uint64_t HbmAddressMap::run_bytes(std::uint64_t address) const {
  return column_run_bytes_ - address % column_run_bytes_;
}

HbmTimingPs HbmTimingPs::from(const HbmConfig& c) {
  const HbmTimingConfig& t = c.timing;
  HbmTimingPs p{};
  p.burst = transfer_ps(c.burst_bytes(), c.bw_gbps / c.channels);
  p.trcd = ns_to_ps(t.trcd_ns);
  p.trp = ns_to_ps(t.trp_ns);
  p.tras = ns_to_ps(t.tras_ns);
  p.tcl = ns_to_ps(t.tcl_ns);
  p.tcwl = ns_to_ps(t.tcwl_ns);
  p.tccd_l = std::max(p.burst, ns_to_ps(t.tccd_l_ns));
  p.trrd_s = ns_to_ps(t.trrd_s_ns);
  p.trrd_l = ns_to_ps(t.trrd_l_ns);
  p.tfaw = ns_to_ps(t.tfaw_ns);
  p.twtr_s = ns_to_ps(t.twtr_s_ns);
  p.twtr_l = ns_to_ps(t.twtr_l_ns);
  p.trtw = ns_to_ps(t.trtw_ns);
  p.twr = ns_to_ps(t.twr_ns);
  p.trtp = ns_to_ps(t.trtp_ns);
  p.trfc = ns_to_ps(t.trfc_ns);
  p.trefi = std::max<Picos>(1, ns_to_ps(t.trefi_ns));
  return p;
}

HbmChannel::HbmChannel(const HbmConfig& config, const HbmTimingPs& timing)
    : t_(timing),
      banks_per_group_(config.banks_per_group),
      queue_depth_(std::max<std::uint32_t>(1, config.queue_depth)),
      bank_queue_depth_(std::max<std::uint32_t>(1, config.bank_queue_depth)),
      bank_queues_(std::size_t{config.bank_groups} * config.banks_per_group),
      banks_(std::size_t{config.bank_groups} * config.banks_per_group),
      bank_group_col_ready_(config.bank_groups, 0),
      bank_group_last_act_(config.bank_groups, 0),
      next_refresh_(timing.trefi) {}

void HbmChannel::enqueue(const HbmGroup& group) {
  auto& queue = group.write ? writes_ : reads_;
  queue.push_back(group);
  queue.back().order = next_order_++;
  (group.write ? buffered_write_bursts_ : queued_read_bursts_) += group.bursts;
  promote();
}

void HbmChannel::move_to_banks(std::deque<HbmGroup>& from, std::uint64_t& from_bursts, std::uint64_t limit_bursts) {
  std::uint64_t moved = 0;
  for (auto it = from.begin(); it != from.end() && moved < limit_bursts;) {
    const std::uint32_t bank = bank_index(*it);
    BankQueue& bq = bank_queues_[bank];
    if (bq.bursts >= bank_queue_depth_) {
      ++it;
      continue;
    }
    if (bq.groups.empty()) {
      bq.active_slot = active_.size();
      active_.push_back(bank);
    }
    bq.groups.push_back(*it);
    bq.bursts += it->bursts;
    ++in_bank_queues_;
    from_bursts -= it->bursts;
    moved += it->bursts;
    if (it == from.begin()) {
      from.pop_front();
      it = from.begin();
    } else {
      it = from.erase(it);
    }
  }
  if (&from == &writes_) draining_bursts_ -= std::min(draining_bursts_, moved);
}

void HbmChannel::promote() {
  if (draining_bursts_ == 0) {
    const bool full = buffered_write_bursts_ >= queue_depth_;
    const bool banks_dry = in_bank_queues_ == 0 && reads_.empty() && 4 * buffered_write_bursts_ > queue_depth_;
    const bool only_writes_left = in_bank_queues_ == 0 && reads_.empty() && buffered_write_bursts_ > 0;
    if (full || banks_dry || only_writes_left) draining_bursts_ = buffered_write_bursts_;
  }
  if (draining_bursts_ > 0) {
    move_to_banks(writes_, buffered_write_bursts_, draining_bursts_);
    return;
  }
  move_to_banks(reads_, queued_read_bursts_, ~std::uint64_t{0});
}

Picos HbmChannel::next_decision_ps() const {
  if (in_bank_queues_ == 0) return kNever;
  Picos earliest = kNever;
  for (const std::uint32_t bank : active_) earliest = std::min(earliest, bank_queues_[bank].groups.front().arrival_ps);
  return std::max(decision_ready_, earliest);
}

Picos HbmChannel::act_constraint(std::uint32_t bank_group) const {
  Picos t = 0;
  if (any_act_) {
    t = std::max(t, last_act_ + t_.trrd_s);
    t = std::max(t, bank_group_last_act_[bank_group] + t_.trrd_l);
  }
  if (acts_ >= 4) t = std::max(t, faw_[faw_next_] + t_.tfaw);
  return t;
}

HbmChannel::Plan HbmChannel::plan(const HbmGroup& g, Picos decision_ps) const {
  const Bank& b = banks_[bank_index(g)];
  Plan p;
  if (b.open_row == g.row) {
    p.col = std::max(decision_ps, b.col_ready);
  } else {
    p.needs_act = true;
    // Row commands go out as soon as the group is queued and its bank allows, ahead of the
    // decision that commits its columns (a controller opens rows for queued requests early).
    // Only groups that have arrived by the decision are planned, so arrival <= decision.
    const Picos row_floor = g.arrival_ps;
    Picos act_floor = row_floor;
    if (b.open_row != Bank::kClosed) {
      p.needs_pre = true;
      p.pre = std::max(row_floor, b.pre_ready);
      act_floor = p.pre + t_.trp;
    }
    // ACTs go out in the order groups are scheduled, so tRRD and tFAW look only backwards.
    p.act = std::max({act_floor, b.act_ready, act_constraint(g.bank_group), any_act_ ? last_act_ : 0});
    p.col = p.act + t_.trcd;
  }
  p.col = std::max(p.col, bank_group_col_ready_[g.bank_group]);
  // On the data bus: after the data already queued there, plus a turnaround when the direction
  // changes (read to write: the bus gap tRTW; write to read: tWTR, then the read's CAS latency).
  Picos bus_floor = bus_free_;
  if (any_data_ && g.write != last_write_) bus_floor += g.write ? t_.trtw : t_.twtr_for(g.bank_group == last_write_bank_group_) + t_.tcl;
  p.data = std::max(p.col + (g.write ? t_.tcwl : t_.tcl), bus_floor);
  return p;
}

void HbmChannel::issue(const HbmGroup& g, const Plan& p, std::vector<HbmGroupDone>& done) {
  Bank& b = banks_[bank_index(g)];
  if (p.needs_act) {
    (p.needs_pre ? stats_.row_conflicts : stats_.row_misses) += 1;
    stats_.row_hits += g.bursts - 1;
    b.open_row = g.row;
    b.act_ready = p.act + t_.tras + t_.trp;  // tRC
    b.col_ready = p.act + t_.trcd;
    b.pre_ready = p.act + t_.tras;
    last_act_ = p.act;
    any_act_ = true;
    bank_group_last_act_[g.bank_group] = p.act;
    faw_[faw_next_] = p.act;
    faw_next_ = (faw_next_ + 1) % 4;
    ++acts_;
  } else {
    stats_.row_hits += g.bursts;
  }
  const Picos bus_work = Picos{g.bursts} * t_.burst;
  bus_free_ = p.data + bus_work;
  stats_.bus_busy_ps += bus_work;
  // A group in one bank group cannot issue its columns faster than tCCD_L, however idle the bus.
  const Picos latency = g.write ? t_.tcwl : t_.tcl;
  const Picos paced_end = p.col + latency + Picos{g.bursts - 1} * t_.tccd_l + t_.burst;
  const Picos data_end = std::max(bus_free_, paced_end);
  const Picos last_col = data_end - t_.burst - latency;
  bank_group_col_ready_[g.bank_group] = last_col + t_.tccd_l;
  any_data_ = true;
  last_write_ = g.write;
  if (g.write) {
    b.pre_ready = std::max(b.pre_ready, data_end + t_.twr);
    last_write_bank_group_ = g.bank_group;
    stats_.write_bursts += g.bursts;
  } else {
    b.pre_ready = std::max(b.pre_ready, last_col + t_.trtp);
    stats_.read_bursts += g.bursts;
  }
  done.push_back({g.tag, data_end});
}

void HbmChannel::refresh(Picos due_ps) {
  Picos start = due_ps;
  for (const Bank& b : banks_) start = std::max(start, b.open_row == Bank::kClosed ? b.act_ready : b.pre_ready);
  const Picos ready = start + t_.trp + t_.trfc;  // precharge all, then refresh
  for (Bank& b : banks_) {
    b.open_row = Bank::kClosed;
    b.act_ready = std::max(b.act_ready, ready);
  }
  ++stats_.refreshes;
  next_refresh_ += t_.trefi;
}

void HbmChannel::run_until(Picos until_ps, std::vector<HbmGroupDone>& done) {
  while (in_bank_queues_ > 0) {
    const Picos decision = next_decision_ps();
    if (decision > until_ps) break;
    if (decision >= next_refresh_) {
      // Refreshes that fell in an idle stretch only count; the one due now blocks the banks.
      while (next_refresh_ + t_.trefi <= decision) {
        next_refresh_ += t_.trefi;
        ++stats_.refreshes;
      }
      refresh(next_refresh_);
      continue;
    }
    // FR-FCFS: each bank offers its oldest row hit, else its oldest group; the offer whose data
    // can be on the bus earliest goes, and among equals a row hit before a miss, then the oldest
    // (with the bus backlogged every offer ties, and a miss must not jump a hit).
    BankQueue* best_queue = nullptr;
    std::size_t best = 0;
    Plan best_plan{};
    for (const std::uint32_t bank : active_) {
      BankQueue& bq = bank_queues_[bank];
      if (bq.groups.front().arrival_ps > decision) continue;
      const std::uint64_t open_row = banks_[bank_index(bq.groups.front())].open_row;
      std::size_t pick = 0;
      for (std::size_t i = 0; i < bq.groups.size() && bq.groups[i].arrival_ps <= decision; ++i)
        if (bq.groups[i].row == open_row) {
          pick = i;
          break;
        }
      const HbmGroup& g = bq.groups[pick];
      const Plan p = plan(g, decision);
      const bool hit = !p.needs_act, best_hit = best_queue != nullptr && !best_plan.needs_act;
      if (best_queue == nullptr || p.data < best_plan.data ||
          (p.data == best_plan.data && (hit != best_hit ? hit : g.order < best_queue->groups[best].order))) {
        best_queue = &bq;
        best = pick;
        best_plan = p;
      }
    }
    const HbmGroup group = best_queue->groups[best];
    if (best == 0)
      best_queue->groups.pop_front();
    else
      best_queue->groups.erase(best_queue->groups.begin() + static_cast<std::ptrdiff_t>(best));
    best_queue->bursts -= group.bursts;
    --in_bank_queues_;
    if (best_queue->groups.empty()) {  // swap it out of the active list
      const std::uint32_t moved = active_.back();
      bank_queues_[moved].active_slot = best_queue->active_slot;
      active_[best_queue->active_slot] = moved;
      active_.pop_back();
    }
    promote();
    issue(group, best_plan, done);
    // Columns are committed one command slot at a time, and no earlier than a CAS latency before
    // the data bus can take their data (row commands were planned from the group's arrival).
    decision_ready_ = std::max(decision + t_.burst, bus_free_ > t_.tcl ? bus_free_ - t_.tcl : 0);
  }
}

HbmMemory::HbmMemory(const HbmConfig& config)
    : map_(config),
      timing_(HbmTimingPs::from(config)),
      posted_writes_(config.posted_writes),
      max_group_bytes_(std::uint64_t{std::max<std::uint32_t>(1, config.bank_queue_depth)} * config.burst_bytes()),
      scheduled_(config.channels, HbmChannel::kNever) {
  channels_.reserve(config.channels);
  for (std::uint32_t c = 0; c < config.channels; ++c) channels_.emplace_back(config, timing_);
}

void HbmMemory::split(std::uint64_t tag, std::uint64_t address, std::uint64_t bytes, bool write,
                      std::vector<Routed>& out) const {
  const std::uint32_t burst = map_.burst_bytes();
  std::uint64_t pos = address;
  const std::uint64_t end = address + bytes;
  while (pos < end) {
    // A group is at most what a bank queue holds: the controller sees a long run in pieces and
    // may serve other requests between them.
    const std::uint64_t run = std::min({end - pos, map_.run_bytes(pos), max_group_bytes_ - pos % max_group_bytes_});
    const HbmLocation loc = map_.decode(pos);
    // A partial burst still occupies a whole one.
    const auto bursts = static_cast<std::uint32_t>((pos % burst + run + burst - 1) / burst);
    out.push_back({loc.channel, {0, loc.bank_group, loc.bank, loc.row, bursts, write, tag}});
    pos += run;
  }
}

Picos HbmMemory::enqueue(const Routed& r, Picos arrival_ps) {
  HbmGroup g = r.group;
  g.arrival_ps = arrival_ps;
  const bool posted = g.write && posted_writes_;
  if (posted) g.tag = kUntracked;
  channels_[r.channel].enqueue(g);
  reschedule(r.channel);
  return posted ? arrival_ps : HbmChannel::kNever;
}

void HbmMemory::reschedule(std::uint32_t channel) {
  // Only an earlier time needs a new entry: a channel whose entry comes up too early runs
  // nothing and is rescheduled then. New groups never make a decision later.
  const Picos t = channels_[channel].next_decision_ps();
  if (t < scheduled_[channel]) {
    scheduled_[channel] = t;
    decisions_.push({t, channel});
  }
}

Picos HbmMemory::next_decision_ps() {
  while (!decisions_.empty()) {
    const auto [t, c] = decisions_.top();
    if (t == scheduled_[c]) return t;
    decisions_.pop();
  }
  return HbmChannel::kNever;
}

void HbmMemory::run_until(Picos until_ps, std::vector<HbmGroupDone>& done) {
  while (true) {
    const Picos t = next_decision_ps();
    if (t == HbmChannel::kNever || t > until_ps) return;
    const std::uint32_t c = decisions_.top().second;
    decisions_.pop();
    scheduled_[c] = HbmChannel::kNever;
    const std::size_t before = done.size();
    channels_[c].run_until(t, done);
    if (done.size() != before) freed_.push_back(c);
    // Posted writes were acknowledged on arrival: nobody waits for their completion.
    done.erase(std::remove_if(done.begin() + static_cast<std::ptrdiff_t>(before), done.end(),
                              [](const HbmGroupDone& d) { return d.tag == kUntracked; }),
               done.end());
    reschedule(c);
  }
}

std::vector<std::uint32_t> HbmMemory::take_freed_channels() {
  std::vector<std::uint32_t> freed;
  freed.swap(freed_);
  return freed;
}

HbmStats HbmMemory::stats() const {
  HbmStats s;
  s.idlest_channel_ps = channels_.empty() ? 0 : ~Picos{0};
  for (const HbmChannel& c : channels_) {
    const HbmChannelStats& x = c.stats();
    s.busiest_channel_ps = std::max(s.busiest_channel_ps, x.bus_busy_ps);
    s.idlest_channel_ps = std::min(s.idlest_channel_ps, x.bus_busy_ps);
    s.total.row_hits += x.row_hits;
    s.total.row_misses += x.row_misses;
    s.total.row_conflicts += x.row_conflicts;
    s.total.read_bursts += x.read_bursts;
    s.total.write_bursts += x.write_bursts;
    s.total.refreshes += x.refreshes;
    s.total.bus_busy_ps += x.bus_busy_ps;
  }
  return s;
}

}  // namespace tpusim

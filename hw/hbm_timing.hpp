// HBM timing at the level of burst groups: the bursts of one request that fall in one row of one
// bank are scheduled together, with the bank, bank-group and channel constraints of the JEDEC
// standard, instead of one event per 32-byte burst or per clock.
//
// A channel's data bus is a fluid server: a group of n bursts adds n burst times to the bus, and
// the group itself cannot finish faster than its bank group's column spacing (tCCD_L) allows.
// Two groups in different bank groups therefore interleave their bursts on the bus, as column
// commands do on the real interface, without simulating each command.
//
// Plain C++ (no SystemC): `membench` (hw/hbm_bench) drives it, and the SystemC HBM books
// transfers at the rates that bench measures with it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <queue>
#include <string>
#include <vector>

#include "hw/hw_config.hpp"
#include "hw/units.hpp"

namespace tpusim {

// Where a byte address lives. The mapping string names the fields from the most significant to
// the least (DRAMsim3's notation: "ro" row, "ba" bank, "bg" bank group, "ch" channel, "co"
// column, "ra" rank, always one here); the bytes of one burst sit below every field. Fields are
// mixed-radix digits rather than bit ranges, so a channel count need not be a power of two.
struct HbmLocation {
  std::uint32_t channel = 0;
  std::uint32_t bank_group = 0;
  std::uint32_t bank = 0;  // within its group
  std::uint64_t row = 0;
  std::uint64_t column = 0;  // in bursts
};

class HbmAddressMap {
 public:
  explicit HbmAddressMap(const HbmConfig& config);  // throws std::invalid_argument on a bad string

  HbmLocation decode(std::uint64_t address) const;
  // Bytes from `address` to the end of its run of consecutive bursts that stay in one row of one
  // bank of one channel (the burst group a contiguous request forms there).
  std::uint64_t run_bytes(std::uint64_t address) const;
  std::uint32_t burst_bytes() const { return burst_bytes_; }

 private:
  enum class Field { Row, Bank, BankGroup, Channel, Column, Rank };
  struct Digit {
    Field field;
    std::uint64_t radix;
    int shift = -1;  // log2(radix) when it is a power of two: decoding shifts instead of dividing
  };
  std::vector<Digit> digits_;  // least significant first
  std::uint32_t burst_bytes_;
  std::uint64_t column_run_bytes_;  // when the column is the lowest digit: bytes per row run; else one burst
};

// Derived timings in picoseconds.
struct HbmTimingPs {
  Picos burst, trcd, trp, tras, tcl, tcwl, tccd_l, trrd_s, trrd_l, tfaw, twtr_s, twtr_l, trtw, twr, trtp, trfc,
      trefi;
  Picos twtr_for(bool same_bank_group) const { return same_bank_group ? twtr_l : twtr_s; }
  static HbmTimingPs from(const HbmConfig& config);
};

struct HbmGroup {
  Picos arrival_ps = 0;
  std::uint32_t bank_group = 0;
  std::uint32_t bank = 0;  // within its group
  std::uint64_t row = 0;
  std::uint32_t bursts = 1;
  bool write = false;
  std::uint64_t tag = 0;  // the caller's: handed back on completion
  std::uint64_t order = 0;  // set by the channel: position in arrival order
};

struct HbmGroupDone {
  std::uint64_t tag;
  Picos done_ps;
};

struct HbmChannelStats {
  std::uint64_t row_hits = 0;       // column commands to an open row
  std::uint64_t row_misses = 0;     // column commands that needed an ACT (bank closed)
  std::uint64_t row_conflicts = 0;  // ... that needed a PRE and an ACT (another row open)
  std::uint64_t read_bursts = 0;
  std::uint64_t write_bursts = 0;
  std::uint64_t refreshes = 0;
  Picos bus_busy_ps = 0;
};

// One channel's controller, shaped like DRAMsim3's: a read queue and a write buffer of
// `queue_depth` bursts each, in arrival order, from which groups move into per-bank queues of
// `bank_queue_depth` bursts (the first whose bank has room, so a busy bank does not hold up the
// others), and an FR-FCFS scheduler over the bank queues (among groups whose data can go
// earliest: row hits first, then the oldest); bank states and refresh. Writes wait in their
// buffer until it fills (or the banks run dry with a quarter of it used) and then drain
// together, reads held back meanwhile, so the bus turns around once per batch, not per write.
class HbmChannel {
 public:
  static constexpr Picos kNever = ~Picos{0};

  HbmChannel(const HbmConfig& config, const HbmTimingPs& timing);

  // Groups must arrive in time order (equal times allowed). A requester that finds the
  // transaction queue full waits (`accepts`), though `enqueue` never refuses.
  void enqueue(const HbmGroup& group);
  bool accepts(bool write) const { return (write ? buffered_write_bursts_ : queued_read_bursts_) < queue_depth_; }
  // When the scheduler next has a decision to make (kNever when the queue is empty).
  Picos next_decision_ps() const;
  // Makes every decision due at or before `until_ps`; each scheduled group's completion is
  // appended to `done` (completions are in the future of the decision, not in order).
  void run_until(Picos until_ps, std::vector<HbmGroupDone>& done);
  const HbmChannelStats& stats() const { return stats_; }

 private:
  struct Bank {
    static constexpr std::uint64_t kClosed = ~std::uint64_t{0};
    std::uint64_t open_row = kClosed;
    Picos act_ready = 0;  // earliest ACT (tRC, tRP after a PRE, refresh)
    Picos col_ready = 0;  // earliest column command (tRCD after its ACT)
    Picos pre_ready = 0;  // earliest PRE (tRAS, tRTP, write recovery)
  };
  struct Plan {  // when a group could start, and what it needs
    Picos pre = 0, act = 0, col = 0;
    Picos data = 0;  // when its first burst would be on the data bus
    bool needs_pre = false, needs_act = false;
  };

  Plan plan(const HbmGroup& group, Picos decision_ps) const;
  Picos act_constraint(std::uint32_t bank_group) const;
  void issue(const HbmGroup& group, const Plan& plan, std::vector<HbmGroupDone>& done);
  void refresh(Picos due_ps);
  std::uint32_t bank_index(const HbmGroup& g) const { return g.bank_group * banks_per_group_ + g.bank; }

  HbmTimingPs t_;
  std::uint32_t banks_per_group_;
  std::uint32_t queue_depth_;
  struct BankQueue {
    std::deque<HbmGroup> groups;
    std::uint64_t bursts = 0;
    std::size_t active_slot = 0;  // its index in active_ while it holds groups
  };
  void promote();  // moves groups from the read queue or a draining write buffer into bank queues
  void move_to_banks(std::deque<HbmGroup>& from, std::uint64_t& from_bursts, std::uint64_t limit_bursts);

  std::uint32_t bank_queue_depth_;
  std::deque<HbmGroup> reads_;
  std::deque<HbmGroup> writes_;
  std::uint64_t queued_read_bursts_ = 0;
  std::uint64_t buffered_write_bursts_ = 0;
  std::uint64_t draining_bursts_ = 0;  // writes still to move in the current drain
  std::vector<BankQueue> bank_queues_;
  std::vector<std::uint32_t> active_;  // banks whose queues hold groups
  std::size_t in_bank_queues_ = 0;
  std::uint64_t next_order_ = 0;
  std::vector<Bank> banks_;
  std::vector<Picos> bank_group_col_ready_;  // tCCD_L
  std::vector<Picos> bank_group_last_act_;   // tRRD_L
  Picos last_act_ = 0;
  bool any_act_ = false;
  Picos faw_[4] = {0, 0, 0, 0};  // the last four ACTs, oldest at faw_next_
  unsigned faw_next_ = 0;
  unsigned acts_ = 0;
  Picos decision_ready_ = 0;  // when the scheduler may commit its next group's columns
  Picos bus_free_ = 0;  // when the fluid data bus has drained
  bool any_data_ = false;
  bool last_write_ = false;  // direction of the data last queued on the bus
  std::uint32_t last_write_bank_group_ = 0;
  Picos next_refresh_;
  HbmChannelStats stats_;
};

struct HbmStats {
  HbmChannelStats total;  // summed over channels
  Picos busiest_channel_ps = 0;
  Picos idlest_channel_ps = 0;  // data-bus time of the least used channel
  double row_hit_rate() const {
    const auto cols = total.read_bursts + total.write_bursts;
    return cols ? static_cast<double>(total.row_hits) / static_cast<double>(cols) : 0.0;
  }
};

// A chip's HBM: the address map and every channel. Requests are split into burst groups at
// submission; their completions come back one per group, carrying the request's tag.
class HbmMemory {
 public:
  static constexpr std::uint64_t kUntracked = ~std::uint64_t{0};

  explicit HbmMemory(const HbmConfig& config);

  struct Routed {
    std::uint32_t channel;
    HbmGroup group;
  };
  // The burst groups of a request, in address order (arrival times left for enqueue to set).
  void split(std::uint64_t tag, std::uint64_t address, std::uint64_t bytes, bool write, std::vector<Routed>& out) const;
  bool accepts(const Routed& r) const { return channels_[r.channel].accepts(r.group.write); }
  // Returns when the request's issuer learns the group is done, if that is known now: a posted
  // write is acknowledged as its channel's queue takes it. Otherwise kNever: wait for run_until.
  Picos enqueue(const Routed& r, Picos arrival_ps);
  Picos next_decision_ps();
  void run_until(Picos until_ps, std::vector<HbmGroupDone>& done);
  // Channels whose queues gave up groups since the last call (room for waiting requests).
  std::vector<std::uint32_t> take_freed_channels();
  HbmStats stats() const;

 private:
  void reschedule(std::uint32_t channel);

  HbmAddressMap map_;
  HbmTimingPs timing_;
  bool posted_writes_;
  std::uint64_t max_group_bytes_;
  std::vector<HbmChannel> channels_;
  std::vector<Picos> scheduled_;  // each channel's entry in decisions_
  std::vector<std::uint32_t> freed_;
  using Entry = std::pair<Picos, std::uint32_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> decisions_;  // may hold stale entries
};

}  // namespace tpusim

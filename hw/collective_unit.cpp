#include "hw/collective_unit.hpp"

#include <algorithm>
#include <optional>

#include <fmt/format.h>


namespace tpusim {

CollectiveUnit::CollectiveUnit(sc_core::sc_module_name name, std::uint32_t chip, const HwConfig& hw,
                               const Torus& torus, WakeQueue& wakes, std::uint32_t chip_slot_in_host, EventSink* sink)
    : sc_module(name), socket("socket"), ici_socket("ici_socket"), hbm_socket("hbm_socket"),
      vpu_socket("vpu_socket"), arrivals("arrivals"), hw_(hw), torus_(torus), wakes_(wakes), sink_(sink), chip_(chip), chip_slot_in_host_(chip_slot_in_host) {
  socket.register_nb_transport_fw(this, &CollectiveUnit::from_core);
  arrivals.bind(*this);
  part_count_ = std::max<std::uint32_t>(1, torus.axes());  // one part per axis at most
  add_lane();  // lane 0, so that a chip's first collective tracks are there from the start
  if (hw.slices > 1) {
    UnitInfo info;
    info.path = fmt::format("chip{}.dcn", chip_);
    info.kind = UnitKind::Dcn;
    info.chip = chip_;
    info.label = "dcn";
    dcn_ = Reporter(sink_, info);
  }
  SC_METHOD(book_in_order);
  sensitive << work_posted_;
  dont_initialize();
}

void CollectiveUnit::post(const RingWork& work) {
  posted_.push_back(work);
  work_posted_.notify(sc_core::SC_ZERO_TIME);
}

void CollectiveUnit::book_in_order() {
  // By what the work is for, never by who asked first; within a ring step, the pieces that
  // arrived in order of arrival, whichever direction they came from, so that a reflection of the
  // ring (which swaps its directions) books the same work the same way. A sender's pieces of one
  // step keep their order (stable sort: a link delivers them in order).
  auto rank = [](const RingWork& w) {
    const bool arrival = w.kind == WorkKind::Arrival;
    return std::make_tuple(w.key.instance, w.key.part, w.key.pass, w.key.step, w.key.dir == kOwnShard,
                           arrival ? w.head : 0, arrival ? w.at : 0, arrival ? w.bytes : 0, w.kind);
  };
  std::stable_sort(posted_.begin(), posted_.end(), [&](const RingWork& a, const RingWork& b) { return rank(a) < rank(b); });
  std::uint32_t completed_parts = 0;  // bit p: a step of part p is complete
  // Pieces that arrive at the same moment from both directions share the vector unit: each is
  // taken in when both are (booked one after the other, the later end is both's).
  std::vector<std::pair<StepKey, std::size_t>> together;
  Picos together_ps = 0;
  for (std::size_t i = 0; i < posted_.size(); ++i) {
    const RingWork& w = posted_[i];
    switch (w.kind) {
      case WorkKind::OwnShardRead:
        *w.ready_ps = hbm_access(tlm::TLM_READ_COMMAND, w.bytes, w.label, w.step, w.at);
        completed_parts |= 1u << (w.key.part % kMaxParts);
        break;
      case WorkKind::WriteBack:
        hbm_access(tlm::TLM_WRITE_COMMAND, w.bytes, w.label, w.step, w.at);
        break;
      case WorkKind::Arrival: {
        const Picos taken = take_in(w, w.head, w.at, completed_parts);
        const bool joins_next = i + 1 < posted_.size() && rank(posted_[i + 1]) == rank(w);
        if (!joins_next && together.empty()) break;  // alone at its instant: the common case
        together.emplace_back(w.key, inbox(w.key).piece_ready_ps.size() - 1);
        together_ps = std::max(together_ps, taken);
        if (joins_next) break;
        for (const auto& [key, piece] : together) inbox(key).piece_ready_ps[piece] = together_ps;
        together.clear();
        together_ps = 0;
        break;
      }
      case WorkKind::DcnSend: {
        // The peer this piece goes to sends its own piece of the step to this chip at the same
        // moment, and it arrives when this one arrives there.
        // Cut-through, as on the ICI: the piece goes out as its bytes come in (from `head`), and
        // cannot be out before its last byte is there (`at`).
        const Picos start = std::max({w.head, dcn_free_ps_, now_ps()});
        dcn_free_ps_ = std::max(start + transfer_ps(w.bytes, hw_.dcn.bw_gbps_per_chip), w.at);
        counts_.dcn_sent_bytes += w.bytes;
        UnitRequest job;
        job.label = w.label;
        job.step = w.step;
        dcn_.busy({start, dcn_free_ps_}, job, w.bytes);
        const Picos latency = ns_to_ps(hw_.dcn.latency_us * 1000);
        take_in(w, start + latency, dcn_free_ps_ + latency, completed_parts);
        break;
      }
    }
  }
  posted_.clear();
  // The parts waiting for a step of their index to be complete go on in the next delta cycle.
  for (PartRun* run : running_parts_)
    if (completed_parts >> (run->part % kMaxParts) & 1u) wakes_.call_at(now_ps(), run->task);
}

Picos CollectiveUnit::take_in(const RingWork& w, Picos head, Picos tail, std::uint32_t& completed_parts) {
  // A piece is added as its bytes come in, so it is done when the last byte is there or when the
  // vector unit gets through it, whichever is later.
  Picos taken = tail;
  if (w.reduce) taken = std::max(taken, vpu_add(ceil_div<std::uint64_t>(w.bytes, w.element_bytes), head, w.label, w.step));
  else hbm_access(tlm::TLM_WRITE_COMMAND, w.bytes, w.label, w.step, tail);  // a gathered piece lands in HBM
  Inbox& box = inbox(w.key);
  box.head_ps = std::min(box.head_ps, head);
  box.piece_ready_ps.push_back(taken);
  if (box.piece_ready_ps.size() == w.pieces) completed_parts |= 1u << (w.key.part % kMaxParts);
  return taken;
}

bool CollectiveUnit::take_step(const StepKey& key, std::uint64_t pieces, Inbox& into) {
  const auto it = std::find_if(inbox_.begin(), inbox_.end(), [&key](const Inbox& b) { return b.key == key; });
  if (it == inbox_.end() || it->piece_ready_ps.size() != pieces) return false;
  into = std::move(*it);
  *it = std::move(inbox_.back());  // the order of the entries does not matter
  inbox_.pop_back();
  return true;
}

void CollectiveUnit::add_lane() {
  const auto lane = static_cast<std::uint32_t>(lanes_.size());
  Lane fresh;
  for (std::uint32_t part = 0; part < part_count_; ++part) {
    UnitInfo info;
    const std::string name = lane == 0 ? fmt::format("part{}", part) : fmt::format("lane{}.part{}", lane, part);
    info.path = fmt::format("chip{}.collective.{}", chip_, name);
    info.kind = UnitKind::Collective;
    info.chip = chip_;
    info.index = lane * kMaxParts + part;
    info.label = "collective." + name;
    fresh.parts[part] = Reporter(sink_, info);
  }
  lanes_.push_back(fresh);
}

std::uint32_t CollectiveUnit::take_lane(std::uint64_t instance) {
  std::uint32_t lane = 0;
  while (lane < lanes_.size() && lanes_[lane].busy) ++lane;
  if (lane == lanes_.size()) add_lane();
  lanes_[lane].busy = true;
  lanes_[lane].instance = instance;
  return lane;
}

void CollectiveUnit::end_of_elaboration() {
  router_ = ici_socket.operator->();
  hbm_ = hbm_socket.operator->();
  vpu_ = vpu_socket.operator->();
}

CollectiveUnit::Instance& CollectiveUnit::new_instance() {
  for (auto& in : instances_)
    if (!in->in_use) return *in;
  instances_.push_back(std::make_unique<Instance>());
  Instance& in = *instances_.back();
  in.task.rank = wake_rank(0);  // the chip-level part of a collective, whichever core came last
  in.task.run = [this, &in] {
    if (in.in_use) advance_instance(in);
  };
  return in;
}

CollectiveUnit::PartRun& CollectiveUnit::new_part_run() {
  for (auto& run : part_runs_)
    if (run->instance == nullptr) return *run;
  part_runs_.push_back(std::make_unique<PartRun>());
  PartRun& run = *part_runs_.back();
  run.task.run = [this, &run] {
    if (run.instance != nullptr) advance_part(run);
  };
  return run;
}

tlm::tlm_sync_enum CollectiveUnit::from_core(int core, tlm::tlm_generic_payload& payload, tlm::tlm_phase& phase,
                                             sc_core::sc_time& delay) {
  if (phase != tlm::BEGIN_REQ || delay != sc_core::SC_ZERO_TIME)
    SC_REPORT_FATAL("tpusim", "the collective unit takes a collective as BEGIN_REQ, now");
  UnitRequest& job = job_of(payload);
  Instance*& slot = joining_[job.instance];
  if (slot == nullptr) {
    slot = &new_instance();
    slot->in_use = true;
    slot->what = Pending{job.instance, job.collective, job.label, job.step};
    slot->cores.clear();
    slot->phase = 0;
    slot->armed_ps = 0;
  }
  Instance& in = *slot;
  in.cores.emplace_back(core, &payload);
  // The last core to arrive starts the chip's part.
  if (in.cores.size() == hw_.chip.cores) advance_instance(in);
  return tlm::TLM_ACCEPTED;
}

namespace {
// Where an instance is (Instance::phase).
enum InstancePhase : std::uint32_t { kCombineRead, kCombineAdd, kCombineWrite, kPlan, kHandshake, kParts, kAnswer };
}  // namespace

void CollectiveUnit::advance_instance(Instance& in) {
  const CollectiveSpec& spec = *in.what.spec;
  const Context ctx = context(in);
  for (;;) {
    switch (in.phase) {
      case kCombineRead:
        in.phase = kPlan;
        if (hw_.chip.cores > 1 && !spec.cores_combined &&
            (spec.kind == CollectiveKind::AllReduce || spec.kind == CollectiveKind::ReduceScatter)) {
          // The cores' contributions are summed through HBM before the chips exchange anything.
          in.resume_ps = hbm_access(tlm::TLM_READ_COMMAND, spec.bytes * hw_.chip.cores, ctx.label, ctx.step);
          in.phase = kCombineAdd;
        }
        break;
      case kCombineAdd: {
        if (!wakes_.reached(in.resume_ps, in.task, in.armed_ps)) return;
        const std::uint64_t elements = ceil_div<std::uint64_t>(spec.bytes, dtype_bytes(spec.dtype));
        in.resume_ps = vpu_add(elements * (hw_.chip.cores - 1), now_ps(), ctx.label, ctx.step);
        in.phase = kCombineWrite;
        break;
      }
      case kCombineWrite:
        if (!wakes_.reached(in.resume_ps, in.task, in.armed_ps)) return;
        in.resume_ps = hbm_access(tlm::TLM_WRITE_COMMAND, spec.bytes, ctx.label, ctx.step);
        in.phase = kPlan;
        break;
      case kPlan:
        if (!wakes_.reached(in.resume_ps, in.task, in.armed_ps)) return;
        in.phase = kAnswer;
        if (hw_.has_fault(FaultKind::SkipCollective, chip_)) break;
        in.schedule = plan_collective(torus_, chip_, spec);
        in.lane = take_lane(in.what.instance);
        // The start is the peers' handshake: a chip alone in its group (an empty schedule) has none.
        in.resume_ps = now_ps() + (in.schedule.parts.empty() ? 0 : ns_to_ps(hw_.ici.collective_start_ns));
        in.phase = kHandshake;
        break;
      case kHandshake:
        if (!wakes_.reached(in.resume_ps, in.task, in.armed_ps)) return;
        in.phase = kParts;
        in.parts_left = static_cast<std::uint32_t>(in.schedule.parts.size());
        for (std::uint32_t part = 0; part < in.schedule.parts.size(); ++part) {
          PartRun& run = new_part_run();
          run.instance = &in;
          run.part = part;
          run.task.rank = wake_rank(1 + in.lane * kMaxParts + part);
          run.start_ps = now_ps();
          run.pass = 0;
          run.s = PassState{};
          running_parts_.push_back(&run);
        }
        // Each part goes as far as it can now, in order; they share nothing but the chip's HBM and
        // vector unit, which book in a canonical order (book_in_order).
        for (PartRun* run : std::vector<PartRun*>(running_parts_))
          if (run->instance == &in) advance_part(*run);
        break;
      case kParts:
        if (in.parts_left > 0) return;
        lanes_[in.lane].busy = false;
        in.phase = kAnswer;
        break;
      case kAnswer:
        // The result is complete once the last piece has arrived and been added. Its write-back to
        // HBM goes on in the background: it still occupies the channels, so whatever reads it next
        // queues behind it there.
        ++counts_.completed;
        joining_.erase(in.what.instance);
        in.in_use = false;
        for (const auto& [core, payload] : in.cores) {
          payload->set_response_status(tlm::TLM_OK_RESPONSE);
          tlm::tlm_phase phase = tlm::BEGIN_RESP;
          sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
          socket[core]->nb_transport_bw(*payload, phase, delay);
        }
        return;
    }
  }
}

void CollectiveUnit::advance_part(PartRun& run) {
  Instance& in = *run.instance;
  const Context ctx = context(in);
  const auto& passes = in.schedule.parts[run.part].passes;
  while (run.pass < passes.size()) {
    const RingPass& pass = passes[run.pass];
    if (!(pass.over_dcn() ? continue_dcn_pass(run, ctx, pass) : continue_ring_pass(run, ctx, pass))) return;
    ++run.pass;
    run.s = PassState{};
  }
  lanes_[in.lane].parts[run.part].busy({run.start_ps, now_ps()}, ctx.label, ctx.step);
  running_parts_.erase(std::find(running_parts_.begin(), running_parts_.end(), &run));
  run.instance = nullptr;
  // The instance goes on once its last part is over, in the next delta cycle (as a thread
  // waiting for its parts' processes to end would).
  if (--in.parts_left == 0) wakes_.call_at(now_ps(), in.task);
}

namespace {
// Where a ring pass is (PartRun::phase).
enum PassPhase : std::uint32_t { kStepStart, kSend, kSendPieces, kReceive, kTake, kOwnShardReady, kPassEnd, kPassDone };
}  // namespace

std::optional<bool> CollectiveUnit::end_step_or_pass(PartRun& run, const Context& ctx, const RingPass& pass) {
  PassState& st = run.s;
  switch (st.phase) {
    case kOwnShardReady:
      if (st.own_ready == kPending) return false;
      st.own_before = st.own_ready;
      st.done = std::max(st.done, st.own_ready);
      ++st.step;
      st.phase = kStepStart;
      return std::nullopt;
    case kPassEnd:
      // The pass is over here once what came last is in; a reduce-scatter's result, this chip's
      // shard (both rings' halves of it), goes back to HBM.
      if (pass.reduce)
        post({StepKey{ctx.instance, run.part, run.pass, kOwnShard, pass.steps}, WorkKind::WriteBack, st.done, 0,
              pass.result_bytes(), true, st.element_bytes, 1, ctx.label, ctx.step, nullptr});
      st.phase = kPassDone;
      return std::nullopt;
    default:  // kPassDone
      return wakes_.reached(st.done, run.task, run.armed_ps);
  }
}

bool CollectiveUnit::continue_ring_pass(PartRun& run, const Context& ctx, const RingPass& pass) {
  PassState& st = run.s;
  if (!st.set_up) {
    st.set_up = true;
    const auto p = static_cast<std::uint32_t>(pass.ring.size());
    st.neighbour[0] = pass.ring[(pass.position + 1) % p];
    st.neighbour[1] = pass.ring[(pass.position + p - 1) % p];
    st.directions = pass.directions();
    st.split = ring_pieces(pass, ctx.spec.chunk_bytes);
    st.element_bytes = dtype_bytes(ctx.spec.dtype);
    const auto hops = [&](std::uint32_t to) { return static_cast<std::uint32_t>(torus_.route(chip_, to).size()); };
    st.hops_to[0] = hops(st.neighbour[0]);
    st.hops_to[1] = st.directions == 2 ? hops(st.neighbour[1]) : 0;
    st.done = now_ps();
  }
  const std::uint64_t pieces = st.split.count;
  // A direction's data is there from the first byte of what the step before brought, or now.
  const auto from = [&](std::uint32_t dir) {
    return st.forwards[dir] ? std::max(st.before[dir].head_ps, now_ps()) : now_ps();
  };
  for (;;) {
    switch (st.phase) {
      case kStepStart:
        if (st.step == pass.steps) {
          st.phase = kPassEnd;
          break;
        }
        // Sends in the order their data starts to arrive (the directions can differ on a line).
        st.order[0] = 0;
        st.order[1] = 1;
        if (st.directions == 2 && from(1) < from(0)) std::swap(st.order[0], st.order[1]);
        st.next = 0;
        st.phase = kSend;
        break;
      case kSend: {
        if (st.next == st.directions) {
          st.phase = kReceive;
          break;
        }
        const std::uint32_t dir = st.order[st.next];
        if (!ring_sends(pass, dir, st.step)) {
          ++st.next;
          break;
        }
        st.resume_ps = from(dir);
        st.phase = kSendPieces;
        break;
      }
      case kSendPieces: {
        if (!wakes_.reached(st.resume_ps, run.task, run.armed_ps)) return false;
        const std::uint32_t dir = st.order[st.next];
        const RingDelivery delivery{ctx.instance, run.part, run.pass, dir, st.step, static_cast<std::uint32_t>(pieces),
                                    pass.reduce, st.element_bytes};
        for (std::uint64_t j = 0; j < pieces; ++j) {
          const Picos available =
              st.forwards[dir] ? std::max(st.before[dir].piece_ready_ps[j], st.own_before) : now_ps();
          send(st.neighbour[dir], st.hops_to[dir], st.split.bytes(j), available, delivery, ctx.label, ctx.step);
        }
        ++st.next;
        st.phase = kSend;
        break;
      }
      case kReceive: {
        // This chip's own shard of what arrives streams from HBM while the links are busy.
        std::uint32_t receiving = 0;
        for (std::uint32_t dir = 0; dir < st.directions; ++dir) receiving += ring_receives(pass, dir, st.step) ? 1 : 0;
        st.own_ready = now_ps();
        if (pass.reduce && receiving > 0) {
          st.own_ready = kPending;
          post({StepKey{ctx.instance, run.part, run.pass, kOwnShard, st.step}, WorkKind::OwnShardRead, now_ps(), 0,
                pass.shard_bytes * receiving, true, st.element_bytes, 1, ctx.label, ctx.step, &st.own_ready});
        }
        st.next = 0;
        st.phase = kTake;
        break;
      }
      case kTake: {
        // The neighbours' pieces are booked as they are sent; wait until all of this step's are.
        if (st.next == st.directions) {
          st.phase = kOwnShardReady;
          break;
        }
        const std::uint32_t dir = st.next;
        st.forwards[dir] = ring_receives(pass, dir, st.step);
        if (st.forwards[dir]) {
          if (!take_step(StepKey{ctx.instance, run.part, run.pass, dir, st.step}, pieces, st.before[dir])) return false;
          st.done = std::max(st.done, st.before[dir].piece_ready_ps.back());
        }
        ++st.next;
        break;
      }
      case kOwnShardReady:
      case kPassEnd:
      case kPassDone:
        if (const std::optional<bool> over = end_step_or_pass(run, ctx, pass)) return *over;
        break;
    }
  }
}

// The peers over the DCN are this chip's mirror images in the other slices, which are not
// simulated: by symmetry each does what this chip does when it does it, so the piece this chip
// receives in a step arrives as the one it sends arrives at its peer (DcnSend books both).
bool CollectiveUnit::continue_dcn_pass(PartRun& run, const Context& ctx, const RingPass& pass) {
  PassState& st = run.s;
  if (!st.set_up) {
    st.set_up = true;
    st.split = ring_pieces(pass, ctx.spec.chunk_bytes);
    st.element_bytes = dtype_bytes(ctx.spec.dtype);
    st.done = now_ps();
  }
  const std::uint64_t pieces = st.split.count;
  Inbox& before = st.before[0];  // what the step before brought, which this step forwards
  for (;;) {
    switch (st.phase) {
      case kStepStart:
        if (st.step == pass.steps) {
          st.phase = kPassEnd;
          break;
        }
        st.resume_ps = st.step > 0 ? std::max(before.head_ps, now_ps()) : now_ps();
        st.phase = kSendPieces;
        break;
      case kSendPieces: {
        if (!wakes_.reached(st.resume_ps, run.task, run.armed_ps)) return false;
        const StepKey key{ctx.instance, run.part, run.pass, 0, st.step};
        for (std::uint64_t j = 0; j < pieces; ++j) {
          const Picos available = st.step > 0 ? std::max(before.piece_ready_ps[j], st.own_before) : now_ps();
          post({key, WorkKind::DcnSend, available, now_ps(), st.split.bytes(j), pass.reduce, st.element_bytes,
                static_cast<std::uint32_t>(pieces), ctx.label, ctx.step, nullptr});
        }
        st.own_ready = now_ps();
        if (pass.reduce) {
          st.own_ready = kPending;
          post({StepKey{ctx.instance, run.part, run.pass, kOwnShard, st.step}, WorkKind::OwnShardRead, now_ps(), 0,
                pass.shard_bytes, true, st.element_bytes, 1, ctx.label, ctx.step, &st.own_ready});
        }
        st.phase = kTake;
        break;
      }
      case kTake:
        if (!take_step(StepKey{ctx.instance, run.part, run.pass, 0, st.step}, pieces, before)) return false;
        st.done = std::max(st.done, before.piece_ready_ps.back());
        st.phase = kOwnShardReady;
        break;
      case kOwnShardReady:
      case kPassEnd:
      case kPassDone:
        if (const std::optional<bool> over = end_step_or_pass(run, ctx, pass)) return *over;
        break;
      default:
        sc_assert(false && "a DCN pass has no such phase");
        return false;
    }
  }
}

void CollectiveUnit::b_transport(tlm::tlm_generic_payload& payload, sc_core::sc_time&) {
  const UnitRequest& job = job_of(payload);
  const RingDelivery& d = *job.delivery;
  const Picos at = job.tail_ps;
  counts_.arrived_bytes += job.bytes;
  post({StepKey{d.instance, d.part, d.pass, d.dir, d.step}, WorkKind::Arrival, at, job.head_ps, job.bytes, d.reduce,
        d.element_bytes, d.pieces, job.label, job.step, nullptr});
  // On the lane of the instance; a piece may arrive before this chip has joined it: lane 0.
  const Lane* lane = &lanes_[0];
  for (const Lane& l : lanes_)
    if (l.busy && l.instance == d.instance) lane = &l;
  lane->parts[d.part % part_count_].flow(job.first_link_unit, job.first_link_start_ps, at, job.label);
}

CollectiveUnit::Inbox& CollectiveUnit::inbox(const StepKey& key) {
  for (Inbox& b : inbox_)
    if (b.key == key) return b;
  inbox_.emplace_back();
  inbox_.back().key = key;
  return inbox_.back();
}

Picos CollectiveUnit::hbm_access(tlm::tlm_command cmd, std::uint64_t bytes, const std::string* label,
                                 std::uint32_t step, Picos at) {
  if (bytes == 0) return std::max(at, now_ps());
  counts_.hbm_bytes += bytes;
  // The buffers are every core's, so where each core has its own HBM the access is shared out
  // between them, each share at the top of that core's slice (the cores' data starts at the bottom).
  const std::uint32_t shares = hw_.chip.hbm_per_core ? hw_.chip.cores : 1;
  const std::uint64_t slice = hw_.hbm.capacity_bytes / shares;
  const std::uint64_t region = slice / 8;
  const std::uint64_t offset = next_address_ % region;
  next_address_ += round_up<std::uint64_t>(bytes, 4096);
  Picos done = std::max(at, now_ps());
  for (std::uint32_t s = 0; s < shares; ++s) {
    const std::uint64_t share = bytes / shares + (s + 1 == shares ? bytes % shares : 0);
    if (share == 0) continue;
    Request& r = request_.reset();
    r.set_access(cmd, s * slice + slice - region + offset, share);
    r.job().bytes = share;
    r.job().label = label;
    r.job().step = step;
    sc_core::sc_time delay = at > now_ps() ? ps_time(at - now_ps()) : sc_core::SC_ZERO_TIME;
    hbm_->b_transport(r.payload(), delay);
    done = std::max<Picos>(done, now_ps() + delay.value());
  }
  return done;
}

Picos CollectiveUnit::vpu_add(std::uint64_t elements, Picos at, const std::string* label, std::uint32_t step) {
  Request& r = request_.reset();
  r.job().elements = elements;
  r.job().ops_per_element = 1;
  r.job().flops = static_cast<double>(elements);
  r.job().label = label;
  r.job().step = step;
  sc_core::sc_time delay = at > now_ps() ? ps_time(at - now_ps()) : sc_core::SC_ZERO_TIME;
  vpu_->b_transport(r.payload(), delay);
  return r.job().served.end;
}

void CollectiveUnit::send(std::uint32_t to_chip, std::uint32_t hops, std::uint64_t bytes, Picos available_ps,
                          const RingDelivery& delivery, const std::string* label, std::uint32_t step) {
  counts_.sent_bytes += bytes;
  counts_.sent_link_bytes += bytes * hops;
  Request& r = request_.reset();
  r.set_access(tlm::TLM_WRITE_COMMAND, 0, bytes);
  r.job().bytes = bytes;
  r.job().dest_chip = to_chip;
  r.job().delivery = &delivery;
  r.job().head_ps = now_ps();
  r.job().tail_ps = std::max(available_ps, now_ps());
  r.job().label = label;
  r.job().step = step;
  if (dispatch_ != nullptr) {
    dispatch_->post(chip_, *router_, r.job());
    return;
  }
  sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
  router_->b_transport(r.payload(), delay);
}

std::vector<CollectiveUnit::Pending> CollectiveUnit::pending() const {
  std::vector<Pending> out;
  for (const auto& entry : joining_) out.push_back(entry.second->what);
  return out;
}

}  // namespace tpusim

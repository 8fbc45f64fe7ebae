#include "hw/collective_unit.hpp"

#include <algorithm>

#include <fmt/format.h>


namespace tpusim {

CollectiveUnit::CollectiveUnit(sc_core::sc_module_name name, std::uint32_t chip, const HwConfig& hw,
                               const Torus& torus, WakeQueue& wakes, std::uint32_t chip_slot_in_host, EventSink* sink)
    : sc_module(name), socket("socket"), ici_socket("ici_socket"), hbm_socket("hbm_socket"),
      vpu_socket("vpu_socket"), arrivals("arrivals"), hw_(hw), torus_(torus), wakes_(wakes), sink_(sink), chip_(chip), chip_slot_in_host_(chip_slot_in_host) {
  socket.register_b_transport(this, &CollectiveUnit::from_core);
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
  // By what the work is for, never by who asked first; a sender's pieces of one step keep their
  // order (stable sort).
  auto rank = [](const RingWork& w) {
    return std::make_tuple(w.key.instance, w.key.part, w.key.pass, w.key.step, w.key.dir, w.kind);
  };
  std::stable_sort(posted_.begin(), posted_.end(), [&](const RingWork& a, const RingWork& b) { return rank(a) < rank(b); });
  std::uint32_t completed_parts = 0;  // bit p: a step of part p is complete
  for (const RingWork& w : posted_) {
    switch (w.kind) {
      case WorkKind::OwnShardRead:
        *w.ready_ps = hbm_access(tlm::TLM_READ_COMMAND, w.bytes, w.label, w.step, w.at);
        completed_parts |= 1u << (w.key.part % kMaxParts);
        break;
      case WorkKind::WriteBack:
        hbm_access(tlm::TLM_WRITE_COMMAND, w.bytes, w.label, w.step, w.at);
        break;
      case WorkKind::Arrival:
        take_in(w, w.head, w.at, completed_parts);
        break;
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
  for (std::uint32_t part = 0; part < kMaxParts; ++part)
    if (completed_parts >> part & 1u) step_arrived_[part].notify(sc_core::SC_ZERO_TIME);
}

void CollectiveUnit::take_in(const RingWork& w, Picos head, Picos tail, std::uint32_t& completed_parts) {
  // A piece is added as its bytes come in, so it is done when the last byte is there or when the
  // vector unit gets through it, whichever is later.
  Picos taken = tail;
  if (w.reduce) taken = std::max(taken, vpu_add(ceil_div<std::uint64_t>(w.bytes, w.element_bytes), head, w.label, w.step));
  else hbm_access(tlm::TLM_WRITE_COMMAND, w.bytes, w.label, w.step, tail);  // a gathered piece lands in HBM
  Inbox& box = inbox(w.key);
  box.head_ps = std::min(box.head_ps, head);
  box.piece_ready_ps.push_back(taken);
  if (box.piece_ready_ps.size() == w.pieces) completed_parts |= 1u << (w.key.part % kMaxParts);
}

CollectiveUnit::Inbox CollectiveUnit::take_step(const StepKey& key, std::uint64_t pieces) {
  for (;;) {
    const auto it = std::find_if(inbox_.begin(), inbox_.end(), [&key](const Inbox& b) { return b.key == key; });
    if (it != inbox_.end() && it->piece_ready_ps.size() == pieces) {
      Inbox taken = std::move(*it);
      *it = std::move(inbox_.back());  // the order of the entries does not matter
      inbox_.pop_back();
      return taken;
    }
    sc_core::wait(step_arrived_[key.part % kMaxParts]);
  }
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

void CollectiveUnit::from_core(int, tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) {
  if (delay != sc_core::SC_ZERO_TIME) wakes_.wait_for(delay);
  delay = sc_core::SC_ZERO_TIME;
  UnitRequest& job = job_of(payload);
  const CollectiveSpec& spec = *job.collective;
  auto& slot = joining_[job.instance];
  if (!slot) slot = std::make_shared<Joining>();
  const std::shared_ptr<Joining> joining = slot;  // keeps the event alive for every waiter
  if (joining->arrived == 0) joining->what = Pending{job.instance, &spec, job.label, job.step};
  if (++joining->arrived < hw_.chip.cores) {
    while (!joining->done) sc_core::wait(joining->released);
  } else {
    // Whichever core arrives last runs the chip's part, which must not take that core's rank.
    const std::uint64_t core_rank = wakes_.set_rank(wake_rank(0));
    const Context ctx{spec, job.instance, job.label, job.step};
    if (hw_.chip.cores > 1 && !spec.cores_combined &&
        (spec.kind == CollectiveKind::AllReduce || spec.kind == CollectiveKind::ReduceScatter)) {
      // The cores' contributions are summed through HBM before the chips exchange anything.
      const std::uint64_t elements = ceil_div<std::uint64_t>(spec.bytes, dtype_bytes(spec.dtype));
      wakes_.wait_until(hbm_access(tlm::TLM_READ_COMMAND, spec.bytes * hw_.chip.cores, ctx.label, ctx.step));
      wakes_.wait_until(vpu_add(elements * (hw_.chip.cores - 1), now_ps(), ctx.label, ctx.step));
      wakes_.wait_until(hbm_access(tlm::TLM_WRITE_COMMAND, spec.bytes, ctx.label, ctx.step));
    }
    if (!hw_.has_fault(FaultKind::SkipCollective, chip_)) run(spec, job.instance, job.label, job.step);
    ++counts_.completed;
    joining->done = true;
    joining->released.notify(sc_core::SC_ZERO_TIME);
    joining_.erase(job.instance);
    wakes_.set_rank(core_rank);
  }
  payload.set_response_status(tlm::TLM_OK_RESPONSE);
}

void CollectiveUnit::run(const CollectiveSpec& spec, std::uint64_t instance, const std::string* label,
                         std::uint32_t step) {
  const CollectiveSchedule schedule = plan_collective(torus_, chip_, spec);
  const Context ctx{spec, instance, label, step};
  const std::uint32_t lane = take_lane(instance);
  // The start is the peers' handshake: a chip alone in its group (an empty schedule) has none.
  if (!schedule.parts.empty()) wakes_.wait_until(now_ps() + ns_to_ps(hw_.ici.collective_start_ns));
  auto run_part = [this, &ctx, &schedule, lane](std::uint32_t part) {
    wakes_.set_rank(wake_rank(1 + lane * kMaxParts + part));
    const Picos start = now_ps();
    const auto& passes = schedule.parts[part].passes;
    for (std::uint32_t i = 0; i < passes.size(); ++i) {
      if (passes[i].over_dcn()) run_dcn_pass(ctx, passes[i], part, i);
      else run_pass(ctx, passes[i], part, i);
    }
    lanes_[lane].parts[part].busy({start, now_ps()}, ctx.label, ctx.step);
  };
  if (schedule.parts.size() == 1) {
    run_part(0);
  } else if (schedule.parts.size() > 1) {
    std::vector<sc_core::sc_process_handle> parts;
    for (std::uint32_t p = 0; p < schedule.parts.size(); ++p)
      parts.push_back(sc_core::sc_spawn([&run_part, p] { run_part(p); }));
    for (auto& h : parts)
      if (!h.terminated()) sc_core::wait(h.terminated_event());
  }
  lanes_[lane].busy = false;
  // The result is complete once the last piece has arrived and been added. Its write-back to HBM
  // goes on in the background: it still occupies the channels, so whatever reads it next queues
  // behind it there.
}

void CollectiveUnit::run_pass(const Context& ctx, const RingPass& pass, std::uint32_t part, std::uint32_t index) {
  const auto p = static_cast<std::uint32_t>(pass.ring.size());
  const std::uint32_t neighbour[2] = {pass.ring[(pass.position + 1) % p], pass.ring[(pass.position + p - 1) % p]};
  const std::uint32_t directions = pass.directions();
  const RingPieces split = ring_pieces(pass, ctx.spec.chunk_bytes);
  const std::uint64_t pieces = split.count;
  const std::uint32_t elem_bytes = dtype_bytes(ctx.spec.dtype);
  const auto hops = [&](std::uint32_t to) { return static_cast<std::uint32_t>(torus_.route(chip_, to).size()); };
  const std::uint32_t hops_to[2] = {hops(neighbour[0]), directions == 2 ? hops(neighbour[1]) : 0};

  // What the step before brought in each direction, which this step forwards (with this chip's
  // own shard added, in a reduce-scatter) as it arrives; a direction with nothing from the step
  // before sends this chip's own data, there now.
  Inbox before[2];
  bool forwards[2] = {false, false};
  Picos own_before = 0;  // the own shard added in the step before, read from HBM by then
  Picos done = now_ps();
  for (std::uint32_t s = 0; s < pass.steps; ++s) {
    // Sends in the order their data starts to arrive (the directions can differ on a line).
    std::uint32_t order[2] = {0, 1};
    const auto from = [&](std::uint32_t dir) { return forwards[dir] ? std::max(before[dir].head_ps, now_ps()) : now_ps(); };
    if (directions == 2 && from(1) < from(0)) std::swap(order[0], order[1]);
    for (std::uint32_t i = 0; i < directions; ++i) {
      const std::uint32_t dir = order[i];
      if (!ring_sends(pass, dir, s)) continue;
      wakes_.wait_until(from(dir));
      const RingDelivery delivery{ctx.instance, part, index, dir, s, static_cast<std::uint32_t>(pieces), pass.reduce, elem_bytes};
      for (std::uint64_t j = 0; j < pieces; ++j) {
        const Picos available = forwards[dir] ? std::max(before[dir].piece_ready_ps[j], own_before) : now_ps();
        send(neighbour[dir], hops_to[dir], split.bytes(j), available, delivery, ctx.label, ctx.step);
      }
    }

    // This chip's own shard of what arrives streams from HBM while the links are busy.
    std::uint32_t receiving = 0;
    for (std::uint32_t dir = 0; dir < directions; ++dir) receiving += ring_receives(pass, dir, s) ? 1 : 0;
    Picos own_ready = now_ps();
    if (pass.reduce && receiving > 0) {
      own_ready = kPending;
      post({StepKey{ctx.instance, part, index, kOwnShard, s}, WorkKind::OwnShardRead, now_ps(), 0, pass.shard_bytes * receiving,
            true, elem_bytes, 1, ctx.label, ctx.step, &own_ready});
    }
    // The neighbours' pieces are booked as they are sent; wait until all of this step's are.
    for (std::uint32_t dir = 0; dir < directions; ++dir) {
      forwards[dir] = ring_receives(pass, dir, s);
      if (!forwards[dir]) continue;
      before[dir] = take_step(StepKey{ctx.instance, part, index, dir, s}, pieces);
      done = std::max(done, before[dir].piece_ready_ps.back());
    }
    while (own_ready == kPending) sc_core::wait(step_arrived_[part % kMaxParts]);
    own_before = own_ready;
    done = std::max(done, own_ready);
  }
  // The pass is over here once what came last is in; a reduce-scatter's result, this chip's
  // shard (both rings' halves of it), goes back to HBM.
  if (pass.reduce)
    post({StepKey{ctx.instance, part, index, kOwnShard, pass.steps}, WorkKind::WriteBack, done, 0, pass.result_bytes(), true,
          elem_bytes, 1, ctx.label, ctx.step, nullptr});
  wakes_.wait_until(done);
}

// The peers over the DCN are this chip's mirror images in the other slices, which are not
// simulated: by symmetry each does what this chip does when it does it, so the piece this chip
// receives in a step arrives as the one it sends arrives at its peer (DcnSend books both).
void CollectiveUnit::run_dcn_pass(const Context& ctx, const RingPass& pass, std::uint32_t part, std::uint32_t index) {
  const RingPieces split = ring_pieces(pass, ctx.spec.chunk_bytes);
  const std::uint64_t pieces = split.count;
  const std::uint32_t elem_bytes = dtype_bytes(ctx.spec.dtype);
  Inbox before;  // what the step before brought, which this step forwards (with the own shard added)
  Picos own_before = 0, done = now_ps();
  for (std::uint32_t s = 0; s < pass.steps; ++s) {
    const StepKey key{ctx.instance, part, index, 0, s};
    if (s > 0) wakes_.wait_until(std::max(before.head_ps, now_ps()));
    for (std::uint64_t j = 0; j < pieces; ++j) {
      const Picos available = s > 0 ? std::max(before.piece_ready_ps[j], own_before) : now_ps();
      post({key, WorkKind::DcnSend, available, now_ps(), split.bytes(j), pass.reduce, elem_bytes,
            static_cast<std::uint32_t>(pieces), ctx.label, ctx.step, nullptr});
    }
    Picos own_ready = now_ps();
    if (pass.reduce) {
      own_ready = kPending;
      post({StepKey{ctx.instance, part, index, kOwnShard, s}, WorkKind::OwnShardRead, now_ps(), 0, pass.shard_bytes, true,
            elem_bytes, 1, ctx.label, ctx.step, &own_ready});
    }
    before = take_step(key, pieces);
    done = std::max(done, before.piece_ready_ps.back());
    while (own_ready == kPending) sc_core::wait(step_arrived_[part % kMaxParts]);
    own_before = own_ready;
    done = std::max(done, own_ready);
  }
  if (pass.reduce)
    post({StepKey{ctx.instance, part, index, kOwnShard, pass.steps}, WorkKind::WriteBack, done, 0, pass.result_bytes(), true,
          elem_bytes, 1, ctx.label, ctx.step, nullptr});
  wakes_.wait_until(done);
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
  sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
  router_->b_transport(r.payload(), delay);
}

std::vector<CollectiveUnit::Pending> CollectiveUnit::pending() const {
  std::vector<Pending> out;
  for (const auto& entry : joining_) out.push_back(entry.second->what);
  return out;
}

}  // namespace tpusim

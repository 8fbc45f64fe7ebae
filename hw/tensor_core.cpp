#include "hw/tensor_core.hpp"

#include <algorithm>
#include <deque>
#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>

#include "hw/host.hpp"
#include "hw/matmul_tiling.hpp"

namespace tpusim {
namespace {

UnitInfo core_unit(const CoreSite& site, UnitKind kind, std::uint32_t index, const std::string& name,
                   double freq_mhz) {
  UnitInfo info;
  info.path = fmt::format("chip{}.core{}.{}", site.chip, site.core, name);
  info.kind = kind;
  info.chip = site.chip;
  info.core = site.core;
  info.index = site.core * 16 + index;
  info.freq_mhz = freq_mhz;
  info.label = fmt::format("core{}.{}", site.core, name);
  return info;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
Dma::Dma(sc_core::sc_module_name name, const DmaConfig& config, std::uint32_t chip, std::uint32_t core,
         WakeQueue& wakes, bool drops_last_chunk, EventSink* sink)
    : sc_module(name), socket("socket"), hbm_socket("hbm_socket"), config_(config), wakes_(wakes),
      drops_last_chunk_(drops_last_chunk),
      issue_latency_ps_(ns_to_ps(config.issue_latency_ns)), engine_free_ps_(config.engines, 0),
      landed_(config.engines) {
  socket.register_b_transport(this, &Dma::b_transport);
  socket.register_nb_transport_fw(this, &Dma::nb_transport_fw);
  const CoreSite site{chip, core};
  for (std::uint32_t e = 0; e < config.engines; ++e)
    reporters_.emplace_back(sink, core_unit(site, UnitKind::Dma, e, fmt::format("dma{}", e), 0));
}

Dma::Transfer& Dma::new_transfer(tlm::tlm_generic_payload& payload, int initiator, const sc_core::sc_time& delay,
                                  bool blocking) {
  Transfer* free = nullptr;
  for (auto& t : transfers_)
    if (t->state == Transfer::State::Free) {
      free = t.get();
      break;
    }
  if (free == nullptr) {
    transfers_.push_back(std::make_unique<Transfer>());
    free = transfers_.back().get();
    Transfer& t = *free;
    // The task continues whatever the transfer is doing; a stale run (the transfer has moved on,
    // or the slot serves another) finds nothing to do.
    t.task.run = [this, &t] {
      bool booked = false;
      if (t.state == Transfer::State::Waiting && t.start_ps <= now_ps()) booked = try_start(t);
      else if (t.state == Transfer::State::Booking && t.resuming && t.issue <= now_ps()) booked = book(t);
      if (booked) answer(t);
    };
  }
  free->payload = &payload;
  free->initiator = initiator;
  free->blocking = blocking;
  free->start_ps = now_ps() + delay.value();
  return *free;
}

void Dma::b_transport(int initiator, tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) {
  Transfer& t = new_transfer(payload, initiator, delay, /*blocking=*/true);
  if (!begin(t)) {
    while (!t.answered) sc_core::wait(t.answered_event);
  }
  delay = ps_time(t.answer_delay_ps);
  t.state = Transfer::State::Free;
}

tlm::tlm_sync_enum Dma::nb_transport_fw(int initiator, tlm::tlm_generic_payload& payload, tlm::tlm_phase& phase,
                                        sc_core::sc_time& delay) {
  if (phase != tlm::BEGIN_REQ) SC_REPORT_FATAL("tpusim", "the DMA takes requests (BEGIN_REQ) and answers them itself");
  Transfer& t = new_transfer(payload, initiator, delay, /*blocking=*/false);
  if (!begin(t)) return tlm::TLM_ACCEPTED;
  // Booked at once: the transaction is complete, its delay the time until the last chunk lands.
  delay = ps_time(t.answer_delay_ps);
  phase = tlm::BEGIN_RESP;
  t.state = Transfer::State::Free;
  return tlm::TLM_COMPLETED;
}

bool Dma::begin(Transfer& t) {
  t.answered = false;
  t.resuming = false;
  t.retry_ps = 0;
  t.state = Transfer::State::Waiting;
  t.task.rank = wakes_.running_rank();
  waiting_.push_back(&t);
  if (t.start_ps > now_ps()) {
    wakes_.call_at(t.start_ps, t.task);
    return false;
  }
  return try_start(t);
}

bool Dma::try_start(Transfer& t) {
  const std::size_t engine = static_cast<std::size_t>(
      std::min_element(engine_free_ps_.begin(), engine_free_ps_.end()) - engine_free_ps_.begin());
  const Picos free_ps = engine_free_ps_[engine];
  if (free_ps > now_ps()) {
    // Another engine's free time may become known, and come sooner, while this one waits: every
    // waiting transfer tries again when an engine's last chunk is booked.
    // A retry already due by then is enough.
    if (free_ps != kHeld && (t.retry_ps <= now_ps() || free_ps < t.retry_ps)) {
      t.retry_ps = free_ps;
      wakes_.call_at(free_ps, t.task);
    }
    return false;
  }
  waiting_.erase(std::find(waiting_.begin(), waiting_.end(), &t));
  engine_free_ps_[engine] = kHeld;
  UnitRequest& job = job_of(*t.payload);
  asked_bytes_ += job.bytes;
  t.state = Transfer::State::Booking;
  t.engine = engine;
  t.start = now_ps();
  t.drop_last_chunk = drops_last_chunk_ && job.bytes > config_.chunk_bytes;
  t.offset = 0;
  t.ahead = 0;
  t.head = 0;
  landed_[engine].clear();
  t.issue = t.start + issue_latency_ps_;
  t.last_done = t.issue;
  return book(t);
}

bool Dma::book(Transfer& t) {
  // Chunks stream back to back with a bounded number in flight, so the issue latency and the
  // HBM latency are paid once per transfer while other requesters interleave between chunks.
  // Chunk i + max_outstanding_chunks may go once chunk i has landed. Loosely timed: rather than
  // waiting for that moment, a chunk is booked ahead with its issue time as the annotated delay,
  // and the booking only pauses once `lookahead` chunks are booked ahead of the present. A
  // booking thus precedes competitors that would have come in before its issue time by at most
  // that many chunk times: chunks of concurrent transfers still interleave, in coarser runs.
  const std::uint32_t lookahead = config_.max_outstanding_chunks;
  UnitRequest& job = job_of(*t.payload);
  // When each chunk lands, in issue order; [head, end) are in flight. Kept per engine across
  // transfers: a deque here allocated twice per transfer.
  std::vector<Picos>& landed = landed_[t.engine];
  const Picos now = now_ps();
  for (; t.offset < job.bytes; t.offset += config_.chunk_bytes) {
    if (t.resuming) {
      t.resuming = false;
      t.ahead = 0;
    } else {
      if (landed.size() - t.head == config_.max_outstanding_chunks) t.issue = std::max(t.issue, landed[t.head++]);
      if (t.issue > now) {
        if (t.ahead == lookahead) {
          t.resuming = true;
          wakes_.call_at(t.issue, t.task);
          return false;
        }
        ++t.ahead;
      }
    }
    const std::uint64_t length = std::min(config_.chunk_bytes, job.bytes - t.offset);
    if (t.drop_last_chunk && t.offset + length == job.bytes) break;
    // chunk_ is shared with the transfers of the other engines: everything HBM reads is set
    // again for each chunk (a whole reset per chunk cost more than the booking).
    chunk_.set_access(t.payload->get_command(), t.payload->get_address() + t.offset, length);
    chunk_.payload().set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    chunk_.job().label = job.label;
    chunk_.job().step = job.step;
    chunk_.job().run_bytes = job.run_bytes;
    sc_core::sc_time hbm_delay = ps_time(std::max(t.issue, now) - now);
    hbm_socket->b_transport(chunk_.payload(), hbm_delay);
    sc_assert(now_ps() == now && "the DMA's memory must answer without waiting");
    if (chunk_.payload().is_response_ok()) moved_bytes_ += length;
    landed.push_back(now + hbm_delay.value());
    t.last_done = std::max(t.last_done, landed.back());
  }
  // The last chunk is booked: nothing is left to decide, so the transfer is answered now with the
  // time until it lands as its delay, and the engine is free from then on. Waiting for the
  // landing was a fifth of all process switches of a large slice.
  t.last_done = std::max(t.last_done, now);
  engine_free_ps_[t.engine] = t.last_done;
  job.served = {t.start, t.last_done};
  reporters_[t.engine].busy(job.served, job, job.bytes);
  // Those that have come wait for an engine; those still to come try when they do.
  for (Transfer* other : waiting_)
    if (other->start_ps <= now) wakes_.call_at(now, other->task);
  t.payload->set_response_status(tlm::TLM_OK_RESPONSE);
  t.answer_delay_ps = t.last_done - now;
  return true;
}

void Dma::answer(Transfer& t) {
  t.answered = true;
  if (t.blocking) {
    t.answered_event.notify();
    return;
  }
  tlm::tlm_phase phase = tlm::BEGIN_RESP;
  sc_core::sc_time delay = ps_time(t.answer_delay_ps);
  t.state = Transfer::State::Free;
  socket[t.initiator]->nb_transport_bw(*t.payload, phase, delay);
}

// ---------------------------------------------------------------------------------------------
void Vmem::reserve(std::uint64_t bytes, const std::string& op) {
  if (used_bytes_ + bytes > capacity_bytes_)
    throw std::runtime_error(fmt::format(
        "{}: working set of {} bytes does not fit the {} free bytes of vector memory", op, bytes,
        capacity_bytes_ - used_bytes_));
  used_bytes_ += bytes;
  peak_bytes_ = std::max(peak_bytes_, used_bytes_);
  report();
}

// ---------------------------------------------------------------------------------------------
TensorCore::TensorCore(sc_core::sc_module_name name, const HwConfig& hw, CoreSite site,
                       const Program& program, Host& host, EventSink* sink)
    : sc_module(name),
      collective_socket("collective_socket"),
      dma("dma", hw.core.dma, site.chip, site.core, host.wakes, hw.has_fault(FaultKind::DmaDropChunk, site.chip), sink),
      hw_(hw),
      site_(site),
      program_(program),
      host_(host),
      clock_{hw.core_freq_mhz(site.chip)},
      vmem_(hw.core.vmem_bytes),
      mxus_("mxu"),
      vpu_("vpu", hw.core.vpu, clock_, sink, core_unit(site, UnitKind::Vpu, 0, "vpu", hw.core_freq_mhz(site.chip))),
      mxu_sockets_("mxu_socket"),
      vpu_socket_("vpu_socket"),
      dma_socket_("dma_socket") {
  mxus_.init(hw.core.mxu.per_core, [&](const char* nm, std::size_t i) {
    return new Mxu(nm, hw.core.mxu, clock_, sink,
                   core_unit(site, UnitKind::Mxu, static_cast<std::uint32_t>(i), fmt::format("mxu{}", i),
                             hw.core_freq_mhz(site.chip)));
  });
  mxu_sockets_.init(hw.core.mxu.per_core);
  for (std::size_t i = 0; i < mxus_.size(); ++i) mxu_sockets_[i].bind(mxus_[i].socket);
  vpu_socket_.bind(vpu_.socket);
  dma_socket_.bind(dma.socket);
  dma_socket_.register_nb_transport_bw(this, &TensorCore::dma_answered);
  collective_socket.register_nb_transport_bw(this, &TensorCore::collective_answered);

  sink_ = sink;
  steps_reporter_ = Reporter(sink, core_unit(site, UnitKind::Steps, 15, "steps", hw.core_freq_mhz(site.chip)));
  vmem_.report_to(steps_reporter_, fmt::format("core{} VMEM", site.core));
  done_ps_.assign(program.ops.size(), kNotDone);
  sequencer_task_.rank = WakeQueue::rank(host.slot(site.chip), site.core, WakeQueue::kSequencerRole);
  sequencer_task_.run = [this] { advance_sequencer(); };
}

void TensorCore::start_of_simulation() { host_.wakes.call_at(0, sequencer_task_); }

std::string TensorCore::progress() const {
  if (finished_) return "finished";
  const Op& op = program_.ops[waiting_on_];
  return fmt::format("step {}, op {} \"{}\"", step_, op.id, op.name);
}

namespace {

// The length of the union of `spans`.
Picos union_length(std::vector<std::pair<Picos, Picos>> spans) {
  std::sort(spans.begin(), spans.end());
  Picos total = 0, covered_to = 0;
  for (const auto& [start, end] : spans) {
    const Picos from = std::max(start, covered_to);
    if (end > from) total += end - from;
    covered_to = std::max(covered_to, end);
  }
  return total;
}

}  // namespace

TensorCore::Queue& TensorCore::queue(Engine engine, std::uint32_t stream) {
  static const char* const kEngineNames[kEngines] = {"ops.matmul", "ops.vector", "ops.collective", "ops.infeed"};
  static const OpEngine kEngineKinds[kEngines] = {OpEngine::Matmul, OpEngine::Vector, OpEngine::Collective, OpEngine::Infeed};
  const std::uint32_t key = engine * kMaxStreams + stream;
  Queue& q = queues_[key];
  if (q.started) return q;
  // Engines start on first use: most streams of most engines are never used.
  q.started = true;
  q.task.rank = WakeQueue::rank(host_.slot(site_.chip), site_.core, WakeQueue::kEngineRoles + key);
  q.task.run = [this, &q] { advance_engine(q); };
  const std::string name = stream == 0 ? kEngineNames[engine] : fmt::format("{}.{}", kEngineNames[engine], stream);
  UnitInfo info = core_unit(site_, engine == kCollective ? UnitKind::Collective : UnitKind::Sequencer, key, name,
                            hw_.core_freq_mhz(site_.chip));
  info.engine = kEngineKinds[engine];
  info.stream = stream;
  q.reporter = &reporters_.try_emplace(key, sink_, std::move(info)).first->second;
  return q;
}

void TensorCore::advance_sequencer() {
  auto engine_of = [](const Op& op) {
    switch (op.kind) {
      case OpKind::Matmul: return kMatmul;
      case OpKind::Vector: return kVector;
      case OpKind::Collective: return kCollective;
      case OpKind::Infeed:
      case OpKind::HostTransfer: return kInfeed;
    }
    return kVector;
  };
  // The reporter keeps a pointer to each step's name: shared by every core, grown to this
  // program's steps (a deque's elements stay where they are as it grows), whatever the limit
  // the configuration puts on steps.
  static std::deque<std::string> step_names;
  while (step_names.size() < program_.steps) step_names.push_back("step " + std::to_string(step_names.size()));
  while (step_ < program_.steps) {
    switch (step_phase_) {
      case StepPhase::Start:
        step_start_ps_ = now_ps();
        forward_span_ps_.push_back(0);
        launch_ps_ = 0;
        if (program_.launch_ps > 0 && step_ % program_.steps_per_launch == 0)
          launch_ps_ = (step_ / program_.steps_per_launch + 1) * program_.launch_ps;
        step_phase_ = StepPhase::Launch;
        [[fallthrough]];
      case StepPhase::Launch:
        if (launch_ps_ > now_ps()) {
          host_.wakes.call_at(launch_ps_, sequencer_task_);
          return;
        }
        std::fill(done_ps_.begin(), done_ps_.end(), kNotDone);
        next_op_ = 0;
        step_phase_ = StepPhase::Dispatch;
        [[fallthrough]];
      case StepPhase::Dispatch: {
        // Ops issued at one instant start on their engines in the order they became ready (their
        // last dependency's end), the program's order among equals: a list scheduler's choice,
        // as XLA's issues a collective's start as early as its operands allow. What they share
        // (a link, HBM) serves them in that order.
        std::vector<std::pair<Picos, Queue*>> starting;
        for (; next_op_ < program_.ops.size(); ++next_op_) {
          const Op& op = program_.ops[next_op_];
          waiting_on_ = op.id;
          if (!std::all_of(op.deps.begin(), op.deps.end(), [&](std::uint32_t d) { return done_ps_[d] != kNotDone; })) break;
          Queue& q = queue(engine_of(op), std::min(op.stream, kMaxStreams - 1));
          q.ops.push_back(&op);
          Picos ready_ps = step_start_ps_;
          for (std::uint32_t d : op.deps) ready_ps = std::max(ready_ps, done_ps_[d]);
          if (q.op == nullptr && q.ops.size() == 1) starting.emplace_back(ready_ps, &q);
        }
        std::stable_sort(starting.begin(), starting.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
        for (const auto& [ready_ps, q] : starting) advance_engine(*q);
        if (next_op_ < program_.ops.size()) return;
        step_phase_ = StepPhase::End;
        [[fallthrough]];
      }
      case StepPhase::End:
        if (std::find(done_ps_.begin(), done_ps_.end(), kNotDone) != done_ps_.end()) return;
        step_end_ps_.push_back(now_ps());
        pipeline_ps_.push_back(union_length(pipeline_spans_));
        bubble_ps_.push_back(union_length(bubble_spans_));
        pipeline_spans_.clear();
        bubble_spans_.clear();
        steps_reporter_.busy({step_start_ps_, now_ps()}, &step_names[step_], step_);
        step_phase_ = StepPhase::Start;
        if (step_observer_) step_observer_(step_);
        ++step_;
        break;
    }
  }
  finished_ = true;
}

void TensorCore::advance_engine(Queue& q) {
  for (;;) {
    if (q.op == nullptr) {
      if (q.ops.empty()) return;
      q.op = q.ops.front();
      q.ops.pop_front();
      q.start_ps = now_ps();
      q.phase = 0;
      q.armed_ps = 0;
      q.answered = false;
      q.in_overhead = hw_.core.op_overhead_cycles > 0;
      q.resume_ps = now_ps() + (q.in_overhead ? clock_.cycles_to_ps(hw_.core.op_overhead_cycles) : 0);
    }
    if (q.in_overhead) {
      if (!reached(q, q.resume_ps)) return;
      q.in_overhead = false;
    }
    if (!continue_op(q)) return;
    finish_op(q);
  }
}

bool TensorCore::reached(Queue& q, Picos at_ps) { return host_.wakes.reached(at_ps, q.task, q.armed_ps); }

bool TensorCore::continue_op(Queue& q) {
  switch (q.op->kind) {
    case OpKind::Matmul: return continue_matmul_or_vector(q, kMatmul);
    case OpKind::Vector: return continue_matmul_or_vector(q, kVector);
    case OpKind::Collective: return continue_collective(q);
    case OpKind::Infeed: return continue_infeed(q);
    case OpKind::HostTransfer: return continue_host_transfer(q);
  }
  return true;
}

void TensorCore::finish_op(Queue& q) {
  const Op& op = *q.op;
  q.op = nullptr;
  q.reporter->busy({q.start_ps, now_ps()}, &op.name, step_);
  if (op.phase == Phase::Forward) forward_span_ps_.back() = std::max(forward_span_ps_.back(), now_ps() - step_start_ps_);
  if (op.pipeline != PipelineRole::None) pipeline_spans_.emplace_back(q.start_ps, now_ps());
  if (op.pipeline == PipelineRole::Bubble) bubble_spans_.emplace_back(q.start_ps, now_ps());
  done_ps_[op.id] = now_ps();
  host_.wakes.call_at(now_ps(), sequencer_task_);
}

// ---------------------------------------------------------------------------------------------
sc_core::sc_time TensorCore::prepare_dma(Request& r, tlm::tlm_command cmd, std::uint64_t bytes, std::uint64_t run_bytes,
                                         const std::string* label, Picos start_ps) {
  // Each core works in its own slice of the chip's HBM; consecutive tensors follow each other.
  const std::uint64_t region = hw_.hbm.capacity_bytes / hw_.chip.cores;
  r.reset().set_access(cmd, site_.core * region + next_address_ % region, bytes);
  next_address_ += round_up<std::uint64_t>(bytes, 4096);
  r.job().bytes = bytes;
  r.job().run_bytes = run_bytes;
  r.job().label = label;
  r.job().step = step_;
  return ps_time(start_ps > now_ps() ? start_ps - now_ps() : 0);
}

Picos TensorCore::mxu_work(const MatmulPlan& plan, double rows_per_cycle, double flops, const std::string* label,
                           Picos start_ps) {
  const Picos now = now_ps();
  Picos end = std::max(start_ps, now);
  double total_work = 0;
  for (const MxuShare& s : plan.shares) total_work += static_cast<double>(s.rows * s.weight_tiles);
  for (std::size_t u = 0; u < plan.shares.size(); ++u) {
    const MxuShare& share = plan.shares[u];
    Request& r = unit_request_.reset();
    r.job().rows = share.rows;
    r.job().weight_tiles = share.weight_tiles;
    r.job().rows_per_cycle = rows_per_cycle;
    r.job().flops = flops * static_cast<double>(share.rows * share.weight_tiles) / total_work;
    r.job().label = label;
    r.job().step = step_;
    sc_core::sc_time delay = ps_time(start_ps > now ? start_ps - now : 0);
    mxu_sockets_[u]->b_transport(r.payload(), delay);
    end = std::max(end, r.job().served.end);
  }
  return end;
}

Picos TensorCore::vpu_ops(std::uint64_t elements, double ops_per_element, const std::string* label) {
  if (elements == 0 || ops_per_element <= 0) return now_ps();
  Request& r = unit_request_.reset();
  r.job().elements = elements;
  r.job().ops_per_element = ops_per_element;
  r.job().flops = static_cast<double>(elements) * ops_per_element;
  r.job().label = label;
  r.job().step = step_;
  sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
  vpu_socket_->b_transport(r.payload(), delay);
  return r.job().served.end;
}

// Phases of a streamed op (Queue::phase): planned and posted, then the compute stage's own.
namespace {
enum StreamPhase : std::uint32_t { kPlan, kBlockInputs, kPrologue, kAfterProducts, kEpilogue, kVectorBlock, kDrain, kDrained };
}

bool TensorCore::continue_matmul_or_vector(Queue& q, Engine engine) {
  Pipeline& p = pipelines_[engine];
  if (q.phase == kPlan) {
    if (engine == kMatmul) plan_matmul_blocks(p, *q.op);
    else plan_vector_blocks(p, *q.op);
    vmem_.reserve(p.vmem_bytes, q.op->name);
    p.owner = &q;
    q.phase = kBlockInputs;
    if (p.block_storage.empty()) {
      vmem_.release(p.vmem_bytes);
      return true;
    }
    start_blocks(p, *q.op);
  }
  if (!continue_compute(p)) return false;
  vmem_.release(p.vmem_bytes);
  return true;
}

void TensorCore::start_blocks(Pipeline& p, const Op& op) {
  const std::size_t n = p.block_storage.size();
  // The DMA stages live as long as the core and take one op at a time.
  if (!p.started) {
    p.started = true;
    const auto engine = static_cast<std::uint32_t>(&p - pipelines_);
    for (std::uint32_t stage = 0; stage < 3; ++stage) {
      p.stages[stage].task.rank =
          WakeQueue::rank(host_.slot(site_.chip), site_.core, WakeQueue::kDmaStageRoles + engine * 3 + stage);
      p.stages[stage].task.run = [this, &p, stage] { advance_dma_stage(p, stage); };
    }
  }
  p.op = &op;
  p.loaded = {0, 0};
  p.computed = p.stored = 0;
  for (auto& landed : p.landed_ps) landed.assign(n, 0);
  p.computed_ps.assign(n, {});
  p.stored_ps.assign(n, 0);
  p.previous_ps = now_ps();
  ++p.job;
  wake_dma_stages(p, true);
}

bool TensorCore::continue_compute(Pipeline& p) {
  Queue& q = *p.owner;
  const std::vector<Block>& blocks = p.block_storage;
  const std::size_t n = blocks.size();
  const std::string* label = &p.op->name;
  for (;;) {
    const std::size_t b = p.computed;
    switch (q.phase) {
      case kBlockInputs: {
        if (b == n) {
          q.phase = kDrain;
          break;
        }
        if (!compute_can_go_on(p)) return false;
        Picos start_ps = std::max({p.previous_ps, p.landed_ps[0][b], p.landed_ps[1][b]});
        if (b >= 2) start_ps = std::max(start_ps, p.stored_ps[b - 2]);
        const Block& block = blocks[b];
        q.resume_ps = start_ps;
        if (block.plan == nullptr) {
          q.phase = kVectorBlock;  // the vector unit is shared: it is asked at the start, not ahead of it
          break;
        }
        p.products_ps = mxu_work(*block.plan, p.rows_per_cycle, block.mxu_flops, label, start_ps);
        // The block's input is transformed as it streams in (a prologue): its products are done
        // when both the MXU and that vector work are.
        q.phase = block.prologue_elements > 0 ? kPrologue : kAfterProducts;
        break;
      }
      case kPrologue:
        if (!reached(q, q.resume_ps)) return false;
        p.products_ps = std::max(p.products_ps, vpu_ops(blocks[b].prologue_elements, blocks[b].prologue_ops, label));
        q.phase = kAfterProducts;
        break;
      case kAfterProducts:
        if (blocks[b].epilogue_elements == 0) {
          block_computed(p, {p.products_ps, p.products_ps});
          break;
        }
        // The vector unit is shared (vector ops, the collective unit's reductions): it is asked
        // when the epilogue can start, not ahead of time.
        q.resume_ps = p.products_ps;
        q.phase = kEpilogue;
        break;
      case kEpilogue:
        if (!reached(q, q.resume_ps)) return false;
        block_computed(p, {p.products_ps, std::max(p.products_ps, vpu_ops(blocks[b].epilogue_elements,
                                                                             blocks[b].epilogue_ops, label))});
        break;
      case kVectorBlock: {
        if (!reached(q, q.resume_ps)) return false;
        const Picos done = vpu_ops(blocks[b].vector_elements, blocks[b].vector_ops, label);
        block_computed(p, {done, done});
        break;
      }
      case kDrain:
        if (!compute_can_go_on(p)) return false;
        q.resume_ps = p.stored_ps[n - 1];  // stores land in order
        q.phase = kDrained;
        break;
      case kDrained:
        if (!reached(q, q.resume_ps)) return false;
        p.op = nullptr;
        return true;
    }
  }
}

void TensorCore::block_computed(Pipeline& p, BlockTimes times) {
  p.computed_ps[p.computed] = times;
  p.previous_ps = times.inputs_free_ps;
  ++p.computed;
  p.owner->phase = kBlockInputs;
  wake_dma_stages(p, false);
}

void TensorCore::wake_dma_stages(Pipeline& p, bool all) {
  for (DmaStage& stage : p.stages)
    if (all || stage.awaits_compute) {
      stage.awaits_compute = false;
      host_.wakes.call_at(now_ps(), stage.task);
    }
}

void TensorCore::advance_dma_stage(Pipeline& p, std::size_t stage) {
  DmaStage& s = p.stages[stage];
  const bool store = stage == 2;
  while (!s.in_flight) {
    if (!s.active) {
      if (p.op == nullptr || p.job == s.done_job) return;
      s.done_job = p.job;
      s.block = 0;
      s.previous_ps = 0;
      s.active = true;
    }
    const std::size_t b = s.block;
    if (b == p.block_storage.size()) {
      s.active = false;
      continue;
    }
    // A load waits for a free input buffer (the compute of the block two before it), a store
    // for the block's results.
    if (store ? b >= p.computed : b >= p.computed + 2) {
      s.awaits_compute = true;
      return;
    }
    const Block& block = p.block_storage[b];
    Picos start_ps = s.previous_ps;
    if (store) start_ps = std::max(start_ps, p.computed_ps[b].results_ps);
    else if (b >= 2) start_ps = std::max(start_ps, p.computed_ps[b - 2].inputs_free_ps);
    const std::uint64_t bytes = store ? block.store_bytes : block.load_bytes[stage];
    if (bytes == 0) {
      dma_stage_landed(p, stage, std::max(start_ps, now_ps()));
      continue;
    }
    Request& r = p.dma_requests[stage];
    sc_core::sc_time delay = prepare_dma(r, store ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND, bytes,
                                         store ? block.store_run_bytes : block.load_run_bytes, &p.op->name, start_ps);
    tlm::tlm_phase phase = tlm::BEGIN_REQ;
    s.in_flight = true;
    if (dma_socket_->nb_transport_fw(r.payload(), phase, delay) != tlm::TLM_COMPLETED) return;  // answered later
    dma_stage_landed(p, stage, now_ps() + delay.value());
  }
}

void TensorCore::dma_stage_landed(Pipeline& p, std::size_t stage, Picos landed_ps) {
  DmaStage& s = p.stages[stage];
  s.in_flight = false;
  const std::size_t b = s.block++;
  s.previous_ps = landed_ps;
  if (stage == 2) {
    p.stored_ps[b] = landed_ps;
    ++p.stored;
  } else {
    p.landed_ps[stage][b] = landed_ps;
    // The compute stage needs both operands: a load booked ahead of the other stream's cannot
    // let it go on, and waking it for nothing was a fifth of all switches.
    const bool was_behind = p.loaded[stage] < p.loaded[1 - stage];
    ++p.loaded[stage];
    if (!was_behind) return;
  }
  if (compute_can_go_on(p)) host_.wakes.call_at(now_ps(), p.owner->task);
}

bool TensorCore::compute_can_go_on(const Pipeline& p) const {
  const std::size_t b = p.computed, n = p.block_storage.size();
  switch (p.owner->phase) {
    // The block's inputs in, and its output buffer free (the store of the block two before it done).
    case kBlockInputs: return b < n && b < std::min(p.loaded[0], p.loaded[1]) && b < p.stored + 2;
    case kDrain: return p.stored == n;  // every store booked
    default: return false;  // not waiting for the DMA stages
  }
}

tlm::tlm_sync_enum TensorCore::dma_answered(tlm::tlm_generic_payload& payload, tlm::tlm_phase& phase,
                                            sc_core::sc_time& delay) {
  if (phase != tlm::BEGIN_RESP) SC_REPORT_FATAL("tpusim", "the DMA answers a transfer with BEGIN_RESP only");
  for (Pipeline& p : pipelines_)
    for (std::size_t stage = 0; stage < 3; ++stage)
      if (&p.dma_requests[stage].payload() == &payload) {
        dma_stage_landed(p, stage, now_ps() + delay.value());
        advance_dma_stage(p, stage);
        return tlm::TLM_COMPLETED;
      }
  Queue& q = queue_asking(payload);
  q.due_ps = std::max<Picos>(q.due_ps, now_ps() + delay.value());
  return tlm::TLM_COMPLETED;
}

TensorCore::Queue& TensorCore::queue_asking(const tlm::tlm_generic_payload& payload) {
  for (auto& [key, q] : queues_)
    if (&q.request.payload() == &payload) {
      // The op goes on in the next delta cycle.
      q.answered = true;
      host_.wakes.call_at(now_ps(), q.task);
      return q;
    }
  SC_REPORT_FATAL("tpusim", "an answer for a request no engine of this core made");
  std::abort();
}

tlm::tlm_sync_enum TensorCore::collective_answered(tlm::tlm_generic_payload& payload, tlm::tlm_phase& phase,
                                                   sc_core::sc_time&) {
  if (phase != tlm::BEGIN_RESP) SC_REPORT_FATAL("tpusim", "the collective unit answers with BEGIN_RESP only");
  queue_asking(payload);
  return tlm::TLM_COMPLETED;
}

void TensorCore::plan_matmul_blocks(Pipeline& p, const Op& op) {
  const MatmulWork& mm = op.matmul;
  const MxuConfig& mxu = hw_.core.mxu;
  const SystolicArray array{mxu.rows, mxu.cols, mxu.weight_double_buffered};
  p.rows_per_cycle = mxu.rows_per_cycle(mm.lhs);
  if (p.rows_per_cycle <= 0)
    throw std::runtime_error(fmt::format("{}: the MXU of {} has no {} path", op.name, hw_.name,
                                         dtype_name(mm.lhs)));

  MatmulTiling tiling;
  try {
    tiling = tile_matmul(mm, mxu, matmul_vmem_budget_bytes(hw_));
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(fmt::format("{}: {}", op.name, e.what()));
  }
  // Of the products' multiply-adds, the share the model counts (a strided convolution's input
  // gradient multiplies zeros too).
  const double products = 2.0 * static_cast<double>(mm.batch) * static_cast<double>(mm.m * mm.k * mm.n);
  const double useful_fraction = products > 0 ? op.model_flops / products : 0.0;
  // Blocks come in a few shapes (full ones and the edges): plan each shape once.
  p.plans.clear();
  auto plan_for = [&](const MatmulBlock& mb) -> const MatmulPlan& {
    const std::array<std::uint64_t, 4> shape{mb.m, mb.k, mb.n, mb.batch};
    for (const auto& [known, plan] : p.plans)
      if (known == shape) return plan;
    // The products of a batched block stream one after another: as many more weight tiles.
    p.plans.emplace_back(shape, plan_matmul(array, mb.m, mb.k, mb.n, mm.passes * static_cast<std::uint32_t>(mb.batch),
                                            hw_.core.mxu.per_core));
    return p.plans.back().second;
  };
  p.block_storage.clear();
  p.block_storage.reserve(tiling.blocks.size());
  for (const MatmulBlock& mb : tiling.blocks) {
    Block block;
    block.load_bytes = mb.load_bytes;
    block.store_bytes = mb.store_bytes;
    block.plan = &plan_for(mb);
    block.mxu_flops = useful_fraction * 2.0 * static_cast<double>(mb.batch * mb.m * mb.k * mb.n);
    if (mm.prologue_vpu_ops_per_lhs_element > 0) {
      block.prologue_elements = mm.lhs_elements_read(mb.batch, mb.m, mb.k);
      block.prologue_ops = mm.prologue_vpu_ops_per_lhs_element;
    }
    if (mb.last_k && mm.epilogue_vpu_ops_per_element > 0) {
      block.epilogue_elements = mb.batch * mb.m * mb.n;
      block.epilogue_ops = mm.epilogue_vpu_ops_per_element;
    }
    p.block_storage.push_back(block);
  }
  p.vmem_bytes = tiling.working_set_bytes;
}

void TensorCore::plan_vector_blocks(Pipeline& p, const Op& op) {
  const VectorWork& v = op.vector;
  const std::uint64_t count = vector_blocks(v, hw_);
  const std::uint64_t read_bytes = vector_read_bytes(v, hw_);
  p.block_storage.assign(count, Block{});
  auto share = [count](std::uint64_t total, std::uint64_t b) {
    return total / count + (b < total % count ? 1 : 0);
  };
  std::uint64_t largest = 0;
  for (std::uint64_t b = 0; b < count; ++b) {
    Block& block = p.block_storage[b];
    block.load_bytes = {share(read_bytes, b), 0};
    block.store_bytes = share(v.hbm_write_bytes, b);
    block.load_run_bytes = v.hbm_read_run_bytes;
    block.store_run_bytes = v.hbm_write_run_bytes;
    largest = std::max(largest, block.load_bytes[0] + block.store_bytes);
    block.vector_elements = share(v.elements, b);
    block.vector_ops = v.vpu_ops_per_element;
  }
  p.vmem_bytes = 2 * largest;
}

bool TensorCore::continue_collective(Queue& q) {
  if (q.phase == 0) {
    Request& r = q.request.reset();
    r.job().collective = &q.op->collective;
    r.job().instance = (std::uint64_t{step_} << 32) | q.op->id;  // the same on every chip of the slice
    r.job().label = &q.op->name;
    r.job().step = step_;
    q.phase = 1;
    tlm::tlm_phase phase = tlm::BEGIN_REQ;
    sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
    if (collective_socket->nb_transport_fw(r.payload(), phase, delay) == tlm::TLM_COMPLETED) q.answered = true;
  }
  return q.answered;
}

// The core's DMA reads (or writes) the tensor in HBM as the chip's PCIe link carries it; the
// copy ends when both are done.
bool TensorCore::continue_host_transfer(Queue& q) {
  const HostTransferWork& t = q.op->host_transfer;
  if (q.phase == 0) {
    q.phase = 1;
    q.due_ps = host_.transfer(site_.chip, t.to_host, t.bytes, now_ps(), &q.op->name, step_);
    if (t.bytes == 0) {
      q.answered = true;
    } else {
      Request& r = q.request;
      sc_core::sc_time delay = prepare_dma(r, t.to_host ? tlm::TLM_READ_COMMAND : tlm::TLM_WRITE_COMMAND, t.bytes, t.bytes,
                                           &q.op->name, now_ps());
      tlm::tlm_phase phase = tlm::BEGIN_REQ;
      if (dma_socket_->nb_transport_fw(r.payload(), phase, delay) == tlm::TLM_COMPLETED) {
        q.answered = true;
        q.due_ps = std::max<Picos>(q.due_ps, now_ps() + delay.value());
      }
    }
  }
  return q.answered && reached(q, q.due_ps);
}

bool TensorCore::continue_infeed(Queue& q) {
  const Picos ready = host_.ready_ps(site_.chip, step_);
  if (ready == Host::kNotShipped) {
    host_.wake_when_shipped(q.task);
    return false;
  }
  if (!reached(q, ready)) return false;
  host_.consume(site_.chip, step_);
  return true;
}

}  // namespace tpusim

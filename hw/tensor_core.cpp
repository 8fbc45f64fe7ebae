#include "hw/tensor_core.hpp"

#include <algorithm>
#include <deque>
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
    : sc_module(name), socket("socket"), hbm_socket("hbm_socket"), config_(config), chip_(chip), wakes_(wakes),
      drops_last_chunk_(drops_last_chunk),
      issue_latency_ps_(ns_to_ps(config.issue_latency_ns)), engine_free_ps_(config.engines, 0),
      landed_(config.engines) {
  socket.register_b_transport(this, &Dma::b_transport);
  const CoreSite site{chip, core};
  for (std::uint32_t e = 0; e < config.engines; ++e)
    reporters_.emplace_back(sink, core_unit(site, UnitKind::Dma, e, fmt::format("dma{}", e), 0));
}

void Dma::b_transport(int, tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) {
  if (delay != sc_core::SC_ZERO_TIME) wakes_.wait_for(delay);
  delay = sc_core::SC_ZERO_TIME;
  // An engine is held until its transfer's last chunk lands, a time known once that chunk is
  // booked (until then, kHeld).
  std::size_t engine = 0;
  for (;;) {
    engine = static_cast<std::size_t>(std::min_element(engine_free_ps_.begin(), engine_free_ps_.end()) -
                                      engine_free_ps_.begin());
    const Picos free_ps = engine_free_ps_[engine];
    if (free_ps <= now_ps()) break;
    // Another engine's free time may become known, and come sooner, while this one waits.
    if (free_ps == kHeld) sc_core::wait(engine_freed_);
    else wakes_.wait_until(free_ps, engine_freed_);
  }
  engine_free_ps_[engine] = kHeld;
  UnitRequest& job = job_of(payload);
  asked_bytes_ += job.bytes;
  const Picos start = now_ps();
  const bool drop_last_chunk = drops_last_chunk_ && job.bytes > config_.chunk_bytes;

  // Chunks stream back to back with a bounded number in flight, so the issue latency and the
  // HBM latency are paid once per transfer while other requesters interleave between chunks.
  // Chunk i + max_outstanding_chunks may go once chunk i has landed. Loosely timed: rather than
  // waiting for that moment, a chunk is booked ahead with its issue time as the annotated delay,
  // and the process only waits once `lookahead` chunks are booked ahead of the present. A booking
  // thus precedes competitors that would have come in before its issue time by at most that many
  // chunk times: chunks of concurrent transfers still interleave, in coarser runs. Waiting per
  // chunk made these waits over half of all process switches of a large slice.
  const std::uint32_t lookahead = config_.max_outstanding_chunks;
  std::uint32_t ahead = 0;  // chunks booked for an issue time still to come since the last wait
  // When each chunk lands, in issue order; [head, end) are in flight. Kept per engine across
  // transfers: a deque here allocated twice per transfer.
  std::vector<Picos>& landed = landed_[engine];
  landed.clear();
  std::size_t head = 0;
  Picos issue = start + issue_latency_ps_;
  Picos last_done = issue;
  Picos now = start;  // the process only yields where it refreshes this
  for (std::uint64_t offset = 0; offset < job.bytes; offset += config_.chunk_bytes) {
    if (landed.size() - head == config_.max_outstanding_chunks) issue = std::max(issue, landed[head++]);
    if (issue > now) {
      if (ahead == lookahead) {
        wakes_.wait_until(issue);
        now = now_ps();
        ahead = 0;
      } else {
        ++ahead;
      }
    }
    const std::uint64_t length = std::min(config_.chunk_bytes, job.bytes - offset);
    if (drop_last_chunk && offset + length == job.bytes) break;
    // chunk_ is shared with the transfers of the other engines, which run while this one waits:
    // everything HBM reads is set again for each chunk (a whole reset per chunk cost more than
    // the booking).
    chunk_.set_access(payload.get_command(), payload.get_address() + offset, length);
    chunk_.payload().set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    chunk_.job().label = job.label;
    chunk_.job().step = job.step;
    chunk_.job().run_bytes = job.run_bytes;
    sc_core::sc_time hbm_delay = ps_time(std::max(issue, now) - now);
    hbm_socket->b_transport(chunk_.payload(), hbm_delay);
    now = now_ps();  // a target may take time before it answers (this project's HBM does not)
    if (chunk_.payload().is_response_ok()) moved_bytes_ += length;
    landed.push_back(now + hbm_delay.value());
    last_done = std::max(last_done, landed.back());
  }
  // The last chunk is booked: nothing is left to decide, so the transfer returns now with the
  // time until it lands as its annotated delay, and the engine is free from then on. Waiting here
  // for the landing was a fifth of all process switches of a large slice.
  last_done = std::max(last_done, now);
  engine_free_ps_[engine] = last_done;
  engine_freed_.notify(sc_core::SC_ZERO_TIME);
  job.served = {start, last_done};
  reporters_[engine].busy(job.served, job, job.bytes);
  delay = ps_time(last_done - now);
  payload.set_response_status(tlm::TLM_OK_RESPONSE);
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

  sink_ = sink;
  steps_reporter_ = Reporter(sink, core_unit(site, UnitKind::Steps, 15, "steps", hw.core_freq_mhz(site.chip)));
  vmem_.report_to(steps_reporter_, fmt::format("core{} VMEM", site.core));
  done_.assign(program.ops.size(), false);
  SC_THREAD(sequencer);
}

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

void TensorCore::sequencer() {
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
  host_.wakes.set_rank(WakeQueue::rank(host_.slot(site_.chip), site_.core, WakeQueue::kSequencerRole));
  for (std::uint32_t step = 0; step < program_.steps; ++step) {
    step_ = step;
    const Picos step_start = step_start_ps_ = now_ps();
    forward_span_ps_.push_back(0);
    if (program_.launch_ps > 0 && step % program_.steps_per_launch == 0)
      host_.wakes.wait_until((step / program_.steps_per_launch + 1) * program_.launch_ps);
    std::fill(done_.begin(), done_.end(), false);
    for (const Op& op : program_.ops) {
      waiting_on_ = op.id;
      while (!std::all_of(op.deps.begin(), op.deps.end(), [&](std::uint32_t d) { return done_[d]; }))
        sc_core::wait(op_done_);
      const Engine e = engine_of(op);
      const std::uint32_t stream = std::min(op.stream, kMaxStreams - 1);
      Queue& q = queues_[e * kMaxStreams + stream];
      // Engines start on first use: a large slice has tens of thousands of cores, and every
      // SystemC thread costs a stack and two memory mappings.
      if (!q.started) {
        q.started = true;
        sc_core::sc_spawn([this, e, stream] { engine(e, stream); });
      }
      q.ops.push_back(&op);
      q.work.notify(sc_core::SC_ZERO_TIME);
    }
    while (!std::all_of(done_.begin(), done_.end(), [](bool d) { return d; })) sc_core::wait(op_done_);
    step_end_ps_.push_back(now_ps());
    pipeline_ps_.push_back(union_length(pipeline_spans_));
    bubble_ps_.push_back(union_length(bubble_spans_));
    pipeline_spans_.clear();
    bubble_spans_.clear();
    steps_reporter_.busy({step_start, now_ps()}, &step_names[step], step);
    if (step_observer_) step_observer_(step);
  }
  finished_ = true;
}

void TensorCore::engine(Engine which, std::uint32_t stream) {
  static const char* const kEngineNames[kEngines] = {"ops.matmul", "ops.vector", "ops.collective", "ops.infeed"};
  const std::uint32_t key = which * kMaxStreams + stream;
  Queue& q = queues_[key];
  host_.wakes.set_rank(WakeQueue::rank(host_.slot(site_.chip), site_.core, WakeQueue::kEngineRoles + key));
  // Nothing on this thread's stack may own heap memory across the endless loop below: the thread
  // never returns, so LeakSanitizer would rightly count it as lost when the simulation ends.
  const Reporter& reporter = [&]() -> const Reporter& {
    static const OpEngine kEngineKinds[kEngines] = {OpEngine::Matmul, OpEngine::Vector, OpEngine::Collective, OpEngine::Infeed};
    const std::string name = stream == 0 ? kEngineNames[which] : fmt::format("{}.{}", kEngineNames[which], stream);
    UnitInfo info = core_unit(site_, which == kCollective ? UnitKind::Collective : UnitKind::Sequencer, key, name,
                              hw_.core_freq_mhz(site_.chip));
    info.engine = kEngineKinds[which];
    info.stream = stream;
    return reporters_.try_emplace(key, sink_, std::move(info)).first->second;
  }();
  for (;;) {
    while (q.ops.empty()) sc_core::wait(q.work);
    const Op& op = *q.ops.front();
    q.ops.pop_front();
    const Picos start = now_ps();
    if (hw_.core.op_overhead_cycles > 0)
      host_.wakes.wait_until(now_ps() + clock_.cycles_to_ps(hw_.core.op_overhead_cycles));
    run(op);
    reporter.busy({start, now_ps()}, &op.name, step_);
    if (op.phase == Phase::Forward) forward_span_ps_.back() = std::max(forward_span_ps_.back(), now_ps() - step_start_ps_);
    if (op.pipeline != PipelineRole::None) pipeline_spans_.emplace_back(start, now_ps());
    if (op.pipeline == PipelineRole::Bubble) bubble_spans_.emplace_back(start, now_ps());
    done_[op.id] = true;
    op_done_.notify(sc_core::SC_ZERO_TIME);
  }
}

void TensorCore::run(const Op& op) {
  switch (op.kind) {
    case OpKind::Matmul: return run_matmul(op);
    case OpKind::Vector: return run_vector(op);
    case OpKind::Collective: return run_collective(op);
    case OpKind::Infeed: return run_infeed(op);
    case OpKind::HostTransfer: return run_host_transfer(op);
  }
}

// ---------------------------------------------------------------------------------------------
Picos TensorCore::dma_transfer(Request& r, tlm::tlm_command cmd, std::uint64_t bytes, std::uint64_t run_bytes,
                               const std::string* label, Picos start_ps) {
  if (bytes == 0) return std::max(start_ps, now_ps());
  // Each core works in its own slice of the chip's HBM; consecutive tensors follow each other.
  const std::uint64_t region = hw_.hbm.capacity_bytes / hw_.chip.cores;
  r.reset().set_access(cmd, site_.core * region + next_address_ % region, bytes);
  next_address_ += round_up<std::uint64_t>(bytes, 4096);
  r.job().bytes = bytes;
  r.job().run_bytes = run_bytes;
  r.job().label = label;
  r.job().step = step_;
  sc_core::sc_time delay = ps_time(start_ps > now_ps() ? start_ps - now_ps() : 0);
  dma_socket_->b_transport(r.payload(), delay);
  return now_ps() + delay.value();
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

void TensorCore::run_blocks(Engine engine, std::vector<Block>& blocks, const Op& op) {
  const std::size_t n = blocks.size();
  if (n == 0) return;
  // The DMA stages are processes that live as long as the core and take one op at a time:
  // spawning them per op would create a SystemC object (and a name lookup) per op.
  Pipeline& p = pipelines_[engine];
  if (!p.started) {
    p.started = true;
    for (std::size_t stage = 0; stage < 3; ++stage) sc_core::sc_spawn([this, &p, stage] { dma_stage(p, stage); });
  }
  p.blocks = &blocks;
  p.op = &op;
  p.loaded = {0, 0};
  p.computed = p.stored = 0;
  for (auto& landed : p.landed_ps) landed.assign(n, 0);
  p.computed_ps.assign(n, {});
  p.stored_ps.assign(n, 0);
  ++p.job;
  p.job_posted.notify(sc_core::SC_ZERO_TIME);
  Picos previous_ps = now_ps();  // when the compute of the previous block let go of the units
  for (std::size_t b = 0; b < n; ++b) {
    // Inputs in, and the output buffer free (the store of the block two before it done).
    while (b >= std::min(p.loaded[0], p.loaded[1]) || b >= p.stored + 2) sc_core::wait(p.block_moved);
    Picos start_ps = std::max({previous_ps, p.landed_ps[0][b], p.landed_ps[1][b]});
    if (b >= 2) start_ps = std::max(start_ps, p.stored_ps[b - 2]);
    p.computed_ps[b] = blocks[b].compute(start_ps);
    previous_ps = p.computed_ps[b].inputs_free_ps;
    ++p.computed;
    p.block_computed.notify(sc_core::SC_ZERO_TIME);
  }
  while (p.stored < n) sc_core::wait(p.block_moved);
  host_.wakes.wait_until(p.stored_ps[n - 1]);  // stores land in order
  p.blocks = nullptr;
}

void TensorCore::dma_stage(Pipeline& p, std::size_t stage) {
  const auto engine = static_cast<std::uint32_t>(&p - pipelines_);
  host_.wakes.set_rank(WakeQueue::rank(host_.slot(site_.chip), site_.core,
                                       WakeQueue::kDmaStageRoles + engine * 3 + static_cast<std::uint32_t>(stage)));
  const bool store = stage == 2;  // stages 0 and 1 load the two operand streams
  std::uint64_t done_job = 0;
  for (;;) {
    while (p.blocks == nullptr || p.job == done_job) sc_core::wait(p.job_posted);
    done_job = p.job;
    const std::size_t n = p.blocks->size();
    Picos previous_ps = 0;  // when this stage's previous transfer lands: a stage moves one at a time
    for (std::size_t b = 0; b < n; ++b) {
      const Block& block = (*p.blocks)[b];
      // A load waits for a free input buffer (the compute of the block two before it), a store
      // for the block's results.
      while (store ? b >= p.computed : b >= p.computed + 2) sc_core::wait(p.block_computed);
      if (store) {
        const Picos start_ps = std::max(previous_ps, p.computed_ps[b].results_ps);
        previous_ps = p.stored_ps[b] = dma_transfer(p.dma_requests[stage], tlm::TLM_WRITE_COMMAND, block.store_bytes,
                                                    block.store_run_bytes, &p.op->name, start_ps);
        ++p.stored;
      } else {
        const Picos start_ps = b >= 2 ? std::max(previous_ps, p.computed_ps[b - 2].inputs_free_ps) : previous_ps;
        previous_ps = p.landed_ps[stage][b] = dma_transfer(p.dma_requests[stage], tlm::TLM_READ_COMMAND,
                                                           block.load_bytes[stage], block.load_run_bytes, &p.op->name,
                                                           start_ps);
        // The compute stage needs both operands: a load booked ahead of the other stream's cannot
        // let it go on, and waking it for nothing was a fifth of all switches.
        const bool was_behind = p.loaded[stage] < p.loaded[1 - stage];
        ++p.loaded[stage];
        if (!was_behind) continue;
      }
      p.block_moved.notify(sc_core::SC_ZERO_TIME);
    }
  }
}

void TensorCore::run_matmul(const Op& op) {
  const MatmulWork& mm = op.matmul;
  const MxuConfig& mxu = hw_.core.mxu;
  const SystolicArray array{mxu.rows, mxu.cols, mxu.weight_double_buffered};
  const double rows_per_cycle = mxu.rows_per_cycle(mm.lhs);
  if (rows_per_cycle <= 0)
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
  // Blocks come in a few shapes (full ones and the edges): plan each shape once. A deque keeps
  // the plans where the blocks' closures point while more are added.
  std::deque<std::pair<std::array<std::uint64_t, 4>, MatmulPlan>> plans;
  auto plan_for = [&](const MatmulBlock& mb) -> const MatmulPlan& {
    const std::array<std::uint64_t, 4> shape{mb.m, mb.k, mb.n, mb.batch};
    for (const auto& [known, plan] : plans)
      if (known == shape) return plan;
    // The products of a batched block stream one after another: as many more weight tiles.
    plans.emplace_back(shape, plan_matmul(array, mb.m, mb.k, mb.n, mm.passes * static_cast<std::uint32_t>(mb.batch),
                                          hw_.core.mxu.per_core));
    return plans.back().second;
  };
  std::vector<Block> blocks;
  blocks.reserve(tiling.blocks.size());
  for (const MatmulBlock& mb : tiling.blocks) {
    Block block;
    block.load_bytes = mb.load_bytes;
    block.store_bytes = mb.store_bytes;
    block.compute = [this, &op, &mm, &mb, &plan = plan_for(mb), rows_per_cycle, useful_fraction](Picos start_ps) {
      const Picos mxu_done = mxu_work(plan, rows_per_cycle,
                                      useful_fraction * 2.0 * static_cast<double>(mb.batch * mb.m * mb.k * mb.n),
                                      &op.name, start_ps);
      // The block's input is transformed as it streams in (a prologue): its products are done
      // when both the MXU and that vector work are.
      Picos products_done = mxu_done;
      if (mm.prologue_vpu_ops_per_lhs_element > 0) {
        host_.wakes.wait_until(start_ps);
        products_done = std::max(mxu_done, vpu_ops(mm.lhs_elements_read(mb.batch, mb.m, mb.k),
                                                   mm.prologue_vpu_ops_per_lhs_element, &op.name));
      }
      if (!mb.last_k || mm.epilogue_vpu_ops_per_element <= 0) return BlockTimes{products_done, products_done};
      // The vector unit is shared (vector ops, the collective unit's reductions): it is asked
      // when the epilogue can start, not ahead of time.
      host_.wakes.wait_until(products_done);
      return BlockTimes{products_done, std::max(products_done, vpu_ops(mb.batch * mb.m * mb.n,
                                                                        mm.epilogue_vpu_ops_per_element, &op.name))};
    };
    blocks.push_back(std::move(block));
  }
  const std::uint64_t reserved = tiling.working_set_bytes;
  vmem_.reserve(reserved, op.name);
  run_blocks(kMatmul, blocks, op);
  vmem_.release(reserved);
}

void TensorCore::run_vector(const Op& op) {
  const VectorWork& v = op.vector;
  const std::uint64_t count = vector_blocks(v, hw_);
  const std::uint64_t read_bytes = vector_read_bytes(v, hw_);
  std::vector<Block> blocks(count);
  auto share = [count](std::uint64_t total, std::uint64_t b) {
    return total / count + (b < total % count ? 1 : 0);
  };
  std::uint64_t largest = 0;
  for (std::uint64_t b = 0; b < count; ++b) {
    blocks[b].load_bytes = {share(read_bytes, b), 0};
    blocks[b].store_bytes = share(v.hbm_write_bytes, b);
    blocks[b].load_run_bytes = v.hbm_read_run_bytes;
    blocks[b].store_run_bytes = v.hbm_write_run_bytes;
    largest = std::max(largest, blocks[b].load_bytes[0] + blocks[b].store_bytes);
    const std::uint64_t elements = share(v.elements, b);
    blocks[b].compute = [this, &op, elements, ops = v.vpu_ops_per_element](Picos start_ps) {
      // The vector unit is shared: it is asked at the start, not ahead of it.
      host_.wakes.wait_until(start_ps);
      const Picos done = vpu_ops(elements, ops, &op.name);
      return BlockTimes{done, done};
    };
  }
  vmem_.reserve(2 * largest, op.name);
  run_blocks(kVector, blocks, op);
  vmem_.release(2 * largest);
}

void TensorCore::run_collective(const Op& op) {
  Request r;
  r.job().collective = &op.collective;
  r.job().instance = (std::uint64_t{step_} << 32) | op.id;  // the same on every chip of the slice
  r.job().label = &op.name;
  r.job().step = step_;
  sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
  collective_socket->b_transport(r.payload(), delay);
}

// The core's DMA reads (or writes) the tensor in HBM as the chip's PCIe link carries it; the
// copy ends when both are done.
void TensorCore::run_host_transfer(const Op& op) {
  const HostTransferWork& t = op.host_transfer;
  const Picos start = now_ps();
  const Picos landed = host_.transfer(site_.chip, t.to_host, t.bytes, start, &op.name, step_);
  const Picos hbm_done = dma_transfer(host_transfer_requests_[t.to_host ? 0 : 1], t.to_host ? tlm::TLM_READ_COMMAND : tlm::TLM_WRITE_COMMAND,
                                      t.bytes, t.bytes, &op.name, start);
  host_.wakes.wait_until(std::max(landed, hbm_done));
}

void TensorCore::run_infeed(const Op&) {
  Picos ready;
  while ((ready = host_.ready_ps(site_.chip, step_)) == Host::kNotShipped)
    sc_core::wait(host_.batch_event());
  host_.wakes.wait_until(ready);
  host_.consume(site_.chip, step_);
}

}  // namespace tpusim

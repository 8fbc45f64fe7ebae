#include "workloads/import/hlo_program.hpp"

#include <algorithm>
#include <numeric>
#include <optional>
#include <regex>
#include <set>
#include <tuple>
#include <utility>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hw/collective.hpp"
#include "hw/topology.hpp"

namespace tpusim {
namespace {

constexpr std::size_t kMaxOps = 1'000'000;
// Instructions executed with loops unrolled, free ones included (a loop of a million empty trips).
constexpr std::uint64_t kMaxExecuted = 5'000'000;
constexpr int kMaxCallDepth = 32;

// Instructions that move or rename values without work of their own.
const std::set<std::string>& free_opcodes() {
  static const std::set<std::string> s = {
      "parameter", "constant", "iota", "get-tuple-element", "tuple", "bitcast", "reshape", "partition-id", "replica-id",
      "after-all", "add-dependency", "opt-barrier", "optimization-barrier", "domain", "copy-start", "copy-done", "async-done",
      "async-update", "all-reduce-done", "all-gather-done", "collective-permute-done", "get-dimension-size",
      "set-dimension-size", "rng-get-and-update-state"};
  return s;
}

// Elementwise instructions: their operands have the result's dimensions.
const std::set<std::string>& elementwise_opcodes() {
  static const std::set<std::string> s = {
      "add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "remainder", "atan2", "and", "or", "xor",
      "shift-left", "shift-right-logical", "shift-right-arithmetic", "compare", "select", "clamp", "complex", "abs", "negate",
      "exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "tanh", "sqrt", "rsqrt", "cbrt", "sine",
      "cosine", "tan", "erf", "floor", "ceil", "round-nearest-afz", "round-nearest-even", "sign", "not", "is-finite", "convert",
      "reduce-precision", "stochastic-convert", "popcnt", "clz", "real", "imag", "copy"};
  return s;
}

// Reductions, layout changes and data movement: a pass reading the operands, writing the result.
const std::set<std::string>& data_opcodes() {
  static const std::set<std::string> s = {
      "broadcast", "transpose", "reduce", "reduce-window", "select-and-scatter", "slice", "dynamic-slice",
      "dynamic-update-slice", "concatenate", "pad", "gather", "scatter", "sort", "reverse", "map", "rng", "rng-bit-generator",
      "cholesky", "triangular-solve", "fft", "bitcast-convert", "topk"};
  return s;
}

const std::set<std::string>& collective_opcodes() {
  static const std::set<std::string> s = {"all-reduce", "all-reduce-start", "all-gather", "all-gather-start", "reduce-scatter",
                                          "all-to-all", "collective-permute", "collective-permute-start"};
  return s;
}

// The value an instruction produces, as the ops it waits for: a tuple's by element, so that a
// get-tuple-element waits only for its element's producer.
struct Value {
  std::vector<std::uint32_t> deps;
  std::vector<Value> elements;
  // Set when the instruction is fused into its one reader (an unoptimized module's elementwise
  // chain, which XLA's fusion would make one pass): the HBM bytes the reader reads for it (its
  // own inputs') and the VPU ops per element it adds.
  bool fused = false;
  std::uint64_t fused_read_bytes = 0;
  double fused_vpu_ops = 0;
};

// What a chain fuses: elementwise instructions and the layout changes XLA's loop fusion takes in.
bool fuses_into_reader(const std::string& op) {
  return elementwise_opcodes().count(op) || op == "broadcast" || op == "transpose";
}
// Readers that are one vector pass over what they read.
bool reads_as_vector_pass(const std::string& op) {
  return elementwise_opcodes().count(op) || op == "reduce" || op == "broadcast" || op == "transpose" || op == "reduce-window" ||
         op == "concatenate" || op == "pad" || op == "slice";
}

// Tuples nest at most this deep as values; deeper, a tuple waits for all its elements' ops.
constexpr int kMaxValueDepth = 8;

void collect_deps(const Value& v, std::vector<std::uint32_t>& out) {
  out.insert(out.end(), v.deps.begin(), v.deps.end());
  for (const Value& e : v.elements) collect_deps(e, out);
}

void sort_unique(std::vector<std::uint32_t>& deps) {
  std::sort(deps.begin(), deps.end());
  deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
}

int depth_of(const Value& v) {
  int d = 0;
  for (const Value& e : v.elements) d = std::max(d, 1 + depth_of(e));
  return d;
}

std::uint64_t product(const std::vector<std::int64_t>& dims, const std::vector<std::int64_t>& axes) {
  std::uint64_t n = 1;
  for (auto a : axes) n *= static_cast<std::uint64_t>(dims.at(static_cast<std::size_t>(a)));
  return n;
}

DType matmul_dtype(const std::string& hlo) {
  if (hlo == "f32" || hlo == "f64") return DType::F32;
  if (hlo == "s8" || hlo == "u8" || hlo == "s4" || hlo == "u4") return DType::Int8;
  if (hlo.compare(0, 2, "f8") == 0) return DType::Fp8;
  return DType::BF16;
}

class Lowering {
 public:
  // Wraparound does not matter here: only which chips a group holds.
  Lowering(const HloModule& m, std::string origin, const std::vector<std::uint32_t>& torus_dims)
      : m_(m), origin_(std::move(origin)), torus_(torus_dims, std::vector<bool>(torus_dims.size(), false)) {}

  HloStep run() {
    step_.devices = hlo_device_count(m_, origin_);
    const std::uint32_t chips = torus_.chip_count();
    if (step_.devices != chips)
      throw std::invalid_argument(fmt::format("{}: the module runs on {} devices (num_partitions x replica_count), the slice has {} "
                                              "chips; give a topology of {} chips (one device per chip)",
                                              origin_, step_.devices, chips, step_.devices));
    const HloComputation& entry = m_.computations[m_.entry];
    std::vector<Value> params;
    for (const HloInstruction& inst : entry.instructions)
      if (inst.opcode == "parameter") step_.parameter_bytes += inst.shape.bytes();
    emit(entry, params, "", 0);
    step_.program.steps = 1;
    if (custom_calls_ > 0)
      step_.notes.push_back(fmt::format("{} custom call(s) (Pallas kernels, library calls) priced as their operands' and results' "
                                        "HBM traffic only: what they compute is not in the HLO", custom_calls_));
    return std::move(step_);
  }

 private:
  [[noreturn]] void fail(const HloInstruction& inst, const std::string& what) const {
    throw std::invalid_argument(fmt::format("{}:{}: %{}: {}", origin_, inst.line, inst.name, what));
  }

  const HloComputation& called(const HloInstruction& inst, const char* key) const {
    const std::string* v = inst.attribute(key);
    if (!v) fail(inst, fmt::format("{} {} names no computation ({}=)", inst.opcode, inst.name, key));
    std::string name = *v;
    if (!name.empty() && name[0] == '%') name.erase(0, 1);
    const HloComputation* c = m_.find(name);
    if (!c) fail(inst, fmt::format("{}={} names no computation of the module", key, *v));
    return *c;
  }

  const HloShape& operand_shape(const HloComputation& c, const HloInstruction& inst, std::size_t i) const {
    if (i >= inst.operands.size()) fail(inst, fmt::format("expected at least {} operands", i + 1));
    return c.instructions[c.by_name.at(inst.operands[i])].shape;
  }

  std::uint64_t operand_bytes(const HloComputation& c, const HloInstruction& inst) const {
    std::uint64_t n = 0;
    for (std::size_t i = 0; i < inst.operands.size(); ++i) n += operand_shape(c, inst, i).bytes();
    return n;
  }

  Phase phase_of(const HloInstruction& inst) const {
    const std::string* metadata = inst.attribute("metadata");
    return metadata && metadata->find("transpose(") != std::string::npos ? Phase::Backward : Phase::Forward;
  }

  std::uint32_t add_op(Op op, const std::vector<std::uint32_t>& deps) {
    if (step_.program.ops.size() >= kMaxOps)
      throw std::invalid_argument(fmt::format("{}: more than {} ops once loops are unrolled; tpusim takes at most {}", origin_, kMaxOps, kMaxOps));
    op.id = static_cast<std::uint32_t>(step_.program.ops.size());
    op.deps = deps;
    step_.program.ops.push_back(std::move(op));
    return step_.program.ops.back().id;
  }

  // Emits computation `c` with its parameters bound to `params`; returns its root's value.
  Value emit(const HloComputation& c, const std::vector<Value>& params, const std::string& suffix, int depth) {
    if (depth > kMaxCallDepth) fail(c.instructions[0], "calls nested more than 32 deep");
    std::vector<Value> values(c.instructions.size());
    const std::vector<bool> fused = fused_into_reader(c);
    for (std::size_t i = 0; i < c.instructions.size(); ++i) {
      const HloInstruction& inst = c.instructions[i];
      if (++step_.instructions > kMaxExecuted)
        throw std::invalid_argument(fmt::format("{}: more than {} instructions executed once loops are unrolled; tpusim takes at "
                                                "most {}", origin_, kMaxExecuted, kMaxExecuted));
      std::vector<const Value*> in;
      for (const std::string& operand : inst.operands) in.push_back(&values[c.by_name.at(operand)]);
      if (fused[i]) {
        if (elementwise_opcodes().count(inst.opcode)) check_elementwise(c, inst);
        Value v{deps_of(in), {}};
        v.fused = true;
        std::tie(v.fused_read_bytes, v.fused_vpu_ops) = reads_and_ops(c, inst, in, elementwise_opcodes().count(inst.opcode) ? 1.0 : 0.0);
        values[i] = std::move(v);
        continue;
      }
      values[i] = emit_instruction(c, inst, in, params, suffix, depth);
    }
    return values[c.root];
  }

  // In a module XLA has not optimized (no is_scheduled=true: what jax.jit(f).lower(...).as_text()
  // prints), which instructions fuse into their one reader, as XLA's loop fusion would join them.
  // An optimized module's fusions are its own.
  std::vector<bool> fused_into_reader(const HloComputation& c) const {
    std::vector<bool> fused(c.instructions.size(), false);
    const auto scheduled = m_.attributes.find("is_scheduled");
    if (scheduled != m_.attributes.end() && scheduled->second == "true") return fused;
    std::vector<std::size_t> readers(c.instructions.size(), 0), reader(c.instructions.size(), 0);
    for (std::size_t j = 0; j < c.instructions.size(); ++j)
      for (const std::string& operand : c.instructions[j].operands) {
        const std::size_t o = c.by_name.at(operand);
        ++readers[o];
        reader[o] = j;
      }
    for (std::size_t i = 0; i < c.instructions.size(); ++i) {
      const HloInstruction& inst = c.instructions[i];
      fused[i] = i != c.root && readers[i] == 1 && !inst.shape.is_tuple() && !inst.shape.dims.empty() &&
                 fuses_into_reader(inst.opcode) && reads_as_vector_pass(c.instructions[reader[i]].opcode);
    }
    return fused;
  }

  // The HBM bytes a vector pass reads and its VPU ops per element: its operands', an operand
  // fused into it counted as what that operand read.
  std::pair<std::uint64_t, double> reads_and_ops(const HloComputation& c, const HloInstruction& inst,
                                                 const std::vector<const Value*>& in, double own_ops) const {
    std::uint64_t bytes = 0;
    double ops = own_ops;
    for (std::size_t k = 0; k < inst.operands.size(); ++k) {
      if (in[k]->fused) {
        bytes += in[k]->fused_read_bytes;
        ops += in[k]->fused_vpu_ops;
      } else {
        bytes += operand_shape(c, inst, k).bytes();
      }
    }
    return {bytes, ops};
  }

  static std::vector<std::uint32_t> deps_of(const std::vector<const Value*>& in) {
    std::vector<std::uint32_t> deps;
    for (const Value* v : in) collect_deps(*v, deps);
    sort_unique(deps);
    return deps;
  }

  Value single(std::uint32_t op) { return Value{{op}, {}}; }

  // A called computation's arguments: the operands' values from `first` on.
  static std::vector<Value> arguments(const std::vector<const Value*>& in, std::size_t first = 0) {
    std::vector<Value> args;
    for (std::size_t k = first; k < in.size(); ++k) args.push_back(*in[k]);
    return args;
  }

  Value emit_instruction(const HloComputation& c, const HloInstruction& inst, const std::vector<const Value*>& in,
                         const std::vector<Value>& params, const std::string& suffix, int depth) {
    const std::string& op = inst.opcode;
    const std::string name = inst.name + suffix;
    if (op == "parameter") {
      const auto index = hlo_int_list(inst.attributes.at("literal"));
      if (index.size() != 1 || index[0] < 0) fail(inst, "expected parameter(N)");
      return static_cast<std::size_t>(index[0]) < params.size() ? params[static_cast<std::size_t>(index[0])] : Value{};
    }
    if (op == "tuple") {
      Value v;
      for (const Value* e : in) v.elements.push_back(*e);
      if (depth_of(v) > kMaxValueDepth) return Value{deps_of(in), {}};
      return v;
    }
    if (op == "get-tuple-element") {
      const std::string* index = inst.attribute("index");
      if (!index || in.size() != 1) fail(inst, "expected one tuple operand and index=N");
      const auto i = hlo_int_list(*index);
      if (i.size() != 1 || i[0] < 0) fail(inst, "expected index=N");
      if (in[0]->elements.empty()) return *in[0];
      if (static_cast<std::size_t>(i[0]) >= in[0]->elements.size()) fail(inst, fmt::format("index={} of a tuple of {}", i[0], in[0]->elements.size()));
      return in[0]->elements[static_cast<std::size_t>(i[0])];
    }
    // Scalar arithmetic on scalars (a loop's counter, a learning-rate schedule) runs on the core's
    // scalar unit beside the vector and matrix work. (A reduction to a scalar reads its operand.)
    const bool scalar = (elementwise_opcodes().count(op) > 0) && !inst.shape.is_tuple() && inst.shape.dims.empty() &&
                        std::all_of(inst.operands.begin(), inst.operands.end(), [&](const std::string& o) {
                          const HloShape& s = c.instructions[c.by_name.at(o)].shape;
                          return !s.is_tuple() && s.dims.empty();
                        });
    if (free_opcodes().count(op) || scalar) return Value{deps_of(in), {}};
    if (op == "while") return emit_while(inst, in, suffix, depth);
    if (op == "call") return emit(called(inst, "to_apply"), arguments(in), suffix, depth + 1);
    if (op == "conditional") {
      // The first branch stands for all (a training step's conditionals are small: a loss scale's
      // update, a learning-rate schedule).
      const std::string* branches = inst.attribute("branch_computations");
      const std::string* first = branches ? branches : inst.attribute("true_computation");
      if (!first) fail(inst, "a conditional without branch_computations or true_computation");
      std::string name0 = *first;
      name0.erase(std::remove_if(name0.begin(), name0.end(), [](char ch) { return ch == '{' || ch == '}' || ch == '%' || ch == ' '; }),
                  name0.end());
      name0 = name0.substr(0, name0.find(','));
      const HloComputation* branch = m_.find(name0);
      if (!branch) fail(inst, "its branch names no computation");
      return emit(*branch, arguments(in, 1), suffix, depth + 1);
    }
    if (op == "async-start") {
      const HloComputation& wrapped = called(inst, "calls");
      const HloInstruction& root = wrapped.instructions[wrapped.root];
      if (collective_opcodes().count(root.opcode)) return emit_collective(wrapped, root, deps_of(in), name);
      return emit(wrapped, arguments(in), suffix, depth + 1);
    }
    if (collective_opcodes().count(op)) return emit_collective(c, inst, deps_of(in), name);
    if (op == "dot" || op == "convolution") return single(add_op(matmul_op(c, inst, name, 0), deps_of(in)));
    if (op == "fusion") return single(add_op(fusion_op(c, inst, name, in), deps_of(in)));
    if (op == "custom-call") {
      ++custom_calls_;
      return single(add_op(vector_op(c, inst, name, 1, in), deps_of(in)));
    }
    if (elementwise_opcodes().count(op)) {
      check_elementwise(c, inst);
      return single(add_op(vector_op(c, inst, name, 1, in), deps_of(in)));
    }
    if (data_opcodes().count(op)) return single(add_op(vector_op(c, inst, name, 1, in), deps_of(in)));
    if (op == "send" || op == "recv" || op == "send-done" || op == "recv-done")
      fail(inst, "send and recv (host or pipeline transfers) are not modelled yet");
    fail(inst, fmt::format("unknown opcode \"{}\"", op));
  }

  void check_elementwise(const HloComputation& c, const HloInstruction& inst) const {
    for (std::size_t i = 0; i < inst.operands.size(); ++i) {
      const HloShape& s = operand_shape(c, inst, i);
      const bool scalar_allowed = (inst.opcode == "clamp" || inst.opcode == "select") && !s.is_tuple() && s.dims.empty();
      if (scalar_allowed) continue;  // clamp's bounds and select's predicate may be scalars
      if (s.is_tuple() || inst.shape.is_tuple() || s.dims != inst.shape.dims)
        fail(inst, fmt::format("operand {} ({}) does not have the result's dimensions ({}): an elementwise {} does not broadcast",
                               i, s.str(), inst.shape.str(), inst.opcode));
    }
  }

  // `in`: the operands' values (some may be fused into this pass).
  Op vector_op(const HloComputation& c, const HloInstruction& inst, const std::string& name, double vpu_ops,
               const std::vector<const Value*>& in) {
    Op op;
    op.kind = OpKind::Vector;
    op.phase = phase_of(inst);
    op.name = name;
    op.vector.elements = std::max<std::uint64_t>(1, inst.shape.element_count());
    std::tie(op.vector.hbm_read_bytes, op.vector.vpu_ops_per_element) = reads_and_ops(c, inst, in, vpu_ops);
    op.vector.hbm_write_bytes = inst.shape.bytes();
    return op;
  }

  // A fusion around a dot or convolution runs as that matmul, the rest of the fusion in its
  // epilogue; any other fusion is one vector pass doing each of its arithmetic instructions.
  Op fusion_op(const HloComputation& c, const HloInstruction& inst, const std::string& name, const std::vector<const Value*>& in) {
    const HloComputation& fused = called(inst, "calls");
    std::size_t arithmetic = 0;
    const HloInstruction* product = nullptr;
    for (const HloInstruction& f : fused.instructions) {
      if (f.opcode == "dot" || f.opcode == "convolution") {
        if (!product) product = &f;
        continue;
      }
      if (elementwise_opcodes().count(f.opcode) || f.opcode == "reduce" || f.opcode == "reduce-window") ++arithmetic;
    }
    if (!product) return vector_op(c, inst, name, static_cast<double>(std::max<std::size_t>(1, arithmetic)), in);
    Op op = matmul_op(fused, *product, name, static_cast<double>(arithmetic));
    op.phase = phase_of(inst) == Phase::Backward ? Phase::Backward : op.phase;
    return op;
  }

  Op matmul_op(const HloComputation& c, const HloInstruction& inst, const std::string& name, double epilogue_ops) {
    const HloShape& lhs = operand_shape(c, inst, 0);
    const HloShape& rhs = operand_shape(c, inst, 1);
    if (lhs.is_tuple() || rhs.is_tuple() || inst.shape.is_tuple()) fail(inst, "a product of tuples");
    Op op;
    op.kind = OpKind::Matmul;
    op.phase = phase_of(inst);
    op.name = name;
    MatmulWork& w = op.matmul;
    w.lhs = matmul_dtype(lhs.dtype);
    w.rhs = matmul_dtype(rhs.dtype);
    w.out = matmul_dtype(inst.shape.dtype) == DType::F32 ? DType::F32 : DType::BF16;
    w.epilogue_vpu_ops_per_element = epilogue_ops;
    const std::string* precision = inst.attribute("operand_precision");
    if (!precision) precision = inst.attribute("precision_config");
    if (w.lhs == DType::F32 && precision) {
      std::string p = *precision;
      std::transform(p.begin(), p.end(), p.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
      w.passes = p.find("highest") != std::string::npos ? 6 : p.find("high") != std::string::npos ? 3 : 1;
    }
    if (inst.opcode == "dot") {
      auto dims = [&](const char* key) { const std::string* v = inst.attribute(key); return v ? hlo_int_list(*v) : std::vector<std::int64_t>{}; };
      const auto lc = dims("lhs_contracting_dims"), rc = dims("rhs_contracting_dims"), lb = dims("lhs_batch_dims"), rb = dims("rhs_batch_dims");
      auto in_range = [](const std::vector<std::int64_t>& axes, const HloShape& s) {
        return std::all_of(axes.begin(), axes.end(), [&](std::int64_t a) { return a >= 0 && a < static_cast<std::int64_t>(s.dims.size()); });
      };
      if (lc.size() != rc.size() || lb.size() != rb.size() || !in_range(lc, lhs) || !in_range(lb, lhs) || !in_range(rc, rhs) || !in_range(rb, rhs))
        fail(inst, "contracting or batch dimensions that do not pair up between the operands");
      for (std::size_t i = 0; i < lc.size(); ++i)
        if (lhs.dims[lc[i]] != rhs.dims[rc[i]])
          fail(inst, fmt::format("contracts {} (dimension {} of {}) with {} (dimension {} of {})", lhs.dims[lc[i]], lc[i], lhs.str(),
                                 rhs.dims[rc[i]], rc[i], rhs.str()));
      for (std::size_t i = 0; i < lb.size(); ++i)
        if (lhs.dims[lb[i]] != rhs.dims[rb[i]]) fail(inst, "batch dimensions of different sizes");
      std::vector<std::int64_t> lhs_free, rhs_free;
      for (std::int64_t a = 0; a < static_cast<std::int64_t>(lhs.dims.size()); ++a)
        if (std::count(lc.begin(), lc.end(), a) + std::count(lb.begin(), lb.end(), a) == 0) lhs_free.push_back(a);
      for (std::int64_t a = 0; a < static_cast<std::int64_t>(rhs.dims.size()); ++a)
        if (std::count(rc.begin(), rc.end(), a) + std::count(rb.begin(), rb.end(), a) == 0) rhs_free.push_back(a);
      w.batch = product(lhs.dims, lb);
      w.m = product(lhs.dims, lhs_free);
      w.k = product(lhs.dims, lc);
      w.n = product(rhs.dims, rhs_free);
      if (w.batch * w.m * w.n != inst.shape.element_count())
        fail(inst, fmt::format("the result {} does not hold the {} x {} x {} products of its operands", inst.shape.str(), w.batch, w.m, w.n));
    } else {
      const std::string* labels = inst.attribute("dim_labels");
      if (!labels) fail(inst, "a convolution without dim_labels");
      const std::smatch m = [&] {
        std::smatch r;
        static const std::regex kLabels("([a-z0-9]+)_([a-z0-9]+)->([a-z0-9]+)");
        if (!std::regex_match(*labels, r, kLabels)) fail(inst, fmt::format("dim_labels={}: expected such as b01f_01io->b01f", *labels));
        return r;
      }();
      const std::string rhs_labels = m[2].str(), out_labels = m[3].str(), lhs_labels = m[1].str();
      if (rhs_labels.size() != rhs.dims.size() || out_labels.size() != inst.shape.dims.size() || lhs_labels.size() != lhs.dims.size())
        fail(inst, fmt::format("dim_labels={} do not match the ranks of {}, {} and {}", *labels, lhs.str(), rhs.str(), inst.shape.str()));
      std::uint64_t window = 1, in_features = 0, out_features = 0;
      for (std::size_t i = 0; i < rhs_labels.size(); ++i) {
        if (std::isdigit(static_cast<unsigned char>(rhs_labels[i]))) window *= static_cast<std::uint64_t>(rhs.dims[i]);
        if (rhs_labels[i] == 'i') in_features = static_cast<std::uint64_t>(rhs.dims[i]);
      }
      const auto f = out_labels.find('f');
      if (f == std::string::npos || in_features == 0) fail(inst, fmt::format("dim_labels={}: no feature dimension", *labels));
      out_features = static_cast<std::uint64_t>(inst.shape.dims[f]);
      const auto lf = lhs_labels.find('f');
      const std::string* groups_attr = inst.attribute("feature_group_count");
      const std::vector<std::int64_t> group_count = groups_attr ? hlo_int_list(*groups_attr) : std::vector<std::int64_t>{1};
      if (group_count.size() != 1 || group_count[0] < 1) fail(inst, "feature_group_count: expected a positive count");
      const std::uint64_t groups = static_cast<std::uint64_t>(group_count[0]);
      if (lf != std::string::npos && static_cast<std::uint64_t>(lhs.dims[lf]) != in_features * groups && !inst.attribute("batch_group_count"))
        fail(inst, fmt::format("{} input features in {} against {} x {} groups in the kernel {}", lhs.dims[lf], lhs.str(), in_features,
                               groups, rhs.str()));
      w.n = out_features;
      w.k = window * in_features;
      w.m = out_features ? inst.shape.element_count() / out_features : 0;
      w.lhs_read_fraction = std::min(1.0, static_cast<double>(lhs.element_count()) / static_cast<double>(std::max<std::uint64_t>(1, w.m * w.k)));
    }
    op.model_flops = 2.0 * static_cast<double>(w.batch) * static_cast<double>(w.m) * static_cast<double>(w.k) * static_cast<double>(w.n);
    step_.flops += op.model_flops;
    return op;
  }

  Value emit_while(const HloInstruction& inst, const std::vector<const Value*>& in, const std::string& suffix, int depth) {
    const HloComputation& body = called(inst, "body");
    const std::uint64_t trips = trip_count(inst);
    Value carried = in.empty() ? Value{} : *in[0];
    for (std::uint64_t t = 0; t < trips; ++t) carried = emit(body, {carried}, fmt::format("{}#{}", suffix, t), depth + 1);
    return carried;
  }

  // From the compiler's known_trip_count, or a condition `counter < constant` (a scan counting
  // from 0, as JAX's and TensorFlow's loops do).
  std::uint64_t trip_count(const HloInstruction& inst) const {
    if (const std::string* config = inst.attribute("backend_config")) {
      std::smatch m;
      static const std::regex kKnown(R"re("known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"?([0-9]{1,12})"?)re");
      if (std::regex_search(*config, m, kKnown)) return std::stoull(m[1].str());
    }
    const HloComputation& cond = called(inst, "condition");
    const HloInstruction& root = cond.instructions[cond.root];
    const std::string* direction = root.attribute("direction");
    if (root.opcode == "compare" && direction && (*direction == "LT" || *direction == "GT") && root.operands.size() == 2) {
      const HloInstruction* bound = cond.find(root.operands[*direction == "LT" ? 1 : 0]);
      if (bound && bound->opcode == "constant") {
        const auto v = hlo_int_list(bound->attributes.at("literal"));
        if (v.size() == 1 && v[0] >= 0) return static_cast<std::uint64_t>(v[0]);
      }
    }
    fail(inst, "a while loop whose trip count is neither in its backend_config (known_trip_count) nor a bound its condition "
               "compares a counter with");
  }

  Value emit_collective(const HloComputation& c, const HloInstruction& inst, const std::vector<std::uint32_t>& deps, const std::string& name) {
    std::string kind = inst.opcode;
    if (kind.size() > 6 && kind.compare(kind.size() - 6, 6, "-start") == 0) kind.erase(kind.size() - 6);
    CollectiveSpec spec;
    spec.algorithm = CollectiveAlgorithm::TorusAllAxes;
    const std::uint32_t group = group_of(inst, spec);
    const std::uint64_t in_bytes = operand_bytes(c, inst);
    if (kind == "all-reduce") {
      spec.kind = CollectiveKind::AllReduce;
      spec.bytes = in_bytes;
    } else if (kind == "reduce-scatter") {
      spec.kind = CollectiveKind::ReduceScatter;
      spec.bytes = in_bytes;
    } else if (kind == "all-gather") {
      spec.kind = CollectiveKind::AllGather;
      spec.bytes = in_bytes * group;
    } else if (kind == "all-to-all") {
      spec.kind = CollectiveKind::AllToAll;
      spec.algorithm = CollectiveAlgorithm::Torus;  // axis by axis, the one way an all-to-all runs
      spec.bytes = in_bytes;
    } else {
      spec.kind = CollectiveKind::Permute;
      spec.algorithm = CollectiveAlgorithm::Ring;  // each device's buffer one step along its ring
      spec.bytes = operand_shape(c, inst, 0).bytes();
    }
    const HloShape& first = inst.operands.empty() ? inst.shape : operand_shape(c, inst, 0);
    spec.dtype = !first.is_tuple() && first.dtype == "bf16" ? DType::BF16 : DType::F32;
    HloCollectiveTotals& totals = step_.collectives[kind];
    ++totals.count;
    totals.bytes += spec.bytes;
    if (group <= 1 || spec.bytes == 0) return Value{deps, {}};  // nothing crosses a chip
    Op op;
    op.kind = OpKind::Collective;
    op.phase = phase_of(inst);
    op.name = name;
    op.collective = spec;
    return single(add_op(std::move(op), deps));
  }

  // The torus axes a collective's groups span (spec.group_axes); returns the group size.
  std::uint32_t group_of(const HloInstruction& inst, CollectiveSpec& spec) const {
    std::vector<std::vector<std::int64_t>> groups;
    if (const std::string* pairs = inst.attribute("source_target_pairs")) {
      groups = hlo_int_lists(*pairs);
      std::uint32_t axes = 0;
      for (const auto& pair : groups) {
        if (pair.size() != 2) fail(inst, "source_target_pairs: expected {source,target} pairs");
        axes |= varying_axes(inst, pair);
      }
      spec.group_axes = axes ? axes : 0x1;
      return axes ? group_size(torus_, axes) : 1;
    }
    const std::string* text = inst.attribute("replica_groups");
    if (text && text->find("<=") != std::string::npos) groups = iota_groups(inst, *text);
    else if (text) groups = hlo_int_lists(*text);
    if (groups.empty()) {  // every device
      spec.group_axes = 0x7;
      return step_.devices;
    }
    std::uint32_t mask = 0;
    for (const auto& g : groups) {
      const std::uint32_t axes = varying_axes(inst, g);
      if (&g != &groups[0] && axes != mask) fail(inst, "replica groups that span different torus axes");
      mask = axes;
      if (g.size() != group_size(torus_, axes) || std::set<std::int64_t>(g.begin(), g.end()).size() != g.size())
        fail(inst, fmt::format("a replica group of {} devices that is not whole axes of the {} torus (devices are numbered x "
                               "fastest); tpusim's collectives run over whole axes", g.size(), torus_.shape()));
    }
    spec.group_axes = mask ? mask : 0x1;
    return static_cast<std::uint32_t>(groups[0].size());
  }

  std::uint32_t varying_axes(const HloInstruction& inst, const std::vector<std::int64_t>& devices) const {
    std::uint32_t mask = 0;
    std::optional<Coords> first;
    for (std::int64_t d : devices) {
      if (d < 0 || d >= static_cast<std::int64_t>(step_.devices)) fail(inst, fmt::format("device {} of {} devices", d, step_.devices));
      const Coords coords = torus_.coords(static_cast<std::uint32_t>(d));
      if (!first) first = coords;
      for (std::size_t a = 0; a < coords.size(); ++a)
        if (coords[a] != (*first)[a]) mask |= 1u << a;
    }
    return mask;
  }

  // replica_groups=[G,S]<=[d0,d1,...] or ...<=[d0,d1]T(p0,p1): G groups of S devices, the iota over
  // the reshape dims transposed by the permutation and read in order.
  std::vector<std::vector<std::int64_t>> iota_groups(const HloInstruction& inst, const std::string& text) const {
    static const std::regex kIota(R"(\[([0-9,]+)\]<=\[([0-9,]+)\](?:T\(([0-9,]+)\))?)");
    std::smatch m;
    if (!std::regex_match(text, m, kIota)) fail(inst, fmt::format("replica_groups={}: expected [G,S]<=[dims] or [G,S]<=[dims]T(perm)", text));
    const auto shape = hlo_int_list(m[1].str()), reshape = hlo_int_list(m[2].str());
    const auto small = [](std::int64_t v) { return v >= 1 && v <= 1'000'000; };
    if (!std::all_of(shape.begin(), shape.end(), small) || !std::all_of(reshape.begin(), reshape.end(), small) || reshape.size() > 16)
      fail(inst, fmt::format("replica_groups={}: sizes of 1 to 1000000 expected", text));
    std::vector<std::int64_t> perm = m[3].matched ? hlo_int_list(m[3].str()) : std::vector<std::int64_t>{};
    if (perm.empty()) perm.resize(reshape.size()), std::iota(perm.begin(), perm.end(), 0);
    std::vector<std::int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    std::int64_t total = 1;
    for (auto d : reshape) {
      total *= d;
      if (total > 1'000'000) fail(inst, fmt::format("replica_groups={}: more than 1000000 devices", text));
    }
    if (shape.size() != 2 || perm.size() != reshape.size() || shape[0] * shape[1] != total ||
        sorted != [&] { std::vector<std::int64_t> id(perm.size()); std::iota(id.begin(), id.end(), 0); return id; }())
      fail(inst, fmt::format("replica_groups={}: sizes that do not agree", text));
    // Strides of the reshaped iota, visited in the permuted order.
    std::vector<std::int64_t> stride(reshape.size(), 1);
    for (std::size_t i = reshape.size(); i-- > 1;) stride[i - 1] = stride[i] * reshape[i];
    std::vector<std::int64_t> flat;
    std::vector<std::int64_t> index(perm.size(), 0);
    for (std::int64_t n = 0; n < total; ++n) {
      std::int64_t id = 0;
      for (std::size_t i = 0; i < perm.size(); ++i) id += index[i] * stride[static_cast<std::size_t>(perm[i])];
      flat.push_back(id);
      for (std::size_t i = perm.size(); i-- > 0;) {
        if (++index[i] < reshape[static_cast<std::size_t>(perm[i])]) break;
        index[i] = 0;
      }
    }
    std::vector<std::vector<std::int64_t>> groups(static_cast<std::size_t>(shape[0]));
    for (std::size_t i = 0; i < flat.size(); ++i) groups[i / static_cast<std::size_t>(shape[1])].push_back(flat[i]);
    return groups;
  }

  const HloModule& m_;
  std::string origin_;
  Torus torus_;
  HloStep step_;
  std::uint64_t custom_calls_ = 0;
};

}  // namespace

std::uint32_t hlo_device_count(const HloModule& module, const std::string& origin) {
  auto count = [&](const char* key) -> std::uint64_t {
    const auto it = module.attributes.find(key);
    if (it == module.attributes.end()) return 1;
    const auto v = hlo_int_list(it->second);
    if (v.size() != 1 || v[0] < 1 || v[0] > 1'000'000)
      throw std::invalid_argument(fmt::format("{}: HloModule {}={}: expected a positive count", origin, key, it->second));
    return static_cast<std::uint64_t>(v[0]);
  };
  const std::uint64_t devices = count("num_partitions") * count("replica_count");
  if (devices > 1'000'000) throw std::invalid_argument(fmt::format("{}: {} devices: beyond what tpusim models", origin, devices));
  return static_cast<std::uint32_t>(devices);
}

HloStep lower_hlo_module(const HloModule& module, const std::string& origin, const std::vector<std::uint32_t>& torus_dims) {
  return Lowering(module, origin, torus_dims).run();
}

}  // namespace tpusim

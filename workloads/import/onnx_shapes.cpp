#include "workloads/import/onnx_shapes.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tpusim {
namespace {

constexpr std::size_t kMaxFoldedElements = 1024;  // values kept for shape arithmetic, not data
constexpr std::int64_t kMaxDim = std::int64_t{1} << 40;

class ShapeInference {
 public:
  ShapeInference(const OnnxModel& m, std::int64_t batch, std::string origin, FixedBatch fixed)
      : m_(m), batch_(batch), origin_(std::move(origin)), fixed_(std::move(fixed)) {}

  OnnxShapes run() {
    for (const auto& t : m_.initializers) {
      set(t.name, t.dims, t.has_values ? std::optional(t.values) : std::nullopt);
      elem_type_[t.name] = t.data_type;
    }
    for (const auto& in : m_.inputs) {
      if (out_.shape.count(in.name)) continue;
      elem_type_[in.name] = in.elem_type;
      OnnxShape s;
      for (const auto& d : in.dims) s.push_back(d.value >= 0 ? d.value : batch_);
      if (in.name == fixed_.input && fixed_.exported > 0 && !s.empty()) s[0] = batch_;
      set(in.name, s, std::nullopt);
    }
    for (std::size_t i = 0; i < m_.nodes.size(); ++i) node(i);
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(std::size_t i, const std::string& what) const {
    const OnnxNode& n = m_.nodes[i];
    throw std::invalid_argument(fmt::format("{}: node {} (\"{}\", {}): {}", origin_, i, n.name, n.op_type, what));
  }

  void set(const std::string& name, const OnnxShape& s, std::optional<std::vector<double>> v) {
    out_.shape[name] = s;
    if (v && v->size() <= kMaxFoldedElements) out_.value[name] = std::move(*v);
  }

  // ---- operands ----
  bool has(std::size_t i, std::size_t k) const {
    const OnnxNode& n = m_.nodes[i];
    return k < n.inputs.size() && !n.inputs[k].empty();
  }
  const OnnxShape& shape(std::size_t i, std::size_t k) const {
    if (!has(i, k)) fail(i, fmt::format("expected input {}", k));
    const auto it = out_.shape.find(m_.nodes[i].inputs[k]);
    if (it == out_.shape.end()) fail(i, fmt::format("the shape of input {} (\"{}\") is unknown", k, m_.nodes[i].inputs[k]));
    return it->second;
  }
  const std::vector<double>* value(std::size_t i, std::size_t k) const {
    if (!has(i, k)) return nullptr;
    const auto it = out_.value.find(m_.nodes[i].inputs[k]);
    return it == out_.value.end() ? nullptr : &it->second;
  }
  std::vector<std::int64_t> ints(std::size_t i, std::size_t k) const {
    const auto* v = value(i, k);
    if (!v) fail(i, fmt::format("input {} (\"{}\") must be computable from shapes and constants", k, m_.nodes[i].inputs[k]));
    std::vector<std::int64_t> r;
    for (double d : *v) {
      // Shape arithmetic stays far inside int64; a damaged file's value may not (or be NaN).
      if (!(std::abs(d) <= static_cast<double>(kMaxDim) * 1024)) fail(i, fmt::format("input {} holds {}, beyond any shape", k, d));
      r.push_back(static_cast<std::int64_t>(d));
    }
    return r;
  }
  static std::int64_t elements(const OnnxShape& s) {
    std::int64_t n = 1;
    for (auto d : s) n *= d;
    return n;
  }
  std::size_t axis(std::size_t i, std::int64_t a, std::size_t rank) const {
    const std::int64_t r = static_cast<std::int64_t>(rank);
    if (a < -r || a >= r) fail(i, fmt::format("axis {} of a tensor of rank {}", a, rank));
    return static_cast<std::size_t>(a < 0 ? a + r : a);
  }
  OnnxShape broadcast(std::size_t i, OnnxShape a, OnnxShape b) const {
    if (a.size() < b.size()) std::swap(a, b);
    b.insert(b.begin(), a.size() - b.size(), 1);
    for (std::size_t d = 0; d < a.size(); ++d) {
      if (a[d] == b[d] || b[d] == 1) continue;
      if (a[d] == 1) a[d] = b[d];
      else fail(i, fmt::format("shapes [{}] and [{}] do not broadcast", fmt::join(a, ", "), fmt::join(b, ", ")));
    }
    return a;
  }
  void output(std::size_t i, std::size_t k, const OnnxShape& s, std::optional<std::vector<double>> v = std::nullopt) {
    const OnnxNode& n = m_.nodes[i];
    for (auto d : s)
      if (d < 0 || d > kMaxDim) fail(i, fmt::format("output {} would have a dimension of {}", k, d));
    if (k < n.outputs.size() && !n.outputs[k].empty()) set(n.outputs[k], s, std::move(v));
  }

  // Elementwise over the operands' values, broadcast when one is a scalar.
  std::optional<std::vector<double>> fold(std::size_t i, const std::function<double(double, double)>& f) const {
    const auto* a = value(i, 0);
    const auto* b = value(i, 1);
    if (!a || !b) return std::nullopt;
    if (a->size() != b->size() && a->size() != 1 && b->size() != 1) return std::nullopt;
    std::vector<double> r(std::max(a->size(), b->size()));
    for (std::size_t k = 0; k < r.size(); ++k) r[k] = f((*a)[a->size() == 1 ? 0 : k], (*b)[b->size() == 1 ? 0 : k]);
    return r;
  }
  bool integer_input(std::size_t i) const {
    // TensorProto.DataType of integer kinds: the values of shape arithmetic.
    const auto it = elem_type_.find(m_.nodes[i].inputs.at(0));
    return it == elem_type_.end() || it->second != 1;
  }

  // Ops whose output has their first input's shape.
  static constexpr const char* kSameShape[] = {"Relu", "Sigmoid", "Tanh", "Erf", "Sqrt", "Softmax", "LogSoftmax", "HardSwish",
                                               "HardSigmoid", "Clip", "Identity", "Not", "Trilu", "Neg", "Exp", "Log",
                                               "Abs", "Gelu", "Reciprocal", "Floor", "Ceil", "Sign", "IsNaN", "LeakyRelu"};

  void node(std::size_t i) {
    const auto rule = rules().find(m_.nodes[i].op_type);
    if (rule == rules().end()) fail(i, "tpusim cannot infer the shape of this op");
    (this->*(rule->second))(i);
  }

  // Each op's shape rule (and, for shape arithmetic, its values), by op type.
  using Rule = void (ShapeInference::*)(std::size_t);
  static const std::map<std::string, Rule>& rules() {
    static const std::map<std::string, Rule> table = [] {
      std::map<std::string, Rule> t;
      t["Constant"] = &ShapeInference::rule_constant;
      for (const char* op : kSameShape) t[op] = &ShapeInference::rule_same_shape;
      t["Shape"] = &ShapeInference::rule_shape;
      t["Cast"] = &ShapeInference::rule_cast;
      t["Add"] = &ShapeInference::rule_add_like;
      t["Sub"] = &ShapeInference::rule_add_like;
      t["Mul"] = &ShapeInference::rule_add_like;
      t["Div"] = &ShapeInference::rule_add_like;
      t["Pow"] = &ShapeInference::rule_add_like;
      t["Equal"] = &ShapeInference::rule_add_like;
      t["Max"] = &ShapeInference::rule_add_like;
      t["Min"] = &ShapeInference::rule_add_like;
      t["Where"] = &ShapeInference::rule_where;
      t["Gather"] = &ShapeInference::rule_gather;
      t["Unsqueeze"] = &ShapeInference::rule_unsqueeze_like;
      t["Squeeze"] = &ShapeInference::rule_unsqueeze_like;
      t["Concat"] = &ShapeInference::rule_concat;
      t["Range"] = &ShapeInference::rule_range;
      t["ConstantOfShape"] = &ShapeInference::rule_constant_of_shape;
      t["Reshape"] = &ShapeInference::rule_reshape;
      t["Expand"] = &ShapeInference::rule_expand;
      t["Pad"] = &ShapeInference::rule_pad;
      t["Transpose"] = &ShapeInference::rule_transpose;
      t["Slice"] = &ShapeInference::rule_slice;
      t["Split"] = &ShapeInference::rule_split;
      t["MatMul"] = &ShapeInference::rule_mat_mul;
      t["Gemm"] = &ShapeInference::rule_gemm;
      t["LayerNormalization"] = &ShapeInference::rule_layer_normalization_like;
      t["BatchNormalization"] = &ShapeInference::rule_layer_normalization_like;
      t["Dropout"] = &ShapeInference::rule_layer_normalization_like;
      t["Conv"] = &ShapeInference::rule_conv_like;
      t["MaxPool"] = &ShapeInference::rule_conv_like;
      t["AveragePool"] = &ShapeInference::rule_conv_like;
      t["GlobalAveragePool"] = &ShapeInference::rule_global_average_pool_like;
      t["GlobalMaxPool"] = &ShapeInference::rule_global_average_pool_like;
      t["Flatten"] = &ShapeInference::rule_flatten;
      t["ReduceMean"] = &ShapeInference::rule_reduce_mean_like;
      t["ReduceSum"] = &ShapeInference::rule_reduce_mean_like;
      t["ReduceMax"] = &ShapeInference::rule_reduce_mean_like;
      return t;
    }();
    return table;
  }

  void rule_constant(std::size_t i) {
    const OnnxNode& n = m_.nodes[i];
    const OnnxAttribute* v = m_.nodes[i].attribute("value");
    if (!v) {
      if (const auto* vi = m_.nodes[i].attribute("value_int")) return output(i, 0, {}, std::vector<double>{static_cast<double>(vi->i)});
      if (const auto* vf = m_.nodes[i].attribute("value_float")) return output(i, 0, {}, std::vector<double>{vf->f});
      if (const auto* vs = m_.nodes[i].attribute("value_ints")) return output(i, 0, {static_cast<std::int64_t>(vs->ints.size())}, to_doubles(vs->ints));
      fail(i, "a Constant without a tensor value");
    }
    elem_type_[n.outputs.at(0)] = v->t.data_type;
    return output(i, 0, v->t.dims, v->t.has_values ? std::optional(v->t.values) : std::nullopt);
  }

  void rule_same_shape(std::size_t i) {
    const std::string& op = m_.nodes[i].op_type;
    propagate_type(i);
    const auto* v = value(i, 0);
    std::optional<std::vector<double>> folded;
    if (v && op == "Identity") folded = *v;
    if (v && op == "Not") {
      folded = *v;
      for (double& x : *folded) x = x == 0 ? 1 : 0;
    }
    return output(i, 0, shape(i, 0), folded);
  }

  void rule_shape(std::size_t i) {
    const OnnxNode& n = m_.nodes[i];
    const OnnxShape& s = shape(i, 0);
    std::int64_t rank = static_cast<std::int64_t>(s.size());
    std::int64_t start = m_.nodes[i].int_attribute("start", 0), end = m_.nodes[i].int_attribute("end", rank);
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::clamp<std::int64_t>(start, 0, rank);
    end = std::clamp<std::int64_t>(end, start, rank);
    std::vector<double> v(s.begin() + start, s.begin() + end);
    elem_type_[n.outputs.at(0)] = 7;
    return output(i, 0, {end - start}, v);
  }

  void rule_cast(std::size_t i) {
    const OnnxNode& n = m_.nodes[i];
    elem_type_[n.outputs.at(0)] = static_cast<std::int32_t>(m_.nodes[i].int_attribute("to", 1));
    const auto* v = value(i, 0);
    std::optional<std::vector<double>> folded;
    if (v) {
      folded = *v;
      if (elem_type_[n.outputs.at(0)] != 1 && elem_type_[n.outputs.at(0)] != 11)
        for (double& x : *folded) x = std::trunc(x);
    }
    return output(i, 0, shape(i, 0), folded);
  }

  void rule_add_like(std::size_t i) {
    const std::string& op = m_.nodes[i].op_type;
    propagate_type(i);
    const bool integer = integer_input(i);
    std::function<double(double, double)> f;
    if (op == "Add") f = std::plus<double>();
    if (op == "Sub") f = std::minus<double>();
    if (op == "Mul") f = std::multiplies<double>();
    if (op == "Div") f = [integer](double a, double b) { return b == 0 ? 0.0 : integer ? std::trunc(a / b) : a / b; };
    if (op == "Pow") f = [](double a, double b) { return std::pow(a, b); };
    if (op == "Equal") f = [](double a, double b) { return a == b ? 1.0 : 0.0; };
    if (op == "Max") f = [](double a, double b) { return std::max(a, b); };
    if (op == "Min") f = [](double a, double b) { return std::min(a, b); };
    return output(i, 0, broadcast(i, shape(i, 0), shape(i, 1)), fold(i, f));
  }

  void rule_where(std::size_t i) {
    const OnnxShape s = broadcast(i, broadcast(i, shape(i, 0), shape(i, 1)), shape(i, 2));
    std::optional<std::vector<double>> folded;
    const auto *c = value(i, 0), *x = value(i, 1), *y = value(i, 2);
    const std::size_t count = static_cast<std::size_t>(elements(s));
    if (c && x && y && count <= kMaxFoldedElements && c->size() == count && x->size() == count && y->size() == count) {
      folded = std::vector<double>(count);
      for (std::size_t k = 0; k < count; ++k) (*folded)[k] = (*c)[k] != 0 ? (*x)[k] : (*y)[k];
    }
    return output(i, 0, s, folded);
  }

  void rule_gather(std::size_t i) {
    const OnnxShape& data = shape(i, 0);
    const OnnxShape& indices = shape(i, 1);
    const std::size_t a = axis(i, m_.nodes[i].int_attribute("axis", 0), data.size());
    OnnxShape s(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(a));
    s.insert(s.end(), indices.begin(), indices.end());
    s.insert(s.end(), data.begin() + static_cast<std::ptrdiff_t>(a) + 1, data.end());
    std::optional<std::vector<double>> folded;
    const auto *dv = value(i, 0), *iv = value(i, 1);
    if (dv && iv && data.size() == 1) {
      folded.emplace();
      for (double idx : *iv) {
        if (!(std::abs(idx) <= static_cast<double>(kMaxDim))) fail(i, fmt::format("index {} of a dimension of {}", idx, data[0]));
        std::int64_t k = static_cast<std::int64_t>(idx);
        if (k < 0) k += data[0];
        if (k < 0 || k >= data[0]) fail(i, fmt::format("index {} of a dimension of {}", idx, data[0]));
        folded->push_back((*dv)[static_cast<std::size_t>(k)]);
      }
    }
    propagate_type(i);
    return output(i, 0, s, folded);
  }

  void rule_unsqueeze_like(std::size_t i) {
    const std::string& op = m_.nodes[i].op_type;
    OnnxShape s = shape(i, 0);
    std::vector<std::int64_t> axes = has(i, 1) ? ints(i, 1) : m_.nodes[i].ints_attribute("axes");
    propagate_type(i);
    const auto* v = value(i, 0);
    if (op == "Unsqueeze") {
      const std::size_t rank = s.size() + axes.size();
      std::vector<std::size_t> at;
      for (auto a : axes) at.push_back(axis(i, a, rank));
      std::sort(at.begin(), at.end());
      for (auto a : at) s.insert(s.begin() + static_cast<std::ptrdiff_t>(std::min(a, s.size())), 1);
    } else {
      if (axes.empty()) {
        s.erase(std::remove(s.begin(), s.end(), 1), s.end());
      } else {
        std::vector<std::size_t> at;
        for (auto a : axes) at.push_back(axis(i, a, s.size()));
        std::sort(at.rbegin(), at.rend());
        for (auto a : at) {
          if (s[a] != 1) fail(i, fmt::format("cannot squeeze axis {} of size {}", a, s[a]));
          s.erase(s.begin() + static_cast<std::ptrdiff_t>(a));
        }
      }
    }
    return output(i, 0, s, v ? std::optional(*v) : std::nullopt);
  }

  void rule_concat(std::size_t i) {
    const OnnxNode& n = m_.nodes[i];
    OnnxShape s = shape(i, 0);
    const std::size_t a = axis(i, m_.nodes[i].int_attribute("axis", 0), s.size());
    std::optional<std::vector<double>> folded = std::vector<double>{};
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      const OnnxShape& sk = shape(i, k);
      if (sk.size() != s.size()) fail(i, "inputs of different ranks");
      if (k > 0) s[a] += sk[a];
      const auto* v = value(i, k);
      if (v && folded && s.size() == 1) folded->insert(folded->end(), v->begin(), v->end());
      else folded.reset();
    }
    propagate_type(i);
    return output(i, 0, s, folded);
  }

  void rule_range(std::size_t i) {
    const auto *start = value(i, 0), *limit = value(i, 1), *delta = value(i, 2);
    if (!start || !limit || !delta || start->size() != 1 || limit->size() != 1 || delta->size() != 1 || (*delta)[0] == 0)
      fail(i, "its start, limit and delta must be computable scalars");
    const double count = std::max(0.0, std::ceil(((*limit)[0] - (*start)[0]) / (*delta)[0]));
    if (!(count <= static_cast<double>(kMaxDim))) fail(i, fmt::format("a range of {} elements", count));
    std::vector<double> v;
    for (std::int64_t k = 0; k < static_cast<std::int64_t>(count) && v.size() <= kMaxFoldedElements; ++k)
      v.push_back((*start)[0] + static_cast<double>(k) * (*delta)[0]);
    propagate_type(i);
    return output(i, 0, {static_cast<std::int64_t>(count)}, v);
  }

  void rule_constant_of_shape(std::size_t i) {
    const OnnxNode& n = m_.nodes[i];
    const auto s = ints(i, 0);
    const OnnxAttribute* v = m_.nodes[i].attribute("value");
    const double fill = v && v->t.has_values && !v->t.values.empty() ? v->t.values[0] : 0.0;
    const std::int64_t count = elements(s);
    std::optional<std::vector<double>> folded;
    if (count >= 0 && static_cast<std::size_t>(count) <= kMaxFoldedElements) folded = std::vector<double>(static_cast<std::size_t>(count), fill);
    if (v) elem_type_[n.outputs.at(0)] = v->t.data_type;
    return output(i, 0, s, folded);
  }

  void rule_reshape(std::size_t i) {
    const OnnxShape& in = shape(i, 0);
    std::vector<std::int64_t> target = ints(i, 1);
    if (follows_batch(target) && !in.empty() && in[0] == batch_) target[0] = batch_;
    std::int64_t known = 1, infer = -1;
    for (std::size_t d = 0; d < target.size(); ++d) {
      if (target[d] == 0 && !m_.nodes[i].int_attribute("allowzero", 0)) {
        if (d >= in.size()) fail(i, "a 0 in the target shape beyond the input's rank");
        target[d] = in[d];
      }
      if (target[d] == -1) {
        if (infer >= 0) fail(i, "two -1 in the target shape");
        infer = static_cast<std::int64_t>(d);
      } else {
        known *= target[d];
      }
    }
    if (infer >= 0) {
      if (known == 0 || elements(in) % known) fail(i, fmt::format("[{}] does not reshape to [{}]", fmt::join(in, ", "), fmt::join(ints(i, 1), ", ")));
      target[static_cast<std::size_t>(infer)] = elements(in) / known;
    }
    if (elements(target) != elements(in))
      fail(i, fmt::format("[{}] does not reshape to [{}]", fmt::join(in, ", "), fmt::join(target, ", ")));
    propagate_type(i);
    const auto* v = value(i, 0);
    return output(i, 0, target, v ? std::optional(*v) : std::nullopt);
  }

  void rule_expand(std::size_t i) {
    auto target = ints(i, 1);
    if (follows_batch(target)) target[0] = batch_;
    return output(i, 0, broadcast(i, shape(i, 0), target));
  }

  void rule_pad(std::size_t i) {
    OnnxShape s = shape(i, 0);
    const auto pads = ints(i, 1);  // [begin of each axis..., end of each axis...]
    if (pads.size() != 2 * s.size()) fail(i, fmt::format("{} pads for a tensor of rank {}", pads.size(), s.size()));
    for (std::size_t d = 0; d < s.size(); ++d) {
      if (std::abs(pads[d]) > kMaxDim || std::abs(pads[d + s.size()]) > kMaxDim) fail(i, "a pad beyond any tensor");
      s[d] += pads[d] + pads[d + s.size()];
      if (s[d] < 0) fail(i, "pads that crop more than the tensor holds");
    }
    return output(i, 0, s);
  }

  void rule_transpose(std::size_t i) {
    const OnnxShape& in = shape(i, 0);
    std::vector<std::int64_t> perm = m_.nodes[i].ints_attribute("perm");
    if (perm.empty())
      for (std::size_t d = in.size(); d-- > 0;) perm.push_back(static_cast<std::int64_t>(d));
    if (perm.size() != in.size()) fail(i, "perm of another rank than the input");
    OnnxShape s;
    for (auto p : perm) s.push_back(in[axis(i, p, in.size())]);
    return output(i, 0, s);
  }

  void rule_slice(std::size_t i) {
    OnnxShape s = shape(i, 0);
    const auto starts = ints(i, 1), ends = ints(i, 2);
    std::vector<std::int64_t> axes = has(i, 3) ? ints(i, 3) : std::vector<std::int64_t>{};
    std::vector<std::int64_t> steps = has(i, 4) ? ints(i, 4) : std::vector<std::int64_t>(starts.size(), 1);
    if (axes.empty())
      for (std::size_t d = 0; d < starts.size(); ++d) axes.push_back(static_cast<std::int64_t>(d));
    if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
      fail(i, "starts, ends, axes and steps of different lengths");
    const auto* v = value(i, 0);
    std::optional<std::vector<double>> folded;
    for (std::size_t k = 0; k < starts.size(); ++k) {
      const std::size_t a = axis(i, axes[k], s.size());
      const std::int64_t dim = s[a], step = steps[k];
      if (step == 0) fail(i, "a step of 0");
      // ONNX's clamping: [0, dim] going forward; going backward a start in [0, dim - 1] and an
      // end in [-1, dim - 1] (-1: through the first element).
      auto clamp_index = [&](std::int64_t x, bool is_end) {
        if (x < 0) x += dim;
        if (step > 0) return std::clamp<std::int64_t>(x, 0, dim);
        return std::clamp<std::int64_t>(x, is_end ? -1 : 0, dim - 1);
      };
      const std::int64_t b = clamp_index(starts[k], false), e = clamp_index(ends[k], true);
      const std::int64_t count = step > 0 ? std::max<std::int64_t>(0, (e - b + step - 1) / step)
                                          : std::max<std::int64_t>(0, (b - e + (-step) - 1) / (-step));
      if (v && s.size() == 1) {
        folded.emplace();
        for (std::int64_t x = 0; x < count; ++x) folded->push_back((*v)[static_cast<std::size_t>(b + x * step)]);
      }
      s[a] = count;
    }
    propagate_type(i);
    return output(i, 0, s, folded);
  }

  void rule_split(std::size_t i) {
    const OnnxNode& n = m_.nodes[i];
    const OnnxShape& in = shape(i, 0);
    const std::size_t a = axis(i, m_.nodes[i].int_attribute("axis", 0), in.size());
    std::vector<std::int64_t> sizes = has(i, 1) ? ints(i, 1) : m_.nodes[i].ints_attribute("split");
    if (sizes.empty()) {
      const std::int64_t parts = static_cast<std::int64_t>(n.outputs.size());
      if (parts == 0 || in[a] % parts) fail(i, fmt::format("{} does not split into {} equal parts", in[a], parts));
      sizes.assign(static_cast<std::size_t>(parts), in[a] / parts);
    }
    if (sizes.size() != n.outputs.size() || std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0}) != in[a])
      fail(i, "split sizes that do not add up to the axis");
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      OnnxShape s = in;
      s[a] = sizes[k];
      output(i, k, s);
    }
    return;
  }

  void rule_mat_mul(std::size_t i) {
    OnnxShape a = shape(i, 0), b = shape(i, 1);
    if (a.empty() || b.empty()) fail(i, "a product of scalars");
    const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
    if (a_vec) a.insert(a.begin(), 1);
    if (b_vec) b.push_back(1);
    if (a.back() != b[b.size() - 2])
      fail(i, fmt::format("[{}] and [{}] do not multiply", fmt::join(shape(i, 0), ", "), fmt::join(shape(i, 1), ", ")));
    OnnxShape batch = broadcast(i, OnnxShape(a.begin(), a.end() - 2), OnnxShape(b.begin(), b.end() - 2));
    if (!a_vec) batch.push_back(a[a.size() - 2]);
    if (!b_vec) batch.push_back(b.back());
    return output(i, 0, batch);
  }

  void rule_gemm(std::size_t i) {
    const OnnxShape &a = shape(i, 0), &b = shape(i, 1);
    if (a.size() != 2 || b.size() != 2) fail(i, "Gemm of operands that are not matrices");
    const std::int64_t m = m_.nodes[i].int_attribute("transA", 0) ? a[1] : a[0], k = m_.nodes[i].int_attribute("transA", 0) ? a[0] : a[1];
    const std::int64_t kb = m_.nodes[i].int_attribute("transB", 0) ? b[1] : b[0], nn = m_.nodes[i].int_attribute("transB", 0) ? b[0] : b[1];
    if (k != kb) fail(i, fmt::format("[{}] and [{}] do not multiply", fmt::join(a, ", "), fmt::join(b, ", ")));
    return output(i, 0, {m, nn});
  }

  void rule_layer_normalization_like(std::size_t i) {
    const OnnxNode& n = m_.nodes[i];
    const std::string& op = m_.nodes[i].op_type;
    const OnnxShape& in = shape(i, 0);
    output(i, 0, in);
    if (op == "Dropout") return output(i, 1, in);  // the mask
    if (op == "BatchNormalization") {
      const OnnxShape channels = {in.size() > 1 ? in[1] : 1};
      for (std::size_t k = 1; k < n.outputs.size(); ++k) output(i, k, channels);  // running mean and variance
      return;
    }
    OnnxShape stats = in;  // mean and inverse standard deviation, reduced over the normalized axes
    for (std::size_t d = axis(i, m_.nodes[i].int_attribute("axis", -1), in.size()); d < stats.size(); ++d) stats[d] = 1;
    for (std::size_t k = 1; k < n.outputs.size(); ++k) output(i, k, stats);
    return;
  }

  void rule_conv_like(std::size_t i) {
    const OnnxNode& n = m_.nodes[i];
    const std::string& op = m_.nodes[i].op_type;
    const OnnxShape& in = shape(i, 0);
    if (in.size() != 4 && in.size() != 3) fail(i, "a window over an input that is not [N, C, H, W] or [N, C, L]");
    const std::size_t axes = in.size() - 2;  // 2: an image's height and width; 1: a sequence's steps
    std::vector<std::int64_t> kernel = m_.nodes[i].ints_attribute("kernel_shape");
    std::int64_t channels = in[1];
    if (op == "Conv") {
      const OnnxShape& w = shape(i, 1);
      if (w.size() != axes + 2) fail(i, axes == 2 ? "a weight that is not [out, in/groups, kh, kw]" : "a weight that is not [out, in/groups, k]");
      kernel = OnnxShape(w.begin() + 2, w.end());
      channels = w[0];
    }
    if (kernel.size() != axes) fail(i, fmt::format("expected a {}D kernel", axes));
    auto strides = m_.nodes[i].ints_attribute("strides"), pads = m_.nodes[i].ints_attribute("pads"), dilations = m_.nodes[i].ints_attribute("dilations");
    if (strides.empty()) strides.assign(axes, 1);
    if (pads.empty()) pads.assign(2 * axes, 0);
    if (dilations.empty()) dilations.assign(axes, 1);
    // Sizes a damaged file may give otherwise; bounded so that the window arithmetic stays exact.
    auto within = [](const std::vector<std::int64_t>& v, std::int64_t lo, std::int64_t hi) {
      return std::all_of(v.begin(), v.end(), [&](std::int64_t x) { return x >= lo && x <= hi; });
    };
    if (strides.size() != axes || dilations.size() != axes || pads.size() != 2 * axes)
      fail(i, fmt::format("expected {} strides, {} dilations and {} pads for a {}D window", axes, axes, 2 * axes, axes));
    if (!within(strides, 1, kMaxDim) || !within(dilations, 1, 1 << 20) || !within(pads, 0, kMaxDim) || !within(kernel, 1, kMaxDim))
      fail(i, "strides, dilations, pads or kernel out of range");
    const bool same = m_.nodes[i].attribute("auto_pad") && m_.nodes[i].attribute("auto_pad")->s.rfind("SAME", 0) == 0;
    const bool ceil_mode = m_.nodes[i].int_attribute("ceil_mode", 0) != 0;
    OnnxShape s = {in[0], channels};
    for (std::size_t d = 0; d < axes; ++d) {
      const std::int64_t span = dilations[d] * (kernel[d] - 1) + 1, padded = in[2 + d] + pads[d] + pads[d + axes];
      std::int64_t size = 0;
      if (same) size = (in[2 + d] + strides[d] - 1) / strides[d];
      else if (padded < span) fail(i, "the window does not fit the input");
      else if (ceil_mode) {
        size = (padded - span + strides[d] - 1) / strides[d] + 1;
        if ((size - 1) * strides[d] >= in[2 + d] + pads[d]) --size;
      } else {
        size = (padded - span) / strides[d] + 1;
      }
      s.push_back(size);
    }
    output(i, 0, s);
    if (n.outputs.size() > 1) output(i, 1, s);  // MaxPool's indices
    return;
  }

  void rule_global_average_pool_like(std::size_t i) {
    OnnxShape s = shape(i, 0);
    for (std::size_t d = 2; d < s.size(); ++d) s[d] = 1;
    return output(i, 0, s);
  }

  void rule_flatten(std::size_t i) {
    const OnnxShape& in = shape(i, 0);
    const std::size_t a = m_.nodes[i].int_attribute("axis", 1) == static_cast<std::int64_t>(in.size()) ? in.size() : axis(i, m_.nodes[i].int_attribute("axis", 1), in.size());
    return output(i, 0, {elements(OnnxShape(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(a))),
                         elements(OnnxShape(in.begin() + static_cast<std::ptrdiff_t>(a), in.end()))});
  }

  void rule_reduce_mean_like(std::size_t i) {
    OnnxShape s = shape(i, 0);
    std::vector<std::int64_t> axes = m_.nodes[i].ints_attribute("axes");
    if (axes.empty() && has(i, 1)) axes = ints(i, 1);
    std::vector<bool> reduce(s.size(), axes.empty());
    for (auto a : axes) reduce[axis(i, a, s.size())] = true;
    OnnxShape r;
    for (std::size_t d = 0; d < s.size(); ++d)
      if (!reduce[d]) r.push_back(s[d]);
      else if (m_.nodes[i].int_attribute("keepdims", 1)) r.push_back(1);
    return output(i, 0, r);
  }

  void propagate_type(std::size_t i) {
    const OnnxNode& n = m_.nodes[i];
    const auto it = elem_type_.find(n.inputs.at(0));
    if (it != elem_type_.end())
      for (const auto& out : n.outputs) elem_type_[out] = it->second;
  }
  static std::vector<double> to_doubles(const std::vector<std::int64_t>& v) { return std::vector<double>(v.begin(), v.end()); }

  // A fixed-batch export's shape constant whose leading size is the exported batch.
  bool follows_batch(const std::vector<std::int64_t>& target) const {
    return fixed_.exported > 0 && batch_ != fixed_.exported && !target.empty() && target[0] == fixed_.exported;
  }

  const OnnxModel& m_;
  std::int64_t batch_;
  std::string origin_;
  FixedBatch fixed_;
  OnnxShapes out_;
  std::map<std::string, std::int32_t> elem_type_;
};

}  // namespace

OnnxShapes infer_onnx_shapes(const OnnxModel& model, std::int64_t batch, const std::string& origin, const FixedBatch& fixed) {
  return ShapeInference(model, batch, origin, fixed).run();
}

}  // namespace tpusim

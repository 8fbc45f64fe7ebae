#include "workloads/import/onnx_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>

#include "onnx/onnx.pb.h"

namespace tpusim {
namespace {

// Well-formed UTF-8 (no overlong forms, surrogates or code points beyond U+10FFFF): names become
// JSON strings in the workload, which must be UTF-8.
bool is_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t extra = 0;
    std::uint32_t code = 0;
    if (c < 0x80) extra = 0, code = c;
    else if ((c & 0xE0) == 0xC0) extra = 1, code = c & 0x1F;
    else if ((c & 0xF0) == 0xE0) extra = 2, code = c & 0x0F;
    else if ((c & 0xF8) == 0xF0) extra = 3, code = c & 0x07;
    else return false;
    if (i + extra >= text.size()) return false;  // cut off inside a character
    for (std::size_t k = 1; k <= extra; ++k) {
      const auto d = static_cast<unsigned char>(text[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      code = code << 6 | (d & 0x3F);
    }
    static constexpr std::uint32_t kSmallest[] = {0, 0x80, 0x800, 0x10000};
    if (code < kSmallest[extra] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
    i += extra + 1;
  }
  return true;
}

namespace io = google::protobuf::io;
using WireFormatLite = google::protobuf::internal::WireFormatLite;

// Bounds that keep a damaged or hostile file from taking the machine's memory.
constexpr std::uint32_t kMaxMessageBytes = 64u << 20;  // one node, value info or opset entry
constexpr std::size_t kMaxNodes = 1000000;
constexpr std::size_t kMaxDims = 64;

// Field numbers of onnx.proto (ONNX 1.12) the reader walks itself.
enum ModelField { kIrVersion = 1, kProducerName = 2, kProducerVersion = 3, kGraph = 7, kOpsetImport = 8, kTrainingInfo = 20 };
enum TrainingInfoField { kUpdateBinding = 4 };
enum GraphField { kNode = 1, kGraphName = 2, kInitializer = 5, kInput = 11, kOutput = 12, kValueInfo = 13, kSparseInitializer = 15 };
enum TensorField { kDims = 1, kDataType = 2, kFloatData = 4, kInt32Data = 5, kInt64Data = 7, kName = 8, kRawData = 9, kDoubleData = 10,
                   kExternalData = 13, kDataLocation = 14 };

class Reader {
 public:
  Reader(io::ZeroCopyInputStream& stream, std::string origin) : in_(&stream), origin_(std::move(origin)) {}

  OnnxModel read() {
    bool has_graph = false, any_field = false;
    for (std::uint32_t tag; (tag = in_.ReadTag()) != 0;) {
      any_field = true;
      switch (WireFormatLite::GetTagFieldNumber(tag)) {
        case kIrVersion: model_.ir_version = static_cast<std::int64_t>(varint(tag)); break;
        case kProducerName: model_.producer_name = bytes(tag); break;
        case kProducerVersion: model_.producer_version = bytes(tag); break;
        case kOpsetImport: opset(bytes(tag)); break;
        case kGraph: {
          const int limit = begin_message(tag);
          graph();
          end_message(limit);
          has_graph = true;
          break;
        }
        case kTrainingInfo: {
          const int limit = begin_message(tag);
          training_info();
          end_message(limit);
          break;
        }
        default: skip(tag);
      }
    }
    if (!in_.ConsumedEntireMessage()) corrupt();
    if (!any_field) fail("not an ONNX model (empty)");
    if (!has_graph) fail("not an ONNX model (no graph)");
    if (model_.opset == 0) fail("not an ONNX model (no opset of the default domain)");
    if (model_.opset < 0) fail(fmt::format("opset {}: not an opset version (they count from 1)", model_.opset));
    if (model_.opset > kMaxOnnxOpset)
      fail(fmt::format("opset {}, newer than tpusim reads ({} at most); export again with opset_version={}", model_.opset,
                       kMaxOnnxOpset, kMaxOnnxOpset));
    check_graph();
    return std::move(model_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw std::invalid_argument(fmt::format("{}: {}", origin_, what)); }
  [[noreturn]] void corrupt() const {
    fail(fmt::format("not an ONNX model, or truncated or corrupt (the protobuf encoding breaks off at byte {})",
                     in_.CurrentPosition()));
  }

  std::uint64_t varint(std::uint32_t tag) {
    if (WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_VARINT) corrupt();
    std::uint64_t v = 0;
    if (!in_.ReadVarint64(&v)) corrupt();
    return v;
  }

  std::string bytes(std::uint32_t tag) {
    if (WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) corrupt();
    std::uint32_t length = 0;
    if (!in_.ReadVarint32(&length)) corrupt();
    if (length > kMaxMessageBytes)
      fail(fmt::format("a field of {} bytes at byte {}; tpusim reads node and value descriptions of at most {} bytes", length,
                       in_.CurrentPosition(), kMaxMessageBytes));
    std::string s;
    if (!in_.ReadString(&s, static_cast<int>(length))) corrupt();
    return s;
  }

  void skip(std::uint32_t tag) {
    if (!WireFormatLite::SkipField(&in_, tag)) corrupt();
  }

  int begin_message(std::uint32_t tag) {
    if (WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) corrupt();
    std::uint32_t length = 0;
    if (!in_.ReadVarint32(&length)) corrupt();
    if (in_.BytesUntilTotalBytesLimit() >= 0 && static_cast<std::int64_t>(length) > in_.BytesUntilTotalBytesLimit()) corrupt();
    return in_.PushLimit(static_cast<int>(length));
  }
  void end_message(int limit) {
    if (!in_.ConsumedEntireMessage() || in_.BytesUntilLimit() != 0) corrupt();
    in_.PopLimit(limit);
  }

  template <typename Message>
  Message parse(const std::string& payload) {
    Message m;
    if (!m.ParseFromString(payload)) corrupt();
    return m;
  }

  void opset(const std::string& payload) {
    const auto o = parse<onnx::OperatorSetIdProto>(payload);
    if (o.domain().empty() || o.domain() == "ai.onnx") model_.opset = o.version();
  }

  // What training updates: the keys of update_binding name the parameters the training
  // algorithm writes; its graphs are skipped.
  void training_info() {
    model_.has_training_info = true;
    for (std::uint32_t tag; (tag = in_.ReadTag()) != 0;) {
      if (WireFormatLite::GetTagFieldNumber(tag) != kUpdateBinding) {
        skip(tag);
        continue;
      }
      if (model_.updated_parameters.size() >= kMaxNodes) fail(fmt::format("more than {} update bindings", kMaxNodes));
      std::string key = parse<onnx::StringStringEntryProto>(bytes(tag)).key();
      if (!is_utf8(key)) fail("training_info: an update binding's name is not UTF-8 text");
      model_.updated_parameters.push_back(std::move(key));
    }
  }

  void graph() {
    for (std::uint32_t tag; (tag = in_.ReadTag()) != 0;) {
      switch (WireFormatLite::GetTagFieldNumber(tag)) {
        case kNode:
          if (model_.nodes.size() >= kMaxNodes) fail(fmt::format("more than {} nodes", kMaxNodes));
          model_.nodes.push_back(node(parse<onnx::NodeProto>(bytes(tag))));
          break;
        case kGraphName: model_.graph_name = bytes(tag); break;
        case kInitializer: {
          const int limit = begin_message(tag);
          model_.initializers.push_back(tensor_outline());
          end_message(limit);
          break;
        }
        case kSparseInitializer: fail("sparse initializers are not read; export the model without them");
        case kInput: model_.inputs.push_back(value_info(parse<onnx::ValueInfoProto>(bytes(tag)))); break;
        case kOutput: model_.outputs.push_back(value_info(parse<onnx::ValueInfoProto>(bytes(tag)))); break;
        case kValueInfo: model_.value_info.push_back(value_info(parse<onnx::ValueInfoProto>(bytes(tag)))); break;
        default: skip(tag);
      }
    }
  }

  // An initializer's name, type and shape; its data skipped unless the tensor is small.
  OnnxTensor tensor_outline() {
    OnnxTensor t;
    std::string raw;
    std::vector<double> values;
    bool external = false;
    for (std::uint32_t tag; (tag = in_.ReadTag()) != 0;) {
      const int field = WireFormatLite::GetTagFieldNumber(tag);
      const auto wire = WireFormatLite::GetTagWireType(tag);
      if (field == kDims) {
        if (wire == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
          const int limit = begin_message(tag);
          while (in_.BytesUntilLimit() > 0) t.dims.push_back(signed_varint());
          end_message(limit);
        } else {
          t.dims.push_back(static_cast<std::int64_t>(varint(tag)));
        }
        if (t.dims.size() > kMaxDims) fail(fmt::format("a tensor of more than {} dimensions", kMaxDims));
      } else if (field == kDataType) {
        t.data_type = static_cast<std::int32_t>(varint(tag));
      } else if (field == kName) {
        t.name = bytes(tag);
      } else if (field == kDataLocation) {
        external = varint(tag) == onnx::TensorProto::EXTERNAL;
      } else if (field == kExternalData) {
        external = true;
        skip(tag);
      } else if (field == kRawData) {
        small_field(tag, raw);
      } else if (field == kInt64Data || field == kInt32Data) {
        read_small_varints(tag, values);
      } else {
        skip(tag);  // float_data, double_data, strings, ...: payload tpusim does not need
      }
    }
    if (external)
      fail(fmt::format("initializer \"{}\" keeps its data in an external file; tpusim needs only shapes: export with "
                       "export_params=False, or without external data", t.name));
    decode_small(t, raw, values);
    return t;
  }

  std::int64_t signed_varint() {
    std::uint64_t v = 0;
    if (!in_.ReadVarint64(&v)) corrupt();
    return static_cast<std::int64_t>(v);
  }

  // A length-delimited field read only when short enough to be a constant worth folding;
  // otherwise skipped (on a file, by seeking past it).
  void small_field(std::uint32_t tag, std::string& out) {
    std::uint32_t length = 0;
    if (WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED || !in_.ReadVarint32(&length)) corrupt();
    if (length <= OnnxTensor::kSmallTensor * 8) {
      if (!in_.ReadString(&out, static_cast<int>(length))) corrupt();
    } else if (!in_.Skip(static_cast<int>(length))) {
      corrupt();
    }
  }

  void read_small_varints(std::uint32_t tag, std::vector<double>& values) {
    if (WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      const int limit = begin_message(tag);
      while (in_.BytesUntilLimit() > 0) {
        const std::int64_t v = signed_varint();
        if (values.size() <= OnnxTensor::kSmallTensor) values.push_back(static_cast<double>(v));
      }
      end_message(limit);
    } else {
      const std::int64_t v = static_cast<std::int64_t>(varint(tag));
      if (values.size() <= OnnxTensor::kSmallTensor) values.push_back(static_cast<double>(v));
    }
  }

  // Values of a small tensor from its raw bytes (little-endian) or its typed fields.
  static void decode_small(OnnxTensor& t, const std::string& raw, const std::vector<double>& typed) {
    std::uint64_t count = 1;
    for (auto d : t.dims) count = d < 0 ? OnnxTensor::kSmallTensor + 1 : count * static_cast<std::uint64_t>(d);
    if (count > OnnxTensor::kSmallTensor) return;
    if (!raw.empty()) {
      auto take = [&](auto sample) {
        using T = decltype(sample);
        if (raw.size() != count * sizeof(T)) return;
        for (std::uint64_t k = 0; k < count; ++k) {
          T v;
          std::memcpy(&v, raw.data() + k * sizeof(T), sizeof(T));
          t.values.push_back(static_cast<double>(v));
        }
        t.has_values = true;
      };
      switch (t.data_type) {
        case onnx::TensorProto::FLOAT: take(float{}); break;
        case onnx::TensorProto::DOUBLE: take(double{}); break;
        case onnx::TensorProto::INT32: take(std::int32_t{}); break;
        case onnx::TensorProto::INT64: take(std::int64_t{}); break;
        case onnx::TensorProto::BOOL:
        case onnx::TensorProto::UINT8: take(std::uint8_t{}); break;
        default: break;
      }
    } else if (typed.size() == count) {
      t.values = typed;
      t.has_values = true;
    }
  }

  // The same for a tensor inside a node's attribute (a Constant's value), parsed whole.
  static OnnxTensor tensor(const onnx::TensorProto& p) {
    OnnxTensor t;
    t.name = p.name();
    t.data_type = p.data_type();
    t.dims.assign(p.dims().begin(), p.dims().end());
    std::vector<double> typed;
    for (auto v : p.int64_data()) typed.push_back(static_cast<double>(v));
    for (auto v : p.int32_data()) typed.push_back(v);
    for (auto v : p.float_data()) typed.push_back(v);
    for (auto v : p.double_data()) typed.push_back(v);
    decode_small(t, p.raw_data(), typed);
    return t;
  }

  OnnxValueInfo value_info(const onnx::ValueInfoProto& p) const {
    OnnxValueInfo v;
    v.name = p.name();
    if (p.type().has_tensor_type()) {
      const auto& tt = p.type().tensor_type();
      v.elem_type = tt.elem_type();
      if (tt.shape().dim_size() > static_cast<int>(kMaxDims)) fail(fmt::format("\"{}\" has more than {} dimensions", v.name, kMaxDims));
      for (const auto& d : tt.shape().dim()) {
        OnnxDim dim;
        if (d.has_dim_value()) dim.value = d.dim_value();
        else dim.symbol = d.dim_param();
        v.dims.push_back(dim);
      }
    }
    return v;
  }

  OnnxNode node(const onnx::NodeProto& p) const {
    OnnxNode n;
    n.name = p.name();
    n.op_type = p.op_type();
    n.domain = p.domain();
    n.inputs.assign(p.input().begin(), p.input().end());
    n.outputs.assign(p.output().begin(), p.output().end());
    if (!n.domain.empty() && n.domain != "ai.onnx")
      fail(fmt::format("node \"{}\" ({}) is of domain \"{}\"; tpusim reads the default ONNX domain only", n.name, n.op_type, n.domain));
    for (const auto& a : p.attribute()) {
      OnnxAttribute attr;
      attr.name = a.name();
      attr.f = a.f();
      attr.i = a.i();
      attr.s = a.s();
      attr.floats.assign(a.floats().begin(), a.floats().end());
      attr.ints.assign(a.ints().begin(), a.ints().end());
      using A = onnx::AttributeProto;
      switch (a.type()) {
        case A::FLOAT: attr.type = OnnxAttribute::Type::Float; break;
        case A::INT: attr.type = OnnxAttribute::Type::Int; break;
        case A::STRING: attr.type = OnnxAttribute::Type::String; break;
        case A::TENSOR: attr.type = OnnxAttribute::Type::Tensor; attr.t = tensor(a.t()); break;
        case A::GRAPH: attr.type = OnnxAttribute::Type::Graph; break;
        case A::FLOATS: attr.type = OnnxAttribute::Type::Floats; break;
        case A::INTS: attr.type = OnnxAttribute::Type::Ints; break;
        case A::STRINGS: attr.type = OnnxAttribute::Type::Strings; break;
        default: attr.type = OnnxAttribute::Type::Other;
      }
      n.attributes.push_back(std::move(attr));
    }
    return n;
  }

  // Every node input exists by the time the node runs (ONNX requires topological order), each
  // value has one producer, and the outputs are produced.
  void check_graph() const {
    const auto utf8 = [&](const std::string& name, const std::string& what) {
      if (!is_utf8(name)) fail(fmt::format("{}: its name is not UTF-8 text", what));
    };
    for (std::size_t k = 0; k < model_.nodes.size(); ++k) {
      const OnnxNode& n = model_.nodes[k];
      utf8(n.op_type, fmt::format("node {}", k));
      utf8(n.name, fmt::format("node {} ({})", k, n.op_type));
      for (const auto& value : n.inputs) utf8(value, fmt::format("an input of node {} ({})", k, n.op_type));
      for (const auto& value : n.outputs) utf8(value, fmt::format("an output of node {} ({})", k, n.op_type));
    }
    for (const auto* infos : {&model_.inputs, &model_.outputs, &model_.value_info})
      for (const auto& info : *infos) utf8(info.name, "a graph value");
    for (const auto& t : model_.initializers) utf8(t.name, "an initializer");
    std::set<std::string> available;
    for (const auto& i : model_.inputs) available.insert(i.name);
    for (const auto& t : model_.initializers) available.insert(t.name);
    std::map<std::string, std::size_t> producer;
    for (std::size_t k = 0; k < model_.nodes.size(); ++k)
      for (const auto& out : model_.nodes[k].outputs) {
        if (out.empty()) continue;
        if (producer.count(out) || (available.count(out)))
          fail(fmt::format("value \"{}\" is produced twice (node \"{}\" and {})", out, model_.nodes[k].name,
                           producer.count(out) ? "node \"" + model_.nodes[producer[out]].name + "\"" : "a graph input"));
        producer[out] = k;
      }
    for (std::size_t k = 0; k < model_.nodes.size(); ++k) {
      const OnnxNode& n = model_.nodes[k];
      for (const auto& in : n.inputs) {
        if (in.empty() || available.count(in)) continue;
        const auto it = producer.find(in);
        if (it == producer.end())
          fail(fmt::format("node \"{}\" ({}) reads \"{}\", which no node, graph input or initializer provides", n.name, n.op_type, in));
        fail(fmt::format("node \"{}\" ({}) reads \"{}\" before node \"{}\" produces it: the graph is cyclic or not in "
                         "topological order", n.name, n.op_type, in, model_.nodes[it->second].name));
      }
      for (const auto& out : n.outputs) available.insert(out);
    }
    for (const auto& o : model_.outputs)
      if (!available.count(o.name)) fail(fmt::format("graph output \"{}\" is produced by no node", o.name));
  }

  io::CodedInputStream in_;
  std::string origin_;
  OnnxModel model_;
};

}  // namespace

const OnnxAttribute* OnnxNode::attribute(std::string_view attribute_name) const {
  for (const auto& a : attributes)
    if (a.name == attribute_name) return &a;
  return nullptr;
}

std::int64_t OnnxNode::int_attribute(std::string_view attribute_name, std::int64_t fallback) const {
  const OnnxAttribute* a = attribute(attribute_name);
  return a ? a->i : fallback;
}

std::vector<std::int64_t> OnnxNode::ints_attribute(std::string_view attribute_name) const {
  const OnnxAttribute* a = attribute(attribute_name);
  return a ? a->ints : std::vector<std::int64_t>{};
}

OnnxModel read_onnx(std::string_view bytes, const std::string& origin) {
  io::ArrayInputStream stream(bytes.data(), static_cast<int>(bytes.size()));
  return Reader(stream, origin).read();
}

OnnxModel read_onnx_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw std::invalid_argument(fmt::format("{}: {}", path, std::filesystem::exists(path, ec) ? "not a file" : "no such file"));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::invalid_argument(fmt::format("{}: cannot read the file ({})", path, std::strerror(errno)));
  io::FileInputStream stream(fd);
  stream.SetCloseOnDelete(true);
  return Reader(stream, path).read();
}

}  // namespace tpusim

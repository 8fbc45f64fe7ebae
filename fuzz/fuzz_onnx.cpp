// The ONNX reader, shape inference and importer on arbitrary bytes, as `tpusim import FILE.onnx` reads a file: a
// file that is not a model, or a model tpusim cannot map, is refused with std::invalid_argument
// (exit 2 on the command line). Anything else (a crash, a sanitizer report, another exception,
// a hang, memory beyond the limit) is a finding.
#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "workloads/import/onnx_file.hpp"
#include "workloads/import/onnx_model.hpp"
#include "workloads/import/onnx_shapes.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const tpusim::OnnxModel model = tpusim::read_onnx(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.onnx");
    try {
      tpusim::infer_onnx_shapes(model, 2, "fuzz.onnx");
    } catch (const std::invalid_argument&) {
    }
    tpusim::import_onnx_model(model, "fuzz.onnx");
  } catch (const std::invalid_argument&) {
  }
  return 0;
}

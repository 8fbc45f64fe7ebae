// `tpusim import FILE -o workload.json`: a model another tool wrote (Keras model JSON today) as
// tpusim's own workload file, to inspect, edit and run.
#pragma once

#include <cstdint>
#include <string>

namespace tpusim {

struct ImportRequest {
  std::string file;    // the model
  std::string out;     // the workload file to write
  std::uint64_t per_replica_batch = 32;
  bool force = false;  // replace `out` if an earlier `tpusim import` wrote it
};

// Writes the workload (checked first by reading it back as tpusim would; nothing is written when
// that fails) and returns what to tell the user. Throws InputError.
std::string run_import(const ImportRequest& request);

}  // namespace tpusim

// How far to trust a run's numbers: the public validation points of the same kind of run, and
// the errors bench/validate.py --record kept for them (tests/data/validation/public_set.json,
// "recorded_points"). Every `tpusim run` summary carries it, so no figure goes out without the
// evidence behind it, or the statement that there is none.
#pragma once

#include <string>

#include "traces/summary.hpp"

#include "workloads/model.hpp"

namespace tpusim {

// A training run's kind: "tpu_v5p transformer training, tensor parallel, FSDP". The model family
// is mixture-of-experts (any moe layer), transformer (any attention layer), convolutional (any
// convolution) or other; "multislice"
// marks a run over several slices (the DCN).
std::string training_run_kind(const std::string& hw_name, const ModelGraph& model, bool tensor_parallel, bool fsdp,
                              bool multislice = false, bool pipeline = false);

// The recorded points of
// exactly this kind, else of the same generation and model family ("nearest"), else none ("no
// public measurement"). Errors are leave-one-source-out: each point's with every constant fitted on
// its own source's points refitted without them. `set_path`: the public set; one that cannot be
// read gives a band that says so.
ValidationBand validation_band(const std::string& kind, const std::string& set_path);

// The public set this build reads.
std::string public_validation_set_path();

}  // namespace tpusim

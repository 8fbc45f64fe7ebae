// Digests of what decides a result: the contents of every input file and of the tpusim binary.
// A run records them in its summary and a sweep in sweep.json, so that --resume keeps only
// results it can show came from the same inputs and the same model.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpusim {

// FNV-1a (64 bit) of a file's bytes, as 16 hex digits; of no bytes when it cannot be read.
std::string file_fnv1a64(const std::string& path);
// {file: digest} for each file, in the order given (a file listed twice once).
nlohmann::ordered_json input_digests(const std::vector<std::string>& files);
// The same as lines "DIGEST  FILE" (sha256sum's layout), which a CSV cell holds whole.
nlohmann::ordered_json digest_lines(const nlohmann::ordered_json& digests);
// Back to {file: digest}; null when a line is not of that form.
nlohmann::ordered_json digests_of_lines(const nlohmann::ordered_json& lines);
// The running tpusim binary's digest (/proc/self/exe), computed once.
const std::string& tpusim_fnv1a64();

}  // namespace tpusim

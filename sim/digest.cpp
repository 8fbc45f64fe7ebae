#include "sim/digest.hpp"

#include <cstdint>
#include <fstream>

#include <fmt/format.h>

namespace tpusim {

std::string file_fnv1a64(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::uint64_t h = 1469598103934665603ull;
  char buffer[1 << 16];
  while (in) {
    in.read(buffer, sizeof buffer);
    for (std::streamsize i = 0; i < in.gcount(); ++i) h = (h ^ static_cast<unsigned char>(buffer[i])) * 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}

nlohmann::ordered_json input_digests(const std::vector<std::string>& files) {
  nlohmann::ordered_json digests = nlohmann::ordered_json::object();
  for (const auto& file : files)
    if (!digests.contains(file)) digests[file] = file_fnv1a64(file);
  return digests;
}

nlohmann::ordered_json digest_lines(const nlohmann::ordered_json& digests) {
  nlohmann::ordered_json lines = nlohmann::ordered_json::array();
  for (const auto& [file, digest] : digests.items()) lines.push_back(digest.get<std::string>() + "  " + file);
  return lines;
}

nlohmann::ordered_json digests_of_lines(const nlohmann::ordered_json& lines) {
  if (!lines.is_array()) return nullptr;
  nlohmann::ordered_json digests = nlohmann::ordered_json::object();
  for (const auto& line : lines) {
    if (!line.is_string()) return nullptr;
    const std::string& text = line.get_ref<const std::string&>();
    if (text.size() < 19 || text.compare(16, 2, "  ") != 0) return nullptr;
    digests[text.substr(18)] = text.substr(0, 16);
  }
  return digests;
}

const std::string& tpusim_fnv1a64() {
  static const std::string digest = file_fnv1a64("/proc/self/exe");
  return digest;
}

}  // namespace tpusim

// The registry: a kind is known once it is listed here. (An explicit list rather than
// self-registering statics, which a static library's linker would drop.)
#include "workloads/kinds/registry.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tpusim {
namespace {

std::vector<const LayerKind*>& all_kinds() {
  using namespace kinds;
  static std::vector<const LayerKind*> kinds = {
      &flatten_kind(),  &dense_kind(),       &conv2d_kind(),   &batch_norm_kind(),      &layer_norm_kind(), &rms_norm_kind(),
      &activation_kind(), &max_pool_kind(),  &avg_pool_kind(), &global_avg_pool_kind(), &add_kind(),
      &dropout_kind(),  &embedding_kind(),   &patch_embedding_kind(), &attention_kind(), &take_first_kind(),
      &concat_kind(),   &multiply_kind(),     &depthwise_conv2d_kind(), &matmul_kind(),   &reshape_kind(),
      &slice_kind(),    &add_parameter_kind(), &prepend_tokens_kind(), &multiply_parameter_kind(), &subtract_kind(),
      &divide_kind(),   &reduce_mean_kind(), &moe_kind(),     &conv1d_kind(),   &global_max_pool_kind(), &permute_kind(),
      &group_norm_kind(), &upsample_kind(), &input_kind(),
  };
  return kinds;
}

}  // namespace

const LayerKind& layer_kind(const std::string& name) {
  for (const LayerKind* kind : all_kinds())
    if (kind->name() == name) return *kind;
  throw std::invalid_argument(fmt::format("unknown layer type \"{}\" (expected one of {})", name, fmt::join(layer_kind_names(), ", ")));
}

void register_layer_kind(std::unique_ptr<LayerKind> kind) {
  static std::vector<std::unique_ptr<LayerKind>> registered;  // a program's own kinds, alive as long as it runs
  const auto names = layer_kind_names();
  if (std::find(names.begin(), names.end(), kind->name()) != names.end())
    throw std::invalid_argument(fmt::format("a layer kind named \"{}\" is registered already", kind->name()));
  all_kinds().push_back(kind.get());
  registered.push_back(std::move(kind));
}

std::vector<std::string> layer_kind_names() {
  std::vector<std::string> names;
  for (const LayerKind* kind : all_kinds()) names.push_back(kind->name());
  return names;
}

}  // namespace tpusim

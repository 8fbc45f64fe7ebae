// The layer kinds tpusim knows, one accessor per kind (defined in the kind's own file).
#pragma once

#include "workloads/layer_kind.hpp"

namespace tpusim::kinds {

const LayerKind& flatten_kind();
const LayerKind& dense_kind();
const LayerKind& conv2d_kind();
const LayerKind& depthwise_conv2d_kind();
const LayerKind& conv1d_kind();
const LayerKind& batch_norm_kind();
const LayerKind& layer_norm_kind();
const LayerKind& group_norm_kind();
const LayerKind& upsample_kind();
const LayerKind& input_kind();
const LayerKind& rms_norm_kind();
const LayerKind& activation_kind();
const LayerKind& max_pool_kind();
const LayerKind& avg_pool_kind();
const LayerKind& global_avg_pool_kind();
const LayerKind& global_max_pool_kind();
const LayerKind& permute_kind();
const LayerKind& add_kind();
const LayerKind& dropout_kind();
const LayerKind& embedding_kind();
const LayerKind& patch_embedding_kind();
const LayerKind& attention_kind();
const LayerKind& take_first_kind();
const LayerKind& concat_kind();
const LayerKind& multiply_kind();
const LayerKind& matmul_kind();
const LayerKind& reshape_kind();
const LayerKind& slice_kind();
const LayerKind& add_parameter_kind();
const LayerKind& prepend_tokens_kind();
const LayerKind& multiply_parameter_kind();
const LayerKind& subtract_kind();
const LayerKind& divide_kind();
const LayerKind& reduce_mean_kind();
const LayerKind& moe_kind();

}  // namespace tpusim::kinds

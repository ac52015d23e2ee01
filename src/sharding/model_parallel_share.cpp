#include "sharding/model_parallel_share.h"

#include <algorithm>

#include "core/check.h"

namespace zero::sharding {

ModelParallelShare model_parallel_share(const model::TransformerConfig& config,
                                        int64_t pipeline_stages, int64_t tensor_parallel,
                                        int64_t world_size, int64_t ranks_per_node) {
  ZERO_CHECK(pipeline_stages >= 1 && tensor_parallel >= 1 && world_size >= 1 &&
                 world_size % (pipeline_stages * tensor_parallel) == 0,
             "the world size must be a multiple of pipeline stages x tensor parallel, got "
                 << world_size << " for " << pipeline_stages << " x " << tensor_parallel);
  ZERO_CHECK(ranks_per_node >= 1 && ranks_per_node <= world_size,
             "ranks per node must be between 1 and the world size, got " << ranks_per_node);
  ModelParallelShare share;
  share.stage = config;
  share.stage.num_layers = (config.num_layers + pipeline_stages - 1) / pipeline_stages;
  share.data_parallel = world_size / (pipeline_stages * tensor_parallel);
  share.shape.total_params =
      (share.stage.num_parameters() + tensor_parallel - 1) / tensor_parallel;
  share.shape.largest_layer_params =
      (largest_layer_params(config) + tensor_parallel - 1) / tensor_parallel;
  share.shape.gpus_per_node = std::min(ranks_per_node, share.data_parallel);
  share.shape.num_nodes =
      (share.data_parallel + share.shape.gpus_per_node - 1) / share.shape.gpus_per_node;
  return share;
}

int64_t micro_batches_in_flight(int64_t pipeline_stages, int64_t gradient_accumulation) {
  return pipeline_stages > 1 ? std::min(pipeline_stages, gradient_accumulation) : 1;
}

}  // namespace zero::sharding

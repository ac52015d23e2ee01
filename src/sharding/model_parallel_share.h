// What one rank holds under 3D parallelism (pipeline stages x tensor parallelism x data
// parallelism), as the model-state estimators see it. Shared by `zero train`'s memory preflight
// (engine/memory_preflight.h) and `zero estimate --pipeline-parallel-size/--tensor-parallel-size`
// so both count a rank's share the same way:
//   - a rank holds one pipeline stage; the largest counts: ceil(layers / stages) blocks, with the
//     embedding and the head as if every stage had them;
//   - tensor parallelism gives it 1/tensor_parallel of that stage's weights (rounded up);
//   - ZeRO partitions over the data-parallel ranks only: world / (stages x tensor_parallel);
//   - 1F1B keeps the activations of min(stages, gradient_accumulation) micro-batches in flight
//     in the first stage before its first backward.
// Pure arithmetic on sizes; no allocation, no I/O.
#pragma once
#include <cstdint>

#include "model/transformer_config.h"
#include "sharding/memory_estimator.h"

namespace zero::sharding {

struct ModelParallelShare {
  // The largest pipeline stage as a model of its own depth (all other sizes unchanged): what the
  // activation estimate of one rank runs on.
  model::TransformerConfig stage;
  // The estimators' input for one rank's states: total_params and largest_layer_params of its
  // stage and tensor-parallel slice; gpus_per_node x num_nodes cover its data-parallel group
  // (gpus_per_node = min(ranks per node, data-parallel ranks)). additional_buffer_factor keeps
  // its default: the caller sets its own.
  EstimateShape shape;
  int64_t data_parallel = 1;  // world / (pipeline_stages x tensor_parallel)
};

// `world_size`: all ranks; `ranks_per_node`: ranks on one machine (1..world_size).
// pipeline_stages and tensor_parallel must be >= 1 and their product must divide world_size: the
// callers check that with messages naming their flags; here it is an invariant (ZERO_CHECK).
ModelParallelShare model_parallel_share(const model::TransformerConfig& config,
                                        int64_t pipeline_stages, int64_t tensor_parallel,
                                        int64_t world_size, int64_t ranks_per_node);

// Micro-batches whose activations the first stage holds at once under 1F1B:
// min(stages, gradient_accumulation) with a pipeline, 1 without.
int64_t micro_batches_in_flight(int64_t pipeline_stages, int64_t gradient_accumulation);

}  // namespace zero::sharding

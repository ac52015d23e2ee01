// The sizes of the four parallel axes for one run, as DeepSpeed and Megatron-DeepSpeed users
// give them:
//   pipeline  --pipeline-parallel-size, else pipeline.stages ("auto"/unset: 1)
//   tensor    --tensor-parallel-size, else tensor_parallel.autotp_size (0, AutoTP off: 1)
//   sequence  sequence_parallel_size
//   data      what is left: ranks / (pipeline x tensor x sequence)
// A flag overrides the config key (Megatron-DeepSpeed's names). The result is the Mesh's shape
// (comm/mesh.h lays the ranks out); Mesh::sequence_parallel_shape is the pp = tp = 1 case.
#pragma once
#include <cstdint>
#include <optional>

#include "comm/mesh.h"
#include "config/deepspeed_config.h"

namespace zero::pipeline {

// Command-line overrides (unset: the config decides).
struct ParallelSizeFlags {
  std::optional<int64_t> pipeline_parallel_size;  // --pipeline-parallel-size
  std::optional<int64_t> tensor_parallel_size;    // --tensor-parallel-size
};

// Throws ConfigError when a flag is below 1, or when pipeline x tensor x sequence does not divide
// `world_size`: the message gives each size, where it came from, the product and the rank count.
comm::MeshShape resolve_parallel_sizes(int world_size, const config::DeepSpeedConfig& config,
                                       const ParallelSizeFlags& flags = {});

}  // namespace zero::pipeline

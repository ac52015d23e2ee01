// How `zero train` lays its ranks out: pipeline stages, tensor-parallel ranks and Ulysses
// sequence-parallel ranks from the config (pipeline.stages, tensor_parallel.autotp_size,
// sequence_parallel_size) and the command line (--pipeline-parallel-size,
// --tensor-parallel-size); the data-parallel size is what is left of the world. Every check that
// needs only sizes runs here, before anything is allocated.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "comm/mesh.h"
#include "config/deepspeed_config.h"
#include "engine/engine_settings.h"
#include "model/transformer_config.h"

namespace zero::tools {

struct TrainParallelism {
  comm::MeshShape shape;  // pp x dp x sp x tp = the world
  bool pipelined() const { return shape.pp > 1; }
  bool tensor_parallel() const { return shape.tp > 1; }
  // Whether the run needs a Mesh (any axis other than data parallelism in use).
  bool needs_mesh() const { return shape.sp > 1 || pipelined() || tensor_parallel(); }
};

struct TrainParallelismRequest {
  int world_size = 1;
  std::optional<int64_t> pipeline_flag;  // --pipeline-parallel-size
  std::optional<int64_t> tensor_flag;    // --tensor-parallel-size
  int64_t seq_len = 0;
  bool checkpoints = false;  // --save or --resume given
  std::string config_source;  // for messages
};

// Throws ConfigError (sizes that do not divide the world, heads or the sequence; pipeline keys
// not acted on) or UnsupportedError (combinations not built yet), each naming the numbers.
TrainParallelism resolve_train_parallelism(const TrainParallelismRequest& request,
                                           const config::DeepSpeedConfig& config,
                                           const engine::EngineSettings& settings,
                                           const model::TransformerConfig& model_shape);

}  // namespace zero::tools

// `zero estimate --pipeline-parallel-size P --tensor-parallel-size T [--gradient-accumulation N]`:
// the GPUs as zero train's mesh lays them out, P pipeline stages x T tensor-parallel ranks x the
// data-parallel ranks left (GPUs / (P x T)), and what one GPU of the largest stage holds. The
// share is sharding::model_parallel_share, the arithmetic zero train's memory preflight uses.
// Without the flags the mesh is 1 x 1 x GPUs and the rows are those of the whole model.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/transformer_config.h"
#include "sharding/memory_estimator.h"
#include "tools/arg_parser.h"

namespace zero::tools {

struct EstimateMesh {
  bool shown = false;  // a mesh flag was given: the output names the mesh
  int64_t pipeline_stages = 1;
  int64_t tensor_parallel = 1;
  int64_t data_parallel = 1;
  int64_t gradient_accumulation = 1;  // the pipeline's micro-batches per step
  int64_t in_flight = 1;  // micro-batches of activations the first stage holds (1F1B)
  // The largest stage as a model of its depth, as one tensor-parallel rank computes it (its
  // heads, MLP width and vocabulary part; --model only): what the activations run on.
  std::optional<model::TransformerConfig> stage;
  // The estimators' input for one GPU's states: the stage's tensor-parallel slice, ZeRO over the
  // data-parallel GPUs. Without a model-parallel mesh, the whole model on all GPUs.
  sharding::EstimateShape states_shape;
  bool drops_stages = false;  // ZeRO stages 2 and 3 left out: refused with a pipeline

  bool pipelined() const { return pipeline_stages > 1; }
  bool model_parallel() const { return pipeline_stages * tensor_parallel > 1; }
};

// Adds --pipeline-parallel-size, --tensor-parallel-size and --gradient-accumulation.
void add_mesh_flags(ArgParser& parser);

// Reads the mesh flags and checks them: a model-parallel mesh needs --model (the split needs
// its layers), must divide the GPUs (whole.total_gpus()), split the model's heads (as zero
// train's tensor parallelism does) and have at most one stage per block. ConfigError naming
// the flags and the numbers otherwise.
EstimateMesh parse_mesh(const ArgParser& parser,
                        const std::optional<model::TransformerConfig>& config,
                        const sharding::EstimateShape& whole);

// With a pipeline, zero train refuses ZeRO stages 2 and 3 (DeepSpeed does): --stage 2 or 3
// throws the same reason; without --stage those rows are dropped (mesh.drops_stages), and
// nothing left throws. Returns `rows` unchanged without a pipeline.
std::vector<sharding::ZeroOptions> pipeline_rows(EstimateMesh& mesh, std::optional<int> stage,
                                                 std::vector<sharding::ZeroOptions> rows);

// zero train refuses Ulysses sequence parallelism with a pipeline (not built yet).
void check_mesh_sequence_parallel(const EstimateMesh& mesh, int64_t sequence_parallel);

// "mesh: 2 pipeline stages x 2 tensor-parallel x 4 data-parallel" and, with a model, a second
// line saying what one GPU of the largest stage holds; for the table.
std::string describe_mesh(const EstimateMesh& mesh, int64_t model_layers);
nlohmann::json mesh_json(const EstimateMesh& mesh);

}  // namespace zero::tools

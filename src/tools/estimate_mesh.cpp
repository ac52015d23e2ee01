#include "tools/estimate_mesh.h"

#include <algorithm>

#include "core/error.h"
#include "model/tensor_parallel.h"
#include "sharding/activation_estimator.h"
#include "sharding/model_parallel_share.h"
#include "tools/estimate_flag_values.h"

namespace zero::tools {
namespace {

constexpr int64_t kMaxMeshSize = kMaxGpusPerNode * kMaxNodes;
constexpr int64_t kMaxGradientAccumulation = 1 << 20;

// The flag's value, 1 when it was not given.
int64_t mesh_size(const ArgParser& parser, const std::string& flag, int64_t max) {
  return parser.get(flag).empty() ? 1 : positive_int(parser, flag, max);
}

std::string plural(int64_t count, const std::string& word) {
  return std::to_string(count) + " " + word + (count == 1 ? "" : "s");
}

// The checks that need the model: heads and widths split by T (zero train's own check) and at
// most one pipeline stage per block.
void check_model_split(const EstimateMesh& mesh, const model::TransformerConfig& config) {
  if (mesh.tensor_parallel > 1) {
    try {
      model::tensor_parallel_block_config(config,
                                          model::TensorParallelLayout{0, mesh.tensor_parallel});
    } catch (const ConfigError& e) {
      throw ConfigError("zero estimate: --tensor-parallel-size " +
                        std::to_string(mesh.tensor_parallel) + " does not split the model: " +
                        e.what());
    }
  }
  if (mesh.pipeline_stages > config.num_layers) {
    throw ConfigError("zero estimate: --pipeline-parallel-size " +
                      std::to_string(mesh.pipeline_stages) + " is more than the model's " +
                      plural(config.num_layers, "block") +
                      ": every stage needs at least one; use at most " +
                      std::to_string(config.num_layers));
  }
}

}  // namespace

void add_mesh_flags(ArgParser& parser) {
  parser
      .option("pipeline-parallel-size", "",
              "pipeline stages P, 1 when not given (needs --model): rows per GPU of the largest "
              "stage")
      .option("tensor-parallel-size", "",
              "tensor-parallel size T, 1 when not given (needs --model): each GPU holds 1/T of "
              "its stage; ZeRO partitions over GPUs / (P x T)")
      .option("gradient-accumulation", "",
              "micro-batches per step N, 1 when not given: with P > 1, min(P, N) micro-batches "
              "of activations are in flight (1F1B)");
}

EstimateMesh parse_mesh(const ArgParser& parser,
                        const std::optional<model::TransformerConfig>& config,
                        const sharding::EstimateShape& whole) {
  EstimateMesh mesh;
  mesh.shown = !parser.get("pipeline-parallel-size").empty() ||
               !parser.get("tensor-parallel-size").empty() ||
               !parser.get("gradient-accumulation").empty();
  mesh.pipeline_stages = mesh_size(parser, "pipeline-parallel-size", kMaxMeshSize);
  mesh.tensor_parallel = mesh_size(parser, "tensor-parallel-size", kMaxMeshSize);
  mesh.gradient_accumulation =
      mesh_size(parser, "gradient-accumulation", kMaxGradientAccumulation);
  const int64_t gpus = whole.total_gpus();
  if (mesh.model_parallel() && !config) {
    throw ConfigError("zero estimate: --pipeline-parallel-size/--tensor-parallel-size need "
                      "--model PRESET|DIR: the split per stage and tensor-parallel rank needs "
                      "the model's layers, which --params does not give");
  }
  if (gpus % (mesh.pipeline_stages * mesh.tensor_parallel) != 0) {
    throw ConfigError(
        "zero estimate: the " + std::to_string(gpus) + " GPUs (--gpus-per-node " +
        std::to_string(whole.gpus_per_node) + " x --nodes " + std::to_string(whole.num_nodes) +
        ") are not a multiple of --pipeline-parallel-size " +
        std::to_string(mesh.pipeline_stages) + " x --tensor-parallel-size " +
        std::to_string(mesh.tensor_parallel) + " = " +
        std::to_string(mesh.pipeline_stages * mesh.tensor_parallel) +
        "; every data-parallel rank needs a whole pipeline of tensor-parallel groups");
  }
  mesh.data_parallel = gpus / (mesh.pipeline_stages * mesh.tensor_parallel);
  mesh.in_flight =
      sharding::micro_batches_in_flight(mesh.pipeline_stages, mesh.gradient_accumulation);
  mesh.states_shape = whole;
  if (!config) return mesh;
  check_model_split(mesh, *config);
  const sharding::ModelParallelShare share = sharding::model_parallel_share(
      *config, mesh.pipeline_stages, mesh.tensor_parallel, gpus, whole.gpus_per_node);
  // Each tensor-parallel rank holds the activations of its heads, MLP width and vocabulary part
  // (the residual stream whole): measured within 2% (mpi_test_activation_estimate_tp.cpp).
  mesh.stage = sharding::tensor_parallel_activation_config(share.stage, mesh.tensor_parallel);
  mesh.states_shape = share.shape;
  mesh.states_shape.additional_buffer_factor = whole.additional_buffer_factor;
  return mesh;
}

std::vector<sharding::ZeroOptions> pipeline_rows(EstimateMesh& mesh, std::optional<int> stage,
                                                 std::vector<sharding::ZeroOptions> rows) {
  if (!mesh.pipelined()) return rows;
  // The reason zero train gives (engine/pipeline_engine.cpp), in this command's flags.
  auto refuse = [&](int refused) {
    const std::string what = stage ? "--stage " + std::to_string(refused)
                                   : "ZeRO stage " + std::to_string(refused) +
                                         " (the only rows the offload flags leave)";
    return ConfigError("zero estimate: " + what +
                       " with --pipeline-parallel-size " + std::to_string(mesh.pipeline_stages) +
                       ": DeepSpeed refuses ZeRO stages 2 and 3 with a pipeline (zero train "
                       "does too); use --stage 0 or 1, or --pipeline-parallel-size 1");
  };
  if (stage && *stage >= 2) throw refuse(*stage);
  const size_t before = rows.size();
  const int first_stage = rows.empty() ? 3 : rows.front().stage;
  rows.erase(std::remove_if(rows.begin(), rows.end(),
                            [](const sharding::ZeroOptions& o) { return o.stage >= 2; }),
             rows.end());
  if (rows.empty()) throw refuse(first_stage);
  mesh.drops_stages = rows.size() != before;
  return rows;
}

void check_mesh_sequence_parallel(const EstimateMesh& mesh, int64_t sequence_parallel) {
  if (!mesh.pipelined() || sequence_parallel == 1) return;
  throw UnsupportedError("zero estimate: --sequence-parallel " +
                         std::to_string(sequence_parallel) + " with --pipeline-parallel-size " +
                         std::to_string(mesh.pipeline_stages) +
                         " is not built yet (zero train refuses it too); use "
                         "--sequence-parallel 1 with a pipeline, or --pipeline-parallel-size 1");
}

std::string describe_mesh(const EstimateMesh& mesh, int64_t model_layers) {
  std::string text = "mesh: " + plural(mesh.pipeline_stages, "pipeline stage") + " x " +
                     std::to_string(mesh.tensor_parallel) + " tensor-parallel x " +
                     std::to_string(mesh.data_parallel) + " data-parallel";
  if (!mesh.stage) return text;
  text += "\nrows per GPU of the largest stage: " + std::to_string(mesh.stage->num_layers) +
          " of " + plural(model_layers, "block") + " (embedding and head counted)";
  if (mesh.tensor_parallel > 1) {
    text += ", 1/" + std::to_string(mesh.tensor_parallel) + " of their weights";
  }
  text += ": " + std::to_string(mesh.states_shape.total_params / 1000000) +
          "M params, ZeRO over " + plural(mesh.data_parallel, "data-parallel GPU");
  return text;
}

nlohmann::json mesh_json(const EstimateMesh& mesh) {
  nlohmann::json out = {{"pipeline_parallel_size", mesh.pipeline_stages},
                        {"tensor_parallel_size", mesh.tensor_parallel},
                        {"data_parallel_size", mesh.data_parallel},
                        {"gradient_accumulation", mesh.gradient_accumulation},
                        {"micro_batches_in_flight", mesh.in_flight},
                        {"rank_params", mesh.states_shape.total_params},
                        {"rank_largest_layer_params", mesh.states_shape.largest_layer_params},
                        {"zero_stages_2_3_dropped", mesh.drops_stages}};
  if (mesh.stage) out["stage_layers"] = mesh.stage->num_layers;
  return out;
}

}  // namespace zero::tools

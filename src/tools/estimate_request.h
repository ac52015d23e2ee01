// `zero estimate`'s command line as one checked request: the model (a count or a shape), the
// GPUs and their mesh, the ZeRO rows to list, the micro-batch whose activations to add, the
// memory budgets and the output format. Parsing checks the flags in a fixed order, so the first
// mistake on a command line is the one reported.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/transformer_config.h"
#include "sharding/activation_estimator.h"
#include "sharding/memory_estimator.h"
#include "tools/command.h"
#include "tools/estimate_mesh.h"

namespace zero::tools {

struct EstimateRequest {
  std::string model_name;                         // --model as given ("" with --params)
  std::optional<model::TransformerConfig> config;  // the model's shape (--model only)
  sharding::EstimateShape shape;  // the whole model on all GPUs, as the flags give it
  EstimateMesh mesh;              // the mesh and what one GPU of the largest stage holds
  std::vector<sharding::ZeroOptions> options;  // the rows, in DeepSpeed's order
  // Micro-batch, dtype, attention and long-sequence options; seq_len set with `activations`.
  sharding::ActivationSettings settings;
  std::string attention;  // "flash" or "eager"
  // One micro-batch's activations on one GPU of the largest stage, when --seq-len (or another
  // activation flag) asks for them; not in flight: the rows multiply by mesh.in_flight.
  std::optional<sharding::ActivationMemory> activations;
  // --gpu-memory with --model and without --seq-len: report the longest sequence that fits.
  bool wants_longest = false;
  std::optional<int64_t> gpu_budget_bytes;  // --gpu-memory, per GPU
  std::optional<int64_t> cpu_budget_bytes;  // --cpu-memory, per node
  std::string gpu_memory_text, cpu_memory_text;  // the budgets as the user wrote them
  bool json = false;
};

// nullopt when --help was asked for (the usage is printed). Throws ConfigError or
// UnsupportedError naming the flag for every mistake.
std::optional<EstimateRequest> parse_estimate_request(const Args& args);

}  // namespace zero::tools

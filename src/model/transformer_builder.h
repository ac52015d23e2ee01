// Builds a transformer Model (embedding, blocks, head) from a TransformerConfig and initialises
// its parameters the way Hugging Face initialises a fresh model.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "model/tensor_parallel.h"

namespace zero::model {

// A finalised model with zero parameters; call init_parameters() or load weights. Validates
// `config` first and, on a CPU backend, refuses (ConfigError with both sizes, before allocating)
// a model whose parameters and gradients exceed this machine's memory. `source` names where the
// config came from in messages (the config.json path).
std::unique_ptr<Model> build_transformer(const TransformerConfig& config,
                                         backend::Backend& backend, DType param_dtype,
                                         const std::string& source = "model config");
// For inference (generation): the same model without a gradient buffer
// (Model::finalize_for_inference), so only the parameters count against memory; `param_dtype`
// may be bf16/f16 on a device backend.
std::unique_ptr<Model> build_transformer_for_inference(const TransformerConfig& config,
                                                       backend::Backend& backend,
                                                       DType param_dtype,
                                                       const std::string& source = "model config");
// Tensor parallelism: every block holds this rank's heads and MLP width
// (model/tensor_parallel.h), the token embedding and the head this rank's vocabulary rows
// (model/vocab_parallel.h); norms and position embeddings are whole. Run it with
// Model::set_tensor_group() of a group of that size in which this process has that rank.
std::unique_ptr<Model> build_transformer(const TransformerConfig& config,
                                         backend::Backend& backend, DType param_dtype,
                                         const TensorParallelLayout& tensor_parallel,
                                         const std::string& source = "model config");

// Pipeline parallelism: one stage's part of build_transformer's unit list. Units are numbered
// as in the full model: 0 the embedding, 1..num_layers the blocks, num_layers + 1 the LM head;
// the stage holds units [begin, end) with the full model's parameter names. With tied
// embeddings, a stage that holds the LM head but not the embedding starts with a
// TiedEmbeddingCopy (model/tied_embedding_copy.h) under the embedding's name, which its head
// reads. Throws ConfigError for an empty or out-of-range range.
std::unique_ptr<Model> build_transformer_stage(const TransformerConfig& config,
                                               backend::Backend& backend, DType param_dtype,
                                               int64_t begin, int64_t end,
                                               const std::string& source = "model config");
// Pipeline x tensor parallelism: the stage's units hold tensor-parallel rank
// `tensor_parallel.rank`'s parts, as build_transformer(config, ..., tensor_parallel) builds them
// (the tied copy this rank's vocabulary rows of the embedding). Run it with
// Model::set_tensor_group() of the stage's tensor-parallel group.
std::unique_ptr<Model> build_transformer_stage(const TransformerConfig& config,
                                               backend::Backend& backend, DType param_dtype,
                                               int64_t begin, int64_t end,
                                               const TensorParallelLayout& tensor_parallel,
                                               const std::string& source = "model config");

// The full model's units, in order, as a partitioner sees them: name, kind() and trainable
// parameter count (a tied head counts no weight of its own). Builds no tensors.
struct TransformerUnitInfo {
  std::string name;
  std::string kind;
  int64_t parameters = 0;
};
std::vector<TransformerUnitInfo> transformer_unit_infos(const TransformerConfig& config);
// The full model's parameter specs in flat-buffer order (a tied head adds none): what a
// pipeline checkpoint records as the model's manifest. Builds no tensors.
std::vector<ParamSpec> transformer_parameter_specs(const TransformerConfig& config);

// Weights ~ Normal(0, stddev) (GPT-2's residual output projections scaled by 1/sqrt(2 L), as HF
// does), biases 0, norm weights 1. Deterministic for a given seed. A model built from a
// TransformerConfig draws the values of the FULL model's parameters in order and keeps its own,
// so a pipeline stage (build_transformer_stage) gets each parameter's full-model value (a tied
// copy the embedding's).
void init_parameters(Model& model, uint64_t seed, double stddev = 0.02);

}  // namespace zero::model

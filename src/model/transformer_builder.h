// Builds a transformer Model (embedding, blocks, head) from a TransformerConfig and initialises
// its parameters the way Hugging Face initialises a fresh model.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "model/model.h"

namespace zero::model {

// A finalised model with zero parameters; call init_parameters() or load weights. Validates
// `config` first and, on a CPU backend, refuses (ConfigError with both sizes, before allocating)
// a model whose parameters and gradients exceed this machine's memory. `source` names where the
// config came from in messages (the config.json path).
std::unique_ptr<Model> build_transformer(const TransformerConfig& config,
                                         backend::Backend& backend, DType param_dtype,
                                         const std::string& source = "model config");

// Weights ~ Normal(0, stddev) (GPT-2's residual output projections scaled by 1/sqrt(2 L), as HF
// does), biases 0, norm weights 1. Deterministic for a given seed.
void init_parameters(Model& model, uint64_t seed, double stddev = 0.02);

}  // namespace zero::model

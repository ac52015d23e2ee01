// DeepSpeed's zero.Init for a fresh transformer: build_transformer's units laid out without
// storage (Model::finalize_partitioned) and initialised unit by unit with exactly the values
// init_parameters() would give the whole model (model/parameter_draws: one seeded stream, the
// same order), so a ZeRO-3 run started this way equals one started from the whole model, bit for
// bit, while no process ever holds more than one unit.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "model/model.h"
#include "model/transformer_config.h"
#include "model/unit_value_source.h"

namespace zero::model {

// Validates `config` like build_transformer() but skips its whole-model memory check: the
// whole model is never allocated. `values` gives the initial values (initial_unit_values or a
// Hugging Face folder's, model/hf_unit_values.h).
std::unique_ptr<Model> build_transformer_partitioned(const TransformerConfig& config,
                                                     backend::Backend& backend, DType param_dtype,
                                                     std::unique_ptr<UnitValueSource> values,
                                                     const std::string& source = "model config");

// The values init_parameters(model, seed, stddev) draws, one unit at a time.
std::unique_ptr<UnitValueSource> initial_unit_values(const TransformerConfig& config, uint64_t seed,
                                                     double stddev = 0.02);

}  // namespace zero::model

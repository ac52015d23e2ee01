// ParameterDraws: the values init_parameters() gives a fresh transformer, drawn one parameter
// spec at a time from one seeded stream, so a caller that visits the same specs in the same
// order gets the same values whether it holds the whole model (init_parameters) or one unit at
// a time (partitioned_init.h, DeepSpeed's zero.Init).
//
// Hugging Face's initialisation: weights ~ Normal(0, stddev) (GPT-2's residual output
// projections scaled by 1/sqrt(2 L)), biases 0, norm weights 1.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "model/parameter.h"
#include "model/transformer_config.h"

namespace zero::model {

class ParameterDraws {
 public:
  // `config`: the transformer the specs come from (null: no GPT-2 residual scaling).
  ParameterDraws(const TransformerConfig* config, uint64_t seed, double stddev);
  // The next spec's values (shape_numel(spec.shape) of them, row-major) into `values`.
  void draw(const ParamSpec& spec, std::vector<double>& values);

 private:
  double stddev_;
  double residual_scale_ = 1.0;
  std::mt19937_64 rng_;
};

}  // namespace zero::model

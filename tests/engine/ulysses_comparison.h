// Shared by the Ulysses sequence-parallel tests: comparing trained parameters with a one-rank
// reference when the reduction order differs (f32), with the reason for the tolerance's shape.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "model/model.h"

namespace zero::engine::zero_test {

// Parameters: each element within `relative` of the reference relative to its magnitude, floored at
// 0.02 (the initialisation's standard deviation): Adam turns a gradient's relative rounding
// difference d into a parameter difference of about lr x steps x d whatever the parameter's
// size, so elements passing near zero are compared at the scale of the weights. Skipped:
// GPT-2's key biases. Their gradient is exactly zero in exact arithmetic (softmax does not
// change when every key's score moves by the same q.b_k), so what they receive is rounding
// noise that Adam scales up to lr-sized steps; it differs even between two one-rank runs whose
// buffers sit at different addresses (vectorized sums peel differently).
inline void expect_params_close(model::Model& model, const std::vector<float>& got,
                                const std::vector<float>& want, double relative) {
  ASSERT_EQ(got.size(), want.size());
  std::vector<bool> skip(got.size(), false);
  const model::TransformerConfig& c = *model.config();
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    model::Parameter* bias =
        model.find_parameter("transformer.h." + std::to_string(layer) + ".attn.c_attn.bias");
    if (bias == nullptr) continue;
    for (int64_t i = c.q_dim(); i < c.q_dim() + c.kv_dim(); ++i) {
      skip[static_cast<size_t>(bias->flat_offset + i)] = true;
    }
  }
  size_t bad = 0;
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (skip[i]) continue;
    const double scale = std::max(std::abs(static_cast<double>(want[i])), 0.02);
    const double rel = std::abs(static_cast<double>(got[i]) - want[i]) / scale;
    worst = std::max(worst, rel);
    if (rel > relative) ++bad;
  }
  EXPECT_EQ(bad, 0u) << "worst relative difference " << worst;
}

}  // namespace zero::engine::zero_test

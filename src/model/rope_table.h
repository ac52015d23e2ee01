// Rotary-embedding tables cos/sin [T, D/2] for positions 0..T-1. They are computed the way
// Hugging Face computes them — inverse frequencies, angles, cos and sin all in float32, then
// converted to the activation dtype — so zero.cpp reproduces HF models to the last bit the
// float32 tables allow, in f32 and f64 alike.
#pragma once
#include <cstdint>

#include "backend/backend.h"

namespace zero::model {

struct RopeTable {
  int64_t seq_len = 0;
  Tensor cos;
  Tensor sin;
};

RopeTable build_rope_table(backend::Backend& backend, int64_t seq_len, int64_t head_dim,
                           double theta, DType dtype);

}  // namespace zero::model

// Rotary-embedding tables cos/sin [T, D/2] for positions 0..T-1. The angles are the ones
// Hugging Face computes — inverse frequencies and angle = inv_freq * t in float32 — because they
// define the positions a checkpoint was trained with (at t ~ 1000 a float32 angle is off by
// ~1e-4 rad from the exact one). cos and sin of those angles are then evaluated in double and
// rounded once to the table dtype, which f64 oracle runs need.
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

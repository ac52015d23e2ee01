// Global-norm gradient clipping with DeepSpeed's coefficient.
#pragma once
#include "backend/backend.h"

namespace zero::optim {

// DeepSpeed: clip_coef = max_norm / (total_norm + 1e-6), applied when < 1.
double clip_coefficient(double total_norm, double max_norm);
// grads *= coefficient.
void clip_gradients(backend::Backend& backend, Tensor& grads, double coefficient);

}  // namespace zero::optim

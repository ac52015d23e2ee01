// Global-norm gradient clipping with DeepSpeed's coefficient.
#pragma once

namespace zero::optim {

// DeepSpeed: clip_coef = max_norm / (total_norm + 1e-6), applied when < 1 - by the optimizer
// update as it reads each gradient (OptimizerHyper::grad_scale, Optimizer::step), or by the
// offloaded host step (CpuOptimizerStep's clip_coefficient).
double clip_coefficient(double total_norm, double max_norm);

}  // namespace zero::optim

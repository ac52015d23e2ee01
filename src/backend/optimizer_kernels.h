// Types shared by the optimizer-update kernels of every backend. The optimizers (src/optim)
// own the semantics; backends only run the elementwise/segment math over flat buffers.
#pragma once
#include <cstdint>

namespace zero::backend {

// A run of elements of a flat parameter buffer that belongs to one parameter tensor. Lamb's
// trust ratio is computed per segment; weight decay applies only where weight_decay is true
// (DeepSpeed/HF convention: no decay for biases and norm weights).
struct ParamSegment {
  int64_t offset = 0;  // elements from the start of the buffer
  int64_t length = 0;  // elements
  bool weight_decay = true;
};

// kMomentum and kFrozenVarianceAdam are 1-bit Adam's compressed stage, split around its
// compressed all-reduce of the momentum (optim/optimizer.h): kMomentum only moves the momentum,
// m = b1 m + (1 - b1) g, leaving params; kFrozenVarianceAdam moves params,
// p -= lr m / (sqrt(v) + eps) with decoupled decay p -= lr wd p first, reading no gradient and
// leaving the frozen v, after setting m to 0 wherever v is exactly 0 (the momentum mask: such an
// element's gradient was 0 through the whole warm-up; see cpu_optimizers.cpp).
enum class OptimizerKind { kAdam, kLamb, kLion, kAdagrad, kMomentum, kFrozenVarianceAdam };

// Hyper-parameters of one update. `step` is the 1-based count of updates applied so far
// including this one (bias correction uses it).
struct OptimizerHyper {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  int64_t step = 1;
  bool bias_correction = true;
  bool adam_w_mode = true;     // Adam: decoupled decay (AdamW) vs. L2 added to the gradient
  double lamb_max_coeff = 10.0;  // Lamb trust-ratio clamp
  double lamb_min_coeff = 0.01;
  // Every gradient element is multiplied by float(grad_scale) as the update reads it: gradient
  // clipping folded into the update, with the bits Backend::scale (y *= float(alpha)) followed by
  // an update at 1 gives, and one pass over the gradients fewer. 1 leaves the gradients as read.
  double grad_scale = 1.0;
};

}  // namespace zero::backend

#include "optim/grad_clip.h"

namespace zero::optim {

double clip_coefficient(double total_norm, double max_norm) {
  return max_norm / (total_norm + 1e-6);
}

void clip_gradients(backend::Backend& backend, Tensor& grads, double coefficient) {
  backend.scale(grads, coefficient);
}

}  // namespace zero::optim

// The per-segment constants of the CPU optimizer kernels, computed in double and rounded to f32
// exactly as backend/cpu/cpu_optimizers.cpp computes them (same expressions, same order), so the
// SIMD step and Backend::optimizer_update start from the same f32 numbers.
#include <cmath>

#include "offload/cpu_optimizer_kernels.h"

namespace zero::offload::kernels {
namespace {

double bias_correction(const backend::OptimizerHyper& h, double beta) {
  return h.bias_correction ? 1.0 - std::pow(beta, static_cast<double>(h.step)) : 1.0;
}

}  // namespace

AdamConstants adam_constants(const backend::OptimizerHyper& h, double wd) {
  const double bc1 = bias_correction(h, h.beta1);
  const double bc2 = bias_correction(h, h.beta2);
  AdamConstants c{};
  c.b1 = static_cast<float>(h.beta1);
  c.b2 = static_cast<float>(h.beta2);
  c.one_minus_b1 = 1.0f - c.b1;
  c.one_minus_b2 = 1.0f - c.b2;
  c.step_size = static_cast<float>(h.lr / bc1);
  c.inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  c.eps = static_cast<float>(h.eps);
  c.decay = static_cast<float>(h.lr * wd);
  c.l2 = static_cast<float>(wd);
  c.decoupled = h.adam_w_mode;
  return c;
}

LambConstants lamb_constants(const backend::OptimizerHyper& h, double wd) {
  const double bc1 = bias_correction(h, h.beta1);
  const double bc2 = bias_correction(h, h.beta2);
  LambConstants c{};
  c.b1 = static_cast<float>(h.beta1);
  c.b2 = static_cast<float>(h.beta2);
  c.one_minus_b1 = 1.0f - c.b1;
  c.one_minus_b2 = 1.0f - c.b2;
  c.eps = static_cast<float>(h.eps);
  c.wd = static_cast<float>(wd);
  c.inv_bc1 = static_cast<float>(1.0 / bc1);
  c.inv_bc2 = static_cast<float>(1.0 / bc2);
  return c;
}

LionConstants lion_constants(const backend::OptimizerHyper& h, double wd) {
  LionConstants c{};
  c.b1 = static_cast<float>(h.beta1);
  c.b2 = static_cast<float>(h.beta2);
  c.one_minus_b1 = 1.0f - c.b1;
  c.one_minus_b2 = 1.0f - c.b2;
  c.lr = static_cast<float>(h.lr);
  c.keep = static_cast<float>(1.0 - h.lr * wd);
  return c;
}

AdagradConstants adagrad_constants(const backend::OptimizerHyper& h, double wd) {
  AdagradConstants c{};
  c.lr = static_cast<float>(h.lr);
  c.eps = static_cast<float>(h.eps);
  c.l2 = static_cast<float>(wd);
  return c;
}

}  // namespace zero::offload::kernels

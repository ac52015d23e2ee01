#include "backend/cpu/cpu_optimizers.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "backend/cpu/cpu_checks.h"
#include "core/half.h"

namespace zero::backend::cpu {
namespace {

size_t state_count(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kAdam:
    case OptimizerKind::kLamb: return 2;
    case OptimizerKind::kLion:
    case OptimizerKind::kAdagrad:
    case OptimizerKind::kMomentum: return 1;
    case OptimizerKind::kFrozenVarianceAdam: return 2;
  }
  return 0;
}

// A gradient element as f32: held 16-bit gradients widen exactly, so every kind's arithmetic and
// bits are those of an f32 gradient holding the same values.
inline float gradient_value(float g) { return g; }
inline float gradient_value(bf16 g) { return to_float(g); }
inline float gradient_value(f16 g) { return to_float(g); }

// Adam (DeepSpeed FusedAdam): m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= lr * (m / bc1) / (sqrt(v) / sqrt(bc2) + eps), with decoupled decay p -= lr wd p
// (adam_w_mode) or L2 decay g += wd p.
template <typename G>
void adam_segment(float* p, const G* g, float* m, float* v, int64_t n, const OptimizerHyper& h,
                  double wd) {
  const double bc1 = h.bias_correction ? 1.0 - std::pow(h.beta1, static_cast<double>(h.step)) : 1.0;
  const double bc2 = h.bias_correction ? 1.0 - std::pow(h.beta2, static_cast<double>(h.step)) : 1.0;
  const auto b1 = static_cast<float>(h.beta1), b2 = static_cast<float>(h.beta2);
  const auto step_size = static_cast<float>(h.lr / bc1);
  const auto inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  const auto eps = static_cast<float>(h.eps);
  const auto decay = static_cast<float>(h.lr * wd);
  const auto l2 = static_cast<float>(wd);
  const bool decoupled = h.adam_w_mode;
  const auto gs = static_cast<float>(h.grad_scale);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float grad = gradient_value(g[i]) * gs;
    if (!decoupled) grad += l2 * p[i];
    m[i] = b1 * m[i] + (1.0f - b1) * grad;
    v[i] = b2 * v[i] + (1.0f - b2) * grad * grad;
    const float denom = std::sqrt(v[i]) * inv_sqrt_bc2 + eps;
    if (decoupled) p[i] -= decay * p[i];
    p[i] -= step_size * m[i] / denom;
  }
}

// Lamb (DeepSpeed FusedLamb): u = m_hat / (sqrt(v_hat) + eps) + wd p; per parameter tensor
// trust = ||p|| / ||u|| clamped to [min_coeff, max_coeff] (1 when either norm is 0);
// p -= lr * trust * u.
template <typename G>
void lamb_segment(float* p, const G* g, float* m, float* v, int64_t n, const OptimizerHyper& h,
                  double wd) {
  const double bc1 = h.bias_correction ? 1.0 - std::pow(h.beta1, static_cast<double>(h.step)) : 1.0;
  const double bc2 = h.bias_correction ? 1.0 - std::pow(h.beta2, static_cast<double>(h.step)) : 1.0;
  const auto b1 = static_cast<float>(h.beta1), b2 = static_cast<float>(h.beta2);
  const auto eps = static_cast<float>(h.eps);
  const auto wdf = static_cast<float>(wd);
  const auto inv_bc1 = static_cast<float>(1.0 / bc1), inv_bc2 = static_cast<float>(1.0 / bc2);
  const auto gs = static_cast<float>(h.grad_scale);
  double p_norm_sq = 0.0, u_norm_sq = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float grad = gradient_value(g[i]) * gs;
    m[i] = b1 * m[i] + (1.0f - b1) * grad;
    v[i] = b2 * v[i] + (1.0f - b2) * grad * grad;
    const float u = (m[i] * inv_bc1) / (std::sqrt(v[i] * inv_bc2) + eps) + wdf * p[i];
    p_norm_sq += static_cast<double>(p[i]) * p[i];
    u_norm_sq += static_cast<double>(u) * u;
  }
  double trust = 1.0;
  if (p_norm_sq > 0.0 && u_norm_sq > 0.0) {
    trust = std::clamp(std::sqrt(p_norm_sq) / std::sqrt(u_norm_sq), h.lamb_min_coeff, h.lamb_max_coeff);
  }
  const auto step = static_cast<float>(h.lr * trust);
  for (int64_t i = 0; i < n; ++i) {
    const float u = (m[i] * inv_bc1) / (std::sqrt(v[i] * inv_bc2) + eps) + wdf * p[i];
    p[i] -= step * u;
  }
}

// Lion: c = b1 m + (1-b1) g; p = p (1 - lr wd) - lr sign(c); m = b2 m + (1-b2) g.
template <typename G>
void lion_segment(float* p, const G* g, float* m, int64_t n, const OptimizerHyper& h, double wd) {
  const auto b1 = static_cast<float>(h.beta1), b2 = static_cast<float>(h.beta2);
  const auto lr = static_cast<float>(h.lr);
  const auto keep = static_cast<float>(1.0 - h.lr * wd);
  const auto gs = static_cast<float>(h.grad_scale);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float grad = gradient_value(g[i]) * gs;
    const float c = b1 * m[i] + (1.0f - b1) * grad;
    const float sign = c > 0.0f ? 1.0f : (c < 0.0f ? -1.0f : 0.0f);
    p[i] = p[i] * keep - lr * sign;
    m[i] = b2 * m[i] + (1.0f - b2) * grad;
  }
}

// Adagrad (DeepSpeed CPU Adagrad): g += wd p; s += g^2; p -= lr g / (sqrt(s) + eps).
template <typename G>
void adagrad_segment(float* p, const G* g, float* s, int64_t n, const OptimizerHyper& h,
                     double wd) {
  const auto lr = static_cast<float>(h.lr), eps = static_cast<float>(h.eps);
  const auto l2 = static_cast<float>(wd);
  const auto gs = static_cast<float>(h.grad_scale);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float grad = gradient_value(g[i]) * gs + l2 * p[i];
    s[i] += grad * grad;
    p[i] -= lr * grad / (std::sqrt(s[i]) + eps);
  }
}

// 1-bit Adam's compressed stage, before its all-reduce: m = b1 m + (1-b1) g (DeepSpeed's
// exp_avg.mul_(beta1).add_(1 - beta1, grad)).
template <typename G>
void momentum_segment(const G* g, float* m, int64_t n, const OptimizerHyper& h) {
  const auto b1 = static_cast<float>(h.beta1);
  const auto gs = static_cast<float>(h.grad_scale);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) m[i] = b1 * m[i] + (1.0f - b1) * (gradient_value(g[i]) * gs);
}

// ... and after it: DeepSpeed's update = m / (sqrt(v) + eps) + wd p; p -= lr update, with v frozen
// and no bias correction (1-bit Adam has none), decay decoupled as in adam_segment. The momentum
// mask: where v is exactly 0 the gradient was exactly 0 through the whole warm-up (an embedding
// row no batch used), and m is set to 0 - the compressed momentum cannot be 0, and sign * scale
// over eps would throw such a parameter far away. DeepSpeed asks the training script for this
// mask (exp_avg_mask); here the variance gives it.
void frozen_variance_adam_segment(float* p, float* m, const float* v, int64_t n,
                                  const OptimizerHyper& h, double wd) {
  const auto lr = static_cast<float>(h.lr), eps = static_cast<float>(h.eps);
  const auto decay = static_cast<float>(h.lr * wd);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    if (v[i] == 0.0f) m[i] = 0.0f;
    const float denom = std::sqrt(v[i]) + eps;
    p[i] -= decay * p[i];
    p[i] -= lr * m[i] / denom;
  }
}

template <typename G>
void update_segments(OptimizerKind kind, float* p, const G* g, std::span<Tensor> state,
                     std::span<const ParamSegment> segments, const OptimizerHyper& hyper) {
  for (const ParamSegment& seg : segments) {
    const double wd = seg.weight_decay ? hyper.weight_decay : 0.0;
    const int64_t o = seg.offset, len = seg.length;
    switch (kind) {
      case OptimizerKind::kAdam:
        adam_segment(p + o, g + o, state[0].data<float>() + o, state[1].data<float>() + o, len, hyper, wd);
        break;
      case OptimizerKind::kLamb:
        lamb_segment(p + o, g + o, state[0].data<float>() + o, state[1].data<float>() + o, len, hyper, wd);
        break;
      case OptimizerKind::kLion:
        lion_segment(p + o, g + o, state[0].data<float>() + o, len, hyper, wd);
        break;
      case OptimizerKind::kAdagrad:
        adagrad_segment(p + o, g + o, state[0].data<float>() + o, len, hyper, wd);
        break;
      case OptimizerKind::kMomentum:
        momentum_segment(g + o, state[0].data<float>() + o, len, hyper);
        break;
      case OptimizerKind::kFrozenVarianceAdam:
        frozen_variance_adam_segment(p + o, state[0].data<float>() + o, state[1].data<float>() + o,
                                     len, hyper, wd);
        break;
    }
  }
}

}  // namespace

void optimizer_update(OptimizerKind kind, Tensor& params, const Tensor& grads,
                      std::span<Tensor> state, std::span<const ParamSegment> segments,
                      const OptimizerHyper& hyper) {
  const char* op = "optimizer_update";
  require_contiguous(params, op, "params");
  require_contiguous(grads, op, "grads");
  require_dtype(params, DType::kF32, op, "params");
  if (grads.dtype() != DType::kF32 && grads.dtype() != DType::kBF16 &&
      grads.dtype() != DType::kF16) {
    throw ShapeError(std::string(op) + ": grads must be f32, bf16 or f16, got " + grads.describe());
  }
  require_same_shape(params, grads, op, "params", "grads");
  if (state.size() != state_count(kind)) {
    throw ShapeError(std::string(op) + ": expected " + std::to_string(state_count(kind)) +
                     " state buffers, got " + std::to_string(state.size()));
  }
  for (Tensor& s : state) {
    require_contiguous(s, op, "state");
    require_dtype(s, DType::kF32, op, "state");
    require_same_shape(s, params, op, "state", "params");
  }
  const int64_t n = params.numel();
  for (const ParamSegment& seg : segments) {
    if (seg.offset < 0 || seg.length < 0 || seg.offset + seg.length > n) {
      throw ShapeError(std::string(op) + ": segment [" + std::to_string(seg.offset) + ", +" +
                       std::to_string(seg.length) + ") is outside the " + std::to_string(n) +
                       "-element buffer");
    }
  }
  float* p = params.data<float>();
  switch (grads.dtype()) {
    case DType::kBF16: update_segments(kind, p, grads.data<bf16>(), state, segments, hyper); break;
    case DType::kF16: update_segments(kind, p, grads.data<f16>(), state, segments, hyper); break;
    default: update_segments(kind, p, grads.data<float>(), state, segments, hyper); break;
  }
}

}  // namespace zero::backend::cpu

// Optimizer updates over flat f32 buffers, segment by segment, with the formulas and the f32
// operation order of backend/cpu/cpu_optimizers.cpp (compiled without fused multiply-add, IEEE
// division and square root: Adam, Lion and Adagrad give the CPU's bits). Lamb's trust ratio is
// per segment: one block per segment reduces ||p|| and ||u|| in f64 with a fixed tree.
//
// Segments travel as kernel parameters (kSegmentsPerLaunch per launch), so an update needs no
// host-to-device copy; blockIdx.y picks the segment, blockIdx.x strides over its elements.
#include <cmath>
#include <type_traits>

#include "backend/cuda/cuda_device_math.cuh"
#include "backend/cuda/cuda_kernels.h"

namespace zero::backend::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kSegmentsPerLaunch = 96;  // 96 x 24 bytes: well inside the 4 KiB parameter space

struct Segment {
  int64_t offset;
  int64_t length;
  float weight_decay;   // the segment's decay (0 where the flag is off)
  float rounded_decay;  // Adam: float(lr * wd); Lion: float(1 - lr * wd) (rounded from double)
};
struct SegmentBatch {
  Segment segment[kSegmentsPerLaunch];
};

// The element type of the rounded parameter copy, or NoCopy for an update without one.
struct NoCopy {};
template <typename C>
__device__ __forceinline__ void store_copy(C* copy, int64_t i, float value) {
  if constexpr (!std::is_same_v<C, NoCopy>) store_f32(copy, i, value);
}

// Per-update constants, computed on the host in double exactly as the CPU computes them.
struct AdamConstants {
  float b1, b2, step_size, inv_sqrt_bc2, eps, grad_scale;
  bool decoupled;
};

template <typename C>
__global__ void adam_kernel(float* p, const float* g, float* m, float* v, SegmentBatch batch,
                            AdamConstants k, C* copy) {
  const Segment seg = batch.segment[blockIdx.y];
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < seg.length;
       j += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = seg.offset + j;
    float grad = g[i] * k.grad_scale;
    if (!k.decoupled) grad += seg.weight_decay * p[i];
    m[i] = k.b1 * m[i] + (1.0f - k.b1) * grad;
    v[i] = k.b2 * v[i] + (1.0f - k.b2) * grad * grad;
    const float denom = sqrtf(v[i]) * k.inv_sqrt_bc2 + k.eps;
    float param = p[i];
    if (k.decoupled) param -= seg.rounded_decay * param;
    p[i] = param - k.step_size * m[i] / denom;
    store_copy(copy, i, p[i]);
  }
}

struct LionConstants {
  float b1, b2, lr, grad_scale;
};

template <typename C>
__global__ void lion_kernel(float* p, const float* g, float* m, SegmentBatch batch,
                            LionConstants k, C* copy) {
  const Segment seg = batch.segment[blockIdx.y];
  const float keep = seg.rounded_decay;  // float(1 - lr * wd), rounded from double on the host
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < seg.length;
       j += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = seg.offset + j;
    const float grad = g[i] * k.grad_scale;
    const float c = k.b1 * m[i] + (1.0f - k.b1) * grad;
    const float sign = c > 0.0f ? 1.0f : (c < 0.0f ? -1.0f : 0.0f);
    p[i] = p[i] * keep - k.lr * sign;
    store_copy(copy, i, p[i]);
    m[i] = k.b2 * m[i] + (1.0f - k.b2) * grad;
  }
}

struct AdagradConstants {
  float lr, eps, grad_scale;
};

template <typename C>
__global__ void adagrad_kernel(float* p, const float* g, float* s, SegmentBatch batch,
                               AdagradConstants k, C* copy) {
  const Segment seg = batch.segment[blockIdx.y];
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < seg.length;
       j += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = seg.offset + j;
    const float grad = g[i] * k.grad_scale + seg.weight_decay * p[i];
    s[i] += grad * grad;
    p[i] -= k.lr * grad / (sqrtf(s[i]) + k.eps);
    store_copy(copy, i, p[i]);
  }
}

struct LambConstants {
  float b1, b2, eps, inv_bc1, inv_bc2, grad_scale;
  double lr, min_coeff, max_coeff;
};

// One block per segment (gridDim.x == 1).
template <typename C>
__global__ void lamb_kernel(float* p, const float* g, float* m, float* v, SegmentBatch batch,
                            LambConstants k, C* copy) {
  __shared__ double shared[kWarp];
  const Segment seg = batch.segment[blockIdx.y];
  const float wd = seg.weight_decay;
  double p_norm_sq = 0.0, u_norm_sq = 0.0;
  for (int64_t j = threadIdx.x; j < seg.length; j += blockDim.x) {
    const int64_t i = seg.offset + j;
    const float grad = g[i] * k.grad_scale;
    m[i] = k.b1 * m[i] + (1.0f - k.b1) * grad;
    v[i] = k.b2 * v[i] + (1.0f - k.b2) * grad * grad;
    const float u = (m[i] * k.inv_bc1) / (sqrtf(v[i] * k.inv_bc2) + k.eps) + wd * p[i];
    p_norm_sq += static_cast<double>(p[i]) * p[i];
    u_norm_sq += static_cast<double>(u) * u;
  }
  p_norm_sq = block_sum(p_norm_sq, shared);
  u_norm_sq = block_sum(u_norm_sq, shared);
  double trust = 1.0;
  if (p_norm_sq > 0.0 && u_norm_sq > 0.0) {
    trust = fmin(fmax(sqrt(p_norm_sq) / sqrt(u_norm_sq), k.min_coeff), k.max_coeff);
  }
  const auto step = static_cast<float>(k.lr * trust);
  for (int64_t j = threadIdx.x; j < seg.length; j += blockDim.x) {
    const int64_t i = seg.offset + j;
    const float u = (m[i] * k.inv_bc1) / (sqrtf(v[i] * k.inv_bc2) + k.eps) + wd * p[i];
    p[i] -= step * u;
    store_copy(copy, i, p[i]);
  }
}

template <typename C>
void launch_update(OptimizerKind kind, float* params, const float* grads, float* state0,
                   float* state1, const ParamSegment* segments, size_t segment_count,
                   const OptimizerHyper& h, C* copy, cudaStream_t stream) {
  const double bc1 = h.bias_correction ? 1.0 - std::pow(h.beta1, static_cast<double>(h.step)) : 1.0;
  const double bc2 = h.bias_correction ? 1.0 - std::pow(h.beta2, static_cast<double>(h.step)) : 1.0;
  for (size_t first = 0; first < segment_count; first += kSegmentsPerLaunch) {
    SegmentBatch batch{};
    const size_t count = std::min<size_t>(kSegmentsPerLaunch, segment_count - first);
    int64_t longest = 0;
    for (size_t s = 0; s < count; ++s) {
      const ParamSegment& in = segments[first + s];
      const double wd = in.weight_decay ? h.weight_decay : 0.0;
      Segment& out = batch.segment[s];
      out.offset = in.offset;
      out.length = in.length;
      out.weight_decay = static_cast<float>(wd);
      // Per-segment constants the CPU rounds from double: Adam's lr * wd, Lion's 1 - lr * wd.
      out.rounded_decay = kind == OptimizerKind::kLion ? static_cast<float>(1.0 - h.lr * wd)
                                                       : static_cast<float>(h.lr * wd);
      longest = std::max(longest, in.length);
    }
    if (longest == 0) continue;
    const dim3 grid(grid_for(longest, kThreads), static_cast<unsigned>(count));
    switch (kind) {
      case OptimizerKind::kAdam: {
        const AdamConstants k{
            static_cast<float>(h.beta1),    static_cast<float>(h.beta2),
            static_cast<float>(h.lr / bc1), static_cast<float>(1.0 / std::sqrt(bc2)),
            static_cast<float>(h.eps),      static_cast<float>(h.grad_scale),
            h.adam_w_mode};
        adam_kernel<C><<<grid, kThreads, 0, stream>>>(params, grads, state0, state1, batch, k, copy);
        break;
      }
      case OptimizerKind::kLamb: {
        const LambConstants k{static_cast<float>(h.beta1),
                              static_cast<float>(h.beta2),
                              static_cast<float>(h.eps),
                              static_cast<float>(1.0 / bc1),
                              static_cast<float>(1.0 / bc2),
                              static_cast<float>(h.grad_scale),
                              h.lr,
                              h.lamb_min_coeff,
                              h.lamb_max_coeff};
        lamb_kernel<C><<<dim3(1, static_cast<unsigned>(count)), 1024, 0, stream>>>(
            params, grads, state0, state1, batch, k, copy);
        break;
      }
      case OptimizerKind::kLion: {
        const LionConstants k{static_cast<float>(h.beta1), static_cast<float>(h.beta2),
                              static_cast<float>(h.lr), static_cast<float>(h.grad_scale)};
        lion_kernel<C><<<grid, kThreads, 0, stream>>>(params, grads, state0, batch, k, copy);
        break;
      }
      case OptimizerKind::kAdagrad: {
        const AdagradConstants k{static_cast<float>(h.lr), static_cast<float>(h.eps),
                                 static_cast<float>(h.grad_scale)};
        adagrad_kernel<C><<<grid, kThreads, 0, stream>>>(params, grads, state0, batch, k, copy);
        break;
      }
    }
    ZERO_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace

void launch_optimizer_update(OptimizerKind kind, float* params, const float* grads, float* state0,
                             float* state1, const ParamSegment* segments, size_t segment_count,
                             const OptimizerHyper& hyper, void* copy, DType copy_dtype,
                             cudaStream_t stream) {
  if (copy == nullptr) {
    launch_update<NoCopy>(kind, params, grads, state0, state1, segments, segment_count, hyper,
                          nullptr, stream);
    return;
  }
  dispatch_storage(copy_dtype, "optimizer_update's parameter copy", [&](auto tag) {
    using C = decltype(tag);
    launch_update<C>(kind, params, grads, state0, state1, segments, segment_count, hyper,
                     static_cast<C*>(copy), stream);
  });
}

}  // namespace zero::backend::cuda

// Optimizer updates over flat f32 buffers, segment by segment, with the formulas and the f32
// operation order of backend/cpu/cpu_optimizers.cpp (compiled without fused multiply-add, IEEE
// division and square root: Adam, Lion, Adagrad and 1-bit Adam's two halves (kMomentum,
// kFrozenVarianceAdam) give the CPU's bits). Lamb's trust ratio is per segment: one block per
// segment reduces ||p|| and ||u|| in f64 with a fixed tree.
//
// Segments travel as kernel parameters (kSegmentsPerLaunch per launch), so an update needs no
// host-to-device copy. Every kind but Lamb cuts every segment into chunks of kChunk elements,
// one block per chunk (a block finds its segment by binary search over the batch's chunk
// prefix): every block has work, however unequal the segments (a 2 Ki-element norm weight
// beside a 65 Mi-element embedding; sizing the grid for the longest left most blocks empty).
// A step says which arrays it touches (kReadsGrad, kWritesParam, kWritesStates), so kMomentum
// does not store the parameters it leaves, nor kFrozenVarianceAdam read gradients it ignores.
// Aligned chunks move four elements per 16-byte access (a 16-bit gradient's four per 8-byte
// access); the per-element arithmetic is the scalar path's, so the bits do not depend on the
// path. Lamb keeps one block per segment.
//
// Gradients are f32 or held in the parameters' 16-bit dtype (one-micro-batch steps at stage 0:
// the rounded gradient loses nothing in 16 bits); a 16-bit gradient widens exactly, so the
// update's bits are those of an f32 gradient of the same values.
#include <climits>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "backend/cuda/cuda_device_math.cuh"
#include "backend/cuda/cuda_kernels.h"

namespace zero::backend::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kSegmentsPerLaunch = 96;  // 96 x 24 + 97 x 4 bytes: well inside 4 KiB of parameters
constexpr int kChunk = 4096;            // elements per block: 4 float4 per thread

struct Segment {
  int64_t offset;
  int64_t length;
  float weight_decay;   // the segment's decay (0 where the flag is off)
  float rounded_decay;  // Adam: float(lr * wd); Lion: float(1 - lr * wd) (rounded from double)
};
struct SegmentBatch {
  Segment segment[kSegmentsPerLaunch];
  // Chunked kernels: segment s owns blocks [first_chunk[s], first_chunk[s + 1]).
  int32_t first_chunk[kSegmentsPerLaunch + 1];
  int32_t count;
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
struct LionConstants {
  float b1, b2, lr, grad_scale;
};
struct AdagradConstants {
  float lr, eps, grad_scale;
};
struct MomentumConstants {
  float b1, grad_scale;
};
struct FrozenVarianceAdamConstants {
  float lr, eps;
};

// One element's update in registers (p, the states s0/s1, the gradient g), in the CPU's
// operation order (backend/cpu/cpu_optimizers.cpp).
struct AdamStep {
  AdamConstants k;
  static constexpr int kStates = 2;  // exp_avg, exp_avg_sq
  static constexpr bool kReadsGrad = true, kWritesParam = true, kWritesStates = true;
  __device__ __forceinline__ void operator()(float& p, float g, float& m, float& v,
                                             const Segment& seg) const {
    float grad = g * k.grad_scale;
    if (!k.decoupled) grad += seg.weight_decay * p;
    m = k.b1 * m + (1.0f - k.b1) * grad;
    v = k.b2 * v + (1.0f - k.b2) * grad * grad;
    const float denom = sqrtf(v) * k.inv_sqrt_bc2 + k.eps;
    float param = p;
    if (k.decoupled) param -= seg.rounded_decay * param;
    p = param - k.step_size * m / denom;
  }
};
struct LionStep {
  LionConstants k;
  static constexpr int kStates = 1;  // exp_avg
  static constexpr bool kReadsGrad = true, kWritesParam = true, kWritesStates = true;
  __device__ __forceinline__ void operator()(float& p, float g, float& m, float& /*unused*/,
                                             const Segment& seg) const {
    const float keep = seg.rounded_decay;  // float(1 - lr * wd), rounded from double on the host
    const float grad = g * k.grad_scale;
    const float c = k.b1 * m + (1.0f - k.b1) * grad;
    const float sign = c > 0.0f ? 1.0f : (c < 0.0f ? -1.0f : 0.0f);
    p = p * keep - k.lr * sign;
    m = k.b2 * m + (1.0f - k.b2) * grad;
  }
};
struct AdagradStep {
  AdagradConstants k;
  static constexpr int kStates = 1;  // sum_sq
  static constexpr bool kReadsGrad = true, kWritesParam = true, kWritesStates = true;
  __device__ __forceinline__ void operator()(float& p, float g, float& s, float& /*unused*/,
                                             const Segment& seg) const {
    const float grad = g * k.grad_scale + seg.weight_decay * p;
    s += grad * grad;
    p -= k.lr * grad / (sqrtf(s) + k.eps);
  }
};
// 1-bit Adam before its compressed all-reduce: only the momentum moves (a parameter copy still
// receives the unchanged parameters, as optimizer_update_with_copy's default would copy them).
struct MomentumStep {
  MomentumConstants k;
  static constexpr int kStates = 1;  // exp_avg
  static constexpr bool kReadsGrad = true, kWritesParam = false, kWritesStates = true;
  __device__ __forceinline__ void operator()(float& /*p*/, float g, float& m, float& /*unused*/,
                                             const Segment& /*seg*/) const {
    m = k.b1 * m + (1.0f - k.b1) * (g * k.grad_scale);
  }
};
// ... and after it: the parameters move with the reduced momentum and the frozen variance; no
// gradient is read. The momentum mask (m = 0 where v is exactly 0, cpu_optimizers.cpp) writes
// the momentum; v is stored back unchanged (the step writes both states or neither).
struct FrozenVarianceAdamStep {
  FrozenVarianceAdamConstants k;
  static constexpr int kStates = 2;  // exp_avg, exp_avg_sq
  static constexpr bool kReadsGrad = false, kWritesParam = true, kWritesStates = true;
  __device__ __forceinline__ void operator()(float& p, float /*g*/, float& m, float& v,
                                             const Segment& seg) const {
    if (v == 0.0f) m = 0.0f;
    const float denom = sqrtf(v) + k.eps;
    float param = p;
    param -= seg.rounded_decay * param;  // float(lr * wd), rounded from double on the host
    p = param - k.lr * m / denom;
  }
};

__device__ __forceinline__ bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// Four rounded copies: one 8-byte store for 16-bit types (4-element aligned), else scalar.
template <typename C>
__device__ __forceinline__ void store_copy4(C* copy, int64_t i, const float (&v)[4]) {
  if constexpr (std::is_same_v<C, NoCopy>) {
    return;
  } else if constexpr (sizeof(C) == 2) {
    C packed[4];
#pragma unroll
    for (int l = 0; l < 4; ++l) store_f32(packed, l, v[l]);
    uint2 bits;
    std::memcpy(&bits, packed, sizeof(bits));
    *reinterpret_cast<uint2*>(copy + i) = bits;
  } else {
#pragma unroll
    for (int l = 0; l < 4; ++l) store_f32(copy, i + l, v[l]);
  }
}

// Four gradient elements at g + i (16-byte aligned for f32, 8-byte for 16-bit types), widened.
template <typename G>
__device__ __forceinline__ void load_grad4(const G* g, int64_t i, float (&out)[4]) {
  if constexpr (sizeof(G) == 4) {
    const float4 v = *reinterpret_cast<const float4*>(g + i);
    out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
  } else {
    const uint2 bits = *reinterpret_cast<const uint2*>(g + i);
    G packed[4];
    std::memcpy(packed, &bits, sizeof(bits));
#pragma unroll
    for (int l = 0; l < 4; ++l) out[l] = load_f32(packed, l);
  }
}

// grid: one block per chunk of the batch's segments (SegmentBatch::first_chunk).
template <typename Step, typename C, typename G>
__global__ void __launch_bounds__(kThreads)
    chunked_update(float* __restrict__ p, const G* __restrict__ g, float* __restrict__ s0,
                   float* __restrict__ s1, SegmentBatch batch, Step step, C* __restrict__ copy) {
  int lo = 0, hi = batch.count - 1;  // the last segment whose first chunk is <= blockIdx.x
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (batch.first_chunk[mid] <= static_cast<int32_t>(blockIdx.x)) lo = mid; else hi = mid - 1;
  }
  const Segment seg = batch.segment[lo];
  const int64_t begin = seg.offset + int64_t{static_cast<int32_t>(blockIdx.x) - batch.first_chunk[lo]} * kChunk;
  const int64_t end = min(seg.offset + seg.length, begin + kChunk);
  constexpr bool kTwoStates = Step::kStates == 2;
  // The parameters are read where they change or go to the copy (kMomentum without a copy
  // leaves them unread: a quarter of its traffic).
  constexpr bool kReadsParam = Step::kWritesParam || !std::is_same_v<C, NoCopy>;
  // Vectors when every array read is 16-byte aligned at `begin` (and the copy 8-byte aligned).
  bool vectors = (!kReadsParam || aligned16(p + begin)) &&
                 (!Step::kReadsGrad ||
                  reinterpret_cast<uintptr_t>(g + begin) % (4 * sizeof(G)) == 0) &&
                 aligned16(s0 + begin) &&
                 (!kTwoStates || aligned16(s1 + begin));
  if constexpr (!std::is_same_v<C, NoCopy>) {
    vectors = vectors && reinterpret_cast<uintptr_t>(copy + begin) % (4 * sizeof(C)) == 0;
  }
  const int64_t vector_end = vectors ? begin + (end - begin) / 4 * 4 : begin;
  for (int64_t i = begin + 4 * int64_t{threadIdx.x}; i < vector_end; i += 4 * kThreads) {
    float4 pv = make_float4(0, 0, 0, 0);
    if constexpr (kReadsParam) pv = *reinterpret_cast<const float4*>(p + i);
    float gl[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if constexpr (Step::kReadsGrad) load_grad4(g, i, gl);
    float4 av = *reinterpret_cast<const float4*>(s0 + i);
    float4 bv = kTwoStates ? *reinterpret_cast<const float4*>(s1 + i) : make_float4(0, 0, 0, 0);
    float pl[4] = {pv.x, pv.y, pv.z, pv.w}, al[4] = {av.x, av.y, av.z, av.w};
    float bl[4] = {bv.x, bv.y, bv.z, bv.w};
#pragma unroll
    for (int l = 0; l < 4; ++l) step(pl[l], gl[l], al[l], bl[l], seg);
    if constexpr (Step::kWritesParam) {
      *reinterpret_cast<float4*>(p + i) = make_float4(pl[0], pl[1], pl[2], pl[3]);
    }
    if constexpr (Step::kWritesStates) {
      *reinterpret_cast<float4*>(s0 + i) = make_float4(al[0], al[1], al[2], al[3]);
      if (kTwoStates) *reinterpret_cast<float4*>(s1 + i) = make_float4(bl[0], bl[1], bl[2], bl[3]);
    }
    store_copy4(copy, i, pl);
  }
  for (int64_t i = vector_end + threadIdx.x; i < end; i += kThreads) {
    float pe = 0.0f, ae = s0[i], be = 0.0f;
    if constexpr (kReadsParam) pe = p[i];
    if constexpr (kTwoStates) be = s1[i];
    step(pe, Step::kReadsGrad ? load_f32(g, i) : 0.0f, ae, be, seg);
    if constexpr (Step::kWritesParam) p[i] = pe;
    if constexpr (Step::kWritesStates) {
      s0[i] = ae;
      if constexpr (kTwoStates) s1[i] = be;
    }
    store_copy(copy, i, pe);
  }
}

struct LambConstants {
  float b1, b2, eps, inv_bc1, inv_bc2, grad_scale;
  double lr, min_coeff, max_coeff;
};

// One block per segment (gridDim.x == 1).
template <typename C, typename G>
__global__ void lamb_kernel(float* p, const G* g, float* m, float* v, SegmentBatch batch,
                            LambConstants k, C* copy) {
  __shared__ double shared[kWarp];
  const Segment seg = batch.segment[blockIdx.y];
  const float wd = seg.weight_decay;
  double p_norm_sq = 0.0, u_norm_sq = 0.0;
  for (int64_t j = threadIdx.x; j < seg.length; j += blockDim.x) {
    const int64_t i = seg.offset + j;
    const float grad = load_f32(g, i) * k.grad_scale;
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

template <typename C, typename G>
void launch_update(OptimizerKind kind, float* params, const G* grads, float* state0,
                   float* state1, const ParamSegment* segments, size_t segment_count,
                   const OptimizerHyper& h, C* copy, cudaStream_t stream) {
  const double bc1 = h.bias_correction ? 1.0 - std::pow(h.beta1, static_cast<double>(h.step)) : 1.0;
  const double bc2 = h.bias_correction ? 1.0 - std::pow(h.beta2, static_cast<double>(h.step)) : 1.0;
  for (size_t first = 0; first < segment_count; first += kSegmentsPerLaunch) {
    SegmentBatch batch{};
    const size_t count = std::min<size_t>(kSegmentsPerLaunch, segment_count - first);
    int64_t chunks = 0;
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
      batch.first_chunk[s] = static_cast<int32_t>(chunks);
      chunks += (in.length + kChunk - 1) / kChunk;
      ZERO_CHECK(chunks <= INT32_MAX, "optimizer update: " << chunks << " chunks in one launch");
    }
    if (chunks == 0) continue;  // only empty segments
    batch.count = static_cast<int32_t>(count);
    batch.first_chunk[count] = static_cast<int32_t>(chunks);
    const auto blocks = static_cast<unsigned>(chunks);
    switch (kind) {
      case OptimizerKind::kAdam: {
        const AdamConstants k{
            static_cast<float>(h.beta1),    static_cast<float>(h.beta2),
            static_cast<float>(h.lr / bc1), static_cast<float>(1.0 / std::sqrt(bc2)),
            static_cast<float>(h.eps),      static_cast<float>(h.grad_scale),
            h.adam_w_mode};
        chunked_update<AdamStep, C, G><<<blocks, kThreads, 0, stream>>>(
            params, grads, state0, state1, batch, AdamStep{k}, copy);
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
        lamb_kernel<C, G><<<dim3(1, static_cast<unsigned>(count)), 1024, 0, stream>>>(
            params, grads, state0, state1, batch, k, copy);
        break;
      }
      case OptimizerKind::kLion: {
        const LionConstants k{static_cast<float>(h.beta1), static_cast<float>(h.beta2),
                              static_cast<float>(h.lr), static_cast<float>(h.grad_scale)};
        chunked_update<LionStep, C, G><<<blocks, kThreads, 0, stream>>>(
            params, grads, state0, nullptr, batch, LionStep{k}, copy);
        break;
      }
      case OptimizerKind::kAdagrad: {
        const AdagradConstants k{static_cast<float>(h.lr), static_cast<float>(h.eps),
                                 static_cast<float>(h.grad_scale)};
        chunked_update<AdagradStep, C, G><<<blocks, kThreads, 0, stream>>>(
            params, grads, state0, nullptr, batch, AdagradStep{k}, copy);
        break;
      }
      case OptimizerKind::kMomentum: {
        const MomentumConstants k{static_cast<float>(h.beta1), static_cast<float>(h.grad_scale)};
        chunked_update<MomentumStep, C, G><<<blocks, kThreads, 0, stream>>>(
            params, grads, state0, nullptr, batch, MomentumStep{k}, copy);
        break;
      }
      case OptimizerKind::kFrozenVarianceAdam: {
        const FrozenVarianceAdamConstants k{static_cast<float>(h.lr), static_cast<float>(h.eps)};
        chunked_update<FrozenVarianceAdamStep, C, G><<<blocks, kThreads, 0, stream>>>(
            params, grads, state0, state1, batch, FrozenVarianceAdamStep{k}, copy);
        break;
      }
    }
    ZERO_CUDA_CHECK_LAUNCH();
  }
}


template <typename G>
void launch_for_gradients(OptimizerKind kind, float* params, const G* grads, float* state0,
                          float* state1, const ParamSegment* segments, size_t segment_count,
                          const OptimizerHyper& hyper, void* copy, DType copy_dtype,
                          cudaStream_t stream) {
  if (copy == nullptr) {
    launch_update<NoCopy, G>(kind, params, grads, state0, state1, segments, segment_count, hyper,
                             nullptr, stream);
    return;
  }
  if constexpr (std::is_same_v<G, float>) {
    dispatch_storage(copy_dtype, "optimizer_update's parameter copy", [&](auto tag) {
      using C = decltype(tag);
      launch_update<C, G>(kind, params, grads, state0, state1, segments, segment_count, hyper,
                          static_cast<C*>(copy), stream);
    });
  } else {
    // A 16-bit gradient comes with parameters of its own dtype (the held gradients' case).
    ZERO_CHECK(copy_dtype == DTypeOf<G>::value,
               "optimizer_update: " << dtype_name(DTypeOf<G>::value) << " gradients with a "
                                    << dtype_name(copy_dtype) << " parameter copy");
    launch_update<G, G>(kind, params, grads, state0, state1, segments, segment_count, hyper,
                        static_cast<G*>(copy), stream);
  }
}

}  // namespace

void launch_optimizer_update(OptimizerKind kind, float* params, const void* grads,
                             DType grads_dtype, float* state0, float* state1,
                             const ParamSegment* segments, size_t segment_count,
                             const OptimizerHyper& hyper, void* copy, DType copy_dtype,
                             cudaStream_t stream) {
  dispatch_storage(grads_dtype, "optimizer_update's gradients", [&](auto tag) {
    using G = decltype(tag);
    launch_for_gradients(kind, params, static_cast<const G*>(grads), state0, state1, segments,
                         segment_count, hyper, copy, copy_dtype, stream);
  });
}

}  // namespace zero::backend::cuda

// int8 group quantization on the device: Backend::quantize_int8_groups and
// dequantize_int8_groups (semantics and layout in backend/int8_groups.h; the oracle is
// backend/cpu/cpu_int8_groups.cpp, whose f32 operations these kernels repeat: IEEE division,
// round-half-to-even, no fused multiply-add - the file is built with --fmad=false, as the CPU
// file with -ffp-contract=off - so both give the same bytes).
//
// Quantize: a block per group (grid-stride over groups): the threads take the group's largest
// magnitude through block_max (a non-finite element counts as +Inf, which no finite group
// reaches), thread 0 stores the scale, and every thread writes its elements' codes.
// Dequantize: a thread per element, its group's scale read beside its code.
#include <cfloat>
#include <cmath>
#include <cstdint>

#include "backend/cuda/cuda_device_math.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/int8_groups.h"

namespace zero::backend::cuda {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxGroupBlocks = 132 * 16;

template <typename T>
__global__ void quantize_int8_groups_kernel(uint8_t* packed, const T* values, int64_t count,
                                            int64_t group, int64_t groups, int64_t scale_offset) {
  __shared__ float shared[32];
  if (blockIdx.x == 0 && threadIdx.x < scale_offset - count) {
    packed[count + threadIdx.x] = 0;  // the alignment bytes before the scales
  }
  auto* codes = reinterpret_cast<int8_t*>(packed);
  auto* scales = reinterpret_cast<float*>(packed + scale_offset);
  const float limit = static_cast<float>(kInt8GroupMaxCode);
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    const int64_t begin = g * group;
    const int64_t end = begin + group < count ? begin + group : count;
    float largest = 0.0f;
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      const float x = load_f32(values, i);
      largest = fmaxf(largest, isfinite(x) ? fabsf(x) : INFINITY);
    }
    largest = block_max(largest, shared);
    float scale = largest / limit;
    if (isinf(largest)) scale = NAN;
    else if (scale < FLT_MIN) scale = 0.0f;
    if (threadIdx.x == 0) scales[g] = scale;
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      int8_t code = 0;
      if (scale > 0.0f) {
        const float q = rintf(load_f32(values, i) / scale);  // IEEE division (no fast math)
        code = static_cast<int8_t>(fminf(fmaxf(q, -limit), limit));
      }
      codes[i] = code;
    }
  }
}

template <typename T>
__global__ void dequantize_int8_groups_kernel(T* values, const uint8_t* packed, int64_t count,
                                              int64_t group, int64_t scale_offset,
                                              bool accumulate) {
  const auto* codes = reinterpret_cast<const int8_t*>(packed);
  const auto* scales = reinterpret_cast<const float*>(packed + scale_offset);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float decoded = static_cast<float>(codes[i]) * scales[i / group];
    store_f32(values, i, accumulate ? load_f32(values, i) + decoded : decoded);
  }
}

}  // namespace

void launch_quantize_int8_groups(uint8_t* packed, const void* values, DType dtype, int64_t count,
                                 int64_t group, cudaStream_t stream) {
  const Int8Groups layout{count, group};
  if (count == 0) return;
  const int64_t groups = layout.groups();
  const unsigned blocks = groups < kMaxGroupBlocks ? static_cast<unsigned>(groups)
                                                   : kMaxGroupBlocks;
  dispatch_storage(dtype, "quantize_int8_groups", [&](auto tag) {
    using T = decltype(tag);
    quantize_int8_groups_kernel<T><<<blocks, kThreads, 0, stream>>>(
        packed, static_cast<const T*>(values), count, group, groups, layout.scale_offset());
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_dequantize_int8_groups(void* values, DType dtype, const uint8_t* packed, int64_t count,
                                   int64_t group, bool accumulate, cudaStream_t stream) {
  const Int8Groups layout{count, group};
  if (count == 0) return;
  dispatch_storage(dtype, "dequantize_int8_groups", [&](auto tag) {
    using T = decltype(tag);
    dequantize_int8_groups_kernel<T><<<grid_for(count, kThreads), kThreads, 0, stream>>>(
        static_cast<T*>(values), packed, count, group, layout.scale_offset(), accumulate);
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

}  // namespace zero::backend::cuda

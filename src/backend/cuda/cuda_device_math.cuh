// Device-side helpers shared by the .cu files: widening loads and narrowing stores of the
// storage types (core/half.h's bits for every non-NaN value; on the GPU through cvt, below),
// block reductions with
// a fixed combining order (results do not depend on timing), and the host-side dtype dispatch.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/half.h"

namespace zero::backend::cuda {

__device__ __forceinline__ float load_f32(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load_f32(const bf16* p, int64_t i) {
  return __uint_as_float(static_cast<uint32_t>(p[i].bits) << 16);
}
// The 16-bit conversions on the GPU are the hardware's cvt: cvt.f32.f16 is exact, and
// cvt.rn.f16.f32 / cvt.rn.bf16.f32 round to nearest even with overflow to Inf and subnormals
// kept - core/half.h's bits for every value but a NaN, which stays a NaN without its payload
// (the canonical 0x7fff, as PyTorch's conversions give). core/half.h's f16 conversion is a dozen
// branches an element: in the unrolled warp-per-row norm kernels it made the f16 instantiations
// ~80% of their PTX and of nvcc's time (the three norm files 326 s -> 62 s on 2 cores); the bf16
// one is five integer instructions a store where cvt is one. The CUDA simulator (no
// __CUDA_ARCH__) runs core/half.h's conversions, the CPU oracle's.
__device__ __forceinline__ float f16_bits_to_f32(uint16_t bits) {
#if defined(__CUDA_ARCH__)
  float value;
  asm("cvt.f32.f16 %0, %1;" : "=f"(value) : "h"(bits));
  return value;
#else
  return f16_bits_to_float(bits);
#endif
}
__device__ __forceinline__ uint16_t f32_to_f16_bits(float value) {
#if defined(__CUDA_ARCH__)
  uint16_t bits;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(value));
  return bits;
#else
  return float_to_f16_bits(value);
#endif
}
__device__ __forceinline__ float load_f32(const f16* p, int64_t i) {
  return f16_bits_to_f32(p[i].bits);
}
__device__ __forceinline__ void store_f32(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ uint16_t f32_to_bf16_bits(float value) {
#if defined(__CUDA_ARCH__)
  uint16_t bits;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(bits) : "f"(value));
  return bits;
#else
  return float_to_bf16_bits(value);
#endif
}
__device__ __forceinline__ void store_f32(bf16* p, int64_t i, float v) {
  p[i].bits = f32_to_bf16_bits(v);
}
__device__ __forceinline__ void store_f32(f16* p, int64_t i, float v) {
  p[i].bits = f32_to_f16_bits(v);
}

// v stored in R and read back (store_f32 rounds as the conversion kernel does).
template <typename R>
__device__ __forceinline__ float rounded_through(float v) {
  R stored;
  store_f32(&stored, 0, v);
  return load_f32(&stored, 0);
}

inline constexpr int kWarp = 32;

// The second pass of the deterministic column sums (norm weight/bias gradients, bias gradients):
// blocks of kFinishWarps warps over 32 columns each, warp w adding row blocks w, w + kFinishWarps,
// ... in order, so each thread makes blocks / kFinishWarps dependent additions. A launch has only
// columns / 32 blocks (GPT-2's 768 channels: 24), so its time is each thread's chain of loads:
// with 32 warps (1024 threads) a thread reads 32 of the norm backward's 1024 partial rows, 8 in
// flight, where 8 warps read 128 (the H200's table had a LayerNorm backward call at 86 us).
inline constexpr int kFinishWarps = 32;
inline unsigned finish_grid(int64_t columns) {
  return static_cast<unsigned>((columns + kWarp - 1) / kWarp);
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
__device__ __forceinline__ double warp_sum(double v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// `shared` holds 32 values. The combining tree is fixed, so the result is deterministic.
template <typename T>
__device__ __forceinline__ T block_sum(T v, T* shared) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
  v = warp_sum(v);
  __syncthreads();  // `shared` may still be read by a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : T(0);
  return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float* shared) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : -INFINITY;
  return warp_max(v);
}

// A grid for a grid-stride loop over n elements: enough blocks to fill the GPU, no more.
inline unsigned grid_for(int64_t n, int threads) {
  const int64_t wanted = (n + threads - 1) / threads;
  constexpr int64_t kMaxBlocks = 132 * 16;  // an H100's SMs x resident blocks
  return static_cast<unsigned>(wanted < 1 ? 1 : (wanted > kMaxBlocks ? kMaxBlocks : wanted));
}

// Calls fn(T{}) with the storage type of a floating dtype the kernels handle, else throws
// UnsupportedError naming the op (f64 is the CPU oracle's dtype).
template <typename Fn>
void dispatch_storage(DType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::kF32:
      fn(float{});
      return;
    case DType::kBF16:
      fn(bf16{});
      return;
    case DType::kF16:
      fn(f16{});
      return;
    default:
      throw UnsupportedError(std::string(op) + " on the CUDA backend supports f32, bf16 and f16 " +
                             "storage, not " + dtype_name(dtype) +
                             " (f64 runs on the CPU backend: --device cpu)");
  }
}

// Calls fn(G{}) for a gradient accumulated from `storage`-typed inputs: G is the storage type, or
// float when `grad` is f32 and the inputs are 16-bit (the engine's f32 gradients of 16-bit
// weights). Other combinations are a caller bug (the host checks refuse them first).
template <typename Storage, typename Fn>
void dispatch_grad(DType grad, Fn&& fn) {
  if (grad == DType::kF32) {
    fn(float{});
  } else {
    fn(Storage{});
  }
}

// Opts `Kernel` into `bytes` of dynamic shared memory, once per kernel and size rather than on
// every launch (the call goes into the driver). One process drives one GPU (a rank per GPU).
template <auto Kernel>
void allow_shared(size_t bytes) {
  static size_t allowed = 0;  // one per kernel: Kernel is a template argument
  if (bytes <= allowed) return;
  ZERO_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(bytes)));
  allowed = bytes;
}

// Records the first bad input into the error slot (later finds are dropped).
template <typename Slot>
__device__ __forceinline__ void report_kernel_error(Slot* slot, int code, int64_t value,
                                                    int64_t bound, int64_t position) {
  if (slot == nullptr) return;
  if (atomicCAS(&slot->code, 0, -1) == 0) {
    slot->value = value;
    slot->bound = bound;
    slot->position = position;
    __threadfence();
    atomicExch(&slot->code, code);
  }
}

}  // namespace zero::backend::cuda

#define ZERO_CUDA_CHECK_LAUNCH() ZERO_CUDA_CHECK(cudaGetLastError())

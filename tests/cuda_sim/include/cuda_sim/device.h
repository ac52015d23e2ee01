// The prelude of every .cu file compiled for the simulator (the rewriter includes it first): the
// real CUDA headers for the types and the host halves of the bf16/f16 conversions, then what
// nvcc gives device code and g++ does not - the execution-space keywords, the built-in indices,
// __syncthreads, warp shuffles, atomics and a few device math functions.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cuda_sim/launch.h"
#include "cuda_sim/mma.h"
#include "cuda_sim/thread_state.h"
#include "cuda_sim/warp.h"

// Under g++ the CUDA headers define __device__/__global__/__host__ as nothing, and __shared__
// too. Blocks run one after another and a block's threads share one OS thread, so a function-
// local `static` is exactly one copy per block, shared by its threads.
#undef __shared__
#define __shared__ static
#define __launch_bounds__(...)

#define threadIdx (::cuda_sim::g_builtins.thread_idx)
#define blockIdx (::cuda_sim::g_builtins.block_idx)
#define blockDim (::cuda_sim::g_builtins.block_dim)
#define gridDim (::cuda_sim::g_builtins.grid_dim)
#define warpSize 32

inline void __syncthreads() { ::cuda_sim::sync_threads(); }
// One OS thread runs the whole grid: memory is always coherent.
inline void __threadfence() {}
inline void __threadfence_block() {}

// Atomics: plain read-modify-writes (only one simulated thread runs at any moment).
template <typename T>
inline T atomicAdd(T* address, T value) {
  const T old = *address;
  *address = old + value;
  return old;
}
template <typename T>
inline T atomicCAS(T* address, T compare, T value) {
  const T old = *address;
  if (old == compare) *address = value;
  return old;
}
template <typename T>
inline T atomicExch(T* address, T value) {
  const T old = *address;
  *address = value;
  return old;
}
template <typename T>
inline T atomicMax(T* address, T value) {
  const T old = *address;
  if (value > old) *address = value;
  return old;
}
template <typename T>
inline T atomicMin(T* address, T value) {
  const T old = *address;
  if (value < old) *address = value;
  return old;
}

// Device math that the host library does not have under these names.
inline float __uint_as_float(unsigned int bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}
inline unsigned int __float_as_uint(float f) {
  unsigned int bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}
inline float __int_as_float(int bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}
inline int __float_as_int(float f) {
  int bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}
float __double2float_rz(double value);  // round toward zero (cuda_sim/device_math.cpp)
inline float __double2float_rn(double value) { return static_cast<float>(value); }
inline float rsqrtf(float x) { return 1.0f / __builtin_sqrtf(x); }
inline float __fdividef(float a, float b) { return a / b; }
template <typename T>
inline T __ldg(const T* p) {
  return *p;
}

// cuda_runtime.h's C++ overload taking the kernel itself (declared for nvcc only).
template <typename T>
inline cudaError_t cudaFuncSetAttribute(T* kernel, cudaFuncAttribute attribute, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attribute, value);
}

// CUDA's device min/max overloads (same-type arguments; the host has std::min only).
template <typename T>
  requires std::is_arithmetic_v<T>
inline T min(T a, T b) {
  return b < a ? b : a;
}
template <typename T>
  requires std::is_arithmetic_v<T>
inline T max(T a, T b) {
  return a < b ? b : a;
}

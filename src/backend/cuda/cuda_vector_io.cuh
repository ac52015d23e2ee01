// 16-byte vector loads and stores of storage elements, widened to and rounded from f32, for the
// bandwidth-bound pointwise kernels (RoPE, activations). One vector is one ld/st.global.v4.u32:
// kVectorWidth<T> = 16 / sizeof(T) elements (8 bf16/f16, 4 f32). Lanes are taken apart with
// shifts and converted by load_f32/store_f32 (cuda_device_math.cuh), so a vector kernel stores
// the same bits as the scalar kernel element for element. Used by the pointwise kernels, the
// norms (cuda_norm_vector.cuh) and the shared-memory classifier (cuda_cross_entropy.cu).
// Every address passed to load_vector/store_vector must be 16-byte aligned: the launches check
// is_aligned16 on the base pointers and that offsets are multiples of the vector width (the
// simulator cannot catch a misaligned vector access: x86 does not trap).
#pragma once
#include <cstdint>

#include "backend/cuda/cuda_device_math.cuh"

namespace zero::backend::cuda {

template <typename T>
inline constexpr int kVectorWidth = 16 / static_cast<int>(sizeof(T));

inline bool is_aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// One 32-bit word of T (one f32, or two 16-bit lanes, the lower address in the low half).
template <typename T>
__device__ __forceinline__ void widen_word(uint32_t word, float* out) {
  if constexpr (sizeof(T) == 4) {
    out[0] = __uint_as_float(word);
  } else {
    T lo, hi;
    lo.bits = static_cast<uint16_t>(word & 0xffffu);
    hi.bits = static_cast<uint16_t>(word >> 16);
    out[0] = load_f32(&lo, 0);
    out[1] = load_f32(&hi, 0);
  }
}
template <typename T>
__device__ __forceinline__ uint32_t narrow_word(const float* in) {
  if constexpr (sizeof(T) == 4) {
    return __float_as_uint(in[0]);
  } else {
    T lo, hi;
    store_f32(&lo, 0, in[0]);
    store_f32(&hi, 0, in[1]);
    return static_cast<uint32_t>(lo.bits) | (static_cast<uint32_t>(hi.bits) << 16);
  }
}

// ---- one vector kept packed (uint4) ----------------------------------------------------------
// For kernels that hold vectors as loaded (half the registers of widened f32 for 16-bit T) or
// stage them in shared memory: lanes taken apart and put back with shifts (a memcpy into a T
// array lets nvcc read shared memory byte by byte).

__device__ __forceinline__ uint32_t vector_word(const uint4& v, int i) {
  return i == 0 ? v.x : (i == 1 ? v.y : (i == 2 ? v.z : v.w));
}
__device__ __forceinline__ void set_vector_word(uint4& v, int i, uint32_t word) {
  if (i == 0) v.x = word;
  if (i == 1) v.y = word;
  if (i == 2) v.z = word;
  if (i == 3) v.w = word;
}
// Lane k (little-endian: lane 0 at the lowest address) widened to f32.
template <typename T>
__device__ __forceinline__ float vector_lane(const uint4& v, int k) {
  if constexpr (sizeof(T) == 4) {
    return __uint_as_float(vector_word(v, k));
  } else {
    T t;
    t.bits = static_cast<uint16_t>(vector_word(v, k / 2) >> (16 * (k % 2)));
    return load_f32(&t, 0);
  }
}
// Lane k set to f rounded to T (store_f32's rounding).
template <typename T>
__device__ __forceinline__ void set_vector_lane(uint4& v, int k, float f) {
  if constexpr (sizeof(T) == 4) {
    set_vector_word(v, k, __float_as_uint(f));
  } else {
    T t;
    store_f32(&t, 0, f);
    const int shift = 16 * (k % 2);
    const uint32_t kept = vector_word(v, k / 2) & ~(0xffffu << shift);
    set_vector_word(v, k / 2, kept | (static_cast<uint32_t>(t.bits) << shift));
  }
}

// ---- vectors widened to f32 ------------------------------------------------------------------

// N elements of T from p (16-byte aligned) as N / (16 / sizeof(T)) vector loads. N may be more
// than one vector: a RoPE chunk of 8 bf16 lanes reads its 8 f32 table entries as two vectors.
template <typename T, int N>
__device__ __forceinline__ void load_vector(const T* p, float (&out)[N]) {
  constexpr int kPerWord = 4 / static_cast<int>(sizeof(T));
  static_assert(N % (4 * kPerWord) == 0, "whole 16-byte vectors only");
  const uint4* src = reinterpret_cast<const uint4*>(p);
#pragma unroll
  for (int q = 0; q < N / (4 * kPerWord); ++q) {
    const uint4 w = src[q];
    float* lanes = out + q * 4 * kPerWord;
    widen_word<T>(w.x, lanes);
    widen_word<T>(w.y, lanes + kPerWord);
    widen_word<T>(w.z, lanes + 2 * kPerWord);
    widen_word<T>(w.w, lanes + 3 * kPerWord);
  }
}

// N values rounded to T (store_f32's rounding) into p (16-byte aligned), as whole vectors.
template <typename T, int N>
__device__ __forceinline__ void store_vector(T* p, const float (&in)[N]) {
  constexpr int kPerWord = 4 / static_cast<int>(sizeof(T));
  static_assert(N % (4 * kPerWord) == 0, "whole 16-byte vectors only");
  uint4* dst = reinterpret_cast<uint4*>(p);
#pragma unroll
  for (int q = 0; q < N / (4 * kPerWord); ++q) {
    const float* lanes = in + q * 4 * kPerWord;
    uint4 w;
    w.x = narrow_word<T>(lanes);
    w.y = narrow_word<T>(lanes + kPerWord);
    w.z = narrow_word<T>(lanes + 2 * kPerWord);
    w.w = narrow_word<T>(lanes + 3 * kPerWord);
    dst[q] = w;
  }
}

}  // namespace zero::backend::cuda

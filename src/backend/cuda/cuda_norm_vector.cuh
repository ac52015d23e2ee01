// The warp-per-row scheme of the LayerNorm and RMSNorm kernels: each warp owns one row at a time
// (kNormRowWarps rows per block, grid-stride over rows), moves it as 16-byte vectors (8 bf16/f16
// or 4 f32 per access) and keeps it in registers between the passes (packed, as stored: a lane
// holds up to kVectors vectors, vector lane + 32 j of the row), with warp-shuffle reductions -
// no shared memory, no __syncthreads. Usable where every row starts on a 16-byte boundary
// (channels * sizeof(T) % 16 == 0 and 16-byte aligned pointers) and the row fits the register
// bound; the block-per-row kernels handle the rest. The kernels themselves are in
// cuda_norm_rows.cuh; these are their row-level pieces.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "backend/cuda/cuda_device_math.cuh"
#include "backend/cuda/cuda_vector_io.cuh"

namespace zero::backend::cuda {

// Elements of T per 16-byte vector.
template <typename T>
constexpr int kNormLanes = kVectorWidth<T>;

inline constexpr int kNormRowWarps = 4;  // rows in flight per block: one per warp
inline constexpr int kNormRowThreads = kNormRowWarps * kWarp;
// Register bounds in 16-byte vectors per lane (a multiple of 4 registers each): the forward
// kernels hold one row (x, or x + residual), the dx kernels two (x and dy). 32 vectors x 32
// lanes = 8192 16-bit or 4096 f32 channels forward, half that for dx.
inline constexpr int kNormForwardMaxVectors = 32;
inline constexpr int kNormBackwardMaxVectors = 16;
// Threads per block of the vectorised weight-gradient partials (one vector column each).
inline constexpr int kNormPartialThreads = 64;

// The sum of one vector's terms term(0) ... term(kNormLanes<T> - 1) as a balanced tree (k with
// k + width, then half the width): 3 rounding steps deep for 8 terms where a chain is 7 - the
// row sums stay as close to a pairwise sum as the block-per-row kernels' trees.
template <typename T, typename Term>
__device__ __forceinline__ float norm_tree_sum(Term&& term) {
  constexpr int kTerms = kNormLanes<T>;
  float e[kTerms];
#pragma unroll
  for (int k = 0; k < kTerms; ++k) e[k] = term(k);
#pragma unroll
  for (int width = kTerms / 2; width > 0; width /= 2) {
#pragma unroll
    for (int k = 0; k < width; ++k) e[k] += e[k + width];
  }
  return e[0];
}

// Vector i of row r (rows of `vectors` 16-byte vectors).
template <typename T>
__device__ __forceinline__ const uint4* norm_vectors(const T* base, int64_t r, int64_t vectors) {
  return reinterpret_cast<const uint4*>(base) + r * vectors;
}
template <typename T>
__device__ __forceinline__ uint4* norm_vectors(T* base, int64_t r, int64_t vectors) {
  return reinterpret_cast<uint4*>(base) + r * vectors;
}

// Calls fn(j, i) for this lane's vectors of the row, j in order: register slot j holds the
// row's vector i = lane + 32 j; slots past the row's end are skipped (they hold zeros).
template <int kVectors, typename Fn>
__device__ __forceinline__ void for_each_row_vector(int64_t vectors, int lane, Fn&& fn) {
#pragma unroll
  for (int j = 0; j < kVectors; ++j) {
    const int64_t i = lane + int64_t{j} * kWarp;
    if (i < vectors) fn(j, i);
  }
}

// Loads this lane's vectors of row r of base into its register slots (zeros past the row).
template <typename T, int kVectors>
__device__ __forceinline__ void norm_load_row(uint4 (&v)[kVectors], const T* base, int64_t r,
                                              int64_t vectors, int lane) {
  const uint4* row = norm_vectors(base, r, vectors);
#pragma unroll
  for (int j = 0; j < kVectors; ++j) {
    const int64_t i = lane + int64_t{j} * kWarp;
    v[j] = i < vectors ? row[i] : make_uint4(0, 0, 0, 0);
  }
}

// Loads this lane's vectors of the row the forward normalises: x's row, or with a residual
// x + residual rounded to T, stored to sum_out (which may be x: each lane reads its vectors
// before it writes them) and kept as stored - norm_input_row's semantics.
template <typename T, int kVectors>
__device__ __forceinline__ void norm_load_input(uint4 (&v)[kVectors], const T* x, T* sum_out,
                                                const T* residual, int64_t r, int64_t vectors,
                                                int lane) {
  norm_load_row<T>(v, x, r, vectors, lane);
  if (residual == nullptr) return;
  const uint4* rr = norm_vectors(residual, r, vectors);
  uint4* sr = norm_vectors(sum_out, r, vectors);
#pragma unroll
  for (int j = 0; j < kVectors; ++j) {
    const int64_t i = lane + int64_t{j} * kWarp;
    if (i < vectors) {
      const uint4 res = rr[i];
#pragma unroll
      for (int k = 0; k < kNormLanes<T>; ++k) {
        set_vector_lane<T>(v[j], k, vector_lane<T>(v[j], k) + vector_lane<T>(res, k));
      }
      sr[i] = v[j];
    }
  }
}

// True where rows of `channels` T are whole 16-byte vectors and every pointer is 16-byte aligned
// (null pointers are absent operands).
template <typename T>
bool norm_rows_are_vectors(int64_t channels, std::initializer_list<const void*> pointers) {
  if (channels <= 0 || channels % kNormLanes<T> != 0) return false;
  for (const void* p : pointers) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  }
  return true;
}

// The vectors per lane (1, 2, 4, ... max_vectors) the warp-per-row kernels need for rows of
// `channels` T, or 0 where they cannot run: rows that are not 16-byte vectors
// (norm_rows_are_vectors) or over the register bound.
template <typename T>
int norm_vectors_per_lane(int64_t channels, int max_vectors,
                          std::initializer_list<const void*> pointers) {
  if (!norm_rows_are_vectors<T>(channels, pointers)) return 0;
  const int64_t per_lane = (channels / kNormLanes<T> + kWarp - 1) / kWarp;
  int vectors = 1;
  while (vectors < per_lane) vectors *= 2;
  return vectors <= max_vectors ? vectors : 0;
}

// Calls fn(std::integral_constant<int, V>{}) for V = vectors, a power of two up to kMax (only
// those are instantiated).
template <int kMax, int V = 1, typename Fn>
void dispatch_norm_vectors(int vectors, Fn&& fn) {
  if constexpr (V < kMax) {
    if (vectors > V) {
      dispatch_norm_vectors<kMax, V * 2>(vectors, fn);
      return;
    }
  }
  fn(std::integral_constant<int, V>{});
}

// Blocks for the warp-per-row kernels: a warp per row, grid-stride beyond 65535 blocks.
inline unsigned norm_warp_row_grid(int64_t rows) {
  const int64_t wanted = (rows + kNormRowWarps - 1) / kNormRowWarps;
  constexpr int64_t kMaxBlocks = 65535;
  return static_cast<unsigned>(wanted < kMaxBlocks ? wanted : kMaxBlocks);
}

}  // namespace zero::backend::cuda

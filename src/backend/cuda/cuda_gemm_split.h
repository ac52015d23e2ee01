// A matrix product with a dimension that is not a multiple of 8 elements (GPT-2's 50257-token
// vocabulary: the logits product and both of its backward products) ran at 96-215 TFLOP/s on
// an H200, against 760-860 for the aligned products of the same step (bench/gpu_speed_notes.md).
// Such a product is computed as two: a main part whose split dimension is a whole number of
// 128-element tiles, and the narrow tail. Along m or n the parts write disjoint blocks of c;
// along k they add into the same c (the caller sums them in f32 when c is 16-bit, so that c is
// rounded once, as one product would round it).
//
// CUDA-free (pointer arithmetic on GemmOperands only), so it is unit-tested in every build.
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/cuda/cuda_gemm_operands.h"
#include "core/dtype.h"

namespace zero::backend::cuda {

// The main part's split dimension is a multiple of this many elements.
inline constexpr int64_t kGemmSplitTile = 128;
// Below this many floating-point operations (2 m n k) a second launch costs more than the slow
// kernel loses.
inline constexpr double kGemmSplitMinFlops = 2e9;

struct GemmSplit {
  enum class Along { kNone, kColumns, kRows, kInner };  // n, m, k
  Along along = Along::kNone;
  GemmOperands main;  // the tile-aligned part
  GemmOperands tail;  // the rest (< kGemmSplitTile along the split dimension)
};

namespace gemm_split_detail {

inline bool worth_splitting(int64_t dim) { return dim % 8 != 0 && dim > kGemmSplitTile; }

inline const void* advance(const void* p, int64_t elements, size_t element_bytes) {
  return static_cast<const char*>(p) + elements * static_cast<int64_t>(element_bytes);
}
inline void* advance(void* p, int64_t elements, size_t element_bytes) {
  return static_cast<char*>(p) + elements * static_cast<int64_t>(element_bytes);
}

}  // namespace gemm_split_detail

// How `op` is split: along n first, then m, then k (one dimension per call: each part, when
// split again, takes the next). kNone when every dimension is a multiple of 8, each unaligned
// one is at most a tile, or the product is too small to pay. A product with a bias is never
// split along k (the epilogue would add it twice).
inline GemmSplit split_unaligned_dimension(const GemmOperands& op) {
  using gemm_split_detail::advance;
  using gemm_split_detail::worth_splitting;
  GemmSplit split;
  const double flops =
      2.0 * static_cast<double>(op.m) * static_cast<double>(op.n) * static_cast<double>(op.k);
  if (flops < kGemmSplitMinFlops) return split;
  const size_t element = dtype_size(op.dtype);
  const size_t c_element = op.c_f32 ? sizeof(float) : element;
  split.main = op;
  split.tail = op;
  if (worth_splitting(op.n)) {
    const int64_t main_n = op.n / kGemmSplitTile * kGemmSplitTile;
    split.along = GemmSplit::Along::kColumns;
    split.main.n = main_n;
    split.tail.n = op.n - main_n;
    // op(b) is [k, n]: b stored [n, k] when transposed (row j at j * ldb), else [k, n].
    split.tail.b = op.transpose_b ? advance(op.b, main_n * op.ldb, element)
                                  : advance(op.b, main_n, element);
    split.tail.c = advance(op.c, main_n, c_element);
    if (op.bias != nullptr) split.tail.bias = advance(op.bias, main_n, element);
    return split;
  }
  if (worth_splitting(op.m)) {
    const int64_t main_m = op.m / kGemmSplitTile * kGemmSplitTile;
    split.along = GemmSplit::Along::kRows;
    split.main.m = main_m;
    split.tail.m = op.m - main_m;
    // op(a) is [m, k]: a stored [k, m] when transposed, else [m, k].
    split.tail.a = op.transpose_a ? advance(op.a, main_m, element)
                                  : advance(op.a, main_m * op.lda, element);
    split.tail.c = advance(op.c, main_m * op.ldc, c_element);
    return split;
  }
  if (worth_splitting(op.k) && op.bias == nullptr) {
    const int64_t main_k = op.k / kGemmSplitTile * kGemmSplitTile;
    split.along = GemmSplit::Along::kInner;
    split.main.k = main_k;
    split.tail.k = op.k - main_k;
    split.tail.a = op.transpose_a ? advance(op.a, main_k * op.lda, element)
                                  : advance(op.a, main_k, element);
    split.tail.b = op.transpose_b ? advance(op.b, main_k, element)
                                  : advance(op.b, main_k * op.ldb, element);
    split.tail.beta = 1.0f;  // adds onto the main part
    return split;
  }
  split.main = GemmOperands{};
  split.tail = GemmOperands{};
  return split;
}

}  // namespace zero::backend::cuda

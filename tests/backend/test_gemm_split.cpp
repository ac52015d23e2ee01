// The split of a matrix product with an unaligned dimension into a tile-aligned main part and a
// tail (backend/cuda/cuda_gemm_split.h): which dimension is split, and where each part's
// operands start. The header uses no CUDA, so this runs in every build (the addresses are never
// dereferenced); the products themselves are checked against the CPU in test_cuda_ops.cpp.
#include <gtest/gtest.h>

#include <cstdint>

#include "backend/cuda/cuda_gemm_split.h"

namespace zero::backend::cuda {
namespace {

const void* at(uintptr_t value) { return reinterpret_cast<const void*>(value); }
uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

constexpr uintptr_t kA = 0x100000, kB = 0x20000000, kC = 0x40000000, kBias = 0x7000;

// GPT-2's logits product in bf16: x [16384, 768] times w [50257, 768] transposed, into rows
// padded to 50264 elements.
GemmOperands logits_forward() {
  GemmOperands op;
  op.dtype = DType::kBF16;
  op.transpose_b = true;
  op.m = 16384;
  op.n = 50257;
  op.k = 768;
  op.a = at(kA);
  op.lda = 768;
  op.b = at(kB);
  op.ldb = 768;
  op.c = reinterpret_cast<void*>(kC);
  op.ldc = 50264;
  return op;
}

TEST(GemmSplit, AnUnalignedOutputWidthSplitsIntoWholeTilesAndATail) {
  GemmOperands op = logits_forward();
  op.bias = at(kBias);
  const GemmSplit split = split_unaligned_dimension(op);
  ASSERT_EQ(split.along, GemmSplit::Along::kColumns);
  EXPECT_EQ(split.main.n, 50176);  // 392 tiles of 128
  EXPECT_EQ(split.tail.n, 81);
  EXPECT_EQ(split.main.m, op.m);
  EXPECT_EQ(split.tail.m, op.m);
  // The main part starts where the product does.
  EXPECT_EQ(split.main.b, op.b);
  EXPECT_EQ(split.main.c, op.c);
  EXPECT_EQ(split.main.bias, op.bias);
  // The tail: w's row 50176 (transposed b), c's column 50176, the bias's element 50176.
  EXPECT_EQ(address(split.tail.b), kB + 50176u * 768u * 2u);
  EXPECT_EQ(address(split.tail.c), kC + 50176u * 2u);
  EXPECT_EQ(address(split.tail.bias), kBias + 50176u * 2u);
  EXPECT_EQ(split.tail.a, op.a);
  EXPECT_EQ(split.tail.ldc, op.ldc);
  EXPECT_EQ(split.tail.beta, op.beta);
}

TEST(GemmSplit, AnUntransposedBAdvancesByColumns) {
  GemmOperands op = logits_forward();
  op.transpose_b = false;  // b stored [k, n]
  op.ldb = 50264;
  const GemmSplit split = split_unaligned_dimension(op);
  ASSERT_EQ(split.along, GemmSplit::Along::kColumns);
  EXPECT_EQ(address(split.tail.b), kB + 50176u * 2u);
}

TEST(GemmSplit, UnalignedRowsSplitWhenTheWidthIsAligned) {
  // The weight gradient dw [50257, 768] = dlogits^T [50257, 16384] x [16384, 768], accumulated
  // in f32 (c_f32: 4-byte elements of c).
  GemmOperands op;
  op.dtype = DType::kBF16;
  op.transpose_a = true;  // a stored [k, m] = dlogits [16384, 50264]
  op.m = 50257;
  op.n = 768;
  op.k = 16384;
  op.a = at(kA);
  op.lda = 50264;
  op.b = at(kB);
  op.ldb = 768;
  op.c = reinterpret_cast<void*>(kC);
  op.ldc = 768;
  op.c_f32 = true;
  op.beta = 1.0f;
  const GemmSplit split = split_unaligned_dimension(op);
  ASSERT_EQ(split.along, GemmSplit::Along::kRows);
  EXPECT_EQ(split.main.m, 50176);
  EXPECT_EQ(split.tail.m, 81);
  EXPECT_EQ(address(split.tail.a), kA + 50176u * 2u);  // column 50176 of the stored a
  EXPECT_EQ(address(split.tail.c), kC + 50176u * 768u * 4u);
  EXPECT_EQ(split.tail.b, op.b);
  EXPECT_EQ(split.tail.beta, 1.0f);  // disjoint rows: each part keeps the caller's beta

  op.transpose_a = false;  // a stored [m, k]
  op.lda = 16384;
  EXPECT_EQ(address(split_unaligned_dimension(op).tail.a), kA + 50176u * 16384u * 2u);
}

TEST(GemmSplit, AnUnalignedInnerDimensionSplitsLastAndTheTailAddsOntoTheMain) {
  // dx [16384, 768] = dlogits [16384, 50257 (pitch 50264)] x w [50257, 768].
  GemmOperands op;
  op.dtype = DType::kBF16;
  op.m = 16384;
  op.n = 768;
  op.k = 50257;
  op.a = at(kA);
  op.lda = 50264;
  op.b = at(kB);
  op.ldb = 768;
  op.c = reinterpret_cast<void*>(kC);
  op.ldc = 768;
  GemmSplit split = split_unaligned_dimension(op);
  ASSERT_EQ(split.along, GemmSplit::Along::kInner);
  EXPECT_EQ(split.main.k, 50176);
  EXPECT_EQ(split.tail.k, 81);
  EXPECT_EQ(address(split.tail.a), kA + 50176u * 2u);         // a's column 50176
  EXPECT_EQ(address(split.tail.b), kB + 50176u * 768u * 2u);  // b's row 50176
  EXPECT_EQ(split.tail.c, op.c);
  EXPECT_EQ(split.main.beta, 0.0f);
  EXPECT_EQ(split.tail.beta, 1.0f);

  op.transpose_a = true;  // a stored [k, m]
  op.lda = 16384;
  op.transpose_b = true;  // b stored [n, k]
  op.ldb = 50264;
  split = split_unaligned_dimension(op);
  EXPECT_EQ(address(split.tail.a), kA + 50176u * 16384u * 2u);
  EXPECT_EQ(address(split.tail.b), kB + 50176u * 2u);

  // A bias would be added by both parts: never split along k.
  op.bias = at(kBias);
  EXPECT_EQ(split_unaligned_dimension(op).along, GemmSplit::Along::kNone);
}

TEST(GemmSplit, AlignedSmallOrNarrowProductsAreNotSplit) {
  GemmOperands op = logits_forward();
  op.n = 50304;  // a multiple of 8
  EXPECT_EQ(split_unaligned_dimension(op).along, GemmSplit::Along::kNone);
  op.n = 101;  // unaligned but under a tile: nothing to gain
  op.m = 65536;
  EXPECT_EQ(split_unaligned_dimension(op).along, GemmSplit::Along::kNone);
  op = logits_forward();
  op.m = 16;  // 2 * 16 * 50257 * 768 = 1.2 GFLOP: below the threshold
  EXPECT_EQ(split_unaligned_dimension(op).along, GemmSplit::Along::kNone);
  op.m = 32;  // 2.5 GFLOP
  EXPECT_EQ(split_unaligned_dimension(op).along, GemmSplit::Along::kColumns);
}

TEST(GemmSplit, TheMainPartIsAlignedSoSplittingItAgainTakesTheNextDimension) {
  GemmOperands op = logits_forward();
  op.m = 16383;  // unaligned rows too
  const GemmSplit first = split_unaligned_dimension(op);
  ASSERT_EQ(first.along, GemmSplit::Along::kColumns);
  const GemmSplit second = split_unaligned_dimension(first.main);
  ASSERT_EQ(second.along, GemmSplit::Along::kRows);
  EXPECT_EQ(second.main.m, 16256);
  EXPECT_EQ(second.main.n, 50176);
  EXPECT_EQ(split_unaligned_dimension(second.main).along, GemmSplit::Along::kNone);
}

}  // namespace
}  // namespace zero::backend::cuda

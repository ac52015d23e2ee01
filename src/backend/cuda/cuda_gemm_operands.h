// One row-major matrix product as the CUDA backend hands it to cuBLASLt (cuda_matmul.h). Kept
// free of CUDA headers so the plan cache's key (cuda_matmul_plan_cache.h), which is made from
// it, builds and is unit-tested without the CUDA toolkit.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace zero::backend::cuda {

struct GemmOperands {
  DType dtype = DType::kF32;  // of a, b, c and bias
  bool transpose_a = false, transpose_b = false;
  int64_t m = 0, n = 0, k = 0;  // c is [m, n]; op(a) [m, k]; op(b) [k, n]; elements
  const void* a = nullptr;      // device pointers
  int64_t lda = 0;              // row length of a as stored, in elements
  const void* b = nullptr;
  int64_t ldb = 0;
  void* c = nullptr;
  int64_t ldc = 0;
  // c (and d) in f32 while a and b are 16-bit: an f32 accumulator of a bf16/f16 product (the
  // tiled logits loss's dweight). cuBLASLt supports A/B 16-bit with C/D f32 under COMPUTE_32F.
  bool c_f32 = false;
  float alpha = 1.0f, beta = 0.0f;
  // Optional bias[n] added to every row of c (cuBLASLt's bias epilogue); beta must be 0.
  const void* bias = nullptr;
  // Optional GELU epilogues (tanh form; cuBLASLt's GELU_AUX(_BIAS) and DGELU), on the product
  // after the bias: kGelu writes gelu(result) to c and the result itself to aux; kGeluGradient
  // writes result * gelu'(aux) to c. aux is [m, ld_aux] row-major in dtype (ld_aux >= n, a
  // multiple of 8). beta must be 0, c must not be f32 over 16-bit operands. Only
  // CublasLtMatmul::run takes these (CudaBackend::gemm's fallbacks do not): the caller falls
  // back to a plain product and the elementwise op when run has no algorithm.
  enum class Epilogue : uint8_t { kNone, kGelu, kGeluGradient };
  Epilogue epilogue = Epilogue::kNone;
  void* aux = nullptr;
  int64_t ld_aux = 0;
};

}  // namespace zero::backend::cuda

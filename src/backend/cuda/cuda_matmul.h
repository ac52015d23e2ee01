// Matrix products of the CUDA backend through cuBLASLt, on row-major data. f32 products use
// CUBLAS_COMPUTE_32F - true f32, never TF32 - so they match the CPU backend to f32 rounding;
// bf16/f16 products read 16-bit operands, accumulate in f32 and round the result once.
//
// cuBLASLt is column-major: a row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T,
// so the operands are handed over swapped, each with the transpose flag its storage needs.
// Descriptors are created per call (host objects, microseconds); caching them per shape is the
// GPU-speed issue's work.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace zero::backend::cuda {

struct GemmOperands {
  DType dtype = DType::kF32;  // of a, b, c and bias
  bool transpose_a = false, transpose_b = false;
  int64_t m = 0, n = 0, k = 0;  // c is [m, n]; op(a) [m, k]; op(b) [k, n]
  const void* a = nullptr;
  int64_t lda = 0;  // row length of a as stored
  const void* b = nullptr;
  int64_t ldb = 0;
  void* c = nullptr;
  int64_t ldc = 0;
  float alpha = 1.0f, beta = 0.0f;
  // Optional bias[n] added to every row of c (cuBLASLt's bias epilogue); beta must be 0.
  const void* bias = nullptr;
};

class CublasLtMatmul {
 public:
  CublasLtMatmul();
  ~CublasLtMatmul();
  CublasLtMatmul(const CublasLtMatmul&) = delete;
  CublasLtMatmul& operator=(const CublasLtMatmul&) = delete;

  // c = alpha op(a) op(b) + beta c (+ bias). Returns false, having enqueued nothing, when
  // cuBLASLt has no algorithm for the request (the caller then drops the bias epilogue or copies
  // unaligned operands to aligned buffers); throws for any other failure. m, n, k > 0.
  // `workspace` is device memory of `workspace_bytes`.
  bool run(const GemmOperands& op, void* workspace, size_t workspace_bytes, cudaStream_t stream);

 private:
  cublasLtHandle_t handle_ = nullptr;
};

}  // namespace zero::backend::cuda

#include "backend/cuda/cuda_matmul.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "core/check.h"
#include "core/error.h"

namespace zero::backend::cuda {
namespace {

cudaDataType_t cuda_type(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return CUDA_R_32F;
    case DType::kBF16:
      return CUDA_R_16BF;
    case DType::kF16:
      return CUDA_R_16F;
    default:
      throw UnsupportedError(std::string("matmul on the CUDA backend supports f32, bf16 and f16, "
                                         "not ") +
                             dtype_name(dtype) + " (f64 runs on the CPU backend: --device cpu)");
  }
}

// RAII owners of the cuBLASLt descriptors (destroy errors are ignored: destructors never throw).
struct DescDeleter {
  void operator()(cublasLtMatmulDescOpaque_t* d) const { cublasLtMatmulDescDestroy(d); }
  void operator()(cublasLtMatrixLayoutOpaque_t* l) const { cublasLtMatrixLayoutDestroy(l); }
  void operator()(cublasLtMatmulPreferenceOpaque_t* p) const { cublasLtMatmulPreferenceDestroy(p); }
};
using MatmulDesc = std::unique_ptr<cublasLtMatmulDescOpaque_t, DescDeleter>;
using Layout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, DescDeleter>;
using Preference = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, DescDeleter>;

// A column-major layout of a row-major matrix stored as `rows` x `cols` with row length `ld`:
// column-major it is cols x rows with leading dimension ld.
Layout row_major_layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld) {
  cublasLtMatrixLayout_t layout = nullptr;
  ZERO_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, type, static_cast<uint64_t>(cols),
                                               static_cast<uint64_t>(rows), ld));
  return Layout(layout);
}

// The largest power of two (at most 256) dividing the address.
uint32_t pointer_alignment(const void* pointer) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

}  // namespace

CublasLtMatmul::CublasLtMatmul() { ZERO_CUBLAS_CHECK(cublasLtCreate(&handle_)); }

CublasLtMatmul::~CublasLtMatmul() {
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

bool CublasLtMatmul::run(const GemmOperands& op, void* workspace, size_t workspace_bytes,
                         cudaStream_t stream) {
  const cudaDataType_t type = cuda_type(op.dtype);
  cublasLtMatmulDesc_t raw_desc = nullptr;
  // CUBLAS_COMPUTE_32F: f32 accumulation, and for f32 operands no TF32 (that would be
  // CUBLAS_COMPUTE_32F_FAST_TF32).
  ZERO_CUBLAS_CHECK(cublasLtMatmulDescCreate(&raw_desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  MatmulDesc desc(raw_desc);
  // Column-major D^T[n, m] = op(b)^T [n, k] x op(a)^T [k, m]. Row-major storage read
  // column-major is the transpose, so op(b)^T is b's storage as it lies when b is not transposed,
  // and needs CUBLAS_OP_T exactly when the row-major product transposes b (likewise a).
  const cublasOperation_t trans_first = op.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t trans_second = op.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  ZERO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.get(), CUBLASLT_MATMUL_DESC_TRANSA,
                                                   &trans_first, sizeof(trans_first)));
  ZERO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.get(), CUBLASLT_MATMUL_DESC_TRANSB,
                                                   &trans_second, sizeof(trans_second)));
  if (op.bias != nullptr) {
    ZERO_CHECK(op.beta == 0.0f, "the bias epilogue is used with beta = 0 only");
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    ZERO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                     &epilogue, sizeof(epilogue)));
    ZERO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                     &op.bias, sizeof(op.bias)));
    const cudaDataType_t bias_type = type;
    ZERO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        desc.get(), CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
  }
  // Storage shapes (row-major): b is [k, n] or, transposed, [n, k]; a is [m, k] or [k, m].
  const Layout first = op.transpose_b ? row_major_layout(type, op.n, op.k, op.ldb)
                                      : row_major_layout(type, op.k, op.n, op.ldb);
  const Layout second = op.transpose_a ? row_major_layout(type, op.k, op.m, op.lda)
                                       : row_major_layout(type, op.m, op.k, op.lda);
  const Layout out = row_major_layout(type, op.m, op.n, op.ldc);

  cublasLtMatmulPreference_t raw_pref = nullptr;
  ZERO_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw_pref));
  Preference pref(raw_pref);
  const uint64_t max_workspace = workspace_bytes;
  ZERO_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace, sizeof(max_workspace)));
  // Operands may be views at any element offset (a parameter inside the flat buffer): the
  // heuristic otherwise assumes 256-byte alignment and may pick a kernel that faults.
  const std::pair<cublasLtMatmulPreferenceAttributes_t, const void*> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, op.b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, op.a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, op.c},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, op.c}};
  for (const auto& [attribute, pointer] : alignments) {
    const uint32_t alignment = pointer_alignment(pointer);
    ZERO_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(pref.get(), attribute, &alignment, sizeof(alignment)));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t heuristic =
      cublasLtMatmulAlgoGetHeuristic(handle_, desc.get(), first.get(), second.get(), out.get(),
                                     out.get(), pref.get(), 1, &result, &found);
  if (heuristic == CUBLAS_STATUS_NOT_SUPPORTED ||
      (heuristic == CUBLAS_STATUS_SUCCESS && found == 0)) {
    return false;
  }
  ZERO_CUBLAS_CHECK(heuristic);
  ZERO_CUBLAS_CHECK(cublasLtMatmul(handle_, desc.get(), &op.alpha, op.b, first.get(), op.a,
                                   second.get(), &op.beta, op.c, out.get(), op.c, out.get(),
                                   &result.algo, workspace, workspace_bytes, stream));
  return true;
}

}  // namespace zero::backend::cuda

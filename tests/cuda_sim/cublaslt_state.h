// The fake cuBLASLt's descriptor contents (the handles point at these) and the algorithm its
// heuristic returns: the algo carries the alignments and workspace the heuristic was asked for,
// so cublasLtMatmul can check that its pointers honour them (real cuBLASLt may pick a kernel
// that faults on a pointer less aligned than the preference promised).
#pragma once
#include <cublasLt.h>

#include <cstdint>

namespace cuda_sim {

struct MatmulDesc {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale = CUDA_R_32F;
  cublasOperation_t trans_a = CUBLAS_OP_N;
  cublasOperation_t trans_b = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  bool bias_type_set = false;
  cudaDataType_t bias_type = CUDA_R_32F;
  // The GELU epilogues' auxiliary matrix (the pre-activation; D's type, D's shape, column-major
  // with leading dimension aux_ld): written by GELU_AUX(_BIAS), read by DGELU.
  const void* aux = nullptr;
  int64_t aux_ld = 0;
  // The bias's type: as set, else D's (cuBLASLt's default).
  cudaDataType_t bias_type_for(cudaDataType_t d_type) const {
    return bias_type_set ? bias_type : d_type;
  }
  bool adds_bias() const {
    return epilogue == CUBLASLT_EPILOGUE_BIAS || epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  }
  bool applies_gelu() const {
    return epilogue == CUBLASLT_EPILOGUE_GELU_AUX || epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  }
  bool applies_gelu_gradient() const { return epilogue == CUBLASLT_EPILOGUE_DGELU; }
  bool uses_aux() const { return applies_gelu() || applies_gelu_gradient(); }
};

struct MatrixLayout {
  cudaDataType_t type = CUDA_R_32F;
  uint64_t rows = 0;
  uint64_t cols = 0;
  int64_t ld = 0;
};

struct MatmulPreference {
  uint64_t max_workspace_bytes = 0;
  uint32_t min_alignment[4] = {256, 256, 256, 256};  // A, B, C, D (cuBLASLt's defaults)
  uint32_t reduction_scheme_mask = CUBLASLT_REDUCTION_SCHEME_MASK;  // cuBLASLt's default: any
};

// What cublasLtMatmulAlgo_t::data holds for an algo of this simulator.
struct AlgoContents {
  uint64_t magic;
  uint64_t min_alignment[4];
  // Whether split-K partials may be added in the output type (the preference's reduction mask
  // allows INPLACE or OUTPUT_TYPE): then a long product into a 16-bit D is computed so, as real
  // cuBLASLt's heuristic chooses for some shapes (cublaslt_matmul.cpp).
  uint64_t reduce_in_output_type;
};
inline constexpr uint64_t kAlgoMagic = 0x7a65726f43554441ull;  // "zeroCUDA"
static_assert(sizeof(AlgoContents) <= sizeof(cublasLtMatmulAlgo_t));

inline MatmulDesc* desc_of(cublasLtMatmulDesc_t d) { return reinterpret_cast<MatmulDesc*>(d); }
inline MatrixLayout* layout_of(cublasLtMatrixLayout_t l) {
  return reinterpret_cast<MatrixLayout*>(l);
}
inline MatmulPreference* preference_of(cublasLtMatmulPreference_t p) {
  return reinterpret_cast<MatmulPreference*>(p);
}

// CUBLAS_STATUS_INVALID_VALUE or _NOT_SUPPORTED after printing why (cuBLASLt says nothing).
cublasStatus_t cublas_reject(cublasStatus_t status, const char* call, const char* why);

// The shape checks shared by the heuristic and the matmul: op(A) is m x k, op(B) k x n, C and D
// m x n, every layout of the one storage type, leading dimensions at least the rows.
cublasStatus_t check_shapes(const char* call, const MatmulDesc& desc, const MatrixLayout& a,
                            const MatrixLayout& b, const MatrixLayout& c, const MatrixLayout& d);

}  // namespace cuda_sim

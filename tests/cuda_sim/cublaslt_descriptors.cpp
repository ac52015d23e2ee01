// The fake cuBLASLt's handle, descriptors, attributes and heuristic. Every attribute the
// simulator does not implement is rejected with a message, never silently ignored.
#include <cstdio>
#include <cstring>

#include "cublaslt_state.h"

struct cublasLtContext {
  int unused = 0;
};

namespace cuda_sim {

cublasStatus_t cublas_reject(cublasStatus_t status, const char* call, const char* why) {
  std::fprintf(stderr, "cuda_sim: %s: %s\n", call, why);
  return status;
}

namespace {

template <typename T>
cublasStatus_t read_attribute(T& out, const void* buf, size_t bytes, const char* call) {
  if (buf == nullptr || bytes != sizeof(T)) {
    return cublas_reject(CUBLAS_STATUS_INVALID_VALUE, call, "attribute size mismatch");
  }
  std::memcpy(&out, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

bool is_storage_type(cudaDataType_t type) {
  return type == CUDA_R_32F || type == CUDA_R_16BF || type == CUDA_R_16F;
}

}  // namespace

cublasStatus_t check_shapes(const char* call, const MatmulDesc& desc, const MatrixLayout& a,
                            const MatrixLayout& b, const MatrixLayout& c, const MatrixLayout& d) {
  if (desc.compute != CUBLAS_COMPUTE_32F || desc.scale != CUDA_R_32F) {
    return cublas_reject(CUBLAS_STATUS_NOT_SUPPORTED, call,
                         "only CUBLAS_COMPUTE_32F with f32 scales is simulated");
  }
  // cuBLASLt's combinations for CUBLAS_COMPUTE_32F: A and B of one type (f32, bf16, f16), C and
  // D of that type or, for 16-bit A/B, f32.
  if (!is_storage_type(a.type) || b.type != a.type || d.type != c.type ||
      (c.type != a.type && c.type != CUDA_R_32F)) {
    return cublas_reject(CUBLAS_STATUS_NOT_SUPPORTED, call,
                         "A and B must share one of f32, bf16, f16, and C = D be that or f32");
  }
  const bool ta = desc.trans_a == CUBLAS_OP_T, tb = desc.trans_b == CUBLAS_OP_T;
  const uint64_t m = ta ? a.cols : a.rows, k = ta ? a.rows : a.cols;
  const uint64_t kb = tb ? b.cols : b.rows, n = tb ? b.rows : b.cols;
  if (k != kb || d.rows != m || d.cols != n || c.rows != m || c.cols != n) {
    return cublas_reject(CUBLAS_STATUS_INVALID_VALUE, call, "operand shapes do not agree");
  }
  for (const MatrixLayout* l : {&a, &b, &c, &d}) {
    if (l->ld < static_cast<int64_t>(l->rows > 0 ? l->rows : 1)) {
      return cublas_reject(CUBLAS_STATUS_INVALID_VALUE, call,
                           "a leading dimension is smaller than the rows");
    }
  }
  if (desc.uses_aux()) {
    // cuBLASLt's rule for the GELU epilogues' auxiliary matrix: a leading dimension of at least
    // D's rows and a multiple of 8 elements.
    if (desc.aux == nullptr) {
      return cublas_reject(CUBLAS_STATUS_INVALID_VALUE, call,
                           "GELU epilogue without an aux pointer");
    }
    if (desc.aux_ld < static_cast<int64_t>(d.rows) || desc.aux_ld % 8 != 0) {
      return cublas_reject(CUBLAS_STATUS_INVALID_VALUE, call,
                           "the aux leading dimension must be >= D's rows and a multiple of 8");
    }
  }
  if (desc.adds_bias()) {
    if (desc.bias == nullptr) {
      return cublas_reject(CUBLAS_STATUS_INVALID_VALUE, call, "bias epilogue without a pointer");
    }
    if (desc.bias_type_set && desc.bias_type != d.type && desc.bias_type != a.type) {
      return cublas_reject(CUBLAS_STATUS_NOT_SUPPORTED, call,
                           "the bias type must be D's or A's");
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace cuda_sim

using namespace cuda_sim;

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  *handle = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasLtGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    default: return "CUBLAS_STATUS_(unnamed in cuda_sim)";
  }
}
const char* cublasLtGetStatusString(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? "success"
                                         : "see the cuda_sim message on stderr for the reason";
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  auto* d = new MatmulDesc;
  d->compute = compute;
  d->scale = scale;
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(d);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc_of(desc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attribute,
                                              const void* buf, size_t bytes) {
  constexpr const char* kCall = "cublasLtMatmulDescSetAttribute";
  MatmulDesc& d = *desc_of(desc);
  switch (attribute) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB: {
      int32_t op = 0;
      if (const auto s = read_attribute(op, buf, bytes, kCall); s != CUBLAS_STATUS_SUCCESS) return s;
      if (op != CUBLAS_OP_N && op != CUBLAS_OP_T) {
        return cublas_reject(CUBLAS_STATUS_NOT_SUPPORTED, kCall, "only OP_N and OP_T");
      }
      (attribute == CUBLASLT_MATMUL_DESC_TRANSA ? d.trans_a : d.trans_b) =
          static_cast<cublasOperation_t>(op);
      return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATMUL_DESC_EPILOGUE: {
      uint32_t epilogue = 0;
      if (const auto s = read_attribute(epilogue, buf, bytes, kCall); s != CUBLAS_STATUS_SUCCESS) {
        return s;
      }
      if (epilogue != CUBLASLT_EPILOGUE_DEFAULT && epilogue != CUBLASLT_EPILOGUE_BIAS &&
          epilogue != CUBLASLT_EPILOGUE_GELU_AUX && epilogue != CUBLASLT_EPILOGUE_GELU_AUX_BIAS &&
          epilogue != CUBLASLT_EPILOGUE_DGELU) {
        return cublas_reject(CUBLAS_STATUS_NOT_SUPPORTED, kCall,
                             "only the DEFAULT, BIAS, GELU_AUX(_BIAS) and DGELU epilogues are "
                             "simulated");
      }
      d.epilogue = static_cast<cublasLtEpilogue_t>(epilogue);
      return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      return read_attribute(d.bias, buf, bytes, kCall);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
      return read_attribute(d.aux, buf, bytes, kCall);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
      return read_attribute(d.aux_ld, buf, bytes, kCall);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: {
      int32_t type = 0;
      if (const auto s = read_attribute(type, buf, bytes, kCall); s != CUBLAS_STATUS_SUCCESS) {
        return s;
      }
      d.bias_type = static_cast<cudaDataType_t>(type);
      d.bias_type_set = true;
      return CUBLAS_STATUS_SUCCESS;
    }
    default:
      std::fprintf(stderr, "cuda_sim: matmul descriptor attribute %d\n",
                   static_cast<int>(attribute));
      return cublas_reject(CUBLAS_STATUS_NOT_SUPPORTED, kCall, "attribute not simulated");
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(new MatrixLayout{type, rows, cols, ld});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout_of(layout);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* preference) {
  *preference = reinterpret_cast<cublasLtMatmulPreference_t>(new MatmulPreference);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t preference) {
  delete preference_of(preference);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t preference,
                                                    cublasLtMatmulPreferenceAttributes_t attribute,
                                                    const void* buf, size_t bytes) {
  constexpr const char* kCall = "cublasLtMatmulPreferenceSetAttribute";
  MatmulPreference& p = *preference_of(preference);
  switch (attribute) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
      return read_attribute(p.max_workspace_bytes, buf, bytes, kCall);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
      return read_attribute(p.min_alignment[0], buf, bytes, kCall);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
      return read_attribute(p.min_alignment[1], buf, bytes, kCall);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
      return read_attribute(p.min_alignment[2], buf, bytes, kCall);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      return read_attribute(p.min_alignment[3], buf, bytes, kCall);
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK:
      return read_attribute(p.reduction_scheme_mask, buf, bytes, kCall);
    default:
      std::fprintf(stderr, "cuda_sim: matmul preference attribute %d\n",
                   static_cast<int>(attribute));
      return cublas_reject(CUBLAS_STATUS_NOT_SUPPORTED, kCall, "attribute not simulated");
  }
}

// Up to kSimulatedAlgorithms algorithms (as many as requested), all computing alike, needing no
// workspace, valid for the alignments the preference states: several, so that a caller that
// times the heuristic's candidates (ZERO_CUDA_GEMM_AUTOTUNE) runs its loop here too.
constexpr int kSimulatedAlgorithms = 3;
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t preference,
                                              int requested, cublasLtMatmulHeuristicResult_t results[],
                                              int* returned) {
  constexpr const char* kCall = "cublasLtMatmulAlgoGetHeuristic";
  if (handle == nullptr || requested < 1 || preference == nullptr) {
    return cublas_reject(CUBLAS_STATUS_INVALID_VALUE, kCall, "bad handle, count or preference");
  }
  if (const auto s = check_shapes(kCall, *desc_of(desc), *layout_of(a), *layout_of(b),
                                  *layout_of(c), *layout_of(d));
      s != CUBLAS_STATUS_SUCCESS) {
    return s;
  }
  AlgoContents contents{kAlgoMagic, {}, 0};
  const MatmulPreference& pref = *preference_of(preference);
  for (int i = 0; i < 4; ++i) contents.min_alignment[i] = pref.min_alignment[i];
  contents.reduce_in_output_type =
      (pref.reduction_scheme_mask &
       (CUBLASLT_REDUCTION_SCHEME_INPLACE | CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE)) != 0;
  const int count = requested < kSimulatedAlgorithms ? requested : kSimulatedAlgorithms;
  for (int i = 0; i < count; ++i) {
    results[i] = cublasLtMatmulHeuristicResult_t{};
    std::memcpy(results[i].algo.data, &contents, sizeof(contents));
    results[i].workspaceSize = 0;
    results[i].state = CUBLAS_STATUS_SUCCESS;
    results[i].wavesCount = 1.0f;
  }
  *returned = count;
  return CUBLAS_STATUS_SUCCESS;
}

#include "backend/cuda/cuda_matmul.h"

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cublaslt_library.h"
#include "core/check.h"
#include "core/error.h"
#include "core/parse_number.h"

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
  void operator()(cublasLtMatmulDescOpaque_t* d) const { cublaslt().desc_destroy(d); }
  void operator()(cublasLtMatrixLayoutOpaque_t* l) const { cublaslt().layout_destroy(l); }
  void operator()(cublasLtMatmulPreferenceOpaque_t* p) const { cublaslt().preference_destroy(p); }
};
using MatmulDesc = std::unique_ptr<cublasLtMatmulDescOpaque_t, DescDeleter>;
using Layout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, DescDeleter>;
using Preference = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, DescDeleter>;

// A column-major layout of a row-major matrix stored as `rows` x `cols` with row length `ld`:
// column-major it is cols x rows with leading dimension ld.
Layout row_major_layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld) {
  cublasLtMatrixLayout_t layout = nullptr;
  ZERO_CUBLAS_CHECK(cublaslt().layout_create(&layout, type, static_cast<uint64_t>(cols),
                                             static_cast<uint64_t>(rows), ld));
  return Layout(layout);
}

void set_bias_pointer(cublasLtMatmulDesc_t desc, const void* bias) {
  ZERO_CUBLAS_CHECK(cublaslt().desc_set_attribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                  sizeof(bias)));
}

void set_aux_pointer(cublasLtMatmulDesc_t desc, void* aux) {
  ZERO_CUBLAS_CHECK(cublaslt().desc_set_attribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                  &aux, sizeof(aux)));
}

// cuBLASLt's epilogue for the key's bias and GELU choice.
cublasLtEpilogue_t epilogue_of(const MatmulPlanKey& key) {
  switch (key.epilogue) {
    case GemmOperands::Epilogue::kGelu:
      return key.bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    case GemmOperands::Epilogue::kGeluGradient:
      return CUBLASLT_EPILOGUE_DGELU;
    case GemmOperands::Epilogue::kNone:
      break;
  }
  return key.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

}  // namespace

// Everything cublasLtMatmul needs besides the pointers, alpha, beta and the stream. A plan with
// `supported` false records that the heuristic found no algorithm (its descriptors are dropped).
struct CublasLtMatmul::Plan {
  bool supported = false;
  MatmulDesc desc;
  Layout first, second, out;  // cuBLASLt's A (our b), B (our a), C = D (our c)
  cublasLtMatmulHeuristicResult_t result{};
  // Autotuning: the heuristic's answers still to time (empty once tuned, or when not tuning).
  std::vector<cublasLtMatmulHeuristicResult_t> candidates;
};

// Builds the plan for `key` - only from the key, so nothing the plan depends on can be missing
// from it - and asks the heuristic. `bias` is the current call's bias pointer (the heuristic reads
// its alignment; the key holds the same alignment). Throws for failures other than "no
// algorithm".
std::unique_ptr<CublasLtMatmul::Plan> CublasLtMatmul::make_plan(cublasLtHandle_t handle,
                                                               const MatmulPlanKey& key,
                                                               const void* bias, void* aux,
                                                               int candidates) {
  const cudaDataType_t type = cuda_type(key.dtype);
  auto plan = std::make_unique<Plan>();
  cublasLtMatmulDesc_t raw_desc = nullptr;
  // CUBLAS_COMPUTE_32F: f32 accumulation, and for f32 operands no TF32 (that would be
  // CUBLAS_COMPUTE_32F_FAST_TF32).
  ZERO_CUBLAS_CHECK(cublaslt().desc_create(&raw_desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  plan->desc.reset(raw_desc);
  // Column-major D^T[n, m] = op(b)^T [n, k] x op(a)^T [k, m]. Row-major storage read
  // column-major is the transpose, so op(b)^T is b's storage as it lies when b is not transposed,
  // and needs CUBLAS_OP_T exactly when the row-major product transposes b (likewise a).
  const cublasOperation_t trans_first = key.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t trans_second = key.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  ZERO_CUBLAS_CHECK(cublaslt().desc_set_attribute(plan->desc.get(), CUBLASLT_MATMUL_DESC_TRANSA,
                                                  &trans_first, sizeof(trans_first)));
  ZERO_CUBLAS_CHECK(cublaslt().desc_set_attribute(plan->desc.get(), CUBLASLT_MATMUL_DESC_TRANSB,
                                                  &trans_second, sizeof(trans_second)));
  const cublasLtEpilogue_t epilogue = epilogue_of(key);
  if (epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    ZERO_CUBLAS_CHECK(cublaslt().desc_set_attribute(
        plan->desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
  }
  if (key.epilogue != GemmOperands::Epilogue::kNone) {
    // The aux matrix has c's column-major shape; its leading dimension in elements. The pointer
    // is the calling op's (the heuristic may read its alignment, as the bias's; both keyed).
    set_aux_pointer(plan->desc.get(), aux);
    const int64_t ld_aux = key.ld_aux;
    ZERO_CUBLAS_CHECK(cublaslt().desc_set_attribute(
        plan->desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld_aux, sizeof(ld_aux)));
  }
  if (key.bias) {
    set_bias_pointer(plan->desc.get(), bias);
    const cudaDataType_t bias_type = cuda_type(key.bias_dtype);
    ZERO_CUBLAS_CHECK(cublaslt().desc_set_attribute(
        plan->desc.get(), CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
  }
  // Storage shapes (row-major): b is [k, n] or, transposed, [n, k]; a is [m, k] or [k, m].
  plan->first = key.transpose_b ? row_major_layout(type, key.n, key.k, key.ldb)
                                : row_major_layout(type, key.k, key.n, key.ldb);
  plan->second = key.transpose_a ? row_major_layout(type, key.k, key.m, key.lda)
                                 : row_major_layout(type, key.m, key.k, key.lda);
  plan->out = row_major_layout(key.c_f32 ? CUDA_R_32F : type, key.m, key.n, key.ldc);

  cublasLtMatmulPreference_t raw_pref = nullptr;
  ZERO_CUBLAS_CHECK(cublaslt().preference_create(&raw_pref));
  const Preference pref(raw_pref);
  const uint64_t max_workspace = key.workspace_bytes;
  ZERO_CUBLAS_CHECK(cublaslt().preference_set_attribute(
      pref.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace, sizeof(max_workspace)));
  // Operands may be views at any element offset (a parameter inside the flat buffer): the
  // heuristic otherwise assumes 256-byte alignment and may pick a kernel that faults.
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.b_alignment},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.a_alignment},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.c_alignment},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.c_alignment}};
  for (const auto& [attribute, alignment] : alignments) {
    ZERO_CUBLAS_CHECK(
        cublaslt().preference_set_attribute(pref.get(), attribute, &alignment, sizeof(alignment)));
  }
  // Split-K partial sums are added in f32 or not at all: by default cuBLASLt may add them in the
  // output type, rounding every partial to bf16/f16 - with cancelling partials that was 18 f16
  // units off the f32-accumulated product on an H200 (dx of a 2048-row linear backward).
  const uint32_t reduction_schemes =
      CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  ZERO_CUBLAS_CHECK(cublaslt().preference_set_attribute(
      pref.get(), CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reduction_schemes,
      sizeof(reduction_schemes)));
  int found = 0;
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(candidates));
  const cublasStatus_t heuristic = cublaslt().algo_get_heuristic(
      handle, plan->desc.get(), plan->first.get(), plan->second.get(), plan->out.get(),
      plan->out.get(), pref.get(), candidates, results.data(), &found);
  if (heuristic == CUBLAS_STATUS_NOT_SUPPORTED ||
      (heuristic == CUBLAS_STATUS_SUCCESS && found == 0)) {
    return std::make_unique<Plan>();  // supported = false; the descriptors are freed
  }
  ZERO_CUBLAS_CHECK(heuristic);
  plan->supported = true;
  plan->result = results[0];
  if (found > 1) plan->candidates.assign(results.begin(), results.begin() + found);
  return plan;
}

int CublasLtMatmul::autotune_candidates_from_environment() {
  const char* value = std::getenv("ZERO_CUDA_GEMM_AUTOTUNE");
  if (value == nullptr) return 1;
  const std::optional<int64_t> count = parse_int64(value);
  if (!count || *count < 1 || *count > kMaxAutotuneCandidates) {
    throw ConfigError("ZERO_CUDA_GEMM_AUTOTUNE=" + std::string(value) +
                      " is not a candidate count: say a whole number from 1 (the heuristic's "
                      "first algorithm, the default) to " +
                      std::to_string(kMaxAutotuneCandidates) + ", or unset it");
  }
  return static_cast<int>(*count);
}

CublasLtMatmul::CublasLtMatmul(int autotune_candidates)
    : autotune_candidates_(autotune_candidates), plans_(kMaxPlans) {
  ZERO_CHECK(autotune_candidates >= 1 && autotune_candidates <= kMaxAutotuneCandidates,
             "autotune candidates " << autotune_candidates << " outside [1, "
                                    << kMaxAutotuneCandidates << "]");
  ZERO_CUBLAS_CHECK(cublaslt().create(&handle_));
}

CublasLtMatmul::~CublasLtMatmul() {
  plans_.clear();  // the descriptors before the handle
  if (handle_ != nullptr) cublaslt().destroy(handle_);
}

bool CublasLtMatmul::run(const GemmOperands& op, void* workspace, size_t workspace_bytes,
                         cudaStream_t stream, const TuningScratch& tuning_scratch) {
  if (op.bias != nullptr) {
    ZERO_CHECK(op.beta == 0.0f, "the bias epilogue is used with beta = 0 only");
  }
  if (op.epilogue != GemmOperands::Epilogue::kNone) {
    ZERO_CHECK(op.beta == 0.0f && !op.c_f32 && op.aux != nullptr && op.ld_aux >= op.n &&
                   op.ld_aux % 8 == 0,
               "a GELU epilogue needs beta 0, c in the operands' dtype and an aux matrix with "
               "a leading dimension >= n and a multiple of 8");
  }
  const MatmulPlanKey key = make_plan_key(op, workspace_bytes);
  Plan* plan = nullptr;
  if (std::unique_ptr<Plan>* cached = plans_.find(key)) {
    ++plan_hits_;
    plan = cached->get();
  } else {
    ++plan_misses_;
    plan = plans_.insert(key, make_plan(handle_, key, op.bias, op.aux, autotune_candidates_))
               .get();
  }
  if (!plan->supported) return false;
  // The cached descriptor holds the bias pointer of the call that made it; this call's bias has
  // the same alignment (it is in the key) but may live elsewhere.
  if (op.bias != nullptr) set_bias_pointer(plan->desc.get(), op.bias);
  if (op.epilogue != GemmOperands::Epilogue::kNone) set_aux_pointer(plan->desc.get(), op.aux);
  if (!plan->candidates.empty()) {
    ZERO_CHECK(tuning_scratch, "autotuning a product needs tuning scratch");
    const size_t c_element = op.c_f32 ? sizeof(float) : dtype_size(op.dtype);
    void* scratch_c =
        tuning_scratch(static_cast<size_t>(op.m) * static_cast<size_t>(op.ldc) * c_element);
    tune(*plan, op, scratch_c, workspace, workspace_bytes, stream);
  }
  ZERO_CUBLAS_CHECK(cublaslt().matmul(handle_, plan->desc.get(), &op.alpha, op.b,
                                      plan->first.get(), op.a, plan->second.get(), &op.beta, op.c,
                                      plan->out.get(), op.c, plan->out.get(), &plan->result.algo,
                                      workspace, workspace_bytes, stream));
  return true;
}

void CublasLtMatmul::tune(Plan& plan, const GemmOperands& op, void* scratch_c, void* workspace,
                          size_t workspace_bytes, cudaStream_t stream) {
  const float beta = 0.0f;  // the scratch's old contents do not matter
  cudaEvent_t start = nullptr, end = nullptr;
  ZERO_CUDA_CHECK(cudaEventCreate(&start));
  ZERO_CUDA_CHECK(cudaEventCreate(&end));
  size_t best = 0;
  float best_ms = 0.0f;
  try {
    for (size_t i = 0; i < plan.candidates.size(); ++i) {
      const cublasLtMatmulAlgo_t* algo = &plan.candidates[i].algo;
      auto product = [&] {
        ZERO_CUBLAS_CHECK(cublaslt().matmul(handle_, plan.desc.get(), &op.alpha, op.b,
                                            plan.first.get(), op.a, plan.second.get(), &beta,
                                            scratch_c, plan.out.get(), scratch_c, plan.out.get(),
                                            algo, workspace, workspace_bytes, stream));
      };
      product();  // warm-up: the kernel's first launch loads its module
      ZERO_CUDA_CHECK(cudaEventRecord(start, stream));
      for (int r = 0; r < kTimedRuns; ++r) product();
      ZERO_CUDA_CHECK(cudaEventRecord(end, stream));
      ZERO_CUDA_CHECK(cudaEventSynchronize(end));
      float ms = 0.0f;
      ZERO_CUDA_CHECK(cudaEventElapsedTime(&ms, start, end));
      if (i == 0 || ms < best_ms) {
        best = i;
        best_ms = ms;
      }
    }
  } catch (...) {
    cudaEventDestroy(start);
    cudaEventDestroy(end);
    throw;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(end);
  plan.result = plan.candidates[best];
  plan.candidates.clear();
  ++tunings_;
}

}  // namespace zero::backend::cuda

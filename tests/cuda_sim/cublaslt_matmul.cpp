// cublasLtMatmul: D = alpha op(A) op(B) + beta C (+ bias per row of D), column-major, f32
// accumulation over k in order, one rounding to the storage type at the end - unless the
// preference let split-K partials be added in the output type: then a 16-bit D of a product
// with k >= kSplitMinK is summed as real cuBLASLt may choose to, in kSplits partials each
// rounded to D's type and added in it (an H200 did so, 18 f16 units off, for a linear backward).
// The bias epilogue, too, rounds the product to a 16-bit D's type before adding the bias. The
// GELU epilogues (tanh form) act on the f32 result after the bias: GELU_AUX(_BIAS) stores it,
// rounded to D's type, as the aux matrix and GELU of it in D; DGELU multiplies it by GELU' of the
// aux matrix. Whether real cuBLASLt rounds anything in between is not known here (unmeasured):
// the tests hold its results to the CPU's within a 16-bit tolerance, not to these bits.
// Before computing, every operand's full extent must lie inside one device allocation and every
// pointer must have the alignment the heuristic was promised.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cublaslt_state.h"
#include "device_memory.h"
#include "runtime_state.h"

namespace cuda_sim {
namespace {

size_t element_bytes(cudaDataType_t type) { return type == CUDA_R_32F ? 4 : 2; }

constexpr uint64_t kSplitMinK = 256;
constexpr uint64_t kSplits = 4;

// value rounded to `type` (bf16/f16; f32 unchanged).
float round_to(cudaDataType_t type, float value) {
  switch (type) {
    case CUDA_R_16BF:
      return __bfloat162float(__float2bfloat16_rn(value));
    case CUDA_R_16F:
      return __half2float(__float2half_rn(value));
    default:
      return value;
  }
}

float load(const void* base, size_t index, cudaDataType_t type) {
  switch (type) {
    case CUDA_R_32F:
      return static_cast<const float*>(base)[index];
    case CUDA_R_16BF:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[index]);
    default:
      return __half2float(static_cast<const __half*>(base)[index]);
  }
}

void store(void* base, size_t index, cudaDataType_t type, float value) {
  switch (type) {
    case CUDA_R_32F:
      static_cast<float*>(base)[index] = value;
      return;
    case CUDA_R_16BF:
      static_cast<__nv_bfloat16*>(base)[index] = __float2bfloat16_rn(value);
      return;
    default:
      static_cast<__half*>(base)[index] = __float2half_rn(value);
      return;
  }
}

// GELU, tanh form, and its derivative (backend.h's definition), in f32 as a kernel computes it.
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;

float gelu(float x) {
  return 0.5f * x * (1.0f + std::tanh(kGeluScale * (x + kGeluCubic * x * x * x)));
}

float gelu_gradient(float x) {
  const float t = std::tanh(kGeluScale * (x + kGeluCubic * x * x * x));
  return 0.5f * (1.0f + t) +
         0.5f * x * (1.0f - t * t) * kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
}

// Bytes from the first to one past the last element of a column-major rows x cols matrix.
size_t extent_bytes(const MatrixLayout& l) {
  if (l.rows == 0 || l.cols == 0) return 0;
  return ((l.cols - 1) * static_cast<uint64_t>(l.ld) + l.rows) * element_bytes(l.type);
}

// Empty when fine, else what is wrong.
std::string check_operand(const char* name, const void* pointer, size_t bytes,
                          uint64_t alignment) {
  if (bytes == 0) return {};
  const auto allocation = find_allocation(pointer);
  if (!allocation ||
      reinterpret_cast<uintptr_t>(pointer) + bytes > allocation->begin + allocation->bytes) {
    return std::string(name) + " (" + std::to_string(bytes) +
           " bytes) is not inside one device allocation";
  }
  if (alignment != 0 && reinterpret_cast<uintptr_t>(pointer) % alignment != 0) {
    return std::string(name) + " is less aligned than the " + std::to_string(alignment) +
           " bytes the heuristic was told (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*)";
  }
  return {};
}

// Column-major op(X) as a dense row-major float matrix: out[r * cols + c] = op(X)(r, c).
std::vector<float> widen_op(const void* x, const MatrixLayout& l, bool transpose) {
  const uint64_t rows = transpose ? l.cols : l.rows, cols = transpose ? l.rows : l.cols;
  std::vector<float> out(rows * cols);
  for (uint64_t j = 0; j < l.cols; ++j) {
    for (uint64_t i = 0; i < l.rows; ++i) {
      const float v = load(x, i + j * static_cast<uint64_t>(l.ld), l.type);
      if (transpose) {
        out[j * cols + i] = v;
      } else {
        out[i * cols + j] = v;
      }
    }
  }
  return out;
}

}  // namespace
}  // namespace cuda_sim

using namespace cuda_sim;

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t compute_desc,
                              const void* alpha, const void* a, cublasLtMatrixLayout_t a_desc,
                              const void* b, cublasLtMatrixLayout_t b_desc, const void* beta,
                              const void* c, cublasLtMatrixLayout_t c_desc, void* d,
                              cublasLtMatrixLayout_t d_desc, const cublasLtMatmulAlgo_t* algo,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  constexpr const char* kCall = "cublasLtMatmul";
  if (handle == nullptr || algo == nullptr || !is_known_stream(stream)) {
    return cublas_reject(CUBLAS_STATUS_INVALID_VALUE, kCall, "bad handle, algo or stream");
  }
  const MatmulDesc desc = *desc_of(compute_desc);
  const MatrixLayout la = *layout_of(a_desc), lb = *layout_of(b_desc), lc = *layout_of(c_desc),
                     ld = *layout_of(d_desc);
  if (const auto s = check_shapes(kCall, desc, la, lb, lc, ld); s != CUBLAS_STATUS_SUCCESS) {
    return s;
  }
  AlgoContents contents;
  std::memcpy(&contents, algo->data, sizeof(contents));
  if (contents.magic != kAlgoMagic) {
    return cublas_reject(CUBLAS_STATUS_INVALID_VALUE, kCall,
                         "the algo did not come from cublasLtMatmulAlgoGetHeuristic");
  }
  // Host pointer mode (the default): alpha and beta are host floats.
  const float alpha_value = *static_cast<const float*>(alpha);
  const float beta_value = *static_cast<const float*>(beta);
  const bool ta = desc.trans_a == CUBLAS_OP_T, tb = desc.trans_b == CUBLAS_OP_T;
  const uint64_t m = ld.rows, n = ld.cols, k = ta ? la.rows : la.cols;
  const bool bias = desc.adds_bias();
  const MatrixLayout aux_layout{ld.type, m, n, desc.aux_ld};
  std::string problem;
  for (const std::string& p :
       {check_operand("A", a, extent_bytes(la), contents.min_alignment[0]),
        check_operand("B", b, extent_bytes(lb), contents.min_alignment[1]),
        beta_value != 0.0f ? check_operand("C", c, extent_bytes(lc), contents.min_alignment[2])
                           : std::string(),
        check_operand("D", d, extent_bytes(ld), contents.min_alignment[3]),
        bias ? check_operand("bias", desc.bias, m * element_bytes(desc.bias_type_for(ld.type)), 0)
             : std::string(),
        desc.uses_aux() ? check_operand("aux", desc.aux, extent_bytes(aux_layout), 16)
                        : std::string(),
        workspace_bytes > 0 ? check_operand("workspace", workspace, workspace_bytes, 0)
                            : std::string()}) {
    if (!p.empty() && problem.empty()) problem = p;
  }
  if (!problem.empty()) return cublas_reject(CUBLAS_STATUS_INVALID_VALUE, kCall, problem.c_str());

  // Runs when the stream gets there (streams.h), on copies of the descriptors (the caller may
  // destroy or change them once this returns) and of alpha and beta (read at the call).
  const bool split_in_output_type = contents.reduce_in_output_type != 0 &&
                                    ld.type != CUDA_R_32F && k >= kSplitMinK && !desc.uses_aux();
  enqueue(stream, [desc, la, lb, lc, ld, a, b, c, d, ta, tb, m, n, k, bias, alpha_value,
                   beta_value, workspace, workspace_bytes, split_in_output_type] {
    const std::vector<float> op_a = widen_op(a, la, ta);     // m x k
    const std::vector<float> op_b_t = widen_op(b, lb, !tb);  // n x k: op(B) transposed
    const uint64_t splits = split_in_output_type ? kSplits : 1;
    // out[s][i + j m]: the f32 dot product over the s-th of `splits` ranges of k.
    std::vector<std::vector<float>> out(splits, std::vector<float>(m * n));
    for (uint64_t s = 0; s < splits; ++s) {
      const uint64_t begin = k * s / splits, end = k * (s + 1) / splits;
      for (uint64_t j = 0; j < n; ++j) {
        const float* bcol = op_b_t.data() + j * k;
        for (uint64_t i = 0; i < m; ++i) {
          const float* arow = op_a.data() + i * k;
          float acc = 0.0f;
          for (uint64_t p = begin; p < end; ++p) acc += arow[p] * bcol[p];
          out[s][i + j * m] = acc;
        }
      }
    }
    for (uint64_t j = 0; j < n; ++j) {
      for (uint64_t i = 0; i < m; ++i) {
        float v = alpha_value * out[0][i + j * m];
        if (beta_value != 0.0f) {
          v += beta_value * load(c, i + j * static_cast<uint64_t>(lc.ld), lc.type);
        }
        // The bias epilogue adds the bias to the product already rounded to a 16-bit D's type
        // (an H200's cuBLASLt: up to 2 bf16 units off the once-rounded sum where they cancel).
        if (bias) v = round_to(ld.type, v) + load(desc.bias, i, desc.bias_type_for(ld.type));
        const size_t aux_index = i + j * static_cast<uint64_t>(desc.aux_ld);
        if (desc.applies_gelu()) {
          // aux is the epilogue's output here; const in the descriptor as cuBLASLt declares it.
          store(const_cast<void*>(desc.aux), aux_index, ld.type, v);
          v = gelu(v);
        } else if (desc.applies_gelu_gradient()) {
          v *= gelu_gradient(load(desc.aux, aux_index, ld.type));
        }
        // Split: every partial lands in D's type and is added there.
        for (uint64_t s = 1; s < splits; ++s) {
          v = round_to(ld.type, round_to(ld.type, v) + round_to(ld.type, alpha_value * out[s][i + j * m]));
        }
        store(d, i + j * static_cast<uint64_t>(ld.ld), ld.type, v);
      }
    }
    // cuBLASLt may use its workspace as scratch: scribble on it, so a workspace that aliases
    // live data shows.
    if (workspace_bytes > 0) {
      std::memset(workspace, kPoisonByte,
                  workspace_bytes < (size_t{1} << 20) ? workspace_bytes : (size_t{1} << 20));
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}

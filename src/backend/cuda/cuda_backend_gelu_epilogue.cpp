// GPT-2's MLP with GELU in cuBLASLt's epilogues (ZERO_CUDA_GELU_EPILOGUE=1): the up-projection
// writes gelu(x @ w^T + bias) and keeps the pre-activation as the epilogue's aux matrix
// (GELU_AUX_BIAS), and the down-projection's dx product writes (dy @ w) * gelu'(up) (DGELU), so
// neither the forward's nor the backward's elementwise pass over the [rows, 4C] activations runs.
// Where the operands do not suit the epilogue kernels, or cuBLASLt has none for the shape, the
// ops take Backend's defaults (the product, then the elementwise kernel), so the knob changes
// speed and the last bits of 16-bit results, never what is computed.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>

#include "backend/cuda/cuda_arg_checks.h"
#include "backend/cuda/cuda_backend.h"
#include "core/error.h"

namespace zero::backend {

using cuda_internal::Checks;
using cuda_internal::leading_rows;

namespace {

bool aligned_16(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

}  // namespace

bool CudaBackend::gelu_epilogue_from_environment() {
  const char* value = std::getenv("ZERO_CUDA_GELU_EPILOGUE");
  if (value == nullptr || std::string(value) == "0") return false;
  if (std::string(value) == "1") return true;
  throw ConfigError("ZERO_CUDA_GELU_EPILOGUE=" + std::string(value) +
                    " is not a choice: say 1 (GELU in the cuBLASLt products' epilogues) or 0 "
                    "(separate GELU kernels, the default), or unset it");
}

bool CudaBackend::run_gelu_epilogue(const cuda::GemmOperands& op) {
  // The epilogue kernels read and write whole 16-byte vectors: rows (of a, b, c and aux) whose
  // lengths are multiples of 8 elements, at 16-byte aligned addresses, and a non-empty product.
  if (op.m == 0 || op.n == 0 || op.k == 0) return false;
  for (const int64_t ld : {op.lda, op.ldb, op.ldc, op.ld_aux, op.n, op.k}) {
    if (ld % 8 != 0) return false;
  }
  for (const void* pointer : {op.a, op.b, static_cast<const void*>(op.c), op.bias,
                              static_cast<const void*>(op.aux)}) {
    if (pointer != nullptr && !aligned_16(pointer)) return false;
  }
  if (!matmul_workspace_.defined()) matmul_workspace_ = scratch(size_t{32} << 20);
  if (!run_matmul(op)) return false;
  ++gelu_epilogue_products_;
  return true;
}

void CudaBackend::linear_gelu_forward(Tensor& act, Tensor& up, const Tensor& x, const Tensor& w,
                                      const Tensor* bias) {
  if (!gelu_epilogue_) {
    Backend::linear_gelu_forward(act, up, x, w, bias);
    return;
  }
  const Checks check(device(), "linear_gelu_forward");
  check.contiguous(act, "act").contiguous(up, "up");
  check_linear_forward(check, up, x, w, bias);
  check.dtype(act, up.dtype(), "act").same_shape(act, up, "act", "up");
  cuda::GemmOperands op;
  op.dtype = up.dtype();
  op.transpose_b = true;
  op.m = leading_rows(x);
  op.n = w.size(0);
  op.k = w.size(1);
  op.a = x.raw_data();
  op.lda = op.k;
  op.b = w.raw_data();
  op.ldb = op.k;
  op.c = act.raw_data();
  op.ldc = op.n;
  op.bias = bias != nullptr ? bias->raw_data() : nullptr;
  op.epilogue = cuda::GemmOperands::Epilogue::kGelu;
  op.aux = up.raw_data();
  op.ld_aux = op.n;
  if (!run_gelu_epilogue(op)) Backend::linear_gelu_forward(act, up, x, w, bias);
}

Tensor CudaBackend::linear_backward_gelu(Tensor& dw, Tensor* dbias, const Tensor& dy, Tensor act,
                                         const Tensor& w, const Tensor& up) {
  // A row-strided dy (the default path takes it) has no whole-row vectors for the epilogue.
  if (!gelu_epilogue_ || !dy.is_contiguous()) {
    return Backend::linear_backward_gelu(dw, dbias, dy, std::move(act), w, up);
  }
  const Checks check(device(), "linear_backward_gelu");
  check.contiguous(up, "up");
  check.dtype(up, act.dtype(), "up").same_shape(up, act, "up", "act");
  // dw and dbias, with every check of the operands; dx comes from the epilogue product below.
  linear_backward(nullptr, dw, dbias, dy, act, w);
  act = Tensor();  // read by the dw product, which is enqueued: its memory may serve d_up
  Tensor d_up = empty(up.shape(), up.dtype(), MemoryCategory::kActivations);
  // d_up[rows, in] = (dy[rows, out] @ w[out, in]) * gelu'(up)
  cuda::GemmOperands op;
  op.dtype = up.dtype();
  op.m = leading_rows(up);
  op.n = w.size(1);
  op.k = w.size(0);
  op.a = dy.raw_data();
  op.lda = op.k;
  op.b = w.raw_data();
  op.ldb = op.n;
  op.c = d_up.raw_data();
  op.ldc = op.n;
  op.epilogue = cuda::GemmOperands::Epilogue::kGeluGradient;
  op.aux = up.raw_data();  // read only here (the aux pointer serves both directions)
  op.ld_aux = op.n;
  if (!run_gelu_epilogue(op)) {
    // No epilogue kernel: dx through the plain product into d_act, then gelu_backward into d_up.
    Tensor d_act = empty(up.shape(), up.dtype(), MemoryCategory::kActivations);
    cuda::GemmOperands plain = op;
    plain.epilogue = cuda::GemmOperands::Epilogue::kNone;
    plain.aux = nullptr;
    plain.ld_aux = 0;
    plain.c = d_act.raw_data();
    gemm(plain);
    gelu_backward(d_up, d_act, up);
  }
  return d_up;
}

}  // namespace zero::backend

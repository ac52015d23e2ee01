// CpuBackend's methods: each forwards to the free kernel function of its op family
// (cpu_<family>.{h,cpp}), which tests can also call directly.
#include "backend/cpu/cpu_backend.h"

#include "backend/cpu/cpu_activations.h"
#include "backend/cpu/cpu_attention.h"
#include "backend/cpu/cpu_cross_entropy.h"
#include "backend/cpu/cpu_elementwise.h"
#include "backend/cpu/cpu_embedding.h"
#include "backend/cpu/cpu_layernorm.h"
#include "backend/cpu/cpu_matmul.h"
#include "backend/cpu/cpu_optimizers.h"
#include "backend/cpu/cpu_reductions.h"
#include "backend/cpu/cpu_rmsnorm.h"
#include "backend/cpu/cpu_rope.h"
#include "backend/cpu/cpu_stochastic_round.h"

namespace zero::backend {

void CpuBackend::fill(Tensor& dst, double value) { cpu::fill(dst, value); }
void CpuBackend::copy(Tensor& dst, const Tensor& src) { cpu::copy(dst, src); }
void CpuBackend::copy_from_host(Tensor& dst, const void* src) { cpu::copy_from_host(dst, src); }
void CpuBackend::copy_to_host(void* dst, const Tensor& src) { cpu::copy_to_host(dst, src); }
void CpuBackend::stochastic_round_to_bf16(Tensor& dst, const Tensor& src, uint64_t seed,
                                          int64_t first_index) {
  cpu::stochastic_round_to_bf16(dst, src, seed, first_index);
}
void CpuBackend::add(Tensor& y, const Tensor& x, double alpha) { cpu::add(y, x, alpha); }
void CpuBackend::scale(Tensor& y, double alpha) { cpu::scale(y, alpha); }

void CpuBackend::matmul(Tensor& c, const Tensor& a, bool transpose_a, const Tensor& b,
                        bool transpose_b, double alpha, double beta) {
  cpu::matmul(c, a, transpose_a, b, transpose_b, alpha, beta);
}
void CpuBackend::linear_forward(Tensor& y, const Tensor& x, const Tensor& w, const Tensor* bias) {
  cpu::linear_forward(y, x, w, bias);
}
void CpuBackend::linear_backward(Tensor* dx, Tensor& dw, Tensor* dbias, const Tensor& dy,
                                 const Tensor& x, const Tensor& w) {
  cpu::linear_backward(dx, dw, dbias, dy, x, w);
}

void CpuBackend::embedding_forward(Tensor& out, const Tensor& ids, const Tensor& table,
                                   bool accumulate) {
  cpu::embedding_forward(out, ids, table, accumulate);
}
void CpuBackend::embedding_backward(Tensor& dtable, const Tensor& dout, const Tensor& ids) {
  cpu::embedding_backward(dtable, dout, ids);
}

void CpuBackend::layernorm_forward(Tensor& y, Tensor& mean, Tensor& rstd, const Tensor& x,
                                   const Tensor& weight, const Tensor* bias, double eps) {
  cpu::layernorm_forward(y, mean, rstd, x, weight, bias, eps);
}
void CpuBackend::layernorm_backward(Tensor& dx, Tensor& dweight, Tensor* dbias, const Tensor& dy,
                                    const Tensor& x, const Tensor& weight, const Tensor& mean,
                                    const Tensor& rstd) {
  cpu::layernorm_backward(dx, dweight, dbias, dy, x, weight, mean, rstd);
}
void CpuBackend::rmsnorm_forward(Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& weight,
                                 double eps) {
  cpu::rmsnorm_forward(y, rstd, x, weight, eps);
}
void CpuBackend::rmsnorm_backward(Tensor& dx, Tensor& dweight, const Tensor& dy, const Tensor& x,
                                  const Tensor& weight, const Tensor& rstd) {
  cpu::rmsnorm_backward(dx, dweight, dy, x, weight, rstd);
}

void CpuBackend::gelu_forward(Tensor& y, const Tensor& x) { cpu::gelu_forward(y, x); }
void CpuBackend::gelu_backward(Tensor& dx, const Tensor& dy, const Tensor& x) {
  cpu::gelu_backward(dx, dy, x);
}
void CpuBackend::swiglu_forward(Tensor& y, const Tensor& gate_up) { cpu::swiglu_forward(y, gate_up); }
void CpuBackend::swiglu_backward(Tensor& dgate_up, const Tensor& dy, const Tensor& gate_up) {
  cpu::swiglu_backward(dgate_up, dy, gate_up);
}

void CpuBackend::rope_apply(Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse) {
  cpu::rope_apply(x, cos, sin, inverse);
}

void CpuBackend::attention_forward(Tensor& out, Tensor& lse, const Tensor& q, const Tensor& k,
                                   const Tensor& v, double scale, int64_t window) {
  cpu::attention_forward(out, lse, q, k, v, scale, window);
}
void CpuBackend::attention_backward(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout,
                                    const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& out, const Tensor& lse, double scale,
                                    int64_t window) {
  cpu::attention_backward(dq, dk, dv, dout, q, k, v, out, lse, scale, window);
}

void CpuBackend::softmax_cross_entropy(Tensor& losses, Tensor* dlogits, const Tensor& logits,
                                       const Tensor& targets, int64_t ignore_index,
                                       double grad_scale) {
  cpu::softmax_cross_entropy(losses, dlogits, logits, targets, ignore_index, grad_scale);
}

double CpuBackend::squared_norm(const Tensor& x) { return cpu::squared_norm(x); }

void CpuBackend::optimizer_update(OptimizerKind kind, Tensor& params, const Tensor& grads,
                                  std::span<Tensor> state, std::span<const ParamSegment> segments,
                                  const OptimizerHyper& hyper) {
  cpu::optimizer_update(kind, params, grads, state, segments, hyper);
}

}  // namespace zero::backend

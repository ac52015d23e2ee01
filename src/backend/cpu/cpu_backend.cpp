// CpuBackend's methods: each forwards to the free kernel function of its op family
// (cpu_<family>.{h,cpp}), which tests can also call directly.
#include "backend/cpu/cpu_backend.h"

#include "backend/cpu/cpu_activations.h"
#include "backend/cpu/cpu_attention.h"
#include "backend/cpu/cpu_cached_attention.h"
#include "backend/cpu/cpu_cross_entropy.h"
#include "backend/cpu/cpu_elementwise.h"
#include "backend/cpu/cpu_embedding.h"
#include "backend/cpu/cpu_vocab_slice.h"
#include "backend/cpu/cpu_f32_twins.h"
#include "backend/cpu/cpu_layernorm.h"
#include "backend/cpu/cpu_matmul.h"
#include "backend/cpu/cpu_moe.h"
#include "backend/cpu/cpu_int8_groups.h"
#include "backend/cpu/cpu_onebit.h"
#include "backend/cpu/cpu_optimizers.h"
#include "backend/cpu/cpu_reductions.h"
#include "backend/cpu/cpu_qk_norm.h"
#include "backend/cpu/cpu_rmsnorm.h"
#include "backend/cpu/cpu_rope.h"
#include "backend/cpu/cpu_stochastic_round.h"
#include "backend/qk_norm_shapes.h"

namespace zero::backend {

void CpuBackend::fill(Tensor& dst, double value) { cpu::fill(dst, value); }
void CpuBackend::copy(Tensor& dst, const Tensor& src) { cpu::copy(dst, src); }
void CpuBackend::do_copy_from_host(Tensor& dst, const void* src) { cpu::copy_from_host(dst, src); }
void CpuBackend::do_copy_to_host(void* dst, const Tensor& src) { cpu::copy_to_host(dst, src); }

Allocator& CpuBackend::pinned_host_allocator() { return cpu_pinned_allocator(); }

// Every op has finished when it returns, so an event is complete once recorded; the sequence
// numbers still let tests check that layers record and wait in a sensible order.
Event CpuBackend::record_event(StreamKind stream) {
  return Event(stream, ++event_sequence_[static_cast<size_t>(stream)], nullptr);
}
void CpuBackend::wait_event(StreamKind /*waiter*/, const Event& /*event*/) {}
void CpuBackend::synchronize_event(const Event& /*event*/) {}
void CpuBackend::stochastic_round_to_bf16(Tensor& dst, const Tensor& src, uint64_t seed,
                                          int64_t first_index) {
  cpu::stochastic_round_to_bf16(dst, src, seed, first_index);
}
// Kernels on 16-bit tensors run on f32 twins and round their outputs once (cpu_f32_twins.h);
// f32 and f64 calls go straight to the kernels.
namespace {

template <typename... Ts>
bool any_16bit(const Ts&... tensors) {
  return (cpu::is_16bit(tensors) || ...);
}

}  // namespace

void CpuBackend::add(Tensor& y, const Tensor& x, double alpha) {
  if (!any_16bit(y, x)) return cpu::add(y, x, alpha);
  cpu::F32Twins t;
  cpu::add(t.out(y), t.in(x), alpha);
  t.finish();
}
void CpuBackend::scale(Tensor& y, double alpha) {
  if (!any_16bit(y)) return cpu::scale(y, alpha);
  cpu::F32Twins t;
  cpu::scale(t.out(y), alpha);
  t.finish();
}

void CpuBackend::scale_by_inverse_norm(Tensor& x, const Tensor& squared_norm, double eps) {
  cpu::scale_by_inverse_norm(x, squared_norm, eps);
}

void CpuBackend::matmul(Tensor& c, const Tensor& a, bool transpose_a, const Tensor& b,
                        bool transpose_b, double alpha, double beta) {
  if (!any_16bit(c, a, b)) return cpu::matmul(c, a, transpose_a, b, transpose_b, alpha, beta);
  cpu::F32Twins t;
  cpu::matmul(t.out(c), t.in(a), transpose_a, t.in(b), transpose_b, alpha, beta);
  t.finish();
}
void CpuBackend::linear_forward(Tensor& y, const Tensor& x, const Tensor& w, const Tensor* bias) {
  if (!any_16bit(y, x, w, bias)) return cpu::linear_forward(y, x, w, bias);
  cpu::F32Twins t;
  cpu::linear_forward(t.out(y), t.in(x), t.in(w), t.in(bias));
  t.finish();
}
void CpuBackend::linear_backward(Tensor* dx, Tensor& dw, Tensor* dbias, const Tensor& dy,
                                 const Tensor& x, const Tensor& w) {
  if (!any_16bit(dx, dw, dbias, dy, x, w)) return cpu::linear_backward(dx, dw, dbias, dy, x, w);
  cpu::F32Twins t;
  cpu::linear_backward(t.out(dx), t.out(dw), t.out(dbias), t.in(dy), t.in(x), t.in(w));
  t.finish();
}

void CpuBackend::embedding_forward(Tensor& out, const Tensor& ids, const Tensor& table,
                                   bool accumulate) {
  if (!any_16bit(out, table)) return cpu::embedding_forward(out, ids, table, accumulate);
  cpu::F32Twins t;
  cpu::embedding_forward(t.out(out), ids, t.in(table), accumulate);
  t.finish();
}
void CpuBackend::embedding_backward(Tensor& dtable, const Tensor& dout, const Tensor& ids) {
  if (!any_16bit(dtable, dout)) return cpu::embedding_backward(dtable, dout, ids);
  cpu::F32Twins t;
  cpu::embedding_backward(t.out(dtable), t.in(dout), ids);
  t.finish();
}

void CpuBackend::layernorm_forward(Tensor& y, Tensor& mean, Tensor& rstd, const Tensor& x,
                                   const Tensor& weight, const Tensor* bias, double eps) {
  if (!any_16bit(y, mean, rstd, x, weight, bias)) {
    return cpu::layernorm_forward(y, mean, rstd, x, weight, bias, eps);
  }
  cpu::F32Twins t;
  cpu::layernorm_forward(t.out(y), t.out(mean), t.out(rstd), t.in(x), t.in(weight), t.in(bias), eps);
  t.finish();
}
void CpuBackend::layernorm_backward(Tensor& dx, Tensor& dweight, Tensor* dbias, const Tensor& dy,
                                    const Tensor& x, const Tensor& weight, const Tensor& mean,
                                    const Tensor& rstd) {
  if (!any_16bit(dx, dweight, dbias, dy, x, weight, mean, rstd)) {
    return cpu::layernorm_backward(dx, dweight, dbias, dy, x, weight, mean, rstd);
  }
  cpu::F32Twins t;
  cpu::layernorm_backward(t.out(dx), t.out(dweight), t.out(dbias), t.in(dy), t.in(x), t.in(weight),
                          t.in(mean), t.in(rstd));
  t.finish();
}
void CpuBackend::rmsnorm_forward(Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& weight,
                                 double eps) {
  if (!any_16bit(y, rstd, x, weight)) return cpu::rmsnorm_forward(y, rstd, x, weight, eps);
  cpu::F32Twins t;
  cpu::rmsnorm_forward(t.out(y), t.out(rstd), t.in(x), t.in(weight), eps);
  t.finish();
}
void CpuBackend::rmsnorm_backward(Tensor& dx, Tensor& dweight, const Tensor& dy, const Tensor& x,
                                  const Tensor& weight, const Tensor& rstd) {
  if (!any_16bit(dx, dweight, dy, x, weight, rstd)) {
    return cpu::rmsnorm_backward(dx, dweight, dy, x, weight, rstd);
  }
  cpu::F32Twins t;
  cpu::rmsnorm_backward(t.out(dx), t.out(dweight), t.in(dy), t.in(x), t.in(weight), t.in(rstd));
  t.finish();
}
void CpuBackend::qk_rmsnorm_forward(Tensor& qkv_out, Tensor& rstd, const Tensor& qkv_in,
                                    const Tensor& q_weight, const Tensor& k_weight,
                                    int64_t heads, int64_t kv_heads, double eps) {
  // Checked before the twins too, so that a bad call names the caller's dtypes; f32 weights with
  // 16-bit inputs are accepted, as the CPU's other norms accept the engine's f32 parameters
  // under 16-bit activations.
  check_qk_rmsnorm_forward("qk_rmsnorm_forward", qkv_out, rstd, qkv_in, q_weight, k_weight,
                           heads, kv_heads, QkWeightDtypes::kInputsOrF32);
  if (!any_16bit(qkv_out, qkv_in)) {
    return cpu::qk_rmsnorm_forward(qkv_out, rstd, qkv_in, q_weight, k_weight, heads, kv_heads,
                                   eps);
  }
  cpu::F32Twins t;
  cpu::qk_rmsnorm_forward(t.out(qkv_out), t.out(rstd), t.in(qkv_in), t.in(q_weight),
                          t.in(k_weight), heads, kv_heads, eps);
  t.finish();
}
void CpuBackend::qk_rmsnorm_backward(Tensor& d_qkv_in, Tensor& dq_weight, Tensor& dk_weight,
                                     const Tensor& d_qkv_out, const Tensor& qkv_in,
                                     const Tensor& q_weight, const Tensor& k_weight,
                                     const Tensor& rstd, int64_t heads, int64_t kv_heads) {
  check_qk_rmsnorm_backward("qk_rmsnorm_backward", d_qkv_in, dq_weight, dk_weight, d_qkv_out,
                            qkv_in, q_weight, k_weight, rstd, heads, kv_heads,
                            QkWeightDtypes::kInputsOrF32);
  if (!any_16bit(d_qkv_in, qkv_in, dq_weight, dk_weight)) {
    return cpu::qk_rmsnorm_backward(d_qkv_in, dq_weight, dk_weight, d_qkv_out, qkv_in, q_weight,
                                    k_weight, rstd, heads, kv_heads);
  }
  cpu::F32Twins t;
  cpu::qk_rmsnorm_backward(t.out(d_qkv_in), t.out(dq_weight), t.out(dk_weight), t.in(d_qkv_out),
                           t.in(qkv_in), t.in(q_weight), t.in(k_weight), t.in(rstd), heads,
                           kv_heads);
  t.finish();
}

void CpuBackend::gelu_forward(Tensor& y, const Tensor& x) {
  if (!any_16bit(y, x)) return cpu::gelu_forward(y, x);
  cpu::F32Twins t;
  cpu::gelu_forward(t.out(y), t.in(x));
  t.finish();
}
void CpuBackend::gelu_backward(Tensor& dx, const Tensor& dy, const Tensor& x) {
  if (!any_16bit(dx, dy, x)) return cpu::gelu_backward(dx, dy, x);
  cpu::F32Twins t;
  cpu::gelu_backward(t.out(dx), t.in(dy), t.in(x));
  t.finish();
}
void CpuBackend::swiglu_forward(Tensor& y, const Tensor& gate_up) {
  if (!any_16bit(y, gate_up)) return cpu::swiglu_forward(y, gate_up);
  cpu::F32Twins t;
  cpu::swiglu_forward(t.out(y), t.in(gate_up));
  t.finish();
}
void CpuBackend::swiglu_backward(Tensor& dgate_up, const Tensor& dy, const Tensor& gate_up) {
  if (!any_16bit(dgate_up, dy, gate_up)) return cpu::swiglu_backward(dgate_up, dy, gate_up);
  cpu::F32Twins t;
  cpu::swiglu_backward(t.out(dgate_up), t.in(dy), t.in(gate_up));
  t.finish();
}

void CpuBackend::rope_apply(Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse) {
  if (!any_16bit(x, cos, sin)) return cpu::rope_apply(x, cos, sin, inverse);
  cpu::F32Twins t;
  cpu::rope_apply(t.out(x), t.in(cos), t.in(sin), inverse);
  t.finish();
}

void CpuBackend::attention_forward(Tensor& out, Tensor& lse, const Tensor& q, const Tensor& k,
                                   const Tensor& v, double scale, int64_t window) {
  if (!any_16bit(out, lse, q, k, v)) return cpu::attention_forward(out, lse, q, k, v, scale, window);
  cpu::F32Twins t;
  cpu::attention_forward(t.out(out), t.out(lse), t.in(q), t.in(k), t.in(v), scale, window);
  t.finish();
}
void CpuBackend::attention_backward(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout,
                                    const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& out, const Tensor& lse, double scale,
                                    int64_t window) {
  if (!any_16bit(dq, dk, dv, dout, q, k, v, out, lse)) {
    return cpu::attention_backward(dq, dk, dv, dout, q, k, v, out, lse, scale, window);
  }
  cpu::F32Twins t;
  cpu::attention_backward(t.out(dq), t.out(dk), t.out(dv), t.in(dout), t.in(q), t.in(k), t.in(v),
                          t.in(out), t.in(lse), scale, window);
  t.finish();
}

void CpuBackend::kv_cache_write(Tensor& cache, const Tensor& x, int64_t position) {
  cpu::kv_cache_write(cache, x, position);  // a copy: any dtype, no f32 twins
}

void CpuBackend::attention_forward_cached(Tensor& out, const Tensor& q, const Tensor& k_cache,
                                          const Tensor& v_cache, int64_t key_count, double scale,
                                          int64_t window) {
  if (!any_16bit(out, q, k_cache, v_cache)) {
    return cpu::attention_forward_cached(out, q, k_cache, v_cache, key_count, scale, window);
  }
  cpu::F32Twins t;
  cpu::attention_forward_cached(t.out(out), t.in(q), t.in(k_cache), t.in(v_cache), key_count,
                                scale, window);
  t.finish();
}

void CpuBackend::moe_route(Tensor& expert_ids, Tensor& weights, const Tensor& logits,
                           bool normalize) {
  if (!any_16bit(logits)) return cpu::moe_route(expert_ids, weights, logits, normalize);
  cpu::F32Twins t;  // the weights are f32 already (stats_dtype)
  cpu::moe_route(expert_ids, weights, t.in(logits), normalize);
}

void CpuBackend::moe_dispatch(Tensor& counts, Tensor& source_rows, Tensor& slot_of,
                              const Tensor& expert_ids, int64_t num_experts) {
  cpu::moe_dispatch(counts, source_rows, slot_of, expert_ids, num_experts);  // integers only
}

void CpuBackend::moe_combine(Tensor& out, const Tensor& rows, const Tensor& slot_of,
                             const Tensor* weights) {
  if (!any_16bit(out, rows)) return cpu::moe_combine(out, rows, slot_of, weights);
  cpu::F32Twins t;
  cpu::moe_combine(t.out(out), t.in(rows), slot_of, weights);
  t.finish();
}

void CpuBackend::moe_combine_backward(Tensor& d_rows, Tensor& d_weights, const Tensor& dout,
                                      const Tensor& rows, const Tensor& slot_of,
                                      const Tensor& weights) {
  if (!any_16bit(d_rows, dout, rows)) {
    return cpu::moe_combine_backward(d_rows, d_weights, dout, rows, slot_of, weights);
  }
  cpu::F32Twins t;
  cpu::moe_combine_backward(t.out(d_rows), d_weights, t.in(dout), t.in(rows), slot_of, weights);
  t.finish();
}

void CpuBackend::moe_route_backward(Tensor& dlogits, const Tensor& d_weights,
                                    const Tensor& expert_ids, const Tensor& weights,
                                    const Tensor& logits, bool normalize) {
  if (!any_16bit(dlogits, logits)) {
    return cpu::moe_route_backward(dlogits, d_weights, expert_ids, weights, logits, normalize);
  }
  cpu::F32Twins t;
  cpu::moe_route_backward(t.out(dlogits), d_weights, expert_ids, weights, t.in(logits),
                          normalize);
  t.finish();
}

void CpuBackend::moe_router_prob_sums(Tensor& sums, const Tensor& logits, bool accumulate) {
  if (!any_16bit(logits)) return cpu::moe_router_prob_sums(sums, logits, accumulate);
  cpu::F32Twins t;
  cpu::moe_router_prob_sums(sums, t.in(logits), accumulate);
}

void CpuBackend::moe_router_balance_backward(Tensor& dlogits, const Tensor& logits,
                                             const Tensor& prob_grad, double scale) {
  if (!any_16bit(dlogits, logits)) {
    return cpu::moe_router_balance_backward(dlogits, logits, prob_grad, scale);
  }
  cpu::F32Twins t;
  cpu::moe_router_balance_backward(t.out(dlogits), t.in(logits), prob_grad, scale);
  t.finish();
}

void CpuBackend::softmax_cross_entropy(Tensor& losses, Tensor* dlogits, const Tensor& logits,
                                       const Tensor& targets, int64_t ignore_index,
                                       double grad_scale) {
  if (!any_16bit(losses, dlogits, logits)) {
    return cpu::softmax_cross_entropy(losses, dlogits, logits, targets, ignore_index, grad_scale);
  }
  cpu::F32Twins t;
  // dlogits may be the logits buffer itself (the fused loss writes over it): one shared twin.
  Tensor* wide_dlogits = t.out(dlogits);
  cpu::softmax_cross_entropy(t.out(losses), wide_dlogits, t.in(logits), targets, ignore_index,
                             grad_scale);
  t.finish();
}

void CpuBackend::embedding_forward_slice(Tensor& out, const Tensor& ids, const Tensor& table,
                                         int64_t first_id, bool accumulate) {
  if (!any_16bit(out, table)) {
    return cpu::embedding_forward_slice(out, ids, table, first_id, accumulate);
  }
  cpu::F32Twins t;
  cpu::embedding_forward_slice(t.out(out), ids, t.in(table), first_id, accumulate);
  t.finish();
}

void CpuBackend::embedding_backward_slice(Tensor& dtable, const Tensor& dout, const Tensor& ids,
                                          int64_t first_id) {
  if (!any_16bit(dtable, dout)) return cpu::embedding_backward_slice(dtable, dout, ids, first_id);
  cpu::F32Twins t;
  cpu::embedding_backward_slice(t.out(dtable), t.in(dout), ids, first_id);
  t.finish();
}

void CpuBackend::cross_entropy_slice_max(Tensor& row_max, const Tensor& logits) {
  if (!any_16bit(logits)) return cpu::cross_entropy_slice_max(row_max, logits);
  cpu::F32Twins t;
  cpu::cross_entropy_slice_max(row_max, t.in(logits));
  t.finish();
}

void CpuBackend::cross_entropy_slice_sums(Tensor& sum_exp, Tensor& target_logit,
                                          const Tensor& logits, const Tensor& row_max,
                                          const Tensor& targets, int64_t first_column) {
  if (!any_16bit(logits)) {
    return cpu::cross_entropy_slice_sums(sum_exp, target_logit, logits, row_max, targets,
                                         first_column);
  }
  cpu::F32Twins t;
  cpu::cross_entropy_slice_sums(sum_exp, target_logit, t.in(logits), row_max, targets,
                                first_column);
  t.finish();
}

void CpuBackend::cross_entropy_slice_finish(Tensor& losses, Tensor* dlogits, const Tensor& logits,
                                            const Tensor& row_max, const Tensor& sum_exp,
                                            const Tensor& target_logit, const Tensor& targets,
                                            int64_t first_column, int64_t ignore_index,
                                            double grad_scale) {
  if (!any_16bit(losses, dlogits, logits)) {
    return cpu::cross_entropy_slice_finish(losses, dlogits, logits, row_max, sum_exp,
                                           target_logit, targets, first_column, ignore_index,
                                           grad_scale);
  }
  cpu::F32Twins t;
  Tensor* wide_dlogits = t.out(dlogits);  // may be the logits buffer: one shared twin
  cpu::cross_entropy_slice_finish(t.out(losses), wide_dlogits, t.in(logits), row_max, sum_exp,
                                  target_logit, targets, first_column, ignore_index, grad_scale);
  t.finish();
}

void CpuBackend::sum_squares(Tensor& out, const Tensor& x, bool accumulate) {
  // 16-bit values widen to f32 exactly (t.in passes other dtypes through), so the twin changes
  // nothing in the sum.
  cpu::F32Twins t;
  const double value = cpu::squared_norm(t.in(x));
  cpu::store_scalar(out, value, accumulate, "sum_squares");
}

void CpuBackend::sum(Tensor& out, const Tensor& x, double alpha, bool accumulate) {
  cpu::F32Twins t;
  const double value = cpu::sum(t.in(x));
  cpu::store_scalar(out, alpha * value, accumulate, "sum");
}

void CpuBackend::optimizer_update(OptimizerKind kind, Tensor& params, const Tensor& grads,
                                  std::span<Tensor> state, std::span<const ParamSegment> segments,
                                  const OptimizerHyper& hyper) {
  cpu::optimizer_update(kind, params, grads, state, segments, hyper);
}

void CpuBackend::onebit_worker_compress(Tensor& bits, Tensor& scales, Tensor& worker_error,
                                        const Tensor& values, const OneBitLayout& layout) {
  cpu::onebit_worker_compress(bits, scales, worker_error, values, layout);
}

void CpuBackend::onebit_server_compress(Tensor& bits_out, Tensor& scales_out,
                                        Tensor& server_error, const Tensor& bits_in,
                                        const Tensor& scales_in, const OneBitLayout& layout) {
  cpu::onebit_server_compress(bits_out, scales_out, server_error, bits_in, scales_in, layout);
}

void CpuBackend::onebit_decompress(Tensor& values, const Tensor& bits, const Tensor& scales,
                                   const OneBitLayout& layout) {
  cpu::onebit_decompress(values, bits, scales, layout);
}

void CpuBackend::quantize_int8_groups(Tensor& packed, const Tensor& values, int64_t group) {
  cpu::quantize_int8_groups(packed, values, group);
}

void CpuBackend::dequantize_int8_groups(Tensor& values, const Tensor& packed, int64_t group,
                                        bool accumulate) {
  cpu::dequantize_int8_groups(values, packed, group, accumulate);
}

}  // namespace zero::backend

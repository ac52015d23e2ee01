#include "backend/profiling/profiling_backend.h"

#include <initializer_list>
#include <utility>

#include "core/check.h"

namespace zero::backend {

namespace {

// What a profiled call is filed under, and the FLOPs it did.
struct CallDescription {
  std::string shape;
  DType dtype;
  double flops = 0.0;
};

// "x[16384,768] w[2304,768]": each named argument's shape (absent optional ones left out).
std::string shapes(std::initializer_list<std::pair<const char*, const Tensor*>> args) {
  std::string out;
  for (const auto& [name, tensor] : args) {
    if (tensor == nullptr) continue;
    if (!out.empty()) out += ' ';
    out += name;
    out += '[';
    for (int64_t d = 0; d < tensor->dim(); ++d) {
      if (d > 0) out += ',';
      out += std::to_string(tensor->size(d));
    }
    out += ']';
  }
  return out;
}

CallDescription elementwise(std::string shape, const Tensor& main) {
  return {std::move(shape), main.dtype(), 0.0};
}

// An optimizer update's shape, naming its gradients' dtype where it is not f32 (held gradients).
std::string update_shape(const Tensor& params, const Tensor& grads) {
  std::string out = shapes({{"params", &params}});
  if (grads.dtype() != DType::kF32) out += std::string(" grads ") + dtype_name(grads.dtype());
  return out;
}

// x[N, in] @ w[out, in]^T: 2 FLOPs per multiply-add.
double linear_flops(const Tensor& x, const Tensor& w) {
  const double in = static_cast<double>(w.size(1));
  const double rows = in > 0 ? static_cast<double>(x.numel()) / in : 0.0;
  return 2.0 * rows * in * static_cast<double>(w.size(0));
}

// Score entries causal attention keeps for T queries over T keys: j <= i, and with a window
// w > 0 also i - w < j.
double kept_scores(int64_t t, int64_t window) {
  const double tt = static_cast<double>(t);
  if (window <= 0 || window >= t) return tt * (tt + 1.0) / 2.0;
  const double w = static_cast<double>(window);
  return w * (w + 1.0) / 2.0 + (tt - w) * w;
}

// QK^T and PV over the kept scores of q[B,T,H,D]: two products of head_dim MACs per score.
double attention_forward_flops(const Tensor& q, int64_t window) {
  const double batch_heads = static_cast<double>(q.size(0)) * static_cast<double>(q.size(2));
  return 2.0 * 2.0 * static_cast<double>(q.size(3)) * batch_heads * kept_scores(q.size(1), window);
}

// The same over a key cache: the last Tq rows of the K x K causal pattern (K = key_count).
double attention_cached_flops(const Tensor& q, int64_t key_count, int64_t window) {
  const double batch_heads = static_cast<double>(q.size(0)) * static_cast<double>(q.size(2));
  const double kept = kept_scores(key_count, window) - kept_scores(key_count - q.size(1), window);
  return 2.0 * 2.0 * static_cast<double>(q.size(3)) * batch_heads * kept;
}

}  // namespace

ProfilingBackend::ProfilingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {
  ZERO_CHECK(inner_ != nullptr, "ProfilingBackend needs a backend to wrap");
  set_current_stream(inner_->current_stream());
}

void ProfilingBackend::start_profile() {
  pending_.clear();
  profiling_ = true;
}

KernelProfile ProfilingBackend::stop_profile(int64_t step, double step_seconds) {
  profiling_ = false;
  KernelProfile profile;
  profile.device = device().to_string();
  profile.step = step;
  profile.step_seconds = step_seconds;
  for (const PendingCall& call : pending_) {
    add_kernel_call(profile.records, call.op, call.shape, call.dtype,
                    inner_->elapsed_seconds(call.start, call.end), call.flops);
  }
  pending_.clear();
  finish_kernel_profile(profile);
  return profile;
}

template <class Describe, class Op>
void ProfilingBackend::timed(const char* op_name, Describe&& describe, Op&& op) {
  if (!profiling_) {
    op();
    return;
  }
  Event start = inner_->record_timing_event(current_stream());
  op();
  Event end = inner_->record_timing_event(current_stream());
  CallDescription d = describe();
  pending_.push_back(PendingCall{op_name, std::move(d.shape), dtype_name(d.dtype), d.flops,
                                 std::move(start), std::move(end)});
}

void ProfilingBackend::fill(Tensor& dst, double value) {
  timed("fill", [&] { return elementwise(shapes({{"dst", &dst}}), dst); },
        [&] { inner_->fill(dst, value); });
}

void ProfilingBackend::copy(Tensor& dst, const Tensor& src) {
  timed("copy", [&] { return elementwise(shapes({{"dst", &dst}}) + " from " + dtype_name(src.dtype()), dst); },
        [&] { inner_->copy(dst, src); });
}

void ProfilingBackend::stochastic_round_to_bf16(Tensor& dst, const Tensor& src, uint64_t seed,
                                                int64_t first_index) {
  timed("stochastic_round_to_bf16", [&] { return elementwise(shapes({{"src", &src}}), src); },
        [&] { inner_->stochastic_round_to_bf16(dst, src, seed, first_index); });
}

void ProfilingBackend::add(Tensor& y, const Tensor& x, double alpha) {
  timed("add", [&] { return elementwise(shapes({{"y", &y}}), y); },
        [&] { inner_->add(y, x, alpha); });
}

void ProfilingBackend::round_in_place(Tensor& values, DType through) {
  timed("round_in_place", [&] { return elementwise(shapes({{"values", &values}}), values); },
        [&] { inner_->round_in_place(values, through); });
}

void ProfilingBackend::copy_sum_squares(Tensor& dst, const Tensor& src, Tensor& squared_sum) {
  timed("copy (+sum_squares)",
        [&] { return elementwise(shapes({{"dst", &dst}}) + " from " + dtype_name(src.dtype()), dst); },
        [&] { inner_->copy_sum_squares(dst, src, squared_sum); });
}

void ProfilingBackend::round_in_place_sum_squares(Tensor& values, DType through,
                                                  Tensor& squared_sum) {
  timed("round_in_place (+sum_squares)",
        [&] { return elementwise(shapes({{"values", &values}}), values); },
        [&] { inner_->round_in_place_sum_squares(values, through, squared_sum); });
}

void ProfilingBackend::add_rounded(Tensor& acc, const Tensor& x, DType through) {
  timed("add_rounded", [&] { return elementwise(shapes({{"acc", &acc}}), acc); },
        [&] { inner_->add_rounded(acc, x, through); });
}

void ProfilingBackend::scale(Tensor& y, double alpha) {
  timed("scale", [&] { return elementwise(shapes({{"y", &y}}), y); },
        [&] { inner_->scale(y, alpha); });
}

void ProfilingBackend::scale_by_inverse_norm(Tensor& x, const Tensor& squared_norm,
                                             double eps) {
  timed("scale_by_inverse_norm", [&] { return elementwise(shapes({{"x", &x}}), x); },
        [&] { inner_->scale_by_inverse_norm(x, squared_norm, eps); });
}

void ProfilingBackend::matmul(Tensor& c, const Tensor& a, bool transpose_a, const Tensor& b,
                              bool transpose_b, double alpha, double beta) {
  timed("matmul",
        [&] {
          const double k = static_cast<double>(transpose_a ? a.size(0) : a.size(1));
          return CallDescription{shapes({{"a", &a}, {"b", &b}}) + (transpose_a ? " aT" : "") +
                                     (transpose_b ? " bT" : ""),
                                 a.dtype(), 2.0 * static_cast<double>(c.numel()) * k};
        },
        [&] { inner_->matmul(c, a, transpose_a, b, transpose_b, alpha, beta); });
}

void ProfilingBackend::linear_forward(Tensor& y, const Tensor& x, const Tensor& w,
                                      const Tensor* bias) {
  timed("linear_forward",
        [&] {
          return CallDescription{shapes({{"x", &x}, {"w", &w}, {"bias", bias}}), x.dtype(),
                                 linear_flops(x, w)};
        },
        [&] { inner_->linear_forward(y, x, w, bias); });
}

void ProfilingBackend::linear_backward(Tensor* dx, Tensor& dw, Tensor* dbias, const Tensor& dy,
                                       const Tensor& x, const Tensor& w) {
  timed(dx != nullptr ? "linear_backward" : "linear_backward (dw only)",
        [&] {
          return CallDescription{shapes({{"x", &x}, {"w", &w}, {"dbias", dbias}}), x.dtype(),
                                 (dx != nullptr ? 2.0 : 1.0) * linear_flops(x, w)};
        },
        [&] { inner_->linear_backward(dx, dw, dbias, dy, x, w); });
}

// The fused ops are timed as one call each: on a device that fuses them there is one kernel.
void ProfilingBackend::linear_gelu_forward(Tensor& act, Tensor& up, const Tensor& x,
                                           const Tensor& w, const Tensor* bias) {
  timed("linear_gelu_forward",
        [&] {
          return CallDescription{shapes({{"x", &x}, {"w", &w}, {"bias", bias}}), x.dtype(),
                                 linear_flops(x, w)};
        },
        [&] { inner_->linear_gelu_forward(act, up, x, w, bias); });
}

Tensor ProfilingBackend::linear_backward_gelu(Tensor& dw, Tensor* dbias, const Tensor& dy,
                                              Tensor act, const Tensor& w, const Tensor& up) {
  Tensor d_up;
  // Described through up (act's shape and dtype): act has moved on by the time describe runs.
  timed("linear_backward_gelu",
        [&] {
          return CallDescription{shapes({{"up", &up}, {"w", &w}, {"dbias", dbias}}), up.dtype(),
                                 2.0 * linear_flops(up, w)};
        },
        [&] { d_up = inner_->linear_backward_gelu(dw, dbias, dy, std::move(act), w, up); });
  return d_up;
}

void ProfilingBackend::embedding_forward(Tensor& out, const Tensor& ids, const Tensor& table,
                                         bool accumulate) {
  timed("embedding_forward",
        [&] { return elementwise(shapes({{"ids", &ids}, {"table", &table}}), table); },
        [&] { inner_->embedding_forward(out, ids, table, accumulate); });
}

void ProfilingBackend::embedding_backward(Tensor& dtable, const Tensor& dout, const Tensor& ids) {
  timed("embedding_backward",
        [&] { return elementwise(shapes({{"dout", &dout}, {"dtable", &dtable}}), dout); },
        [&] { inner_->embedding_backward(dtable, dout, ids); });
}

void ProfilingBackend::layernorm_forward(Tensor& y, Tensor& mean, Tensor& rstd, const Tensor& x,
                                         const Tensor& weight, const Tensor* bias, double eps) {
  timed("layernorm_forward", [&] { return elementwise(shapes({{"x", &x}}), x); },
        [&] { inner_->layernorm_forward(y, mean, rstd, x, weight, bias, eps); });
}

void ProfilingBackend::layernorm_backward(Tensor& dx, Tensor& dweight, Tensor* dbias,
                                          const Tensor& dy, const Tensor& x, const Tensor& weight,
                                          const Tensor& mean, const Tensor& rstd) {
  timed("layernorm_backward", [&] { return elementwise(shapes({{"x", &x}}), x); },
        [&] { inner_->layernorm_backward(dx, dweight, dbias, dy, x, weight, mean, rstd); });
}

void ProfilingBackend::rmsnorm_forward(Tensor& y, Tensor& rstd, const Tensor& x,
                                       const Tensor& weight, double eps) {
  timed("rmsnorm_forward", [&] { return elementwise(shapes({{"x", &x}}), x); },
        [&] { inner_->rmsnorm_forward(y, rstd, x, weight, eps); });
}

void ProfilingBackend::rmsnorm_backward(Tensor& dx, Tensor& dweight, const Tensor& dy,
                                        const Tensor& x, const Tensor& weight,
                                        const Tensor& rstd) {
  timed("rmsnorm_backward", [&] { return elementwise(shapes({{"x", &x}}), x); },
        [&] { inner_->rmsnorm_backward(dx, dweight, dy, x, weight, rstd); });
}

void ProfilingBackend::qk_rmsnorm_forward(Tensor& qkv_out, Tensor& rstd, const Tensor& qkv_in,
                                          const Tensor& q_weight, const Tensor& k_weight,
                                          int64_t heads, int64_t kv_heads, double eps) {
  timed("qk_rmsnorm_forward", [&] { return elementwise(shapes({{"qkv", &qkv_in}}), qkv_in); },
        [&] {
          inner_->qk_rmsnorm_forward(qkv_out, rstd, qkv_in, q_weight, k_weight, heads, kv_heads,
                                     eps);
        });
}

void ProfilingBackend::qk_rmsnorm_backward(Tensor& d_qkv_in, Tensor& dq_weight, Tensor& dk_weight,
                                           const Tensor& d_qkv_out, const Tensor& qkv_in,
                                           const Tensor& q_weight, const Tensor& k_weight,
                                           const Tensor& rstd, int64_t heads, int64_t kv_heads) {
  timed("qk_rmsnorm_backward", [&] { return elementwise(shapes({{"qkv", &qkv_in}}), qkv_in); },
        [&] {
          inner_->qk_rmsnorm_backward(d_qkv_in, dq_weight, dk_weight, d_qkv_out, qkv_in,
                                      q_weight, k_weight, rstd, heads, kv_heads);
        });
}

// The fused ops are timed as one call (the inner backend may still run them as several).
void ProfilingBackend::add_layernorm_forward(Tensor& sum, Tensor& y, Tensor& mean, Tensor& rstd,
                                             const Tensor& a, const Tensor& b,
                                             const Tensor& weight, const Tensor* bias,
                                             double eps) {
  timed("add_layernorm_forward", [&] { return elementwise(shapes({{"a", &a}}), a); },
        [&] { inner_->add_layernorm_forward(sum, y, mean, rstd, a, b, weight, bias, eps); });
}

void ProfilingBackend::add_rmsnorm_forward(Tensor& sum, Tensor& y, Tensor& rstd, const Tensor& a,
                                           const Tensor& b, const Tensor& weight, double eps) {
  timed("add_rmsnorm_forward", [&] { return elementwise(shapes({{"a", &a}}), a); },
        [&] { inner_->add_rmsnorm_forward(sum, y, rstd, a, b, weight, eps); });
}

void ProfilingBackend::layernorm_backward_add(Tensor& dx, Tensor& dweight, Tensor* dbias,
                                              const Tensor& dy, const Tensor& x,
                                              const Tensor& weight, const Tensor& mean,
                                              const Tensor& rstd, const Tensor& residual) {
  timed("layernorm_backward_add", [&] { return elementwise(shapes({{"x", &x}}), x); }, [&] {
    inner_->layernorm_backward_add(dx, dweight, dbias, dy, x, weight, mean, rstd, residual);
  });
}

void ProfilingBackend::rmsnorm_backward_add(Tensor& dx, Tensor& dweight, const Tensor& dy,
                                            const Tensor& x, const Tensor& weight,
                                            const Tensor& rstd, const Tensor& residual) {
  timed("rmsnorm_backward_add", [&] { return elementwise(shapes({{"x", &x}}), x); },
        [&] { inner_->rmsnorm_backward_add(dx, dweight, dy, x, weight, rstd, residual); });
}

void ProfilingBackend::gelu_forward(Tensor& y, const Tensor& x) {
  timed("gelu_forward", [&] { return elementwise(shapes({{"x", &x}}), x); },
        [&] { inner_->gelu_forward(y, x); });
}

void ProfilingBackend::gelu_backward(Tensor& dx, const Tensor& dy, const Tensor& x) {
  timed("gelu_backward", [&] { return elementwise(shapes({{"x", &x}}), x); },
        [&] { inner_->gelu_backward(dx, dy, x); });
}

void ProfilingBackend::swiglu_forward(Tensor& y, const Tensor& gate_up) {
  timed("swiglu_forward", [&] { return elementwise(shapes({{"gate_up", &gate_up}}), gate_up); },
        [&] { inner_->swiglu_forward(y, gate_up); });
}

void ProfilingBackend::swiglu_backward(Tensor& dgate_up, const Tensor& dy, const Tensor& gate_up) {
  timed("swiglu_backward", [&] { return elementwise(shapes({{"gate_up", &gate_up}}), gate_up); },
        [&] { inner_->swiglu_backward(dgate_up, dy, gate_up); });
}

void ProfilingBackend::rope_apply(Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse) {
  timed(inverse ? "rope_apply (inverse)" : "rope_apply",
        [&] { return elementwise(shapes({{"x", &x}}), x); },
        [&] { inner_->rope_apply(x, cos, sin, inverse); });
}

void ProfilingBackend::attention_forward(Tensor& out, Tensor& lse, const Tensor& q,
                                         const Tensor& k, const Tensor& v, double scale,
                                         int64_t window) {
  timed("attention_forward",
        [&] {
          return CallDescription{shapes({{"q", &q}, {"k", &k}}) +
                                     (window > 0 ? " window " + std::to_string(window) : ""),
                                 q.dtype(), attention_forward_flops(q, window)};
        },
        [&] { inner_->attention_forward(out, lse, q, k, v, scale, window); });
}

void ProfilingBackend::attention_backward(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout,
                                          const Tensor& q, const Tensor& k, const Tensor& v,
                                          const Tensor& out, const Tensor& lse, double scale,
                                          int64_t window) {
  timed("attention_backward",
        [&] {
          return CallDescription{shapes({{"q", &q}, {"k", &k}}) +
                                     (window > 0 ? " window " + std::to_string(window) : ""),
                                 q.dtype(), 2.0 * attention_forward_flops(q, window)};
        },
        [&] { inner_->attention_backward(dq, dk, dv, dout, q, k, v, out, lse, scale, window); });
}

void ProfilingBackend::kv_cache_write(Tensor& cache, const Tensor& x, int64_t position) {
  timed("kv_cache_write", [&] { return elementwise(shapes({{"x", &x}}), x); },
        [&] { inner_->kv_cache_write(cache, x, position); });
}

void ProfilingBackend::attention_forward_cached(Tensor& out, const Tensor& q,
                                                const Tensor& k_cache, const Tensor& v_cache,
                                                int64_t key_count, double scale,
                                                int64_t window) {
  timed("attention_forward_cached",
        [&] {
          return CallDescription{shapes({{"q", &q}}) + " keys " + std::to_string(key_count) +
                                     (window > 0 ? " window " + std::to_string(window) : ""),
                                 q.dtype(), attention_cached_flops(q, key_count, window)};
        },
        [&] {
          inner_->attention_forward_cached(out, q, k_cache, v_cache, key_count, scale, window);
        });
}

void ProfilingBackend::moe_route(Tensor& expert_ids, Tensor& weights, const Tensor& logits,
                                 bool normalize) {
  timed("moe_route", [&] { return elementwise(shapes({{"logits", &logits}}), logits); },
        [&] { inner_->moe_route(expert_ids, weights, logits, normalize); });
}

void ProfilingBackend::moe_dispatch(Tensor& counts, Tensor& source_rows, Tensor& slot_of,
                                    const Tensor& expert_ids, int64_t num_experts) {
  timed("moe_dispatch",
        [&] { return elementwise(shapes({{"expert_ids", &expert_ids}}), expert_ids); },
        [&] { inner_->moe_dispatch(counts, source_rows, slot_of, expert_ids, num_experts); });
}

void ProfilingBackend::moe_combine(Tensor& out, const Tensor& rows, const Tensor& slot_of,
                                   const Tensor* weights) {
  timed("moe_combine", [&] { return elementwise(shapes({{"rows", &rows}}), rows); },
        [&] { inner_->moe_combine(out, rows, slot_of, weights); });
}

void ProfilingBackend::moe_combine_backward(Tensor& d_rows, Tensor& d_weights, const Tensor& dout,
                                            const Tensor& rows, const Tensor& slot_of,
                                            const Tensor& weights) {
  timed("moe_combine_backward", [&] { return elementwise(shapes({{"rows", &rows}}), rows); },
        [&] { inner_->moe_combine_backward(d_rows, d_weights, dout, rows, slot_of, weights); });
}

void ProfilingBackend::moe_route_backward(Tensor& dlogits, const Tensor& d_weights,
                                          const Tensor& expert_ids, const Tensor& weights,
                                          const Tensor& logits, bool normalize) {
  timed("moe_route_backward", [&] { return elementwise(shapes({{"logits", &logits}}), logits); },
        [&] {
          inner_->moe_route_backward(dlogits, d_weights, expert_ids, weights, logits, normalize);
        });
}

void ProfilingBackend::moe_router_prob_sums(Tensor& sums, const Tensor& logits,
                                            bool accumulate) {
  timed("moe_router_prob_sums",
        [&] { return elementwise(shapes({{"logits", &logits}}), logits); },
        [&] { inner_->moe_router_prob_sums(sums, logits, accumulate); });
}

void ProfilingBackend::moe_router_balance_backward(Tensor& dlogits, const Tensor& logits,
                                                   const Tensor& prob_grad, double scale) {
  timed("moe_router_balance_backward",
        [&] { return elementwise(shapes({{"logits", &logits}}), logits); },
        [&] { inner_->moe_router_balance_backward(dlogits, logits, prob_grad, scale); });
}

void ProfilingBackend::softmax_cross_entropy(Tensor& losses, Tensor* dlogits, const Tensor& logits,
                                             const Tensor& targets, int64_t ignore_index,
                                             double grad_scale) {
  timed(dlogits != nullptr ? "softmax_cross_entropy (+dlogits)" : "softmax_cross_entropy",
        [&] { return elementwise(shapes({{"logits", &logits}}), logits); },
        [&] {
          inner_->softmax_cross_entropy(losses, dlogits, logits, targets, ignore_index, grad_scale);
        });
}

void ProfilingBackend::embedding_forward_slice(Tensor& out, const Tensor& ids, const Tensor& table,
                                               int64_t first_id, bool accumulate) {
  timed("embedding_forward_slice",
        [&] { return elementwise(shapes({{"ids", &ids}, {"table", &table}}), table); },
        [&] { inner_->embedding_forward_slice(out, ids, table, first_id, accumulate); });
}

void ProfilingBackend::embedding_backward_slice(Tensor& dtable, const Tensor& dout,
                                                const Tensor& ids, int64_t first_id) {
  timed("embedding_backward_slice",
        [&] { return elementwise(shapes({{"dout", &dout}, {"dtable", &dtable}}), dout); },
        [&] { inner_->embedding_backward_slice(dtable, dout, ids, first_id); });
}

void ProfilingBackend::cross_entropy_slice_max(Tensor& row_max, const Tensor& logits) {
  timed("cross_entropy_slice_max", [&] { return elementwise(shapes({{"logits", &logits}}), logits); },
        [&] { inner_->cross_entropy_slice_max(row_max, logits); });
}

void ProfilingBackend::cross_entropy_slice_sums(Tensor& sum_exp, Tensor& target_logit,
                                                const Tensor& logits, const Tensor& row_max,
                                                const Tensor& targets, int64_t first_column) {
  timed("cross_entropy_slice_sums",
        [&] { return elementwise(shapes({{"logits", &logits}}), logits); },
        [&] {
          inner_->cross_entropy_slice_sums(sum_exp, target_logit, logits, row_max, targets,
                                           first_column);
        });
}

void ProfilingBackend::cross_entropy_slice_finish(Tensor& losses, Tensor* dlogits,
                                                  const Tensor& logits, const Tensor& row_max,
                                                  const Tensor& sum_exp, const Tensor& target_logit,
                                                  const Tensor& targets, int64_t first_column,
                                                  int64_t ignore_index, double grad_scale) {
  timed("cross_entropy_slice_finish",
        [&] { return elementwise(shapes({{"logits", &logits}}), logits); },
        [&] {
          inner_->cross_entropy_slice_finish(losses, dlogits, logits, row_max, sum_exp,
                                             target_logit, targets, first_column, ignore_index,
                                             grad_scale);
        });
}

void ProfilingBackend::sum_squares(Tensor& out, const Tensor& x, bool accumulate) {
  timed("sum_squares", [&] { return elementwise(shapes({{"x", &x}}), x); },
        [&] { inner_->sum_squares(out, x, accumulate); });
}

void ProfilingBackend::sum(Tensor& out, const Tensor& x, double alpha, bool accumulate) {
  timed("sum", [&] { return elementwise(shapes({{"x", &x}}), x); },
        [&] { inner_->sum(out, x, alpha, accumulate); });
}

void ProfilingBackend::optimizer_update(OptimizerKind kind, Tensor& params, const Tensor& grads,
                                        std::span<Tensor> state,
                                        std::span<const ParamSegment> segments,
                                        const OptimizerHyper& hyper) {
  timed("optimizer_update", [&] { return elementwise(update_shape(params, grads), params); },
        [&] { inner_->optimizer_update(kind, params, grads, state, segments, hyper); });
}

void ProfilingBackend::optimizer_update_with_copy(OptimizerKind kind, Tensor& params,
                                                  const Tensor& grads, std::span<Tensor> state,
                                                  std::span<const ParamSegment> segments,
                                                  const OptimizerHyper& hyper, Tensor& param_copy) {
  timed("optimizer_update (+16-bit copy)",
        [&] { return elementwise(update_shape(params, grads), params); },
        [&] { inner_->optimizer_update_with_copy(kind, params, grads, state, segments, hyper, param_copy); });
}

void ProfilingBackend::onebit_worker_compress(Tensor& bits, Tensor& scales, Tensor& worker_error,
                                              const Tensor& values, const OneBitLayout& layout) {
  timed("onebit_worker_compress",
        [&] { return elementwise(shapes({{"worker_error", &worker_error}}), worker_error); },
        [&] { inner_->onebit_worker_compress(bits, scales, worker_error, values, layout); });
}

void ProfilingBackend::onebit_server_compress(Tensor& bits_out, Tensor& scales_out,
                                              Tensor& server_error, const Tensor& bits_in,
                                              const Tensor& scales_in, const OneBitLayout& layout) {
  timed("onebit_server_compress",
        [&] { return elementwise(shapes({{"server_error", &server_error}}), server_error); },
        [&] {
          inner_->onebit_server_compress(bits_out, scales_out, server_error, bits_in, scales_in,
                                         layout);
        });
}

void ProfilingBackend::onebit_decompress(Tensor& values, const Tensor& bits, const Tensor& scales,
                                         const OneBitLayout& layout) {
  timed("onebit_decompress", [&] { return elementwise(shapes({{"values", &values}}), values); },
        [&] { inner_->onebit_decompress(values, bits, scales, layout); });
}

void ProfilingBackend::quantize_int8_groups(Tensor& packed, const Tensor& values, int64_t group) {
  timed("quantize_int8_groups",
        [&] { return elementwise(shapes({{"values", &values}}), values); },
        [&] { inner_->quantize_int8_groups(packed, values, group); });
}

void ProfilingBackend::dequantize_int8_groups(Tensor& values, const Tensor& packed, int64_t group,
                                              bool accumulate) {
  timed("dequantize_int8_groups",
        [&] { return elementwise(shapes({{"values", &values}}), values); },
        [&] { inner_->dequantize_int8_groups(values, packed, group, accumulate); });
}

void ProfilingBackend::do_copy_from_host(Tensor& dst, const void* src) {
  timed("copy_from_host", [&] { return elementwise(shapes({{"dst", &dst}}), dst); },
        [&] { inner_->copy_from_host(dst, src); });
}

void ProfilingBackend::do_copy_to_host(void* dst, const Tensor& src) {
  timed("copy_to_host", [&] { return elementwise(shapes({{"src", &src}}), src); },
        [&] { inner_->copy_to_host(dst, src); });
}

void ProfilingBackend::do_copy_to_pinned_async(Tensor& pinned_dst, const Tensor& src) {
  timed("copy_to_pinned_async", [&] { return elementwise(shapes({{"src", &src}}), src); },
        [&] { inner_->copy_to_pinned_async(pinned_dst, src); });
}

void ProfilingBackend::do_copy_from_pinned_async(Tensor& dst, const Tensor& pinned_src) {
  timed("copy_from_pinned_async", [&] { return elementwise(shapes({{"dst", &dst}}), dst); },
        [&] { inner_->copy_from_pinned_async(dst, pinned_src); });
}

}  // namespace zero::backend

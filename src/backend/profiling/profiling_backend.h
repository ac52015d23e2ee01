// ProfilingBackend: a Backend that forwards every call to the backend it owns and, while a
// profile is open, brackets each op with timing events on the current stream, so a training step
// yields its per-kernel time table (kernel_profile.h) on any backend: device-timed on CUDA
// (cudaEventElapsedTime), host-timed on the synchronous CPU and simulated-device backends.
//
// Outside a profile it adds one flag test per call and changes nothing: same kernels, same
// order, same results, same transfer counts on the inner backend. Inside one the results are
// still bit-identical (only events are added), but every op records two events and the profile
// is read back with one host wait at stop_profile(), so a profiled step runs a little slower.
//
// Streams: the current stream is forwarded to the inner backend (StreamGuard on either works);
// an op is timed on the stream it is enqueued on. Ops on other streams overlap: the table sums
// each op's own span, so the kernel total may exceed the step's wall time when streams overlap.
//
// Ownership: owns the inner backend. Thread safety: one host thread, as every Backend.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/profiling/kernel_profile.h"

namespace zero::backend {

class ProfilingBackend final : public Backend {
 public:
  explicit ProfilingBackend(std::unique_ptr<Backend> inner);

  Backend& inner() { return *inner_; }

  // Starts recording every op (a profile already open is discarded).
  void start_profile();
  bool profiling() const { return profiling_; }
  // Ends the open profile: waits for the recorded ops, reads their times and returns the table
  // for `step`, whose wall time the caller measured (`step_seconds`, host clock).
  KernelProfile stop_profile(int64_t step, double step_seconds);

  Device device() const override { return inner_->device(); }
  Allocator& allocator() override { return inner_->allocator(); }
  Allocator& pinned_host_allocator() override { return inner_->pinned_host_allocator(); }
  std::optional<int64_t> device_memory_capacity_bytes() const override {
    return inner_->device_memory_capacity_bytes();
  }
  // Forwarded: a profiled step allocates what an unprofiled one does.
  int64_t preferred_row_elements(int64_t columns, DType dtype) const override {
    return inner_->preferred_row_elements(columns, dtype);
  }

  Event record_event(StreamKind stream) override { return inner_->record_event(stream); }
  void wait_event(StreamKind waiter, const Event& event) override {
    inner_->wait_event(waiter, event);
  }
  void synchronize_event(const Event& event) override { inner_->synchronize_event(event); }
  Event record_timing_event(StreamKind stream) override {
    return inner_->record_timing_event(stream);
  }
  double elapsed_seconds(const Event& start, const Event& end) override {
    return inner_->elapsed_seconds(start, end);
  }

  void fill(Tensor& dst, double value) override;
  void copy(Tensor& dst, const Tensor& src) override;
  void stochastic_round_to_bf16(Tensor& dst, const Tensor& src, uint64_t seed,
                                int64_t first_index) override;
  void add(Tensor& y, const Tensor& x, double alpha) override;
  void add_rounded(Tensor& acc, const Tensor& x, DType through) override;
  void round_in_place(Tensor& values, DType through) override;
  void round_in_place_sum_squares(Tensor& values, DType through, Tensor& squared_sum) override;
  void copy_sum_squares(Tensor& dst, const Tensor& src, Tensor& squared_sum) override;
  void scale(Tensor& y, double alpha) override;
  void scale_by_inverse_norm(Tensor& x, const Tensor& squared_norm, double eps) override;
  void matmul(Tensor& c, const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b,
              double alpha, double beta) override;
  void linear_forward(Tensor& y, const Tensor& x, const Tensor& w, const Tensor* bias) override;
  void linear_backward(Tensor* dx, Tensor& dw, Tensor* dbias, const Tensor& dy, const Tensor& x,
                       const Tensor& w) override;
  void linear_gelu_forward(Tensor& act, Tensor& up, const Tensor& x, const Tensor& w,
                           const Tensor* bias) override;
  Tensor linear_backward_gelu(Tensor& dw, Tensor* dbias, const Tensor& dy, Tensor act,
                              const Tensor& w, const Tensor& up) override;
  void embedding_forward(Tensor& out, const Tensor& ids, const Tensor& table,
                         bool accumulate) override;
  void embedding_backward(Tensor& dtable, const Tensor& dout, const Tensor& ids) override;
  void layernorm_forward(Tensor& y, Tensor& mean, Tensor& rstd, const Tensor& x,
                         const Tensor& weight, const Tensor* bias, double eps) override;
  void layernorm_backward(Tensor& dx, Tensor& dweight, Tensor* dbias, const Tensor& dy,
                          const Tensor& x, const Tensor& weight, const Tensor& mean,
                          const Tensor& rstd) override;
  void rmsnorm_forward(Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& weight,
                       double eps) override;
  void rmsnorm_backward(Tensor& dx, Tensor& dweight, const Tensor& dy, const Tensor& x,
                        const Tensor& weight, const Tensor& rstd) override;
  void qk_rmsnorm_forward(Tensor& qkv_out, Tensor& rstd, const Tensor& qkv_in,
                          const Tensor& q_weight, const Tensor& k_weight, int64_t heads,
                          int64_t kv_heads, double eps) override;
  void qk_rmsnorm_backward(Tensor& d_qkv_in, Tensor& dq_weight, Tensor& dk_weight,
                           const Tensor& d_qkv_out, const Tensor& qkv_in, const Tensor& q_weight,
                           const Tensor& k_weight, const Tensor& rstd, int64_t heads,
                           int64_t kv_heads) override;
  void add_layernorm_forward(Tensor& sum, Tensor& y, Tensor& mean, Tensor& rstd, const Tensor& a,
                             const Tensor& b, const Tensor& weight, const Tensor* bias,
                             double eps) override;
  void add_rmsnorm_forward(Tensor& sum, Tensor& y, Tensor& rstd, const Tensor& a, const Tensor& b,
                           const Tensor& weight, double eps) override;
  void layernorm_backward_add(Tensor& dx, Tensor& dweight, Tensor* dbias, const Tensor& dy,
                              const Tensor& x, const Tensor& weight, const Tensor& mean,
                              const Tensor& rstd, const Tensor& residual) override;
  void rmsnorm_backward_add(Tensor& dx, Tensor& dweight, const Tensor& dy, const Tensor& x,
                            const Tensor& weight, const Tensor& rstd,
                            const Tensor& residual) override;
  void gelu_forward(Tensor& y, const Tensor& x) override;
  void gelu_backward(Tensor& dx, const Tensor& dy, const Tensor& x) override;
  void swiglu_forward(Tensor& y, const Tensor& gate_up) override;
  void swiglu_backward(Tensor& dgate_up, const Tensor& dy, const Tensor& gate_up) override;
  void rope_apply(Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse) override;
  void attention_forward(Tensor& out, Tensor& lse, const Tensor& q, const Tensor& k,
                         const Tensor& v, double scale, int64_t window) override;
  void attention_backward(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout,
                          const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                          const Tensor& lse, double scale, int64_t window) override;
  void kv_cache_write(Tensor& cache, const Tensor& x, int64_t position) override;
  void attention_forward_cached(Tensor& out, const Tensor& q, const Tensor& k_cache,
                                const Tensor& v_cache, int64_t key_count, double scale,
                                int64_t window) override;
  void moe_route(Tensor& expert_ids, Tensor& weights, const Tensor& logits,
                 bool normalize) override;
  void moe_dispatch(Tensor& counts, Tensor& source_rows, Tensor& slot_of,
                    const Tensor& expert_ids, int64_t num_experts) override;
  void moe_combine(Tensor& out, const Tensor& rows, const Tensor& slot_of,
                   const Tensor* weights) override;
  void moe_combine_backward(Tensor& d_rows, Tensor& d_weights, const Tensor& dout,
                            const Tensor& rows, const Tensor& slot_of,
                            const Tensor& weights) override;
  void moe_route_backward(Tensor& dlogits, const Tensor& d_weights, const Tensor& expert_ids,
                          const Tensor& weights, const Tensor& logits, bool normalize) override;
  void moe_router_prob_sums(Tensor& sums, const Tensor& logits, bool accumulate) override;
  void moe_router_balance_backward(Tensor& dlogits, const Tensor& logits,
                                   const Tensor& prob_grad, double scale) override;
  void softmax_cross_entropy(Tensor& losses, Tensor* dlogits, const Tensor& logits,
                             const Tensor& targets, int64_t ignore_index,
                             double grad_scale) override;
  void embedding_forward_slice(Tensor& out, const Tensor& ids, const Tensor& table,
                               int64_t first_id, bool accumulate) override;
  void embedding_backward_slice(Tensor& dtable, const Tensor& dout, const Tensor& ids,
                                int64_t first_id) override;
  void cross_entropy_slice_max(Tensor& row_max, const Tensor& logits) override;
  void cross_entropy_slice_sums(Tensor& sum_exp, Tensor& target_logit, const Tensor& logits,
                                const Tensor& row_max, const Tensor& targets,
                                int64_t first_column) override;
  void cross_entropy_slice_finish(Tensor& losses, Tensor* dlogits, const Tensor& logits,
                                  const Tensor& row_max, const Tensor& sum_exp,
                                  const Tensor& target_logit, const Tensor& targets,
                                  int64_t first_column, int64_t ignore_index,
                                  double grad_scale) override;
  void sum_squares(Tensor& out, const Tensor& x, bool accumulate) override;
  void sum(Tensor& out, const Tensor& x, double alpha, bool accumulate) override;
  void optimizer_update(OptimizerKind kind, Tensor& params, const Tensor& grads,
                        std::span<Tensor> state, std::span<const ParamSegment> segments,
                        const OptimizerHyper& hyper) override;
  void optimizer_update_with_copy(OptimizerKind kind, Tensor& params, const Tensor& grads,
                                  std::span<Tensor> state, std::span<const ParamSegment> segments,
                                  const OptimizerHyper& hyper, Tensor& param_copy) override;
  void onebit_worker_compress(Tensor& bits, Tensor& scales, Tensor& worker_error,
                              const Tensor& values, const OneBitLayout& layout) override;
  void onebit_server_compress(Tensor& bits_out, Tensor& scales_out, Tensor& server_error,
                              const Tensor& bits_in, const Tensor& scales_in,
                              const OneBitLayout& layout) override;
  void onebit_decompress(Tensor& values, const Tensor& bits, const Tensor& scales,
                         const OneBitLayout& layout) override;
  void quantize_int8_groups(Tensor& packed, const Tensor& values, int64_t group) override;
  void dequantize_int8_groups(Tensor& values, const Tensor& packed, int64_t group,
                              bool accumulate) override;

 protected:
  void do_copy_from_host(Tensor& dst, const void* src) override;
  void do_copy_to_host(void* dst, const Tensor& src) override;
  void do_copy_to_pinned_async(Tensor& pinned_dst, const Tensor& src) override;
  void do_copy_from_pinned_async(Tensor& dst, const Tensor& pinned_src) override;
  void do_synchronize() override { inner_->synchronize(); }
  void on_stream_change(StreamKind stream) override { inner_->set_current_stream(stream); }

 private:
  // One op of the open profile, resolved at stop_profile().
  struct PendingCall {
    const char* op;
    std::string shape;
    std::string dtype;
    double flops;
    Event start;
    Event end;
  };
  // Runs `op` and, while profiling, times it; `describe` (the shape text, dtype and FLOPs) is
  // called only then, so an unprofiled call formats nothing.
  template <class Describe, class Op>
  void timed(const char* op_name, Describe&& describe, Op&& op);

  std::unique_ptr<Backend> inner_;
  bool profiling_ = false;
  std::vector<PendingCall> pending_;
};

}  // namespace zero::backend

// CpuBackend: the reference implementation of Backend and the oracle every other backend is
// tested against. OpenMP for threads, OpenBLAS for matrix products. Kernels are templated on
// float/double; each op family lives in its own cpu_<op>.cpp file.
#pragma once
#include <array>
#include <cstdint>

#include "backend/backend.h"

namespace zero::backend {

class CpuBackend final : public Backend {
 public:
  // `memory` is where its tensors are allocated and accounted: cpu_allocator(), or (for the host
  // optimizer of ZeRO-Offload) the pinned or pageable host memory the offloaded state lives in,
  // so the accounting keeps it apart from device memory. Must outlive the backend.
  explicit CpuBackend(Allocator& memory = cpu_allocator()) : memory_(memory) {}

  Device device() const override { return Device::cpu(); }
  Allocator& allocator() override { return memory_; }
  Allocator& pinned_host_allocator() override;

  Event record_event(StreamKind stream) override;
  void wait_event(StreamKind waiter, const Event& event) override;
  void synchronize_event(const Event& event) override;

  void fill(Tensor& dst, double value) override;
  void copy(Tensor& dst, const Tensor& src) override;
  void stochastic_round_to_bf16(Tensor& dst, const Tensor& src, uint64_t seed,
                                int64_t first_index) override;
  void add(Tensor& y, const Tensor& x, double alpha) override;
  void scale(Tensor& y, double alpha) override;
  void scale_by_inverse_norm(Tensor& x, const Tensor& squared_norm, double eps) override;

  void matmul(Tensor& c, const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b,
              double alpha, double beta) override;
  void linear_forward(Tensor& y, const Tensor& x, const Tensor& w, const Tensor* bias) override;
  void linear_backward(Tensor* dx, Tensor& dw, Tensor* dbias, const Tensor& dy, const Tensor& x,
                       const Tensor& w) override;

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
  void do_synchronize() override {}

 private:
  Allocator& memory_;
  std::array<uint64_t, kNumStreamKinds> event_sequence_{};
};

}  // namespace zero::backend

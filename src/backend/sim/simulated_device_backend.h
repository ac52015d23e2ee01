// SimulatedDeviceBackend: a device backend without a device. Its tensors live in host memory
// but are labelled Device::simulated(0), so host code cannot read or write them
// (Tensor::data<T>() refuses any non-CPU tensor) and every op must come through this backend,
// which runs the CPU backend's kernels on host aliases of its arguments. Training on it proves,
// on a machine without a GPU, what a CUDA backend needs from the layers above: no host access
// to device elements, every host <-> device transfer explicit and counted, every device tensor
// from the caching allocator (no raw allocation in a steady-state step), events recorded and
// waited in a consistent order. Results are bit-identical to CpuBackend's.
//
// It also refuses what a GPU backend would refuse: a host tensor passed to a kernel, a device
// tensor passed to copy_from_host's source side, waiting on an event never recorded.
// Thread safety: one host thread drives it (as every Backend).
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "core/caching_allocator.h"
#include "core/raw_memory.h"

namespace zero::backend {

// Aligned host memory posing as device memory of Device::simulated(index).
class SimulatedDeviceMemory final : public RawMemory {
 public:
  explicit SimulatedDeviceMemory(int index = 0) : index_(index) {}
  Device device() const override { return Device::simulated(index_); }
  void* allocate(size_t bytes) override;
  void free(void* ptr, size_t bytes) override;

 private:
  int index_;
};

class SimulatedDeviceBackend final : public Backend {
 public:
  SimulatedDeviceBackend();
  ~SimulatedDeviceBackend() override;

  Device device() const override { return memory_.device(); }
  Allocator& allocator() override { return *allocator_; }
  CachingAllocator& caching_allocator() { return *allocator_; }
  Allocator& pinned_host_allocator() override { return pinned_; }

  Event record_event(StreamKind stream) override;
  void wait_event(StreamKind waiter, const Event& event) override;
  void synchronize_event(const Event& event) override;
  // Events each stream waited on (tests check the transfer -> compute ordering is expressed).
  int64_t waits_on(StreamKind waiter) const { return waits_[static_cast<size_t>(waiter)]; }

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
  // A CPU tensor over the same bytes, for the CPU kernels. Throws ZERO_CHECK's error when `t`
  // is not on this device (a host tensor handed to a device kernel).
  Tensor host_alias(const Tensor& t, const char* op) const;
  Tensor* host_alias(const Tensor* t, Tensor& slot, const char* op) const;
  std::shared_ptr<Storage> storage_alias(const std::shared_ptr<Storage>& storage) const;

  SimulatedDeviceMemory memory_;
  std::unique_ptr<CachingAllocator> allocator_;
  CpuAllocator pinned_;
  CpuBackend cpu_;
  std::array<uint64_t, kNumStreamKinds> recorded_{};
  std::array<int64_t, kNumStreamKinds> waits_{};
  mutable std::unordered_map<const Storage*, std::weak_ptr<Storage>> aliases_;
};

}  // namespace zero::backend

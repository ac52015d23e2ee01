// CudaBackend: the Backend interface on one NVIDIA GPU. Device memory comes from a
// CachingAllocator over cudaMalloc (no cudaMalloc once a training step repeats), page-locked
// host memory from a cache over cudaHostAlloc; work runs on three CUDA streams (compute, comm, transfer) with
// cudaEvent_t events; matrix products go through cuBLASLt and every other op through the
// kernels of this folder (one op family per .cu file; cuda_kernels.h).
//
// Dtypes: f32, bf16 and f16 storage, computed in f32 and rounded once on store (the CPU
// backend's f32-twin numerics); statistics are f32. f64 tensors - the CPU oracle's dtype - are
// refused with UnsupportedError naming the op, except by fill, copy, add, scale and the f64
// scalars of sum/sum_squares (the engine keeps its per-step loss and norm in f64 on the device).
//
// Ordering: every op is enqueued on the current stream and returns without waiting.
// copy_to_host waits for the current stream; copy_from_host returns once the host buffer has been
// read (it waits for its copy). Streams run concurrently, ordered only by events: switching the
// current stream adds no wait. Device memory is kept per stream (CachingAllocator's set_streams):
// a block is reused by the stream it was allocated on, after an event of the stream that freed
// it when that was another one; so a tensor used on several streams must have its uses ordered
// before its free by events, which every cross-stream read needs anyway (backend.h).
//
// Bad token ids and targets are found on the device: the kernel skips them and records the
// first; the next copy_to_host (read_scalar: once per training step) or synchronize throws
// zero::Error naming the id, the vocabulary size and the row.
//
// The backend makes its device current (cudaSetDevice) when constructed; one host thread drives
// it. Tensors it made must be destroyed before it.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <memory>

#include "backend/backend.h"
#include "backend/cuda/cuda_gemm_split.h"
#include "backend/cuda/cuda_host_wait.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_matmul.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/cuda_pinned_cache.h"
#include "core/caching_allocator.h"

namespace zero::backend {

namespace cuda_internal {
class Checks;  // cuda_arg_checks.h
}

// The number of CUDA devices visible to this process (0 without a driver or device; never throws).
int cuda_device_count();
// A hash of device `index`'s UUID (cudaDeviceProp::uuid): equal in two processes exactly when they
// see the same physical GPU, however CUDA_VISIBLE_DEVICES numbered it. 0 when CUDA cannot answer.
uint64_t cuda_device_uuid_hash(int index);

class CudaBackend final : public Backend {
 public:
  // Throws zero::Error naming what is missing when there is no such device.
  explicit CudaBackend(int device_index = 0);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Device device() const override { return Device::cuda(index_); }
  Allocator& allocator() override { return *allocator_; }
  CachingAllocator& caching_allocator() { return *allocator_; }
  // Page-locked host memory, cached (cuda_pinned_cache.h).
  Allocator& pinned_host_allocator() override { return *pinned_; }
  cuda::CudaPinnedCache& pinned_cache() { return *pinned_; }
  // Matrix products computed as a tile-aligned main part and a tail (cuda_gemm_split.h), since
  // construction: how tests see that a product took that path.
  uint64_t split_products() const { return split_products_; }
  // Product plans whose candidate algorithms were timed (ZERO_CUDA_GEMM_AUTOTUNE > 1).
  uint64_t gemm_tunings() const;
  // cudaMemGetInfo's total for this device.
  std::optional<int64_t> device_memory_capacity_bytes() const override;
  // `columns` rounded up to a multiple of 16 bytes of `dtype` (bf16: 50257 -> 50264 elements),
  // so cuBLASLt reads and writes the rows of a padded [rows, columns] view with its TMA kernels.
  int64_t preferred_row_elements(int64_t columns, DType dtype) const override;
  // The CUDA stream behind `kind` (for NCCL and tests).
  cudaStream_t stream(StreamKind kind) const { return streams_[static_cast<size_t>(kind)]; }

  // Checks run while the host waits for the device (cuda_host_wait.h): NcclComm's, which ends a
  // wait on a collective that NCCL reported failed. `check` throws zero::Error to end the wait.
  // Returns an id for remove_host_wait_check.
  int add_host_wait_check(std::function<void()> check);
  void remove_host_wait_check(int id);

  Event record_event(StreamKind stream) override;
  void wait_event(StreamKind waiter, const Event& event) override;
  void synchronize_event(const Event& event) override;
  // Device-timed events (cudaEventElapsedTime): a kernel's time on its stream, not the host's.
  Event record_timing_event(StreamKind stream) override;
  double elapsed_seconds(const Event& start, const Event& end) override;

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
  // GELU in the products' epilogues (cuda_backend_gelu_epilogue.cpp) when gelu_epilogue() is on
  // and cuBLASLt has the kernel; otherwise Backend's defaults (the product, then the
  // elementwise kernel).
  void linear_gelu_forward(Tensor& act, Tensor& up, const Tensor& x, const Tensor& w,
                           const Tensor* bias) override;
  Tensor linear_backward_gelu(Tensor& dw, Tensor* dbias, const Tensor& dy, Tensor act,
                              const Tensor& w, const Tensor& up) override;
  // From ZERO_CUDA_GELU_EPILOGUE, read at construction: "1" fuses GPT-2's GELU (and its
  // gradient) into cuBLASLt's GELU_AUX_BIAS / DGELU epilogues; unset or "0" keeps the separate
  // elementwise kernels - the default until a GPU run has measured the fused form. Anything else
  // throws ConfigError naming the variable.
  static bool gelu_epilogue_from_environment();
  bool gelu_epilogue() const { return gelu_epilogue_; }
  // Products that ran with a GELU epilogue since construction (how tests see the fused path).
  uint64_t gelu_epilogue_products() const { return gelu_epilogue_products_; }
  void embedding_forward(Tensor& out, const Tensor& ids, const Tensor& table,
                         bool accumulate) override;
  void embedding_backward(Tensor& dtable, const Tensor& dout, const Tensor& ids) override;
  void layernorm_forward(Tensor& y, Tensor& mean, Tensor& rstd, const Tensor& x,
                         const Tensor& weight, const Tensor* bias, double eps) override;
  void layernorm_backward(Tensor& dx, Tensor& dweight, Tensor* dbias, const Tensor& dy,
                          const Tensor& x, const Tensor& weight, const Tensor& mean,
                          const Tensor& rstd) override;
  void add_layernorm_forward(Tensor& sum, Tensor& y, Tensor& mean, Tensor& rstd, const Tensor& a,
                             const Tensor& b, const Tensor& weight, const Tensor* bias,
                             double eps) override;
  void add_rmsnorm_forward(Tensor& sum, Tensor& y, Tensor& rstd, const Tensor& a, const Tensor& b,
                           const Tensor& weight, double eps) override;
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
  void attention_backward(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout, const Tensor& q,
                          const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                          double scale, int64_t window) override;
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
  // 1-bit compression (cuda_onebit.cu): a few launches per 64 segments, no host wait.
  void onebit_worker_compress(Tensor& bits, Tensor& scales, Tensor& worker_error,
                              const Tensor& values, const OneBitLayout& layout) override;
  void onebit_server_compress(Tensor& bits_out, Tensor& scales_out, Tensor& server_error,
                              const Tensor& bits_in, const Tensor& scales_in,
                              const OneBitLayout& layout) override;
  void onebit_decompress(Tensor& values, const Tensor& bits, const Tensor& scales,
                         const OneBitLayout& layout) override;
  // int8 group quantization (cuda_int8_groups.cu): one launch each, no host wait.
  void quantize_int8_groups(Tensor& packed, const Tensor& values, int64_t group) override;
  void dequantize_int8_groups(Tensor& values, const Tensor& packed, int64_t group,
                              bool accumulate) override;

 protected:
  void do_copy_from_host(Tensor& dst, const void* src) override;
  void do_copy_to_host(void* dst, const Tensor& src) override;
  void do_copy_to_pinned_async(Tensor& pinned_dst, const Tensor& src) override;
  void do_copy_from_pinned_async(Tensor& dst, const Tensor& pinned_src) override;
  void do_synchronize() override;

 private:
  cudaStream_t current() const { return stream(current_stream()); }
  // The norm backwards with an optional residual added to dx (the *_backward_add ops).
  void layernorm_backward_with(Tensor& dx, Tensor& dweight, Tensor* dbias, const Tensor& dy,
                               const Tensor& x, const Tensor& weight, const Tensor& mean,
                               const Tensor& rstd, const Tensor* residual);
  void rmsnorm_backward_with(Tensor& dx, Tensor& dweight, const Tensor& dy, const Tensor& x,
                             const Tensor& weight, const Tensor& rstd, const Tensor* residual);
  // Device scratch for one op, freed when the returned tensor goes (stream order keeps it safe).
  Tensor scratch(size_t bytes);
  // Enqueues the copy of the kernels' error slot to its host mirror on `stream`.
  void fetch_kernel_errors(cudaStream_t stream);
  // Throws the first bad-input report in the host mirror, if any (after the fetch completed),
  // and clears the slot.
  void raise_kernel_errors();
  // linear_forward's argument checks (linear_gelu_forward's too), under `check`'s op name.
  void check_linear_forward(const cuda_internal::Checks& check, const Tensor& y, const Tensor& x,
                            const Tensor& w, const Tensor* bias) const;
  // One product with a GELU epilogue straight through cuBLASLt, when its operands suit the
  // epilogue kernels (contiguous, 16-byte aligned rows and pointers); false, having written
  // nothing, otherwise or when cuBLASLt has no algorithm.
  bool run_gelu_epilogue(const cuda::GemmOperands& op);
  // y's row length `ldy` (elements): y.size(-1) when contiguous, its row stride when row-strided.
  void linear_product(Tensor& y, int64_t ldy, const Tensor& x, const Tensor& w,
                      const Tensor* bias);
  // The distance in elements between consecutive rows of `t` ([..., C], backend.h's
  // "row-strided"): C for a contiguous tensor, else the row stride; throws ShapeError naming `op`
  // and `name` for any other layout (a strided last dimension, rows at uneven strides or closer
  // than C) or a tensor not on this device.
  int64_t row_pitch(const Tensor& t, const char* op, const char* name) const;
  // Matrix products (cuda_backend_matmul.cpp).
  void gemm(const cuda::GemmOperands& op);
  void gemm_realigned(const cuda::GemmOperands& op);
  // matmul_->run with the backend's workspace and, for ZERO_CUDA_GEMM_AUTOTUNE's timing on a
  // plan's first call, a scratch c, on the current stream. False (nothing written) when cuBLASLt
  // has no algorithm.
  bool run_matmul(const cuda::GemmOperands& op);
  // A 16-bit contiguous c added to (beta != 0) or split along k: the product summed in f32
  // scratch (split there as gemm decides) and rounded into c once.
  void gemm_through_f32(const cuda::GemmOperands& op);
  // Both optimizer updates: the checks, then one launch (param_copy may be null).
  void update_optimizer(OptimizerKind kind, Tensor& params, const Tensor& grads,
                        std::span<Tensor> state, std::span<const ParamSegment> segments,
                        const OptimizerHyper& hyper, Tensor* param_copy);
  // False when ZERO_CUDA_GEMM_SPLIT=0.
  static bool split_enabled();
  // Whether a product is big enough and has rows that are not 16-byte aligned, so pitched
  // copies of its operands pay (and ZERO_CUDA_PITCHED_GEMM is not 0).
  bool pitch_pays(const cuda::GemmOperands& op) const;
  // The product on pitched copies of its misaligned operands; false (nothing written) when
  // cuBLASLt has no algorithm for it even so.
  bool gemm_pitched(const cuda::GemmOperands& op);
  // rows x cols elements of `element` bytes at `src` (row length ld) into scratch with row
  // length pitched_ld, on the current stream.
  Tensor pitched_copy(const void* src, int64_t rows, int64_t cols, int64_t ld, int64_t pitched_ld,
                      size_t element);

  int index_;
  std::array<cudaStream_t, kNumStreamKinds> streams_{};
  std::array<uint64_t, kNumStreamKinds> recorded_{};
  cuda::KernelErrorSlot* error_device_ = nullptr;  // cudaMalloc'ed, written by kernels
  cuda::KernelErrorSlot* error_host_ = nullptr;    // its page-locked host mirror
  cuda::HostWaitChecks host_waits_;
  cuda::CudaDeviceMemory memory_;
  std::unique_ptr<CachingAllocator::Streams> allocator_streams_;  // outlives allocator_
  std::unique_ptr<CachingAllocator> allocator_;
  std::unique_ptr<cuda::CudaPinnedCache> pinned_;
  std::unique_ptr<cuda::CublasLtMatmul> matmul_;
  Tensor matmul_workspace_;
  uint64_t split_products_ = 0;
  bool gelu_epilogue_ = false;
  uint64_t gelu_epilogue_products_ = 0;
};

}  // namespace zero::backend

// The CUDA backend's kernel launchers: plain functions over device pointers, one op family per
// .cu file, called by CudaBackend after it has checked shapes and dtypes (cuda_backend.cpp).
// Keeping Tensor and the argument checks in host C++ keeps the .cu files small (nvcc is slow)
// and lets every error message come from one place.
//
// Conventions: every pointer is device memory of the current device, except where noted; `dtype`
// is the storage dtype of the floating tensors (f32, bf16 or f16; kernels compute in f32 and round
// to nearest-even once when they store, the way the CPU backend's f32 twins do); statistics
// (mean, rstd, lse) are f32; work is enqueued on `stream` and nothing waits for it. Element counts
// and strides are in elements. Launchers throw UnsupportedError for a dtype they do not handle.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/optimizer_kernels.h"
#include "core/dtype.h"

namespace zero::backend {
struct OneBitLayout;  // backend/onebit_layout.h (its Tensor checks stay out of the .cu files)
}  // namespace zero::backend

namespace zero::backend::cuda {

// The first bad input a kernel found (a token id outside the vocabulary), in device memory:
// kernels record it with an atomic, the backend copies it to the host together with its next
// synchronising read and throws. code == 0: nothing found.
struct KernelErrorSlot {
  int code;
  int64_t value;     // the offending id
  int64_t bound;     // the vocabulary size it had to be below
  int64_t position;  // its row
};
enum KernelErrorCode : int {
  kNoKernelError = 0,
  kEmbeddingIdOutOfRange = 1,
  kTargetOutOfRange = 2,
  kMoeExpertOutOfRange = 3,
};

// ---- elementwise (cuda_elementwise.cu) -------------------------------------------------------
// dst[i] = the element whose bytes are the low `element_size` bytes of `pattern` (1, 2, 4 or 8).
void launch_fill_pattern(void* dst, size_t element_size, uint64_t pattern, int64_t n,
                         cudaStream_t stream);
// dst = src converted between floating dtypes (f32, f64, bf16, f16), rounding to nearest-even
// once (f64 -> 16 bit goes through round-to-odd float, as the CPU does).
void launch_convert(void* dst, DType dst_dtype, const void* src, DType src_dtype, int64_t n,
                    cudaStream_t stream);
void launch_stochastic_round_to_bf16(void* dst, const float* src, int64_t n, uint64_t seed,
                                     int64_t first_index, cudaStream_t stream);
// y += alpha * x; y *= alpha (alpha rounded to f32 first, as the CPU's f32 kernels do; f64
// tensors - the engine's device scalars - compute in f64).
// add mixes storage dtypes as the CPU's f32 twins do (an f32 accumulator += bf16 gradients).
void launch_add(void* y, DType y_dtype, const void* x, DType x_dtype, int64_t n, double alpha,
                cudaStream_t stream);
// acc (f32) += x (f32) rounded to `through` (f32, bf16 or f16) first: Backend::add_rounded.
void launch_add_rounded(float* acc, const float* x, DType through, int64_t n,
                        cudaStream_t stream);
// values (f32) rounded to `through` (bf16 or f16) and widened back, in place:
// Backend::round_in_place.
void launch_round_in_place(float* values, DType through, int64_t n, cudaStream_t stream);
void launch_scale(void* y, DType dtype, int64_t n, double alpha, cudaStream_t stream);
// x (f32) *= float(1 / (sqrt(*squared_norm) + eps)), the factor computed on the device in f64
// (squared_norm: one f64 in device memory): Backend::scale_by_inverse_norm.
void launch_scale_by_inverse_norm(float* x, const double* squared_norm, double eps, int64_t n,
                                  cudaStream_t stream);
// y *= alpha on a row-strided [rows, cols] view: row r's cols elements start at y + r * pitch
// (pitch >= cols); the elements between rows are not touched.
void launch_scale_rows(void* y, DType dtype, int64_t rows, int64_t cols, int64_t pitch,
                       double alpha, cudaStream_t stream);

// ---- bias helpers of the matrix products (cuda_bias.cu) --------------------------------------
// y[r, :] = bias for every row (y and bias of one dtype).
void launch_broadcast_rows(void* y, const void* bias, DType dtype, int64_t rows, int64_t cols,
                           cudaStream_t stream);
// Rows per block of the deterministic column sums below (bias and norm-weight gradients): at
// least `minimum` - small enough that a [16384, 768] gradient spreads over hundreds of blocks -
// and more when the rows would otherwise need more than the grid's 65535 row blocks. A function
// of the row count alone, so a given shape always sums in the same order.
inline int64_t partial_row_block(int64_t rows, int64_t minimum) {
  constexpr int64_t kMaxRowBlocks = 65535;
  const int64_t needed = (rows + kMaxRowBlocks - 1) / kMaxRowBlocks;
  return needed > minimum ? needed : minimum;
}
// dbias[c] += sum over rows of dy[r, c], summed in f64 over fixed row blocks and then the blocks
// in order (deterministic). `partials`: row blocks (of partial_row_block(rows,
// kColumnSumRowBlock) rows) x cols doubles.
inline constexpr int64_t kColumnSumRowBlock = 64;
size_t column_sum_scratch_bytes(int64_t rows, int64_t cols);
// dbias is `dtype` or, for 16-bit dy, f32 (dispatch_grad).
void launch_column_sums_accumulate(void* dbias, DType dbias_dtype, const void* dy, DType dtype,
                                   int64_t rows, int64_t cols, void* scratch,
                                   cudaStream_t stream);

// ---- embedding (cuda_embedding.cu) -------------------------------------------------------------
void launch_embedding_forward(void* out, const void* ids, bool ids_i64, const void* table,
                              DType dtype, int64_t n, int64_t vocab, int64_t channels,
                              bool accumulate, KernelErrorSlot* error, cudaStream_t stream);
// Device scratch the backward needs for n ids (a stable sort of the ids with their positions).
size_t embedding_backward_scratch_bytes(int64_t n);
// dtable is `dtype` (dout's) or, for 16-bit dout, f32.
void launch_embedding_backward(void* dtable, DType dtable_dtype, const void* dout, DType dtype,
                               const void* ids, bool ids_i64, int64_t n, int64_t vocab,
                               int64_t channels,
                               void* scratch, size_t scratch_bytes, KernelErrorSlot* error,
                               cudaStream_t stream);

// ---- normalisation (cuda_layernorm.cu, cuda_rmsnorm.cu) ----------------------------------------
// Weight (and bias) gradients: per block of rows a partial sum per channel, then the blocks in
// order into the accumulating gradient: deterministic, no atomics. The blocks are
// partial_row_block(rows, kNormRowBlock) rows, or norm_fused_row_block(rows) where the backward
// computes dx and the partials in one pass (cuda_norm_backward.cu).
inline constexpr int64_t kNormRowBlock = 64;
size_t norm_backward_scratch_bytes(int64_t rows, int64_t channels, bool with_bias);
// With `residual`: sum = x + residual (stored, rounded to dtype) is what gets normalised - the
// residual add fused into the norm's pass; sum may be x.
void launch_layernorm_forward(void* y, float* mean, float* rstd, const void* x, const void* weight,
                              const void* bias, DType dtype, int64_t rows, int64_t channels,
                              float eps, cudaStream_t stream, void* sum = nullptr,
                              const void* residual = nullptr);
// dweight/dbias are `grad_dtype`: `dtype` or, for 16-bit inputs, f32 (dispatch_grad).
// With `residual` (dx's shape and dtype, not dx's buffer): dx = the norm's dx rounded to dtype,
// + residual, rounded again - add()'s arithmetic, in the same pass (Backend::*_backward_add).
void launch_layernorm_backward(void* dx, void* dweight, void* dbias, const void* dy, const void* x,
                               const void* weight, const float* mean, const float* rstd,
                               DType dtype, DType grad_dtype, int64_t rows, int64_t channels,
                               void* scratch, cudaStream_t stream,
                               const void* residual = nullptr);
void launch_rmsnorm_forward(void* y, float* rstd, const void* x, const void* weight, DType dtype,
                            int64_t rows, int64_t channels, float eps, cudaStream_t stream,
                            void* sum = nullptr, const void* residual = nullptr);
void launch_rmsnorm_backward(void* dx, void* dweight, const void* dy, const void* x,
                             const void* weight, const float* rstd, DType dtype,
                             DType grad_dtype, int64_t rows, int64_t channels, void* scratch,
                             cudaStream_t stream, const void* residual = nullptr);

// ---- per-head query/key RMSNorm (cuda_qk_norm.cu) ----------------------------------------------
// Backend::qk_rmsnorm_forward / qk_rmsnorm_backward over [tokens, (heads + 2 kv_heads) *
// head_dim] rows of `dtype`; rstd f32 [tokens, heads + kv_heads]. The backward's dq_weight and
// dk_weight are `grad_dtype` (dtype, or f32 for 16-bit dtype) and accumulate; `scratch` holds
// qk_rmsnorm_backward_scratch_bytes(tokens, head_dim) bytes of device memory.
size_t qk_rmsnorm_backward_scratch_bytes(int64_t tokens, int64_t head_dim);
void launch_qk_rmsnorm_forward(void* qkv_out, float* rstd, const void* qkv_in,
                               const void* q_weight, const void* k_weight, DType dtype,
                               int64_t tokens, int64_t heads, int64_t kv_heads, int64_t head_dim,
                               float eps, cudaStream_t stream);
void launch_qk_rmsnorm_backward(void* d_qkv_in, void* dq_weight, void* dk_weight,
                                DType grad_dtype, const void* d_qkv_out, const void* qkv_in,
                                const void* q_weight, const void* k_weight, const float* rstd,
                                DType dtype, int64_t tokens, int64_t heads, int64_t kv_heads,
                                int64_t head_dim, void* scratch, cudaStream_t stream);

// ---- activations (cuda_activations.cu) ---------------------------------------------------------
void launch_gelu_forward(void* y, const void* x, DType dtype, int64_t n, cudaStream_t stream);
void launch_gelu_backward(void* dx, const void* dy, const void* x, DType dtype, int64_t n,
                          cudaStream_t stream);
void launch_swiglu_forward(void* y, const void* gate_up, DType dtype, int64_t rows, int64_t inner,
                           cudaStream_t stream);
void launch_swiglu_backward(void* dgate_up, const void* dy, const void* gate_up, DType dtype,
                            int64_t rows, int64_t inner, cudaStream_t stream);

// ---- rotary embedding (cuda_rope.cu) -----------------------------------------------------------
struct HeadLayout {  // a [B, T, H, D] view with contiguous D
  int64_t batch = 0, seq = 0, heads = 0, head_dim = 0;
  int64_t batch_stride = 0, seq_stride = 0, head_stride = 0;
};
// cos/sin: table_dtype, which is dtype or f32 (f32 tables for 16-bit x, as the model keeps them).
void launch_rope(void* x, const HeadLayout& layout, const void* cos, const void* sin, DType dtype,
                 DType table_dtype, bool inverse, cudaStream_t stream);

// ---- attention (cuda_attention.cu) -------------------------------------------------------------
inline constexpr int64_t kMaxAttentionHeadDim = 256;
struct AttentionArgs {
  DType dtype = DType::kF32;
  int64_t batch = 0, seq = 0, heads = 0, kv_heads = 0, head_dim = 0;
  float scale = 1.0f;
  int64_t window = 0;  // 0: full causal
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  HeadLayout q_layout, k_layout, v_layout;
  void* out = nullptr;
  HeadLayout out_layout;
  float* lse = nullptr;  // [B, H, T]; may be null with key_seq > 0
  // Attention over a key/value cache (Backend::attention_forward_cached, forward only): k and v
  // hold key_seq > 0 positions and the seq queries are the last of them. 0: self-attention.
  int64_t key_seq = 0;
  // backward
  const void* dout = nullptr;
  HeadLayout dout_layout;
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  HeadLayout dq_layout, dk_layout, dv_layout;
  float* delta = nullptr;  // scratch [B, H, T]
  void* ds = nullptr;      // scratch of attention_backward_ds_bytes(*this) bytes, where > 0
};
void launch_attention_forward(const AttentionArgs& args, cudaStream_t stream);
void launch_attention_backward(const AttentionArgs& args, cudaStream_t stream);
// The tensor-core path (cuda_attention_mma.cu), which the two launchers above take where it
// applies: bf16/f16, head_dim 64 or 128, every row of every view 16-byte aligned, and the
// environment does not say ZERO_CUDA_ATTENTION=simple. The backward needs args.delta filled.
bool mma_attention_supported(const AttentionArgs& args, bool backward);
// Device scratch the backward needs for dS (ZERO_CUDA_ATTENTION_DQ=stored-ds on the tensor cores:
// 2 bytes for each (query, key) pair of every 64 x 64 tile at or below the diagonal, each head),
// else 0.
size_t attention_backward_ds_bytes(const AttentionArgs& args);
void launch_attention_forward_mma(const AttentionArgs& args, cudaStream_t stream);
void launch_attention_backward_mma(const AttentionArgs& args, cudaStream_t stream);

// ---- key/value cache (cuda_kv_cache.cu) --------------------------------------------------------
// cache[B, capacity, KVH, D] (contiguous) positions position .. position + T - 1 = x (layout
// x_layout [B, T, KVH, D]), elements of element_bytes (2, 4 or 8) copied bit for bit.
void launch_kv_cache_write(void* cache, const void* x, const HeadLayout& x_layout,
                           int64_t capacity, int64_t position, size_t element_bytes,
                           cudaStream_t stream);

// ---- mixture of experts (cuda_moe.cu) ---------------------------------------------------------
// Backend::moe_route .. moe_route_backward on contiguous tensors: logits, rows, dout, d_rows and
// dlogits of `dtype` (f32, bf16 or f16), weights and d_weights f32, indices i32 (shapes as
// backend.h states them).
void launch_moe_route(int32_t* expert_ids, float* weights, const void* logits, DType dtype,
                      int64_t tokens, int64_t experts, int64_t k, bool normalize,
                      cudaStream_t stream);
// Device scratch moe_dispatch needs for tokens * k pairs.
size_t moe_dispatch_scratch_bytes(int64_t slots);
// An expert id outside [0, experts) is reported through `error` (and its pair left out of the
// counts).
void launch_moe_dispatch(int32_t* counts, int32_t* source_rows, int32_t* slot_of,
                         const int32_t* expert_ids, int64_t tokens, int64_t k, int64_t experts,
                         void* scratch, size_t scratch_bytes, KernelErrorSlot* error,
                         cudaStream_t stream);
// weights == nullptr: unit weights.
void launch_moe_combine(void* out, const void* rows, DType dtype, const int32_t* slot_of,
                        const float* weights, int64_t tokens, int64_t k, int64_t columns,
                        cudaStream_t stream);
void launch_moe_combine_backward(void* d_rows, float* d_weights, const void* dout,
                                 const void* rows, DType dtype, const int32_t* slot_of,
                                 const float* weights, int64_t tokens, int64_t k,
                                 int64_t columns, cudaStream_t stream);
// Backend::moe_router_prob_sums (scratch: moe_router_prob_sums_scratch_bytes(tokens) bytes of
// device memory) and Backend::moe_router_balance_backward.
size_t moe_router_prob_sums_scratch_bytes(int64_t tokens);
void launch_moe_router_prob_sums(double* sums, const void* logits, DType dtype, int64_t tokens,
                                 int64_t experts, bool accumulate, void* scratch,
                                 cudaStream_t stream);
void launch_moe_router_balance_backward(void* dlogits, const void* logits, DType dtype,
                                        const double* prob_grad, double scale, int64_t tokens,
                                        int64_t experts, cudaStream_t stream);
void launch_moe_route_backward(void* dlogits, const float* d_weights, const int32_t* expert_ids,
                               const float* weights, const void* logits, DType dtype,
                               int64_t tokens, int64_t experts, int64_t k, bool normalize,
                               cudaStream_t stream);

// ---- loss (cuda_cross_entropy.cu) --------------------------------------------------------------
// dlogits may equal logits (the fused loss writes over the logits; then dlogits_pitch ==
// logits_pitch). losses are f32 or `dtype`. Row r of logits starts at logits + r * logits_pitch,
// of dlogits at dlogits + r * dlogits_pitch (pitches >= vocab); the gaps are not touched.
void launch_softmax_cross_entropy(void* losses, bool losses_f32, void* dlogits,
                                  int64_t dlogits_pitch, const void* logits, int64_t logits_pitch,
                                  DType dtype, const void* targets, bool targets_i64, int64_t rows,
                                  int64_t vocab, int64_t ignore_index, double grad_scale,
                                  KernelErrorSlot* error, cudaStream_t stream);
// Whether launch_softmax_cross_entropy stages rows of `vocab` `dtype` elements in shared memory
// (each logit read from DRAM once) rather than streaming them twice: true where a row fits the
// current device's opt-in shared memory (GPT-2's 50257 bf16 or f32 logits on an H100; not 152k
// ones) and ZERO_CUDA_CROSS_ENTROPY=streaming is not set. Tests use it to know the path taken.
bool softmax_cross_entropy_stages_rows(DType dtype, int64_t vocab);

// ---- vocabulary slices (cuda_vocab_slice.cu); semantics: Backend's ops of the same names ------
// Ids outside [first, first + count) are another rank's: zero rows / no contribution.
void launch_embedding_forward_slice(void* out, const void* ids, bool ids_i64, const void* table,
                                    DType dtype, int64_t n, int64_t count, int64_t channels,
                                    int64_t first_id, bool accumulate, cudaStream_t stream);
void launch_embedding_backward_slice(void* dtable, const void* dout, DType dtype, const void* ids,
                                     bool ids_i64, int64_t n, int64_t count, int64_t channels,
                                     int64_t first_id, cudaStream_t stream);
// Statistics are f64 [rows]; losses f32 or `dtype`.
void launch_cross_entropy_slice_max(double* row_max, const void* logits, DType dtype,
                                    int64_t rows, int64_t cols, cudaStream_t stream);
void launch_cross_entropy_slice_sums(double* sum_exp, double* target_logit, const void* logits,
                                     DType dtype, const double* row_max, const void* targets,
                                     bool targets_i64, int64_t rows, int64_t cols,
                                     int64_t first_column, cudaStream_t stream);
void launch_cross_entropy_slice_finish(void* losses, bool losses_f32, void* dlogits,
                                       const void* logits, DType dtype, const double* row_max,
                                       const double* sum_exp, const double* target_logit,
                                       const void* targets, bool targets_i64, int64_t rows,
                                       int64_t cols, int64_t first_column, int64_t ignore_index,
                                       double grad_scale, cudaStream_t stream);

// ---- reductions into a device f64 scalar (cuda_reductions.cu) ---------------------------------
size_t reduction_scratch_bytes(int64_t n);
// out[0] = alpha * sum(x or x^2) (+ out[0] when accumulate), in f64, deterministic.
void launch_sum_into(double* out, const void* x, DType dtype, int64_t n, bool squares, double alpha,
                     bool accumulate, void* scratch, cudaStream_t stream);
// values (f32) rounded through `through` in place (Backend::round_in_place), and out[0] = the
// sum of their squares with launch_sum_into's bits (scratch: reduction_scratch_bytes(n)).
void launch_rounded_sum_squares(double* out, float* values, DType through, int64_t n,
                                void* scratch, cudaStream_t stream);
// dst (dst_dtype) = src (f32) rounded to nearest even as Backend::copy rounds, and out[0] = the
// sum of squares of the stored values with launch_sum_into's bits (Backend::copy_sum_squares).
void launch_copy_sum_squares(double* out, void* dst, DType dst_dtype, const float* src, int64_t n,
                             void* scratch, cudaStream_t stream);

// ---- optimizer updates (cuda_optimizers.cu) ----------------------------------------------------
// Same formulas, in the same f32 operation order, as backend/cpu/cpu_optimizers.cpp. `state1`
// is null for kinds with one state buffer. `segments` is a host array. With `copy` (elements of
// copy_dtype, params' numel), each updated element is also stored there rounded to nearest even,
// as Backend::copy would round it. grads are f32, or 16-bit (grads_dtype) when copy_dtype is the
// same 16-bit type or there is no copy.
void launch_optimizer_update(OptimizerKind kind, float* params, const void* grads,
                             DType grads_dtype, float* state0,
                             float* state1, const ParamSegment* segments, size_t segment_count,
                             const OptimizerHyper& hyper, void* copy, DType copy_dtype,
                             cudaStream_t stream);

// ---- 1-bit compression with error feedback (cuda_onebit.cu) ------------------------------------
// Semantics and buffers: Backend::onebit_worker_compress, onebit_server_compress and
// onebit_decompress. `layout` is read on the host only: its segments travel as kernel
// parameters. Deterministic (fixed-order f64 sums, no atomics); the compressions need device
// scratch of the *_scratch_bytes(layout) bytes for their per-block partial sums.
size_t onebit_worker_scratch_bytes(const OneBitLayout& layout);
size_t onebit_server_scratch_bytes(const OneBitLayout& layout);
void launch_onebit_worker_compress(uint8_t* bits, float* scales, float* worker_error,
                                   const float* values, const OneBitLayout& layout,
                                   void* scratch, cudaStream_t stream);
void launch_onebit_server_compress(uint8_t* bits_out, float* scales_out, float* server_error,
                                   const uint8_t* bits_in, const float* scales_in,
                                   const OneBitLayout& layout, void* scratch,
                                   cudaStream_t stream);
void launch_onebit_decompress(float* values, const uint8_t* bits, const float* scales,
                              const OneBitLayout& layout, cudaStream_t stream);

// int8 group quantization (cuda_int8_groups.cu; layout: backend/int8_groups.h). `values` holds
// `count` elements of `dtype` (f32, bf16, f16); `packed` Int8Groups{count, group}.packed_bytes().
void launch_quantize_int8_groups(uint8_t* packed, const void* values, DType dtype, int64_t count,
                                 int64_t group, cudaStream_t stream);
void launch_dequantize_int8_groups(void* values, DType dtype, const uint8_t* packed, int64_t count,
                                   int64_t group, bool accumulate, cudaStream_t stream);

}  // namespace zero::backend::cuda

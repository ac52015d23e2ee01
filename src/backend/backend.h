// Backend: the one interface every kernel goes through. Layer code calls these methods and never
// touches device memory itself, so a CUDA backend (streams, device memory) slots in without
// changing layers.
//
// Conventions for every method:
// * Tensors live on this backend's device. Unless a method says otherwise they are contiguous
//   and row-major; "rows" N means all leading dimensions flattened (N = B*T for activations).
// * Row-strided views: where a method says "row-strided", that tensor may also be a view
//   [..., C] whose last dimension is contiguous and whose leading dimensions flatten to rows a
//   fixed stride >= C elements apart (a [rows, C] narrow of a [rows, pitch] buffer), on backends
//   whose preferred_row_elements() pads (CUDA); the others need it contiguous. The elements
//   between a row's end and the next row's start are neither read nor written.
// * Floating dtypes: f32 and f64 on the CPU backend (f64 is the finite-difference oracle).
//   Saved statistics (LayerNorm mean/rstd, RMSNorm rstd, attention logsumexp) have
//   stats_dtype(x.dtype()): f64 for f64 inputs, f32 otherwise.
// * Gradients of parameters (dweight, dbias, dtable) ACCUMULATE (+=): gradient accumulation over
//   micro-batches and tied weights rely on it. Gradients of activations (dx, dq, ...) OVERWRITE.
// * Ordering: methods are enqueued on the backend's current stream (backend/stream.h) in call
//   order. The CPU backend runs them synchronously. Streams are ordered only by events: work
//   that reads on one stream what another wrote waits for an event recorded after the write, and
//   a tensor used on a stream other than the one current when it is destroyed (its memory is
//   then reusable by that stream's work at once) has that use ordered before the destruction by
//   an event the destroying stream waited for - or is kept alive until such an event. Host code
//   never reads device elements: it reads results through copy_to_host()/read_scalar(), which
//   wait for the work before them.
// * Host <-> device traffic goes only through copy_from_host()/copy_to_host() (and the
//   read_scalar()/squared_norm() conveniences built on them); every call is counted in
//   transfer_stats(), so tests can hold the training step to one host read per step.
// * Thread safety: one Backend is driven by one host thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/allocator.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/memory_category.h"
#include "core/tensor.h"
#include "backend/onebit_layout.h"
#include "backend/optimizer_kernels.h"
#include "backend/stream.h"

#include <span>
#include <vector>

namespace zero::backend {

inline DType stats_dtype(DType x) { return x == DType::kF64 ? DType::kF64 : DType::kF32; }

// Host <-> device traffic and host waits of one backend, counted by the non-virtual wrappers.
// On the CPU backend the "transfers" are host copies, counted all the same: the layer code that
// makes them is the code a GPU run executes.
struct TransferStats {
  int64_t host_to_device_calls = 0;
  int64_t host_to_device_bytes = 0;
  int64_t device_to_host_calls = 0;  // each one waits for the work enqueued before it
  int64_t device_to_host_bytes = 0;
  int64_t synchronizations = 0;      // explicit synchronize() calls
};

// A stretch of an optimizer update's flat buffers whose gradients are a tensor of their own (a
// unit's held gradient, sharding/held_unit_gradients.h): the update runs piece by piece over
// views of the parameters and states at `offset`.
struct UpdatePiece {
  int64_t offset = 0;  // elements into the flat parameter and state buffers
  Tensor grads;        // f32 or 16-bit (optimizer_update), contiguous; its numel is the length
  std::vector<ParamSegment> segments;  // offsets relative to `offset`
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Device device() const = 0;
  // Device memory: every tensor this backend makes. Accounted per MemoryCategory.
  virtual Allocator& allocator() = 0;
  // Page-locked host memory for staging buffers that device copies read or write at full speed
  // (offload, host-staged communication); its own accounting, separate from allocator() and
  // from cpu_allocator(). Host-readable: tensors from it are CPU tensors.
  virtual Allocator& pinned_host_allocator() = 0;
  // The device's own memory in bytes (all of it, not what is free), for the memory preflight;
  // nullopt where allocator()'s tensors live in host memory (the CPU backend, the simulated
  // device), whose limit is the machine's.
  virtual std::optional<int64_t> device_memory_capacity_bytes() const { return std::nullopt; }
  // Blocks the host until every stream's enqueued work is done (counted).
  void synchronize();
  // The row length, in elements (>= columns), this backend's kernels prefer for a [rows,
  // columns] matrix of `dtype` that a caller allocates itself and uses through its [rows,
  // columns] view (narrow(1, 0, columns)): the big LM-head logits. The default, kept by the CPU
  // and simulated-device backends, is `columns` (exact rows: the view is the whole tensor). The
  // CUDA backend rounds up so that every row starts on a 16-byte boundary, which cuBLASLt's fast
  // (TMA) kernels need. A padded row's extra elements are never read or written by the ops that
  // accept such a view (each op's comment says "row-strided" where it does).
  virtual int64_t preferred_row_elements(int64_t columns, DType /*dtype*/) const {
    return columns;
  }

  // ---- streams and events (backend/stream.h) -------------------------------------------------
  StreamKind current_stream() const { return current_stream_; }
  void set_current_stream(StreamKind stream);
  // Marks the current end of `stream`'s work.
  virtual Event record_event(StreamKind stream) = 0;
  // Work enqueued on `waiter` after this call starts only after `event` completed.
  virtual void wait_event(StreamKind waiter, const Event& event) = 0;
  // Blocks the host until `event` completed.
  virtual void synchronize_event(const Event& event) = 0;

  // ---- timing (the kernel profiler, backend/profiling/) -----------------------------------------
  // A timestamp at the current end of `stream`'s work, for elapsed_seconds() only (never pass it
  // to wait_event). The default, for backends that run every op before returning (CPU,
  // simulated device), reads the host clock; an asynchronous backend overrides both methods with
  // device-timed events.
  virtual Event record_timing_event(StreamKind stream);
  // Seconds between two timing events of this backend (end after start); blocks the host until
  // `end` completed. Throws ZERO_CHECK's error for events that record_timing_event did not make.
  virtual double elapsed_seconds(const Event& start, const Event& end);

  // ---- counted host <-> device transfers -----------------------------------------------------
  // Whole contiguous tensor (nbytes() bytes); copy_to_host's src may be row-strided (its rows
  // land packed in dst). copy_from_host may return before the copy is done
  // on an asynchronous backend only when `src` stays valid until the stream reaches it; these
  // wrappers are synchronous with respect to the host buffer (the CPU backend trivially).
  void copy_from_host(Tensor& dst, const void* src);
  // Waits for the work enqueued before it, then copies.
  void copy_to_host(void* dst, const Tensor& src);
  // Starts copying `src` (contiguous, on this device) into `pinned_dst` (a contiguous tensor of
  // the same bytes from pinned_host_allocator()) on the current stream and returns without
  // waiting: the host may read pinned_dst only after an event recorded after this call has
  // completed (synchronize_event), and src must stay alive until the stream that destroys it
  // waited for such an event (ordering above). Synchronous backends finish before returning.
  // Counted as a device-to-host call. Throws ShapeError for any other pair of tensors.
  void copy_to_pinned_async(Tensor& pinned_dst, const Tensor& src);
  // The upload twin: starts copying `pinned_src` (a contiguous tensor from
  // pinned_host_allocator()) into `dst` (contiguous, on this device, the same bytes) on the
  // current stream and returns without waiting; the host must not write pinned_src, nor free it,
  // before an event recorded after this call has completed. Counted as a host-to-device call.
  void copy_from_pinned_async(Tensor& dst, const Tensor& pinned_src);
  // The value of a one-element f32/f64 tensor: one counted device-to-host read.
  double read_scalar(const Tensor& x);
  const TransferStats& transfer_stats() const { return transfers_; }
  void reset_transfer_stats() { transfers_ = TransferStats{}; }

  // New contiguous tensors on this device, accounted under `category`.
  Tensor empty(const Shape& shape, DType dtype, MemoryCategory category);
  Tensor zeros(const Shape& shape, DType dtype, MemoryCategory category);

  // ---- data movement -------------------------------------------------------------------------
  // dst[i] = value (floating or integer dtypes).
  virtual void fill(Tensor& dst, double value) = 0;
  // dst = src elementwise (same numel; both contiguous). Between floating dtypes it converts,
  // rounding to nearest-even when narrowing (f32 -> bf16/f16, f64 -> f32).
  virtual void copy(Tensor& dst, const Tensor& src) = 0;
  // dst (bf16) = src (f32) rounded stochastically (core/stochastic_rounding.h): element i uses
  // the random bits of (seed, first_index + i), so a value rounds the same wherever it lives.
  virtual void stochastic_round_to_bf16(Tensor& dst, const Tensor& src, uint64_t seed,
                                        int64_t first_index) = 0;
  // y += alpha * x (same shape, contiguous, same floating dtype).
  virtual void add(Tensor& y, const Tensor& x, double alpha) = 0;
  // acc += x rounded to `through` first (acc and x f32, contiguous, same numel): what storing x
  // in `through`, reading it back and adding it gives, bit for bit - a micro-batch gradient kept
  // as a 16-bit storage would keep it, summed into an f32 accumulator. The default composes
  // copy, copy and add; a device backend fuses them (one pass over x and acc instead of three).
  virtual void add_rounded(Tensor& acc, const Tensor& x, DType through);
  // values (f32, contiguous) = values rounded to `through` and read back, in place: the bits of
  // storing them in `through` and widening again. The default composes two copies through a
  // workspace; a device backend fuses them (one pass, no workspace).
  virtual void round_in_place(Tensor& values, DType through);
  // round_in_place that also writes sum_squares of the rounded values to squared_sum (f64 [1],
  // this device), with sum_squares's bits: a held gradient's squared norm taken in the pass that
  // stores it, so the step's norm need not read the gradients again. The default runs the two
  // ops; a device backend fuses them.
  virtual void round_in_place_sum_squares(Tensor& values, DType through, Tensor& squared_sum);
  // dst (contiguous, f32/bf16/f16) = src (contiguous f32, same numel) rounded as copy() rounds,
  // and squared_sum (f64 [1], this device) = sum_squares(dst) with sum_squares's bits: a held
  // gradient stored in the parameters' dtype with its squared norm, in one pass over src. The
  // default runs copy and sum_squares; a device backend fuses them.
  virtual void copy_sum_squares(Tensor& dst, const Tensor& src, Tensor& squared_sum);
  // y *= alpha (y may be row-strided).
  virtual void scale(Tensor& y, double alpha) = 0;
  // x (f32, contiguous) *= float(1 / (sqrt(squared_norm[0]) + eps)), the factor computed in f64
  // from squared_norm (f64 [1] on this device, as sum_squares writes it) and rounded to f32
  // once, each product rounded to f32: a tensor divided by its norm with no host wait (Muon's
  // Newton-Schulz input, optim/muon.h). eps > 0 keeps a zero tensor at zero.
  virtual void scale_by_inverse_norm(Tensor& x, const Tensor& squared_norm, double eps) = 0;

  // ---- matrix products -----------------------------------------------------------------------
  // c[M,N] = alpha * op(a) @ op(b) + beta * c, op = transpose when asked. All 2-D, contiguous.
  virtual void matmul(Tensor& c, const Tensor& a, bool transpose_a, const Tensor& b,
                      bool transpose_b, double alpha, double beta) = 0;
  // y[N,out] = x[N,in] @ w[out,in]^T (+ bias[out] when bias != nullptr). Without a bias y may
  // be row-strided.
  virtual void linear_forward(Tensor& y, const Tensor& x, const Tensor& w, const Tensor* bias) = 0;
  // dx[N,in] = dy @ w (overwrite; skipped when dx == nullptr); dw += dy^T @ x;
  // dbias += column sums of dy (when dbias != nullptr). Without dbias dy may be row-strided.
  virtual void linear_backward(Tensor* dx, Tensor& dw, Tensor* dbias, const Tensor& dy,
                               const Tensor& x, const Tensor& w) = 0;

  // ---- a linear layer fused with the GELU after it (GPT-2's MLP) ------------------------------
  // up = x @ w^T (+ bias), act = gelu(up): the product and the activation in one pass on a
  // device (GELU in the matrix product's epilogue) instead of a product and an elementwise pass.
  // up is kept for the backward. x, w, bias as for linear_forward; act and up contiguous, of
  // y's shape and dtype. The default runs linear_forward and gelu_forward (the CPU backends keep
  // it: the oracle's sequence); a device backend may apply GELU to the unrounded product, so
  // 16-bit results may differ from the default's in the last unit.
  virtual void linear_gelu_forward(Tensor& act, Tensor& up, const Tensor& x, const Tensor& w,
                                   const Tensor* bias);
  // The backward of `act = gelu(up)` followed by a linear layer of input act: returns d_up =
  // gelu'(up) * (dy @ w), a new activations tensor of up's shape and dtype; dw += dy^T @ act,
  // dbias += column sums of dy. act is taken by value so that its memory is freed (when the
  // caller passes it with std::move) as soon as it has been read: the default runs
  // linear_backward into a d_act buffer, lets act go, then allocates d_up and runs
  // gelu_backward - the unfused sequence's order, so its peak memory too. A device backend may
  // apply gelu' in the dx product's epilogue instead.
  virtual Tensor linear_backward_gelu(Tensor& dw, Tensor* dbias, const Tensor& dy, Tensor act,
                                      const Tensor& w, const Tensor& up);

  // ---- embedding -----------------------------------------------------------------------------
  // out[N,C] = table[ids[n], :] (out += ... when accumulate). ids: i32 or i64 [N], host-readable
  // on the CPU backend. An id outside [0, V) throws zero::Error naming the id and V.
  virtual void embedding_forward(Tensor& out, const Tensor& ids, const Tensor& table,
                                 bool accumulate) = 0;
  // dtable[V,C] += dout rows scattered by ids (deterministic order).
  virtual void embedding_backward(Tensor& dtable, const Tensor& dout, const Tensor& ids) = 0;

  // ---- normalisation (over the last dimension C of x[N,C]) ------------------------------------
  // y = (x - mean) * rstd * weight + bias; saves mean[N], rstd[N] (stats_dtype).
  virtual void layernorm_forward(Tensor& y, Tensor& mean, Tensor& rstd, const Tensor& x,
                                 const Tensor& weight, const Tensor* bias, double eps) = 0;
  virtual void layernorm_backward(Tensor& dx, Tensor& dweight, Tensor* dbias, const Tensor& dy,
                                  const Tensor& x, const Tensor& weight, const Tensor& mean,
                                  const Tensor& rstd) = 0;
  // y = (x * rstd) * weight, rstd = 1/sqrt(mean(x^2) + eps); saves rstd[N] (stats_dtype).
  virtual void rmsnorm_forward(Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& weight,
                               double eps) = 0;
  virtual void rmsnorm_backward(Tensor& dx, Tensor& dweight, const Tensor& dy, const Tensor& x,
                                const Tensor& weight, const Tensor& rstd) = 0;

  // ---- per-head query/key RMSNorm (Qwen3's q_norm and k_norm) ---------------------------------
  // qkv_in and qkv_out [N, (H + 2 KVH) * D] (contiguous, one floating dtype) hold per row the
  // fused projection's H query, KVH key and KVH value heads of D elements, in that order. Each
  // query head is normalised with q_weight[D] and each key head with k_weight[D] exactly as
  // rmsnorm_forward normalises a row of D; value heads are copied unchanged. rstd [N, H + KVH]
  // (stats_dtype, contiguous) receives each normalised head's reciprocal RMS. qkv_out must not
  // share qkv_in's storage (the backward reads the input). Checks: backend/qk_norm_shapes.h.
  virtual void qk_rmsnorm_forward(Tensor& qkv_out, Tensor& rstd, const Tensor& qkv_in,
                                  const Tensor& q_weight, const Tensor& k_weight, int64_t heads,
                                  int64_t kv_heads, double eps) = 0;
  // The backward: d_qkv_in's query and key heads get rmsnorm_backward's dx of d_qkv_out's (with
  // qkv_in as x), its value heads d_qkv_out's copied; dq_weight and dk_weight accumulate the sum
  // over the query (key) heads of all rows of dy * x * rstd, as rmsnorm_backward accumulates
  // dweight (the weights' dtype, or f32 for 16-bit inputs). d_qkv_in shares neither storage.
  virtual void qk_rmsnorm_backward(Tensor& d_qkv_in, Tensor& dq_weight, Tensor& dk_weight,
                                   const Tensor& d_qkv_out, const Tensor& qkv_in,
                                   const Tensor& q_weight, const Tensor& k_weight,
                                   const Tensor& rstd, int64_t heads, int64_t kv_heads) = 0;

  // ---- a residual add fused with the normalisation after it -----------------------------------
  // sum = a + b, rounded to sum's dtype exactly as add(sum, b, 1) rounds it, then the norm of the
  // stored sum exactly as layernorm_forward / rmsnorm_forward compute it: the pre-norm block's
  // "x1 = x + attention(x); h = norm(x1)" in one pass over the rows on a device instead of an
  // add pass and a norm pass. sum may be a (in place); a, b, sum and y share shape and dtype.
  // The defaults run copy/add and the norm op (the CPU backends keep them: the oracle's
  // sequence); a device backend overrides them with one kernel.
  virtual void add_layernorm_forward(Tensor& sum, Tensor& y, Tensor& mean, Tensor& rstd,
                                     const Tensor& a, const Tensor& b, const Tensor& weight,
                                     const Tensor* bias, double eps);
  virtual void add_rmsnorm_forward(Tensor& sum, Tensor& y, Tensor& rstd, const Tensor& a,
                                   const Tensor& b, const Tensor& weight, double eps);

  // ---- a norm's backward fused with the residual gradient added to its dx ---------------------
  // dx = the norm's dx, rounded to dx's dtype exactly as layernorm_backward / rmsnorm_backward
  // round it, + residual, rounded exactly as add(dx, residual, 1) rounds it; the weight (and
  // bias) gradients accumulate as the plain backward accumulates them. The pre-norm block's
  // backward "dx = norm'(dh) + d_residual" in one pass over the rows on a device instead of a
  // norm pass and an add pass. residual shares dx's shape and dtype and is not dx's buffer (dx
  // may still be dy's, as in the plain backward). The defaults run the norm backward and add
  // (the CPU backends keep them: the oracle's sequence); a device backend overrides them.
  virtual void layernorm_backward_add(Tensor& dx, Tensor& dweight, Tensor* dbias,
                                      const Tensor& dy, const Tensor& x, const Tensor& weight,
                                      const Tensor& mean, const Tensor& rstd,
                                      const Tensor& residual);
  virtual void rmsnorm_backward_add(Tensor& dx, Tensor& dweight, const Tensor& dy,
                                    const Tensor& x, const Tensor& weight, const Tensor& rstd,
                                    const Tensor& residual);

  // ---- activations ---------------------------------------------------------------------------
  // GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Any shape, contiguous.
  virtual void gelu_forward(Tensor& y, const Tensor& x) = 0;
  virtual void gelu_backward(Tensor& dx, const Tensor& dy, const Tensor& x) = 0;
  // gate_up[N, 2I] holds [gate | up] per row; y[N, I] = silu(gate) * up.
  virtual void swiglu_forward(Tensor& y, const Tensor& gate_up) = 0;
  virtual void swiglu_backward(Tensor& dgate_up, const Tensor& dy, const Tensor& gate_up) = 0;

  // ---- rotary position embedding -------------------------------------------------------------
  // In place on x[B,T,H,D] (dims 0-2 may be strided; D contiguous), rotate-half convention:
  // for i < D/2, (x_i, x_{i+D/2}) -> (x_i cos - x_{i+D/2} sin, x_{i+D/2} cos + x_i sin) with
  // cos/sin[T, D/2] (dtype of x, or f32 for 16-bit x) for position t. inverse = true applies
  // the transposed rotation, which is the backward of the forward rotation.
  virtual void rope_apply(Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse) = 0;

  // ---- attention -----------------------------------------------------------------------------
  // Causal self-attention with multi-head / grouped-query heads, flash-style: nothing of size
  // T x T is kept. q[B,T,H,D], k and v [B,T,KVH,D] with H % KVH == 0 (query head h reads kv
  // head h / (H/KVH)); dims 0-2 may be strided, D contiguous; out[B,T,H,D] likewise.
  // lse[B,H,T] (stats_dtype, contiguous) receives each query row's logsumexp of scaled scores.
  // window == 0: query i sees keys 0..i; window > 0: keys j with i - window < j <= i.
  virtual void attention_forward(Tensor& out, Tensor& lse, const Tensor& q, const Tensor& k,
                                 const Tensor& v, double scale, int64_t window) = 0;
  // dq, dk, dv are overwritten (same layout rules as q, k, v).
  virtual void attention_backward(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout,
                                  const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, double scale,
                                  int64_t window) = 0;

  // ---- attention over a key/value cache (generation: model/kv_cache.h) ------------------------
  // cache[B, S, KVH, D] (contiguous) positions position .. position + T - 1 of every sequence =
  // x[B, T, KVH, D] (dims 0-2 of x may be strided, D contiguous; x has cache's dtype). ShapeError
  // when position < 0 or position + T > S (the cache is full) or the shapes disagree.
  virtual void kv_cache_write(Tensor& cache, const Tensor& x, int64_t position) = 0;
  // out[B, Tq, H, D] = causal attention of q[B, Tq, H, D] over the first key_count positions of
  // k_cache and v_cache [B, S, KVH, D] (contiguous, Tq <= key_count <= S): query row i sits at
  // position key_count - Tq + i and sees the keys at or before it (within `window` as
  // attention_forward). q and out: dims 0-2 may be strided, D contiguous. Nothing is kept for a
  // backward. Matches attention_forward's rows when q is the last Tq rows of the keys' sequence.
  virtual void attention_forward_cached(Tensor& out, const Tensor& q, const Tensor& k_cache,
                                        const Tensor& v_cache, int64_t key_count, double scale,
                                        int64_t window) = 0;

  // ---- mixture of experts (model/moe_feed_forward.h) --------------------------------------------
  // N tokens each choose k of E experts; the N*k (token, choice) pairs run through their
  // experts grouped by expert ("slots" in expert order), and each token's output is the weighted
  // sum of its k results. Argument checks: backend/moe_shapes.h. Index tensors are i32 and
  // contiguous; every op is deterministic.
  //
  // expert_ids[N, k] = each row's k largest logits of logits[N, E] (contiguous, any floating
  // dtype), largest first, the lower expert id first among equal logits; weights[N, k]
  // (stats_dtype of logits) = their softmax probabilities over all E, divided by the sum of the
  // k when `normalize` (Mixtral; equal to the softmax over the k selected logits). Computed in
  // f32 (f64 for f64 logits). 1 <= k <= E.
  virtual void moe_route(Tensor& expert_ids, Tensor& weights, const Tensor& logits,
                         bool normalize) = 0;
  // The dispatch order: the pairs sorted by expert, then token, then choice. counts[E] = pairs
  // per expert; source_rows[N*k] = the token (row) of each slot; slot_of[N, k] = the slot of
  // pair (n, j). An expert id outside [0, num_experts) is an invariant violation of the caller
  // (moe_route never makes one); the CPU backend throws for it.
  virtual void moe_dispatch(Tensor& counts, Tensor& source_rows, Tensor& slot_of,
                            const Tensor& expert_ids, int64_t num_experts) = 0;
  // out[n, :] = sum over j = 0..k-1 in order of weights[n, j] * rows[slot_of[n, j], :], summed
  // in f32 (f64 for f64 rows) and rounded once; unit weights when weights == nullptr (the
  // backward of gathering each token into its k slots). rows [N*k, C] and out [N, C]
  // contiguous, one dtype; weights [N, k] stats_dtype.
  virtual void moe_combine(Tensor& out, const Tensor& rows, const Tensor& slot_of,
                           const Tensor* weights) = 0;
  // The backward of moe_combine with weights: d_rows[slot_of[n, j], :] = weights[n, j] *
  // dout[n, :] (every slot overwritten once) and d_weights[n, j] (stats_dtype, overwritten) =
  // dot(dout[n, :], rows[slot_of[n, j], :]) summed in f32 (f64) over columns in order.
  virtual void moe_combine_backward(Tensor& d_rows, Tensor& d_weights, const Tensor& dout,
                                    const Tensor& rows, const Tensor& slot_of,
                                    const Tensor& weights) = 0;
  // The backward of moe_route's weights (its choice is piecewise constant): dlogits[N, E]
  // (logits' dtype, overwritten). normalize: dl[e_j] = w_j (d_j - sum_i w_i d_i), zero for the
  // experts not chosen; otherwise dl[e] = p_e (d'_e - sum_j w_j d_j) with p = softmax(logits)
  // and d'_e = d_j for e = e_j, else 0. d = d_weights; w = weights; computed as moe_route.
  virtual void moe_route_backward(Tensor& dlogits, const Tensor& d_weights,
                                  const Tensor& expert_ids, const Tensor& weights,
                                  const Tensor& logits, bool normalize) = 0;
  // The router's load-balancing loss (model/router_balance.h) reads the mean softmax of each
  // expert: sums[E] (f64, this device; += when accumulate) = sum over rows n in order of
  // softmax(logits[n, :]) (computed as moe_route computes it, summed in f64).
  virtual void moe_router_prob_sums(Tensor& sums, const Tensor& logits, bool accumulate) = 0;
  // Its backward, for a loss sum_n sum_e g_e p[n, e] with p = softmax(logits) and g =
  // scale * prob_grad (f64 [E]): dlogits[n, e] += p[n, e] (g_e - sum_e' p[n, e'] g_e'), in f32
  // (f64 for f64 logits), accumulated into dlogits (logits' shape and dtype) as moe_route's
  // gradient is (after moe_route_backward overwrote it).
  virtual void moe_router_balance_backward(Tensor& dlogits, const Tensor& logits,
                                           const Tensor& prob_grad, double scale) = 0;

  // ---- loss ----------------------------------------------------------------------------------
  // Fused softmax + cross-entropy over logits[N,V] with targets[N] (i32/i64). losses[N]
  // (dtype of logits) gets -log softmax(logits)[target] (0 where target == ignore_index).
  // When dlogits != nullptr it gets grad_scale * (softmax - onehot(target)) (zero rows where
  // ignored); dlogits may alias logits (the same view). Probabilities are never stored. A target
  // outside [0, V) that is not ignore_index throws zero::Error. logits and dlogits may be
  // row-strided.
  virtual void softmax_cross_entropy(Tensor& losses, Tensor* dlogits, const Tensor& logits,
                                     const Tensor& targets, int64_t ignore_index,
                                     double grad_scale) = 0;

  // ---- vocabulary slices (tensor parallelism: model/vocab_parallel.h) --------------------------
  // A rank holds rows [first_id, first_id + table rows) of an embedding table, or columns
  // [first_column, first_column + V_local) of the logits. The full logits row is never needed:
  // a group runs the three cross-entropy passes with an all-reduce (max, then sum) between them.
  // Ids/targets are not range-checked (another rank's id is legal); ids as embedding_forward.
  //
  // out[N,C] = table[ids[n] - first_id, :] for ids in the slice, a zero row otherwise (with
  // accumulate: += for ids in the slice, the row untouched otherwise).
  virtual void embedding_forward_slice(Tensor& out, const Tensor& ids, const Tensor& table,
                                       int64_t first_id, bool accumulate) = 0;
  // dtable[V_local,C] += dout rows of the ids in the slice (deterministic order).
  virtual void embedding_backward_slice(Tensor& dtable, const Tensor& dout, const Tensor& ids,
                                        int64_t first_id) = 0;
  // row_max[N] (f64) = the largest of each row of logits[N, V_local].
  virtual void cross_entropy_slice_max(Tensor& row_max, const Tensor& logits) = 0;
  // With the group's row_max: sum_exp[N] (f64) = sum_j exp(logits[n,j] - row_max[n]) over this
  // slice; target_logit[N] (f64) = logits[n, targets[n] - first_column] when the target is in
  // this slice, else 0 (so the group's sums give the full row's values).
  virtual void cross_entropy_slice_sums(Tensor& sum_exp, Tensor& target_logit,
                                        const Tensor& logits, const Tensor& row_max,
                                        const Tensor& targets, int64_t first_column) = 0;
  // With the group's row_max, sum_exp and target_logit: losses[N] (stats_dtype of logits) =
  // log(sum_exp) + row_max - target_logit, 0 where targets == ignore_index; dlogits (optional,
  // may alias logits) = grad_scale * (softmax - onehot) on this slice's columns, zero rows where
  // ignored. Together: softmax_cross_entropy of the full row, up to the order of the sums.
  virtual void cross_entropy_slice_finish(Tensor& losses, Tensor* dlogits, const Tensor& logits,
                                          const Tensor& row_max, const Tensor& sum_exp,
                                          const Tensor& target_logit, const Tensor& targets,
                                          int64_t first_column, int64_t ignore_index,
                                          double grad_scale) = 0;

  // ---- reductions into a device scalar --------------------------------------------------------
  // out[0] (f64 [1], on this device) = sum(x^2) over every element of contiguous x, accumulated
  // in f64 (out[0] += ... when accumulate). Any Inf/NaN element makes it non-finite: the
  // overflow check relies on that. Deterministic.
  virtual void sum_squares(Tensor& out, const Tensor& x, bool accumulate) = 0;
  // out[0] (f64 [1]) = alpha * sum(x) (+= when accumulate), accumulated in f64. Deterministic.
  virtual void sum(Tensor& out, const Tensor& x, double alpha, bool accumulate) = 0;
  // sum(x^2) returned to the host: sum_squares + read_scalar (one counted read; diagnostics
  // and tests; the training step keeps its norm on the device).
  double squared_norm(const Tensor& x);

  // ---- optimizer updates (flat f32 buffers; src/optim owns the semantics) --------------------
  // params, grads and every state buffer are contiguous f32 of the same numel - except grads,
  // which may also be bf16 or f16 (held gradients stored in the parameters' dtype; widened
  // exactly, they update as an f32 gradient of the same values; with param_copy, its dtype must
  // then be theirs). segments cover the elements to update (each with its weight-decay flag).
  // State per kind:
  //   kAdam: {exp_avg, exp_avg_sq}; kLamb: {exp_avg, exp_avg_sq}; kLion: {exp_avg};
  //   kAdagrad: {sum_sq}; kMomentum: {exp_avg}; kFrozenVarianceAdam: {exp_avg, exp_avg_sq}
  //   (its grads are not read, but must still have params' shape).
  virtual void optimizer_update(OptimizerKind kind, Tensor& params, const Tensor& grads,
                                std::span<Tensor> state, std::span<const ParamSegment> segments,
                                const OptimizerHyper& hyper) = 0;
  // optimizer_update, also storing every updated element into `param_copy` (contiguous f32,
  // bf16 or f16 of params' numel) rounded to nearest even as Backend::copy rounds: the update
  // writing the working 16-bit copy of its master weights in the same pass. Elements outside
  // the segments are not updated, so param_copy must already hold them rounded. The default
  // runs the update, then copies every element; a device backend fuses the two.
  virtual void optimizer_update_with_copy(OptimizerKind kind, Tensor& params, const Tensor& grads,
                                          std::span<Tensor> state,
                                          std::span<const ParamSegment> segments,
                                          const OptimizerHyper& hyper, Tensor& param_copy);

  // ---- 1-bit compression with error feedback (1-bit Adam; comm/compressed_all_reduce.h) ------
  // Layout and buffer shapes: backend/onebit_layout.h. A sign is bit (7 - i % 8) of byte i / 8 of
  // its chunk: 1 for an element >= 0 (and for NaN, as DeepSpeed's sign().add(1).bool()), 0 for
  // one < 0; it decodes to +1 / -1, so an exact zero is sent as +scale. Norms are summed in f64
  // and each scale rounded to f32; the rest is f32 arithmetic. Deterministic.
  //
  // Worker side: per segment s, b = values[s] zero-padded to s.padded, plus worker_error[s];
  // scales[s] = ||b|| / sqrt(s.padded); worker_error[s] = b - scales[s] * sign(b); the signs
  // of chunk r of s go to block r of `bits` (u8 [world * block_bytes]).
  virtual void onebit_worker_compress(Tensor& bits, Tensor& scales, Tensor& worker_error,
                                      const Tensor& values, const OneBitLayout& layout) = 0;
  // Server side, over the chunk this rank serves: block r of `bits_in` (u8 [world *
  // block_bytes]) holds rank r's signs of that chunk of every segment and scales_in[r * S + s]
  // (f32 [world * S]) its scale of segment s. Per segment, c = the sum over r in rank order of
  // sign * float(scales_in[r * S + s] * (1 / world)), plus server_error[s]; scales_out[s] =
  // ||c|| / sqrt(chunk); server_error[s] = c - scales_out[s] * sign(c); the signs into
  // bits_out (u8 [block_bytes]).
  virtual void onebit_server_compress(Tensor& bits_out, Tensor& scales_out,
                                      Tensor& server_error, const Tensor& bits_in,
                                      const Tensor& scales_in, const OneBitLayout& layout) = 0;
  // The all-gathered result: element i of segment s, in chunk r = i / chunk, becomes
  // sign * scales[r * S + s], for i < s.length (values outside the segments are untouched).
  virtual void onebit_decompress(Tensor& values, const Tensor& bits, const Tensor& scales,
                                 const OneBitLayout& layout) = 0;

  // ---- int8 group quantization (ZeRO++'s quantized gathers and reductions) -------------------
  // The arithmetic and the packed layout: backend/int8_groups.h. `values` is contiguous f32, bf16
  // or f16 (read as f32); `packed` contiguous u8 [Int8Groups{values.numel(), group}
  // .packed_bytes()]. Each scale is an f32 division, each code a round-half-to-even f32 division;
  // every backend gives the same bytes.
  virtual void quantize_int8_groups(Tensor& packed, const Tensor& values, int64_t group) = 0;
  // values = code * scale (f32 product), or with `accumulate` values + code * scale (f32 sum,
  // no fused multiply-add), rounded to values' dtype to nearest even.
  virtual void dequantize_int8_groups(Tensor& values, const Tensor& packed, int64_t group,
                                      bool accumulate) = 0;

 protected:
  // The copies behind the counted wrappers (whole contiguous tensors).
  virtual void do_copy_from_host(Tensor& dst, const void* src) = 0;
  virtual void do_copy_to_host(void* dst, const Tensor& src) = 0;
  // The asynchronous download's copy (checked by copy_to_pinned_async). The default, for
  // backends that run every op before returning, is do_copy_to_host.
  virtual void do_copy_to_pinned_async(Tensor& pinned_dst, const Tensor& src) {
    do_copy_to_host(pinned_dst.raw_data(), src);
  }
  virtual void do_copy_from_pinned_async(Tensor& dst, const Tensor& pinned_src) {
    do_copy_from_host(dst, pinned_src.raw_data());
  }
  virtual void do_synchronize() = 0;
  // Called when the current stream changes (the profiling backend passes it on to the backend
  // it wraps; the CUDA backend needs nothing: its ops read the current stream as they enqueue).
  virtual void on_stream_change(StreamKind /*stream*/) {}

 private:
  // Throws ShapeError unless `pinned` is a contiguous pinned_host_allocator() tensor of
  // `device_tensor`'s bytes (contiguous, on this device); `host_side` names it in the message.
  void check_pinned_pair(const char* op, const char* host_side, const Tensor& pinned,
                         const Tensor& device_tensor);

  TransferStats transfers_;
  StreamKind current_stream_ = StreamKind::kCompute;
};

// Selects `stream` as the backend's current stream for the guard's lifetime.
class StreamGuard {
 public:
  StreamGuard(Backend& backend, StreamKind stream)
      : backend_(backend), previous_(backend.current_stream()) {
    backend_.set_current_stream(stream);
  }
  ~StreamGuard() { backend_.set_current_stream(previous_); }
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Backend& backend_;
  StreamKind previous_;
};

// Throws ShapeError naming `op` where the residual of a *norm_backward_add is dx's own buffer
// or differs from dx in shape or dtype (what every backend's override checks first).
void check_norm_residual(const Tensor& dx, const Tensor& residual, const char* op);

}  // namespace zero::backend

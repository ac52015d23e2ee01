// Mixture-of-experts routing on the GPU (Backend::moe_route, moe_dispatch, moe_combine,
// moe_combine_backward, moe_route_backward). Routing is a thread per token (E is tens to a few
// hundred experts; the router's matrix product dominates), the dispatch order a stable CUB radix
// sort of the expert ids (equal ids keep their pair order: expert, then token, then choice, as
// the CPU's counting sort), and the combines a block per token over its columns. Sums run in a
// fixed order (a block reduction's fixed tree for the dot products), so results do not depend on
// timing.
#include <cmath>

#include "backend/cuda/cuda_device_math.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_pair_sort.cuh"

namespace zero::backend::cuda {
namespace {

constexpr int kThreads = 256;

// The selection order of two logits: larger first, the lower id first among equals. A NaN
// counts as -Inf here, so a row with NaNs still selects k valid ids (its weights are NaN, which
// the step's overflow check sees).
__device__ __forceinline__ float selection_key(float x) { return isnan(x) ? -INFINITY : x; }
__device__ __forceinline__ bool selected_before(float a, int64_t a_id, float b, int64_t b_id) {
  return a > b || (a == b && a_id < b_id);
}

// A row's softmax maximum and sum of exp(x - max), as the CPU's softmax_row computes them.
template <typename T>
__device__ __forceinline__ void softmax_stats(const T* row, int64_t experts, float& max,
                                              float& sum) {
  max = load_f32(row, 0);
  for (int64_t e = 1; e < experts; ++e) max = fmaxf(max, load_f32(row, e));
  sum = 0.0f;
  for (int64_t e = 0; e < experts; ++e) sum += expf(load_f32(row, e) - max);
}

template <typename T>
__global__ void moe_route_kernel(int32_t* ids, float* weights, const T* logits, int64_t tokens,
                                 int64_t experts, int64_t k, bool normalize) {
  for (int64_t n = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; n < tokens;
       n += int64_t{gridDim.x} * blockDim.x) {
    const T* row = logits + n * experts;
    float max = 0.0f, sum = 0.0f;
    softmax_stats(row, experts, max, sum);
    // k passes, each taking the best expert after the previous one in selection order.
    float previous = INFINITY;
    int64_t previous_id = -1;
    float chosen = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      int64_t best = -1;
      float best_key = -INFINITY;
      for (int64_t e = 0; e < experts; ++e) {
        const float key = selection_key(load_f32(row, e));
        if (!selected_before(previous, previous_id, key, e)) continue;
        if (best < 0 || selected_before(key, e, best_key, best)) {
          best = e;
          best_key = key;
        }
      }
      previous = best_key;
      previous_id = best;
      const float p = expf(load_f32(row, best) - max) / sum;
      ids[n * k + j] = static_cast<int32_t>(best);
      weights[n * k + j] = p;
      chosen += p;
    }
    if (normalize) {
      for (int64_t j = 0; j < k; ++j) weights[n * k + j] = weights[n * k + j] / chosen;
    }
  }
}

// Sort keys: the expert id, or `experts` (sorted last) for an invalid one, which is reported.
__global__ void moe_keys_kernel(uint32_t* keys, uint32_t* pairs, const int32_t* ids,
                                int64_t slots, int64_t experts, KernelErrorSlot* error) {
  for (int64_t s = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; s < slots;
       s += int64_t{gridDim.x} * blockDim.x) {
    const int64_t id = ids[s];
    const bool valid = id >= 0 && id < experts;
    if (!valid) report_kernel_error(error, kMoeExpertOutOfRange, id, experts, s);
    keys[s] = static_cast<uint32_t>(valid ? id : experts);
    pairs[s] = static_cast<uint32_t>(s);
  }
}

// Slot i holds pair sorted_pairs[i]: its token is the source row; the pair learns its slot.
__global__ void moe_slots_kernel(int32_t* source_rows, int32_t* slot_of, int32_t* counts,
                                 const uint32_t* sorted_keys, const uint32_t* sorted_pairs,
                                 int64_t slots, int64_t experts, int64_t k) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < slots;
       i += int64_t{gridDim.x} * blockDim.x) {
    const uint32_t pair = sorted_pairs[i];
    source_rows[i] = static_cast<int32_t>(pair / static_cast<uint64_t>(k));
    slot_of[pair] = static_cast<int32_t>(i);
    // Integer additions: the counts do not depend on their order.
    if (sorted_keys[i] < experts) atomicAdd(&counts[sorted_keys[i]], 1);
  }
}

template <typename T>
__global__ void moe_combine_kernel(T* out, const T* rows, const int32_t* slot_of,
                                   const float* weights, int64_t tokens, int64_t k,
                                   int64_t columns) {
  for (int64_t n = blockIdx.x; n < tokens; n += gridDim.x) {
    for (int64_t c = threadIdx.x; c < columns; c += blockDim.x) {
      float acc = 0.0f;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t slot = slot_of[n * k + j];
        const float w = weights != nullptr ? weights[n * k + j] : 1.0f;
        acc += w * load_f32(rows, slot * columns + c);
      }
      store_f32(out, n * columns + c, acc);
    }
  }
}

template <typename T>
__global__ void moe_combine_backward_kernel(T* d_rows, float* d_weights, const T* dout,
                                            const T* rows, const int32_t* slot_of,
                                            const float* weights, int64_t tokens, int64_t k,
                                            int64_t columns) {
  __shared__ float shared[kWarp];
  for (int64_t n = blockIdx.x; n < tokens; n += gridDim.x) {
    for (int64_t j = 0; j < k; ++j) {
      const int64_t slot = slot_of[n * k + j];
      const float w = weights[n * k + j];
      float dot = 0.0f;
      for (int64_t c = threadIdx.x; c < columns; c += blockDim.x) {
        const float g = load_f32(dout, n * columns + c);
        store_f32(d_rows, slot * columns + c, w * g);
        dot += g * load_f32(rows, slot * columns + c);
      }
      dot = block_sum(dot, shared);
      if (threadIdx.x == 0) d_weights[n * k + j] = dot;
    }
  }
}

template <typename T>
__global__ void moe_route_backward_kernel(T* dlogits, const float* d_weights, const int32_t* ids,
                                          const float* weights, const T* logits, int64_t tokens,
                                          int64_t experts, int64_t k, bool normalize) {
  for (int64_t n = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; n < tokens;
       n += int64_t{gridDim.x} * blockDim.x) {
    const float* w = weights + n * k;
    const float* d = d_weights + n * k;
    const int32_t* id = ids + n * k;
    T* out = dlogits + n * experts;
    float weighted = 0.0f;  // sum_j w_j d_j
    for (int64_t j = 0; j < k; ++j) weighted += w[j] * d[j];
    if (normalize) {
      for (int64_t e = 0; e < experts; ++e) store_f32(out, e, 0.0f);
      for (int64_t j = 0; j < k; ++j) store_f32(out, id[j], w[j] * (d[j] - weighted));
      continue;
    }
    const T* row = logits + n * experts;
    float max = 0.0f, sum = 0.0f;
    softmax_stats(row, experts, max, sum);
    for (int64_t e = 0; e < experts; ++e) {
      float chosen_d = 0.0f;  // d'_e: a row's k ids are distinct
      for (int64_t j = 0; j < k; ++j) chosen_d = id[j] == e ? d[j] : chosen_d;
      const float p = expf(load_f32(row, e) - max) / sum;
      store_f32(out, e, p * (chosen_d - weighted));
    }
  }
}

// Each row's softmax maximum and sum, for the per-expert sums below.
template <typename T>
__global__ void moe_row_softmax_stats_kernel(float* stats, const T* logits, int64_t tokens,
                                             int64_t experts) {
  for (int64_t n = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; n < tokens;
       n += int64_t{gridDim.x} * blockDim.x) {
    const T* row = logits + n * experts;
    float max = 0.0f, sum = 0.0f;
    softmax_stats(row, experts, max, sum);
    stats[2 * n] = max;
    stats[2 * n + 1] = sum;
  }
}

// A block per expert: its probability summed over the rows in f64 (a fixed tree).
template <typename T>
__global__ void moe_prob_sums_kernel(double* sums, const T* logits, const float* stats,
                                     int64_t tokens, int64_t experts, bool accumulate) {
  __shared__ double shared[kWarp];
  for (int64_t e = blockIdx.x; e < experts; e += gridDim.x) {
    double acc = 0.0;
    for (int64_t n = threadIdx.x; n < tokens; n += blockDim.x) {
      acc += static_cast<double>(expf(load_f32(logits, n * experts + e) - stats[2 * n]) /
                                 stats[2 * n + 1]);
    }
    acc = block_sum(acc, shared);
    if (threadIdx.x == 0) sums[e] = accumulate ? sums[e] + acc : acc;
  }
}

template <typename T>
__global__ void moe_balance_backward_kernel(T* dlogits, const T* logits, const double* prob_grad,
                                            double scale, int64_t tokens, int64_t experts) {
  for (int64_t n = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; n < tokens;
       n += int64_t{gridDim.x} * blockDim.x) {
    const T* row = logits + n * experts;
    T* out = dlogits + n * experts;
    float max = 0.0f, sum = 0.0f;
    softmax_stats(row, experts, max, sum);
    float mean = 0.0f;  // sum_e p_e g_e
    for (int64_t e = 0; e < experts; ++e) {
      mean += expf(load_f32(row, e) - max) / sum * static_cast<float>(scale * prob_grad[e]);
    }
    for (int64_t e = 0; e < experts; ++e) {
      const float p = expf(load_f32(row, e) - max) / sum;
      const float g = static_cast<float>(scale * prob_grad[e]);
      store_f32(out, e, load_f32(out, e) + p * (g - mean));
    }
  }
}

}  // namespace

void launch_moe_route(int32_t* expert_ids, float* weights, const void* logits, DType dtype,
                      int64_t tokens, int64_t experts, int64_t k, bool normalize,
                      cudaStream_t stream) {
  if (tokens == 0) return;
  dispatch_storage(dtype, "moe_route", [&](auto tag) {
    using T = decltype(tag);
    moe_route_kernel<T><<<grid_for(tokens, kThreads), kThreads, 0, stream>>>(
        expert_ids, weights, static_cast<const T*>(logits), tokens, experts, k, normalize);
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

size_t moe_dispatch_scratch_bytes(int64_t slots) {
  return pair_sort_scratch_bytes(slots);
}

void launch_moe_dispatch(int32_t* counts, int32_t* source_rows, int32_t* slot_of,
                         const int32_t* expert_ids, int64_t tokens, int64_t k, int64_t experts,
                         void* scratch, size_t scratch_bytes, KernelErrorSlot* error,
                         cudaStream_t stream) {
  ZERO_CUDA_CHECK(cudaMemsetAsync(counts, 0, static_cast<size_t>(experts) * sizeof(int32_t),
                                  stream));
  const int64_t slots = tokens * k;
  if (slots == 0) return;
  ZERO_CHECK(experts < UINT32_MAX,
             "moe_dispatch: " << experts << " experts exceed the 32-bit sort keys");
  const PairSortBuffers sort = carve_pair_sort(scratch, scratch_bytes, slots, "moe_dispatch");
  moe_keys_kernel<<<grid_for(slots, kThreads), kThreads, 0, stream>>>(
      sort.keys_in, sort.values_in, expert_ids, slots, experts, error);
  ZERO_CUDA_CHECK_LAUNCH();
  // The pairs of one expert keep their order (keys <= experts: invalid ones sort last).
  stable_pair_sort(sort, slots, static_cast<uint64_t>(experts), "moe_dispatch", stream);
  moe_slots_kernel<<<grid_for(slots, kThreads), kThreads, 0, stream>>>(
      source_rows, slot_of, counts, sort.keys_out, sort.values_out, slots, experts, k);
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_moe_combine(void* out, const void* rows, DType dtype, const int32_t* slot_of,
                        const float* weights, int64_t tokens, int64_t k, int64_t columns,
                        cudaStream_t stream) {
  if (tokens == 0 || columns == 0) return;
  dispatch_storage(dtype, "moe_combine", [&](auto tag) {
    using T = decltype(tag);
    moe_combine_kernel<T><<<row_grid(tokens), kThreads, 0, stream>>>(
        static_cast<T*>(out), static_cast<const T*>(rows), slot_of, weights, tokens, k, columns);
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_moe_combine_backward(void* d_rows, float* d_weights, const void* dout,
                                 const void* rows, DType dtype, const int32_t* slot_of,
                                 const float* weights, int64_t tokens, int64_t k,
                                 int64_t columns, cudaStream_t stream) {
  if (tokens == 0) return;
  dispatch_storage(dtype, "moe_combine_backward", [&](auto tag) {
    using T = decltype(tag);
    moe_combine_backward_kernel<T><<<row_grid(tokens), kThreads, 0, stream>>>(
        static_cast<T*>(d_rows), d_weights, static_cast<const T*>(dout),
        static_cast<const T*>(rows), slot_of, weights, tokens, k, columns);
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_moe_route_backward(void* dlogits, const float* d_weights, const int32_t* expert_ids,
                               const float* weights, const void* logits, DType dtype,
                               int64_t tokens, int64_t experts, int64_t k, bool normalize,
                               cudaStream_t stream) {
  if (tokens == 0) return;
  dispatch_storage(dtype, "moe_route_backward", [&](auto tag) {
    using T = decltype(tag);
    moe_route_backward_kernel<T><<<grid_for(tokens, kThreads), kThreads, 0, stream>>>(
        static_cast<T*>(dlogits), d_weights, expert_ids, weights, static_cast<const T*>(logits),
        tokens, experts, k, normalize);
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

size_t moe_router_prob_sums_scratch_bytes(int64_t tokens) {
  return static_cast<size_t>(tokens) * 2 * sizeof(float);
}

void launch_moe_router_prob_sums(double* sums, const void* logits, DType dtype, int64_t tokens,
                                 int64_t experts, bool accumulate, void* scratch,
                                 cudaStream_t stream) {
  if (tokens == 0) {
    if (!accumulate) {
      ZERO_CUDA_CHECK(cudaMemsetAsync(sums, 0, static_cast<size_t>(experts) * sizeof(double),
                                      stream));
    }
    return;
  }
  auto* stats = static_cast<float*>(scratch);
  dispatch_storage(dtype, "moe_router_prob_sums", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(logits);
    moe_row_softmax_stats_kernel<T><<<grid_for(tokens, kThreads), kThreads, 0, stream>>>(
        stats, x, tokens, experts);
    moe_prob_sums_kernel<T><<<row_grid(experts), kThreads, 0, stream>>>(sums, x, stats, tokens,
                                                                         experts, accumulate);
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_moe_router_balance_backward(void* dlogits, const void* logits, DType dtype,
                                        const double* prob_grad, double scale, int64_t tokens,
                                        int64_t experts, cudaStream_t stream) {
  if (tokens == 0) return;
  dispatch_storage(dtype, "moe_router_balance_backward", [&](auto tag) {
    using T = decltype(tag);
    moe_balance_backward_kernel<T><<<grid_for(tokens, kThreads), kThreads, 0, stream>>>(
        static_cast<T*>(dlogits), static_cast<const T*>(logits), prob_grad, scale, tokens,
        experts);
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

}  // namespace zero::backend::cuda

// Vocabulary-slice kernels (tensor parallelism): embedding rows of a slice of the vocabulary,
// and the three passes of a cross-entropy whose logits row is split over ranks. Statistics are
// f64 (the group sums them across ranks); elements are read as f32 as the fused loss reads them.
// The embedding backward is deterministic without atomics and without sorting: one thread per
// channel walks the ids in position order (simple, not fast; a sorted version like
// cuda_embedding.cu's is the later optimisation).
#include "backend/cuda/cuda_device_math.cuh"
#include "backend/cuda/cuda_kernels.h"

namespace zero::backend::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;

template <typename Id>
__device__ __forceinline__ int64_t load_id(const Id* ids, int64_t i) {
  return static_cast<int64_t>(ids[i]);
}

template <typename T, typename Id>
__global__ void embedding_forward_slice_kernel(T* out, const Id* ids, const T* table, int64_t n,
                                               int64_t count, int64_t channels, int64_t first_id,
                                               bool accumulate) {
  const int64_t total = n * channels;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / channels, c = i % channels;
    const int64_t local = load_id(ids, row) - first_id;
    const bool mine = local >= 0 && local < count;
    if (accumulate) {
      if (mine) store_f32(out, i, load_f32(out, i) + load_f32(table, local * channels + c));
    } else {
      store_f32(out, i, mine ? load_f32(table, local * channels + c) : 0.0f);
    }
  }
}

template <typename T, typename Id>
__global__ void embedding_backward_slice_kernel(T* dtable, const T* dout, const Id* ids,
                                                int64_t n, int64_t count, int64_t channels,
                                                int64_t first_id) {
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < channels;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    for (int64_t row = 0; row < n; ++row) {
      const int64_t local = load_id(ids, row) - first_id;
      if (local < 0 || local >= count) continue;
      const int64_t at = local * channels + c;
      store_f32(dtable, at, load_f32(dtable, at) + load_f32(dout, row * channels + c));
    }
  }
}

template <typename T>
__global__ void slice_max_kernel(double* row_max, const T* logits, int64_t rows, int64_t cols) {
  __shared__ float shared[kWarp];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float m = -INFINITY;
    const T* x = logits + r * cols;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, load_f32(x, j));
    m = block_max(m, shared);
    if (threadIdx.x == 0) row_max[r] = static_cast<double>(m);
  }
}

template <typename T, typename Id>
__global__ void slice_sums_kernel(double* sum_exp, double* target_logit, const T* logits,
                                  const double* row_max, const Id* targets, int64_t rows,
                                  int64_t cols, int64_t first_column) {
  __shared__ double shared[kWarp];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* x = logits + r * cols;
    const double m = row_max[r];
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      sum += exp(static_cast<double>(load_f32(x, j)) - m);
    }
    sum = block_sum(sum, shared);
    if (threadIdx.x == 0) {
      sum_exp[r] = sum;
      const int64_t local = load_id(targets, r) - first_column;
      target_logit[r] = local >= 0 && local < cols ? static_cast<double>(load_f32(x, local)) : 0.0;
    }
  }
}

template <typename T, typename L, typename Id>
__global__ void slice_finish_kernel(L* losses, T* dlogits, const T* logits, const double* row_max,
                                    const double* sum_exp, const double* target_logit,
                                    const Id* targets, int64_t rows, int64_t cols,
                                    int64_t first_column, int64_t ignore_index,
                                    double grad_scale) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t target = load_id(targets, r);
    const T* x = logits + r * cols;
    T* dl = dlogits != nullptr ? dlogits + r * cols : nullptr;
    if (target == ignore_index) {
      if (threadIdx.x == 0) store_f32(losses, r, 0.0f);
      if (dl != nullptr) {
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) store_f32(dl, j, 0.0f);
      }
      continue;
    }
    const double m = row_max[r], sum = sum_exp[r];
    if (threadIdx.x == 0) {
      store_f32(losses, r, static_cast<float>((m - target_logit[r]) + log(sum)));
    }
    if (dl == nullptr) continue;
    const int64_t local = target - first_column;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const double e = exp(static_cast<double>(load_f32(x, j)) - m);
      // At the target p - 1 as (e - sum) / sum: no cancellation when p is close to 1.
      const double g = j == local ? grad_scale * ((e - sum) / sum) : grad_scale * (e / sum);
      store_f32(dl, j, static_cast<float>(g));
    }
  }
}

unsigned row_grid(int64_t rows) { return static_cast<unsigned>(rows < kMaxBlocks ? rows : kMaxBlocks); }

template <typename Fn>
void with_ids(const void* ids, bool i64, Fn&& fn) {
  if (i64) {
    fn(static_cast<const int64_t*>(ids));
  } else {
    fn(static_cast<const int32_t*>(ids));
  }
}

}  // namespace

void launch_embedding_forward_slice(void* out, const void* ids, bool ids_i64, const void* table,
                                    DType dtype, int64_t n, int64_t count, int64_t channels,
                                    int64_t first_id, bool accumulate, cudaStream_t stream) {
  if (n == 0 || channels == 0) return;
  dispatch_storage(dtype, "embedding_forward_slice", [&](auto tag) {
    using T = decltype(tag);
    with_ids(ids, ids_i64, [&](const auto* id) {
      embedding_forward_slice_kernel<<<grid_for(n * channels, kThreads), kThreads, 0, stream>>>(
          static_cast<T*>(out), id, static_cast<const T*>(table), n, count, channels, first_id,
          accumulate);
    });
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_embedding_backward_slice(void* dtable, const void* dout, DType dtype, const void* ids,
                                     bool ids_i64, int64_t n, int64_t count, int64_t channels,
                                     int64_t first_id, cudaStream_t stream) {
  if (n == 0 || channels == 0) return;
  dispatch_storage(dtype, "embedding_backward_slice", [&](auto tag) {
    using T = decltype(tag);
    with_ids(ids, ids_i64, [&](const auto* id) {
      embedding_backward_slice_kernel<<<grid_for(channels, kThreads), kThreads, 0, stream>>>(
          static_cast<T*>(dtable), static_cast<const T*>(dout), id, n, count, channels, first_id);
    });
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_cross_entropy_slice_max(double* row_max, const void* logits, DType dtype,
                                    int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows == 0) return;
  dispatch_storage(dtype, "cross_entropy_slice_max", [&](auto tag) {
    using T = decltype(tag);
    slice_max_kernel<<<row_grid(rows), kThreads, 0, stream>>>(
        row_max, static_cast<const T*>(logits), rows, cols);
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_cross_entropy_slice_sums(double* sum_exp, double* target_logit, const void* logits,
                                     DType dtype, const double* row_max, const void* targets,
                                     bool targets_i64, int64_t rows, int64_t cols,
                                     int64_t first_column, cudaStream_t stream) {
  if (rows == 0) return;
  dispatch_storage(dtype, "cross_entropy_slice_sums", [&](auto tag) {
    using T = decltype(tag);
    with_ids(targets, targets_i64, [&](const auto* tg) {
      slice_sums_kernel<<<row_grid(rows), kThreads, 0, stream>>>(
          sum_exp, target_logit, static_cast<const T*>(logits), row_max, tg, rows, cols,
          first_column);
    });
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_cross_entropy_slice_finish(void* losses, bool losses_f32, void* dlogits,
                                       const void* logits, DType dtype, const double* row_max,
                                       const double* sum_exp, const double* target_logit,
                                       const void* targets, bool targets_i64, int64_t rows,
                                       int64_t cols, int64_t first_column, int64_t ignore_index,
                                       double grad_scale, cudaStream_t stream) {
  if (rows == 0) return;
  dispatch_storage(dtype, "cross_entropy_slice_finish", [&](auto tag) {
    using T = decltype(tag);
    with_ids(targets, targets_i64, [&](const auto* tg) {
      if (losses_f32) {
        slice_finish_kernel<<<row_grid(rows), kThreads, 0, stream>>>(
            static_cast<float*>(losses), static_cast<T*>(dlogits), static_cast<const T*>(logits),
            row_max, sum_exp, target_logit, tg, rows, cols, first_column, ignore_index,
            grad_scale);
      } else {
        slice_finish_kernel<<<row_grid(rows), kThreads, 0, stream>>>(
            static_cast<T*>(losses), static_cast<T*>(dlogits), static_cast<const T*>(logits),
            row_max, sum_exp, target_logit, tg, rows, cols, first_column, ignore_index,
            grad_scale);
      }
    });
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

}  // namespace zero::backend::cuda

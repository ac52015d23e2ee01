// Embedding forward (a row gather) and backward (a scatter-add of dout rows into dtable rows),
// deterministic without atomics: the ids are sorted stably together with their positions (CUB
// radix sort), so each vocabulary row's occurrences sit together in position order; the warps at
// the first element of each run own that dtable row (a 64-channel chunk each) and add the dout
// rows in position order - the very order and f32 arithmetic of the CPU loop, so the result has
// the CPU's bits.
//
// Ids are validated on the device: an id outside [0, V) is skipped and reported through the
// KernelErrorSlot, which the backend turns into an Error at its next synchronisation.
#include "backend/cuda/cuda_device_math.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_pair_sort.cuh"

namespace zero::backend::cuda {
namespace {

constexpr int kThreads = 256;

template <typename Id>
__device__ __forceinline__ int64_t id_at(const void* ids, int64_t i) {
  return static_cast<int64_t>(static_cast<const Id*>(ids)[i]);
}

// One block per output row; threads over channels.
template <typename T, typename Id>
__global__ void embedding_forward_kernel(T* out, const void* ids, const T* table, int64_t n,
                                         int64_t vocab, int64_t channels, bool accumulate,
                                         KernelErrorSlot* error) {
  for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {
    const int64_t id = id_at<Id>(ids, row);
    if (id < 0 || id >= vocab) {
      if (threadIdx.x == 0) report_kernel_error(error, kEmbeddingIdOutOfRange, id, vocab, row);
      continue;
    }
    const T* src = table + id * channels;
    T* dst = out + row * channels;
    for (int64_t c = threadIdx.x; c < channels; c += blockDim.x) {
      const float v = load_f32(src, c);
      store_f32(dst, c, accumulate ? load_f32(dst, c) + v : v);
    }
  }
}

// Sort keys: the id, or `vocab` (sorted last, then skipped) for an invalid one.
template <typename Id>
__global__ void embedding_keys_kernel(uint32_t* keys, uint32_t* positions, const void* ids,
                                      int64_t n, int64_t vocab, KernelErrorSlot* error) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t id = id_at<Id>(ids, i);
    const bool valid = id >= 0 && id < vocab;
    if (!valid) report_kernel_error(error, kEmbeddingIdOutOfRange, id, vocab, i);
    keys[i] = static_cast<uint32_t>(valid ? id : vocab);
    positions[i] = static_cast<uint32_t>(i);
  }
}

// Warp per work item (sorted element, 64-channel chunk): the warp at the first element of a run
// of equal ids owns that chunk of the dtable row and adds the run's dout rows into it. Per
// channel the adds stay in position order, from the dtable's value: the CPU's bits.
//
// Why this shape: with a small or skewed vocabulary a run is long (the synthetic data has 16
// ids, so ~1000 occurrences each in a 16 Ki-token batch) and its sum is a sequential chain per
// channel. The chain's time is memory latency, not bandwidth, so the kernel spreads each run over
// as many warps as it has chunks and keeps 32 rows' loads in flight per warp: the lanes fetch 32
// positions at once, then every lane issues its loads for all 32 rows before the in-order adds.
// (The previous block-per-run walk loaded 4 rows at a time: ~0.6 ms of a GPT-2 step.)
constexpr int kChunkChannels = 64;   // 2 channels per lane
constexpr int kRowsInFlight = kWarp;

template <typename G, typename T>
__global__ void embedding_backward_kernel(G* dtable, const T* dout, const uint32_t* keys,
                                          const uint32_t* positions, int64_t n, int64_t vocab,
                                          int64_t channels, int64_t chunks) {
  const int lane = static_cast<int>(threadIdx.x) & (kWarp - 1);
  const int64_t first_warp = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / kWarp;
  const int64_t warps = int64_t{gridDim.x} * blockDim.x / kWarp;
  for (int64_t item = first_warp; item < n * chunks; item += warps) {
    const int64_t start = item / chunks;
    const uint32_t key = keys[start];
    // Warp-uniform: every lane reads the same keys.
    if (key >= vocab || (start > 0 && keys[start - 1] == key)) continue;
    // The run's end: the first index after start whose key differs (keys are sorted).
    int64_t lo = start + 1, hi = n;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (keys[mid] == key) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    const int64_t end = lo;
    const int64_t c = (item - start * chunks) * kChunkChannels + 2 * lane;
    const bool has0 = c < channels, has1 = c + 1 < channels;
    G* dst = dtable + static_cast<int64_t>(key) * channels;
    float acc0 = has0 ? load_f32(dst, c) : 0.0f;
    float acc1 = has1 ? load_f32(dst, c + 1) : 0.0f;
    for (int64_t base = start; base < end; base += kRowsInFlight) {
      const int64_t count = end - base < kRowsInFlight ? end - base : kRowsInFlight;
      const uint32_t my_position = lane < count ? positions[base + lane] : 0u;
      float v0[kRowsInFlight], v1[kRowsInFlight];
#pragma unroll
      for (int k = 0; k < kRowsInFlight; ++k) {
        const uint32_t position = __shfl_sync(0xffffffffu, my_position, k);
        const T* row = dout + static_cast<int64_t>(position) * channels;
        v0[k] = k < count && has0 ? load_f32(row, c) : 0.0f;
        v1[k] = k < count && has1 ? load_f32(row, c + 1) : 0.0f;
      }
      // Skipped, not added as zeros: 0 + (-0) would change a -0 sum's bits.
#pragma unroll
      for (int k = 0; k < kRowsInFlight; ++k) {
        if (k < count) {
          acc0 += v0[k];
          acc1 += v1[k];
        }
      }
    }
    if (has0) store_f32(dst, c, acc0);
    if (has1) store_f32(dst, c + 1, acc1);
  }
}

template <typename Fn>
void dispatch_ids(bool ids_i64, Fn&& fn) {
  if (ids_i64) {
    fn(int64_t{});
  } else {
    fn(int32_t{});
  }
}

}  // namespace

void launch_embedding_forward(void* out, const void* ids, bool ids_i64, const void* table,
                              DType dtype, int64_t n, int64_t vocab, int64_t channels,
                              bool accumulate, KernelErrorSlot* error, cudaStream_t stream) {
  if (n == 0 || channels == 0) return;
  dispatch_storage(dtype, "embedding_forward", [&](auto tag) {
    using T = decltype(tag);
    dispatch_ids(ids_i64, [&](auto id_tag) {
      using Id = decltype(id_tag);
      embedding_forward_kernel<T, Id><<<row_grid(n), kThreads, 0, stream>>>(
          static_cast<T*>(out), ids, static_cast<const T*>(table), n, vocab, channels, accumulate,
          error);
    });
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

size_t embedding_backward_scratch_bytes(int64_t n) {
  return pair_sort_scratch_bytes(n);
}

void launch_embedding_backward(void* dtable, DType dtable_dtype, const void* dout, DType dtype,
                               const void* ids, bool ids_i64, int64_t n, int64_t vocab,
                               int64_t channels,
                               void* scratch, size_t scratch_bytes, KernelErrorSlot* error,
                               cudaStream_t stream) {
  if (n == 0 || channels == 0) return;
  ZERO_CHECK(n <= INT32_MAX && vocab < UINT32_MAX,
             "embedding_backward: " << n << " ids over a vocabulary of " << vocab
                                    << " exceed the 32-bit sort keys");
  const PairSortBuffers sort = carve_pair_sort(scratch, scratch_bytes, n, "embedding_backward");
  dispatch_ids(ids_i64, [&](auto id_tag) {
    using Id = decltype(id_tag);
    embedding_keys_kernel<Id><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
        sort.keys_in, sort.values_in, ids, n, vocab, error);
  });
  ZERO_CUDA_CHECK_LAUNCH();
  // Equal ids keep their positions in increasing order (ids <= vocab: invalid ones sort last).
  stable_pair_sort(sort, n, static_cast<uint64_t>(vocab), "embedding_backward", stream);
  const uint32_t* keys_out = sort.keys_out;
  const uint32_t* pos_out = sort.values_out;
  // Enough warps for every work item, capped: the warps stride over the rest (most items are
  // not a run's first element and end at once).
  const int64_t chunks = (channels + kChunkChannels - 1) / kChunkChannels;
  constexpr int64_t kWarpsPerBlock = kThreads / kWarp, kMaxBlocks = 4096;
  const int64_t wanted = (n * chunks + kWarpsPerBlock - 1) / kWarpsPerBlock;
  const auto blocks = static_cast<unsigned>(wanted < kMaxBlocks ? wanted : kMaxBlocks);
  dispatch_storage(dtype, "embedding_backward", [&](auto tag) {
    using T = decltype(tag);
    dispatch_grad<T>(dtable_dtype, [&](auto grad_tag) {
      using G = decltype(grad_tag);
      embedding_backward_kernel<G, T><<<blocks, kThreads, 0, stream>>>(
          static_cast<G*>(dtable), static_cast<const T*>(dout), keys_out, pos_out, n, vocab,
          channels, chunks);
    });
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

}  // namespace zero::backend::cuda

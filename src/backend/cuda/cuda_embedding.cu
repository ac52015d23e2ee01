// Embedding forward (a row gather) and backward (a scatter-add of dout rows into dtable rows),
// deterministic without atomics: the ids are sorted stably together with their positions (CUB
// radix sort), so each vocabulary row's occurrences sit together in position order; the first
// element of each run owns that dtable row and adds the dout rows in position order - the very
// order and f32 arithmetic of the CPU loop, so the result has the CPU's bits.
//
// Ids are validated on the device: an id outside [0, V) is skipped and reported through the
// KernelErrorSlot, which the backend turns into an Error at its next synchronisation.
#include <cub/device/device_radix_sort.cuh>

#include "backend/cuda/cuda_device_math.cuh"
#include "backend/cuda/cuda_kernels.h"

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

// Block per sorted element: the first of each run of equal ids adds its run into dtable. The run's
// end is found by binary search over the sorted keys, so the summing loop has a known trip count
// and its loads pipeline; each thread keeps kChannelsPerThread channels in registers, so a run is
// walked once per channel group, not once per channel. Per channel the adds stay in position
// order: the CPU's bits. (A frequent token - hundreds of occurrences in a batch - made the
// previous one-channel-at-a-time walk, each step waiting on the key it compared, a long tail.)
constexpr int kChannelsPerThread = 4;

template <typename G, typename T>
__global__ void embedding_backward_kernel(G* dtable, const T* dout, const uint32_t* keys,
                                          const uint32_t* positions, int64_t n, int64_t vocab,
                                          int64_t channels) {
  for (int64_t start = blockIdx.x; start < n; start += gridDim.x) {
    const uint32_t key = keys[start];
    if (key >= vocab || (start > 0 && keys[start - 1] == key)) continue;
    // The first index after start whose key differs (keys are sorted).
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
    G* dst = dtable + static_cast<int64_t>(key) * channels;
    const int64_t stride = blockDim.x;
    for (int64_t c0 = threadIdx.x; c0 < channels; c0 += stride * kChannelsPerThread) {
      float acc[kChannelsPerThread];
#pragma unroll
      for (int k = 0; k < kChannelsPerThread; ++k) {
        const int64_t c = c0 + k * stride;
        acc[k] = c < channels ? load_f32(dst, c) : 0.0f;
      }
#pragma unroll 4
      for (int64_t j = start; j < end; ++j) {
        const T* row = dout + static_cast<int64_t>(positions[j]) * channels;
#pragma unroll
        for (int k = 0; k < kChannelsPerThread; ++k) {
          const int64_t c = c0 + k * stride;
          if (c < channels) acc[k] += load_f32(row, c);
        }
      }
#pragma unroll
      for (int k = 0; k < kChannelsPerThread; ++k) {
        const int64_t c = c0 + k * stride;
        if (c < channels) store_f32(dst, c, acc[k]);
      }
    }
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

unsigned row_grid(int64_t rows) {
  constexpr int64_t kMaxBlocks = 65535;
  return static_cast<unsigned>(rows < kMaxBlocks ? rows : kMaxBlocks);
}

// Scratch layout: keys_in, keys_out, positions_in, positions_out (n uint32 each, 256-byte
// aligned), then CUB's temporary storage.
size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

size_t cub_sort_bytes(int64_t n) {
  size_t bytes = 0;
  ZERO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, bytes, static_cast<uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr),
      static_cast<uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr), static_cast<int>(n)));
  return bytes;
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
  return 4 * aligned(static_cast<size_t>(n) * sizeof(uint32_t)) + aligned(cub_sort_bytes(n));
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
  const size_t array = aligned(static_cast<size_t>(n) * sizeof(uint32_t));
  ZERO_CHECK(scratch_bytes >= embedding_backward_scratch_bytes(n),
             "embedding_backward: scratch of " << scratch_bytes << " bytes is too small");
  char* base = static_cast<char*>(scratch);
  auto* keys_in = reinterpret_cast<uint32_t*>(base);
  auto* keys_out = reinterpret_cast<uint32_t*>(base + array);
  auto* pos_in = reinterpret_cast<uint32_t*>(base + 2 * array);
  auto* pos_out = reinterpret_cast<uint32_t*>(base + 3 * array);
  void* temp = base + 4 * array;
  size_t temp_bytes = scratch_bytes - 4 * array;

  dispatch_ids(ids_i64, [&](auto id_tag) {
    using Id = decltype(id_tag);
    embedding_keys_kernel<Id>
        <<<grid_for(n, kThreads), kThreads, 0, stream>>>(keys_in, pos_in, ids, n, vocab, error);
  });
  ZERO_CUDA_CHECK_LAUNCH();
  // Radix sort is stable: equal ids keep their positions in increasing order. Only the bits
  // that can be set are sorted (ids <= vocab).
  int end_bit = 1;
  while (end_bit < 32 && (uint64_t{1} << end_bit) <= static_cast<uint64_t>(vocab)) ++end_bit;
  size_t needed = 0;
  ZERO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, needed, keys_in, keys_out, pos_in,
                                                  pos_out, static_cast<int>(n), 0, end_bit,
                                                  stream));
  ZERO_CHECK(needed <= temp_bytes, "embedding_backward: CUB needs " << needed << " bytes of "
                                                                    << "temporary storage, "
                                                                    << temp_bytes << " given");
  ZERO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, pos_in,
                                                  pos_out, static_cast<int>(n), 0, end_bit,
                                                  stream));
  dispatch_storage(dtype, "embedding_backward", [&](auto tag) {
    using T = decltype(tag);
    dispatch_grad<T>(dtable_dtype, [&](auto grad_tag) {
      using G = decltype(grad_tag);
      embedding_backward_kernel<G, T><<<row_grid(n), kThreads, 0, stream>>>(
          static_cast<G*>(dtable), static_cast<const T*>(dout), keys_out, pos_out, n, vocab,
          channels);
    });
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

}  // namespace zero::backend::cuda

// Fused softmax cross-entropy over logits[N, V], one block per row; probabilities are never
// stored. Two kernels:
//  - staged (rows whose storage fits in shared memory: GPT-2's 50257 bf16 logits are 100 KB, two
//    blocks per H100 SM): the row is read from DRAM once with 16-byte loads into shared memory,
//    each thread's max and sum of exponentials are taken as the loads arrive, and the gradient
//    is computed from shared memory and written once with 16-byte stores. ~2 bytes of DRAM
//    traffic per byte of logits instead of ~3.
//  - streaming (anything larger, e.g. Qwen's 152k f32 rows, or ZERO_CUDA_CROSS_ENTROPY=streaming
//    for A/B timing): the row is read twice from global memory (online max and sum, gradient).
// Numerics: each thread keeps a running max and an f64 sum of expf(x - running max), rescaled
// when the max grows and finally moved to the row's max (a few f32 roundings per term,
// relative); the staged kernel adds one 16-byte vector's terms (8 bf16/f16 or 4 f32, each <= 1)
// in f32 before the f64 sum, a few more f32 roundings of the sum. The CPU sums exp(x - max) in
// f64: the results agree to ~1e-6 relative. The loss is (max - x_target) + log(sum) in f64 as on
// the CPU, the gradient expf(x - max) * (scale / sum), at the target scale * (e - sum) / sum (no
// cancellation when p is close to 1). A NaN logit makes the sum, the loss and the row's gradient
// NaN, as on the CPU. Each row's reductions have a fixed order: results are deterministic.
// dlogits may be the logits buffer: staged rows are wholly in shared memory before any write;
// streaming reads x_target first and each element just before the same thread overwrites it.
// Targets are validated on the device (KernelErrorSlot).
// Rows may be padded (the LM head's logits on this backend: Backend::preferred_row_elements):
// row r starts r * pitch elements in, and the padding after its vocab elements is not touched.
// Any pitch works: where a row is not 16-byte aligned its first elements up to the boundary go
// one by one, as do the last vocab % vector ones, and dlogits whose row alignment differs from
// the logits' is written one element at a time.
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_device_math.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_vector_io.cuh"

namespace zero::backend::cuda {
namespace {

constexpr int kThreads = 512;

// ---- streaming ---------------------------------------------------------------------------------

// The start both kernels share: false when row r is done - an ignored target (zero loss and
// gradient written) or one outside [0, vocab) (reported; the whole block skips the row and the
// error is thrown at the next sync). The same answer for every thread of the block.
template <typename T, typename L>
__device__ bool row_needs_loss(L* losses, T* dl, int64_t r, int64_t target, int64_t vocab,
                               int64_t ignore_index, KernelErrorSlot* error) {
  const bool ignored = target == ignore_index;
  if (!ignored && (target < 0 || target >= vocab)) {
    if (threadIdx.x == 0) report_kernel_error(error, kTargetOutOfRange, target, vocab, r);
    return false;
  }
  if (ignored) {
    if (threadIdx.x == 0) store_f32(losses, r, 0.0f);
    if (dl != nullptr) {
      for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) store_f32(dl, j, 0.0f);
    }
    return false;
  }
  return true;
}

template <typename T, typename L, typename Id>
__global__ void cross_entropy_kernel(L* losses, T* dlogits, int64_t dlogits_pitch,
                                     const T* logits, int64_t logits_pitch, const Id* targets,
                                     int64_t rows, int64_t vocab, int64_t ignore_index,
                                     double grad_scale, KernelErrorSlot* error) {
  __shared__ float shared_f[kWarp];
  __shared__ double shared_d[kWarp];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t target = static_cast<int64_t>(targets[r]);
    const T* x = logits + r * logits_pitch;
    T* dl = dlogits != nullptr ? dlogits + r * dlogits_pitch : nullptr;
    if (!row_needs_loss(losses, dl, r, target, vocab, ignore_index, error)) continue;
    const float x_target = load_f32(x, target);
    // One pass for the max and the sum of exponentials (online: each thread's sum is rescaled
    // when its running max grows), then each thread's sum moved to the block's max.
    float m_own = -INFINITY;
    double sum_own = 0.0;
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
      const float v = load_f32(x, j);
      if (v > m_own) {
        sum_own = sum_own * static_cast<double>(expf(m_own - v)) + 1.0;  // expf(-inf) = 0
        m_own = v;
      } else if (m_own != -INFINITY || v != v) {
        // -inf logits before any finite one add nothing; a NaN always lands in the sum (as on
        // the CPU, whose loss is NaN for any NaN logit), also before the thread's first finite.
        sum_own += static_cast<double>(expf(v - m_own));
      }
    }
    const float m = block_max(m_own, shared_f);
    const double moved = sum_own == 0.0 ? 0.0 : sum_own * static_cast<double>(expf(m_own - m));
    const double sum = block_sum(moved, shared_d);
    if (threadIdx.x == 0) {
      const double loss = (static_cast<double>(m) - static_cast<double>(x_target)) + log(sum);
      store_f32(losses, r, static_cast<float>(loss));
    }
    if (dl != nullptr) {
      const float factor = static_cast<float>(grad_scale / sum);
      for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
        const float e = expf(load_f32(x, j) - m);
        // p - 1 at the target as (e - sum) / sum: no cancellation when p is close to 1.
        const float g =
            j == target ? static_cast<float>(grad_scale * ((static_cast<double>(e) - sum) / sum))
                        : e * factor;
        store_f32(dl, j, g);
      }
    }
  }
}

// ---- staged in shared memory -------------------------------------------------------------------

// 16 bytes of elements: kLanes of T moved as one uint4 (ld/st.global.v4, ld/st.shared.v4) and
// taken apart with cuda_vector_io.cuh's shifts.
template <typename T>
constexpr int kVectorLanes = kVectorWidth<T>;

// Where a row splits into 16-byte vectors: elements [0, head) before the first 16-byte boundary,
// `vectors` whole vectors, then the tail [tail, vocab). `skew` is how many elements the row's
// start lies past a 16-byte boundary (addresses of T are sizeof(T)-aligned).
struct RowSplit {
  int skew;
  int64_t head, vectors, tail;
};
template <typename T>
__device__ __forceinline__ RowSplit split_row(const T* row, int64_t vocab) {
  constexpr int kLanes = kVectorLanes<T>;
  RowSplit s;
  s.skew = static_cast<int>(reinterpret_cast<uintptr_t>(row) % 16 / sizeof(T));
  const int64_t to_boundary = s.skew == 0 ? 0 : kLanes - s.skew;
  s.head = to_boundary < vocab ? to_boundary : vocab;
  s.vectors = (vocab - s.head) / kLanes;
  s.tail = s.head + s.vectors * kLanes;
  return s;
}

// Dynamic shared memory elements a row of `vocab` needs: the row shifted by up to a vector's
// lanes - 1 so that it has the 16-byte alignment of the row in global memory.
template <typename T>
size_t staged_row_bytes(int64_t vocab) {
  const size_t bytes = (static_cast<size_t>(vocab) + kVectorLanes<T>) * sizeof(T);
  return (bytes + 15) / 16 * 16;
}

// A thread's running max and its sum of exp(x - max) (f64), rebased when the max grows, as the
// streaming kernel keeps them. -inf logits add nothing while the max is still -inf (their
// exp(x - max) would be NaN); a NaN logit makes the sum NaN, also before the first finite one.
struct RunningSum {
  float max = -INFINITY;
  double sum = 0.0;
  // Makes `candidate` (the max of the next terms) the max if it is larger; returns what to
  // subtract from the next terms' logits.
  __device__ __forceinline__ float rebase(float candidate) {
    if (candidate > max) {
      sum *= static_cast<double>(expf(max - candidate));  // expf(-inf) = 0; NaN stays NaN
      max = candidate;
    }
    return max == -INFINITY ? 0.0f : max;
  }
  __device__ __forceinline__ void add_one(float logit) {
    sum += static_cast<double>(expf(logit - rebase(logit)));
  }
};

constexpr int kLoadUnroll = 4;  // vectors in flight per thread while staging (64 bytes)

template <typename T, typename L, typename Id>
__global__ void __launch_bounds__(kThreads, 2)
    staged_cross_entropy_kernel(L* losses, T* dlogits, int64_t dlogits_pitch, const T* logits,
                                int64_t logits_pitch, const Id* targets, int64_t rows,
                                int64_t vocab, int64_t ignore_index, double grad_scale,
                                KernelErrorSlot* error) {
  constexpr int kLanes = kVectorLanes<T>;
  extern __shared__ uint4 staged_words[];
  __shared__ float shared_f[kWarp];
  __shared__ double shared_d[kWarp];
  const int64_t step = blockDim.x;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t target = static_cast<int64_t>(targets[r]);
    const T* x = logits + r * logits_pitch;
    T* dl = dlogits != nullptr ? dlogits + r * dlogits_pitch : nullptr;
    if (!row_needs_loss(losses, dl, r, target, vocab, ignore_index, error)) continue;
    const RowSplit split = split_row(x, vocab);
    // s[j] holds x[j]; s + split.head is 16-byte aligned exactly where x + split.head is.
    T* s = reinterpret_cast<T*>(staged_words) + split.skew;
    const uint4* x_vectors = reinterpret_cast<const uint4*>(x + split.head);
    uint4* s_vectors = reinterpret_cast<uint4*>(s + split.head);

    // Stage the row (kLoadUnroll independent 16-byte loads per thread before their stores) and
    // take each thread's max and sum of exponentials while the loads stream in: a vector's lanes
    // relative to the running max, added in f32 (at most 8 terms <= 1), then into the f64 sum.
    __syncthreads();  // the previous row's gradient pass may still read s
    RunningSum own;
    for (int64_t first = threadIdx.x; first < split.vectors; first += kLoadUnroll * step) {
      uint4 loaded[kLoadUnroll];
#pragma unroll
      for (int u = 0; u < kLoadUnroll; ++u) {
        const int64_t i = first + u * step;
        if (i < split.vectors) loaded[u] = x_vectors[i];
      }
#pragma unroll
      for (int u = 0; u < kLoadUnroll; ++u) {
        const int64_t i = first + u * step;
        if (i < split.vectors) {
          s_vectors[i] = loaded[u];
          float vector_max = -INFINITY;  // fmaxf skips NaN: the NaN lands in the sum instead
#pragma unroll
          for (int k = 0; k < kLanes; ++k) vector_max = fmaxf(vector_max, vector_lane<T>(loaded[u], k));
          const float base = own.rebase(vector_max);
          float partial = 0.0f;
#pragma unroll
          for (int k = 0; k < kLanes; ++k) partial += expf(vector_lane<T>(loaded[u], k) - base);
          own.sum += static_cast<double>(partial);
        }
      }
    }
    // The unaligned head and the tail: fewer than kLanes elements each.
    if (threadIdx.x < split.head) {
      s[threadIdx.x] = x[threadIdx.x];
      own.add_one(load_f32(s, threadIdx.x));
    }
    if (split.tail + threadIdx.x < vocab) {
      const int64_t j = split.tail + threadIdx.x;
      s[j] = x[j];
      own.add_one(load_f32(s, j));
    }
    // The block's max (synchronising: the staged row is complete), each sum moved to it.
    const float m = block_max(own.max, shared_f);
    const double sum_own =
        own.sum == 0.0 ? 0.0 : own.sum * static_cast<double>(expf(own.max - m));
    const double sum = block_sum(sum_own, shared_d);
    if (threadIdx.x == 0) {
      const double loss =
          (static_cast<double>(m) - static_cast<double>(load_f32(s, target))) + log(sum);
      store_f32(losses, r, static_cast<float>(loss));
    }
    if (dl == nullptr) continue;

    // The gradient, written once: vectors where dl has the alignment of x, else element-wise.
    // p - 1 at the target as (e - sum) / sum: no cancellation when p is close to 1. Formed once
    // per thread, outside the loops, so they carry no f64 division.
    const float factor = static_cast<float>(grad_scale / sum);
    const double e_target = static_cast<double>(expf(load_f32(s, target) - m));
    const float target_gradient = static_cast<float>(grad_scale * ((e_target - sum) / sum));
    auto gradient = [&](float logit, int64_t j) {
      return j == target ? target_gradient : expf(logit - m) * factor;
    };
    const bool same_skew =
        reinterpret_cast<uintptr_t>(dl) % 16 == reinterpret_cast<uintptr_t>(x) % 16;
    if (!same_skew) {
      for (int64_t j = threadIdx.x; j < vocab; j += step) {
        store_f32(dl, j, gradient(load_f32(s, j), j));
      }
      continue;
    }
    uint4* dl_vectors = reinterpret_cast<uint4*>(dl + split.head);
    for (int64_t i = threadIdx.x; i < split.vectors; i += step) {
      uint4 v = s_vectors[i];
      const int64_t j0 = split.head + i * kLanes;
#pragma unroll
      for (int k = 0; k < kLanes; ++k) set_vector_lane<T>(v, k, expf(vector_lane<T>(v, k) - m) * factor);
      const int64_t target_lane = target - j0;
      if (target_lane >= 0 && target_lane < kLanes) {
        set_vector_lane<T>(v, static_cast<int>(target_lane), target_gradient);
      }
      dl_vectors[i] = v;
    }
    if (threadIdx.x < split.head) {
      store_f32(dl, threadIdx.x, gradient(load_f32(s, threadIdx.x), threadIdx.x));
    }
    if (split.tail + threadIdx.x < vocab) {
      const int64_t j = split.tail + threadIdx.x;
      store_f32(dl, j, gradient(load_f32(s, j), j));
    }
  }
}

// The opt-in shared memory limit of the current device, once (one process drives one GPU).
size_t shared_limit_bytes() {
  static const size_t limit = [] {
    int device = 0;
    cudaDeviceProp prop{};
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
      cudaGetLastError();
      return size_t{0};
    }
    // Leave room for the kernel's static reductions scratch (32 floats + 32 doubles).
    constexpr size_t kStatic = 1024;
    return prop.sharedMemPerBlockOptin > kStatic ? prop.sharedMemPerBlockOptin - kStatic : 0;
  }();
  return limit;
}

bool streaming_forced() {
  static const bool forced = [] {
    const char* choice = std::getenv("ZERO_CUDA_CROSS_ENTROPY");
    return choice != nullptr && std::strcmp(choice, "streaming") == 0;
  }();
  return forced;
}


template <typename T, typename L, typename Id>
void launch_row_kernel(unsigned grid, L* losses, T* dlogits, int64_t dlogits_pitch,
                       const T* logits, int64_t logits_pitch, const Id* targets, int64_t rows,
                       int64_t vocab, int64_t ignore_index, double grad_scale,
                       KernelErrorSlot* error, cudaStream_t stream) {
  const size_t bytes = staged_row_bytes<T>(vocab);
  if (!streaming_forced() && bytes <= shared_limit_bytes()) {
    constexpr auto kernel = staged_cross_entropy_kernel<T, L, Id>;
    allow_shared<kernel>(bytes);
    kernel<<<grid, kThreads, bytes, stream>>>(losses, dlogits, dlogits_pitch, logits,
                                              logits_pitch, targets, rows, vocab, ignore_index,
                                              grad_scale, error);
  } else {
    cross_entropy_kernel<<<grid, kThreads, 0, stream>>>(losses, dlogits, dlogits_pitch, logits,
                                                        logits_pitch, targets, rows, vocab,
                                                        ignore_index, grad_scale, error);
  }
}

}  // namespace

bool softmax_cross_entropy_stages_rows(DType dtype, int64_t vocab) {
  bool staged = false;
  dispatch_storage(dtype, "softmax_cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    staged = !streaming_forced() && staged_row_bytes<T>(vocab) <= shared_limit_bytes();
  });
  return staged;
}

void launch_softmax_cross_entropy(void* losses, bool losses_f32, void* dlogits,
                                  int64_t dlogits_pitch, const void* logits, int64_t logits_pitch,
                                  DType dtype, const void* targets, bool targets_i64, int64_t rows,
                                  int64_t vocab, int64_t ignore_index, double grad_scale,
                                  KernelErrorSlot* error, cudaStream_t stream) {
  if (rows == 0) return;
  constexpr int64_t kMaxBlocks = 65535;
  const auto grid = static_cast<unsigned>(rows < kMaxBlocks ? rows : kMaxBlocks);
  dispatch_storage(dtype, "softmax_cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    auto run = [&](const auto* tg) {
      // Per-row losses in f32 with 16-bit logits (the model's choice, as Hugging Face upcasts).
      if (losses_f32) {
        launch_row_kernel(grid, static_cast<float*>(losses), static_cast<T*>(dlogits),
                          dlogits_pitch, static_cast<const T*>(logits), logits_pitch, tg, rows,
                          vocab, ignore_index, grad_scale, error, stream);
      } else {
        launch_row_kernel(grid, static_cast<T*>(losses), static_cast<T*>(dlogits),
                          dlogits_pitch, static_cast<const T*>(logits), logits_pitch, tg, rows,
                          vocab, ignore_index, grad_scale, error, stream);
      }
    };
    if (targets_i64) {
      run(static_cast<const int64_t*>(targets));
    } else {
      run(static_cast<const int32_t*>(targets));
    }
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

}  // namespace zero::backend::cuda

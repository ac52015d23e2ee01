// Fused softmax cross-entropy over logits[N, V], one block per row, streaming the row twice
// (max and sum of exp in f64 together, online; the gradient) and never storing probabilities.
// The sum differs from the CPU's exp(x - max) terms by the rescaling's f32 roundings (a few
// ulps relative). The loss is
// (max - x_target) + log(sum), formed in f64 as the CPU forms it. dlogits may be the logits
// buffer: x_target is read before any write, and the last pass reads each element just before
// the same thread overwrites it. Targets are validated on the device (KernelErrorSlot).
// Rows may be padded (the LM head's logits on this backend: Backend::preferred_row_elements):
// row r starts r * pitch elements in, and the padding after its vocab elements is not touched.
#include "backend/cuda/cuda_device_math.cuh"
#include "backend/cuda/cuda_kernels.h"

namespace zero::backend::cuda {
namespace {

constexpr int kThreads = 512;

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
    const bool ignored = target == ignore_index;
    if (!ignored && (target < 0 || target >= vocab)) {
      if (threadIdx.x == 0) report_kernel_error(error, kTargetOutOfRange, target, vocab, r);
      continue;  // the whole block skips the row: the error is thrown at the next sync
    }
    if (ignored) {
      if (threadIdx.x == 0) store_f32(losses, r, 0.0f);
      if (dl != nullptr) {
        for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) store_f32(dl, j, 0.0f);
      }
      continue;
    }
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

}  // namespace

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
        cross_entropy_kernel<<<grid, kThreads, 0, stream>>>(
            static_cast<float*>(losses), static_cast<T*>(dlogits), dlogits_pitch,
            static_cast<const T*>(logits), logits_pitch, tg, rows, vocab, ignore_index,
            grad_scale, error);
      } else {
        cross_entropy_kernel<<<grid, kThreads, 0, stream>>>(
            static_cast<T*>(losses), static_cast<T*>(dlogits), dlogits_pitch,
            static_cast<const T*>(logits), logits_pitch, tg, rows, vocab, ignore_index,
            grad_scale, error);
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

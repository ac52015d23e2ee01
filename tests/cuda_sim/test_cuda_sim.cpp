// The simulator's own guarantees, on kernels written here (calling the launcher as rewritten
// code does): barriers and shuffles compute what the hardware computes; a barrier that can never
// complete, a shuffle that reads an exited lane and a kernel given a host pointer are errors, not
// hangs or garbage; the mma emulation follows the PTX fragment layout; fresh device memory and
// each block's shared memory read as NaN; launch-configuration and cuBLASLt alignment mistakes
// are reported as CUDA reports them.
#include <cublasLt.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_sim/device.h"

namespace {

// Sum of x[0, n) per block into out[blockIdx.x]: a warp_sum and a shared combine.
void block_sum_kernel(const float* x, float* out, int n) {
  __shared__ float partial[32];
  const unsigned t = threadIdx.y * blockDim.x + threadIdx.x;
  const unsigned threads = blockDim.x * blockDim.y;
  float v = 0.0f;
  for (unsigned i = blockIdx.x * threads + t; i < static_cast<unsigned>(n); i += gridDim.x * threads) {
    v += x[i];
  }
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  if (t % 32 == 0) partial[t / 32] = v;
  __syncthreads();
  if (t == 0) {
    float total = 0.0f;
    for (unsigned w = 0; w < threads / 32; ++w) total += partial[w];
    out[blockIdx.x] = total;
  }
}

void split_warp_kernel(float* out) {
  float v = static_cast<float>(threadIdx.x);
  if (threadIdx.x < 16) {
    __syncthreads();  // lanes 16..31 never get here: they wait for 0..15 in the shuffle
  } else {
    v = __shfl_xor_sync(0xffffffffu, v, 1);
  }
  out[threadIdx.x] = v;
}

void early_exit_kernel(float* out) {
  if (threadIdx.x >= 8) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);  // names the exited lanes
}

void copy_kernel(const float* in, float* out) { out[threadIdx.x] = in[threadIdx.x]; }

// One m16n8k16 product per warp: A[16][16], B[16][8] (k x n), D[16][8] = A B + 1.
void mma_kernel(const uint16_t* a, const uint16_t* b, float* d) {
  const unsigned lane = threadIdx.x, group = lane / 4, t = lane % 4;
  auto pair = [](uint16_t lo, uint16_t hi) { return static_cast<uint32_t>(lo) | (uint32_t{hi} << 16); };
  const uint32_t fa[4] = {pair(a[group * 16 + 2 * t], a[group * 16 + 2 * t + 1]),
                          pair(a[(group + 8) * 16 + 2 * t], a[(group + 8) * 16 + 2 * t + 1]),
                          pair(a[group * 16 + 2 * t + 8], a[group * 16 + 2 * t + 9]),
                          pair(a[(group + 8) * 16 + 2 * t + 8], a[(group + 8) * 16 + 2 * t + 9])};
  const uint32_t fb[2] = {pair(b[(2 * t) * 8 + group], b[(2 * t + 1) * 8 + group]),
                          pair(b[(2 * t + 8) * 8 + group], b[(2 * t + 9) * 8 + group])};
  float c[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  ::cuda_sim::mma_m16n8k16(c, fa, fb, /*bf16=*/true);
  d[group * 8 + 2 * t] = c[0];
  d[group * 8 + 2 * t + 1] = c[1];
  d[(group + 8) * 8 + 2 * t] = c[2];
  d[(group + 8) * 8 + 2 * t + 1] = c[3];
}

// What the rewriter makes of `__shared__ float seen[2];`: a static, poisoned per block.
void shared_reuse_kernel(float* out) {
  static float seen[2];
  ::cuda_sim::poison_static_shared(&seen, sizeof(seen));
  if (threadIdx.x == 0) {
    out[blockIdx.x] = seen[0];
    seen[0] = 1.0f;  // the next block must not see this
  }
}

template <typename T>
T* device_alloc(size_t count) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, count * sizeof(T)), cudaSuccess);
  return static_cast<T*>(p);
}

uint16_t bf16_bits(float f) {  // exact for the small integers used here
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return static_cast<uint16_t>(bits >> 16);
}

TEST(CudaSim, BarriersAndShufflesReduceAsTheHardwareDoes) {
  const int n = 5000;
  float* x = device_alloc<float>(n);
  float* out = device_alloc<float>(3);
  std::vector<float> host(n);
  for (int i = 0; i < n; ++i) host[i] = static_cast<float>(i % 7);
  ASSERT_EQ(cudaMemcpy(x, host.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  ::cuda_sim::launch_kernel("block_sum_kernel", dim3(3), dim3(32, 4), 0, nullptr,
                            reinterpret_cast<const void*>(&block_sum_kernel),
                            [](auto&... a) { block_sum_kernel(a...); }, x, out, n);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  float sums[3];
  ASSERT_EQ(cudaMemcpy(sums, out, sizeof(sums), cudaMemcpyDeviceToHost), cudaSuccess);
  double expected = 0.0;
  for (float v : host) expected += v;
  EXPECT_EQ(sums[0] + sums[1] + sums[2], expected);
  cudaFree(x);
  cudaFree(out);
}

TEST(CudaSim, ABarrierThatCanNeverCompleteIsADeadlockError) {
  float* out = device_alloc<float>(32);
  try {
    // The fault surfaces when the grid runs: at the launch (eager streams) or at the sync.
    ::cuda_sim::launch_kernel("split_warp_kernel", dim3(1), dim3(32), 0, nullptr, nullptr,
                              [](auto&... a) { split_warp_kernel(a...); }, out);
    cudaDeviceSynchronize();
    FAIL() << "the grid ran to its end";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("deadlock in kernel split_warp_kernel"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("__shfl_xor_sync"), std::string::npos) << e.what();
  }
  cudaFree(out);
}

TEST(CudaSim, AShuffleNamingAnExitedLaneFaults) {
  float* out = device_alloc<float>(32);
  EXPECT_THROW(
      {
        ::cuda_sim::launch_kernel("early_exit_kernel", dim3(1), dim3(32), 0, nullptr, nullptr,
                                  [](auto&... a) { early_exit_kernel(a...); }, out);
        cudaDeviceSynchronize();
      },
      std::runtime_error);
  cudaFree(out);
}

TEST(CudaSim, AHostPointerArgumentIsRefused) {
  std::vector<float> host(32, 1.0f);
  float* out = device_alloc<float>(32);
  EXPECT_THROW(::cuda_sim::launch_kernel("copy_kernel", dim3(1), dim3(32), 0, nullptr, nullptr,
                                         [](auto&... a) { copy_kernel(a...); },
                                         static_cast<const float*>(host.data()), out),
               std::runtime_error);
  cudaFree(out);
}

TEST(CudaSim, EveryBlockStartsWithPoisonedSharedMemory) {
  float* out = device_alloc<float>(2);
  ::cuda_sim::launch_kernel("shared_reuse_kernel", dim3(2), dim3(32), 0, nullptr, nullptr,
                            [](auto&... a) { shared_reuse_kernel(a...); }, out);
  float host[2];
  ASSERT_EQ(cudaMemcpy(host, out, sizeof(host), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_TRUE(std::isnan(host[0]));
  EXPECT_TRUE(std::isnan(host[1]));
  cudaFree(out);
}

TEST(CudaSim, FreshDeviceMemoryReadsAsNaN) {
  float* p = device_alloc<float>(4);
  float host[4];
  ASSERT_EQ(cudaMemcpy(host, p, sizeof(host), cudaMemcpyDeviceToHost), cudaSuccess);
  for (float v : host) EXPECT_TRUE(std::isnan(v));
  cudaFree(p);
}

TEST(CudaSim, BadLaunchConfigurationsAndCopiesAreCudaErrors) {
  float* out = device_alloc<float>(32);
  ::cuda_sim::launch_kernel("copy_kernel", dim3(1), dim3(2048), 0, nullptr, nullptr,
                            [](auto&... a) { copy_kernel(a...); },
                            static_cast<const float*>(out), out);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  ::cuda_sim::launch_kernel("copy_kernel", dim3(1), dim3(32), 64 * 1024, nullptr, nullptr,
                            [](auto&... a) { copy_kernel(a...); },
                            static_cast<const float*>(out), out);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);  // > 48 KiB without the attribute
  float host[64];
  EXPECT_EQ(cudaMemcpy(host, out, sizeof(host), cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  cudaGetLastError();
  cudaFree(out);
}

TEST(CudaSim, MmaFollowsThePtxFragmentLayout) {
  std::vector<uint16_t> a(16 * 16), b(16 * 8);
  std::vector<float> af(16 * 16), bf(16 * 8);
  for (int i = 0; i < 16 * 16; ++i) af[i] = static_cast<float>((i * 7) % 11 - 5);
  for (int i = 0; i < 16 * 8; ++i) bf[i] = static_cast<float>((i * 5) % 9 - 4);
  for (int i = 0; i < 16 * 16; ++i) a[i] = bf16_bits(af[i]);
  for (int i = 0; i < 16 * 8; ++i) b[i] = bf16_bits(bf[i]);
  uint16_t* da = device_alloc<uint16_t>(a.size());
  uint16_t* db = device_alloc<uint16_t>(b.size());
  float* dd = device_alloc<float>(16 * 8);
  cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice);
  ::cuda_sim::launch_kernel("mma_kernel", dim3(1), dim3(32), 0, nullptr, nullptr,
                            [](auto&... x) { mma_kernel(x...); },
                            static_cast<const uint16_t*>(da), static_cast<const uint16_t*>(db), dd);
  float d[16 * 8];
  cudaMemcpy(d, dd, sizeof(d), cudaMemcpyDeviceToHost);
  for (int m = 0; m < 16; ++m) {
    for (int n = 0; n < 8; ++n) {
      float expected = 1.0f;
      for (int k = 0; k < 16; ++k) expected += af[m * 16 + k] * bf[k * 8 + n];
      EXPECT_EQ(d[m * 8 + n], expected) << m << "," << n;
    }
  }
  cudaFree(da);
  cudaFree(db);
  cudaFree(dd);
}

TEST(CudaSim, CublasLtRefusesAPointerLessAlignedThanThePreferenceSaid) {
  cublasLtHandle_t handle;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t layout;
  cublasLtMatmulPreference_t pref;
  ASSERT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, 4, 4, 4);
  cublasLtMatmulPreferenceCreate(&pref);  // default: 256-byte aligned operands
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(handle, desc, layout, layout, layout, layout, pref, 1,
                                           &result, &found),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(found, 1);
  float* m = device_alloc<float>(128);  // A, B at m; C = D at m + 64 (256 bytes on)
  const float alpha = 1.0f, beta = 0.0f;
  EXPECT_EQ(cublasLtMatmul(handle, desc, &alpha, m, layout, m, layout, &beta, m + 64, layout,
                           m + 64, layout, &result.algo, nullptr, 0, nullptr),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmul(handle, desc, &alpha, m + 1, layout, m, layout, &beta, m + 64, layout,
                           m + 64, layout, &result.algo, nullptr, 0, nullptr),
            CUBLAS_STATUS_INVALID_VALUE);
  cudaFree(m);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(layout);
  cublasLtMatmulDescDestroy(desc);
  cublasLtDestroy(handle);
}

}  // namespace

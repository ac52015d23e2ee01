// The simulator's cp.async and ldmatrix emulations (cuda_sim/ptx_memory.h) against the PTX ISA:
// ldmatrix hands lane 4 r + c the elements (r, 2c) and (r, 2c + 1) of each 8x8 matrix whose rows
// lanes 8 i .. 8 i + 7 address (transposed with .trans), and the fragments the attention kernels
// load that way feed mma.m16n8k16 the product a host loop computes.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "cuda_sim/device.h"
#include "cuda_sim/ptx_memory.h"

namespace {

constexpr int kStride = 24;  // elements per shared row: 48 bytes, rows stay 16-byte aligned
constexpr int kTileRows = 32;

// Row and column (0 or 8) that lane `lane` addresses: scattered, so that a wrong lane-to-row
// mapping cannot pass by accident.
int address_row(int lane) { return (lane * 7 + 3) % kTileRows; }
int address_column(int lane) { return 8 * (lane % 2); }
uint16_t tile_value(int row, int column) { return static_cast<uint16_t>(row * 100 + column); }

// Copies the [kTileRows][kStride] tile to shared memory with cp.async, then every lane loads its
// four ldmatrix registers (out[lane][i]).
template <bool kTrans>
void ldmatrix_kernel(const uint16_t* tile, uint32_t* out) {
  alignas(16) __shared__ uint16_t shared[kTileRows * kStride];
  for (int chunk = static_cast<int>(threadIdx.x); chunk < kTileRows * kStride / 8; chunk += 32) {
    ::cuda_sim::cp_async_16(shared + chunk * 8, tile + chunk * 8);
  }
  ::cuda_sim::cp_async_commit();
  ::cuda_sim::cp_async_wait(0);
  __syncthreads();
  const int lane = static_cast<int>(threadIdx.x);
  uint32_t r[4];
  ::cuda_sim::ldmatrix_x4(r, shared + address_row(lane) * kStride + address_column(lane), kTrans);
  for (int i = 0; i < 4; ++i) out[lane * 4 + i] = r[i];
}

void misaligned_kernel(const uint16_t* tile, uint32_t* out) {
  alignas(16) __shared__ uint16_t shared[kTileRows * kStride];
  uint32_t r[4];
  ::cuda_sim::ldmatrix_x4(r, shared + 1, false);
  out[threadIdx.x] = r[0] + tile[0];
}

template <typename T>
T* device_copy(const std::vector<T>& host) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, host.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  return static_cast<T*>(p);
}

std::vector<uint16_t> make_tile() {
  std::vector<uint16_t> tile(kTileRows * kStride);
  for (int r = 0; r < kTileRows; ++r) {
    for (int c = 0; c < kStride; ++c) tile[r * kStride + c] = tile_value(r, c);
  }
  return tile;
}

template <bool kTrans>
std::vector<uint32_t> run_ldmatrix() {
  uint16_t* tile = device_copy(make_tile());
  uint32_t* out = device_copy(std::vector<uint32_t>(32 * 4, 0));
  ::cuda_sim::launch_kernel("ldmatrix_kernel", dim3(1), dim3(32), 0, nullptr, nullptr,
                            [](auto&... a) { ldmatrix_kernel<kTrans>(a...); }, tile, out);
  std::vector<uint32_t> host(32 * 4);
  EXPECT_EQ(cudaMemcpy(host.data(), out, host.size() * sizeof(uint32_t), cudaMemcpyDeviceToHost),
            cudaSuccess);
  cudaFree(tile);
  cudaFree(out);
  return host;
}

// Element (row, column) of matrix i: row `row` is the one lane 8 i + row addresses.
uint16_t matrix_element(int i, int row, int column) {
  const int lane = 8 * i + row;
  return tile_value(address_row(lane), address_column(lane) + column);
}

TEST(CudaSimPtxMemory, LdmatrixGivesEachLaneTheDocumentedRowFragment) {
  const std::vector<uint32_t> got = run_ldmatrix<false>();
  for (int lane = 0; lane < 32; ++lane) {
    const int row = lane / 4, column = 2 * (lane % 4);
    for (int i = 0; i < 4; ++i) {
      const uint32_t expected = matrix_element(i, row, column) |
                                (uint32_t{matrix_element(i, row, column + 1)} << 16);
      EXPECT_EQ(got[lane * 4 + i], expected) << "lane " << lane << " register " << i;
    }
  }
}

TEST(CudaSimPtxMemory, LdmatrixTransGivesEachLaneTheDocumentedColumnFragment) {
  const std::vector<uint32_t> got = run_ldmatrix<true>();
  for (int lane = 0; lane < 32; ++lane) {
    const int column = lane / 4, row = 2 * (lane % 4);
    for (int i = 0; i < 4; ++i) {
      const uint32_t expected = matrix_element(i, row, column) |
                                (uint32_t{matrix_element(i, row + 1, column)} << 16);
      EXPECT_EQ(got[lane * 4 + i], expected) << "lane " << lane << " register " << i;
    }
  }
}

TEST(CudaSimPtxMemory, AMisalignedLdmatrixRowFaults) {
  uint16_t* tile = device_copy(make_tile());
  uint32_t* out = device_copy(std::vector<uint32_t>(32, 0));
  // The fault surfaces when the grid runs: at the launch (eager streams) or at the sync.
  EXPECT_THROW(
      {
        ::cuda_sim::launch_kernel("misaligned_kernel", dim3(1), dim3(32), 0, nullptr, nullptr,
                                  [](auto&... a) { misaligned_kernel(a...); }, tile, out);
        cudaDeviceSynchronize();
      },
      std::runtime_error);
  cudaFree(tile);
  cudaFree(out);
}

// The attention kernels' addressing (cuda_attention_mma.cu): A (16x16, row-major) by one
// ldmatrix.x4 with lanes 0-15 naming rows 0-15 at column 0 and lanes 16-31 the same rows at
// column 8; B (16x16 as two 16x8 n-tiles) stored k-major [k][n], by ldmatrix.x4.trans with lanes
// 0-7 naming rows k 0-7, 8-15 rows k 8-15 at column 0, 16-31 the same at column 8.
void ldmatrix_mma_kernel(const uint16_t* a, const uint16_t* b, float* d) {
  alignas(16) __shared__ uint16_t as[16 * kStride];
  alignas(16) __shared__ uint16_t bs[16 * kStride];
  const int lane = static_cast<int>(threadIdx.x);
  for (int chunk = lane; chunk < 32; chunk += 32) {  // 16 rows x 2 chunks of 8
    const int row = chunk / 2, column = 8 * (chunk % 2);
    ::cuda_sim::cp_async_16(as + row * kStride + column, a + row * 16 + column);
    ::cuda_sim::cp_async_16(bs + row * kStride + column, b + row * 16 + column);
  }
  ::cuda_sim::cp_async_commit();
  ::cuda_sim::cp_async_wait(0);
  __syncthreads();
  uint32_t af[4], bf[4];
  ::cuda_sim::ldmatrix_x4(af, as + (lane % 16) * kStride + (lane / 16) * 8, false);
  const int b_row = lane % 8 + (lane / 8 % 2) * 8;
  ::cuda_sim::ldmatrix_x4(bf, bs + b_row * kStride + (lane / 16) * 8, true);
  const int group = lane / 4, t = lane % 4;
  for (int nt = 0; nt < 2; ++nt) {
    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    ::cuda_sim::mma_m16n8k16(c, af, {bf[2 * nt], bf[2 * nt + 1]}, /*bf16=*/true);
    d[group * 16 + nt * 8 + 2 * t] = c[0];
    d[group * 16 + nt * 8 + 2 * t + 1] = c[1];
    d[(group + 8) * 16 + nt * 8 + 2 * t] = c[2];
    d[(group + 8) * 16 + nt * 8 + 2 * t + 1] = c[3];
  }
}

uint16_t bf16_bits(float f) {  // exact for the small integers used here
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return static_cast<uint16_t>(bits >> 16);
}

TEST(CudaSimPtxMemory, LdmatrixFragmentsFeedMmaTheRowMajorAndKMajorProduct) {
  std::vector<float> a(256), b(256);
  for (int i = 0; i < 256; ++i) {
    a[i] = static_cast<float>((i * 5) % 11 - 5);
    b[i] = static_cast<float>((i * 3) % 7 - 3);
  }
  std::vector<uint16_t> a_bits(256), b_bits(256);
  for (int i = 0; i < 256; ++i) {
    a_bits[i] = bf16_bits(a[i]);
    b_bits[i] = bf16_bits(b[i]);
  }
  uint16_t* da = device_copy(a_bits);
  uint16_t* db = device_copy(b_bits);
  float* dd = device_copy(std::vector<float>(256, 0.0f));
  ::cuda_sim::launch_kernel("ldmatrix_mma_kernel", dim3(1), dim3(32), 0, nullptr, nullptr,
                            [](auto&... x) { ldmatrix_mma_kernel(x...); }, da, db, dd);
  std::vector<float> d(256);
  ASSERT_EQ(cudaMemcpy(d.data(), dd, d.size() * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) {
      float expected = 0.0f;  // small integers: exact in f32
      for (int k = 0; k < 16; ++k) expected += a[i * 16 + k] * b[k * 16 + j];
      EXPECT_EQ(d[i * 16 + j], expected) << "(" << i << ", " << j << ")";
    }
  }
  cudaFree(da);
  cudaFree(db);
  cudaFree(dd);
}

// Two groups of copies (16 bytes per lane each), then a wait leaving `pending` groups in flight,
// a barrier, and every lane's view of both destinations.
void cp_async_groups_kernel(const uint16_t* src, uint16_t* out, int pending) {
  alignas(16) __shared__ uint16_t first[32 * 8];
  alignas(16) __shared__ uint16_t second[32 * 8];
  ::cuda_sim::poison_static_shared(first, sizeof(first));  // as the rewriter adds in .cu files
  ::cuda_sim::poison_static_shared(second, sizeof(second));
  const int lane = static_cast<int>(threadIdx.x);
  ::cuda_sim::cp_async_16(first + lane * 8, src + lane * 8);
  ::cuda_sim::cp_async_commit();
  ::cuda_sim::cp_async_16(second + lane * 8, src + 256 + lane * 8);
  ::cuda_sim::cp_async_commit();
  if (pending >= 0) ::cuda_sim::cp_async_wait(pending);
  __syncthreads();
  const int other = 31 - lane;  // another lane's copies: visible after its wait and the barrier
  for (int i = 0; i < 8; ++i) {
    out[lane * 8 + i] = first[other * 8 + i];
    out[256 + lane * 8 + i] = second[other * 8 + i];
  }
}

// out[0, 512) after cp_async_groups_kernel with `pending` (-1: no wait at all).
std::vector<uint16_t> run_groups(int pending) {
  std::vector<uint16_t> src(512);
  for (int i = 0; i < 512; ++i) src[static_cast<size_t>(i)] = static_cast<uint16_t>(i + 1);
  uint16_t* d_src = device_copy(src);
  uint16_t* d_out = device_copy(std::vector<uint16_t>(512, 0));
  ::cuda_sim::launch_kernel("cp_async_groups_kernel", dim3(1), dim3(32), 0, nullptr, nullptr,
                            [](auto&... a) { cp_async_groups_kernel(a...); }, d_src, d_out,
                            pending);
  std::vector<uint16_t> out(512);
  cudaMemcpy(out.data(), d_out, 512 * sizeof(uint16_t), cudaMemcpyDeviceToHost);
  cudaFree(d_src);
  cudaFree(d_out);
  return out;
}

TEST(CudaSimPtxMemory, CpAsyncLandsOnlyWhenItsGroupIsWaitedFor) {
  const std::vector<uint16_t> all = run_groups(0);
  EXPECT_EQ(all[0], 31 * 8 + 1) << "lane 0 reads lane 31's first copy";
  EXPECT_EQ(all[256], 256 + 31 * 8 + 1);
  // wait_group 1: the older group has landed, the newer one may not have: it has not here.
  const std::vector<uint16_t> older = run_groups(1);
  EXPECT_EQ(older[0], 31 * 8 + 1);
  EXPECT_EQ(older[256], 0xffff) << "the newest group landed before any wait covered it";
  // No wait before the barrier: nothing has landed (a barrier does not complete copies).
  const std::vector<uint16_t> none = run_groups(-1);
  EXPECT_EQ(none[0], 0xffff);
  EXPECT_EQ(none[256], 0xffff);
}

}  // namespace

// Muon on the CUDA backend against the CPU oracle: Backend::scale_by_inverse_norm
// (cuda_elementwise.cu) bit for bit, and the Newton-Schulz orthogonalization and one Muon matrix
// update (optim/muon.cpp, composed of Backend ops) within the tolerance of f32 products summed
// in another order. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "backend/cuda_test_support.h"
#include "optim/muon.h"

namespace zero::backend::cuda_test {
namespace muon_cuda_test {

using CudaMuon = CudaTest;

// Five Newton-Schulz steps multiply small singular directions by up to 3.4 each (3.4^5 ~ 450):
// cuBLASLt's f32 sums, in another order than the CPU's, differ by ~1e-7 relative and grow to a
// few 1e-5 on the O(0.3) entries of the result.
constexpr double kOrthogonalizeTolerance = 2e-4;

TEST_F(CudaMuon, ScaleByInverseNormMatchesTheCpuBitForBit) {
  for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{1000}, int64_t{300001}}) {
    const std::vector<float> values = random_values(n, 17u + static_cast<uint32_t>(n), -3.0f, 3.0f);
    // The same squared norm on both (sum_squares's own agreement is CudaOps' business).
    double squared = 0.0;
    for (float v : values) squared += static_cast<double>(v) * v;
    Tensor cpu_norm = cpu().empty({1}, DType::kF64, MemoryCategory::kOther);
    Tensor gpu_norm = gpu().empty({1}, DType::kF64, MemoryCategory::kOther);
    cpu().copy_from_host(cpu_norm, &squared);
    gpu().copy_from_host(gpu_norm, &squared);
    Tensor on_cpu = upload(cpu(), values, {n}, DType::kF32);
    Tensor on_gpu = upload(gpu(), values, {n}, DType::kF32);
    cpu().scale_by_inverse_norm(on_cpu, cpu_norm, 1e-7);
    gpu().scale_by_inverse_norm(on_gpu, gpu_norm, 1e-7);
    EXPECT_EQ(download_bytes(gpu(), on_gpu), download_bytes(cpu(), on_cpu)) << "n = " << n;
  }
  Tensor x = gpu().empty({4}, DType::kF32, MemoryCategory::kOther);
  Tensor wrong = gpu().empty({1}, DType::kF32, MemoryCategory::kOther);
  EXPECT_THROW(gpu().scale_by_inverse_norm(x, wrong, 1e-7), ShapeError);
}

TEST_F(CudaMuon, NewtonSchulzMatchesTheCpu) {
  const int64_t shapes[][2] = {{16, 48}, {40, 40}, {96, 24}};
  for (const auto& shape : shapes) {
    const int64_t rows = shape[0], cols = shape[1];
    const std::vector<float> g = random_values(rows * cols, 3u + static_cast<uint32_t>(rows));
    Tensor on_cpu = upload(cpu(), g, {rows, cols}, DType::kF32);
    Tensor on_gpu = upload(gpu(), g, {rows, cols}, DType::kF32);
    optim::newton_schulz_orthogonalize(cpu(), on_cpu, 5);
    optim::newton_schulz_orthogonalize(gpu(), on_gpu, 5);
    const std::vector<double> expected = download(cpu(), on_cpu);
    const std::vector<double> got = download(gpu(), on_gpu);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], expected[i], kOrthogonalizeTolerance)
          << rows << "x" << cols << " element " << i;
    }
  }
}

// The whole update with bf16 held gradients, a clipping scale and a bf16 working copy: the
// momentum is the kMomentum kernel's (bit for bit), the parameters within lr times the
// orthogonalization's tolerance, the copy their rounding.
TEST_F(CudaMuon, MatrixUpdateMatchesTheCpu) {
  const optim::MuonMatrix matrix{0, 24, 64, 1.5};
  const int64_t n = matrix.rows * matrix.cols;
  const std::vector<float> p0 = random_values(n, 5u, -0.1f, 0.1f);
  const std::vector<float> g0 = random_values(n, 6u);
  const std::vector<float> m0 = random_values(n, 7u, -0.05f, 0.05f);
  optim::MuonHyper hyper;
  const double lr = 0.02;
  struct Run {
    Tensor p, g, m, copy;
  };
  auto run = [&](Backend& be) {
    Run r{upload(be, p0, {n}, DType::kF32), upload(be, g0, {n}, DType::kBF16),
          upload(be, m0, {n}, DType::kF32), upload(be, p0, {n}, DType::kBF16)};
    optim::muon_update_matrix(be, matrix, r.p, r.g, r.m, hyper, lr, 0.1, true, 0.5, &r.copy);
    return r;
  };
  Run c = run(cpu());
  Run d = run(gpu());
  EXPECT_EQ(download_bytes(gpu(), d.m), download_bytes(cpu(), c.m));
  const std::vector<double> expected = download(cpu(), c.p), got = download(gpu(), d.p);
  const std::vector<double> copy = download(gpu(), d.copy);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(got[i], expected[i], lr * matrix.update_scale * kOrthogonalizeTolerance) << i;
    // bf16 keeps 8 bits: the copy is the parameter to within half a unit (2^-9 relative).
    ASSERT_NEAR(copy[i], got[i], std::fabs(got[i]) / 256.0) << i;
  }
}

}  // namespace muon_cuda_test
}  // namespace zero::backend::cuda_test

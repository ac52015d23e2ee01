// Matrix products with a dimension that is not a multiple of 8 (GPT-2's 50257-token vocabulary)
// are computed as a tile-aligned main part and a tail (backend/cuda/cuda_gemm_split.h): along
// each of n, m and k, against the CPU oracle. Along k the two parts meet in f32 and a 16-bit c
// is rounded once, so the result keeps the tolerance of one product. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "cuda_test_support.h"

namespace zero::backend::cuda_test {
namespace {

class CudaGemmSplit : public CudaTest {
 protected:
  // c = 0.75 op(a) op(b) + beta c on both backends (c starting from the same random values),
  // returning {cpu, gpu}, and checking that the GPU split the product.
  std::vector<double> results_[2];
  void run(DType dtype, int64_t m, int64_t n, int64_t k, bool ta, bool tb, double beta,
           uint32_t seed) {
    const std::vector<float> a = random_values(m * k, seed), b = random_values(k * n, seed + 1);
    const std::vector<float> c0 = random_values(m * n, seed + 2);
    const uint64_t splits_before = gpu().split_products();
    int slot = 0;
    for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&gpu())}) {
      Tensor ta_t = upload(*be, a, ta ? Shape{k, m} : Shape{m, k}, dtype);
      Tensor tb_t = upload(*be, b, tb ? Shape{n, k} : Shape{k, n}, dtype);
      Tensor c = upload(*be, c0, {m, n}, dtype);
      be->matmul(c, ta_t, ta, tb_t, tb, 0.75, beta);
      results_[slot++] = download(*be, c);
    }
    EXPECT_GT(gpu().split_products(), splits_before) << "the product was not split";
  }
  // K products of values in [-1, 1], summed in another order: a few f32 ulps of sqrt(K)-sized
  // sums (1e-5 relative, 5e-4 absolute), plus one rounding unit of a 16-bit c.
  void expect_match(DType dtype, const std::string& what) {
    expect_close(results_[0], results_[1], storage_tolerance(dtype, 1e-5, 5e-4),
                 what + " " + dtype_name(dtype));
  }
};

// 2 m n k >= 2 GFLOP (smaller products are not split) with the odd dimension 1001 = 7 tiles of
// 128 + a tail of 105.
TEST_F(CudaGemmSplit, AnUnalignedOutputWidthMatchesTheCpu) {
  for (DType dtype : {DType::kBF16, DType::kF32}) {
    run(dtype, 2048, 1001, 768, false, true, 0.0, 60);
    expect_match(dtype, "n 1001");
  }
}

TEST_F(CudaGemmSplit, UnalignedRowsMatchTheCpu) {
  run(DType::kBF16, 1001, 2048, 768, true, false, 1.0, 70);
  expect_match(DType::kBF16, "m 1001, a transposed, beta 1");
}

TEST_F(CudaGemmSplit, AnUnalignedInnerDimensionIsRoundedOnce) {
  // bf16 c with beta 0.5: the caller's c is scaled into the f32 sum before both parts add.
  run(DType::kBF16, 2048, 768, 1001, false, false, 0.5, 80);
  expect_match(DType::kBF16, "k 1001, beta 0.5");
  run(DType::kF16, 2048, 768, 1001, true, true, 0.0, 90);
  expect_match(DType::kF16, "k 1001, both transposed");
  run(DType::kF32, 2048, 768, 1001, false, false, 1.0, 100);
  expect_match(DType::kF32, "k 1001, beta 1");
}

}  // namespace
}  // namespace zero::backend::cuda_test

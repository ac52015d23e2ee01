// ZERO_CUDA_GEMM_AUTOTUNE (backend/cuda/cuda_matmul.h): a plan's candidate algorithms are timed
// on its first call, into a scratch c, and the fastest kept. What must hold whatever algorithm
// wins: the products still match the CPU oracle - a c the product adds to (beta 1) and a bias
// epilogue included, so the timing runs must not have written the caller's c - and each plan is
// timed once. The simulator's heuristic returns three alike algorithms, so the timing loop runs
// there as on a GPU. The variable itself is parsed strictly.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_matmul.h"
#include "core/error.h"
#include "cuda_test_support.h"
#include "support/env_guard.h"

namespace zero::backend::cuda_test {
namespace {

// ZERO_CUDA_GEMM_AUTOTUNE set to `value` (unset for nullptr) for the guard's life.
struct AutotuneVariable : test_support::EnvGuard {
  explicit AutotuneVariable(const char* value)
      : EnvGuard("ZERO_CUDA_GEMM_AUTOTUNE",
                 value != nullptr ? std::optional<std::string>(value) : std::nullopt) {}
};

class CudaGemmAutotune : public CudaTest {};

TEST_F(CudaGemmAutotune, TunedProductsMatchTheCpuAndEachPlanIsTimedOnce) {
  std::unique_ptr<CudaBackend> tuned;
  {
    const AutotuneVariable variable("3");
    tuned = std::make_unique<CudaBackend>(0);
  }
  const int64_t m = 192, n = 136, k = 96;
  const std::vector<float> a = random_values(m * k, 31), b = random_values(k * n, 32);
  const std::vector<float> c0 = random_values(m * n, 33), bias = random_values(n, 34);
  for (DType dtype : {DType::kBF16, DType::kF32}) {
    // c = 0.5 a b + 1 c: the tuning must leave the caller's c as it was.
    std::vector<double> results[2];
    int slot = 0;
    for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(tuned.get())}) {
      Tensor ta = upload(*be, a, {m, k}, dtype), tb = upload(*be, b, {k, n}, dtype);
      Tensor c = upload(*be, c0, {m, n}, dtype);
      be->matmul(c, ta, false, tb, false, 0.5, 1.0);
      results[slot++] = download(*be, c);
    }
    // K products of values in [-1, 1]: a few f32 ulps of the sums, one rounding of a 16-bit c.
    expect_close(results[0], results[1], storage_tolerance(dtype, 1e-5, 5e-4),
                 std::string("matmul beta 1 ") + dtype_name(dtype));
    // y = x w^T + bias through the bias epilogue.
    slot = 0;
    for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(tuned.get())}) {
      Tensor x = upload(*be, a, {m, k}, dtype), w = upload(*be, b, {n, k}, dtype);
      Tensor tbias = upload(*be, bias, {n}, dtype);
      Tensor y = be->empty({m, n}, dtype, MemoryCategory::kActivations);
      be->linear_forward(y, x, w, &tbias);
      results[slot++] = download(*be, y);
    }
    expect_close_after_bias_epilogue(results[0], results[1], bias, dtype,
                                     storage_tolerance(dtype, 1e-5, 5e-4),
                                     std::string("linear with bias ") + dtype_name(dtype));
  }
  const uint64_t tunings = tuned->gemm_tunings();
  EXPECT_GT(tunings, 0u) << "no plan had candidates to time";
  // The same products again: their plans are tuned already.
  Tensor x = upload(*tuned, a, {m, k}, DType::kBF16), w = upload(*tuned, b, {n, k}, DType::kBF16);
  Tensor tbias = upload(*tuned, bias, {n}, DType::kBF16);
  Tensor y = tuned->empty({m, n}, DType::kBF16, MemoryCategory::kActivations);
  tuned->linear_forward(y, x, w, &tbias);
  EXPECT_EQ(tuned->gemm_tunings(), tunings) << "a plan was timed twice";
  // Without the variable nothing is timed.
  EXPECT_EQ(gpu().gemm_tunings(), 0u);
  Tensor y2 = gpu().empty({m, n}, DType::kBF16, MemoryCategory::kActivations);
  Tensor x2 = upload(gpu(), a, {m, k}, DType::kBF16), w2 = upload(gpu(), b, {n, k}, DType::kBF16);
  gpu().linear_forward(y2, x2, w2, nullptr);
  EXPECT_EQ(gpu().gemm_tunings(), 0u);
}

TEST(CudaGemmAutotuneSetting, TakesACountFromOneToSixteenAndRejectsTheRest) {
  {
    const AutotuneVariable unset(nullptr);
    EXPECT_EQ(cuda::CublasLtMatmul::autotune_candidates_from_environment(), 1);
  }
  for (const auto& [value, count] : {std::pair<const char*, int>{"1", 1}, {"16", 16}, {"4", 4}}) {
    const AutotuneVariable variable(value);
    EXPECT_EQ(cuda::CublasLtMatmul::autotune_candidates_from_environment(), count) << value;
  }
  for (const char* bad : {"0", "17", "-2", "3.5", "four", "", " 4"}) {
    const AutotuneVariable variable(bad);
    try {
      cuda::CublasLtMatmul::autotune_candidates_from_environment();
      ADD_FAILURE() << "ZERO_CUDA_GEMM_AUTOTUNE='" << bad << "' was accepted";
    } catch (const ConfigError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(std::string("ZERO_CUDA_GEMM_AUTOTUNE=") + bad), std::string::npos)
          << message;
      EXPECT_NE(message.find("from 1"), std::string::npos) << message;
    }
  }
}

}  // namespace
}  // namespace zero::backend::cuda_test

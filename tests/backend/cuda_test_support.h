// Shared by the CUDA op tests: a fixture that skips without a GPU, plus backend_test_values.h's
// helpers that move the same values into the CPU oracle and the CUDA backend in any storage
// dtype, and per-dtype comparisons.
#pragma once
#include <gtest/gtest.h>

#include <memory>

#include "backend/backend_test_values.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"

namespace zero::backend::cuda_test {

// The values, uploads, downloads and tolerances of backend_test_values.h.
using namespace backend_test;

// Every CUDA test starts here: skipped (reported Skipped by ctest) where no device is visible.
class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    gpu_ = std::make_unique<CudaBackend>(0);
  }
  void TearDown() override { gpu_.reset(); }

  CudaBackend& gpu() { return *gpu_; }
  CpuBackend& cpu() { return cpu_; }

 private:
  CpuBackend cpu_;
  std::unique_ptr<CudaBackend> gpu_;
};

}  // namespace zero::backend::cuda_test

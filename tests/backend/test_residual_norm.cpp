// The residual add fused with the norm after it (Backend::add_layernorm_forward /
// add_rmsnorm_forward): on the CPU backends the default runs add() and then the norm, so it is
// bit-identical to that sequence, in place (sum over a) or into its own buffer, in every dtype.
// (The CUDA kernel is checked against this in test_cuda_ops.cpp.)
#include <gtest/gtest.h>

#include <vector>

#include "backend/backend_test_values.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/sim/simulated_device_backend.h"

namespace zero::backend {
namespace {

using backend_test::download_bytes;
using backend_test::random_values;
using backend_test::upload;

void check_backend(Backend& be) {
  const int64_t rows = 7, channels = 33;
  const std::vector<float> a = random_values(rows * channels, 1, -2.0f, 2.0f);
  const std::vector<float> r = random_values(rows * channels, 2, -2.0f, 2.0f);
  const std::vector<float> w = random_values(channels, 3, -2.0f, 2.0f);
  const std::vector<float> b = random_values(channels, 4, -2.0f, 2.0f);
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (bool layernorm : {true, false}) {
      for (bool in_place : {true, false}) {
        Tensor tw = upload(be, w, {channels}, dtype), tb = upload(be, b, {channels}, dtype);
        Tensor tr = upload(be, r, {rows, channels}, dtype);
        // Unfused: a += r, then the norm.
        Tensor a1 = upload(be, a, {rows, channels}, dtype);
        Tensor y1 = be.empty({rows, channels}, dtype, MemoryCategory::kOther);
        Tensor mean1 = be.zeros({rows}, DType::kF32, MemoryCategory::kOther);
        Tensor rstd1 = be.empty({rows}, DType::kF32, MemoryCategory::kOther);
        be.add(a1, tr, 1.0);
        if (layernorm) {
          be.layernorm_forward(y1, mean1, rstd1, a1, tw, &tb, 1e-5);
        } else {
          be.rmsnorm_forward(y1, rstd1, a1, tw, 1e-6);
        }
        // Fused.
        Tensor a2 = upload(be, a, {rows, channels}, dtype);
        Tensor own = be.zeros({rows, channels}, dtype, MemoryCategory::kOther);
        Tensor& sum = in_place ? a2 : own;
        Tensor y2 = be.empty({rows, channels}, dtype, MemoryCategory::kOther);
        Tensor mean2 = be.zeros({rows}, DType::kF32, MemoryCategory::kOther);
        Tensor rstd2 = be.empty({rows}, DType::kF32, MemoryCategory::kOther);
        if (layernorm) {
          be.add_layernorm_forward(sum, y2, mean2, rstd2, a2, tr, tw, &tb, 1e-5);
        } else {
          be.add_rmsnorm_forward(sum, y2, rstd2, a2, tr, tw, 1e-6);
        }
        const std::string what = std::string(dtype_name(dtype)) + (layernorm ? " layernorm" : " rmsnorm") +
                                 (in_place ? " in place" : "");
        EXPECT_EQ(download_bytes(be, sum), download_bytes(be, a1)) << what;
        EXPECT_EQ(download_bytes(be, y2), download_bytes(be, y1)) << what;
        EXPECT_EQ(download_bytes(be, mean2), download_bytes(be, mean1)) << what;
        EXPECT_EQ(download_bytes(be, rstd2), download_bytes(be, rstd1)) << what;
        if (!in_place) {
          // a itself is left as it was.
          Tensor original = upload(be, a, {rows, channels}, dtype);
          EXPECT_EQ(download_bytes(be, a2), download_bytes(be, original)) << what;
        }
      }
    }
  }
}

TEST(ResidualNorm, CpuBackendIsAddThenNorm) {
  CpuBackend cpu;
  check_backend(cpu);
}

TEST(ResidualNorm, SimulatedDeviceIsAddThenNorm) {
  SimulatedDeviceBackend sim;
  check_backend(sim);
}

}  // namespace
}  // namespace zero::backend

// The residual add fused with the norm after it (Backend::add_layernorm_forward /
// add_rmsnorm_forward): on the CPU backends the default runs add() and then the norm, so it is
// bit-identical to that sequence, in place (sum over a) or into its own buffer, in every dtype.
// (The CUDA kernel is checked against this in test_cuda_ops.cpp.)
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/sim/simulated_device_backend.h"

namespace zero::backend {
namespace {

Tensor upload(Backend& be, const std::vector<float>& values, const Shape& shape, DType dtype) {
  Tensor f32 = be.empty(shape, DType::kF32, MemoryCategory::kOther);
  be.copy_from_host(f32, values.data());
  if (dtype == DType::kF32) return f32;
  Tensor out = be.empty(shape, dtype, MemoryCategory::kOther);
  be.copy(out, f32);
  return out;
}

std::vector<uint8_t> bytes_of(Backend& be, const Tensor& t) {
  std::vector<uint8_t> out(t.nbytes());
  be.copy_to_host(out.data(), t);
  return out;
}

std::vector<float> random_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> out(static_cast<size_t>(n));
  for (float& v : out) v = dist(rng);
  return out;
}

void check_backend(Backend& be) {
  const int64_t rows = 7, channels = 33;
  const std::vector<float> a = random_values(rows * channels, 1), r = random_values(rows * channels, 2);
  const std::vector<float> w = random_values(channels, 3), b = random_values(channels, 4);
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
        EXPECT_EQ(bytes_of(be, sum), bytes_of(be, a1)) << what;
        EXPECT_EQ(bytes_of(be, y2), bytes_of(be, y1)) << what;
        EXPECT_EQ(bytes_of(be, mean2), bytes_of(be, mean1)) << what;
        EXPECT_EQ(bytes_of(be, rstd2), bytes_of(be, rstd1)) << what;
        if (!in_place) {
          // a itself is left as it was.
          Tensor original = upload(be, a, {rows, channels}, dtype);
          EXPECT_EQ(bytes_of(be, a2), bytes_of(be, original)) << what;
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

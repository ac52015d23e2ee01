// GPT-2's MLP with GELU in cuBLASLt's epilogues (ZERO_CUDA_GELU_EPILOGUE=1,
// cuda_backend_gelu_epilogue.cpp) against the CPU oracle's unfused sequence: the up-projection's
// act = gelu(x w^T + bias) and its kept pre-activation up, then the down-projection backward's
// d_up = (dy w) * gelu'(up) with its dw and dbias. Shapes whose rows the epilogue kernels cannot
// take fall back to the unfused ops; the knob's parsing is checked without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "backend/cuda_test_support.h"
#include "core/error.h"
#include "support/env_guard.h"

namespace zero::backend::cuda_test {
namespace {

using test_support::EnvGuard;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
const DType kStorageTypes[] = {DType::kF32, DType::kBF16, DType::kF16};

// One rounding unit (relative) of a 16-bit dtype's results, 0 for f32.
double storage_unit(DType dtype) {
  return dtype == DType::kBF16 ? 1.0 / 128 : dtype == DType::kF16 ? 1.0 / 1024 : 0.0;
}

// The GELU factor's own error: cuBLASLt may evaluate tanh with the hardware approximation
// (tanh.approx.f32, relative error about 2^-10.7), so results that went through GELU or GELU'
// are held to 1e-3 of the magnitudes involved even in f32; a 16-bit unit where that is larger.
double gelu_unit(DType dtype) { return std::max(storage_unit(dtype), 1e-3); }

// |gpu - cpu| <= atol + unit * scale[i] for every element.
void expect_within(const std::vector<double>& cpu, const std::vector<double>& gpu,
                   const std::vector<double>& scale, double unit, double atol,
                   const std::string& what) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  ASSERT_EQ(cpu.size(), scale.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const double limit = atol + unit * scale[i];
    if (!(std::fabs(gpu[i] - cpu[i]) <= limit) && reported++ < 5) {
      ADD_FAILURE() << what << "[" << i << "]: cpu " << cpu[i] << " gpu " << gpu[i]
                    << " (limit " << limit << ")";
    }
  }
}

struct MlpShape {
  int64_t rows, in, inner;  // x [rows, in] -> up, act [rows, inner] -> y [rows, in]
};

struct MlpResults {
  std::vector<double> act, up, d_act, d_up, dw, dbias;
};

// The MLP's fused ops on `be` (the CPU backend runs Backend's unfused defaults). The forward
// runs on each backend's own inputs; the backward on the act and up of `backward_input` (the
// CPU's forward), so each direction is compared on identical inputs. d_act is the CPU's
// intermediate dy @ w_down, computed separately for the tolerances; empty for the GPU.
MlpResults run_mlp(Backend& be, bool cpu, const MlpShape& s, DType dtype, bool with_bias,
                   const MlpResults* backward_input) {
  const std::vector<float> x = random_values(s.rows * s.in, 61);
  const std::vector<float> w_up = random_values(s.inner * s.in, 62, -0.3f, 0.3f);
  const std::vector<float> b_up = random_values(s.inner, 63);
  const std::vector<float> w_down = random_values(s.in * s.inner, 64, -0.3f, 0.3f);
  const std::vector<float> dy = random_values(s.rows * s.in, 65);
  const std::vector<float> dw0 = random_values(s.in * s.inner, 66);
  const std::vector<float> db0 = random_values(s.in, 67);
  Tensor tx = upload(be, x, {s.rows, s.in}, dtype);
  Tensor tw_up = upload(be, w_up, {s.inner, s.in}, dtype);
  Tensor tb_up = upload(be, b_up, {s.inner}, dtype);
  Tensor tw_down = upload(be, w_down, {s.in, s.inner}, dtype);
  Tensor tdy = upload(be, dy, {s.rows, s.in}, dtype);
  Tensor act = be.empty({s.rows, s.inner}, dtype, MemoryCategory::kOther);
  Tensor up = be.empty({s.rows, s.inner}, dtype, MemoryCategory::kOther);
  be.fill(act, kNaN);
  be.fill(up, kNaN);
  be.linear_gelu_forward(act, up, tx, tw_up, with_bias ? &tb_up : nullptr);
  MlpResults r;
  r.act = download(be, act);
  r.up = download(be, up);
  if (backward_input != nullptr) {
    // The values are the CPU's, already in `dtype`: they upload exactly.
    const auto narrow = [](const std::vector<double>& v) {
      return std::vector<float>(v.begin(), v.end());
    };
    act = upload(be, narrow(backward_input->act), {s.rows, s.inner}, dtype);
    up = upload(be, narrow(backward_input->up), {s.rows, s.inner}, dtype);
  }
  if (cpu) {
    Tensor d_act = be.empty({s.rows, s.inner}, dtype, MemoryCategory::kOther);
    Tensor scratch_dw = upload(be, dw0, {s.in, s.inner}, dtype);
    be.linear_backward(&d_act, scratch_dw, nullptr, tdy, act, tw_down);
    r.d_act = download(be, d_act);
  }
  Tensor dw = upload(be, dw0, {s.in, s.inner}, dtype);
  Tensor db = upload(be, db0, {s.in}, dtype);
  Tensor d_up = be.linear_backward_gelu(dw, with_bias ? &db : nullptr, tdy, act, tw_down, up);
  r.d_up = download(be, d_up);
  r.dw = download(be, dw);
  r.dbias = download(be, db);
  return r;
}

// The fused results against the CPU's, with the limits the epilogue's rounding points allow:
// - up: as cuBLASLt's bias epilogue (the product rounded before the bias is added);
// - act: GELU of the unrounded pre-activation, so off by GELU's slope (< 1.13) times a unit of
//   up, plus the product's unit, plus a unit of act;
// - d_up: (dy w) unrounded times gelu'(up), so a unit of d_act times |gelu'| plus a unit of d_up;
// - dw, dbias: the plain linear backward's (the backward ran on the CPU's act on both sides).
void expect_mlp_close(const MlpResults& cpu, const MlpResults& gpu, const std::vector<float>& b,
                      DType dtype, bool with_bias, const std::string& what) {
  const Tolerance tol = storage_tolerance(dtype, 1e-5, 3e-5);
  const double unit = storage_unit(dtype), g = gelu_unit(dtype);
  if (with_bias) {
    expect_close_after_bias_epilogue(cpu.up, gpu.up, b, dtype, tol, what + " up");
  } else {
    expect_close(cpu.up, gpu.up, tol, what + " up");
  }
  std::vector<double> act_scale(cpu.act.size()), d_up_scale(cpu.d_up.size());
  for (size_t i = 0; i < act_scale.size(); ++i) {
    const double bias = with_bias ? b[i % b.size()] : 0.0;
    act_scale[i] = std::fabs(cpu.act[i]) + 1.2 * std::fabs(cpu.up[i]) +
                   std::fabs(cpu.up[i] - bias) * (unit > 0.0 ? 1.0 : 0.0);
    d_up_scale[i] = std::fabs(cpu.d_up[i]) + 1.2 * std::fabs(cpu.d_act[i]);
  }
  expect_within(cpu.act, gpu.act, act_scale, g, 3e-5, what + " act");
  expect_within(cpu.d_up, gpu.d_up, d_up_scale, g, 3e-5, what + " d_up");
  expect_close(cpu.dw, gpu.dw, tol, what + " dw (accumulated)");
  expect_close(cpu.dbias, gpu.dbias, tol, what + " dbias (accumulated)");
}

class CudaGeluEpilogue : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
  CpuBackend cpu_;
};

TEST_F(CudaGeluEpilogue, FusedMlpMatchesTheCpu) {
  const EnvGuard knob("ZERO_CUDA_GELU_EPILOGUE", "1");
  CudaBackend gpu(0);
  ASSERT_TRUE(gpu.gelu_epilogue());
  // GPT-2's proportions (inner = 4 in), rows no multiple of any tile.
  const MlpShape shape{37, 64, 256};
  const std::vector<float> b_up = random_values(shape.inner, 63);
  for (DType dtype : kStorageTypes) {
    for (bool with_bias : {true, false}) {
      const uint64_t before = gpu.gelu_epilogue_products();
      const MlpResults cpu = run_mlp(cpu_, true, shape, dtype, with_bias, nullptr);
      const MlpResults fused = run_mlp(gpu, false, shape, dtype, with_bias, &cpu);
      const std::string what =
          std::string(dtype_name(dtype)) + (with_bias ? " with bias" : " without bias");
      // bf16 is what GPT-2 trains in: its two products must take the epilogues. (A GPU's
      // cuBLASLt may lack f32 or f16 epilogue kernels for a shape; those fall back, still checked.)
      if (dtype == DType::kBF16) {
        EXPECT_EQ(gpu.gelu_epilogue_products() - before, 2u) << what;
      }
      expect_mlp_close(cpu, fused, b_up, dtype, with_bias, what);
    }
  }
}

TEST_F(CudaGeluEpilogue, RowsTheEpilogueCannotTakeFallBackToTheUnfusedOps) {
  const EnvGuard knob("ZERO_CUDA_GELU_EPILOGUE", "1");
  CudaBackend gpu(0);
  // 100 columns of up (200 bytes of bf16): rows off 16-byte boundaries.
  const MlpShape shape{21, 48, 100};
  const std::vector<float> b_up = random_values(shape.inner, 63);
  const MlpResults cpu = run_mlp(cpu_, true, shape, DType::kBF16, true, nullptr);
  const MlpResults gpu_results = run_mlp(gpu, false, shape, DType::kBF16, true, &cpu);
  EXPECT_EQ(gpu.gelu_epilogue_products(), 0u);
  expect_mlp_close(cpu, gpu_results, b_up, DType::kBF16, true, "fallback");
}

TEST_F(CudaGeluEpilogue, OffByDefault) {
  const EnvGuard unset("ZERO_CUDA_GELU_EPILOGUE", std::nullopt);
  CudaBackend gpu(0);
  EXPECT_FALSE(gpu.gelu_epilogue());
  const MlpShape shape{37, 64, 256};
  const MlpResults cpu = run_mlp(cpu_, true, shape, DType::kBF16, true, nullptr);
  const MlpResults gpu_results = run_mlp(gpu, false, shape, DType::kBF16, true, &cpu);
  EXPECT_EQ(gpu.gelu_epilogue_products(), 0u);
  expect_mlp_close(cpu, gpu_results, random_values(shape.inner, 63), DType::kBF16, true,
                   "default");
}

// The knob's parsing needs no device.
TEST(CudaGeluEpilogueKnob, AcceptsZeroOneOrUnsetAndNamesTheVariableOtherwise) {
  {
    const EnvGuard unset("ZERO_CUDA_GELU_EPILOGUE", std::nullopt);
    EXPECT_FALSE(CudaBackend::gelu_epilogue_from_environment());
  }
  {
    const EnvGuard off("ZERO_CUDA_GELU_EPILOGUE", "0");
    EXPECT_FALSE(CudaBackend::gelu_epilogue_from_environment());
  }
  {
    const EnvGuard on("ZERO_CUDA_GELU_EPILOGUE", "1");
    EXPECT_TRUE(CudaBackend::gelu_epilogue_from_environment());
  }
  for (const char* bad : {"yes", "2", "", " 1"}) {
    const EnvGuard guard("ZERO_CUDA_GELU_EPILOGUE", bad);
    try {
      CudaBackend::gelu_epilogue_from_environment();
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("ZERO_CUDA_GELU_EPILOGUE"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace zero::backend::cuda_test

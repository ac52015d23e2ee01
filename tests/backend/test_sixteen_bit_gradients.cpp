// Gradients held in the parameters' 16-bit dtype (sharding/held_unit_gradients.h) on the CPU
// oracle: sum_squares and the optimizer updates read them widened, so a bf16 or f16 tensor gives
// the bits of an f32 tensor holding the same values; copy_sum_squares stores and sums as copy and
// sum_squares do. The CUDA side is compared with these in test_cuda_ops.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend_test_values.h"

namespace zero::backend {
namespace {
using backend_test::download;
using backend_test::download_bytes;
using backend_test::download_update;
using backend_test::random_optimizer_state;
using backend_test::random_values;
using backend_test::upload;

// f32 values that 16-bit storage keeps exactly: `values` stored in `dtype` and widened.
std::vector<float> representable(const std::vector<float>& values, DType dtype) {
  std::vector<float> out = values;
  for (float& v : out) v = dtype == DType::kBF16 ? to_float(to_bf16(v)) : to_float(to_f16(v));
  return out;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }

// Lengths around the reduction's 8 lanes and 64 Ki-element chunks.
TEST(SixteenBitGradients, SumOfSquaresHasTheBitsOfTheWidenedValues) {
  CpuBackend cpu;
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{1003}, int64_t{65536},
                      int64_t{2 * 65536 + 13}}) {
      const std::vector<float> values =
          representable(random_values(n, static_cast<uint32_t>(n), -40.0f, 40.0f), dtype);
      const Tensor narrow = upload(cpu, values, {n}, dtype);
      const Tensor wide = upload(cpu, values, {n}, DType::kF32);
      const double from_narrow = cpu.squared_norm(narrow);
      const double from_wide = cpu.squared_norm(wide);
      EXPECT_GT(from_wide, 0.0);
      EXPECT_TRUE(same_bits(from_narrow, from_wide))
          << dtype_name(dtype) << " n " << n << ": " << from_narrow << " vs " << from_wide;
    }
  }
}

TEST(SixteenBitGradients, CopyWithItsSumOfSquaresIsCopyThenSumSquares) {
  CpuBackend cpu;
  const int64_t n = 65536 + 37;
  const std::vector<float> values = random_values(n, 7, -300.0f, 300.0f);
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    const Tensor src = upload(cpu, values, {n}, DType::kF32);
    Tensor fused = cpu.empty({n}, dtype, MemoryCategory::kOther);
    Tensor sum = cpu.empty({1}, DType::kF64, MemoryCategory::kOther);
    cpu.copy_sum_squares(fused, src, sum);
    Tensor copied = cpu.empty({n}, dtype, MemoryCategory::kOther);
    cpu.copy(copied, src);
    EXPECT_EQ(download_bytes(cpu, fused), download_bytes(cpu, copied)) << dtype_name(dtype);
    EXPECT_TRUE(same_bits(sum.data<double>()[0], cpu.squared_norm(copied))) << dtype_name(dtype);
    // The f32 route to the same norm: rounding in place, then the sum of the f32 values.
    Tensor rounded = upload(cpu, values, {n}, DType::kF32);
    Tensor rounded_sum = cpu.empty({1}, DType::kF64, MemoryCategory::kOther);
    cpu.round_in_place_sum_squares(rounded, dtype, rounded_sum);
    EXPECT_TRUE(same_bits(sum.data<double>()[0], rounded_sum.data<double>()[0]))
        << dtype_name(dtype);
  }
}

// Every kind, with and without decoupled decay and a copy of the parameters' dtype, over
// segments that leave gaps: the 16-bit gradients update as the f32 ones of the same values.
TEST(SixteenBitGradients, OptimizerUpdatesGiveTheBitsOfF32Gradients) {
  CpuBackend cpu;
  const int64_t n = 3001;
  const ParamSegment segments[] = {{0, 1200, true}, {1203, 37, false}, {1300, 1700, true}};
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    const std::vector<float> grads = representable(random_values(n, 11, -2.0f, 2.0f), dtype);
    for (OptimizerKind kind : {OptimizerKind::kAdam, OptimizerKind::kLamb, OptimizerKind::kLion,
                               OptimizerKind::kAdagrad}) {
      for (bool adam_w : {true, false}) {
        OptimizerHyper hyper;
        hyper.lr = 3e-3;
        hyper.weight_decay = 0.1;
        hyper.step = 2;
        hyper.adam_w_mode = adam_w;
        hyper.grad_scale = 0.37;
        std::vector<double> results[2];
        std::vector<uint8_t> copies[2];
        for (int narrow = 0; narrow < 2; ++narrow) {
          Tensor p = upload(cpu, random_values(n, 12), {n}, DType::kF32);
          const Tensor g = upload(cpu, grads, {n}, narrow ? dtype : DType::kF32);
          std::vector<Tensor> state = random_optimizer_state(cpu, kind, n, 13);
          cpu.optimizer_update(kind, p, g, state, segments, hyper);
          Tensor copy = cpu.empty({n}, dtype, MemoryCategory::kOther);
          cpu.copy(copy, p);
          cpu.optimizer_update_with_copy(kind, p, g, state, segments, hyper, copy);
          copies[narrow] = download_bytes(cpu, copy);
          results[narrow] = download_update(cpu, p, state);
        }
        const std::string what = std::string(dtype_name(dtype)) + " kind " +
                                 std::to_string(static_cast<int>(kind)) + " adam_w " +
                                 std::to_string(adam_w);
        EXPECT_EQ(results[0], results[1]) << what;
        EXPECT_EQ(copies[0], copies[1]) << what;
      }
    }
  }
}

TEST(SixteenBitGradients, OptimizerRefusesGradientsOfOtherDtypesNamingThem) {
  CpuBackend cpu;
  Tensor p = cpu.zeros({8}, DType::kF32, MemoryCategory::kOther);
  Tensor g = cpu.zeros({8}, DType::kF64, MemoryCategory::kOther);
  std::vector<Tensor> state = {cpu.zeros({8}, DType::kF32, MemoryCategory::kOther)};
  const ParamSegment segment{0, 8, false};
  try {
    cpu.optimizer_update(OptimizerKind::kLion, p, g, state, {&segment, 1}, OptimizerHyper{});
    ADD_FAILURE() << "f64 gradients accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("grads"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("f64"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zero::backend

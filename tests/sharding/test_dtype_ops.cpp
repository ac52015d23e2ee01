// The sharding layer's 16-bit rounding sites: round_through (where a micro-batch gradient is
// stored in the parameters' dtype) and accumulate (where gradients are summed in a 16-bit
// accumulator) must give the single round-to-nearest-even result on edge values: ties,
// subnormals, overflow to Inf, NaN, signed zero. half.h's conversions are the oracle (they are
// checked exhaustively in tests/core/test_half.cpp).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/half.h"
#include "sharding/dtype_ops.h"

namespace zero::sharding {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

const std::vector<float> kEdges = {
    0.0f, -0.0f, 1.0f,
    1.0f + 0x1p-8f,       // bf16 tie: to even (1)
    1.0f + 3 * 0x1p-8f,   // bf16 tie: to even (1 + 2^-6)
    1.0f + 0x1p-11f,      // f16 tie: to even (1)
    1.0f + 3 * 0x1p-11f,  // f16 tie: to even (1 + 2^-9)
    65504.0f, 65519.0f, 65520.0f, -65520.0f,  // f16 max, below the overflow tie, the tie (Inf)
    0x1p-24f, 0x1p-25f, 0x1.8p-25f, 3 * 0x1p-25f,  // f16 min subnormal, tie to 0, up, tie to even
    0x1p-133f, 0x1p-134f,                        // bf16 min subnormal and its tie to 0
    std::numeric_limits<float>::max(), kInf, -kInf,
    std::numeric_limits<float>::quiet_NaN()};

float expected(float v, DType dtype) {
  return dtype == DType::kBF16 ? round_to_bf16(v) : round_to_f16(v);
}

void expect_same(float got, float want, float input) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << "input " << input;
  } else {
    EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
        << "input " << input << " (" << std::hexfloat << input << "): got " << got << ", want "
        << want;
  }
}

Tensor f32_tensor(backend::Backend& cpu, const std::vector<float>& values) {
  Tensor t = cpu.empty({static_cast<int64_t>(values.size())}, DType::kF32, MemoryCategory::kOther);
  cpu.copy_from_host(t, values.data());
  return t;
}

std::vector<float> values_of(backend::Backend& cpu, const Tensor& t) {
  Tensor f = cpu.empty({t.numel()}, DType::kF32, MemoryCategory::kOther);
  cpu.copy(f, t);
  std::vector<float> out(static_cast<size_t>(t.numel()));
  std::memcpy(out.data(), f.raw_data(), f.nbytes());
  return out;
}

TEST(DtypeOps, RoundThroughRoundsToNearestEvenAtEveryEdge) {
  backend::CpuBackend cpu;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    Tensor t = f32_tensor(cpu, kEdges);
    round_through(cpu, t, dtype);
    const std::vector<float> got = values_of(cpu, t);
    for (size_t i = 0; i < kEdges.size(); ++i) expect_same(got[i], expected(kEdges[i], dtype), kEdges[i]);
  }
  // f32 is left alone.
  Tensor t = f32_tensor(cpu, kEdges);
  round_through(cpu, t, DType::kF32);
  const std::vector<float> same = values_of(cpu, t);
  for (size_t i = 0; i < kEdges.size(); ++i) expect_same(same[i], kEdges[i], kEdges[i]);
}

TEST(DtypeOps, SixteenBitAccumulationRoundsTheF32SumOnce) {
  backend::CpuBackend cpu;
  // acc + x where the exact sum lands on a tie, below the smallest subnormal or past the largest
  // finite value: {accumulator, addend} pairs, both exactly representable in f16.
  const std::vector<std::pair<float, float>> f16_cases = {
      {2048.0f, 1.0f},          // 2049: tie between 2048 and 2050 -> 2048 (even)
      {2050.0f, 1.0f},          // 2051: tie between 2050 and 2052 -> 2052 (even)
      {0x1p-24f, -0x1p-24f},    // exact zero
      {0x1p-24f, 0x1p-24f},     // two min subnormals: 2^-23, exact
      {60000.0f, 5520.0f},      // 65520: the overflow tie -> Inf
      {65504.0f, 8.0f},         // 65512: rounds back to 65504
      {-60000.0f, -6000.0f},    // -Inf
      {1.0f, kInf}, {kInf, -kInf}};
  const std::vector<std::pair<float, float>> bf16_cases = {
      {256.0f, 1.0f},           // 257: tie -> 256
      {258.0f, 1.0f},           // 259: tie -> 260
      {0x1p-133f, -0x1p-133f},  // exact zero
      {3.3895314e38f, 0x1p120f},  // past the largest finite: Inf
      {1.0f, std::numeric_limits<float>::quiet_NaN()}};
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    const auto& cases = dtype == DType::kF16 ? f16_cases : bf16_cases;
    std::vector<float> a, x;
    for (const auto& [acc, add] : cases) {
      a.push_back(acc);
      x.push_back(add);
    }
    Tensor acc16 = cpu.empty({static_cast<int64_t>(a.size())}, dtype, MemoryCategory::kOther);
    Tensor a32 = f32_tensor(cpu, a);
    cpu.copy(acc16, a32);
    // The addend arrives in 16 bits too (a micro-batch gradient stored in the parameters' dtype).
    Tensor x16 = cpu.empty({static_cast<int64_t>(x.size())}, dtype, MemoryCategory::kOther);
    Tensor x32 = f32_tensor(cpu, x);
    cpu.copy(x16, x32);
    accumulate(cpu, acc16, x16);
    const std::vector<float> got = values_of(cpu, acc16);
    for (size_t i = 0; i < a.size(); ++i) {
      expect_same(got[i], expected(expected(a[i], dtype) + expected(x[i], dtype), dtype), a[i]);
    }
  }
  // Spot checks against the hand-computed values (the oracle could share a bug).
  Tensor acc = cpu.empty({2}, DType::kF16, MemoryCategory::kOther);
  Tensor init = f32_tensor(cpu, {2048.0f, 60000.0f});
  cpu.copy(acc, init);
  Tensor add = f32_tensor(cpu, {1.0f, 5520.0f});
  accumulate(cpu, acc, add);
  const std::vector<float> got = values_of(cpu, acc);
  EXPECT_EQ(got[0], 2048.0f);
  EXPECT_EQ(got[1], kInf);
}

}  // namespace
}  // namespace zero::sharding

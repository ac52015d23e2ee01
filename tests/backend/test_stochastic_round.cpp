// Stochastic rounding to bf16: exact values stay, everything else lands on one of its two bf16
// neighbours, the fraction rounded up matches the position between them (so the mean is the
// f32 value), and the result is a pure function of (seed, element index).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/half.h"
#include "core/stochastic_rounding.h"

namespace zero::backend {
namespace {

std::vector<float> round_all(CpuBackend& cpu, const std::vector<float>& values, uint64_t seed,
                             int64_t first_index) {
  const int64_t n = static_cast<int64_t>(values.size());
  Tensor src = cpu.empty({n}, DType::kF32, MemoryCategory::kOther);
  cpu.copy_from_host(src, values.data());
  Tensor dst = cpu.empty({n}, DType::kBF16, MemoryCategory::kOther);
  cpu.stochastic_round_to_bf16(dst, src, seed, first_index);
  std::vector<float> out(values.size());
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_bits_to_float(static_cast<uint16_t*>(dst.raw_data())[i]);
  return out;
}

TEST(StochasticRounding, ExactValuesInfAndNanPassThrough) {
  CpuBackend cpu;
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> exact = {0.0f, -0.0f, 1.0f, -3.5f, 0x1p-133f, 3.3895314e38f, inf, -inf};
  for (uint64_t seed : {1u, 2u, 99u}) {
    const std::vector<float> got = round_all(cpu, exact, seed, 0);
    for (size_t i = 0; i < exact.size(); ++i) {
      EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(exact[i])) << exact[i];
    }
  }
  EXPECT_TRUE(std::isnan(round_all(cpu, {std::numeric_limits<float>::quiet_NaN()}, 3, 0)[0]));
  // A signalling-looking NaN whose payload sits only in the dropped bits stays a NaN.
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits_stochastic(std::bit_cast<float>(0x7F800001u), 0))));
}

TEST(StochasticRounding, ExpectationIsTheF32Value) {
  CpuBackend cpu;
  // 1 + k/8 of bf16's spacing at 1 (2^-7): rounds up with probability k/8.
  const int64_t n = 1 << 16;
  for (int k : {1, 3, 4, 7}) {
    const float value = 1.0f + static_cast<float>(k) * 0x1p-10f;
    const std::vector<float> got = round_all(cpu, std::vector<float>(n, value), 42, 0);
    int64_t up = 0;
    for (float v : got) {
      ASSERT_TRUE(v == 1.0f || v == 1.0f + 0x1p-7f) << v;
      up += v > 1.0f ? 1 : 0;
    }
    const double fraction = static_cast<double>(up) / static_cast<double>(n);
    // Binomial standard deviation at n = 65536 is <= 0.002; 0.01 is five of them.
    EXPECT_NEAR(fraction, k / 8.0, 0.01) << "k = " << k;
  }
  // Negative values round toward and away from zero symmetrically.
  const std::vector<float> neg = round_all(cpu, std::vector<float>(n, -(1.0f + 0x1p-9f)), 7, 0);
  double mean = 0;
  for (float v : neg) mean += v;
  EXPECT_NEAR(mean / n, -(1.0 + std::ldexp(1.0, -9)), 0.01 * std::ldexp(1.0, -7));
}

TEST(StochasticRounding, DependsOnlyOnSeedAndElementIndex) {
  CpuBackend cpu;
  std::vector<float> values(1000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 1.0f + static_cast<float>(i) * 0x1p-17f;
  const std::vector<float> whole = round_all(cpu, values, 5, 100);
  // The second half rounded on its own, with its own first index, gives the same values.
  const std::vector<float> tail(values.begin() + 500, values.end());
  const std::vector<float> tail_rounded = round_all(cpu, tail, 5, 600);
  for (size_t i = 0; i < tail.size(); ++i) EXPECT_EQ(tail_rounded[i], whole[500 + i]);
  // Another seed changes some of them.
  const std::vector<float> other = round_all(cpu, values, 6, 100);
  EXPECT_NE(other, whole);
}

TEST(StochasticRounding, RejectsWrongDtypes) {
  CpuBackend cpu;
  Tensor f = cpu.empty({4}, DType::kF32, MemoryCategory::kOther);
  Tensor h = cpu.empty({4}, DType::kF16, MemoryCategory::kOther);
  EXPECT_THROW(cpu.stochastic_round_to_bf16(h, f, 1, 0), ShapeError);
}

}  // namespace
}  // namespace zero::backend

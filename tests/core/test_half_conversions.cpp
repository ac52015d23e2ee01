// f16 / bf16 conversions: exact decoding of all 65536 patterns, round-to-nearest-even on ties,
// subnormals, overflow to Inf, NaN stays NaN — against an independent double-precision rounding.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <random>

#include "core/half.h"

namespace zero {
namespace {

// Independent f16 decoding with ldexp.
double decode_f16(uint16_t h) {
  const int sign = (h >> 15) ? -1 : 1;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  if (exponent == 31) return mantissa ? NAN : sign * INFINITY;
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

// Independent round-to-nearest-even of a float to f16 by searching the representable values.
uint16_t reference_f16(float value) {
  if (std::isnan(value)) return 0x7e00;
  const uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  const double v = std::fabs(static_cast<double>(value));
  if (v >= 65520.0) return sign | 0x7c00;
  // Candidates: the finite non-negative patterns 0 .. 0x7bff are increasing in value.
  uint16_t lo = 0, hi = 0x7bff;
  while (lo < hi) {  // largest pattern with value <= v
    const uint16_t mid = static_cast<uint16_t>((lo + hi + 1) / 2);
    if (decode_f16(mid) <= v) lo = mid; else hi = static_cast<uint16_t>(mid - 1);
  }
  uint16_t best = lo;
  if (lo < 0x7bff || v > decode_f16(lo)) {
    const double below = decode_f16(lo);
    const double above = lo < 0x7bff ? decode_f16(static_cast<uint16_t>(lo + 1)) : 65536.0;
    if (v - below > above - v || (v - below == above - v && (lo & 1))) best = static_cast<uint16_t>(lo + 1);
  }
  if (best > 0x7bff) return sign | 0x7c00;
  return sign | best;
}

TEST(Half, EveryF16PatternDecodesExactlyAndRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const float f = f16_bits_to_float(bits);
    const double ref = decode_f16(bits);
    if (std::isnan(ref)) {
      EXPECT_TRUE(std::isnan(f)) << h;
      EXPECT_TRUE(std::isnan(f16_bits_to_float(float_to_f16_bits(f)))) << h;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), ref) << h;
    ASSERT_EQ(float_to_f16_bits(f), bits) << h;
  }
}

TEST(Half, EveryBf16PatternRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const float f = bf16_bits_to_float(bits);
    ASSERT_EQ(std::bit_cast<uint32_t>(f), h << 16);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(f))));
    } else {
      ASSERT_EQ(float_to_bf16_bits(f), bits) << h;
    }
  }
}

TEST(Half, F16RoundingMatchesAnIndependentReference) {
  std::vector<float> values = {0.0f, -0.0f, 1.0f, 65504.0f, 65519.99f, 65520.0f, 1e9f, -1e9f,
                               std::ldexp(1.0f, -24), std::ldexp(1.0f, -25),
                               std::nextafter(std::ldexp(1.0f, -25), 1.0f), std::ldexp(1.0f, -14),
                               std::ldexp(1023.5f, -24), std::ldexp(1.5f, -25), 1.0f + std::ldexp(1.0f, -11),
                               1.0f + 3 * std::ldexp(1.0f, -11), 2049.0f, 2051.0f, FLT_MIN, FLT_MAX};
  std::mt19937 rng(1);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t bits = rng();
    const float f = std::bit_cast<float>(bits);
    if (!std::isnan(f)) values.push_back(f);
  }
  std::uniform_real_distribution<float> small(-70000.0f, 70000.0f);
  for (int i = 0; i < 100000; ++i) values.push_back(small(rng));
  for (float v : values) ASSERT_EQ(float_to_f16_bits(v), reference_f16(v)) << v;
}

TEST(Half, EdgeCasesByBitPattern) {
  EXPECT_EQ(float_to_f16_bits(65504.0f), 0x7bff);         // largest finite
  EXPECT_EQ(float_to_f16_bits(65520.0f), 0x7c00);         // the tie above it rounds to Inf
  EXPECT_EQ(float_to_f16_bits(std::ldexp(1.0f, -25)), 0); // tie below the smallest subnormal -> 0
  EXPECT_EQ(float_to_f16_bits(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(float_to_f16_bits(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp tie -> even (2)
  EXPECT_EQ(float_to_f16_bits(-0.0f), 0x8000);
  EXPECT_EQ(float_to_f16_bits(INFINITY), 0x7c00);
  EXPECT_EQ(float_to_f16_bits(-INFINITY), 0xfc00);
  // A NaN whose payload lives only in low bits must stay NaN, not become Inf.
  const float quiet_low = std::bit_cast<float>(0x7f800001u);
  EXPECT_TRUE(std::isnan(f16_bits_to_float(float_to_f16_bits(quiet_low))));
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(quiet_low))));
  // bf16 ties: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 -> even (1); 1 + 3*2^-8 -> up.
  EXPECT_EQ(float_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(float_to_bf16_bits(FLT_MAX), 0x7f80);  // rounds up past the largest bf16: Inf
  EXPECT_EQ(float_to_bf16_bits(std::bit_cast<float>(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(float_to_bf16_bits(std::bit_cast<float>(0x00010000u)), 0x0001);  // subnormal kept
}

}  // namespace
}  // namespace zero

// Vectorisable math helpers shared by CPU kernels (libm calls do not vectorise without
// -ffast-math, which the project does not use).
#pragma once
#include <bit>
#include <cstdint>

namespace zero::backend::cpu {

// exp(x) for x <= 0 (the arguments are logit - row max) without calls, branches or float->int
// conversions, so `omp simd` loops vectorise it. Within 1 ulp (checked over every float in
// [-87, 0]).
inline float exp_nonpositive(float x) {
  // Below -87 the result would be subnormal; clamping there moves a probability by < 2e-38,
  // invisible next to the row's largest term (1). The clamp works on the bit pattern: for
  // negative floats a larger unsigned pattern is a larger magnitude, so (-87 bits, -Inf bits]
  // selects x < -87 while NaNs of either sign pass through. A float compare-and-select here
  // may trap under -ftrapping-math (GCC's default), which stops GCC from if-converting, and so
  // from vectorising, the loops that sum in double.
  constexpr float kMin = -87.0f;
  constexpr uint32_t kMinBits = std::bit_cast<uint32_t>(kMin);
  constexpr uint32_t kNegInfBits = 0xff800000u;
  uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t clamp = 0u - static_cast<uint32_t>((bits > kMinBits) & (bits <= kNegInfBits));
  bits = (bits & ~clamp) | (kMinBits & clamp);
  x = std::bit_cast<float>(bits);
  // x = n ln2 + r with integer n in [-126, 0] and |r| <= ln2/2. Adding 1.5 * 2^23 rounds
  // x / ln2 to an integer held in the low mantissa bits, which also give n for the exponent.
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kRoundShift = 12582912.0f;
  // ln2 split so n * kLn2Hi is exact (kLn2Hi has 15 significant bits, n at most 7).
  constexpr float kLn2Hi = 0.693145751953125f;
  constexpr float kLn2Lo = static_cast<float>(0.693147180559945309417232 - 0.693145751953125);
  const float shifted = x * kLog2e + kRoundShift;
  const float n = shifted - kRoundShift;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  // Taylor series of exp(r) to r^7: the truncation error r^8/8! < 6e-9 for |r| <= 0.35.
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n built from its exponent field; unsigned arithmetic keeps NaN inputs well defined.
  const uint32_t n_bits = std::bit_cast<uint32_t>(shifted) - std::bit_cast<uint32_t>(kRoundShift);
  const float two_n = std::bit_cast<float>((n_bits + 127u) << 23);
  return p * two_n;
}

}  // namespace zero::backend::cpu

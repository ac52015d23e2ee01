// 16-bit floating point storage types and exact conversions. float -> 16 bit rounds to nearest,
// ties to even (the rounding every GPU kernel and PyTorch use), keeps NaN a NaN (quiet), turns
// overflow into Inf, and produces subnormals; 16 bit -> float is exact.
#pragma once
#include <bit>
#include <cstdint>

#include "core/dtype.h"

namespace zero {

struct bf16 {
  uint16_t bits = 0;
};
struct f16 {
  uint16_t bits = 0;
};
template <> struct DTypeOf<bf16> { static constexpr DType value = DType::kBF16; };
template <> struct DTypeOf<f16> { static constexpr DType value = DType::kF16; };

constexpr uint16_t float_to_bf16_bits(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    // NaN: keep sign and top payload bits, force the quiet bit so truncation cannot yield Inf.
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  const uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding_bias) >> 16);
}

constexpr float bf16_bits_to_float(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

// Rounds `mantissa >> shift` to nearest even.
constexpr uint32_t shift_right_round_even(uint32_t mantissa, uint32_t shift) {
  const uint32_t result = mantissa >> shift;
  const uint32_t remainder = mantissa & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  return (remainder > half || (remainder == half && (result & 1u))) ? result + 1u : result;
}

constexpr uint16_t float_to_f16_bits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {  // Inf or NaN
    if (magnitude == 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u);
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  }
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 -> Inf
  if (magnitude <= 0x33000000u) return static_cast<uint16_t>(sign);  // <= 2^-25 (a tie) -> 0
  const uint32_t exponent = magnitude >> 23;
  const uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
  if (exponent < 113) {  // below 2^-14: a half subnormal, value = round(f * 2^24)
    return static_cast<uint16_t>(sign | shift_right_round_even(mantissa, 126u - exponent));
  }
  // Normal half: rebias the exponent, round 23 -> 10 mantissa bits; a carry may bump the exponent.
  const uint32_t rebased = ((exponent - 112u) << 10) | ((mantissa & 0x7fffffu) >> 13);
  const uint32_t remainder = mantissa & 0x1fffu;
  const bool round_up = remainder > 0x1000u || (remainder == 0x1000u && (rebased & 1u));
  return static_cast<uint16_t>(sign | (rebased + (round_up ? 1u : 0u)));
}

constexpr float f16_bits_to_float(uint16_t half) {
  const uint32_t sign = (static_cast<uint32_t>(half) & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1fu;
  const uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float.
    const float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

inline bf16 to_bf16(float value) { return bf16{float_to_bf16_bits(value)}; }
inline f16 to_f16(float value) { return f16{float_to_f16_bits(value)}; }
inline float to_float(bf16 value) { return bf16_bits_to_float(value.bits); }
inline float to_float(f16 value) { return f16_bits_to_float(value.bits); }

// Rounds a float through the 16-bit type and back: what a value looks like once stored.
inline float round_to_bf16(float value) { return bf16_bits_to_float(float_to_bf16_bits(value)); }
inline float round_to_f16(float value) { return f16_bits_to_float(float_to_f16_bits(value)); }

}  // namespace zero

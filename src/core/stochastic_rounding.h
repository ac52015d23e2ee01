// Stochastic rounding of f32 to bf16: round up with probability equal to the distance to the
// lower neighbour divided by the spacing, so the expected stored value is the f32 value. Small
// updates that round-to-nearest would always lose then survive on average - what keeps long
// runs with bf16 master weights from stalling.
//
// The random bits are a pure function of (seed, element index): counter-based, so the result is
// the same whichever rank, stage or thread rounds the element, and a GPU kernel computing the
// same hash reproduces the CPU bit for bit.
#pragma once
#include <bit>
#include <cstdint>

namespace zero {

// 16 uniformly distributed bits for element `index` under `seed` (splitmix64's finaliser over a
// Weyl-sequence counter).
constexpr uint32_t stochastic_rounding_bits(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<uint32_t>(z >> 48);
}

// The bf16 bit pattern of `value` rounded stochastically with the 16 random bits `random16`:
// add them below the kept bits and truncate. Values bf16 holds exactly (low 16 bits zero)
// never change; Inf and NaN pass through (NaN stays quiet); a finite value within one spacing of
// bf16's largest can round up to Inf, as rounding up there must.
constexpr uint16_t float_to_bf16_bits_stochastic(float value, uint32_t random16) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7F800000u) == 0x7F800000u) {
    return static_cast<uint16_t>((bits >> 16) | ((bits & 0x007FFFFFu) != 0 ? 0x0040u : 0u));
  }
  return static_cast<uint16_t>((bits + (random16 & 0xFFFFu)) >> 16);
}

}  // namespace zero

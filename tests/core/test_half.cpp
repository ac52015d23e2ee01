// Tests for core/half.h. Decoding is checked for all 65536 patterns of both formats against an
// independent ldexp decoder; float -> 16 bit rounding is checked against an independent
// reference (nearest value in a table of every representable value, ties to the even pattern)
// on every tie and its neighbours, on random floats, and on edge cases spelled out by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/half.h"

namespace zero {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kFloatMax = std::numeric_limits<float>::max();

uint32_t fbits(float f) { return std::bit_cast<uint32_t>(f); }
float from_fbits(uint32_t bits) { return std::bit_cast<float>(bits); }

// --- Independent decoders: the IEEE 754 formulas evaluated with ldexp in double. ---

double decode_f16_reference(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  double magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(mantissa, -24);  // subnormal: 0.m * 2^-14
  } else if (exponent == 31) {
    magnitude = mantissa == 0 ? std::numeric_limits<double>::infinity()
                              : std::numeric_limits<double>::quiet_NaN();
  } else {
    magnitude = std::ldexp(1024 + mantissa, exponent - 15 - 10);  // 1.m * 2^(e - 15)
  }
  return std::copysign(magnitude, (h & 0x8000) ? -1.0 : 1.0);
}

double decode_bf16_reference(uint16_t h) {
  const int exponent = (h >> 7) & 0xff;
  const int mantissa = h & 0x7f;
  double magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(mantissa, -133);  // subnormal: 0.m * 2^-126
  } else if (exponent == 255) {
    magnitude = mantissa == 0 ? std::numeric_limits<double>::infinity()
                              : std::numeric_limits<double>::quiet_NaN();
  } else {
    magnitude = std::ldexp(128 + mantissa, exponent - 127 - 7);  // 1.m * 2^(e - 127)
  }
  return std::copysign(magnitude, (h & 0x8000) ? -1.0 : 1.0);
}

// --- Independent rounding reference. ---
// A 16-bit format described by the values of all its positive finite patterns (pattern b has
// value values[b]; IEEE ordering makes that table increasing). Round-to-nearest-even by
// definition: take the two neighbours of |x|, the nearer wins, a tie goes to the even pattern.
// Above the largest finite value the upper neighbour is 2^(emax+1), encoded as Inf: that is how
// IEEE 754 defines overflow under round-to-nearest-even.
struct Format {
  std::vector<double> values;
  double overflow_value = 0;
  uint16_t inf_bits = 0;
};

Format make_format(double (*decode)(uint16_t), uint16_t inf_bits, double overflow_value) {
  Format format;
  format.inf_bits = inf_bits;
  format.overflow_value = overflow_value;
  for (uint32_t b = 0; b < inf_bits; ++b) format.values.push_back(decode(static_cast<uint16_t>(b)));
  return format;
}

const Format& f16_format() {
  static const Format format = make_format(decode_f16_reference, 0x7c00, 65536.0);
  return format;
}

const Format& bf16_format() {
  static const Format format = make_format(decode_bf16_reference, 0x7f80, std::ldexp(1.0, 128));
  return format;
}

// x must not be NaN. Differences below are exact in double: both operands have few significant
// bits and lie within a factor of two of each other (or one is zero).
uint16_t round_reference(const Format& format, float x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(x));
  if (std::isinf(a)) return sign | format.inf_bits;
  const auto& values = format.values;
  const auto it = std::lower_bound(values.begin(), values.end(), a);
  if (it != values.end() && *it == a) return static_cast<uint16_t>(sign | (it - values.begin()));
  // a > 0 here, and values[0] == 0, so a lower neighbour exists.
  const uint32_t lo_bits = static_cast<uint32_t>(it - values.begin()) - 1;
  const double lo = values[lo_bits];
  const uint32_t hi_bits = it == values.end() ? format.inf_bits : lo_bits + 1;
  const double hi = it == values.end() ? format.overflow_value : *it;
  const double below = a - lo;
  const double above = hi - a;
  uint32_t chosen;
  if (below < above) {
    chosen = lo_bits;
  } else if (above < below) {
    chosen = hi_bits;
  } else {
    chosen = (lo_bits % 2 == 0) ? lo_bits : hi_bits;
  }
  return static_cast<uint16_t>(sign | chosen);
}

bool is_f16_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0; }
bool is_bf16_nan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x007f) != 0; }

// Floats that probe a format's rounding: every representable value, every midpoint between
// neighbours (a tie) and the floats two ulps either side of both, for both signs.
std::vector<float> probes_around(const Format& format) {
  std::vector<float> out;
  const auto& values = format.values;
  for (size_t b = 0; b < values.size(); ++b) {
    const double next = b + 1 < values.size() ? values[b + 1] : format.overflow_value;
    for (double center : {values[b], (values[b] + next) / 2}) {
      const auto c = static_cast<float>(center);
      EXPECT_EQ(static_cast<double>(c), center) << "probe not exact in float";
      float down = c;
      float up = c;
      for (int step = 0; step < 2; ++step) {
        down = std::nextafter(down, 0.0f);
        up = std::nextafter(up, kInf);
      }
      for (float p : {c, std::nextafter(c, 0.0f), down, std::nextafter(c, kInf), up}) {
        out.push_back(p);
        out.push_back(-p);
      }
    }
  }
  return out;
}

// Random floats over every exponent (uniform bit patterns), NaN excluded.
std::vector<float> random_floats(size_t count) {
  std::mt19937 rng(12345);
  std::uniform_int_distribution<uint32_t> dist;
  std::vector<float> out;
  while (out.size() < count) {
    const float f = from_fbits(dist(rng));
    if (!std::isnan(f)) out.push_back(f);
  }
  return out;
}

// Compares `convert` with the reference over `inputs`, reporting only the first few mismatches.
template <typename Convert>
void expect_matches_reference(const Format& format, const std::vector<float>& inputs,
                              Convert convert) {
  int failures = 0;
  for (float x : inputs) {
    const uint16_t expected = round_reference(format, x);
    const uint16_t got = convert(x);
    if (got != expected && ++failures <= 10) {
      ADD_FAILURE() << "x=" << x << " (0x" << std::hex << fbits(x) << "): got 0x" << got
                    << ", expected 0x" << expected << std::dec;
    }
  }
  EXPECT_EQ(failures, 0);
}

// ---------------------------------------------------------------------------------------------
// The reference itself: sanity checks so a broken reference cannot silently agree.

TEST(HalfReference, TablesAreIncreasingAndHaveKnownEndpoints) {
  for (const Format* format : {&f16_format(), &bf16_format()}) {
    const auto& v = format->values;
    for (size_t i = 1; i < v.size(); ++i) ASSERT_LT(v[i - 1], v[i]) << i;
  }
  EXPECT_EQ(f16_format().values.back(), 65504.0);
  EXPECT_EQ(f16_format().values[1], std::ldexp(1.0, -24));
  EXPECT_EQ(f16_format().values[0x3c00], 1.0);
  EXPECT_EQ(bf16_format().values.back(), static_cast<double>(from_fbits(0x7f7f0000u)));
  EXPECT_EQ(bf16_format().values[1], std::ldexp(1.0, -133));
  EXPECT_EQ(bf16_format().values[0x3f80], 1.0);
  EXPECT_EQ(round_reference(f16_format(), 1.0f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(round_reference(f16_format(), 65520.0f), 0x7c00);
}

// ---------------------------------------------------------------------------------------------
// 16 bit -> float: exact for every pattern.

TEST(Half, F16ToFloatIsExactForAllPatterns) {
  int failures = 0;
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const auto h = static_cast<uint16_t>(b);
    const float got = f16_bits_to_float(h);
    const double ref = decode_f16_reference(h);
    bool ok;
    if (std::isnan(ref)) {
      ok = std::isnan(got) && std::signbit(got) == std::signbit(ref);
    } else {
      // Bit comparison: catches -0 vs +0, and the double comparison proves exactness.
      ok = fbits(got) == fbits(static_cast<float>(ref)) && static_cast<double>(got) == ref;
    }
    if (!ok && ++failures <= 10) ADD_FAILURE() << "f16 0x" << std::hex << b << " -> " << got;
  }
  EXPECT_EQ(failures, 0);
}

TEST(Half, Bf16ToFloatIsExactForAllPatterns) {
  int failures = 0;
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const auto h = static_cast<uint16_t>(b);
    const float got = bf16_bits_to_float(h);
    const double ref = decode_bf16_reference(h);
    bool ok;
    if (std::isnan(ref)) {
      ok = std::isnan(got) && std::signbit(got) == std::signbit(ref);
    } else {
      ok = fbits(got) == fbits(static_cast<float>(ref)) && static_cast<double>(got) == ref;
    }
    if (!ok && ++failures <= 10) ADD_FAILURE() << "bf16 0x" << std::hex << b << " -> " << got;
  }
  EXPECT_EQ(failures, 0);
}

// ---------------------------------------------------------------------------------------------
// Round trips: 16 -> 32 -> 16 is the identity on every non-NaN pattern; a NaN stays a NaN.

TEST(Half, F16RoundTripsEveryPattern) {
  int failures = 0;
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const auto h = static_cast<uint16_t>(b);
    const uint16_t back = float_to_f16_bits(f16_bits_to_float(h));
    const bool ok = is_f16_nan(h) ? is_f16_nan(back) && (back & 0x8000) == (h & 0x8000) &&
                                        (back & 0x0200) != 0  // quiet bit
                                  : back == h;
    if (!ok && ++failures <= 10) {
      ADD_FAILURE() << "f16 0x" << std::hex << b << " came back as 0x" << back;
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST(Half, Bf16RoundTripsEveryPattern) {
  int failures = 0;
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const auto h = static_cast<uint16_t>(b);
    const uint16_t back = float_to_bf16_bits(bf16_bits_to_float(h));
    const bool ok = is_bf16_nan(h) ? is_bf16_nan(back) && (back & 0x8000) == (h & 0x8000) &&
                                         (back & 0x0040) != 0  // quiet bit
                                   : back == h;
    if (!ok && ++failures <= 10) {
      ADD_FAILURE() << "bf16 0x" << std::hex << b << " came back as 0x" << back;
    }
  }
  EXPECT_EQ(failures, 0);
}

// ---------------------------------------------------------------------------------------------
// float -> 16 bit against the reference.

TEST(Half, FloatToF16MatchesReferenceAtEveryTieAndNeighbour) {
  expect_matches_reference(f16_format(), probes_around(f16_format()), float_to_f16_bits);
}

TEST(Half, FloatToBf16MatchesReferenceAtEveryTieAndNeighbour) {
  expect_matches_reference(bf16_format(), probes_around(bf16_format()), float_to_bf16_bits);
}

TEST(Half, FloatToF16MatchesReferenceOnRandomFloats) {
  expect_matches_reference(f16_format(), random_floats(1 << 20), float_to_f16_bits);
}

TEST(Half, FloatToBf16MatchesReferenceOnRandomFloats) {
  expect_matches_reference(bf16_format(), random_floats(1 << 20), float_to_bf16_bits);
}

// Floats from the f16 range (where f16 has structure: subnormals, overflow) at random.
TEST(Half, FloatToF16MatchesReferenceOnRandomInRangeFloats) {
  std::mt19937 rng(777);
  std::uniform_int_distribution<uint32_t> dist(0x32000000u, 0x47800000u);  // 2^-27 .. 2^16
  std::vector<float> inputs;
  for (int i = 0; i < (1 << 20); ++i) {
    const float f = from_fbits(dist(rng));
    inputs.push_back(i % 2 ? -f : f);
  }
  expect_matches_reference(f16_format(), inputs, float_to_f16_bits);
}

// ---------------------------------------------------------------------------------------------
// Edge cases with the expected bits written out, independent of any reference code.

TEST(HalfEdges, F16TiesRoundToEven) {
  EXPECT_EQ(float_to_f16_bits(1.0f + 0x1p-11f), 0x3c00);      // tie, even below: down
  EXPECT_EQ(float_to_f16_bits(1.0f + 3 * 0x1p-11f), 0x3c02);  // tie, odd below: up
  EXPECT_EQ(float_to_f16_bits(-(1.0f + 0x1p-11f)), 0xbc00);
  EXPECT_EQ(float_to_f16_bits(-(1.0f + 3 * 0x1p-11f)), 0xbc02);
  // Just above / below a tie goes to the nearer value regardless of parity.
  EXPECT_EQ(float_to_f16_bits(1.0f + 0x1p-11f + 0x1p-23f), 0x3c01);
  EXPECT_EQ(float_to_f16_bits(1.0f + 0x1p-11f - 0x1p-23f), 0x3c00);
  EXPECT_EQ(float_to_f16_bits(1.0f + 3 * 0x1p-11f - 0x1p-23f), 0x3c01);
  EXPECT_EQ(float_to_f16_bits(1.0f + 3 * 0x1p-11f + 0x1p-23f), 0x3c02);
  // A carry out of the mantissa bumps the exponent: 2 - 2^-12 is the tie between 0x3bff
  // (odd) and 2.0 (0x4000).
  EXPECT_EQ(float_to_f16_bits(2.0f - 0x1p-12f), 0x4000);
  // Top binade (spacing 32): 65488 ties 65472 (0x7bfe, even) and 65504 (0x7bff).
  EXPECT_EQ(float_to_f16_bits(65488.0f), 0x7bfe);
  EXPECT_EQ(float_to_f16_bits(65489.0f), 0x7bff);
}

TEST(HalfEdges, F16LargestFiniteAndOverflow) {
  EXPECT_EQ(float_to_f16_bits(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_f16_bits(-65504.0f), 0xfbff);
  EXPECT_EQ(float_to_f16_bits(65519.99f), 0x7bff);
  EXPECT_EQ(float_to_f16_bits(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(float_to_f16_bits(65520.0f), 0x7c00);  // the tie with 2^16 rounds to even: Inf
  EXPECT_EQ(float_to_f16_bits(-65520.0f), 0xfc00);
  EXPECT_EQ(float_to_f16_bits(65536.0f), 0x7c00);
  EXPECT_EQ(float_to_f16_bits(1e10f), 0x7c00);
  EXPECT_EQ(float_to_f16_bits(kFloatMax), 0x7c00);
  EXPECT_EQ(float_to_f16_bits(-kFloatMax), 0xfc00);
  EXPECT_EQ(f16_bits_to_float(0x7bff), 65504.0f);
}

TEST(HalfEdges, F16Subnormals) {
  EXPECT_EQ(float_to_f16_bits(0x1p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(f16_bits_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(float_to_f16_bits(0x1p-25f), 0x0000);  // tie between 0 and 2^-24: to even (0)
  EXPECT_EQ(float_to_f16_bits(-0x1p-25f), 0x8000);  // ... keeping the sign
  EXPECT_EQ(float_to_f16_bits(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(float_to_f16_bits(std::nextafter(0x1p-25f, 0.0f)), 0x0000);
  EXPECT_EQ(float_to_f16_bits(0x1.8p-25f), 0x0001);
  EXPECT_EQ(float_to_f16_bits(3 * 0x1p-25f), 0x0002);  // tie between 1 and 2 units: even (2)
  EXPECT_EQ(float_to_f16_bits(5 * 0x1p-25f), 0x0002);  // tie between 2 and 3 units: even (2)
  EXPECT_EQ(float_to_f16_bits(0x1p-26f), 0x0000);
  EXPECT_EQ(float_to_f16_bits(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(float_to_f16_bits(-std::numeric_limits<float>::denorm_min()), 0x8000);
  EXPECT_EQ(float_to_f16_bits(0x1p-126f), 0x0000);  // float min normal
  EXPECT_EQ(float_to_f16_bits(100 * 0x1p-24f), 100);
  EXPECT_EQ(float_to_f16_bits(-100 * 0x1p-24f), 0x8000 | 100);
}

TEST(HalfEdges, F16SubnormalNormalBoundary) {
  EXPECT_EQ(float_to_f16_bits(0x1p-14f), 0x0400);            // smallest normal
  EXPECT_EQ(float_to_f16_bits(1023 * 0x1p-24f), 0x03ff);     // largest subnormal
  EXPECT_EQ(f16_bits_to_float(0x03ff), 1023 * 0x1p-24f);
  EXPECT_EQ(float_to_f16_bits(1023.5f * 0x1p-24f), 0x0400);  // tie, odd below: up into normal
  EXPECT_EQ(float_to_f16_bits(std::nextafter(1023.5f * 0x1p-24f, 0.0f)), 0x03ff);
  EXPECT_EQ(float_to_f16_bits(1023.75f * 0x1p-24f), 0x0400);
  EXPECT_EQ(float_to_f16_bits(std::nextafter(0x1p-14f, 0.0f)), 0x0400);
  EXPECT_EQ(float_to_f16_bits(1022.5f * 0x1p-24f), 0x03fe);  // tie, even below: down
  // First normal binade: spacing 2^-24 too.
  EXPECT_EQ(float_to_f16_bits(0x1p-14f + 0x1p-25f), 0x0400);      // tie to even
  EXPECT_EQ(float_to_f16_bits(0x1p-14f + 3 * 0x1p-25f), 0x0402);  // tie to even
  EXPECT_EQ(float_to_f16_bits(-0x1p-14f), 0x8400);
}

TEST(HalfEdges, F16ZeroInfNaN) {
  EXPECT_EQ(float_to_f16_bits(0.0f), 0x0000);
  EXPECT_EQ(float_to_f16_bits(-0.0f), 0x8000);
  EXPECT_TRUE(std::signbit(f16_bits_to_float(0x8000)));
  EXPECT_EQ(f16_bits_to_float(0x8000), 0.0f);
  EXPECT_EQ(float_to_f16_bits(kInf), 0x7c00);
  EXPECT_EQ(float_to_f16_bits(-kInf), 0xfc00);
  EXPECT_EQ(f16_bits_to_float(0x7c00), kInf);
  EXPECT_EQ(f16_bits_to_float(0xfc00), -kInf);
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7f800fffu, 0x7f801fffu, 0x7fffffffu,
                       0x7fa00000u, 0xffc00000u, 0xff800001u}) {
    const uint16_t h = float_to_f16_bits(from_fbits(nan));
    EXPECT_TRUE(is_f16_nan(h)) << std::hex << nan << " -> " << h;  // low-bit payloads too
    EXPECT_EQ(h & 0x8000, (nan >> 16) & 0x8000) << std::hex << nan;
    EXPECT_TRUE(std::isnan(f16_bits_to_float(h)));
  }
  EXPECT_TRUE(std::isnan(f16_bits_to_float(0x7c01)));
  EXPECT_TRUE(std::isnan(f16_bits_to_float(0xfe00)));
}

TEST(HalfEdges, Bf16TiesRoundToEven) {
  EXPECT_EQ(float_to_bf16_bits(1.0f + 0x1p-8f), 0x3f80);      // tie, even below: down
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3 * 0x1p-8f), 0x3f82);  // tie, odd below: up
  EXPECT_EQ(float_to_bf16_bits(-(1.0f + 0x1p-8f)), 0xbf80);
  EXPECT_EQ(float_to_bf16_bits(-(1.0f + 3 * 0x1p-8f)), 0xbf82);
  EXPECT_EQ(float_to_bf16_bits(1.0f + 0x1p-8f + 0x1p-23f), 0x3f81);
  EXPECT_EQ(float_to_bf16_bits(1.0f + 0x1p-8f - 0x1p-23f), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3 * 0x1p-8f - 0x1p-23f), 0x3f81);
  EXPECT_EQ(float_to_bf16_bits(2.0f - 0x1p-9f), 0x4000);  // tie with a carry into the exponent
}

TEST(HalfEdges, Bf16LargestFiniteAndOverflow) {
  const float bf16_max = from_fbits(0x7f7f0000u);  // 3.3895314e38
  EXPECT_EQ(float_to_bf16_bits(bf16_max), 0x7f7f);
  EXPECT_EQ(float_to_bf16_bits(-bf16_max), 0xff7f);
  EXPECT_EQ(float_to_bf16_bits(from_fbits(0x7f7f7fffu)), 0x7f7f);  // just below the tie
  EXPECT_EQ(float_to_bf16_bits(from_fbits(0x7f7f8000u)), 0x7f80);  // tie with 2^128: Inf
  EXPECT_EQ(float_to_bf16_bits(kFloatMax), 0x7f80);
  EXPECT_EQ(float_to_bf16_bits(-kFloatMax), 0xff80);
  EXPECT_EQ(float_to_bf16_bits(from_fbits(0x7f7e8000u)), 0x7f7e);  // tie, even below: down
}

TEST(HalfEdges, Bf16SubnormalsZeroInfNaN) {
  EXPECT_EQ(float_to_bf16_bits(0x1p-133f), 0x0001);  // smallest bf16 subnormal
  EXPECT_EQ(float_to_bf16_bits(0x1p-134f), 0x0000);  // tie to even (0)
  EXPECT_EQ(float_to_bf16_bits(-0x1p-134f), 0x8000);
  EXPECT_EQ(float_to_bf16_bits(std::nextafter(0x1p-134f, 1.0f)), 0x0001);
  EXPECT_EQ(float_to_bf16_bits(3 * 0x1p-134f), 0x0002);
  EXPECT_EQ(float_to_bf16_bits(0x1p-126f), 0x0080);                // float min normal
  EXPECT_EQ(float_to_bf16_bits(from_fbits(0x007fffffu)), 0x0080);  // largest float subnormal
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(float_to_bf16_bits(0.0f), 0x0000);
  EXPECT_EQ(float_to_bf16_bits(-0.0f), 0x8000);
  EXPECT_TRUE(std::signbit(bf16_bits_to_float(0x8000)));
  EXPECT_EQ(float_to_bf16_bits(kInf), 0x7f80);
  EXPECT_EQ(float_to_bf16_bits(-kInf), 0xff80);
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7f80ffffu, 0x7fffffffu, 0xffc00000u,
                       0xff800001u, 0xffffffffu}) {
    const uint16_t h = float_to_bf16_bits(from_fbits(nan));
    EXPECT_TRUE(is_bf16_nan(h)) << std::hex << nan << " -> " << h;  // never Inf, never wraps
    EXPECT_EQ(h & 0x8000, (nan >> 16) & 0x8000) << std::hex << nan;
  }
}

TEST(HalfEdges, WrappersAndConstexpr) {
  static_assert(float_to_f16_bits(1.0f) == 0x3c00);
  static_assert(float_to_bf16_bits(1.0f) == 0x3f80);
  static_assert(f16_bits_to_float(0xc000) == -2.0f);
  static_assert(bf16_bits_to_float(0x4040) == 3.0f);
  static_assert(DTypeOf<f16>::value == DType::kF16);
  static_assert(DTypeOf<bf16>::value == DType::kBF16);
  static_assert(sizeof(f16) == 2 && sizeof(bf16) == 2);
  EXPECT_EQ(to_f16(0.5f).bits, 0x3800);
  EXPECT_EQ(to_bf16(0.5f).bits, 0x3f00);
  EXPECT_EQ(to_float(f16{0x3555}), 0x1.554p-2f);
  EXPECT_EQ(to_float(bf16{0x3eab}), 0x1.56p-2f);
  EXPECT_EQ(round_to_f16(1.0f / 3.0f), 0x1.554p-2f);
  EXPECT_EQ(round_to_bf16(1.0f / 3.0f), 0x1.56p-2f);
}

}  // namespace
}  // namespace zero

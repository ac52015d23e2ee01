// Tests for the CPU fill / copy / host-transfer / add / scale kernels, above all the dtype
// conversions of copy: every 16-bit result must be the single correctly rounded value.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backend/cpu/cpu_elementwise.h"
#include "core/error.h"
#include "core/half.h"
#include "support/gradcheck.h"

namespace zero::backend::cpu {
namespace {

Tensor host_f32(const std::vector<float>& values) {
  Tensor t = Tensor::zeros_host({static_cast<int64_t>(values.size())}, DType::kF32);
  std::memcpy(t.raw_data(), values.data(), t.nbytes());
  return t;
}

Tensor host_f64(const std::vector<double>& values) {
  Tensor t = Tensor::zeros_host({static_cast<int64_t>(values.size())}, DType::kF64);
  std::memcpy(t.raw_data(), values.data(), t.nbytes());
  return t;
}

uint16_t bits16(const Tensor& t, int64_t i) {
  return static_cast<const uint16_t*>(t.raw_data())[i];
}

// Correct round-to-nearest-even of a double to a binary format with `digits` significand bits,
// for values in that format's normal range: scale to an integer significand, round in double
// (exact: the scaled value has the same bits), scale back.
double round_to_precision(double v, int digits) {
  const int e = std::ilogb(v);
  const double q = std::ldexp(v, digits - 1 - e);
  return std::ldexp(std::nearbyint(q), e - (digits - 1));
}

const float kEdgeFloats[] = {
    0.0f, -0.0f, 1.0f, -1.0f,
    1.0f + 0x1p-8f,                       // bf16 tie between 1 and 1+2^-7: to even (1)
    1.0f + 3 * 0x1p-8f,                   // bf16 tie: to even (1+2^-6)
    1.0f + 0x1p-8f + 0x1p-23f,            // just above a bf16 tie: up
    1.0f + 0x1p-11f,                      // f16 tie: to even (1)
    1.0f + 3 * 0x1p-11f,                  // f16 tie: to even
    65504.0f, 65519.99f, 65520.0f,        // f16 max, just below the overflow tie, the tie (Inf)
    0x1p-14f, 0x1p-24f, 0x1p-25f,         // f16 min normal, min subnormal, tie to 0
    0x1.8p-25f, 3 * 0x1p-25f,             // f16 subnormals: above the tie, tie to even (2^-23)
    0x1p-126f, 1e-40f, 0x1p-149f,         // float min normal and subnormals
    std::numeric_limits<float>::max(),    // overflows both 16-bit formats to Inf
    3.3895314e38f,                        // bf16 max finite
    std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
    std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
    std::bit_cast<float>(0x7f800001u),    // signalling NaN: must stay a NaN, not become Inf
    0.1f, -3.14159f, 1234.5678f};

TEST(CpuCopy, F32ToBf16MatchesHalfHeaderOnEdgeValues) {
  std::vector<float> values(std::begin(kEdgeFloats), std::end(kEdgeFloats));
  Tensor src = host_f32(values);
  Tensor dst = Tensor::zeros_host(src.shape(), DType::kBF16);
  copy(dst, src);
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(bits16(dst, static_cast<int64_t>(i)), float_to_bf16_bits(values[i])) << values[i];
  }
  // A few results spelled out, so a wrong half.h could not make this test pass on its own.
  EXPECT_EQ(bits16(dst, 2), 0x3f80);   // 1
  EXPECT_EQ(bits16(dst, 4), 0x3f80);   // tie -> even
  EXPECT_EQ(bits16(dst, 5), 0x3f82);   // tie -> even (up)
  EXPECT_EQ(bits16(dst, 6), 0x3f81);   // above tie -> up
  EXPECT_EQ(bits16(dst, 20), 0x7f80);  // FLT_MAX -> Inf
  EXPECT_EQ(bits16(dst, 21), 0x7f7f);  // bf16 max finite
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(bits16(dst, 26))));  // sNaN stays NaN

  // And back: bf16 -> f32 is exact.
  Tensor back = Tensor::zeros_host(src.shape(), DType::kF32);
  copy(back, dst);
  for (size_t i = 0; i < values.size(); ++i) {
    const float expected = round_to_bf16(values[i]);
    const float got = back.data<float>()[i];
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(got));
    } else {
      EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(expected)) << values[i];
    }
  }
}

TEST(CpuCopy, F32ToF16MatchesHalfHeaderOnEdgeValues) {
  std::vector<float> values(std::begin(kEdgeFloats), std::end(kEdgeFloats));
  Tensor src = host_f32(values);
  Tensor dst = Tensor::zeros_host(src.shape(), DType::kF16);
  copy(dst, src);
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(bits16(dst, static_cast<int64_t>(i)), float_to_f16_bits(values[i])) << values[i];
  }
  EXPECT_EQ(bits16(dst, 7), 0x3c00);   // tie -> even
  EXPECT_EQ(bits16(dst, 8), 0x3c02);   // tie -> even (up)
  EXPECT_EQ(bits16(dst, 9), 0x7bff);   // 65504
  EXPECT_EQ(bits16(dst, 10), 0x7bff);  // below the overflow tie
  EXPECT_EQ(bits16(dst, 11), 0x7c00);  // 65520 -> Inf
  EXPECT_EQ(bits16(dst, 13), 0x0001);  // 2^-24
  EXPECT_EQ(bits16(dst, 14), 0x0000);  // 2^-25 tie -> 0
  EXPECT_EQ(bits16(dst, 15), 0x0001);  // 1.5 * 2^-25 -> 2^-24
  EXPECT_EQ(bits16(dst, 16), 0x0002);  // 3 * 2^-25 tie -> even
  EXPECT_EQ(bits16(dst, 1), 0x8000);   // -0
  EXPECT_EQ(bits16(dst, 20), 0x7c00);  // FLT_MAX -> Inf
  EXPECT_EQ(bits16(dst, 23), 0xfc00);  // -Inf
  EXPECT_TRUE(std::isnan(f16_bits_to_float(bits16(dst, 26))));  // sNaN stays NaN
}

// Every 16-bit pattern survives 16 -> f32 -> 16; NaNs stay NaN.
TEST(CpuCopy, SixteenBitRoundTripsThroughF32ForAllPatterns) {
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    Tensor h = Tensor::zeros_host({65536}, dtype);
    auto* bits = static_cast<uint16_t*>(h.raw_data());
    for (uint32_t i = 0; i < 65536; ++i) bits[i] = static_cast<uint16_t>(i);
    Tensor f = Tensor::zeros_host({65536}, DType::kF32);
    Tensor back = Tensor::zeros_host({65536}, dtype);
    copy(f, h);
    copy(back, f);
    int mismatches = 0;
    for (uint32_t i = 0; i < 65536; ++i) {
      const float v = f.data<float>()[i];
      const float expected = dtype == DType::kF16 ? f16_bits_to_float(static_cast<uint16_t>(i))
                                                  : bf16_bits_to_float(static_cast<uint16_t>(i));
      if (std::isnan(expected)) {
        mismatches += !std::isnan(v);
        continue;
      }
      mismatches += std::bit_cast<uint32_t>(v) != std::bit_cast<uint32_t>(expected);
      mismatches += static_cast<uint32_t>(bits16(back, i)) != i;
    }
    EXPECT_EQ(mismatches, 0) << dtype_name(dtype);
  }
}

TEST(CpuCopy, F64ToF32RoundsToNearestEven) {
  const std::vector<double> values = {1.0 + 0x1p-24,            // tie -> 1
                                      1.0 + 3 * 0x1p-24,        // tie -> even (up)
                                      1.0 + 0x1p-24 + 0x1p-50,  // above tie -> up
                                      0.1, -2.0 / 3.0, 1e300, -1e300, 1e-50, 0x1p-149,
                                      std::numeric_limits<double>::quiet_NaN()};
  Tensor src = host_f64(values);
  Tensor dst = Tensor::zeros_host(src.shape(), DType::kF32);
  copy(dst, src);
  const float* d = dst.data<float>();
  EXPECT_EQ(d[0], 1.0f);
  EXPECT_EQ(d[1], 1.0f + 0x1p-22f);
  EXPECT_EQ(d[2], 1.0f + 0x1p-23f);
  EXPECT_EQ(d[3], 0.1f);
  EXPECT_EQ(d[4], -2.0f / 3.0f);
  EXPECT_EQ(d[5], std::numeric_limits<float>::infinity());
  EXPECT_EQ(d[6], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(d[7], 0.0f);
  EXPECT_EQ(d[8], 0x1p-149f);
  EXPECT_TRUE(std::isnan(d[9]));
  // f32 -> f64 -> f32 is exact.
  Tensor wide = Tensor::zeros_host(src.shape(), DType::kF64);
  Tensor again = Tensor::zeros_host(src.shape(), DType::kF32);
  copy(wide, dst);
  copy(again, wide);
  EXPECT_EQ(std::memcmp(again.raw_data(), dst.raw_data(), dst.nbytes()), 0);
}

// f64 -> 16 bit must round once. Values just above a 16-bit tie by less than a float ulp are the
// trap: f64 -> f32 lands them on the tie and the second rounding goes to even, the wrong way.
TEST(CpuCopy, F64ToSixteenBitRoundsOnceNotTwice) {
  Tensor src = host_f64({1.0 + 0x1p-8 + 0x1p-30, 1.0 + 0x1p-11 + 0x1p-40,
                         -(1.0 + 0x1p-8 + 0x1p-30), 1.0 + 0x1p-8 - 0x1p-30});
  Tensor b = Tensor::zeros_host(src.shape(), DType::kBF16);
  Tensor h = Tensor::zeros_host(src.shape(), DType::kF16);
  copy(b, src);
  copy(h, src);
  EXPECT_EQ(bits16(b, 0), 0x3f81);  // double rounding would give 0x3f80
  EXPECT_EQ(bits16(h, 1), 0x3c01);  // double rounding would give 0x3c00
  EXPECT_EQ(bits16(b, 2), 0xbf81);
  EXPECT_EQ(bits16(b, 3), 0x3f80);  // just below the tie: down

  // Random values and near-ties against an independent double-precision reference.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::uniform_int_distribution<int> expo(-12, 12);
  std::uniform_int_distribution<int> nudge_bits(20, 50);
  std::vector<double> values;
  for (int i = 0; i < 2000; ++i) {
    double v = std::ldexp(mant(rng), expo(rng));
    if (i % 2) {  // a 16-bit tie nudged up or down by a tiny relative amount
      const int digits = (i % 4 == 1) ? 8 : 11;
      const double ulp = std::ldexp(1.0, std::ilogb(v) - (digits - 1));
      v = std::floor(v / ulp) * ulp + ulp / 2;
      v *= 1.0 + ((i % 8) < 4 ? 1 : -1) * std::ldexp(1.0, -nudge_bits(rng));
    }
    values.push_back(i % 3 ? v : -v);
  }
  Tensor many = host_f64(values);
  Tensor mb = Tensor::zeros_host(many.shape(), DType::kBF16);
  Tensor mh = Tensor::zeros_host(many.shape(), DType::kF16);
  copy(mb, many);
  copy(mh, many);
  int bad = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const int64_t k = static_cast<int64_t>(i);
    bad += bf16_bits_to_float(bits16(mb, k)) != round_to_precision(values[i], 8);
    bad += f16_bits_to_float(bits16(mh, k)) != round_to_precision(values[i], 11);
  }
  EXPECT_EQ(bad, 0);
}

TEST(CpuCopy, BetweenSixteenBitFormatsRoundsOnce) {
  Tensor h = Tensor::zeros_host({3}, DType::kF16);
  auto* hb = static_cast<uint16_t*>(h.raw_data());
  hb[0] = 0x3c01;  // 1 + 2^-10 -> bf16 1
  hb[1] = 0x7bff;  // 65504
  hb[2] = 0x0001;  // 2^-24, a bf16 normal
  Tensor b = Tensor::zeros_host({3}, DType::kBF16);
  copy(b, h);
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(bits16(b, i), float_to_bf16_bits(f16_bits_to_float(hb[i])));
  }
  EXPECT_EQ(bits16(b, 0), 0x3f80);
}

TEST(CpuCopy, SameDtypeCopiesBytesForIntegersAndLargeTensors) {
  Tensor src = Tensor::zeros_host({5}, DType::kI64);
  for (int64_t i = 0; i < 5; ++i) src.data<int64_t>()[i] = (int64_t{1} << 60) + i;
  Tensor dst = Tensor::zeros_host({5}, DType::kI64);
  copy(dst, src);
  EXPECT_EQ(std::memcmp(dst.raw_data(), src.raw_data(), src.nbytes()), 0);

  // Several 1 MiB chunks, copied by more than one thread.
  Tensor big = testing::random_tensor({3 << 18}, DType::kF32, 3);
  Tensor big_dst = Tensor::zeros_host(big.shape(), DType::kF32);
  copy(big_dst, big);
  EXPECT_EQ(std::memcmp(big_dst.raw_data(), big.raw_data(), big.nbytes()), 0);
}

TEST(CpuCopy, HostTransfersCopyAllBytes) {
  std::vector<int32_t> host = {1, -2, 3, 1 << 30};
  Tensor t = Tensor::zeros_host({2, 2}, DType::kI32);
  copy_from_host(t, host.data());
  EXPECT_EQ(t.data<int32_t>()[3], 1 << 30);
  std::vector<int32_t> out(4, 0);
  copy_to_host(out.data(), t);
  EXPECT_EQ(out, host);
}

TEST(CpuCopy, RejectsBadArguments) {
  Tensor a = Tensor::zeros_host({4}, DType::kF32);
  Tensor b = Tensor::zeros_host({5}, DType::kF32);
  EXPECT_THROW(copy(a, b), ShapeError);
  Tensor i = Tensor::zeros_host({4}, DType::kI32);
  EXPECT_THROW(copy(a, i), UnsupportedError);
  Tensor wide = Tensor::zeros_host({4, 6}, DType::kF32);
  Tensor strided = wide.narrow(1, 0, 3);
  Tensor dense = Tensor::zeros_host({4, 3}, DType::kF32);
  EXPECT_THROW(copy(dense, strided), ShapeError);
  EXPECT_THROW(copy(strided, dense), ShapeError);
}

TEST(CpuFill, FloatingAndIntegerDtypes) {
  Tensor f = Tensor::zeros_host({3}, DType::kF32);
  fill(f, 0.1);
  EXPECT_EQ(f.data<float>()[2], 0.1f);
  Tensor d = Tensor::zeros_host({40000}, DType::kF64);  // large enough for the parallel path
  fill(d, -2.5);
  EXPECT_EQ(d.data<double>()[0], -2.5);
  EXPECT_EQ(d.data<double>()[39999], -2.5);
  Tensor b = Tensor::zeros_host({2}, DType::kBF16);
  fill(b, 1.0 + 0x1p-8 + 0x1p-30);  // rounds once, like copy
  EXPECT_EQ(bits16(b, 1), 0x3f81);
  Tensor h = Tensor::zeros_host({2}, DType::kF16);
  fill(h, 65520.0);
  EXPECT_EQ(bits16(h, 0), 0x7c00);

  Tensor i64 = Tensor::zeros_host({2}, DType::kI64);
  fill(i64, 0x1p53);
  EXPECT_EQ(i64.data<int64_t>()[1], int64_t{1} << 53);
  Tensor u8 = Tensor::zeros_host({2}, DType::kU8);
  fill(u8, 255.0);
  EXPECT_EQ(u8.data<uint8_t>()[0], 255);
  Tensor i32 = Tensor::zeros_host({2}, DType::kI32);
  fill(i32, -7.0);
  EXPECT_EQ(i32.data<int32_t>()[1], -7);
}

TEST(CpuFill, RejectsValuesTheIntegerDtypeCannotHold) {
  Tensor i32 = Tensor::zeros_host({2}, DType::kI32);
  EXPECT_THROW(fill(i32, 1.5), ShapeError);
  EXPECT_THROW(fill(i32, 0x1p31), ShapeError);
  EXPECT_THROW(fill(i32, std::nan("")), ShapeError);
  Tensor u8 = Tensor::zeros_host({2}, DType::kU8);
  EXPECT_THROW(fill(u8, 256.0), ShapeError);
  EXPECT_THROW(fill(u8, -1.0), ShapeError);
  Tensor i64 = Tensor::zeros_host({2}, DType::kI64);
  EXPECT_THROW(fill(i64, 0x1p63), ShapeError);
  fill(i64, -0x1p63);  // the most negative int64 is representable
  EXPECT_EQ(i64.data<int64_t>()[0], std::numeric_limits<int64_t>::min());
}

TEST(CpuAdd, F64IsExactAndF32IsOneRoundingAway) {
  // Sizes either side of the parallel threshold.
  for (int64_t n : {int64_t{17}, int64_t{1} << 16}) {
    Tensor y64 = testing::random_tensor({n}, DType::kF64, 1);
    Tensor x64 = testing::random_tensor({n}, DType::kF64, 2);
    // Round the inputs to f32 so both precisions see the same numbers.
    Tensor y32 = testing::converted(y64, DType::kF32);
    Tensor x32 = testing::converted(x64, DType::kF32);
    y64 = testing::converted(y32, DType::kF64);
    x64 = testing::converted(x32, DType::kF64);
    Tensor expected = testing::converted(y64, DType::kF64);
    for (int64_t i = 0; i < n; ++i) {
      expected.data<double>()[i] = y64.data<double>()[i] + 0.75 * x64.data<double>()[i];
    }
    add(y64, x64, 0.75);
    add(y32, x32, 0.75);
    EXPECT_EQ(testing::relative_error(y64, expected), 0.0);
    // f32: 0.75 * x is exact (two significant bits) and the sum rounds once: relative error
    // per element <= 2^-24 ~ 6e-8, so norm-wise well under 1e-7.
    EXPECT_LT(testing::relative_error(y32, expected), 1e-7);
    EXPECT_GT(testing::relative_error(y32, expected), 0.0);  // really computed in f32
  }
}

TEST(CpuScale, ScalesInPlace) {
  Tensor y = testing::random_tensor({50000}, DType::kF32, 4);
  Tensor ref = testing::converted(y, DType::kF64);
  scale(y, -0.5);
  for (int64_t i = 0; i < y.numel(); ++i) ref.data<double>()[i] *= -0.5;
  EXPECT_EQ(testing::relative_error(y, ref), 0.0);  // halving is exact
}

TEST(CpuAdd, RejectsMismatchedOrUnsupportedOperands) {
  Tensor y = Tensor::zeros_host({2, 3}, DType::kF32);
  Tensor x = Tensor::zeros_host({3, 2}, DType::kF32);
  EXPECT_THROW(add(y, x, 1.0), ShapeError);
  Tensor x64 = Tensor::zeros_host({2, 3}, DType::kF64);
  EXPECT_THROW(add(y, x64, 1.0), ShapeError);
  Tensor h = Tensor::zeros_host({2, 3}, DType::kF16);
  Tensor h2 = Tensor::zeros_host({2, 3}, DType::kF16);
  EXPECT_THROW(add(h, h2, 1.0), UnsupportedError);
  EXPECT_THROW(scale(h, 2.0), UnsupportedError);
}

}  // namespace
}  // namespace zero::backend::cpu

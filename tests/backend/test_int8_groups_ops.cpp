// int8 group quantization on the CPU backend (Backend::quantize_int8_groups /
// dequantize_int8_groups, the layout of backend/int8_groups.h): codes worked by hand with scale
// 1 (round half to even), the packed layout, the special groups (zero, underflowed, Inf, NaN),
// 16-bit inputs and outputs, accumulation, the error bound on random data, and the argument
// errors. The simulated device gives the same bytes (it runs these loops on its host memory).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/backend_test_values.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/int8_groups.h"
#include "backend/sim/simulated_device_backend.h"
#include "core/error.h"
#include "core/half.h"

namespace zero::backend {
namespace int8_groups_ops_test {

Tensor host_f32(const std::vector<float>& v) {
  Tensor t = Tensor::zeros_host({static_cast<int64_t>(v.size())}, DType::kF32);
  std::memcpy(t.raw_data(), v.data(), v.size() * sizeof(float));
  return t;
}

std::vector<float> as_f32(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  std::memcpy(out.data(), t.raw_data(), out.size() * sizeof(float));
  return out;
}

Tensor packed_for(int64_t count, int64_t group) {
  return Tensor::zeros_host({Int8Groups{count, group}.packed_bytes()}, DType::kU8);
}

// The 16-bit patterns of a bf16 or f16 host tensor.
uint16_t* bits_of(Tensor& t) { return static_cast<uint16_t*>(t.raw_data()); }

int8_t code_at(const Tensor& packed, int64_t i) {
  return static_cast<int8_t>(packed.data<uint8_t>()[i]);
}

float scale_at(const Tensor& packed, const Int8Groups& layout, int64_t g) {
  float scale = 0.0f;
  std::memcpy(&scale, packed.data<uint8_t>() + layout.scale_offset() + 4 * g, sizeof(float));
  return scale;
}

TEST(Int8Groups, LayoutRoundsTheCodesUpToWholeScales) {
  EXPECT_EQ((Int8Groups{5, 2}.groups()), 3);
  EXPECT_EQ((Int8Groups{5, 2}.scale_offset()), 8);
  EXPECT_EQ((Int8Groups{5, 2}.packed_bytes()), 20);
  EXPECT_EQ((Int8Groups{8, 8}.packed_bytes()), 12);
  EXPECT_EQ((Int8Groups{0, 8}.packed_bytes()), 0);
  EXPECT_EQ((Int8Groups{4096, 2048}.packed_bytes()), 4096 + 8);
}

TEST(Int8Groups, CodesRoundHalfToEvenAtScaleOne) {
  // max|x| = 127 makes the scale exactly 1, so each code is x rounded: halves go to even.
  CpuBackend cpu;
  const std::vector<float> x = {127.0f, 2.5f, 3.5f, -2.5f, -0.4f, 0.5f, 1.5f, -127.0f};
  Tensor packed = packed_for(8, 8);
  cpu.quantize_int8_groups(packed, host_f32(x), 8);
  const std::vector<int8_t> want = {127, 2, 4, -2, 0, 0, 2, -127};
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(code_at(packed, i), want[static_cast<size_t>(i)]) << i;
  EXPECT_EQ(scale_at(packed, Int8Groups{8, 8}, 0), 1.0f);
  Tensor decoded = Tensor::zeros_host({8}, DType::kF32);
  cpu.dequantize_int8_groups(decoded, packed, 8, false);
  const std::vector<float> back = as_f32(decoded);
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(back[static_cast<size_t>(i)], want[static_cast<size_t>(i)]);
}

TEST(Int8Groups, EachGroupHasItsOwnScaleAndTheLastMayBeShort) {
  CpuBackend cpu;
  // Groups of 2: [254, -127] -> scale 2; [63.5, 1.25] -> scale 0.5; [-3] (short) -> 3/127.
  const std::vector<float> x = {254.0f, -127.0f, 63.5f, 1.25f, -3.0f};
  const Int8Groups layout{5, 2};
  Tensor packed = packed_for(5, 2);
  std::memset(packed.raw_data(), 0xab, static_cast<size_t>(packed.numel()));
  cpu.quantize_int8_groups(packed, host_f32(x), 2);
  EXPECT_EQ(scale_at(packed, layout, 0), 2.0f);
  EXPECT_EQ(scale_at(packed, layout, 1), 0.5f);
  EXPECT_EQ(scale_at(packed, layout, 2), 3.0f / 127.0f);
  EXPECT_EQ(code_at(packed, 0), 127);
  EXPECT_EQ(code_at(packed, 1), -64);  // -63.5 to even
  EXPECT_EQ(code_at(packed, 2), 127);
  EXPECT_EQ(code_at(packed, 3), 2);  // 2.5 to even
  EXPECT_EQ(code_at(packed, 4), -127);
  for (int64_t b = 5; b < layout.scale_offset(); ++b) {
    EXPECT_EQ(packed.data<uint8_t>()[b], 0) << "alignment byte " << b << " travels: zero it";
  }
}

TEST(Int8Groups, SpecialGroupsDecodeToZerosOrNaN) {
  CpuBackend cpu;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // Groups of 3: zeros; magnitudes whose scale underflows the normal range; an Inf; a NaN.
  const std::vector<float> x = {0.0f, -0.0f, 0.0f, 1e-37f, -2e-37f, 0.0f,
                                1.0f, inf,   2.0f, nan,    3.0f,    -4.0f};
  const Int8Groups layout{12, 3};
  Tensor packed = packed_for(12, 3);
  cpu.quantize_int8_groups(packed, host_f32(x), 3);
  EXPECT_EQ(scale_at(packed, layout, 0), 0.0f);
  EXPECT_EQ(scale_at(packed, layout, 1), 0.0f);
  EXPECT_TRUE(std::isnan(scale_at(packed, layout, 2)));
  EXPECT_TRUE(std::isnan(scale_at(packed, layout, 3)));
  Tensor decoded = host_f32(std::vector<float>(12, 9.0f));
  cpu.dequantize_int8_groups(decoded, packed, 3, false);
  const std::vector<float> back = as_f32(decoded);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(back[static_cast<size_t>(i)], 0.0f) << i;
  // An overflow is never hidden: the finite neighbours of an Inf or NaN decode to NaN too.
  for (int64_t i = 6; i < 12; ++i) EXPECT_TRUE(std::isnan(back[static_cast<size_t>(i)])) << i;
}

TEST(Int8Groups, DecodedValuesAreWithinHalfAStepOfTheInput) {
  CpuBackend cpu;
  const int64_t n = 10000, group = 256;
  std::vector<float> x = backend_test::random_values(n, 7, -3.0f, 3.0f);
  for (int64_t i = 0; i < n; i += 977) x[static_cast<size_t>(i)] *= 1000.0f;  // outliers
  Tensor packed = packed_for(n, group);
  cpu.quantize_int8_groups(packed, host_f32(x), group);
  Tensor decoded = Tensor::zeros_host({n}, DType::kF32);
  cpu.dequantize_int8_groups(decoded, packed, group, false);
  const std::vector<float> back = as_f32(decoded);
  const Int8Groups layout{n, group};
  for (int64_t i = 0; i < n; ++i) {
    const float scale = scale_at(packed, layout, i / group);
    // Half a step, plus the f32 rounding of x / scale and of code * scale (a few ulps of x).
    const float bound = 0.5f * scale + 4.0f * std::numeric_limits<float>::epsilon() *
                                           std::fabs(x[static_cast<size_t>(i)]);
    ASSERT_LE(std::fabs(back[static_cast<size_t>(i)] - x[static_cast<size_t>(i)]), bound) << i;
  }
}

TEST(Int8Groups, SixteenBitValuesAndAccumulation) {
  CpuBackend cpu;
  // bf16 in: 127 and 2.5 are exact in bf16, so the codes are the same as from f32.
  Tensor values = cpu.empty({2}, DType::kBF16, MemoryCategory::kOther);
  bits_of(values)[0] = float_to_bf16_bits(127.0f);
  bits_of(values)[1] = float_to_bf16_bits(2.5f);
  Tensor packed = packed_for(2, 2);
  cpu.quantize_int8_groups(packed, values, 2);
  EXPECT_EQ(code_at(packed, 0), 127);
  EXPECT_EQ(code_at(packed, 1), 2);
  // Accumulating into bf16: 256 + 127 = 383 rounds to 384 in bf16 (8 significant bits), and
  // 1 + 2 = 3 stays.
  Tensor out = cpu.empty({2}, DType::kBF16, MemoryCategory::kOther);
  bits_of(out)[0] = float_to_bf16_bits(256.0f);
  bits_of(out)[1] = float_to_bf16_bits(1.0f);
  cpu.dequantize_int8_groups(out, packed, 2, true);
  EXPECT_EQ(bf16_bits_to_float(bits_of(out)[0]), 384.0f);
  EXPECT_EQ(bf16_bits_to_float(bits_of(out)[1]), 3.0f);
  // And into f16 without accumulation.
  Tensor half = cpu.empty({2}, DType::kF16, MemoryCategory::kOther);
  cpu.dequantize_int8_groups(half, packed, 2, false);
  EXPECT_EQ(f16_bits_to_float(bits_of(half)[0]), 127.0f);
  EXPECT_EQ(f16_bits_to_float(bits_of(half)[1]), 2.0f);
}

TEST(Int8Groups, TheSimulatedDeviceGivesTheSameBytes) {
  CpuBackend cpu;
  SimulatedDeviceBackend device;
  const int64_t n = 3001, group = 100;
  const std::vector<float> x = backend_test::random_values(n, 11, -2.0f, 2.0f);
  Tensor want = packed_for(n, group);
  cpu.quantize_int8_groups(want, host_f32(x), group);
  Tensor on_device = device.empty({n}, DType::kF32, MemoryCategory::kOther);
  device.copy_from_host(on_device, x.data());
  Tensor packed = device.empty({want.numel()}, DType::kU8, MemoryCategory::kOther);
  device.quantize_int8_groups(packed, on_device, group);
  std::vector<uint8_t> got(static_cast<size_t>(want.numel()));
  device.copy_to_host(got.data(), packed);
  EXPECT_EQ(std::memcmp(got.data(), want.raw_data(), got.size()), 0);
}

TEST(Int8Groups, ArgumentsAreCheckedByName) {
  CpuBackend cpu;
  const Tensor values = host_f32({1.0f, 2.0f, 3.0f});
  Tensor wrong = Tensor::zeros_host({7}, DType::kU8);
  try {
    cpu.quantize_int8_groups(wrong, values, 2);
    FAIL() << "a packed buffer of the wrong size was accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("packed must be contiguous u8 [12]"), std::string::npos)
        << e.what();
  }
  Tensor packed = packed_for(3, 2);
  EXPECT_THROW(cpu.quantize_int8_groups(packed, values, 0), ShapeError);
  const Tensor wide = Tensor::zeros_host({3}, DType::kF64);
  EXPECT_THROW(cpu.quantize_int8_groups(packed, wide, 2), UnsupportedError);
  Tensor out = Tensor::zeros_host({3}, DType::kI32);
  EXPECT_THROW(cpu.dequantize_int8_groups(out, packed, 2, false), UnsupportedError);
}

}  // namespace int8_groups_ops_test
}  // namespace zero::backend

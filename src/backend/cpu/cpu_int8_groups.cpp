#include "backend/cpu/cpu_int8_groups.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/cpu_checks.h"
#include "backend/int8_groups.h"
#include "core/half.h"

namespace zero::backend::cpu {
namespace {

float load_as_f32(const void* data, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kBF16: return bf16_bits_to_float(static_cast<const uint16_t*>(data)[i]);
    case DType::kF16: return f16_bits_to_float(static_cast<const uint16_t*>(data)[i]);
    default: return static_cast<const float*>(data)[i];
  }
}

void store_from_f32(void* data, DType dtype, int64_t i, float value) {
  switch (dtype) {
    case DType::kBF16: static_cast<uint16_t*>(data)[i] = float_to_bf16_bits(value); return;
    case DType::kF16: static_cast<uint16_t*>(data)[i] = float_to_f16_bits(value); return;
    default: static_cast<float*>(data)[i] = value; return;
  }
}

// The group's scale: max|x| / 127, 0 below the normal range, NaN when any element is not finite.
float group_scale(const void* data, DType dtype, int64_t begin, int64_t end) {
  float largest = 0.0f;
  for (int64_t i = begin; i < end; ++i) {
    const float x = load_as_f32(data, dtype, i);
    if (!std::isfinite(x)) return std::numeric_limits<float>::quiet_NaN();
    largest = std::max(largest, std::fabs(x));
  }
  const float scale = largest / static_cast<float>(kInt8GroupMaxCode);
  return scale < FLT_MIN ? 0.0f : scale;
}

int8_t code_of(float x, float scale) {
  // A NaN scale (non-finite group) and a zero scale (underflowed group) both send code 0.
  if (!(scale > 0.0f)) return 0;
  const float q = std::nearbyint(x / scale);  // the default rounding mode: half to even
  const auto limit = static_cast<float>(kInt8GroupMaxCode);
  return static_cast<int8_t>(std::clamp(q, -limit, limit));
}

}  // namespace

void quantize_int8_groups(Tensor& packed, const Tensor& values, int64_t group) {
  const char* op = "quantize_int8_groups";
  const Int8Groups layout = check_int8_groups_args(op, values, packed, group);
  expect_host_contiguous(values, op, "values");
  expect_host_contiguous(packed, op, "packed");
  const void* in = values.raw_data();
  const DType dtype = values.dtype();
  auto* bytes = static_cast<uint8_t*>(packed.raw_data());
  auto* codes = reinterpret_cast<int8_t*>(bytes);
  const int64_t groups = layout.groups();
  // Zero the alignment bytes between the codes and the scales: the buffer travels whole.
  std::fill(bytes + layout.count, bytes + layout.scale_offset(), uint8_t{0});
#pragma omp parallel for schedule(static)
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t begin = g * group;
    const int64_t end = std::min(layout.count, begin + group);
    const float scale = group_scale(in, dtype, begin, end);
    for (int64_t i = begin; i < end; ++i) codes[i] = code_of(load_as_f32(in, dtype, i), scale);
    std::memcpy(bytes + layout.scale_offset() + 4 * g, &scale, sizeof(float));
  }
}

void dequantize_int8_groups(Tensor& values, const Tensor& packed, int64_t group,
                            bool accumulate) {
  const char* op = "dequantize_int8_groups";
  const Int8Groups layout = check_int8_groups_args(op, values, packed, group);
  expect_host_contiguous(values, op, "values");
  expect_host_contiguous(packed, op, "packed");
  void* out = values.raw_data();
  const DType dtype = values.dtype();
  const auto* bytes = static_cast<const uint8_t*>(packed.raw_data());
  const auto* codes = reinterpret_cast<const int8_t*>(bytes);
  const int64_t groups = layout.groups();
#pragma omp parallel for schedule(static)
  for (int64_t g = 0; g < groups; ++g) {
    float scale = 0.0f;
    std::memcpy(&scale, bytes + layout.scale_offset() + 4 * g, sizeof(float));
    const int64_t end = std::min(layout.count, (g + 1) * group);
    for (int64_t i = g * group; i < end; ++i) {
      const float decoded = static_cast<float>(codes[i]) * scale;
      store_from_f32(out, dtype, i, accumulate ? load_as_f32(out, dtype, i) + decoded : decoded);
    }
  }
}

}  // namespace zero::backend::cpu

#include "core/host_convert.h"

#include <cstring>
#include <string>

#include "core/error.h"
#include "core/half.h"

namespace zero {
namespace {

// Widening to double is exact for every floating dtype, and narrowing double -> float rounds
// to nearest even once; double -> f16/bf16 goes through float, which can double-round, so those
// narrowings read floats directly when the source is f32 (the common case) and otherwise
// accept the (documented) double rounding of f64 sources.
double load(const void* src, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kF32: return static_cast<const float*>(src)[i];
    case DType::kF64: return static_cast<const double*>(src)[i];
    case DType::kF16: return f16_bits_to_float(static_cast<const uint16_t*>(src)[i]);
    case DType::kBF16: return bf16_bits_to_float(static_cast<const uint16_t*>(src)[i]);
    default: break;
  }
  throw UnsupportedError(std::string("conversion from ") + dtype_name(dtype) + " is not supported");
}

float load_float(const void* src, DType dtype, int64_t i) {
  return dtype == DType::kF32 ? static_cast<const float*>(src)[i]
                              : static_cast<float>(load(src, dtype, i));
}

}  // namespace

void convert_elements(void* dst, DType to, const void* src, DType from, int64_t count) {
  if (to == from) {
    std::memcpy(dst, src, static_cast<size_t>(count) * dtype_size(to));
    return;
  }
  if (!dtype_is_floating(to) || !dtype_is_floating(from)) {
    throw UnsupportedError(std::string("cannot convert ") + dtype_name(from) + " to " +
                           dtype_name(to) + ": only floating dtypes convert");
  }
  switch (to) {
    case DType::kF64:
      for (int64_t i = 0; i < count; ++i) static_cast<double*>(dst)[i] = load(src, from, i);
      return;
    case DType::kF32:
      for (int64_t i = 0; i < count; ++i) {
        static_cast<float*>(dst)[i] = static_cast<float>(load(src, from, i));
      }
      return;
    case DType::kF16:
      for (int64_t i = 0; i < count; ++i) {
        static_cast<uint16_t*>(dst)[i] = float_to_f16_bits(load_float(src, from, i));
      }
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < count; ++i) {
        static_cast<uint16_t*>(dst)[i] = float_to_bf16_bits(load_float(src, from, i));
      }
      return;
    default: break;
  }
  throw UnsupportedError(std::string("conversion to ") + dtype_name(to) + " is not supported");
}

Tensor converted_host(const Tensor& src, DType dtype, MemoryCategory category) {
  if (!src.is_contiguous() || !src.device().is_cpu()) {
    throw ShapeError("converted_host needs a contiguous host tensor, got " + src.describe());
  }
  Tensor out = Tensor::empty(cpu_allocator(), src.shape(), dtype, category);
  convert_elements(out.raw_data(), dtype, src.raw_data(), src.dtype(), src.numel());
  return out;
}

}  // namespace zero

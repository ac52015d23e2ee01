#include "core/finite_check.h"

#include <cmath>
#include <cstring>

namespace zero {
namespace {

// 16-bit floats are non-finite exactly when every exponent bit is set.
std::optional<int64_t> scan_16bit(const void* data, int64_t count, uint16_t exponent_mask) {
  const auto* bits = static_cast<const uint16_t*>(data);
  for (int64_t i = 0; i < count; ++i) {
    if ((bits[i] & exponent_mask) == exponent_mask) return i;
  }
  return std::nullopt;
}

template <class T>
std::optional<int64_t> scan(const void* data, int64_t count) {
  const auto* values = static_cast<const T*>(data);
  for (int64_t i = 0; i < count; ++i) {
    if (!std::isfinite(values[i])) return i;
  }
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> first_non_finite(const void* data, DType dtype, int64_t count) {
  switch (dtype) {
    case DType::kF32:
      return scan<float>(data, count);
    case DType::kF64:
      return scan<double>(data, count);
    case DType::kF16:
      return scan_16bit(data, count, 0x7C00);
    case DType::kBF16:
      return scan_16bit(data, count, 0x7F80);
    default:
      return std::nullopt;
  }
}

}  // namespace zero

// CPU fill / copy / host transfers / add / scale. The only subtle part is narrowing from f64 to
// the 16-bit types: it goes through float with "round to odd" so the result is rounded once.
#include "backend/cpu/cpu_elementwise.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "backend/cpu/cpu_checks.h"
#include "backend/cpu/cpu_dispatch.h"
#include "core/error.h"
#include "core/half.h"

namespace zero::backend::cpu {
namespace {

// Below this many elements a loop runs on the calling thread: waking the OpenMP team costs more
// than the work.
constexpr int64_t kParallelMinElements = int64_t{1} << 15;

// Rounds toward zero to float, then sets the lowest mantissa bit if anything was discarded.
// Float keeps 13+ more significand bits than f16/bf16, so rounding this float to nearest-even
// 16 bits gives exactly the correctly rounded result of `value`. Plain f64 -> f32 -> 16 bit rounds
// twice and can land a value just above a 16-bit tie on the tie, then on the wrong side of it.
float narrow_to_odd_float(double value) {
  float f = static_cast<float>(value);
  if (static_cast<double>(f) == value || std::isnan(value)) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(value)) f = std::nextafter(f, 0.0f);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(f) | 1u);
}

// Widening loads: every source is read as float (exact for f32/f16/bf16) or double.
inline float load(float v) { return v; }
inline double load(double v) { return v; }
inline float load(bf16 v) { return bf16_bits_to_float(v.bits); }
inline float load(f16 v) { return f16_bits_to_float(v.bits); }

// Narrowing stores: one round-to-nearest-even from the loaded value to the destination type.
inline void store(float v, float* d) { *d = v; }
inline void store(double v, float* d) { *d = static_cast<float>(v); }
inline void store(float v, double* d) { *d = static_cast<double>(v); }
inline void store(double v, double* d) { *d = v; }
inline void store(float v, bf16* d) { d->bits = float_to_bf16_bits(v); }
inline void store(double v, bf16* d) { d->bits = float_to_bf16_bits(narrow_to_odd_float(v)); }
inline void store(float v, f16* d) { d->bits = float_to_f16_bits(v); }
inline void store(double v, f16* d) { d->bits = float_to_f16_bits(narrow_to_odd_float(v)); }

// Calls fn.template operator()<T>() with the storage type of a floating dtype.
template <typename Fn>
void dispatch_storage_floating(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kF32: fn.template operator()<float>(); return;
    case DType::kF64: fn.template operator()<double>(); return;
    case DType::kF16: fn.template operator()<f16>(); return;
    case DType::kBF16: fn.template operator()<bf16>(); return;
    default: ZERO_CHECK(false, "not a floating dtype: " << dtype_name(dtype));
  }
}

template <typename Dst, typename Src>
void convert(Dst* dst, const Src* src, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) store(load(src[i]), &dst[i]);
}

template <typename T>
void fill_integer(Tensor& dst, double value) {
  // T's range as doubles: [lo, hi). Powers of two, so exact even where max() itself is not.
  constexpr int digits = std::numeric_limits<T>::digits;
  const double hi = std::ldexp(1.0, digits);
  const double lo = std::numeric_limits<T>::is_signed ? -hi : 0.0;
  if (!(std::trunc(value) == value && value >= lo && value < hi)) {
    throw ShapeError("fill: value " + std::to_string(value) + " is not representable in " +
                     dst.describe() + "; use an integer in range or a floating dtype");
  }
  const T v = static_cast<T>(value);
  T* d = static_cast<T*>(dst.raw_data());
  const int64_t n = dst.numel();
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) d[i] = v;
}

template <typename T>
void fill_floating(Tensor& dst, double value) {
  T v{};
  store(value, &v);
  T* d = static_cast<T*>(dst.raw_data());
  const int64_t n = dst.numel();
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) d[i] = v;
}

// memcpy split into large chunks across threads: one core rarely saturates memory bandwidth.
void parallel_memcpy(void* dst, const void* src, size_t bytes) {
  constexpr size_t kChunk = size_t{1} << 20;
  const int64_t chunks = static_cast<int64_t>((bytes + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const size_t begin = static_cast<size_t>(c) * kChunk;
    const size_t len = std::min(kChunk, bytes - begin);
    std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin, len);
  }
}

}  // namespace

void fill(Tensor& dst, double value) {
  expect_host_contiguous(dst, "fill", "dst");
  switch (dst.dtype()) {
    case DType::kF32: fill_floating<float>(dst, value); return;
    case DType::kF64: fill_floating<double>(dst, value); return;
    case DType::kF16: fill_floating<f16>(dst, value); return;
    case DType::kBF16: fill_floating<bf16>(dst, value); return;
    case DType::kI32: fill_integer<int32_t>(dst, value); return;
    case DType::kI64: fill_integer<int64_t>(dst, value); return;
    case DType::kU8: fill_integer<uint8_t>(dst, value); return;
    case DType::kU16: fill_integer<uint16_t>(dst, value); return;
    case DType::kU32: fill_integer<uint32_t>(dst, value); return;
  }
  ZERO_CHECK(false, "fill: unhandled dtype " << dtype_name(dst.dtype()));
}

void copy(Tensor& dst, const Tensor& src) {
  expect_host_contiguous(dst, "copy", "dst");
  expect_host_contiguous(src, "copy", "src");
  if (dst.numel() != src.numel()) {
    throw ShapeError("copy: dst " + dst.describe() + " and src " + src.describe() +
                     " have different element counts");
  }
  if (dst.dtype() == src.dtype()) {
    if (dst.raw_data() != src.raw_data()) {
      parallel_memcpy(dst.raw_data(), src.raw_data(), dst.nbytes());
    }
    return;
  }
  if (!dtype_is_floating(dst.dtype()) || !dtype_is_floating(src.dtype())) {
    throw UnsupportedError("copy: converting " + src.describe() + " to " + dst.describe() +
                           " is not supported; integer tensors copy only to the same dtype");
  }
  const int64_t n = dst.numel();
  dispatch_storage_floating(dst.dtype(), [&]<typename D>() {
    dispatch_storage_floating(src.dtype(), [&]<typename S>() {
      convert(static_cast<D*>(dst.raw_data()), static_cast<const S*>(src.raw_data()), n);
    });
  });
}

void copy_from_host(Tensor& dst, const void* src) {
  expect_host_contiguous(dst, "copy_from_host", "dst");
  ZERO_CHECK(src != nullptr || dst.nbytes() == 0, "copy_from_host: null source");
  if (dst.nbytes() > 0) parallel_memcpy(dst.raw_data(), src, dst.nbytes());
}

void copy_to_host(void* dst, const Tensor& src) {
  expect_host_contiguous(src, "copy_to_host", "src");
  ZERO_CHECK(dst != nullptr || src.nbytes() == 0, "copy_to_host: null destination");
  if (src.nbytes() > 0) parallel_memcpy(dst, src.raw_data(), src.nbytes());
}

void add(Tensor& y, const Tensor& x, double alpha) {
  expect_host_contiguous(y, "add", "y");
  expect_host_contiguous(x, "add", "x");
  if (y.shape() != x.shape() || y.dtype() != x.dtype()) {
    throw ShapeError("add: y " + y.describe() + " and x " + x.describe() +
                     " must have the same shape and dtype");
  }
  dispatch_floating(y.dtype(), "add", [&]<typename T>() {
    T* yd = y.data<T>();
    const T* xd = x.data<T>();
    const T a = static_cast<T>(alpha);
    const int64_t n = y.numel();
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i) yd[i] += a * xd[i];
  });
}

void scale(Tensor& y, double alpha) {
  expect_host_contiguous(y, "scale", "y");
  dispatch_floating(y.dtype(), "scale", [&]<typename T>() {
    T* yd = y.data<T>();
    const T a = static_cast<T>(alpha);
    const int64_t n = y.numel();
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i) yd[i] *= a;
  });
}

void scale_by_inverse_norm(Tensor& x, const Tensor& squared_norm, double eps) {
  const char* op = "scale_by_inverse_norm";
  require_contiguous(x, op, "x");
  require_dtype(x, DType::kF32, op, "x");
  require_contiguous(squared_norm, op, "squared_norm");
  require_dtype(squared_norm, DType::kF64, op, "squared_norm");
  if (squared_norm.numel() != 1 || !(eps > 0.0)) {
    throw ShapeError(std::string(op) + ": squared_norm must hold one element and eps be > 0, got " +
                     squared_norm.describe() + " and eps " + std::to_string(eps));
  }
  const float factor =
      static_cast<float>(1.0 / (std::sqrt(*squared_norm.data<double>()) + eps));
  float* xd = x.data<float>();
  const int64_t n = x.numel();
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) xd[i] *= factor;
}

}  // namespace zero::backend::cpu

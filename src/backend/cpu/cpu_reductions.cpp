#include "backend/cpu/cpu_reductions.h"

#include <vector>

#include "backend/cpu/cpu_checks.h"
#include "backend/cpu/cpu_dispatch.h"
#include "core/error.h"
#include "core/half.h"

namespace zero::backend::cpu {
namespace {

inline double element_value(float v) { return v; }
inline double element_value(double v) { return v; }
inline double element_value(bf16 v) { return to_float(v); }
inline double element_value(f16 v) { return to_float(v); }

// Sums f(x[i]) in f64 over fixed 64 Ki-element chunks, the partial sums added in chunk order.
// Within a chunk, element i goes to lane i % kLanes and the lanes are added in a fixed tree:
// explicit lanes (not an OpenMP simd reduction, whose order the compiler picks per element type)
// make the bits depend on the values alone, so 16-bit storage (held gradients, widened exactly)
// sums to the bits of an f32 tensor of the same values.
template <typename F>
double chunked_sum(const Tensor& x, const char* op, F f) {
  require_contiguous(x, op, "x");
  constexpr int64_t kChunk = 1 << 16;
  constexpr int64_t kLanes = 8;
  const int64_t n = x.numel();
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
  const auto sum_chunks = [&]<typename T>() {
    const T* data = x.data<T>();
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = c * kChunk;
      const int64_t end = std::min(n, begin + kChunk);
      double lane[kLanes] = {};
      int64_t i = begin;
      for (; i + kLanes <= end; i += kLanes) {
        for (int64_t l = 0; l < kLanes; ++l) lane[l] += f(element_value(data[i + l]));
      }
      for (int64_t l = 0; i < end; ++i, ++l) lane[l] += f(element_value(data[i]));
      partial[static_cast<size_t>(c)] =
          ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    }
  };
  if (x.dtype() == DType::kBF16) {
    sum_chunks.template operator()<bf16>();
  } else if (x.dtype() == DType::kF16) {
    sum_chunks.template operator()<f16>();
  } else {
    dispatch_floating(x.dtype(), op, sum_chunks);
  }
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

}  // namespace

double squared_norm(const Tensor& x) {
  return chunked_sum(x, "sum_squares", [](double v) { return v * v; });
}

double sum(const Tensor& x) {
  return chunked_sum(x, "sum", [](double v) { return v; });
}

void store_scalar(Tensor& out, double value, bool accumulate, const char* op) {
  if (!out.defined() || !out.device().is_cpu() || out.dtype() != DType::kF64 ||
      out.numel() != 1) {
    throw ShapeError(std::string(op) + ": out must be a one-element f64 tensor on the host, got " +
                     (out.defined() ? out.describe() : std::string("an undefined tensor")));
  }
  double& slot = out.data<double>()[0];
  slot = accumulate ? slot + value : value;
}

}  // namespace zero::backend::cpu

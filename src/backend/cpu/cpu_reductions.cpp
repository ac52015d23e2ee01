#include "backend/cpu/cpu_reductions.h"

#include <vector>

#include "backend/cpu/cpu_checks.h"
#include "backend/cpu/cpu_dispatch.h"
#include "core/error.h"

namespace zero::backend::cpu {
namespace {

// Sums f(x[i]) in f64 over fixed 64 Ki-element chunks, the partial sums added in chunk order.
template <typename F>
double chunked_sum(const Tensor& x, const char* op, F f) {
  require_contiguous(x, op, "x");
  constexpr int64_t kChunk = 1 << 16;
  const int64_t n = x.numel();
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
  dispatch_floating(x.dtype(), op, [&]<typename T>() {
    const T* data = x.data<T>();
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t end = std::min(n, (c + 1) * kChunk);
      double total = 0.0;
#pragma omp simd reduction(+ : total)
      for (int64_t i = c * kChunk; i < end; ++i) total += f(static_cast<double>(data[i]));
      partial[static_cast<size_t>(c)] = total;
    }
  });
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

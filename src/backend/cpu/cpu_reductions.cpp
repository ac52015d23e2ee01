#include "backend/cpu/cpu_reductions.h"

#include <vector>

#include "backend/cpu/cpu_checks.h"
#include "backend/cpu/cpu_dispatch.h"

namespace zero::backend::cpu {

double squared_norm(const Tensor& x) {
  require_contiguous(x, "squared_norm", "x");
  constexpr int64_t kChunk = 1 << 16;
  const int64_t n = x.numel();
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
  dispatch_floating(x.dtype(), "squared_norm", [&]<typename T>() {
    const T* data = x.data<T>();
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t end = std::min(n, (c + 1) * kChunk);
      double sum = 0.0;
#pragma omp simd reduction(+ : sum)
      for (int64_t i = c * kChunk; i < end; ++i) {
        const auto v = static_cast<double>(data[i]);
        sum += v * v;
      }
      partial[static_cast<size_t>(c)] = sum;
    }
  });
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

}  // namespace zero::backend::cpu

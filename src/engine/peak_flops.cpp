#include "engine/peak_flops.h"

#include <algorithm>
#include <chrono>

namespace zero::engine {

double measure_matmul_peak_flops(backend::Backend& backend) {
  constexpr int64_t n = 512;
  Tensor a = backend.empty({n, n}, DType::kF32, MemoryCategory::kWorkspace);
  Tensor b = backend.empty({n, n}, DType::kF32, MemoryCategory::kWorkspace);
  Tensor c = backend.empty({n, n}, DType::kF32, MemoryCategory::kWorkspace);
  backend.fill(a, 0.5);
  backend.fill(b, 0.25);
  double best = 1e30;
  for (int i = 0; i < 6; ++i) {
    const auto start = std::chrono::steady_clock::now();
    backend.matmul(c, a, false, b, false, 1.0, 0.0);
    backend.synchronize();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return 2.0 * static_cast<double>(n * n * n) / best;
}

}  // namespace zero::engine

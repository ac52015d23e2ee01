#include "engine/peak_flops.h"

#include <algorithm>
#include <chrono>

namespace zero::engine {

MatmulPeak measure_matmul_peak(backend::Backend& backend, int64_t size) {
  const bool gpu = backend.device().kind == DeviceKind::kCuda;
  MatmulPeak peak;
  peak.dtype = gpu ? DType::kBF16 : DType::kF32;
  peak.size = size > 0 ? size : (gpu ? 8192 : 512);
  const int64_t n = peak.size;
  Tensor a = backend.empty({n, n}, peak.dtype, MemoryCategory::kWorkspace);
  Tensor b = backend.empty({n, n}, peak.dtype, MemoryCategory::kWorkspace);
  Tensor c = backend.empty({n, n}, peak.dtype, MemoryCategory::kWorkspace);
  backend.fill(a, 0.5);
  backend.fill(b, 0.25);
  // The first product also pays for the library's one-time set-up (cuBLASLt heuristics); the
  // best of the rest is the rate.
  backend.matmul(c, a, false, b, false, 1.0, 0.0);
  backend.synchronize();
  // Several products per sample on a GPU, so the host's launch and wait are a small part of it.
  const int per_sample = gpu ? 4 : 1;
  double best = 1e30;
  for (int i = 0; i < 6; ++i) {
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < per_sample; ++r) backend.matmul(c, a, false, b, false, 1.0, 0.0);
    backend.synchronize();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  const double nd = static_cast<double>(n);
  peak.flops_per_second = 2.0 * nd * nd * nd * per_sample / best;
  return peak;
}

}  // namespace zero::engine

// The FLOP/s MFU divides by (engine/peak_flops.h): measured on the run's own backend - f32 512^3
// products on the CPU backends (bf16 8192^3 on a GPU) - and its matrices are freed again.
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "backend/sim/simulated_device_backend.h"
#include "engine/peak_flops.h"

namespace zero::engine {
namespace {

TEST(PeakFlops, CpuBackendsMeasureF32ProductsAndFreeTheirMatrices) {
  backend::CpuBackend cpu;
  backend::SimulatedDeviceBackend sim;
  for (backend::Backend* be : {static_cast<backend::Backend*>(&cpu), static_cast<backend::Backend*>(&sim)}) {
    const size_t before = be->allocator().stats().live(MemoryCategory::kWorkspace);
    const MatmulPeak peak = measure_matmul_peak(*be);
    EXPECT_EQ(peak.dtype, DType::kF32);
    EXPECT_EQ(peak.size, 512);
    EXPECT_GT(peak.flops_per_second, 0.0);
    EXPECT_EQ(be->allocator().stats().live(MemoryCategory::kWorkspace), before);
  }
  // An explicit size is used as given.
  EXPECT_EQ(measure_matmul_peak(cpu, 64).size, 64);
}

}  // namespace
}  // namespace zero::engine

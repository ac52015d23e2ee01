// The accounting of ZeRO-Offload / ZeRO-Infinity against DeepSpeed's estimator
// (sharding/memory_estimator.h): the device's model-state bytes (parameters, gradients,
// optimizer state, measured by the simulated device's allocator between bf16 steps) fall from
// mode to mode as the estimator says. The offload rows match it exactly; without offload the
// engine keeps less than DeepSpeed's figure (4 bytes/parameter at stage 2, 2 at stage 3: its
// 2 + 18/N and 18/N count gradient buffers beyond the bf16 accumulation that the engine only
// creates inside the step, as f32 workspace). The gathered-layer buffer (LL) of
// stage 3 is a transient here (kComm), so it is left out of both sides.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "backend/sim/simulated_device_backend.h"
#include "comm/self_comm.h"
#include "engine/zero_harness.h"
#include "sharding/memory_estimator.h"

namespace zero::engine {
namespace offload_accounting_test {
using namespace zero_test;
using config::OffloadDevice;

struct Mode {
  int stage;
  OffloadDevice optimizer;
  OffloadDevice params;
  int64_t engine_minus_estimate_per_param;  // bytes/parameter the engine keeps fewer
};

TEST(OffloadAccounting, DeviceBytesFollowDeepSpeedsEstimator) {
  const auto dir = std::filesystem::temp_directory_path() / ("zero_offload_accounting_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const Mode modes[] = {
      {2, OffloadDevice::kNone, OffloadDevice::kNone, 4},
      {2, OffloadDevice::kCpu, OffloadDevice::kNone, 0},
      {3, OffloadDevice::kNone, OffloadDevice::kNone, 2},
      {3, OffloadDevice::kCpu, OffloadDevice::kNone, 0},
      {3, OffloadDevice::kCpu, OffloadDevice::kCpu, 0},
      {3, OffloadDevice::kNvme, OffloadDevice::kNvme, 0},
  };
  for (const Mode& m : modes) {
    backend::SimulatedDeviceBackend sim;
    comm::SelfComm comm;
    EngineSettings s = zero_settings(m.stage, 2, 1, 1);
    s.bf16.enabled = true;
    s.zero.offload_optimizer.device = m.optimizer;
    s.zero.offload_param.device = m.params;
    s.zero.offload_optimizer.nvme_path = s.zero.offload_param.nvme_path = dir.string();
    s.zero.offload_param.buffer_size = 1'000'000;
    Engine engine(small_model("llama", sim), s, comm);
    engine.train_batch([index = int64_t{0}]() mutable { return batch_for(0, index++, 2, 8, 41); });
    const MemoryStats device = sim.allocator().stats();
    const int64_t measured = static_cast<int64_t>(device.live(MemoryCategory::kParams) +
                                                  device.live(MemoryCategory::kGrads) +
                                                  device.live(MemoryCategory::kOptimizer));
    // One rank: the partition is the whole (padded) model.
    const int64_t p = engine.zero_stage().layout().partition_numel();
    sharding::EstimateShape shape;
    shape.total_params = p;
    shape.largest_layer_params = 0;
    const sharding::ZeroOptions options{m.stage, static_cast<sharding::OffloadDevice>(m.optimizer),
                                        static_cast<sharding::OffloadDevice>(m.params), true};
    const int64_t estimated = sharding::estimate_model_states(shape, options).gpu_bytes;
    EXPECT_EQ(measured, estimated - m.engine_minus_estimate_per_param * p)
        << "stage " << m.stage << " optimizer " << static_cast<int>(m.optimizer) << " params "
        << static_cast<int>(m.params);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace offload_accounting_test
}  // namespace zero::engine

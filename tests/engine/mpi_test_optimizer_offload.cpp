// mpi-ranks: 2 3
// ZeRO-Offload across processes: each rank's partition is updated on its host, and the run
// matches the device-side optimizer bit for bit at stages 1-3 (CPU backend and simulated device
// with host-staged communication).
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "backend/sim/simulated_device_backend.h"
#include "comm/host_staged_comm.h"
#include "comm/world.h"
#include "engine/zero_harness.h"

namespace zero::engine {
namespace {
using namespace zero_test;

constexpr int kSteps = 4;
constexpr int64_t kSeqLen = 8;

std::vector<double> train(backend::Backend& backend, comm::Comm& comm, int stage, bool offload,
                          std::vector<float>* params) {
  EngineSettings s = zero_settings(stage, 2, 1, comm.world_size());
  s.bf16.enabled = true;
  if (offload) s.zero.offload_optimizer.device = config::OffloadDevice::kCpu;
  Engine engine(small_model("gpt2", backend), s, comm);
  std::vector<double> losses;
  for (int step = 0; step < kSteps; ++step) {
    for (double loss : train_step(engine, step, comm.rank(), kSeqLen)) losses.push_back(loss);
  }
  Tensor full = engine.gather_parameters();
  params->resize(static_cast<size_t>(full.numel()));
  backend.copy_to_host(params->data(), full);
  return losses;
}

class OffloadAcrossRanks : public ::testing::TestWithParam<int> {};

TEST_P(OffloadAcrossRanks, MatchesTheDeviceStep) {
  comm::Comm& world = comm::world();
  backend::CpuBackend cpu;
  std::vector<float> reference_params, offloaded_params, device_params;
  const std::vector<double> reference = train(cpu, world, GetParam(), false, &reference_params);
  EXPECT_EQ(train(cpu, world, GetParam(), true, &offloaded_params), reference);
  EXPECT_EQ(offloaded_params, reference_params);
  backend::SimulatedDeviceBackend sim;
  comm::HostStagedComm staged(world, sim);
  EXPECT_EQ(train(sim, staged, GetParam(), true, &device_params), reference);
  EXPECT_EQ(device_params, reference_params);
}

INSTANTIATE_TEST_SUITE_P(Stages, OffloadAcrossRanks, ::testing::Values(1, 2, 3));

}  // namespace
}  // namespace zero::engine

// mpi-ranks: 2
// Several processes train through a device backend whose communicator is host-staged (the path
// ranks sharing one GPU take): the simulated device backend with HostStagedComm over MPI gives,
// at every ZeRO stage, bit for bit the losses and parameters of the CPU backend over MPI, with
// overlapped (asynchronous) reductions included.
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

EngineSettings settings_for(int stage, bool overlap, int world) {
  EngineSettings s = zero_settings(stage, 2, 1, world);
  s.zero.overlap_comm = overlap;
  s.bf16.enabled = stage % 2 == 1;  // 16-bit communication on half of the cases
  return s;
}

class HostStagedTraining
    : public ::testing::TestWithParam<std::tuple<std::string, int, bool>> {};

TEST_P(HostStagedTraining, MatchesTheCpuBackendBitForBit) {
  const auto& [family, stage, overlap] = GetParam();
  comm::Comm& world = comm::world();
  const EngineSettings settings = settings_for(stage, overlap, world.world_size());
  backend::CpuBackend cpu;
  const TrainedRun reference = train_on_ranks(cpu, world, family, settings, kSteps, kSeqLen);

  backend::SimulatedDeviceBackend sim;
  comm::HostStagedComm staged(world, sim);
  const TrainedRun simulated = train_on_ranks(sim, staged, family, settings, kSteps, kSeqLen);
  EXPECT_EQ(reference.losses, simulated.losses);
  EXPECT_EQ(reference.params, simulated.params);
  // The collectives really went through the staging path (device -> host -> device).
  EXPECT_GT(sim.transfer_stats().device_to_host_calls, kSteps);
  EXPECT_GT(staged.stats().total_traffic_bytes(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Stages, HostStagedTraining,
    ::testing::Combine(::testing::Values("gpt2", "llama"), ::testing::Values(0, 1, 2, 3),
                       ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<std::string, int, bool>>& param_info) {
      return std::get<0>(param_info.param) + "_stage" + std::to_string(std::get<1>(param_info.param)) +
             (std::get<2>(param_info.param) ? "_overlap" : "");
    });

}  // namespace
}  // namespace zero::engine

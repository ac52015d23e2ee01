// mpi-ranks: 2 3
// ZeRO-Offload across processes: each rank's partition is updated on its host (its state in
// memory or in files on NVMe), and 10 steps match the device-side optimizer bit for bit at
// stages 1-3 in f32 and bf16 (CPU backend, and simulated device with host-staged communication).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "backend/sim/simulated_device_backend.h"
#include "comm/host_staged_comm.h"
#include "comm/world.h"
#include "engine/zero_harness.h"

namespace zero::engine {
namespace {
using namespace zero_test;

constexpr int kSteps = 10;
constexpr int64_t kSeqLen = 8;

// offload: none, cpu or nvme (each rank its own folder under `nvme_dir`).
std::vector<double> train(backend::Backend& backend, comm::Comm& comm, int stage, bool bf16,
                          config::OffloadDevice offload, const std::string& nvme_dir,
                          std::vector<float>* params) {
  EngineSettings s = zero_settings(stage, 2, 1, comm.world_size());
  s.bf16.enabled = bf16;
  s.zero.offload_optimizer.device = offload;
  if (offload == config::OffloadDevice::kNvme) {
    s.zero.offload_optimizer.nvme_path = nvme_dir;
    s.zero.sub_group_size = 1000;
  }
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
  const std::string nvme_dir = (std::filesystem::temp_directory_path() /
                                ("zero_mpi_offload_" + std::to_string(::getpid())))
                                   .string();
  std::filesystem::create_directories(nvme_dir);
  for (const bool bf16 : {false, true}) {
    backend::CpuBackend cpu;
    std::vector<float> reference_params, offloaded_params, device_params;
    const std::vector<double> reference =
        train(cpu, world, GetParam(), bf16, config::OffloadDevice::kNone, nvme_dir, &reference_params);
    for (const auto device : {config::OffloadDevice::kCpu, config::OffloadDevice::kNvme}) {
      // NVMe offload is ZeRO-Infinity's (stage 3) in DeepSpeed; here it runs at stages 1-3 too.
      EXPECT_EQ(train(cpu, world, GetParam(), bf16, device, nvme_dir, &offloaded_params), reference)
          << "bf16 " << bf16 << " device " << static_cast<int>(device);
      EXPECT_EQ(offloaded_params, reference_params);
    }
    backend::SimulatedDeviceBackend sim;
    comm::HostStagedComm staged(world, sim);
    EXPECT_EQ(train(sim, staged, GetParam(), bf16, config::OffloadDevice::kCpu, nvme_dir, &device_params),
              reference);
    EXPECT_EQ(device_params, reference_params);
  }
  std::filesystem::remove_all(nvme_dir);
}

INSTANTIATE_TEST_SUITE_P(Stages, OffloadAcrossRanks, ::testing::Values(1, 2, 3));

}  // namespace
}  // namespace zero::engine

// mpi-ranks: 2
// Parameter offload (zero_optimization.offload_param, ZeRO-3) across processes: each rank's
// parameter partition lives in its host memory or in a swap file under its own nvme_path, and
// the run matches the partition on the device bit for bit (losses and gathered parameters), in
// bf16 and f32, with and without optimizer offload, on the CPU backend and on the simulated
// device with host-staged communication. A checkpoint saved with offload_param nvme resumes
// without offload (2 ranks) and at one rank with the same next losses.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "backend/sim/simulated_device_backend.h"
#include "comm/host_staged_comm.h"
#include "comm/self_comm.h"
#include "comm/world.h"
#include "engine/zero_harness.h"
#include "sharding/partition_store.h"
#include "support/job_directory.h"

namespace zero::engine {
namespace {
namespace fs = std::filesystem;
using namespace zero_test;
using config::OffloadDevice;

constexpr int kSteps = 4;
constexpr int64_t kSeqLen = 8;

// This process's own swap folder (ranks never share one).
class RankSwapDir {
 public:
  RankSwapDir() : path_(fs::temp_directory_path() / ("zero_mpi_param_offload_" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~RankSwapDir() { fs::remove_all(path_); }
  RankSwapDir(const RankSwapDir&) = delete;
  RankSwapDir& operator=(const RankSwapDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

struct Mode {
  OffloadDevice params = OffloadDevice::kNone;
  bool optimizer_on_cpu = false;
  int64_t max_in_cpu = 0;  // nvme: elements of the partition kept in host memory (whole units)
};

const std::vector<Mode>& offloaded_modes() {
  static const std::vector<Mode> modes = {
      {OffloadDevice::kNone, true},  // the optimizer alone (the CPU step)
      {OffloadDevice::kCpu, false},
      {OffloadDevice::kNvme, false},
      {OffloadDevice::kNvme, false, 1000},  // the embedding's shard stays in host memory
      {OffloadDevice::kCpu, true},
      {OffloadDevice::kNvme, true},
  };
  return modes;
}

std::string describe(bool bf16, const Mode& m) {
  const char* where[] = {"device", "cpu", "nvme"};
  return std::string(bf16 ? "bf16" : "f32") + " params on " + where[static_cast<int>(m.params)] +
         (m.max_in_cpu > 0 ? " max_in_cpu " + std::to_string(m.max_in_cpu) : "") +
         (m.optimizer_on_cpu ? " + optimizer on cpu" : "");
}

EngineSettings settings(int world, bool bf16, const Mode& m, const fs::path& swap) {
  EngineSettings s = zero_settings(3, 2, 2, world);  // two micro-steps: shards read twice a step
  s.bf16.enabled = bf16;
  s.zero.offload_param.device = m.params;
  s.zero.offload_param.pin_memory = true;
  if (m.params == OffloadDevice::kNvme) {
    s.zero.offload_param.nvme_path = swap.string();
    s.zero.offload_param.max_in_cpu = m.max_in_cpu;
    s.zero.offload_param.buffer_count = 2;  // fewer buffers than units
    s.zero.offload_param.buffer_size = 8192;
  }
  if (m.optimizer_on_cpu) {
    s.zero.offload_optimizer.device = OffloadDevice::kCpu;
    s.zero.offload_optimizer.pin_memory = true;
  }
  s.aio.block_size = 4096;
  return s;
}

struct Outcome {
  std::vector<double> losses;  // this rank's micro-batch losses, step by step
  std::vector<float> params;   // all parameters, gathered
};

Outcome train(backend::Backend& backend, comm::Comm& comm, const EngineSettings& s) {
  Engine engine(small_model("llama", backend), s, comm);
  Outcome out;
  for (int step = 0; step < kSteps; ++step) {
    for (double loss : train_step(engine, step, comm.rank(), kSeqLen)) out.losses.push_back(loss);
  }
  // The partition really is where the settings say (this rank's half of it).
  const sharding::PartitionStore* store = engine.zero_stage().partition_store();
  EXPECT_NE(store, nullptr);
  if (store != nullptr) {
    const sharding::PartitionPlacement where = store->placement();
    const int64_t bytes = engine.zero_stage().layout().partition_numel() * (s.bf16.enabled ? 2 : 4);
    EXPECT_EQ(store->tier(), s.zero.offload_param.device);
    EXPECT_EQ(where.device_bytes, s.zero.offload_param.device == OffloadDevice::kNone ? bytes : 0);
    EXPECT_EQ(where.host_bytes + where.nvme_bytes, s.zero.offload_param.device == OffloadDevice::kNone ? 0 : bytes);
    if (s.zero.offload_param.device == OffloadDevice::kNvme) {
      const int64_t kept = s.zero.offload_param.max_in_cpu;
      EXPECT_EQ(where.host_bytes > 0, kept > 0);
      EXPECT_LE(where.host_bytes, kept * (s.bf16.enabled ? 2 : 4));
      EXPECT_GT(where.nvme_bytes, 0);
      EXPECT_GE(store->traffic().nvme_read_bytes, 2 * kSteps * where.nvme_bytes)
          << "every micro-step reads every swapped shard";
    }
  }
  Tensor full = engine.gather_parameters();
  out.params.resize(static_cast<size_t>(full.numel()));
  backend.copy_to_host(out.params.data(), full);
  return out;
}

class ParamOffloadAcrossRanks : public ::testing::TestWithParam<bool> {};

TEST_P(ParamOffloadAcrossRanks, MatchesThePartitionOnTheDevice) {
  const bool bf16 = GetParam();
  comm::Comm& world = comm::world();
  RankSwapDir swap;
  backend::CpuBackend cpu;
  const Outcome reference = train(cpu, world, settings(world.world_size(), bf16, {}, swap.path()));
  for (const Mode& m : offloaded_modes()) {
    const Outcome got = train(cpu, world, settings(world.world_size(), bf16, m, swap.path()));
    EXPECT_EQ(got.losses, reference.losses) << describe(bf16, m);
    EXPECT_EQ(got.params, reference.params) << describe(bf16, m);
  }
  EXPECT_FALSE(fs::exists(swap.path() / "zero_param_swap")) << "the swap files go with the engines";
  // The simulated device: the shards really cross host <-> device, and so do the collectives.
  backend::SimulatedDeviceBackend sim;
  comm::HostStagedComm staged(world, sim);
  for (const Mode& m : offloaded_modes()) {
    const Outcome got = train(sim, staged, settings(world.world_size(), bf16, m, swap.path()));
    EXPECT_EQ(got.losses, reference.losses) << describe(bf16, m) << " on the simulated device";
    EXPECT_EQ(got.params, reference.params) << describe(bf16, m) << " on the simulated device";
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, ParamOffloadAcrossRanks, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "bf16" : "f32"; });

// Every rank's value, in rank order, on every rank.
std::vector<double> gather_scalars(comm::Comm& comm, const std::vector<double>& mine) {
  std::vector<double> all;
  for (int r = 0; r < comm.world_size(); ++r) {
    for (double v : mine) {
      all.push_back(comm.all_reduce_scalar(comm.rank() == r ? v : 0.0, comm::ReduceOp::kSum));
    }
  }
  return all;
}

TEST(ParamOffloadCheckpoint, SavedFromNvmeResumesWithoutOffloadAndAtOneRank) {
  comm::Comm& world = comm::world();
  const int n = world.world_size();
  const fs::path ckpt = zero::testing::job_directory(world, "zero_mpi_param_offload_ckpt");
  RankSwapDir swap;
  backend::CpuBackend cpu;
  const Mode nvme{OffloadDevice::kNvme, false};
  std::vector<double> expected;
  std::vector<float> at_save;
  {
    Engine first(small_model("llama", cpu), settings(n, true, nvme, swap.path()), world);
    for (int step = 0; step < 2; ++step) train_step(first, step, world.rank(), kSeqLen);
    first.save_checkpoint(ckpt.string());
    at_save = to_vector(first.gather_parameters());
    expected = train_step(first, 2, world.rank(), kSeqLen);
  }
  // The same ranks, the partition on the device.
  {
    Engine resumed(model::build_transformer(small_config("llama"), cpu, DType::kF32),
                   settings(n, true, {}, swap.path()), world);
    resumed.load_checkpoint(ckpt.string());
    EXPECT_EQ(resumed.global_steps(), 2);
    EXPECT_EQ(to_vector(resumed.gather_parameters()), at_save);
    EXPECT_EQ(train_step(resumed, 2, world.rank(), kSeqLen), expected);
  }
  // One rank (each process on its own), parameters offloaded to host memory: its micro-batches
  // are the two ranks' micro-batches, so its losses are theirs in rank order.
  const std::vector<double> everyone = gather_scalars(world, expected);
  {
    comm::SelfComm self;
    EngineSettings s = settings(1, true, {OffloadDevice::kCpu, false}, swap.path());
    s.gradient_accumulation_steps *= n;
    s.train_batch_size = s.micro_batch_size * s.gradient_accumulation_steps;
    Engine alone(model::build_transformer(small_config("llama"), cpu, DType::kF32), s, self);
    alone.load_checkpoint(ckpt.string());
    EXPECT_EQ(to_vector(alone.gather_parameters()), at_save);
    EXPECT_EQ(train_step(alone, 2, 0, kSeqLen), everyone);
  }
  world.barrier();
  if (world.rank() == 0) fs::remove_all(ckpt);
}

}  // namespace
}  // namespace zero::engine

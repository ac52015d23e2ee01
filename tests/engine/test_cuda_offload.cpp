// ZeRO-Offload and ZeRO-Infinity on the CUDA backend: the optimizer step on the CPU (pinned and
// pageable staging), the stage-3 parameter partition in host memory or in an NVMe swap file, the
// optimizer states on NVMe - each trains the tiny Llama as the same run with everything on the
// GPU does. The CPU's Adam and the GPU's (built without contraction) compute the same float
// operations - on the simulator the runs agree bit for bit - but a GPU's sqrt and division need
// not round as the CPU's do, so f32 runs must agree to 1e-6 relative and bf16 runs (a last-bit
// difference can flip a bf16 rounding) to 1e-3: a transfer that races its stream, or a stale
// pinned buffer, is far outside both. Skipped without a GPU.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <ostream>
#include <sstream>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "engine/run_comparison.h"

namespace zero::engine {
namespace {
using namespace zero_test;
using config::OffloadDevice;

constexpr int64_t kSeqLen = 8;
constexpr int kSteps = 4;

struct Case {
  int stage;
  bool bf16;
  OffloadDevice optimizer;
  OffloadDevice params;  // stage 3 only
  bool pin;
};

void PrintTo(const Case& c, std::ostream* os) {
  auto name = [](OffloadDevice d) {
    return d == OffloadDevice::kCpu ? "cpu" : d == OffloadDevice::kNvme ? "nvme" : "none";
  };
  *os << "stage " << c.stage << (c.bf16 ? " bf16" : " f32") << " optimizer "
      << name(c.optimizer) << " params " << name(c.params) << (c.pin ? " pinned" : " pageable");
}

class CudaOffload : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (backend::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    dir_ = std::filesystem::temp_directory_path() /
           ("zero_cuda_offload_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  EngineSettings settings(const Case& c, bool offload) const {
    EngineSettings s = zero_settings(c.stage, 2, 2, 1);
    s.bf16.enabled = c.bf16;
    if (!offload) return s;
    s.zero.offload_optimizer.device = c.optimizer;
    s.zero.offload_optimizer.pin_memory = c.pin;
    s.zero.offload_param.device = c.params;
    s.zero.offload_param.pin_memory = c.pin;
    if (c.optimizer == OffloadDevice::kNvme || c.params == OffloadDevice::kNvme) {
      s.zero.offload_optimizer.nvme_path = dir_.string();
      s.zero.offload_param.nvme_path = dir_.string();
      s.zero.sub_group_size = 1000;
      s.zero.offload_param.buffer_count = 2;
      s.zero.offload_param.buffer_size = 8192;  // the largest unit shard is ~7000 elements
      s.aio.block_size = 4096;
    }
    return s;
  }

  std::filesystem::path dir_;
};

TEST_P(CudaOffload, TrainsAsTheRunWithEverythingOnTheGpu) {
  const Case& c = GetParam();
  backend::CudaBackend gpu(0);
  const TrainedRun on_gpu =
      train_one_rank(small_model("llama", gpu), settings(c, false), kSteps, kSeqLen);
  const TrainedRun offloaded =
      train_one_rank(small_model("llama", gpu), settings(c, true), kSteps, kSeqLen);
  std::ostringstream where;
  PrintTo(c, &where);
  expect_run_tracks(on_gpu, offloaded, c.bf16 ? 1e-3 : 1e-6, "(" + where.str() + ")");
}

INSTANTIATE_TEST_SUITE_P(
    Offload, CudaOffload,
    ::testing::Values(Case{1, false, OffloadDevice::kCpu, OffloadDevice::kNone, true},
                      Case{2, true, OffloadDevice::kCpu, OffloadDevice::kNone, true},
                      Case{2, false, OffloadDevice::kCpu, OffloadDevice::kNone, false},
                      Case{3, true, OffloadDevice::kCpu, OffloadDevice::kCpu, true},
                      Case{3, false, OffloadDevice::kNone, OffloadDevice::kCpu, false},
                      Case{3, true, OffloadDevice::kNvme, OffloadDevice::kNvme, true}));

}  // namespace
}  // namespace zero::engine

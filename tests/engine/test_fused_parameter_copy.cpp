// With bf16 parameters and f32 master weights the optimizer update writes the bf16 copy in the
// same pass (Backend::optimizer_update_with_copy, fused on a GPU): at stage 0 the parameters
// themselves, at stages 1-2 the partition that publish_parameters() all-gathers, at stage 3 the
// stored partition. So no step converts the master weights separately. All give the same
// parameters as before: the CPU's default composes the update and Backend::copy.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/profiling/profiling_backend.h"
#include "comm/self_comm.h"
#include "engine/zero_harness.h"

namespace zero::engine {
namespace fused_copy_test {
using namespace zero_test;

constexpr int64_t kMicro = 2;
constexpr int64_t kSeqLen = 8;

struct ProfiledStep {
  std::vector<backend::KernelRecord> records;
  std::vector<float> params;
  int64_t num_parameters = 0;
  int64_t partition_numel = 0;
};

// Two bf16 steps of the small Llama at `stage` on the CPU, the second one profiled.
ProfiledStep run(int stage) {
  auto profiler_owner =
      std::make_unique<backend::ProfilingBackend>(std::make_unique<backend::CpuBackend>());
  backend::ProfilingBackend& profiler = *profiler_owner;
  EngineSettings s = zero_settings(stage, kMicro, 1, 1);
  s.bf16.enabled = true;
  comm::SelfComm comm;
  Engine engine(small_model("llama", profiler), s, comm);
  const int64_t vocab = engine.model().config()->vocab_size;
  ProfiledStep out;
  for (int64_t step = 0; step < 2; ++step) {
    if (step == 1) profiler.start_profile();
    int64_t index = 0;
    engine.train_batch([&] { return batch_for(step, index++, kMicro, kSeqLen, vocab); });
    if (step == 1) out.records = profiler.stop_profile(2, 0.0).records;
  }
  out.params = to_vector(engine.gather_parameters());
  out.num_parameters = engine.model().num_parameters();
  out.partition_numel = engine.zero_stage().layout().partition_numel();
  return out;
}

bool has_op(const ProfiledStep& p, const std::string& op) {
  for (const auto& r : p.records) {
    if (r.op == op) return true;
  }
  return false;
}

// A conversion of `numel` elements to bf16 ("copy dst[numel] from f32").
bool converts_to_bf16(const ProfiledStep& p, int64_t numel) {
  const std::string shape = "dst[" + std::to_string(numel) + "] from f32";
  for (const auto& r : p.records) {
    if (r.op == "copy" && r.shape == shape && r.dtype == "bf16") return true;
  }
  return false;
}

TEST(FusedParameterCopy, EveryStageWritesTheBf16CopyInTheUpdate) {
  const ProfiledStep stage0 = run(0);
  for (int stage = 0; stage <= 3; ++stage) {
    const ProfiledStep profiled = stage == 0 ? stage0 : run(stage);
    EXPECT_TRUE(has_op(profiled, "optimizer_update (+16-bit copy)")) << "stage " << stage;
    EXPECT_FALSE(has_op(profiled, "optimizer_update")) << "stage " << stage;
    EXPECT_FALSE(converts_to_bf16(profiled, profiled.num_parameters)) << "stage " << stage;
    EXPECT_FALSE(converts_to_bf16(profiled, profiled.partition_numel)) << "stage " << stage;
    // One rank: the same parameters, bit for bit.
    EXPECT_EQ(profiled.params, stage0.params) << "stage " << stage;
  }
}

}  // namespace fused_copy_test
}  // namespace zero::engine

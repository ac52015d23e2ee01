// At ZeRO stage 0 with bf16 parameters and f32 master weights, the optimizer update writes the
// bf16 parameters in the same pass (Backend::optimizer_update_with_copy, fused on a GPU), so the
// step runs no separate conversion of the whole model; at stage 1 the partition still goes
// through publish_parameters' gather. Both give the same parameters as before: the CPU's
// default composes the update and Backend::copy.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/profiling/profiling_backend.h"
#include "comm/self_comm.h"
#include "engine/zero_harness.h"

namespace zero::engine {
namespace {
using namespace zero_test;

constexpr int64_t kMicro = 2;
constexpr int64_t kSeqLen = 8;

struct ProfiledStep {
  std::vector<backend::KernelRecord> records;
  std::vector<float> params;
  int64_t num_parameters = 0;
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
  return out;
}

bool has_op(const ProfiledStep& p, const std::string& op) {
  for (const auto& r : p.records) {
    if (r.op == op) return true;
  }
  return false;
}

// A conversion of all the parameters to bf16 ("copy dst[N] from f32").
bool converts_whole_model(const ProfiledStep& p) {
  const std::string shape = "dst[" + std::to_string(p.num_parameters) + "] from f32";
  for (const auto& r : p.records) {
    if (r.op == "copy" && r.shape == shape && r.dtype == "bf16") return true;
  }
  return false;
}

TEST(FusedParameterCopy, StageZeroWritesTheBf16ParametersInTheUpdate) {
  const ProfiledStep stage0 = run(0);
  EXPECT_TRUE(has_op(stage0, "optimizer_update (+16-bit copy)"));
  EXPECT_FALSE(has_op(stage0, "optimizer_update"));
  EXPECT_FALSE(converts_whole_model(stage0)) << "the update already wrote the bf16 parameters";

  // Stage 1 updates a partition and gathers it: the plain update.
  const ProfiledStep stage1 = run(1);
  EXPECT_TRUE(has_op(stage1, "optimizer_update"));
  EXPECT_FALSE(has_op(stage1, "optimizer_update (+16-bit copy)"));
  // One rank: the same parameters, bit for bit.
  EXPECT_EQ(stage0.params, stage1.params);
}

}  // namespace
}  // namespace zero::engine

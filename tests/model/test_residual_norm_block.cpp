// A transformer block hands its attention residual add to the MLP's norm as one backend op
// (add_layernorm_forward / add_rmsnorm_forward) when the MLP runs untiled, and keeps the separate
// add when the MLP is tiled (the shards recompute from the summed x1). Checked through the
// kernel profiler's op table; the numbers are unchanged either way (test_residual_norm.cpp
// shows the op is the add then the norm on the CPU backends, and the whole suite runs with it).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "backend/profiling/profiling_backend.h"
#include "model/tiling_harness.h"

namespace zero::model {
namespace {

int64_t calls_of(const backend::KernelProfile& profile, const std::string& op) {
  int64_t calls = 0;
  for (const backend::KernelRecord& r : profile.records) {
    if (r.op == op) calls += r.calls;
  }
  return calls;
}

TEST(ResidualNormBlock, UntiledBlocksFuseTheResidualAddIntoTheMlpNorm) {
  for (const std::string family : {"gpt2", "llama"}) {
    const std::string fused = family == "gpt2" ? "add_layernorm_forward" : "add_rmsnorm_forward";
    for (const int64_t shards : {int64_t{1}, int64_t{2}}) {
      backend::ProfilingBackend be(std::make_unique<backend::CpuBackend>());
      const TransformerConfig config = tiling_test::config_for(family);
      auto model = build_transformer(config, be, DType::kF32);
      init_parameters(*model, 5);
      SequenceTiling tiling;
      tiling.mlp_shards = shards;
      model->set_sequence_tiling(tiling);
      const Batch batch = tiling_test::make_batch(2, 8, config.vocab_size);
      be.start_profile();
      model->forward_backward(batch, 1.0);
      const backend::KernelProfile profile = be.stop_profile(1, 1.0);
      const std::string what = family + " with " + std::to_string(shards) + " MLP shard(s)";
      EXPECT_EQ(calls_of(profile, fused), shards == 1 ? config.num_layers : 0) << what;
    }
  }
}

}  // namespace
}  // namespace zero::model

// mpi-ranks: 2
// pipeline.activation_checkpoint_interval (PipelineEngine::set_activation_checkpoint_interval):
// each stage checkpoints its transformer blocks in groups of N, keeping only each group's input
// and recomputing the group in backward. Against interval 0 on the same two-stage pipeline:
// losses, evaluation losses and every parameter after several AdamW steps (which depend on every
// gradient bit) are BIT-IDENTICAL for N = 1, 2 and N above the stage's block count, with 4
// micro-batches in flight (so the first stage also recomputes whole stages, checkpointed, for
// its in-flight micro-batches) and with the tied GPT-2 embedding; f32 stages (the pipeline
// builds its stages in f32; f64 is covered by tests/model/test_checkpoint_segments.cpp). The
// saved inputs are counted exactly: at most one micro-batch's groups at a time, one hidden state
// [B*T, C] each, so ceil(blocks / N) per stage; the accounted activation peak never exceeds
// interval 0's and falls below it with one block per group.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "comm/mesh.h"
#include "comm/world.h"
#include "core/error.h"
#include "engine/pipeline_engine.h"
#include "engine/zero_harness.h"

namespace zero::engine {
namespace {
using namespace zero_test;

constexpr int kSteps = 3;
constexpr int64_t kSeqLen = 8;
constexpr int64_t kMicro = 2;
constexpr int64_t kGas = 4;
constexpr uint64_t kSeed = 17;

model::TransformerConfig test_config(const std::string& family) {
  model::TransformerConfig config = small_config(family);
  config.num_layers = 6;  // three or so blocks per stage
  return config;
}

struct Outcome {
  std::vector<double> losses;
  double eval_loss = 0.0;
  std::vector<float> params;
  size_t saved_peak = 0;       // the checkpointer's saved-input bytes, peak over the steps
  size_t activation_peak = 0;  // accounted kActivations peak of the last step
  int64_t blocks = 0;          // transformer blocks on this stage
};

Outcome train(const std::string& family, int64_t interval, comm::Mesh& mesh) {
  backend::CpuBackend cpu;
  const model::TransformerConfig config = test_config(family);
  PipelineEngine pipe(config, cpu, zero_settings(0, kMicro, kGas, 1), mesh,
                      pipeline::PartitionMethod::parse("uniform"), kSeed);
  pipe.set_activation_checkpoint_interval(interval);
  Outcome out;
  for (const auto& unit : pipe.model().units()) out.blocks += unit->recomputable() ? 1 : 0;
  for (int step = 0; step < kSteps; ++step) {
    if (step == kSteps - 1) cpu.allocator().reset_peaks();
    const size_t before = cpu.allocator().stats().live(MemoryCategory::kActivations);
    int64_t j = 0;
    out.losses.push_back(pipe.train_batch(
        [&] { return batch_for(step, j++, kMicro, kSeqLen, config.vocab_size); }));
    out.activation_peak = cpu.allocator().stats().peak(MemoryCategory::kActivations) - before;
  }
  out.saved_peak = pipe.model().activation_checkpointer().memory().peak_device_bytes;
  std::vector<model::Batch> eval;
  for (int64_t i = 0; i < 2; ++i) {
    eval.push_back(batch_for(50, i, kMicro, kSeqLen, config.vocab_size));
  }
  out.eval_loss = pipe.eval_batches(eval);
  out.params = to_vector(pipe.engine().gather_parameters());
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class PipelineCheckpointInterval : public ::testing::TestWithParam<std::string> {};

TEST_P(PipelineCheckpointInterval, BitIdenticalToNoCheckpointingWithFewerSavedInputs) {
  comm::Comm& world = comm::world();
  comm::MeshShape shape;
  shape.pp = world.world_size();
  comm::Mesh mesh(world, shape);
  const std::string family = GetParam();
  const Outcome plain = train(family, 0, mesh);
  EXPECT_EQ(plain.saved_peak, 0U);
  ASSERT_GE(plain.blocks, 2) << "the test needs groups of several blocks";
  const size_t hidden = static_cast<size_t>(kMicro * kSeqLen * test_config(family).hidden_size) * 4;
  for (int64_t interval : std::vector<int64_t>{1, 2, 100}) {
    const Outcome grouped = train(family, interval, mesh);
    const std::string what = family + " interval " + std::to_string(interval);
    EXPECT_EQ(grouped.losses, plain.losses) << what;
    EXPECT_EQ(grouped.eval_loss, plain.eval_loss) << what;
    EXPECT_TRUE(same_bits(grouped.params, plain.params)) << what;
    const auto groups = static_cast<size_t>((plain.blocks + interval - 1) / interval);
    EXPECT_EQ(grouped.saved_peak, groups * hidden) << what;
    EXPECT_LE(grouped.activation_peak, plain.activation_peak) << what;
    if (interval == 1) {
      EXPECT_LT(grouped.activation_peak, plain.activation_peak) << what;
    }
    std::printf("rank %d %s: %lld blocks, saved inputs %zu bytes, activation peak %zu bytes "
                "(interval 0: %zu)\n",
                world.rank(), what.c_str(), static_cast<long long>(plain.blocks),
                grouped.saved_peak, grouped.activation_peak, plain.activation_peak);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, PipelineCheckpointInterval,
                         ::testing::Values(std::string("llama"), std::string("gpt2")));

TEST(PipelineCheckpointInterval, NegativeIsAConfigErrorNamingTheKey) {
  comm::Comm& world = comm::world();
  comm::MeshShape shape;
  shape.pp = world.world_size();
  comm::Mesh mesh(world, shape);
  backend::CpuBackend cpu;
  PipelineEngine pipe(test_config("llama"), cpu, zero_settings(0, kMicro, kGas, 1), mesh,
                      pipeline::PartitionMethod::parse("uniform"), kSeed);
  try {
    pipe.set_activation_checkpoint_interval(-2);
    FAIL() << "a negative interval was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("pipeline.activation_checkpoint_interval"),
              std::string::npos)
        << e.what();
  }
  // Back to 0 after an interval: the model's own choice (here: no checkpointing) again.
  pipe.set_activation_checkpoint_interval(3);
  EXPECT_TRUE(pipe.model().activation_checkpointing());
  pipe.set_activation_checkpoint_interval(0);
  EXPECT_FALSE(pipe.model().activation_checkpointing());
}

}  // namespace
}  // namespace zero::engine

// PipelineEngine in one process: one stage (the pipeline degenerate case) trains exactly like a
// plain Engine on the CPU and on the simulated device (nothing above the backend touches device
// elements), runs TrainSchedule's instructions, and refuses the settings it does not act on.
// Multi-stage equivalence: mpi_test_pipeline_equivalence.cpp.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "backend/sim/simulated_device_backend.h"
#include "comm/mesh.h"
#include "comm/self_comm.h"
#include "core/error.h"
#include "engine/pipeline_engine.h"
#include "engine/zero_harness.h"
#include "pipeline/pipeline_schedule.h"

namespace zero::engine {
namespace pipeline_engine_test {
using namespace zero_test;

constexpr int64_t kSeqLen = 8;

template <class BackendType>
void expect_one_stage_equals_engine(const std::string& family) {
  BackendType be;
  comm::SelfComm self;
  const model::TransformerConfig config = small_config(family);
  auto net = model::build_transformer(config, be, DType::kF32);
  model::init_parameters(*net, 11);
  Engine plain(std::move(net), zero_settings(0, 2, 3, 1), self);

  comm::SelfComm world;
  comm::Mesh mesh(world, comm::MeshShape{});
  PipelineEngine pipe(config, be, zero_settings(0, 2, 3, 1), mesh,
                      pipeline::PartitionMethod::parse("parameters"), 11);
  for (int step = 0; step < 4; ++step) {
    int64_t i = 0, j = 0;
    const double a =
        plain.train_batch([&] { return batch_for(step, i++, 2, kSeqLen, config.vocab_size); });
    // Through the Engine, as the trainer calls it.
    const double b = pipe.engine().train_batch(
        [&] { return batch_for(step, j++, 2, kSeqLen, config.vocab_size); });
    EXPECT_EQ(a, b) << "step " << step;
  }
  Tensor x = plain.gather_parameters();
  Tensor y = pipe.engine().gather_parameters();
  std::vector<float> hx(static_cast<size_t>(x.numel())), hy(static_cast<size_t>(y.numel()));
  be.copy_to_host(hx.data(), x);
  be.copy_to_host(hy.data(), y);
  EXPECT_EQ(hx, hy);
  std::vector<pipeline::PipeInstruction> scheduled;
  for (const auto& one : pipeline::TrainSchedule(3, 1, 0).steps()) {
    scheduled.insert(scheduled.end(), one.begin(), one.end());
  }
  EXPECT_EQ(pipe.executed(), scheduled);
  const model::Batch eval = batch_for(50, 0, 2, kSeqLen, config.vocab_size);
  EXPECT_EQ(plain.eval_batch(eval), pipe.engine().eval_batch(eval));
  EXPECT_TRUE(pipe.engine().reporting_rank());
}

TEST(PipelineEngineOneStage, EqualsTheEngineOnCpu) {
  expect_one_stage_equals_engine<backend::CpuBackend>("gpt2");
  expect_one_stage_equals_engine<backend::CpuBackend>("llama");
}

TEST(PipelineEngineOneStage, EqualsTheEngineOnTheSimulatedDevice) {
  expect_one_stage_equals_engine<backend::SimulatedDeviceBackend>("gpt2");
}

TEST(PipelineEngineSettings, RefusesWhatItDoesNotActOn) {
  backend::CpuBackend cpu;
  comm::SelfComm world;
  comm::Mesh mesh(world, comm::MeshShape{});
  const auto method = pipeline::PartitionMethod::parse("uniform");
  for (int stage : {2, 3}) {
    try {
      PipelineEngine pipe(small_config("gpt2"), cpu, zero_settings(stage, 2, 2, 1), mesh, method,
                          1);
      FAIL() << "ZeRO " << stage << " accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("DeepSpeed refuses ZeRO stages 2 and 3"),
                std::string::npos)
          << e.what();
    }
  }
  EngineSettings sequence = zero_settings(0, 2, 2, 1);
  sequence.sequence_parallel_size = 2;
  EXPECT_THROW(PipelineEngine(small_config("gpt2"), cpu, sequence, mesh, method, 1),
               UnsupportedError);
  EngineSettings onebit = zero_settings(0, 2, 2, 1);
  onebit.optimizer_type = "onebitAdam";  // any spelling create() accepts
  onebit.optimizer_params = {{"freeze_step", 2}};
  try {
    PipelineEngine pipe(small_config("gpt2"), cpu, onebit, mesh, method, 1);
    FAIL() << "1-bit Adam accepted with a pipeline";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer.type = \"onebitAdam\" with pipeline"),
              std::string::npos)
        << e.what();
  }
  EngineSettings curriculum = zero_settings(0, 2, 2, 1);
  curriculum.curriculum_learning.enabled = true;
  curriculum.curriculum_learning.curriculum_type = config::CurriculumType::kSeqlen;
  curriculum.curriculum_learning.min_difficulty = 8;
  curriculum.curriculum_learning.max_difficulty = 8;
  curriculum.curriculum_learning.schedule_type = config::CurriculumSchedule::kFixedDiscrete;
  curriculum.curriculum_learning.schedule_config.difficulty = {8};
  try {
    PipelineEngine pipe(small_config("gpt2"), cpu, curriculum, mesh, method, 1);
    FAIL() << "a curriculum accepted with a pipeline";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("curriculum_learning with pipeline parallelism"),
              std::string::npos)
        << e.what();
  }
  EngineSettings muon = zero_settings(0, 2, 2, 1);
  muon.optimizer_type = "Muon";
  muon.optimizer_params = nlohmann::json::object();
  try {
    PipelineEngine pipe(small_config("gpt2"), cpu, muon, mesh, method, 1);
    FAIL() << "Muon accepted with a pipeline";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer.type = \"Muon\" with pipeline"),
              std::string::npos)
        << e.what();
  }

  config::PipelineConfig interval;
  interval.activation_checkpoint_interval = 2;  // acted on (mpi_test_pipeline_checkpoint_interval)
  EXPECT_NO_THROW(check_pipeline_settings(interval, "ds.json"));
  interval.activation_checkpoint_interval = -1;
  try {
    check_pipeline_settings(interval, "ds.json");
    FAIL() << "a negative activation_checkpoint_interval was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("pipeline.activation_checkpoint_interval"),
              std::string::npos)
        << e.what();
  }
  config::PipelineConfig seeded;
  seeded.seed_layers = true;
  EXPECT_THROW(check_pipeline_settings(seeded, "ds.json"), UnsupportedError);
  EXPECT_NO_THROW(check_pipeline_settings(config::PipelineConfig{}, "ds.json"));
}

TEST(PipelineStagePlan, SplitsTheFullUnitList) {
  const model::TransformerConfig config = small_config("llama");  // 2 blocks: 4 units
  EXPECT_EQ(plan_pipeline_stages(config, 4, pipeline::PartitionMethod::parse("uniform")),
            (std::vector<int64_t>{0, 1, 2, 3, 4}));
  const auto parts =
      plan_pipeline_stages(config, 2, pipeline::PartitionMethod::parse("parameters"));
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts.front(), 0);
  EXPECT_EQ(parts.back(), 4);
  EXPECT_THROW(plan_pipeline_stages(config, 5, pipeline::PartitionMethod::parse("uniform")),
               ConfigError);
}

}  // namespace pipeline_engine_test
}  // namespace zero::engine

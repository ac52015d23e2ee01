// The training engine: gradient accumulation equivalence, bit-exact resume (data order included),
// a save interrupted midway, and clear errors for missing or damaged checkpoints.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "backend/cpu/cpu_backend.h"
#include "comm/self_comm.h"
#include "core/error.h"
#include "engine/checkpoint_dir.h"
#include "engine/data_sources.h"
#include "engine/engine.h"
#include "model/transformer_builder.h"

namespace zero::engine {
namespace engine_training_test {
namespace fs = std::filesystem;

model::TransformerConfig tiny_config() {
  model::TransformerConfig c = model::preset_config("tiny");
  c.vocab_size = 16;
  c.hidden_size = 32;
  c.num_layers = 2;
  c.num_heads = c.num_kv_heads = 2;
  c.head_dim = 16;
  c.intermediate_size = 64;
  c.max_position_embeddings = 16;
  return c;
}

EngineSettings settings(int64_t micro, int64_t gas) {
  EngineSettings s;
  s.micro_batch_size = micro;
  s.gradient_accumulation_steps = gas;
  s.train_batch_size = micro * gas;
  s.optimizer_type = "AdamW";
  s.optimizer_params = {{"lr", 1e-2}, {"weight_decay", 0.1}};
  s.scheduler_type = "WarmupLR";
  s.scheduler_params = {{"warmup_num_steps", 5}, {"warmup_max_lr", 1e-2}, {"warmup_type", "linear"}};
  return s;
}

struct TrainingRun {
  backend::CpuBackend cpu;
  comm::SelfComm comm;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<SyntheticData> data;

  TrainingRun(int64_t micro, int64_t gas) {
    auto net = model::build_transformer(tiny_config(), cpu, DType::kF32);
    model::init_parameters(*net, 3);
    engine = std::make_unique<Engine>(std::move(net), settings(micro, gas), comm);
    auto source = std::make_shared<data::MarkovSource>(16, 2, 3, 5);
    data = std::make_unique<SyntheticData>(source, 0, 1, 0);
  }
  double train_step(int64_t seq_len = 8) {
    return engine->train_batch([&] { return data->next(engine->settings().micro_batch_size, seq_len); });
  }
  std::vector<float> params() {
    const Tensor& p = engine->model().flat_params();
    return std::vector<float>(p.data<float>(), p.data<float>() + p.numel());
  }
};

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("zero_engine_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override {
    set_checkpoint_crash_hook(nullptr);
    fs::remove_all(dir_);
  }
  fs::path dir_;
};

TEST_F(EngineTest, AccumulationMatchesOneLargeBatch) {
  // micro 2 x gas 4 sees the same 8 samples per step as micro 8 x gas 1.
  TrainingRun small(2, 4), large(8, 1);
  for (int step = 0; step < 3; ++step) {
    small.train_step();
    large.train_step();
  }
  const auto a = small.params(), b = large.params();
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  // f32: the two runs sum the same gradients in a different order (per micro-batch vs one
  // matmul), ~1e-7 relative per step; AdamW's normalised update keeps it there. 1e-5 bound.
  EXPECT_LE(std::sqrt(diff / norm), 1e-5);
  EXPECT_EQ(small.engine->global_steps(), 3);
  EXPECT_EQ(small.engine->global_samples(), 24);
  EXPECT_EQ(small.engine->micro_steps(), 12);
}

TEST_F(EngineTest, StepAppliesOnlyAtTheAccumulationBoundary) {
  TrainingRun run(2, 3);
  const auto before = run.params();
  run.engine->forward(run.data->next(2, 8));
  run.engine->backward();
  EXPECT_FALSE(run.engine->step());
  EXPECT_EQ(run.params(), before);
  EXPECT_EQ(run.engine->global_steps(), 0);
  EXPECT_THROW(run.engine->backward(), Error);  // no forward pending
}

TEST_F(EngineTest, ResumeIsBitExactIncludingDataOrder) {
  TrainingRun straight(2, 2);
  std::vector<double> losses;
  for (int i = 0; i < 20; ++i) losses.push_back(straight.train_step());

  TrainingRun first(2, 2);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(first.train_step(), losses[static_cast<size_t>(i)]);
  first.engine->save_checkpoint(dir_.string(), "", {{"data", first.data->state()}});
  EXPECT_TRUE(fs::exists(dir_ / "global_step10" / "model.safetensors"));

  TrainingRun second(2, 2);  // fresh process state: different object, same construction
  const nlohmann::json client = second.engine->load_checkpoint(dir_.string());
  second.data->restore(client["data"]);
  EXPECT_EQ(second.engine->global_steps(), 10);
  for (int i = 10; i < 20; ++i) EXPECT_EQ(second.train_step(), losses[static_cast<size_t>(i)]) << i;
  EXPECT_EQ(second.params(), straight.params());
  EXPECT_EQ(second.engine->get_lr(), straight.engine->get_lr());
}

TEST_F(EngineTest, CrashDuringSaveLeavesThePreviousCheckpointLoadable) {
  TrainingRun run(2, 1);
  for (int i = 0; i < 3; ++i) run.train_step();
  run.engine->save_checkpoint(dir_.string());
  const auto saved = run.params();
  for (int i = 0; i < 2; ++i) run.train_step();
  for (const char* stage : {"files_written", "renamed"}) {
    set_checkpoint_crash_hook([stage](const std::string& s) {
      if (s == stage) throw Error("simulated crash at " + s);
    });
    EXPECT_THROW(run.engine->save_checkpoint(dir_.string()), Error);
    set_checkpoint_crash_hook(nullptr);
    std::ifstream latest(dir_ / "latest");
    std::string tag;
    latest >> tag;
    EXPECT_EQ(tag, "global_step3") << "latest must still name the last complete checkpoint";
    TrainingRun fresh(2, 1);
    fresh.engine->load_checkpoint(dir_.string());
    EXPECT_EQ(fresh.params(), saved);
  }
}

TEST_F(EngineTest, MissingOrDamagedCheckpointsAreClearErrors) {
  TrainingRun run(2, 1);
  run.train_step();
  EXPECT_THROW(run.engine->load_checkpoint((dir_ / "nothing").string()), FileError);
  run.engine->save_checkpoint(dir_.string(), "good");
  fs::remove(dir_ / "latest");
  try {
    run.engine->load_checkpoint(dir_.string());
    FAIL();
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("latest"), std::string::npos);
  }
  // A truncated weights file.
  const fs::path weights = dir_ / "good" / "model.safetensors";
  fs::resize_file(weights, fs::file_size(weights) / 2);
  EXPECT_THROW(run.engine->load_checkpoint(dir_.string(), "good"), FileError);
  // A checkpoint of another model.
  backend::CpuBackend cpu;
  comm::SelfComm comm;
  model::TransformerConfig other = tiny_config();
  other.hidden_size = 64;
  other.head_dim = 32;
  auto net = model::build_transformer(other, cpu, DType::kF32);
  Engine bigger(std::move(net), settings(2, 1), comm);
  bigger.save_checkpoint(dir_.string(), "other");
  try {
    run.engine->load_checkpoint(dir_.string(), "other");
    FAIL();
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("another model"), std::string::npos) << e.what();
  }
}

}  // namespace engine_training_test
}  // namespace zero::engine

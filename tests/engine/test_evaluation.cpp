// Evaluation in run_training reads the same held-out batches every time: with the weights frozen
// every eval loss of a run is the same number, and a run resumed from a checkpoint evaluates
// exactly what the uninterrupted run does (the end-of-run evaluation before a save used to move
// the eval data on, so the resumed run's last eval loss differed).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "comm/self_comm.h"
#include "engine/data_sources.h"
#include "engine/trainer.h"
#include "engine/zero_harness.h"
#include "tools/shell_runner.h"

namespace zero::engine {
namespace {
namespace fs = std::filesystem;

class EvaluationTest : public zero::testing::ScratchDirTest {
 protected:
  EvaluationTest() : ScratchDirTest("zero_evaluation_") {}

  struct Losses {
    std::vector<double> train;  // per step
    std::vector<double> eval;   // in the order evaluated
  };
  // Trains the small GPT-2 to `steps` (resuming from `resume` when given, saving to `save`),
  // evaluating every `eval_every` steps and at the end.
  Losses train(const EngineSettings& s, int64_t steps, int64_t eval_every,
               const std::string& save = "", const std::string& resume = "") {
    backend::CpuBackend cpu;
    comm::SelfComm self;
    Engine engine(zero_test::small_model("gpt2", cpu), s, self);
    auto source = std::make_shared<data::MarkovSource>(32, 2, 3, 5);
    SyntheticData data(source, 0, 1, 0);
    SyntheticData eval(source, 0, 1, 1);
    TrainerOptions options;
    options.steps = steps;
    options.seq_len = 8;
    options.quiet = true;
    options.eval_every = eval_every;
    options.save_dir = save;
    options.resume_dir = resume;
    options.log_json_path = (dir_ / ("log" + std::to_string(runs_++) + ".jsonl")).string();
    run_training(engine, data, &eval, options);
    Losses out;
    std::ifstream log(options.log_json_path);
    for (std::string line; std::getline(log, line);) {
      const nlohmann::json json = nlohmann::json::parse(line);
      if (json.contains("eval_loss")) {
        out.eval.push_back(json["eval_loss"].get<double>());
      } else {
        out.train.push_back(json["loss"].get<double>());
      }
    }
    return out;
  }

  EngineSettings settings() const {
    EngineSettings s = zero_test::zero_settings(0, 2, 1, 1);
    s.steps_per_print = 1;
    return s;
  }

  int runs_ = 0;
};

TEST_F(EvaluationTest, EveryEvaluationReadsTheSameBatches) {
  EngineSettings s = settings();
  // No learning: a step of 1e-30 is far below half an f32 ulp of any weight, so the weights stay
  // as initialised bit for bit and only the batches could change the loss.
  s.optimizer_params["lr"] = 1e-30;
  s.scheduler_type.clear();
  s.scheduler_params = nlohmann::json::object();
  const Losses run = train(s, 4, 1);
  ASSERT_EQ(run.eval.size(), 4u);  // after steps 1, 2, 3 and at the end
  for (double loss : run.eval) EXPECT_EQ(loss, run.eval.front());
}

TEST_F(EvaluationTest, AResumedRunEvaluatesWhatTheUninterruptedRunDoes) {
  const EngineSettings s = settings();
  const Losses whole = train(s, 4, 0);
  const std::string checkpoints = (dir_ / "ckpt").string();
  const Losses first = train(s, 2, 0, checkpoints);  // evaluates at its end, then saves
  const Losses rest = train(s, 4, 0, "", checkpoints);
  ASSERT_EQ(whole.eval.size(), 1u);
  ASSERT_EQ(rest.eval.size(), 1u);
  std::vector<double> resumed = first.train;
  resumed.insert(resumed.end(), rest.train.begin(), rest.train.end());
  EXPECT_EQ(resumed, whole.train);
  EXPECT_EQ(rest.eval.front(), whole.eval.front());
}

}  // namespace
}  // namespace zero::engine

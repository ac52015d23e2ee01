// DeepSpeed's legacy sequence-length curriculum (config/curriculum_config.h,
// engine/seqlen_curriculum.h): the three schedules against DeepSpeed's formulas worked by hand
// (rounding down to difficulty_step, the cap, a maximum that is not a multiple of the step, the
// state that stops at the maximum), the replay after a checkpoint, the cut itself, the engine
// training on exactly the cut batch (bit for bit against an engine fed the cut batch), a resumed
// engine continuing the schedule, and the configs DeepSpeed rejects.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "config/deepspeed_config.h"
#include "core/error.h"
#include "engine/seqlen_curriculum.h"
#include "engine/zero_harness.h"

namespace zero::engine {
namespace seqlen_curriculum_test {
using config::CurriculumConfig;
using config::CurriculumSchedule;

CurriculumConfig linear(int64_t min, int64_t max, int64_t total, int64_t step) {
  CurriculumConfig c;
  c.enabled = true;
  c.curriculum_type = config::CurriculumType::kSeqlen;
  c.min_difficulty = min;
  c.max_difficulty = max;
  c.schedule_type = CurriculumSchedule::kFixedLinear;
  c.schedule_config.total_curriculum_step = total;
  c.schedule_config.difficulty_step = step;
  return c;
}

CurriculumConfig discrete(std::vector<int64_t> lengths, std::vector<int64_t> max_steps) {
  CurriculumConfig c;
  c.enabled = true;
  c.curriculum_type = config::CurriculumType::kSeqlen;
  c.min_difficulty = lengths.front();
  c.max_difficulty = *std::max_element(lengths.begin(), lengths.end());
  c.schedule_type = CurriculumSchedule::kFixedDiscrete;
  c.schedule_config.difficulty = std::move(lengths);
  c.schedule_config.max_step = std::move(max_steps);
  return c;
}

TEST(SeqlenCurriculum, FixedLinearIsDeepSpeedsFormula) {
  // The Megatron-DeepSpeed recipe: 8 to 1024 tokens over 15000 steps in multiples of 8.
  const SeqlenCurriculum c(linear(8, 1024, 15000, 8));
  EXPECT_EQ(c.scheduled(1), 8);      // floor(8.07) = 8
  EXPECT_EQ(c.scheduled(118), 8);    // floor(15.96) = 15, down to 8
  EXPECT_EQ(c.scheduled(119), 16);   // floor(16.06) = 16
  EXPECT_EQ(c.scheduled(7500), 512);  // 516 down to a multiple of 8
  EXPECT_EQ(c.scheduled(15000), 1024);
  EXPECT_EQ(c.scheduled(20000), 1024);  // past the end: capped
  EXPECT_EQ(c.scheduled(int64_t{1} << 60), 1024);
}

TEST(SeqlenCurriculum, FixedRootAndAMaximumOffTheStep) {
  CurriculumConfig root = linear(8, 1024, 15000, 8);
  root.schedule_type = CurriculumSchedule::kFixedRoot;
  root.schedule_config.root_degree = 2.0;
  const SeqlenCurriculum square(root);
  EXPECT_EQ(square.scheduled(3750), 512);  // sqrt(1/4) = 1/2: 516, down to 512
  EXPECT_EQ(square.scheduled(15), 40);     // sqrt(0.001) * 1016 + 8 = 40.1: 40
  // max 1025 is no multiple of 8: below it the lengths stay multiples (1024 at the end of the
  // schedule); once the raw length reaches 1032 DeepSpeed's min() gives 1025 itself.
  SeqlenCurriculum odd(linear(8, 1025, 1017, 8));
  EXPECT_EQ(odd.scheduled(1017), 1024);
  EXPECT_EQ(odd.scheduled(1030), 1025);  // raw 1038: 1032 > 1025
  EXPECT_EQ(odd.length_for_step(1017), 1024);
  EXPECT_EQ(odd.length_for_step(1030), 1025);
}

TEST(SeqlenCurriculum, FixedDiscreteStopsChangingAtTheMaximum) {
  SeqlenCurriculum steps(discrete({8, 16, 32}, {5, 10}));
  EXPECT_EQ(steps.scheduled(5), 8);
  EXPECT_EQ(steps.scheduled(6), 16);
  EXPECT_EQ(steps.scheduled(10), 16);
  EXPECT_EQ(steps.scheduled(11), 32);
  // A schedule that goes back down: DeepSpeed's update_difficulty stops once the current length
  // reaches max_difficulty, so step 5 keeps 32 where the schedule says 16.
  SeqlenCurriculum down(discrete({8, 32, 16}, {2, 4}));
  const std::vector<int64_t> want = {8, 8, 32, 32, 32, 32};
  for (int64_t step = 1; step <= 6; ++step) {
    EXPECT_EQ(down.length_for_step(step), want[static_cast<size_t>(step - 1)]) << step;
    EXPECT_EQ(down.length_for_step(step), want[static_cast<size_t>(step - 1)]) << "again";
  }
  // A resume replays the schedule to the same state.
  SeqlenCurriculum resumed(discrete({8, 32, 16}, {2, 4}));
  resumed.restore(4);
  EXPECT_EQ(resumed.current(), 32);
  EXPECT_EQ(resumed.length_for_step(5), 32);
  resumed.restore(1);
  EXPECT_EQ(resumed.current(), 8);
}

TEST(SeqlenCurriculum, TruncationKeepsEachSequencesFirstTokensAndTargets) {
  model::Batch batch{Tensor::zeros_host({2, 5}, DType::kI64), Tensor::zeros_host({2, 5}, DType::kI64)};
  for (int64_t i = 0; i < 10; ++i) {
    batch.tokens.data<int64_t>()[i] = i;
    batch.targets.data<int64_t>()[i] = 100 + i;
  }
  const model::Batch cut = truncate_sequences(batch, 3);
  ASSERT_EQ(cut.seq_len(), 3);
  ASSERT_EQ(cut.batch_size(), 2);
  const std::vector<int64_t> tokens = {0, 1, 2, 5, 6, 7};
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_EQ(cut.tokens.data<int64_t>()[i], tokens[static_cast<size_t>(i)]);
    EXPECT_EQ(cut.targets.data<int64_t>()[i], 100 + tokens[static_cast<size_t>(i)]);
  }
  EXPECT_EQ(truncate_sequences(batch, 5).tokens.raw_data(), batch.tokens.raw_data());
}

TEST(SeqlenCurriculum, TheEngineTrainsOnExactlyTheCutBatch) {
  using namespace zero_test;
  backend::CpuBackend cpu;
  comm::SelfComm self;
  EngineSettings plain = zero_settings(0, 2, 1, 1);
  EngineSettings curriculum = plain;
  curriculum.curriculum_learning = discrete({4, 6, 8}, {1, 2});
  Engine cut(small_model("llama", cpu), curriculum, self);
  Engine reference(small_model("llama", cpu), plain, self);
  const int64_t vocab = small_config("llama").vocab_size;
  const std::vector<int64_t> lengths = {4, 6, 8, 8};
  for (int64_t step = 0; step < 4; ++step) {
    const model::Batch batch = batch_for(step, 0, 2, 8, vocab);
    const double a = cut.forward(batch);
    cut.backward();
    cut.step();
    EXPECT_EQ(cut.curriculum_length(), lengths[static_cast<size_t>(step)]);
    const double b = reference.forward(truncate_sequences(batch, lengths[static_cast<size_t>(step)]));
    reference.backward();
    reference.step();
    EXPECT_EQ(a, b) << "step " << step;
  }
  EXPECT_EQ(to_vector(cut.gather_parameters()), to_vector(reference.gather_parameters()));
  EXPECT_EQ(reference.curriculum_length(), 0);
}

TEST(SeqlenCurriculum, AResumedEngineContinuesTheSchedule) {
  using namespace zero_test;
  const std::string dir = ::testing::TempDir() + "seqlen_curriculum_resume";
  std::filesystem::remove_all(dir);
  backend::CpuBackend cpu;
  comm::SelfComm self;
  EngineSettings settings = zero_settings(0, 2, 1, 1);
  settings.curriculum_learning = discrete({2, 4, 8}, {1, 2});
  {
    Engine first(small_model("llama", cpu), settings, self);
    for (int64_t step = 0; step < 2; ++step) train_step(first, step, 0, 8);
    EXPECT_EQ(first.curriculum_length(), 4);
    first.save_checkpoint(dir);
  }
  Engine resumed(small_model("llama", cpu), settings, self);
  EXPECT_EQ(resumed.curriculum_length(), 2);
  resumed.load_checkpoint(dir);
  EXPECT_EQ(resumed.curriculum_length(), 4);
  train_step(resumed, 2, 0, 8);
  EXPECT_EQ(resumed.curriculum_length(), 8);
  std::filesystem::remove_all(dir);
}

void expect_config_error(const std::string& section, const std::string& fragment) {
  const std::string text =
      R"({"train_micro_batch_size_per_gpu": 2, "curriculum_learning": )" + section + "}";
  try {
    config::DeepSpeedConfig::from_text(text, "test.json");
    FAIL() << "accepted: " << section;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(SeqlenCurriculum, ConfigsDeepSpeedRejectsAreRefusedByName) {
  const std::string head = R"({"enabled": true, "curriculum_type": "seqlen", )";
  expect_config_error(R"({"enabled": true, "min_difficulty": 8, "max_difficulty": 64,
      "schedule_type": "fixed_linear"})", "'curriculum_learning.curriculum_type'");
  expect_config_error(head + R"("min_difficulty": 8, "max_difficulty": 64,
      "schedule_type": "fixed_linear", "schedule_config": {"difficulty_step": 8}})",
                      "'curriculum_learning.schedule_config.total_curriculum_step'");
  expect_config_error(head + R"("min_difficulty": 8, "max_difficulty": 64, "schedule_type":
      "fixed_root", "schedule_config": {"total_curriculum_step": 10, "difficulty_step": 8}})",
                      "root_degree");
  expect_config_error(head + R"("min_difficulty": 4, "max_difficulty": 64, "schedule_type":
      "fixed_linear", "schedule_config": {"total_curriculum_step": 10, "difficulty_step": 8}})",
                      "would be 0 tokens");
  expect_config_error(head + R"("min_difficulty": 8, "max_difficulty": 64, "schedule_type":
      "fixed_discrete", "schedule_config": {"difficulty": [8, 16], "max_step": [3, 5]}})",
                      "one entry more than");
  expect_config_error(head + R"("min_difficulty": 8, "max_difficulty": 64, "schedule_type":
      "custom"})", "fixed_discrete");
  expect_config_error(R"({"enabled": true, "curriculum_type": "vocab", "min_difficulty": 8,
      "max_difficulty": 64, "schedule_type": "fixed_linear"})", "seqlen");
  // Switched off, nothing is checked (DeepSpeed reads the rest only when enabled).
  EXPECT_NO_THROW(config::DeepSpeedConfig::from_text(
      R"({"train_micro_batch_size_per_gpu": 2, "curriculum_learning": {"enabled": false}})",
      "test.json"));
}

TEST(SeqlenCurriculum, UlyssesNeedsEveryLengthToSplitEvenly) {
  EXPECT_NO_THROW(check_curriculum_lengths(linear(8, 64, 10, 8), 4));
  try {
    check_curriculum_lengths(linear(8, 64, 10, 8), 3);
    FAIL() << "difficulty_step 8 with 3 sequence ranks was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("max_difficulty = 64 is not a multiple of "
                                         "sequence_parallel_size 3"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(check_curriculum_lengths(discrete({4, 6}, {2}), 4), ConfigError);
}

}  // namespace seqlen_curriculum_test
}  // namespace zero::engine

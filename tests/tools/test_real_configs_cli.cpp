// Real DeepSpeed configs through `zero train` as a user runs them: the Trainer templates in
// examples/ train with no flag beyond the model and step count, an HJSON config with a foreign
// key runs and warns with the key's line, a near-miss typo fails naming the right key,
// --strict-config turns the warning into an error, and no message shows a C++ name.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/cli_runner.h"
#include "tools/cli_helpers.h"

namespace {
namespace fs = std::filesystem;

using Result = zero::testing::CliResult;

using zero::testing::run;

fs::path examples() { return fs::path(ZERO_TEST_FIXTURES) / ".." / ".." / "examples"; }
fs::path corpus() { return fs::path(ZERO_TEST_FIXTURES) / ".." / "config" / "real_configs"; }

// C++ spellings a command-line user must never see.
void expect_no_cpp_names(const std::string& output) {
  for (const char* name : {"AutoValues", "::", "std::", "EngineSettings", "internal error"}) {
    EXPECT_EQ(output.find(name), std::string::npos) << "'" << name << "' in:\n" << output;
  }
}

const std::string kQuick = " --model tiny-llama --steps 2 --seq-len 16";

TEST(RealConfigsCli, TrainerTemplatesRunWithNoOtherFlag) {
  for (const char* file : {"hf_trainer_zero2.json", "llama_factory_zero3.json",
                           "megatron_gpt_zero1.json", "ds_config_hjson.hjson"}) {
    const Result r = run("train --deepspeed " + (examples() / file).string() + kQuick);
    EXPECT_EQ(r.exit_code, 0) << file << "\n" << r.output;
    EXPECT_NE(r.output.find("summary: 2 steps"), std::string::npos) << file << "\n" << r.output;
    expect_no_cpp_names(r.output);
  }
}

TEST(RealConfigsCli, AllAutoConfigPrintsWhatEachAutoBecame) {
  const Result r = run("train --deepspeed " + (corpus() / "hf_trainer_zero3_auto.json").string() +
                       " --model tiny-llama --steps 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* line :
       {"train_micro_batch_size_per_gpu: \"auto\" -> 8, the Hugging Face Trainer's default",
        "optimizer.params.lr: \"auto\" -> 5e-05", "scheduler.params.total_num_steps: \"auto\" -> 3",
        "zero_optimization.reduce_bucket_size: \"auto\" -> ",
        "gradient_clipping: \"auto\" -> 1, the Hugging Face Trainer's default"}) {
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  }
  expect_no_cpp_names(r.output);
}

TEST(RealConfigsCli, FlagsReplaceTheBuiltInConfigsValues) {
  // Without --deepspeed the built-in config takes the flags (no mismatch with its own values).
  const Result r = run("train --steps 2 --micro-batch 4 --lr 1e-3 --max-grad-norm 0.5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("micro 4 x accumulation 1"), std::string::npos) << r.output;
}

class RealConfigsCliFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("zero_real_cfg_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }
  fs::path dir_;
};

TEST_F(RealConfigsCliFiles, HjsonWithAForeignKeyRunsAndWarnsWithTheLine) {
  const std::string path = write("ds.hjson",
                                 "# HJSON, no root braces\n"
                                 "train_micro_batch_size_per_gpu: 2\n"
                                 "data_path: /datasets/pile\n"
                                 "zero_optimization: { stage: 2 }\n");
  Result r = run("train --deepspeed " + path + kQuick);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("zero: warning: " + path + ":3: unknown key 'data_path' is ignored"),
            std::string::npos)
      << r.output;
  r = run("train --deepspeed " + path + kQuick + " --strict-config true");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--strict-config"), std::string::npos) << r.output;
  expect_no_cpp_names(r.output);
}

TEST_F(RealConfigsCliFiles, NearMissTypoNamesTheKnownKey) {
  const Result r =
      run("train --deepspeed " + (corpus() / "near_miss_typo.json").string() + kQuick);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("'zero_optimization.stage3_param_persitence_threshold' looks like a "
                          "misspelling of 'zero_optimization.stage3_param_persistence_threshold'"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(":5:"), std::string::npos) << r.output;
  expect_no_cpp_names(r.output);
}

TEST_F(RealConfigsCliFiles, TrainerFlagsResolveAutoAndMismatchesFail) {
  const std::string path = write("auto.json",
                                 R"({"train_micro_batch_size_per_gpu": "auto",
                                     "gradient_accumulation_steps": "auto",
                                     "optimizer": {"type": "AdamW", "params": {"lr": "auto",
                                       "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
                                     "gradient_clipping": "auto", "bf16": {"enabled": "auto"}})");
  Result r = run("train --deepspeed " + path + kQuick +
                 " --micro-batch 2 --grad-accum 1 --lr 1e-4 --weight-decay 0.01 --adam-beta1 0.8"
                 " --adam-beta2 0.9 --adam-epsilon 1e-6 --max-grad-norm 0.5 --bf16 true");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* line : {"train_micro_batch_size_per_gpu: \"auto\" -> 2, from --micro-batch",
                           "optimizer.params.lr: \"auto\" -> 0.0001, from --lr",
                           "optimizer.params.betas: \"auto\" -> [0.8,0.9]",
                           "gradient_clipping: \"auto\" -> 0.5, from --max-grad-norm",
                           "bf16.enabled: \"auto\" -> true, from --bf16"}) {
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  }
  r = run("train --deepspeed " + (corpus() / "flag_mismatch.json").string() + kQuick +
          " --micro-batch 2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("key 'train_micro_batch_size_per_gpu' = 4 but --micro-batch 2 was given"),
            std::string::npos)
      << r.output;
  r = run("train --deepspeed " + path + kQuick + " --lr 0.1abc");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--lr must be a number"), std::string::npos) << r.output;
  expect_no_cpp_names(r.output);
}

TEST_F(RealConfigsCliFiles, MemoryBreakdownPrintsEveryCategoryAndTheProcess) {
  const std::string with = write("mem.json", R"({"train_micro_batch_size_per_gpu": 2,
                                                  "memory_breakdown": true, "steps_per_print": 1})");
  Result r = run("train --deepspeed " + with + kQuick);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* part : {"memory breakdown: params ", "grads ", "optimizer ", "activations ",
                           "accounted ", "process RSS "}) {
    EXPECT_NE(r.output.find(part), std::string::npos) << part << "\n" << r.output;
  }
  const std::string without = write("plain.json", R"({"train_micro_batch_size_per_gpu": 2})");
  r = run("train --deepspeed " + without + kQuick);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("memory breakdown:"), std::string::npos) << r.output;
}

// The legacy sequence-length curriculum through `zero train`: the step line shows the cut length,
// and a maximum above --seq-len (never reachable) is refused with both numbers.
TEST_F(RealConfigsCliFiles, CurriculumShowsItsLengthAndNeedsTheSequenceLength) {
  const std::string curriculum = R"({"train_micro_batch_size_per_gpu": 2, "steps_per_print": 1,
    "curriculum_learning": {"enabled": true, "curriculum_type": "seqlen", "min_difficulty": 8,
      "max_difficulty": 16, "schedule_type": "fixed_discrete",
      "schedule_config": {"difficulty": [8, 16], "max_step": [1]}}})";
  const std::string path = write("curriculum.json", curriculum);
  Result r = run("train --deepspeed " + path + kQuick);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("| seqlen 8"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| seqlen 16"), std::string::npos) << r.output;
  r = run("train --deepspeed " + path + " --model tiny-llama --steps 2 --seq-len 12");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("max_difficulty 16 is above --seq-len 12"), std::string::npos)
      << r.output;
  expect_no_cpp_names(r.output);
}

// dump_state: rank 0 prints every setting in effect before training (DeepSpeed prints its
// engine's configuration), defaults and resolved "auto" values included.
TEST_F(RealConfigsCliFiles, DumpStatePrintsTheConfigurationInEffect) {
  const std::string path = write("dump.json", R"({"train_micro_batch_size_per_gpu": "auto",
    "dump_state": true, "zero_optimization": {"stage": 1}})");
  const Result r = run("train --deepspeed " + path + kQuick);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("configuration in effect (dump_state; "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  zero_optimization.stage ."), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  train_micro_batch_size_per_gpu ."), std::string::npos) << r.output;
  expect_no_cpp_names(r.output);
}

// The ZeRO++ example on one rank: it trains, and a note says its keys change nothing there
// (tests/tools/test_zero_mpirun.cpp runs it on two).
TEST(RealConfigsCli, ZeroPlusPlusOnOneRankSaysItChangesNothing) {
  const Result r =
      run("train --deepspeed " + (examples() / "ds_config_zero_plus_plus.json").string() + kQuick);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("change nothing on one data-parallel rank"), std::string::npos)
      << r.output;
  expect_no_cpp_names(r.output);
}

}  // namespace

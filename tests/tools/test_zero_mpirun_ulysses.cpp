// `mpirun -np N zero train` with Ulysses sequence parallelism (the config's
// sequence_parallel_size) gives the one-rank run's per-step losses: sp = 2 on two ranks, and
// sp = 2 x dp = 2 with ZeRO-3 on four ranks, on tiny-llama at --seq-len 256 (losses read from
// --log-json; f32, relative 1e-5: the sums are associated differently, see
// tests/engine/mpi_test_ulysses.cpp). Settings that cannot split are clear errors.
#include <gtest/gtest.h>

#include <string>

#include "tools/shell_runner.h"

namespace {
using zero::testing::mpirun;
using zero::testing::zero_cli;
using Result = zero::testing::CliResult;

class ZeroMpirunUlysses : public zero::testing::ScratchDirTest {
 protected:
  ZeroMpirunUlysses() : ScratchDirTest("zero_ulysses_") {}

  // Runs `zero train` (under mpirun when ranks > 0) with `config`; returns its output.
  Result train(int ranks, const std::string& name, const std::string& config,
               const std::string& flags = "--model tiny-llama --seq-len 256 --steps 3") const {
    return train_logged(ranks > 0 ? mpirun(ranks) : zero_cli(), name, config, flags);
  }
};

TEST_F(ZeroMpirunUlysses, TwoRanksSplittingEachSequenceGiveTheOneRankLosses) {
  const Result one = train(0, "one", R"({"train_micro_batch_size_per_gpu": 2, "steps_per_print": 1})");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const Result two = train(2, "two", R"({"train_micro_batch_size_per_gpu": 2, "steps_per_print": 1,
                                         "sequence_parallel_size": 2})");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_NE(two.output.find("sequence parallel: sp=2 x dp=1"), std::string::npos) << two.output;
  expect_same_losses("two", "one", 3);
}

TEST_F(ZeroMpirunUlysses, SequenceTimesDataParallelWithZeroThreeGivesTheOneRankLosses) {
  // Two data-parallel replicas of one sequence each take samples 0 and 1 of a step, as one rank
  // accumulating two micro-batches does.
  const Result one = train(0, "one", R"({"train_micro_batch_size_per_gpu": 1,
                                         "gradient_accumulation_steps": 2, "steps_per_print": 1})");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const Result four = train(4, "four", R"({"train_micro_batch_size_per_gpu": 1, "steps_per_print": 1,
                                           "sequence_parallel_size": 2,
                                           "zero_optimization": {"stage": 3}})");
  ASSERT_EQ(four.exit_code, 0) << four.output;
  EXPECT_NE(four.output.find("sequence parallel: sp=2 x dp=2"), std::string::npos) << four.output;
  EXPECT_NE(four.output.find("ZeRO stage 3"), std::string::npos) << four.output;
  expect_same_losses("four", "one", 3);
}

TEST_F(ZeroMpirunUlysses, SettingsThatCannotSplitAreClearErrors) {
  // sp does not divide the ranks.
  const Result ranks = train(2, "ranks", R"({"train_micro_batch_size_per_gpu": 1, "sequence_parallel_size": 3})");
  EXPECT_NE(ranks.exit_code, 0) << ranks.output;
  EXPECT_NE(ranks.output.find("sequence_parallel_size 3 does not divide the number of ranks, 2"),
            std::string::npos)
      << ranks.output;
  // The sequence does not divide by sp.
  const Result seq = train(2, "seq", R"({"train_micro_batch_size_per_gpu": 1, "sequence_parallel_size": 2})",
                           "--model tiny-llama --seq-len 255 --steps 1");
  EXPECT_NE(seq.exit_code, 0) << seq.output;
  EXPECT_NE(seq.output.find("--seq-len 255 does not divide by sequence_parallel_size 2"), std::string::npos)
      << seq.output;
  // tiny-llama's 4 query heads do not split over 3 ranks.
  const Result heads = train(3, "heads", R"({"train_micro_batch_size_per_gpu": 1, "sequence_parallel_size": 3})",
                             "--model tiny-llama --seq-len 48 --steps 1");
  EXPECT_NE(heads.exit_code, 0) << heads.output;
  EXPECT_NE(heads.output.find("num_attention_heads 4"), std::string::npos) << heads.output;
  EXPECT_NE(heads.output.find("sequence_parallel_size 3"), std::string::npos) << heads.output;
}

}  // namespace

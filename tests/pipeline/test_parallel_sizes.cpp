// The parallel axis sizes from the config keys and the Megatron-DeepSpeed flags: flags override
// keys, "auto" and AutoTP-off mean 1, the data-parallel size is what is left, and sizes that do
// not fit the rank count stop with the numbers.
#include <gtest/gtest.h>

#include <string>

#include "config/deepspeed_config.h"
#include "core/error.h"
#include "pipeline/parallel_sizes.h"

namespace zero::pipeline {
namespace {

config::DeepSpeedConfig config_with(const std::string& body, int64_t world) {
  config::AutoValues autos;
  autos.world_size = world;
  return config::DeepSpeedConfig::from_text(
      R"({"train_micro_batch_size_per_gpu": 1)" + (body.empty() ? "" : ", " + body) + "}",
      "ds.json", autos);
}

void expect_shape(const comm::MeshShape& shape, int pp, int dp, int sp, int tp) {
  EXPECT_EQ(shape.pp, pp);
  EXPECT_EQ(shape.dp, dp);
  EXPECT_EQ(shape.sp, sp);
  EXPECT_EQ(shape.tp, tp);
}

TEST(ParallelSizes, DefaultsAreAllDataParallel) {
  expect_shape(resolve_parallel_sizes(8, config_with("", 8)), 1, 8, 1, 1);
  expect_shape(resolve_parallel_sizes(1, config_with("", 1)), 1, 1, 1, 1);
  expect_shape(resolve_parallel_sizes(4, config_with(R"("pipeline": {"stages": "auto"},
      "tensor_parallel": {"autotp_size": 0})", 4)), 1, 4, 1, 1);
}

TEST(ParallelSizes, ConfigKeysGiveTheSizesAndDataParallelIsTheRest) {
  expect_shape(resolve_parallel_sizes(8, config_with(R"("pipeline": {"stages": 2},
      "tensor_parallel": {"autotp_size": 2})", 8)), 2, 2, 1, 2);
  expect_shape(resolve_parallel_sizes(8, config_with(R"("pipeline": {"stages": 2},
      "sequence_parallel_size": 2)", 8)), 2, 2, 2, 1);
  expect_shape(resolve_parallel_sizes(2, config_with(R"("tensor_parallel": {"autotp_size": 1})", 2)),
               1, 2, 1, 1);
}

TEST(ParallelSizes, FlagsOverrideTheKeys) {
  ParallelSizeFlags flags;
  flags.pipeline_parallel_size = 4;
  flags.tensor_parallel_size = 2;
  expect_shape(resolve_parallel_sizes(16, config_with(R"("pipeline": {"stages": 2})", 16), flags),
               4, 2, 1, 2);
  flags = {};
  flags.pipeline_parallel_size = 1;  // the flag can switch a configured pipeline off
  expect_shape(resolve_parallel_sizes(4, config_with(R"("pipeline": {"stages": 4})", 4), flags),
               1, 4, 1, 1);
}

// The config is read for a rank count every size here divides (the reader stops a config whose
// sizes do not divide the ranks itself: tests/config/test_model_parallel_batch.cpp), so this
// reaches resolve_parallel_sizes' own check, which also sees the command-line sizes.
std::string error_of(int world, const std::string& body, const ParallelSizeFlags& flags = {}) {
  try {
    resolve_parallel_sizes(world, config_with(body, 720720), flags);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ParallelSizes, SizesThatDoNotFitStopWithTheNumbers) {
  // The issue's case: pp = 2 x tp = 2 on 3 ranks.
  const std::string m = error_of(3, R"("pipeline": {"stages": 2}, "tensor_parallel": {"autotp_size": 2})");
  EXPECT_NE(m.find("do not fit the 3 ranks: pipeline.stages 2 x tensor_parallel.autotp_size 2 x "
                   "sequence_parallel_size 1 = 4, which does not divide 3"),
            std::string::npos)
      << m;
  ParallelSizeFlags flags;
  flags.tensor_parallel_size = 3;
  const std::string from_flag = error_of(4, "", flags);
  EXPECT_NE(from_flag.find("pipeline.stages \"auto\" (1) x --tensor-parallel-size 3"),
            std::string::npos)
      << from_flag;
  flags.tensor_parallel_size = int64_t{1} << 62;
  flags.pipeline_parallel_size = 4;
  EXPECT_NE(error_of(4, "", flags).find("more than 2^63"), std::string::npos);
  flags = {};
  flags.pipeline_parallel_size = 0;
  EXPECT_NE(error_of(4, "", flags).find("--pipeline-parallel-size 0 must be 1 or more"),
            std::string::npos);
}

}  // namespace
}  // namespace zero::pipeline

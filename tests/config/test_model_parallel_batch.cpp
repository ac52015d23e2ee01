// DeepSpeed counts batch sizes over data-parallel ranks: world / (pipeline stages x tensor-
// parallel size x sequence_parallel_size). A real pipeline config states train_batch_size as
// micro x gas x dp, so the reader must divide the world by the model-parallel sizes from the
// config, or from --pipeline-parallel-size / --tensor-parallel-size when given.
#include <gtest/gtest.h>

#include <string>

#include "config/deepspeed_config.h"
#include "core/error.h"

namespace zero::config {
namespace model_parallel_batch_test {

DeepSpeedConfig read(const std::string& text, int64_t world, std::optional<int64_t> pp = {},
                     std::optional<int64_t> tp = {}) {
  AutoValues autos;
  autos.world_size = world;
  autos.pipeline_parallel_size = pp;
  autos.tensor_parallel_size = tp;
  return DeepSpeedConfig::from_json(nlohmann::json::parse(text), "ds.json", autos);
}

TEST(ModelParallelBatch, PipelineStagesInTheConfigDivideTheWorld) {
  // 8 ranks, 2 stages: dp = 4, so 2 x 4 x 4 = 32 is consistent (it is not at dp = 8).
  const DeepSpeedConfig c = read(R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 2,
                                     "gradient_accumulation_steps": 4, "pipeline": {"stages": 2}})",
                                 8);
  EXPECT_EQ(c.batch.train_batch_size, 32);
  // Inferred and "auto" sizes count dp too.
  const DeepSpeedConfig inferred = read(
      R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4,
          "pipeline": {"stages": 4}, "tensor_parallel": {"autotp_size": 2}})", 8);
  EXPECT_EQ(inferred.batch.train_batch_size, 2 * 4 * 1);
  const DeepSpeedConfig autos = read(R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": 1,
                                         "tensor_parallel": {"autotp_size": 2}})", 8);
  EXPECT_EQ(autos.batch.train_batch_size, 4);
}

TEST(ModelParallelBatch, CommandLineSizesOverrideTheConfig) {
  // "stages": "auto" with --pipeline-parallel-size 2 on 4 ranks: dp = 2.
  const DeepSpeedConfig c = read(R"({"train_micro_batch_size_per_gpu": 3, "pipeline": {"stages": "auto"}})",
                                 4, 2);
  EXPECT_EQ(c.batch.train_batch_size, 3 * 2);
  // The flag wins over the key (stages 4 in the file, 1 on the command line).
  const DeepSpeedConfig flag = read(R"({"train_micro_batch_size_per_gpu": 1, "pipeline": {"stages": 4}})",
                                    4, 1, 2);
  EXPECT_EQ(flag.batch.train_batch_size, 2);
}

TEST(ModelParallelBatch, SizesThatDoNotDivideTheWorldNameEverySize) {
  try {
    read(R"({"train_micro_batch_size_per_gpu": 1, "pipeline": {"stages": 2},
             "tensor_parallel": {"autotp_size": 2}})", 6);
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("pipeline.stages 2 x tensor_parallel.autotp_size 2 x "
                        "sequence_parallel_size 1 does not divide the number of ranks, 6"),
              std::string::npos)
        << what;
  }
}

}  // namespace model_parallel_batch_test
}  // namespace zero::config

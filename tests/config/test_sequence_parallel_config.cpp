// sequence_parallel_size (DeepSpeed's top-level key for Ulysses): accepted by the feature
// table, reaches EngineSettings, and batch sizes count data-parallel ranks = world / sp as
// DeepSpeed counts them ("auto" batch sizes too); an sp that does not divide the world is a
// ConfigError naming both numbers.
#include <gtest/gtest.h>

#include <string>

#include "config/deepspeed_config.h"
#include "config/feature_support.h"
#include "core/error.h"
#include "engine/engine_settings.h"

namespace zero::config {
namespace sequence_parallel_config_test {

DeepSpeedConfig read(const std::string& text, int64_t world) {
  AutoValues autos;
  autos.world_size = world;
  return DeepSpeedConfig::from_json(nlohmann::json::parse(text), "ds.json", autos);
}

TEST(SequenceParallelConfig, BatchSizesCountDataParallelRanks) {
  const DeepSpeedConfig c =
      read(R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 3,
               "sequence_parallel_size": 2})", 8);
  EXPECT_EQ(c.sequence_parallel_size, 2);
  EXPECT_EQ(c.batch.train_batch_size, 2 * 3 * 4);  // dp = 8 / 2
  EXPECT_NO_THROW(check_supported(c, "ds.json"));
  EXPECT_EQ(engine::settings_from_config(c, "ds.json").sequence_parallel_size, 2);
  // "auto" resolves with the data-parallel size as well.
  const DeepSpeedConfig autos = read(R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": 1,
                                         "sequence_parallel_size": 4})", 8);
  EXPECT_EQ(autos.batch.train_batch_size, 2);
}

TEST(SequenceParallelConfig, SizeThatDoesNotDivideTheWorldIsAClearError) {
  try {
    read(R"({"train_micro_batch_size_per_gpu": 1, "sequence_parallel_size": 3})", 4);
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("sequence_parallel_size 3 does not divide the number of ranks, 4"),
              std::string::npos)
        << what;
  }
}

}  // namespace sequence_parallel_config_test
}  // namespace zero::config

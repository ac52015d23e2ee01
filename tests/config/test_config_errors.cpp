// User mistakes in a DeepSpeed config: each is a ConfigError naming the file, the full key path,
// the value and the fix. Unknown keys suggest the closest known key at every nesting level.
#include <gtest/gtest.h>

#include <string>

#include "config/deepspeed_config.h"
#include "core/error.h"

namespace zero::config {
namespace config_errors_test {

std::string error_of(const std::string& text) {
  try {
    DeepSpeedConfig::from_text(text, "ds.json", {});
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

// Wraps `body` (extra top-level members) into a config with a valid batch.
std::string with_batch(const std::string& body) {
  return R"({"train_micro_batch_size_per_gpu": 1, )" + body + "}";
}

void expect_all(const std::string& message, std::initializer_list<const char*> parts) {
  for (const char* part : parts) {
    EXPECT_NE(message.find(part), std::string::npos)
        << "missing \"" << part << "\" in: " << message;
  }
}

TEST(ConfigErrors, NearMissKeysAreErrorsNamingTheKnownKey) {
  expect_all(error_of(R"({"train_micro_batch_size_per_gp": 4})"),
             {"ds.json:1: key 'train_micro_batch_size_per_gp' looks like a misspelling",
              "misspelling of 'train_micro_batch_size_per_gpu'"});
  expect_all(error_of(with_batch(R"("zero_optimization": {"stgae": 2})")),
             {"key 'zero_optimization.stgae'", "misspelling of 'zero_optimization.stage'"});
  expect_all(error_of(with_batch(R"("zero_optimization": {"offload_param": {"devcie": "cpu"}})")),
             {"key 'zero_optimization.offload_param.devcie'",
              "'zero_optimization.offload_param.device'"});
  expect_all(
      error_of(with_batch(R"("checkpoint": {"parallel_write": {"pipeline_stag": true}})")),
      {"'checkpoint.parallel_write.pipeline_stag'", "'checkpoint.parallel_write.pipeline_stage'"});
  expect_all(error_of(with_batch(R"("fp16": {"enable": true})")), {"misspelling of 'fp16.enabled'"});
  expect_all(error_of(with_batch(R"("optimizer": {"type": "Adam", "param": {}})")),
             {"misspelling of 'optimizer.params'"});
}

TEST(ConfigErrors, WrongTypesNameKeyExpectedTypeAndValue) {
  expect_all(
      error_of(with_batch(R"("zero_optimization": {"stage": "two"})")),
      {"ds.json: key 'zero_optimization.stage' must be an integer", "got \"two\"", "default (0)"});
  expect_all(error_of(with_batch(R"("fp16": {"enabled": "yes"})")),
             {"key 'fp16.enabled' must be true or false", "got \"yes\""});
  expect_all(error_of(with_batch(R"("gradient_clipping": [1])")),
             {"key 'gradient_clipping' must be a number", "got [1]"});
  expect_all(error_of(with_batch(R"("zero_optimization": {"reduce_bucket_size": 2.5e-1})")),
             {"'zero_optimization.reduce_bucket_size' must be an integer", "got 0.25"});
  expect_all(error_of(with_batch(R"("wandb": {"team": 3})")),
             {"'wandb.team' must be a string or null", "got 3"});
  expect_all(error_of(with_batch(R"("comms_logger": {"prof_ops": ["a", 1]})")),
             {"'comms_logger.prof_ops' must be a list of strings"});
  expect_all(error_of(with_batch(R"("zero_optimization": 3)")),
             {"'zero_optimization' must be an object"});
  expect_all(error_of(with_batch(R"("optimizer": {"type": "Adam", "params": [1]})")),
             {"'optimizer.params' must be an object"});
  expect_all(error_of(R"({"train_batch_size": true})"),
             {"'train_batch_size' must be an integer", "got true"});
  expect_all(error_of("[1, 2]"), {"ds.json: a DeepSpeed config must be a JSON object"});
  expect_all(error_of(with_batch(R"("zero_optimization": {"offload_param": {"device": "gpu"}})")),
             {"'zero_optimization.offload_param.device' = \"gpu\" is not a valid choice",
              "\"none\", \"cpu\", \"nvme\""});
  expect_all(error_of(with_batch(R"("checkpoint": {"tag_validation": "Strict"})")),
             {"'checkpoint.tag_validation'", "\"Ignore\", \"Warn\", \"Fail\""});
  expect_all(error_of(with_batch(R"("communication_data_type": "fp8")")),
             {"'communication_data_type' = \"fp8\"", "\"fp32\", \"fp16\", \"bf16\""});
}

TEST(ConfigErrors, OutOfRangeValues) {
  expect_all(error_of(with_batch(R"("zero_optimization": {"stage": 4})")),
             {"key 'zero_optimization.stage' = 4 is out of range", "must be between 0 and 3"});
  expect_all(error_of(with_batch(R"("zero_optimization": {"stage3_prefetch_bucket_size": -1})")),
             {"'zero_optimization.stage3_prefetch_bucket_size' = -1", "must be >= 0"});
  expect_all(error_of(with_batch(R"("gradient_clipping": -0.5)")), {"must be >= 0"});
  expect_all(error_of(with_batch(R"("steps_per_print": 0)")),
             {"'steps_per_print' = 0", "must be > 0"});
  expect_all(error_of(with_batch(R"("zero_optimization": {"offload_optimizer": {"ratio": 1.5}})")),
             {"'zero_optimization.offload_optimizer.ratio' = 1.5", "between 0 and 1"});
  expect_all(error_of(with_batch(R"("fp16": {"loss_scale": -1})")), {"'fp16.loss_scale' = -1"});
  // Dynamic loss scaling needs a window, a hysteresis and a minimum scale that are positive.
  expect_all(error_of(with_batch(R"("fp16": {"loss_scale_window": 0})")),
             {"'fp16.loss_scale_window' = 0", "must be >= 1"});
  expect_all(error_of(with_batch(R"("fp16": {"loss_scale_window": -100})")),
             {"'fp16.loss_scale_window' = -100", "must be >= 1"});
  expect_all(error_of(with_batch(R"("fp16": {"min_loss_scale": 0})")),
             {"'fp16.min_loss_scale' = 0", "must be > 0"});
  expect_all(error_of(with_batch(R"("fp16": {"min_loss_scale": -1})")),
             {"'fp16.min_loss_scale' = -1", "must be > 0"});
  expect_all(error_of(with_batch(R"("fp16": {"hysteresis": 0})")),
             {"'fp16.hysteresis' = 0", "must be >= 1"});
  expect_all(error_of(with_batch(R"("aio": {"block_size": 0})")), {"'aio.block_size' = 0"});
  expect_all(error_of(with_batch(R"("zero_optimization": {"reduce_bucket_size": 1e19})")),
             {"'zero_optimization.reduce_bucket_size' must be an integer"});
}

TEST(ConfigErrors, CrossKeyRules) {
  expect_all(error_of(with_batch(R"("fp16": {"enabled": true}, "bf16": {"enabled": true})")),
             {"'fp16.enabled' and 'bf16.enabled' are both true"});
  expect_all(error_of(with_batch(R"("bf16": {"bf16_master_weights_and_grads": true})")),
             {"'bf16.bf16_master_weights_and_grads' = true needs ZeRO"});
  expect_all(error_of(with_batch(R"("zero_optimization": {"stage": 1},
                                    "bf16": {"bf16_optimizer_states": true})")),
             {"'bf16.bf16_optimizer_states' = true needs 'bf16.bf16_master_weights_and_grads'"});
  expect_all(error_of(with_batch(R"("zero_optimization": {"stage": 2},
                                    "bf16": {"bf16_master_weights_and_grads": true})")),
             {"'bf16.bf16_master_weights_and_grads' = true needs 'bf16.enabled' = true"});
  expect_all(error_of(with_batch(R"("zero_optimization": {"stage": 2},
                                    "bf16": {"enabled": true, "stochastic_rounding": true})")),
             {"'bf16.stochastic_rounding' = true needs 'bf16.bf16_master_weights_and_grads'"});
  expect_all(error_of(with_batch(R"("fp16": {"fp16_master_weights_and_grads": true})")),
             {"'fp16.fp16_master_weights_and_grads' = true needs ZeRO"});
  expect_all(
      error_of(with_batch(R"("zero_optimization": {"stage": 2,
                                    "offload_optimizer": {"device": "cpu", "ratio": 0.5}})")),
      {"'zero_optimization.offload_optimizer.ratio'", "only with zero_optimization.stage 3"});
  expect_all(error_of(with_batch(R"("zero_optimization": {"offload_param": {"device": "nvme"}})")),
             {"'zero_optimization.offload_param.nvme_path' is not set"});
  expect_all(error_of(with_batch(R"("optimizer": {"params": {"lr": 1}})")),
             {"'optimizer.type' is missing"});
  expect_all(error_of(with_batch(R"("zero_optimization": {"stage3_max_live_parameters": 1,
                                    "max_live_parameters": 2})")),
             {"'zero_optimization.stage3_max_live_parameters' and "
              "'zero_optimization.max_live_parameters' are two spellings"});
  expect_all(error_of(with_batch(R"("bf16": {}, "bfloat16": {})")), {"two spellings"});
}

TEST(ConfigErrors, MissingFileIsAFileError) {
  EXPECT_THROW(DeepSpeedConfig::from_file("/nonexistent/ds_config.json"), FileError);
}

TEST(ConfigErrors, ParseErrorsCarryTheFileName) {
  expect_all(error_of("{\"train_batch_size\": 1,,}"), {"ds.json:1:24:"});
}

}  // namespace config_errors_test
}  // namespace zero::config

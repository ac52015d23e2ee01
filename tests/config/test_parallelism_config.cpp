// The pipeline and tensor_parallel sections: DeepSpeed's keys and defaults, "stages": "auto",
// validation (typos, ranges, the partition method's form), round trip, and support gating (read
// but still rejected when they ask for tensor parallelism; pipeline parallelism runs).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/deepspeed_config.h"
#include "config/feature_support.h"
#include "core/error.h"

namespace zero::config {
namespace parallelism_config_test {

// Read for 16 ranks: the model-parallel sizes these tests write (2, 4) must divide the world
// (DeepSpeedConfig checks pipeline x tensor x sequence against it).
DeepSpeedConfig parse(const std::string& body) {
  AutoValues autos;
  autos.world_size = 16;
  return DeepSpeedConfig::from_text(R"({"train_micro_batch_size_per_gpu": 1, )" + body + "}",
                                    "ds.json", autos);
}

std::string error_of(const std::string& body) {
  try {
    parse(body);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

void expect_has(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "missing \"" << part << "\" in: " << text;
}

TEST(PipelineConfig, DefaultsAreDeepSpeeds) {
  const DeepSpeedConfig c = DeepSpeedConfig::defaults();
  EXPECT_FALSE(c.pipeline.stages.has_value());  // "auto"
  EXPECT_EQ(c.pipeline.partition, "parameters");
  EXPECT_FALSE(c.pipeline.seed_layers);
  EXPECT_EQ(c.pipeline.activation_checkpoint_interval, 0);
  EXPECT_TRUE(c.pipeline.pipe_partitioned);
  EXPECT_TRUE(c.pipeline.grad_partitioned);
  EXPECT_FALSE(c.pipeline.use_reentrant.has_value());
  EXPECT_FALSE(c.pipeline.settings_in_use().has_value());
}

TEST(PipelineConfig, ReadsEveryKey) {
  const DeepSpeedConfig c = parse(R"("pipeline": {"stages": 4, "partition": "type:transformer",
      "seed_layers": true, "activation_checkpoint_interval": 2, "pipe_partitioned": false,
      "grad_partitioned": false, "use_reentrant": false})");
  EXPECT_EQ(c.pipeline.stages, 4);
  EXPECT_EQ(c.pipeline.partition, "type:transformer");
  EXPECT_TRUE(c.pipeline.seed_layers);
  EXPECT_EQ(c.pipeline.activation_checkpoint_interval, 2);
  EXPECT_FALSE(c.pipeline.pipe_partitioned);
  EXPECT_FALSE(c.pipeline.grad_partitioned);
  EXPECT_EQ(c.pipeline.use_reentrant, false);
}

TEST(PipelineConfig, AutoStagesAreUnsetAndNoted) {
  const DeepSpeedConfig c = parse(R"("pipeline": {"stages": "auto", "partition": "uniform"})");
  EXPECT_FALSE(c.pipeline.stages.has_value());
  EXPECT_EQ(c.pipeline.partition, "uniform");
  const std::vector<ConfigNote> autos = c.notes.of_kind(ConfigNote::Kind::kAuto);
  ASSERT_EQ(autos.size(), 1u);
  EXPECT_EQ(autos[0].key, "pipeline.stages");
}

TEST(PipelineConfig, BadValuesAreConfigErrors) {
  expect_has(error_of(R"("pipeline": {"stages": 0})"), "'pipeline.stages'");
  expect_has(error_of(R"("pipeline": {"stages": "two"})"), "'pipeline.stages'");
  expect_has(error_of(R"("pipeline": {"activation_checkpoint_interval": -1})"),
             "'pipeline.activation_checkpoint_interval'");
  const std::string typo = error_of(R"("pipeline": {"stage": 2})");
  expect_has(typo, "'pipeline.stage' looks like a misspelling of 'pipeline.stages'");
  const std::string method = error_of(R"("pipeline": {"partition": "paramters"})");
  expect_has(method, "key 'pipeline.partition' = \"paramters\" is not a partition method");
  expect_has(method, "did you mean \"parameters\"");
  expect_has(error_of(R"("pipeline": {"partition": "type:"})"), "the type regex is empty");
  expect_has(error_of(R"("pipeline": {"partition": "type:[a-"})"), "the regex does not compile");
  expect_has(error_of(R"("pipeline": {"partition": "type:)" + std::string(300, '(') + "\"}"),
             "more than the 200 allowed");
  expect_has(error_of(R"("pipeline": {"partition": "profile"})"), "does not implement");
  // Accepted forms, case-insensitive as in DeepSpeed; "best" is DeepSpeed's parser default.
  for (const char* ok : {"parameters", "Uniform", "best", "type:TransformerBlock", "type:a:b"}) {
    EXPECT_NO_THROW(parse(std::string(R"("pipeline": {"partition": ")") + ok + "\"}")) << ok;
  }
}

TEST(TensorParallelConfig, DefaultsAreDeepSpeeds) {
  const TensorParallelConfig& t = DeepSpeedConfig::defaults().tensor_parallel;
  EXPECT_EQ(t.autotp_size, 0);
  EXPECT_FALSE(t.tp_overlap_comm);
  EXPECT_EQ(t.tensor_parallel.tp_size, 1);
  EXPECT_EQ(t.tensor_parallel.tp_grain_size, 1);
  EXPECT_FALSE(t.partition_config.has_value());
  EXPECT_FALSE(t.preset_model.has_value());
  EXPECT_FALSE(t.keep_module_on_host);
  EXPECT_FALSE(t.replace_with_kernel_inject);
  EXPECT_FALSE(t.settings_in_use().has_value());
}

TEST(TensorParallelConfig, ReadsEveryKeyAndAlias) {
  const DeepSpeedConfig c = parse(R"("tensor_parallel": {"autotp_size": 4, "tp_overlap_comm": true,
      "tp": {"tp_size": 4, "tp_grain_size": 64}, "preset_model": "llama",
      "partition_config": {"use_default_specs": false, "layer_specs": []},
      "keep_module_on_host": true, "kernel_inject": true})");
  const TensorParallelConfig& t = c.tensor_parallel;
  EXPECT_EQ(t.autotp_size, 4);
  EXPECT_TRUE(t.tp_overlap_comm);
  EXPECT_EQ(t.tensor_parallel.tp_size, 4);
  EXPECT_EQ(t.tensor_parallel.tp_grain_size, 64);
  EXPECT_EQ(t.preset_model, "llama");
  ASSERT_TRUE(t.partition_config.has_value());
  EXPECT_EQ((*t.partition_config)["use_default_specs"], false);
  EXPECT_TRUE(t.keep_module_on_host);
  EXPECT_TRUE(t.replace_with_kernel_inject);
}

TEST(TensorParallelConfig, BadValuesAreConfigErrors) {
  expect_has(error_of(R"("tensor_parallel": {"autotp_size": -1})"),
             "'tensor_parallel.autotp_size'");
  expect_has(error_of(R"("tensor_parallel": {"autotp_sise": 2})"),
             "looks like a misspelling of 'tensor_parallel.autotp_size'");
  expect_has(error_of(R"("tensor_parallel": {"tp": {"tp_sze": 2}})"),
             "looks like a misspelling of 'tensor_parallel.tp.tp_size'");
  expect_has(error_of(R"("tensor_parallel": {"tp": {"tp_size": 0}})"),
             "'tensor_parallel.tp.tp_size'");
  expect_has(error_of(R"("tensor_parallel": {"tp": {}, "tensor_parallel": {}})"),
             "two spellings of the same setting");
  expect_has(error_of(R"("tensor_parallel": {"partition_config": 3})"),
             "'tensor_parallel.partition_config' = 3 must be an object");
  expect_has(error_of(R"("tensor_parallel": {"tp_overlap_comm": "yes"})"),
             "'tensor_parallel.tp_overlap_comm'");
}

TEST(ParallelismConfig, RoundTrips) {
  const DeepSpeedConfig c = parse(R"("pipeline": {"stages": "auto", "partition": "uniform",
      "use_reentrant": true}, "tensor_parallel": {"autotp_size": 2, "tp": {"tp_grain_size": 8}})");
  const nlohmann::json j = c.to_json();
  EXPECT_TRUE(j["pipeline"]["stages"].is_null());
  EXPECT_EQ(j["tensor_parallel"]["tensor_parallel"]["tp_grain_size"], 8);
  EXPECT_EQ(j.dump().find("\"auto\""), std::string::npos);
  AutoValues autos;
  autos.world_size = 16;  // as parse() reads
  EXPECT_EQ(DeepSpeedConfig::from_json(j, "checkpoint", autos), c);
  const DeepSpeedConfig staged = parse(R"("pipeline": {"stages": 2})");
  EXPECT_EQ(DeepSpeedConfig::from_json(staged.to_json(), "checkpoint", autos), staged);
}

std::vector<std::string> unsupported_keys(const std::string& body) {
  std::vector<std::string> keys;
  for (const UnsupportedUse& use : find_unsupported(parse(body), "ds.json")) keys.push_back(use.key);
  return keys;
}

TEST(ParallelismConfig, StillRejectedWhenInUse) {
  using Keys = std::vector<std::string>;
  // Absent, default, one stage, AutoTP off or of size 1: nothing to run.
  for (const char* off : {R"("pipeline": {})", R"("pipeline": {"stages": 1})",
                          R"("pipeline": {"stages": "auto", "partition": "parameters"})",
                          R"("tensor_parallel": {"autotp_size": 0})",
                          R"("tensor_parallel": {"autotp_size": 1, "tp": {"tp_size": 1}})"}) {
    EXPECT_EQ(unsupported_keys(off), Keys{}) << off;
  }
  // Pipeline parallelism runs (engine/pipeline_engine.h): the section is no longer rejected here.
  EXPECT_EQ(unsupported_keys(R"("pipeline": {"stages": 2})"), Keys{});
  EXPECT_EQ(unsupported_keys(R"("pipeline": {"stages": 1, "partition": "uniform"})"), Keys{});
  // Tensor parallelism runs (model/tensor_parallel.h) at the size autotp_size gives; the
  // section's other settings (the inference-side tp.tp_size among them) are still rejected.
  EXPECT_EQ(unsupported_keys(R"("tensor_parallel": {"autotp_size": 2})"), Keys{});
  EXPECT_EQ(unsupported_keys(R"("tensor_parallel": {"autotp_size": 2, "tp": {"tp_size": 2}})"),
            Keys{});
  EXPECT_EQ(unsupported_keys(R"("tensor_parallel": {"tp": {"tp_size": 2}})"),
            Keys{"tensor_parallel"});
  EXPECT_EQ(unsupported_keys(R"("tensor_parallel": {"tp_overlap_comm": true})"),
            Keys{"tensor_parallel"});
}

}  // namespace parallelism_config_test
}  // namespace zero::config

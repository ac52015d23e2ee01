// Support gating: runnable configs pass; each enabled-but-unbuilt feature is an UnsupportedError
// naming its key, value and fix; switched-off mentions of unbuilt features are fine.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/deepspeed_config.h"
#include "config/feature_support.h"
#include "core/error.h"

namespace zero::config {
namespace feature_support_test {

// `ranks`: the world the config is read for (model-parallel sizes must divide it).
DeepSpeedConfig parse(const std::string& body, int64_t ranks = 4) {
  AutoValues autos;
  autos.world_size = ranks;
  return DeepSpeedConfig::from_text(
      R"({"train_micro_batch_size_per_gpu": 1)" + (body.empty() ? "" : ", " + body) + "}",
      "ds.json", autos);
}

std::vector<std::string> keys_of(const std::string& body) {
  std::vector<std::string> keys;
  for (const UnsupportedUse& use : find_unsupported(parse(body), "ds.json"))
    keys.push_back(use.key);
  return keys;
}

TEST(FeatureSupport, BuiltFeaturesPass) {
  EXPECT_NO_THROW(check_supported(parse(""), "ds.json"));
  for (const char* optimizer : {"Adam", "AdamW", "adamw", "Lamb", "Lion", "Adagrad"}) {
    EXPECT_NO_THROW(check_supported(
        parse(std::string(R"("optimizer": {"type": ")") + optimizer + "\"}"), "ds.json"))
        << optimizer;
  }
  for (const char* schedule :
       {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "OneCycle", "LRRangeTest"}) {
    EXPECT_NO_THROW(check_supported(
        parse(std::string(R"("scheduler": {"type": ")") + schedule + "\"}"), "ds.json"))
        << schedule;
  }
  // The file monitors (engine/monitor.h).
  EXPECT_NO_THROW(check_supported(parse(R"("csv_monitor": {"enabled": true},
      "tensorboard": {"enabled": true, "output_path": "logs", "job_name": "run1"})"), "ds.json"));
  // The flops profiler (engine/flops_profiler.h), with every DeepSpeed key.
  EXPECT_NO_THROW(check_supported(parse(R"("flops_profiler": {"enabled": true, "profile_step": 2,
      "module_depth": -1, "top_modules": 3, "detailed": true, "output_file": "flops.txt",
      "recompute_fwd_factor": 0.0})"), "ds.json"));
  // 16-bit training in all its built forms.
  EXPECT_NO_THROW(check_supported(parse(R"("fp16": {"enabled": true, "loss_scale": 0,
      "hysteresis": 2, "min_loss_scale": 0.0001})"), "ds.json"));
  EXPECT_NO_THROW(check_supported(parse(R"("zero_optimization": {"stage": 3},
      "bf16": {"enabled": true, "bf16_master_weights_and_grads": true,
               "bf16_optimizer_states": true, "stochastic_rounding": true})"), "ds.json"));
  // Mentioned but switched off, or only read by unbuilt features.
  EXPECT_NO_THROW(check_supported(parse(R"(
      "fp16": {"enabled": false, "loss_scale": 0}, "bf16": {"enabled": false},
      "zero_optimization": {"stage": 0, "reduce_bucket_size": 5e8,
                            "offload_param": {"device": "none"}},
      "activation_checkpointing": {"partition_activations": false, "number_checkpoints": null},
      "aio": {"block_size": 262144, "queue_depth": 32},
      "communication_data_type": "fp32", "data_types": {"grad_accum_dtype": "fp32"},
      "tensorboard": {"enabled": false}, "wandb": {"enabled": false},
      "checkpoint": {"tag_validation": "Fail"}, "gradient_clipping": 0.3,
      "steps_per_print": 1, "wall_clock_breakdown": true, "sequence_parallel_size": 1,
      "amp": {"enabled": false, "opt_level": "O1"}, "pipeline": {}, "sparse_gradients": false)"),
                                  "ds.json"));
}

TEST(FeatureSupport, MessageNamesKeyValueWhatAndFix) {
  try {
    check_supported(parse(R"("fp16": {"enabled": true, "auto_cast": true})"), "ds.json");
    FAIL() << "fp16 auto_cast accepted";
  } catch (const UnsupportedError& e) {
    EXPECT_EQ(std::string(e.what()),
              "ds.json: key 'fp16.auto_cast' = true: fp16 autocasting of inputs is not supported yet "
              "by zero.cpp (it lands with the mixed-precision issue); remove the key or set it to false");
  }
}

// Expert parallelism is not built; the message says what trains mixture-of-experts models now.
TEST(FeatureSupport, ExpertParallelNamesTheWayMixtralTrains) {
  try {
    check_supported(parse(R"("expert_parallel": {"enabled": true, "autoep_size": 2})"),
                    "ds.json");
    FAIL() << "expert_parallel accepted";
  } catch (const UnsupportedError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'expert_parallel'"), std::string::npos) << message;
    EXPECT_NE(message.find("ZeRO stage 3 partitions the experts"), std::string::npos) << message;
  }
  EXPECT_NO_THROW(check_supported(parse(R"("expert_parallel": {"enabled": false})"), "ds.json"));
}

TEST(FeatureSupport, FirstFindingThrownAndTheOthersListed) {
  try {
    check_supported(parse(R"("fp16": {"enabled": true, "auto_cast": true}, "zero_optimization": {"stage": 2, "round_robin_gradients": true})"),
                    "ds.json");
    FAIL() << "fp16 auto_cast + round-robin gradients accepted";
  } catch (const UnsupportedError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("ds.json: key 'fp16.auto_cast' = true", 0), 0u) << m;
    EXPECT_NE(m.find("also not supported yet: 'zero_optimization.round_robin_gradients'"),
              std::string::npos)
        << m;
  }
}

TEST(FeatureSupport, EachUnbuiltFeatureIsNamed) {
  struct Case {
    const char* body;
    const char* key;
    const char* also = nullptr;  // a second finding the same setting implies
  };
  const Case cases[] = {
      {R"("optimizer": {"type": "ZeroOneAdam"})", "optimizer.type"},
      {R"("optimizer": {"type": "SGD"})", "optimizer.type"},
      // Muon trains at every stage; its step does not run on the offloaded CPU Adam.
      {R"("optimizer": {"type": "Muon"}, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}})",
       "zero_optimization.offload_optimizer.device"},
      {R"("scheduler": {"type": "CosineAnnealingLR"})", "scheduler.type"},
      {R"("bf16": {"enabled": true, "immediate_grad_update": true}, "zero_optimization": {"stage": 2})",
       "bf16.immediate_grad_update"},
      {R"("fp16": {"enabled": true, "auto_cast": true})", "fp16.auto_cast"},
      {R"("zero_optimization": {"stage": 1, "allgather_partitions": false})",
       "zero_optimization.allgather_partitions"},
      {R"("zero_optimization": {"stage": 2, "contiguous_gradients": false})",
       "zero_optimization.contiguous_gradients"},
      {R"("zero_optimization": {"stage": 2, "round_robin_gradients": true})",
       "zero_optimization.round_robin_gradients"},
      // Optimizer offload to CPU memory or NVMe runs, partly (ratio) to CPU memory; not to NVMe.
      {R"("zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "super_offload": true}})",
       "zero_optimization.offload_optimizer.super_offload"},
      {R"("zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme", "nvme_path": "/x", "ratio": 0.5}})",
       "zero_optimization.offload_optimizer.ratio"},
      {R"("zero_optimization": {"zero_quantized_nontrainable_weights": true})",
       "zero_optimization.zero_quantized_nontrainable_weights"},
      {R"("zero_optimization": {"mics_shard_size": 8})", "zero_optimization.mics_shard_size"},
      {R"("comms_logger": {"enabled": true, "debug": true})", "comms_logger.debug"},
      {R"("wandb": {"enabled": true})", "wandb.enabled"},
      {R"("checkpoint": {"load_universal": true})", "checkpoint.load_universal"},
      // The size runs (tensor parallelism); the other AutoTP settings are not acted on.
      {R"("tensor_parallel": {"autotp_size": 2, "tp_overlap_comm": true})", "tensor_parallel"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> want = {c.key};
    if (c.also != nullptr) want.emplace_back(c.also);
    EXPECT_EQ(keys_of(c.body), want) << c.body;
    try {
      check_supported(parse(c.body), "ds.json");
      ADD_FAILURE() << c.body << " accepted";
    } catch (const UnsupportedError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("ds.json: key '") + c.key + "' = "),
                std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("is not supported yet by zero.cpp"), std::string::npos)
          << e.what();
    }
  }
}

TEST(FeatureSupport, TensorParallelSizeRuns) {
  EXPECT_NO_THROW(check_supported(parse(R"("tensor_parallel": {"autotp_size": 2})"), "ds.json"));
  EXPECT_NO_THROW(check_supported(
      parse(R"("tensor_parallel": {"autotp_size": 4, "tp": {"tp_size": 4}})"), "ds.json"));
  EXPECT_THROW(check_supported(
                   parse(R"("tensor_parallel": {"autotp_size": 4, "tp": {"tp_grain_size": 64}})"),
                   "ds.json"),
               UnsupportedError);
}

TEST(FeatureSupport, UnknownOptimizerSuggestsABuiltOne) {
  try {
    check_supported(parse(R"("optimizer": {"type": "Adma"})"), "ds.json");
    FAIL();
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("closest: Adam"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("use one of Adam, AdamW, Lamb, Lion, Adagrad"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace feature_support_test
}  // namespace zero::config

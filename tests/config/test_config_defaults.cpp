// A minimal config gets DeepSpeed 0.19's defaults in every section; written values, aliases and
// legacy spellings land in the right fields.
#include <gtest/gtest.h>

#include <limits>

#include "config/deepspeed_config.h"
#include "core/error.h"

namespace zero::config {
namespace config_defaults_test {

DeepSpeedConfig parse(const std::string& text, const AutoValues& autos = {}) {
  return DeepSpeedConfig::from_text(text, "cfg.json", autos);
}

TEST(ConfigDefaults, TopLevelAndPrecision) {
  const DeepSpeedConfig c = parse(R"({"train_micro_batch_size_per_gpu": 2})");
  EXPECT_EQ(c.batch.train_batch_size, 2);
  EXPECT_EQ(c.batch.gradient_accumulation_steps, 1);
  EXPECT_FALSE(c.optimizer.has_value());
  EXPECT_FALSE(c.scheduler.has_value());
  EXPECT_EQ(c.gradient_clipping, 1.0);
  EXPECT_EQ(c.steps_per_print, 10);
  EXPECT_FALSE(c.wall_clock_breakdown);
  EXPECT_FALSE(c.prescale_gradients);
  EXPECT_EQ(c.gradient_predivide_factor, 1.0);
  EXPECT_FALSE(c.dump_state);
  EXPECT_FALSE(c.zero_allow_untested_optimizer);
  EXPECT_TRUE(c.zero_force_ds_cpu_optimizer);
  EXPECT_EQ(c.sequence_parallel_size, 1);
  EXPECT_FALSE(c.communication_data_type.has_value());
  EXPECT_FALSE(c.data_types.grad_accum_dtype.has_value());
  EXPECT_FALSE(c.fp16.enabled);
  EXPECT_FALSE(c.fp16.auto_cast);
  EXPECT_EQ(c.fp16.loss_scale, 0.0);
  EXPECT_EQ(c.fp16.initial_scale_power, 16);
  EXPECT_EQ(c.fp16.loss_scale_window, 1000);
  EXPECT_EQ(c.fp16.hysteresis, 2);
  EXPECT_FALSE(c.fp16.consecutive_hysteresis);
  EXPECT_EQ(c.fp16.min_loss_scale, 1);
  EXPECT_FALSE(c.fp16.fp16_master_weights_and_grads);
  EXPECT_FALSE(c.bf16.enabled);
  EXPECT_FALSE(c.bf16.immediate_grad_update);
  EXPECT_FALSE(c.bf16.check_grad_overflow);
  EXPECT_FALSE(c.bf16.bf16_master_weights_and_grads);
  EXPECT_FALSE(c.bf16.bf16_optimizer_states);
}

TEST(ConfigDefaults, ZeroOptimization) {
  const ZeroConfig z = parse(R"({"train_batch_size": 1})").zero_optimization;
  EXPECT_EQ(z.stage, 0);
  EXPECT_TRUE(z.contiguous_gradients);
  EXPECT_TRUE(z.reduce_scatter);
  EXPECT_EQ(z.reduce_bucket_size, 500'000'000);
  EXPECT_TRUE(z.allgather_partitions);
  EXPECT_EQ(z.allgather_bucket_size, 500'000'000);
  EXPECT_FALSE(z.overlap_comm_enabled());
  EXPECT_TRUE(z.load_from_fp32_weights);
  EXPECT_FALSE(z.elastic_checkpoint);
  EXPECT_EQ(z.sub_group_size, 1'000'000'000);
  EXPECT_EQ(z.stage3_prefetch_bucket_size, 50'000'000);
  EXPECT_EQ(z.stage3_param_persistence_threshold, 100'000);
  EXPECT_EQ(z.stage3_model_persistence_threshold, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(z.stage3_max_live_parameters, 1'000'000'000);
  EXPECT_EQ(z.stage3_max_reuse_distance, 1'000'000'000);
  EXPECT_FALSE(z.stage3_gather_16bit_weights_on_model_save);
  EXPECT_TRUE(z.ignore_unused_parameters);
  EXPECT_FALSE(z.round_robin_gradients);
  EXPECT_EQ(z.zero_hpz_partition_size, 1);
  EXPECT_FALSE(z.zero_quantized_weights);
  EXPECT_FALSE(z.zero_quantized_gradients);
  EXPECT_EQ(z.mics_shard_size, -1);
  EXPECT_TRUE(z.memory_efficient_linear);
  EXPECT_EQ(z.offload_param.device, OffloadDevice::kNone);
  EXPECT_EQ(z.offload_param.buffer_count, 5);
  EXPECT_EQ(z.offload_param.buffer_size, 100'000'000);
  EXPECT_EQ(z.offload_param.max_in_cpu, 1'000'000'000);
  EXPECT_FALSE(z.offload_param.pin_memory);
  EXPECT_EQ(z.offload_optimizer.device, OffloadDevice::kNone);
  EXPECT_EQ(z.offload_optimizer.buffer_count, 4);
  EXPECT_EQ(z.offload_optimizer.ratio, 1.0);
  EXPECT_FALSE(z.offload_optimizer.fast_init);
}

TEST(ConfigDefaults, OtherSections) {
  const DeepSpeedConfig c = parse(R"({"train_batch_size": 1})");
  EXPECT_FALSE(c.activation_checkpointing.partition_activations);
  EXPECT_FALSE(c.activation_checkpointing.number_checkpoints.has_value());
  EXPECT_EQ(c.aio.block_size, 1'048'576);
  EXPECT_EQ(c.aio.queue_depth, 8);
  EXPECT_EQ(c.aio.intra_op_parallelism, 1);
  EXPECT_FALSE(c.aio.single_submit);
  EXPECT_TRUE(c.aio.overlap_events);
  EXPECT_FALSE(c.aio.use_gds);
  EXPECT_FALSE(c.comms_logger.enabled);
  EXPECT_TRUE(c.comms_logger.prof_all);
  EXPECT_TRUE(c.comms_logger.prof_ops.empty());
  EXPECT_EQ(c.tensorboard.job_name, "DeepSpeedJobName");
  EXPECT_EQ(c.csv_monitor.output_path, "");
  EXPECT_EQ(c.wandb.project, "deepspeed");
  EXPECT_FALSE(c.wandb.team.has_value());
  EXPECT_EQ(c.flops_profiler.profile_step, 1);
  EXPECT_EQ(c.flops_profiler.module_depth, -1);
  EXPECT_EQ(c.flops_profiler.top_modules, 1);
  EXPECT_TRUE(c.flops_profiler.detailed);
  EXPECT_FALSE(c.flops_profiler.output_file.has_value());
  EXPECT_EQ(c.checkpoint.tag_validation, TagValidation::kWarn);
  EXPECT_FALSE(c.checkpoint.load_universal);
  EXPECT_FALSE(c.checkpoint.parallel_write.pipeline_stage);
}

TEST(ConfigDefaults, DefaultsFactoryMatchesParsedDefaults) {
  const DeepSpeedConfig d = DeepSpeedConfig::defaults(4, 2, 3);
  EXPECT_EQ(d.batch.train_batch_size, 24);
  AutoValues world3;
  world3.world_size = 3;
  EXPECT_EQ(d, parse(R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2})",
                     world3));
}

TEST(ConfigValues, WrittenValuesAreRead) {
  const DeepSpeedConfig c = parse(R"({
    "train_micro_batch_size_per_gpu": 4,
    "gradient_clipping": 0.5, "steps_per_print": 7, "wall_clock_breakdown": true,
    "communication_data_type": "FP32",
    "data_types": {"grad_accum_dtype": "float32"},
    "fp16": {"loss_scale": 128, "initial_scale_power": 12},
    "zero_optimization": {"stage": 3, "reduce_bucket_size": 5e8, "overlap_comm": false,
                          "offload_optimizer": {"device": "cpu", "ratio": 0.3},
                          "offload_param": {"device": "nvme", "nvme_path": "/nvme"}},
    "aio": {"thread_count": 4},
    "checkpoint": {"tag_validation": "FAIL", "parallel_write": {"pipeline_stage": true}},
    "comms_logger": {"prof_ops": ["all_reduce", "all_gather"]},
    "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "custom": [1, 2]}}
  })");
  EXPECT_EQ(c.gradient_clipping, 0.5);
  EXPECT_EQ(c.steps_per_print, 7);
  EXPECT_TRUE(c.wall_clock_breakdown);
  EXPECT_EQ(c.communication_data_type, PrecisionType::kFp32);
  EXPECT_EQ(c.data_types.grad_accum_dtype, PrecisionType::kFp32);
  EXPECT_EQ(c.fp16.loss_scale, 128.0);
  EXPECT_EQ(c.fp16.initial_scale_power, 12);
  EXPECT_EQ(c.zero_optimization.stage, 3);
  EXPECT_EQ(c.zero_optimization.reduce_bucket_size, 500'000'000);
  EXPECT_FALSE(c.zero_optimization.overlap_comm_enabled());
  EXPECT_EQ(c.zero_optimization.offload_optimizer.device, OffloadDevice::kCpu);
  EXPECT_EQ(c.zero_optimization.offload_optimizer.ratio, 0.3);
  EXPECT_EQ(c.zero_optimization.offload_param.device, OffloadDevice::kNvme);
  EXPECT_EQ(c.zero_optimization.offload_param.nvme_path, "/nvme");
  EXPECT_EQ(c.aio.intra_op_parallelism, 4);
  EXPECT_EQ(c.checkpoint.tag_validation, TagValidation::kFail);
  EXPECT_TRUE(c.checkpoint.parallel_write.pipeline_stage);
  EXPECT_EQ(c.comms_logger.prof_ops, (std::vector<std::string>{"all_reduce", "all_gather"}));
  ASSERT_TRUE(c.optimizer.has_value());
  EXPECT_EQ(c.optimizer->type, "AdamW");
  EXPECT_EQ(c.optimizer->params["custom"], nlohmann::json::array({1, 2}));
}

TEST(ConfigValues, OverlapCommDefaultsOnForStage3Only) {
  EXPECT_TRUE(parse(R"({"train_batch_size": 1, "zero_optimization": {"stage": 3}})")
                  .zero_optimization.overlap_comm_enabled());
  EXPECT_FALSE(parse(R"({"train_batch_size": 1, "zero_optimization": {"stage": 2}})")
                   .zero_optimization.overlap_comm_enabled());
}

TEST(ConfigValues, AliasesAndLegacySpellings) {
  const DeepSpeedConfig c = parse(R"({
    "train_batch_size": 1,
    "bfloat16": {"enabled": false, "immediate_grad_update": true},
    "zero_optimization": {"prefetch_bucket_size": 123, "param_persistence_threshold": 7,
                          "stage3_gather_fp16_weights_on_model_save": true,
                          "cpu_offload": true}
  })");
  EXPECT_TRUE(c.bf16.immediate_grad_update);
  EXPECT_EQ(c.zero_optimization.stage3_prefetch_bucket_size, 123);
  EXPECT_EQ(c.zero_optimization.stage3_param_persistence_threshold, 7);
  EXPECT_TRUE(c.zero_optimization.stage3_gather_16bit_weights_on_model_save);
  EXPECT_EQ(c.zero_optimization.offload_optimizer.device, OffloadDevice::kCpu);
  EXPECT_EQ(parse(R"({"train_batch_size": 1, "zero_optimization": true})").zero_optimization.stage,
            1);
  EXPECT_EQ(parse(R"({"train_batch_size": 1, "zero_optimization": null})").zero_optimization.stage,
            0);
}

TEST(ConfigValues, UnmodeledSectionsAreKeptAsWritten) {
  const DeepSpeedConfig c =
      parse(R"({"train_batch_size": 1, "amp": {"enabled": false, "opt_level": "O1"}})");
  ASSERT_EQ(c.unmodeled_sections.count("amp"), 1u);
  EXPECT_EQ(c.unmodeled_sections.at("amp")["opt_level"], "O1");
}

}  // namespace config_defaults_test
}  // namespace zero::config

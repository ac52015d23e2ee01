#include "engine/engine_settings.h"

#include "config/feature_support.h"

namespace zero::engine {

EngineSettings settings_from_config(const config::DeepSpeedConfig& config, const std::string& source) {
  config::check_supported(config, source);
  EngineSettings s;
  s.train_batch_size = config.batch.train_batch_size;
  s.micro_batch_size = config.batch.train_micro_batch_size_per_gpu;
  s.gradient_accumulation_steps = config.batch.gradient_accumulation_steps;
  s.gradient_clipping = config.gradient_clipping;
  s.steps_per_print = config.steps_per_print;
  s.wall_clock_breakdown = config.wall_clock_breakdown;
  s.prescale_gradients = config.prescale_gradients;
  s.memory_breakdown = config.memory_breakdown;
  s.dataloader_drop_last = config.dataloader_drop_last;
  s.gradient_predivide_factor = config.gradient_predivide_factor;
  s.sequence_parallel_size = config.sequence_parallel_size;
  if (config.optimizer) {
    s.optimizer_type = config.optimizer->type;
    s.optimizer_params = config.optimizer->params;
  }
  if (config.scheduler) {
    s.scheduler_type = config.scheduler->type;
    s.scheduler_params = config.scheduler->params;
  }
  s.zero = config.zero_optimization;
  s.fp16 = config.fp16;
  s.bf16 = config.bf16;
  s.data_types = config.data_types;
  s.communication_data_type = config.communication_data_type;
  s.comms_logger = config.comms_logger;
  s.tensorboard = config.tensorboard;
  s.csv_monitor = config.csv_monitor;
  s.flops_profiler = config.flops_profiler;
  s.aio = config.aio;
  config.activation_checkpointing.validate(source);
  s.activation_checkpointing = config.activation_checkpointing;
  s.curriculum_learning = config.curriculum_learning;
  s.source_config = config.to_json();
  return s;
}

EngineSettings settings_from_file(const std::string& path, const config::AutoValues& autos) {
  return settings_from_config(config::DeepSpeedConfig::from_file(path, autos), path);
}

}  // namespace zero::engine

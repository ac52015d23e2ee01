// EngineSettings: the part of the DeepSpeed configuration the training engine acts on, already
// validated and with batch sizes resolved. Built from a config::DeepSpeedConfig
// (settings_from_config) or directly in code by C++ users and tests.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "config/deepspeed_config.h"
#include "config/monitor_config.h"
#include "config/precision_config.h"
#include "config/zero_config.h"

namespace zero::engine {

struct EngineSettings {
  int64_t train_batch_size = 1;          // samples per optimizer step, all ranks together
  int64_t micro_batch_size = 1;          // samples per forward/backward on one rank
  int64_t gradient_accumulation_steps = 1;
  double gradient_clipping = 1.0;        // max global gradient norm; 0 disables
  int64_t steps_per_print = 10;
  bool wall_clock_breakdown = false;
  // Gradient averaging across ranks (DeepSpeed's keys): prescale_gradients divides by the world
  // size before communicating; otherwise gradients are divided by gradient_predivide_factor
  // before and the rest of the average is applied after. Same mean; different 16-bit ranges.
  bool prescale_gradients = false;
  // memory_breakdown: each printed step also prints every memory category's live and peak
  // bytes and the process's resident memory (peaks restart after each print).
  bool memory_breakdown = false;
  // dataloader_drop_last: token-shard micro-batches never span two epochs.
  bool dataloader_drop_last = false;
  double gradient_predivide_factor = 1.0;
  // DeepSpeed's top-level sequence_parallel_size: Ulysses groups of this many ranks each hold
  // a part of every sequence; the data-parallel size is the ZeRO group's size / this.
  int64_t sequence_parallel_size = 1;
  std::string optimizer_type = "AdamW";  // DeepSpeed spelling
  nlohmann::json optimizer_params = nlohmann::json::object();
  std::string scheduler_type;            // empty: constant learning rate
  nlohmann::json scheduler_params = nlohmann::json::object();
  // ZeRO stage and its knobs, precision and monitoring sections, with DeepSpeed's defaults
  // (config/*.h); the engine acts on the ones the feature-support table lets through.
  config::ZeroConfig zero;
  config::Fp16Config fp16;
  config::Bf16Config bf16;
  config::DataTypesConfig data_types;
  std::optional<config::PrecisionType> communication_data_type;
  config::CommsLoggerConfig comms_logger;
  // Monitors (engine/monitor.h): rank 0 writes metrics under output_path/job_name.
  config::FileMonitorConfig tensorboard;
  config::FileMonitorConfig csv_monitor;
  // flops_profiler: rank 0 profiles one step (engine/flops_profiler.h).
  config::FlopsProfilerConfig flops_profiler;
  // aio: the I/O engine of NVMe offload (offload/aio_engine.h).
  config::AioConfig aio;
  // activation_checkpointing: HOW the model checkpoints (model/activation_checkpointer.h); the
  // Engine applies it when the model checkpoints and warns when it sets options but does not.
  config::ActivationCheckpointingConfig activation_checkpointing;
  // curriculum_learning (legacy, "seqlen"): each training step's sequences are cut to the
  // schedule's length (engine/seqlen_curriculum.h).
  config::CurriculumConfig curriculum_learning;
  nlohmann::json source_config = nlohmann::json::object();  // the resolved DeepSpeed JSON
};

// The engine's settings from a parsed DeepSpeed config. Runs config::check_supported first, so
// a setting whose feature is not built yet is an UnsupportedError naming its key (`source`
// prefixes messages). Without an optimizer section the engine uses AdamW with DeepSpeed's
// defaults (lr from the config's "auto" resolution when given).
EngineSettings settings_from_config(const config::DeepSpeedConfig& config, const std::string& source);

// Reads, validates and converts a DeepSpeed config file (see config::DeepSpeedConfig).
EngineSettings settings_from_file(const std::string& path, const config::AutoValues& autos);

}  // namespace zero::engine

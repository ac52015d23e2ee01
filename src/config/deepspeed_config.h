// DeepSpeedConfig: a DeepSpeed JSON config, parsed and validated once. Every key DeepSpeed 0.19
// documents for the features zero.cpp targets is modelled with DeepSpeed's default; "auto"
// values are resolved (auto_values.h), the batch sizes inferred (batch_config.h), and every
// user mistake is a ConfigError naming the source, the key path, the value and the fix.
// Whether zero.cpp can run what the config asks for is a separate check (feature_support.h).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "config/activation_checkpointing_config.h"
#include "config/aio_config.h"
#include "config/auto_values.h"
#include "config/batch_config.h"
#include "config/checkpoint_config.h"
#include "config/config_notes.h"
#include "config/field_spec.h"
#include "config/lenient_json.h"
#include "config/monitor_config.h"
#include "config/optimizer_config.h"
#include "config/other_sections.h"
#include "config/curriculum_config.h"
#include "config/pipeline_config.h"
#include "config/precision_config.h"
#include "config/scheduler_config.h"
#include "config/tensor_parallel_config.h"
#include "config/zero_config.h"

namespace zero::config {

// How strictly to read.
struct ConfigReadOptions {
  // --strict-config: a key that would only be warned about (an unknown key DeepSpeed ignores)
  // is an error instead.
  bool strict = false;
};

struct DeepSpeedConfig {
  BatchConfig batch;  // top-level keys train_batch_size, train_micro_batch_size_per_gpu, ...
  std::optional<OptimizerConfig> optimizer;
  std::optional<SchedulerConfig> scheduler;
  double gradient_clipping = 1.0;  // max global grad norm; 0 disables (default 1.0 since 0.19.3)
  int64_t steps_per_print = 10;
  bool wall_clock_breakdown = false;
  bool memory_breakdown = false;
  bool dump_state = false;
  // DeepSpeed's data loader drops an epoch's last incomplete batch (zero's token shards: a
  // micro-batch never spans two epochs).
  bool dataloader_drop_last = false;
  bool prescale_gradients = false;
  double gradient_predivide_factor = 1.0;
  bool managed_gradient_accumulation = true;
  bool zero_allow_untested_optimizer = false;
  bool zero_force_ds_cpu_optimizer = true;
  int64_t sequence_parallel_size = 1;
  std::optional<int64_t> vocabulary_size;  // DeepSpeed only warns when not a multiple of 8
  Fp16Config fp16;
  Bf16Config bf16;  // "bfloat16" is DeepSpeed's older spelling of the key
  // Gradient-reduction type; unset lets DeepSpeed pick it from the training precision.
  std::optional<PrecisionType> communication_data_type;
  PrecisionType seq_parallel_comm_data_type = PrecisionType::kFp32;
  DataTypesConfig data_types;
  ZeroConfig zero_optimization;
  ActivationCheckpointingConfig activation_checkpointing;
  AioConfig aio;
  CommsLoggerConfig comms_logger;
  FileMonitorConfig csv_monitor;
  FileMonitorConfig tensorboard;
  WandbConfig wandb;
  FlopsProfilerConfig flops_profiler;
  CheckpointConfig checkpoint;
  CurriculumConfig curriculum_learning;  // the legacy sequence-length curriculum
  // Pipeline and AutoTP tensor parallelism: read and validated, not built yet (feature_support).
  PipelineConfig pipeline;
  TensorParallelConfig tensor_parallel;
  // Recognised top-level sections that are not modelled, as written (other_sections.h).
  std::map<std::string, nlohmann::json> unmodeled_sections;
  // What reading said: each "auto" and what it became, ignored keys (warnings), settings that
  // are documented but unused here (notes). Not part of equality.
  ConfigNotes notes;

  // Reads a config file (JSON or HJSON, as DeepSpeed reads it, see lenient_json.h). Only a
  // regular file of at most 4 MiB is read. Throws FileError when the file cannot be read,
  // ConfigError for anything wrong inside it.
  static DeepSpeedConfig from_file(const std::string& path, const AutoValues& autos = {},
                                   const ConfigReadOptions& options = {});
  // `source_name` names the text in messages (a file name, "built-in config", ...).
  static DeepSpeedConfig from_text(const std::string& text, const std::string& source_name,
                                   const AutoValues& autos = {},
                                   const ConfigReadOptions& options = {});
  // `key_lines` (from the text's parse) lets messages give each key's line.
  static DeepSpeedConfig from_json(const nlohmann::json& json, const std::string& source,
                                   const AutoValues& autos = {},
                                   const ConfigReadOptions& options = {},
                                   const KeyLines* key_lines = nullptr);
  // DeepSpeed's defaults everywhere, with the given batch shape (train_batch_size inferred).
  static DeepSpeedConfig defaults(int64_t micro_batch_size = 1,
                                  int64_t gradient_accumulation_steps = 1, int64_t world_size = 1);

  // The resolved config as DeepSpeed JSON: every key with the value in effect, no "auto", the
  // three batch sizes filled in. Read back with from_json and the same world size, it gives an
  // equal config; checkpoints store it.
  nlohmann::json to_json() const;

  bool operator==(const DeepSpeedConfig&) const = default;

  template <class V>
  void visit(V& v) {
    batch.visit(v);
    v.section("optimizer", optimizer);
    v.section("scheduler", scheduler);
    v.field("gradient_clipping", gradient_clipping, Limits::at_least(0.0));
    v.field("steps_per_print", steps_per_print, Limits::positive());
    v.field("wall_clock_breakdown", wall_clock_breakdown);
    v.field("memory_breakdown", memory_breakdown);
    v.field("dump_state", dump_state);
    v.field("dataloader_drop_last", dataloader_drop_last);
    v.field("prescale_gradients", prescale_gradients);
    v.field("gradient_predivide_factor", gradient_predivide_factor, Limits::positive());
    v.field("managed_gradient_accumulation", managed_gradient_accumulation);
    v.field("zero_allow_untested_optimizer", zero_allow_untested_optimizer);
    v.field("zero_force_ds_cpu_optimizer", zero_force_ds_cpu_optimizer);
    v.field("sequence_parallel_size", sequence_parallel_size, Limits::positive());
    v.field("vocabulary_size", vocabulary_size, Limits::positive());
    v.section("fp16", fp16);
    v.section({"bf16", "bfloat16"}, bf16);
    v.choice("communication_data_type", communication_data_type, communication_type_names(),
             CaseMode::kIgnoreCase);
    v.choice("seq_parallel_comm_data_type", seq_parallel_comm_data_type, communication_type_names(),
             CaseMode::kIgnoreCase);
    v.section("data_types", data_types);
    v.section("zero_optimization", zero_optimization);
    v.section("activation_checkpointing", activation_checkpointing);
    v.section("aio", aio);
    v.section("comms_logger", comms_logger);
    v.section("csv_monitor", csv_monitor);
    v.section("tensorboard", tensorboard);
    v.section("wandb", wandb);
    v.section("flops_profiler", flops_profiler);
    v.section("checkpoint", checkpoint);
    v.section("curriculum_learning", curriculum_learning);
    v.section("pipeline", pipeline);
    v.section("tensor_parallel", tensor_parallel);
    v.passthrough(other_section_keys(), unmodeled_sections);
  }
};

}  // namespace zero::config

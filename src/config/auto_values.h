// "auto" values in a DeepSpeed config, resolved the way the Hugging Face Trainer resolves them
// (transformers' HfTrainerDeepSpeedConfig: trainer_config_process / trainer_config_finalize;
// Accelerate fills absent batch keys the same way), so a Trainer template runs with no flag:
//   train_micro_batch_size_per_gpu <- micro_batch_size            (Trainer default 8)
//   gradient_accumulation_steps    <- gradient_accumulation_steps (default 1)
//   train_batch_size               <- micro * gas * world size
//   gradient_clipping              <- max_grad_norm               (default 1.0)
//   optimizer.params lr / betas / eps / weight_decay
//                                  <- learning_rate (5e-5) / [adam_beta1, adam_beta2]
//                                     ([0.9, 0.999]) / adam_epsilon (1e-8) / weight_decay (0.0)
//   scheduler.params warmup_min_lr <- 0, warmup_max_lr <- learning_rate,
//                    warmup_num_steps <- warmup_steps (0), total_num_steps <- total_steps
//   fp16.enabled / bf16.enabled    <- fp16 / bf16                 (default off)
//   zero_optimization reduce_bucket_size <- hidden^2,
//                     stage3_prefetch_bucket_size <- int(0.9 * hidden^2),
//                     stage3_param_persistence_threshold <- 10 * hidden
// A value given here is an explicit choice (a `zero train` flag): where the config holds a
// different concrete value, reading fails naming both (the Trainer rejects such mismatches
// too). Where the config has no batch key, the micro-batch size and accumulation steps are
// filled in; with add_trainer_optimizer, a config without an optimizer section gets AdamW with
// the values above (the Trainer creates that optimizer itself); --bf16/--fp16 given with no such
// section enable it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace zero::config {

class ReadContext;

// What the user chose explicitly (unset: the Trainer's default applies), plus what the model
// and the run tell (hidden size, total steps, world size).
struct AutoValues {
  std::optional<int64_t> micro_batch_size;             // --micro-batch
  std::optional<int64_t> gradient_accumulation_steps;  // --grad-accum
  std::optional<double> learning_rate;                 // --lr
  std::optional<double> weight_decay;                  // --weight-decay
  std::optional<double> adam_beta1;                    // --adam-beta1
  std::optional<double> adam_beta2;                    // --adam-beta2
  std::optional<double> adam_epsilon;                  // --adam-epsilon
  std::optional<double> max_grad_norm;                 // --max-grad-norm
  std::optional<int64_t> warmup_steps;                 // --warmup-steps
  std::optional<bool> fp16;                            // --fp16
  std::optional<bool> bf16;                            // --bf16
  // From the run and the model: no defaults. An "auto" that needs an unknown one is an error
  // naming the key.
  std::optional<int64_t> total_steps;  // --steps
  std::optional<int64_t> hidden_size;  // the model's hidden size
  // The number of ranks. DeepSpeed's batch arithmetic ("auto" and inference) counts data-parallel
  // ranks: world_size / (pipeline stages x tensor-parallel size x sequence_parallel_size), the
  // sizes taken from the config unless these command-line overrides are set.
  int64_t world_size = 1;
  std::optional<int64_t> pipeline_parallel_size;  // --pipeline-parallel-size
  std::optional<int64_t> tensor_parallel_size;    // --tensor-parallel-size
  // The caller plays the Trainer's part: a config without an optimizer section gets the AdamW
  // the Trainer would create (DeepSpeed itself would expect the program to supply one).
  bool add_trainer_optimizer = false;
};

// The Hugging Face Trainer's TrainingArguments defaults.
struct TrainerDefaults {
  static constexpr int64_t kMicroBatchSize = 8;
  static constexpr int64_t kGradientAccumulationSteps = 1;
  static constexpr double kLearningRate = 5e-5;
  static constexpr double kWeightDecay = 0.0;
  static constexpr double kAdamBeta1 = 0.9;
  static constexpr double kAdamBeta2 = 0.999;
  static constexpr double kAdamEpsilon = 1e-8;
  static constexpr double kMaxGradNorm = 1.0;
  static constexpr int64_t kWarmupSteps = 0;
};

// Resolves, in place, every "auto" listed above and fills what the Trainer fills, recording
// what each became in `context`'s notes. An "auto" left inside optimizer/scheduler params has no
// resolver: ConfigError. Any other "auto" is reported by the section readers.
void resolve_auto_values(nlohmann::json& config, const AutoValues& autos,
                         const ReadContext& context);

}  // namespace zero::config

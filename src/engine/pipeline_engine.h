// PipelineEngine: pipeline-parallel training of a transformer (DeepSpeed's PipelineEngine) on
// top of the Engine. Each rank builds only its stage's units (model::build_transformer_stage,
// boundaries from pipeline::partition_layers), runs DeepSpeed's 1F1B TrainSchedule for one
// optimizer step (micro-batches = gradient_accumulation_steps), and uses an Engine on the stage
// model for what happens per data-parallel group: gradient reduction over the stage's replicas
// (ZeRO 0 or 1), clipping, the optimizer and the LR schedule.
//
// In-flight micro-batches (option "recompute"): units keep one set of saved activations, so a
// stage keeps only each in-flight micro-batch's INPUT (its received activation; the tokens on
// the first stage) and, when a BackwardPass finds its units holding another micro-batch's
// activations, re-runs the stage forward on that input right before the backward (activation
// checkpointing of the whole stage). Kernels are deterministic, so gradients are bit-identical
// to keeping the activations; the cost is one extra forward on every stage but the last (whose
// backward directly follows its forward in 1F1B, so the loss is never recomputed). With block
// checkpointing on (--gradient-checkpointing, or pipeline.activation_checkpoint_interval: see
// set_activation_checkpoint_interval) that stage forward is itself checkpointed, and backward
// recomputes each group of blocks once more.
//
// Communication (all counted in the pipeline group's CommStats): activations [B*T, C] go to the
// next stage and their gradients back with Comm::send/recv, in the activation dtype; tied
// embeddings (GPT-2) have a copy on the last stage (model::TiedEmbeddingCopy) whose gradient is
// all-reduced with the first stage's in ReduceTiedGrads, so both stay equal; the squared
// gradient norm is summed over the stages (the tied copy counted once) before clipping; the
// step's loss (computed on the last stage) is summed over the pipeline group, so every rank
// returns it. Gradients are averaged over gas x dp as without a pipeline.
//
// The Engine (engine()) is the stage's: its train_batch/eval_batch/save_checkpoint come here
// (Engine::BatchRunner), so engine/trainer.h drives a stage unchanged; its own forward()/
// backward() must not be called on a stage (they run the whole unit list as a full model).
// Every rank's step counters, learning rate, gradient norm and returned loss agree.
//
// Checkpoints (engine/pipeline_checkpoint.cpp) hold the whole model by logical parameter
// names; Engine::load_checkpoint loads them (and any other layout's) into a stage by name.
//
// Pipeline x tensor parallelism (DeepSpeed's 3D parallelism with the data axis): with a mesh
// of tp > 1 each rank builds its stage with the TensorParallelLayout of its tensor coordinate
// (model/tensor_parallel.h; the tied copy and the vocabulary-parallel head hold its vocabulary
// rows) and runs it over the mesh's tensor group. Every tensor rank of a stage holds the whole
// activation, so stage s's tensor rank t exchanges with stage s±1's tensor rank t (their
// pipeline group), whole or - pipe_partitioned / grad_partitioned, DeepSpeed's defaults - only
// its 1/tp part, the receiver all-gathering the parts over its tensor group
// (engine/pipeline_stage_link.h; bit-identical values). ZeRO runs over the data group of
// (stage, tensor rank); the norm is reduced over the tensor group by the Engine, then summed
// over the stages here; the tied copies are all-reduced per tensor rank (the same rows).
// Checkpoints then hold logical runs of the slices (engine/tensor_parallel_checkpoint.h), so
// they load at any layout.
//
// Limits (UnsupportedError/ConfigError): ZeRO stages 2 and 3 (DeepSpeed refuses them with a
// pipeline), sequence parallelism and seed_layers (check_pipeline_settings). fp16/bf16 run as on one rank: activations travel in
// the 16-bit activation dtype, the tied reduction adds the accumulated (accum-dtype) gradients,
// and the stage-summed norm gives every stage the same overflow verdict (skip / loss scale).
//
// Ownership: owns its Engine (and through it the stage model); the Mesh must outlive it. One
// thread drives it; every rank of the mesh calls train_batch/eval_batches/save_checkpoint
// together.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/mesh.h"
#include "config/pipeline_config.h"
#include "engine/engine.h"
#include "model/transformer_config.h"
#include "pipeline/pipe_instruction.h"
#include "pipeline/stage_partition.h"

namespace zero::engine {

class PipelineStageLink;

// Which units of the full model (numbered as in model::build_transformer_stage) each stage
// holds: DeepSpeed's `parts`, stages + 1 boundaries.
std::vector<int64_t> plan_pipeline_stages(const model::TransformerConfig& config, int64_t stages,
                                          const pipeline::PartitionMethod& method);

// Refuses pipeline settings this engine does not act on (UnsupportedError naming the key):
// seed_layers; and a negative activation_checkpoint_interval (ConfigError).
// pipe_partitioned / grad_partitioned only matter with tensor parallelism
// (PipelineEngine::set_partitioned_transfers).
void check_pipeline_settings(const config::PipelineConfig& pipeline, const std::string& source);

// Also the Engine's BatchRunner: Engine::train_batch/eval_batch of engine() run the pipeline's
// schedules, so engine/trainer.h trains a stage like any Engine.
// How a stage checkpoints activations from the start, so its Engine applies the
// activation_checkpointing section to it (--gradient-checkpointing: every block; and/or
// pipeline.activation_checkpoint_interval, see PipelineEngine::set_activation_checkpoint_interval).
struct PipelineCheckpointing {
  bool blocks = false;
  int64_t interval = 0;
};

class PipelineEngine final : public Engine::BatchRunner {
 public:
  // `mesh`: pipeline x data x tensor (sp = 1); settings are the Engine's (train_batch_size =
  // micro x gas x dp). Builds this rank's stage (its tensor rank's parts when tp > 1) and
  // initialises it with model::init_parameters(seed), so every parameter has its value in the
  // full model; or, with `weights` (a full model of `config` on `backend` built for this rank's
  // tensor-parallel layout, e.g. a Hugging Face folder loaded with it; read here only), copies
  // each stage parameter from the parameter of the same name.
  using Checkpointing = PipelineCheckpointing;
  PipelineEngine(const model::TransformerConfig& config, backend::Backend& backend,
                 EngineSettings settings, comm::Mesh& mesh,
                 const pipeline::PartitionMethod& partition, uint64_t seed,
                 model::Model* weights = nullptr, Checkpointing checkpointing = {});
  ~PipelineEngine() override;
  PipelineEngine(const PipelineEngine&) = delete;
  PipelineEngine& operator=(const PipelineEngine&) = delete;

  // One optimizer step over gradient_accumulation_steps micro-batches from `next` (every stage
  // pulls them all, so data sources stay in step; the first stage reads the tokens, the last
  // the targets). Returns the mean loss of this data-parallel replica's micro-batches, on every
  // rank of the pipeline.
  double train_batch(const std::function<model::Batch()>& next) override;
  // One micro-batch through the InferenceSchedule (eval_batches of one).
  double eval_batch(const model::Batch& batch) override { return eval_batches({batch}); }
  // World rank 0: the first stage's first data-parallel replica's tensor rank 0.
  bool reporting_rank() const override;
  // DeepSpeed's pipeline.pipe_partitioned (activations) and grad_partitioned (their gradients):
  // with tp > 1, send each tensor rank's 1/tp part and all-gather at the receiver (true, the
  // default), or send whole. No effect without tensor parallelism. Call between steps; every
  // rank of the mesh with the same values.
  void set_partitioned_transfers(bool activations, bool gradients);
  // DeepSpeed's pipeline.activation_checkpoint_interval: N > 0 turns the stage model's
  // activation checkpointing on with segments of N consecutive transformer blocks
  // (model/checkpoint_segments.h): each group keeps only its input, and backward recomputes the
  // group's forward. Blocks are counted from the stage's first block (DeepSpeed counts from its
  // first layer; its GPT pipe models likewise checkpoint only groups of transformer layers): the
  // embedding, final norm and head keep their activations. 0 (the default) leaves the model's
  // own choice (--gradient-checkpointing: every block alone). Losses and gradients are
  // bit-identical for every N. ConfigError for N < 0. Call between steps.
  void set_activation_checkpoint_interval(int64_t interval);
  // One checkpoint of the whole model by logical parameter names, every rank taking part
  // (engine/pipeline_checkpoint.cpp); Engine::save_checkpoint of engine() comes here. Loading
  // is Engine::load_checkpoint of engine(): it reads this stage's parameters by name (the tied
  // copy from the embedding's table) from a checkpoint of any layout.
  void save_checkpoint(const std::string& dir, const std::string& tag,
                       const nlohmann::json& client_state) override;
  // Mean loss of `batches` without gradients, by DeepSpeed's InferenceSchedule; every rank of
  // the pipeline gets it.
  double eval_batches(const std::vector<model::Batch>& batches);

  // The instructions the last train_batch/eval_batches executed on this rank, in order.
  const std::vector<pipeline::PipeInstruction>& executed() const { return executed_; }
  // Bytes of activations and activation gradients this rank sent since construction (its
  // parts only, when partitioned).
  int64_t sent_bytes() const { return sent_bytes_; }
  // Wall seconds of the last train_batch on this rank: all of it, and the part inside
  // ForwardPass/BackwardPass (the rest is the pipeline bubble: waiting on neighbours, plus
  // sends, receives and the optimizer step).
  struct StepTiming {
    double total_seconds = 0.0;
    double compute_seconds = 0.0;
    double idle_fraction() const {
      return total_seconds > 0 ? 1.0 - compute_seconds / total_seconds : 0.0;
    }
  };
  const StepTiming& last_timing() const { return timing_; }
  // Test hook: throw an Error from the ForwardPass of micro-batch `micro_batch` (the next
  // train_batch), to check that a failing stage brings the job down.
  void fail_in_forward(int64_t micro_batch) { fail_micro_batch_ = micro_batch; }

  Engine& engine() { return *engine_; }
  model::Model& model() { return engine_->model(); }
  int64_t stage() const { return stage_; }
  int64_t stages() const { return stages_; }
  bool is_first_stage() const { return stage_ == 0; }
  bool is_last_stage() const { return stage_ == stages_ - 1; }
  // Full-model unit boundaries of the stages (plan_pipeline_stages).
  const std::vector<int64_t>& parts() const { return parts_; }
  // The tied token embedding on this stage (first stage: the embedding's, last: its copy), or
  // null when this stage holds none or the model is untied.
  model::Parameter* tied_parameter() { return tied_; }

 private:
  class Worker;
  void add_squared_norm_of_other_stages(Tensor& squared_norm);
  void world_barrier();
  double world_max(double value);

  model::TransformerConfig config_;
  comm::Mesh& mesh_;
  comm::Comm& pipe_;
  int64_t stages_ = 1;
  int64_t stage_ = 0;
  std::vector<int64_t> parts_;
  std::unique_ptr<Engine> engine_;
  model::Parameter* tied_ = nullptr;
  std::unique_ptr<comm::Comm> tied_group_;  // first and last stage, when tied and pp > 1
  std::unique_ptr<PipelineStageLink> link_;  // sends/receives to the neighbouring stages
  bool pipe_partitioned_ = true;
  bool grad_partitioned_ = true;
  int64_t checkpoint_interval_ = 0;
  void set_checkpoint_interval(model::Model& stage, int64_t interval);
  std::vector<pipeline::PipeInstruction> executed_;
  int64_t sent_bytes_ = 0;
  int64_t fail_micro_batch_ = -1;
  StepTiming timing_;
};

}  // namespace zero::engine

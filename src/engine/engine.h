// Engine: drives training of a Model the way deepspeed.initialize()'s engine does —
// forward(batch) -> loss, backward(), step() (applied only at the gradient-accumulation
// boundary), train_batch(), eval_batch(), counters, learning rate, and atomic checkpoints.
//
// `comm` is the data-parallel group; the ZeRO stage of settings.zero (sharding/zero_stage.h)
// decides what each rank stores and how gradients and parameters move. Ownership: the Engine
// owns the model, the ZeRO stage, the optimizer and the schedule; `comm` must outlive it. One
// thread drives an Engine.
//
// Ulysses sequence parallelism (settings.sequence_parallel_size = sp > 1): `comm` is the
// combined data x sequence group (comm::Mesh::data_sequence_group(), dp * sp ranks) that ZeRO
// partitions and reduces over, and `sequence_group` (comm::Mesh's sequence axis) the sp ranks
// that share every sequence. The ranks of a sequence group pass the SAME full micro-batches;
// the engine keeps each rank's slice (engine/sequence_shard.h). Gradients are averaged over
// gas x dp (each rank's gradient is the part from its own tokens, and the group's parts sum to
// the sequence's), and reported losses are the full sequences' losses. Checkpoints record the
// ZeRO group (dp * sp ranks, each writing its own pieces) and load at any other layout, with or
// without sequence parallelism (tests/engine/mpi_test_ulysses_checkpoint.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/optimizer_kernels.h"
#include "comm/comm.h"
#include "core/check.h"
#include "engine/engine_settings.h"
#include "engine/seqlen_curriculum.h"
#include "engine/timers.h"
#include "model/model.h"
#include "sharding/zero_stage.h"

namespace zero::offload {
class CpuOptimizerStep;
}  // namespace zero::offload

namespace zero::optim {
class Optimizer;
class LrSchedule;
class LossScaler;
}  // namespace zero::optim

namespace zero::engine {

class NvmeOptimizerState;
class PartialOffload;
class PipelineEngine;
struct ManifestEntry;

class Engine {
 public:
  Engine(std::unique_ptr<model::Model> model, EngineSettings settings, comm::Comm& comm,
         comm::Comm* sequence_group = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Runs the model forward on one micro-batch and keeps what backward needs; returns its loss
  // (one device-to-host read, like PyTorch's loss.item(); train_batch() avoids it and reads
  // the step's loss once, with the gradient norm).
  double forward(const model::Batch& batch);
  // Backpropagates the last forward's loss into this micro-batch's gradients and adds them to
  // the accumulated ones. The average over gradient_accumulation_steps x world_size micro-batches
  // (DeepSpeed's scaling) is applied once, at the boundary.
  void backward();
  // At the accumulation boundary: global gradient norm, clipping, optimizer update, LR schedule,
  // zero the gradients, count the step. Elsewhere a no-op. Returns whether an update happened.
  bool step();
  bool is_gradient_accumulation_boundary() const;
  // gradient_accumulation_steps x (forward, backward, step) on micro-batches from `next`;
  // returns the mean loss. One device-to-host read per call. Must start at an accumulation
  // boundary.
  double train_batch(const std::function<model::Batch()>& next);
  // Loss of one micro-batch without gradients.
  double eval_batch(const model::Batch& batch);

  int64_t global_steps() const { return global_steps_; }
  // With curriculum_learning: the sequence length of the latest training step (the first
  // step's before any); 0 without a curriculum.
  int64_t curriculum_length() const { return curriculum_ ? curriculum_->current() : 0; }
  int64_t global_samples() const { return global_samples_; }
  int64_t skipped_steps() const { return skipped_steps_; }
  int64_t micro_steps() const { return micro_steps_; }
  double get_lr() const;
  // Norm of the gradients of the last step, before clipping (unscaled; NaN/Inf for a step
  // skipped on overflow).
  double last_grad_norm() const { return last_grad_norm_; }
  // The loss scale backward() multiplies the loss by: 1 except under fp16 loss scaling.
  double loss_scale() const;
  // Whether the last step() was skipped because gradients overflowed.
  bool last_step_skipped() const { return last_step_skipped_; }
  // Test hook: optimizer step number `step` (1-based, as global_steps() counts after it) sees a
  // NaN in rank 0's gradients (see ZeroStage::poison_next_reduction) - an overflow only one
  // rank observes until the reduction or the overflow flag's all-reduce.
  void inject_gradient_overflow(int64_t step) { overflow_steps_.push_back(step); }
  const EngineSettings& settings() const { return settings_; }
  // The full parameters in the model's flat layout (f32 [num_parameters], on the model's
  // device), whatever the ZeRO stage. Collective: every rank must call it.
  Tensor gather_parameters();
  model::Model& model() { return *model_; }
  sharding::ZeroStage& zero_stage() { return *zero_; }
  // The optimizer state's NVMe swap (offload_optimizer {device: nvme}); null otherwise.
  const NvmeOptimizerState* nvme_optimizer_state() const { return nvme_state_.get(); }
  comm::Comm& comm() { return comm_; }
  // Ranks that average gradients: the ZeRO group's size / sequence_parallel_size.
  int data_parallel_size() const;
  Timers& timers() { return timers_; }

  // ---- pipeline parallelism (engine/pipeline_engine.h) ----------------------------------
  // The pipeline engine runs the stage model's passes itself (Model::forward_stage) and uses
  // this Engine for gradient reduction over the stage's data-parallel group and the step.
  // The device scalar a micro-batch's loss is added to (the step's loss sum, read in step()).
  Tensor step_loss_accumulator() { return step_scalars_.view(0, {1}); }
  // Counts a micro-batch whose forward and backward the caller ran (step() acts on the
  // gradient_accumulation_steps-th).
  void count_external_micro_step() { ++micro_steps_; }
  // Called in step() after the data-parallel (and tensor-parallel) reduction with the squared
  // gradient norm (f64 [1] on the device) before it is read: the pipeline adds the other
  // stages' parts.
  void set_squared_norm_hook(std::function<void(Tensor& squared_norm)> hook) {
    squared_norm_hook_ = std::move(hook);
  }
  // The sum of the last step's micro-batch losses on this rank (0 on a pipeline stage that does
  // not compute the loss).
  double last_step_loss_sum() const { return last_step_loss_sum_; }
  // What train_batch()/eval_batch() run instead of the model's own passes: the pipeline's
  // schedules (the trainer then drives a pipeline stage exactly like a plain Engine). Not
  // owned; null: none. The runner must outlive its use (a PipelineEngine owns this Engine).
  class BatchRunner {
   public:
    virtual ~BatchRunner() = default;
    virtual double train_batch(const std::function<model::Batch()>& next) = 0;
    virtual double eval_batch(const model::Batch& batch) = 0;
    // Whether this rank prints and writes logs (world rank 0).
    virtual bool reporting_rank() const = 0;
    // save_checkpoint() of every stage: one checkpoint of the whole model.
    virtual void save_checkpoint(const std::string& dir, const std::string& tag,
                                 const nlohmann::json& client_state) = 0;
  };
  void set_batch_runner(BatchRunner* runner) {
    // A runner drives its own forwards: the curriculum's cut would never happen there.
    ZERO_CHECK(runner == nullptr || !curriculum_,
               "a batch runner on an engine with a curriculum (PipelineEngine refuses it)");
    runner_ = runner;
  }
  // The parameters (name, shape, in order) checkpoints record and load_checkpoint requires:
  // unset, this model's; a pipeline stage sets the full model's, so a checkpoint of the
  // whole pipeline loads into each stage (by name) and at any other layout.
  void set_checkpoint_manifest(std::vector<std::pair<std::string, Shape>> manifest) {
    checkpoint_manifest_ = std::move(manifest);
  }
  // The rank that prints, logs and writes monitors: rank 0 of the group, or the runner's choice.
  bool reporting_rank() const {
    if (runner_ != nullptr) return runner_->reporting_rank();
    // Under tensor parallelism every tensor rank of data rank 0 holds the same loss: one reports.
    const comm::Comm* tensor_group = model_->tensor_group();
    return comm_.rank() == 0 && (tensor_group == nullptr || tensor_group->rank() == 0);
  }

  // Writes DIR/<tag> (default "global_step<N>") atomically and then DIR/latest; see
  // checkpoint_dir.h. `client_state` is stored and returned by load_checkpoint.
  void save_checkpoint(const std::string& dir, const std::string& tag = "",
                       const nlohmann::json& client_state = nlohmann::json::object());
  // Restores weights, optimizer state, schedule and counters from DIR/<tag> (default: the tag
  // in DIR/latest); returns the client state. Throws FileError for missing or damaged files and
  // for a checkpoint of another model.
  nlohmann::json load_checkpoint(const std::string& dir, const std::string& tag = "");

 private:
  // OneBitAdam: checks the configuration it runs in and hands it the data-parallel group.
  void configure_onebit();
  // Muon: refuses what it cannot run yet and prints its notes (its units are set once the ZeRO
  // stage exists).
  void configure_muon();
  // forward() without reading the loss: it returns the device scalar and adds it to the step's
  // loss sum.
  Tensor forward_on_device(const model::Batch& batch);
  void apply_update();
  // The part of `batch` this rank runs (its sequence shard under sequence parallelism).
  model::Batch local_batch(const model::Batch& batch) const;
  // Sums a per-rank partial loss over the sequence group (identity without one).
  double full_sequence_loss(double partial_loss);
  // The optimizer's state buffers by name, in host or device memory (read from the files under
  // NVMe offload: whole tensors, for checkpoints).
  std::vector<std::pair<std::string, Tensor>> optimizer_state_tensors();
  // Whether a step whose gradients overflowed is skipped (fp16 always; bf16 when
  // bf16.check_grad_overflow, as DeepSpeed).
  bool skip_on_overflow() const;
  void save_partitioned(const std::string& staging_dir);
  // The manifest checkpoints record (engine_state.h's ManifestEntry list, as JSON).
  std::vector<ManifestEntry> manifest();
  nlohmann::json parameter_manifest();

  std::unique_ptr<model::Model> model_;
  EngineSettings settings_;
  comm::Comm& comm_;
  comm::Comm* sequence_group_ = nullptr;  // null unless sequence_parallel_size > 1
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::LrSchedule> schedule_;
  std::unique_ptr<optim::LossScaler> scaler_;  // fp16 only
  std::unique_ptr<sharding::ZeroStage> zero_;
  std::unique_ptr<offload::CpuOptimizerStep> cpu_step_;  // optimizer offload only
  std::unique_ptr<NvmeOptimizerState> nvme_state_;       // offload to NVMe only
  std::unique_ptr<PartialOffload> partial_;               // offload_optimizer.ratio < 1 only
  std::unique_ptr<model::StepContext> pending_;  // forward done, backward not yet
  std::optional<SeqlenCurriculum> curriculum_;    // curriculum_learning enabled
  model::Batch pending_batch_;
  Timers timers_;
  int64_t global_steps_ = 0;
  int64_t global_samples_ = 0;
  int64_t skipped_steps_ = 0;
  int64_t micro_steps_ = 0;
  double last_grad_norm_ = 0.0;
  // On the device: [0] the loss sum of this accumulation window's micro-batches, [1] the
  // squared gradient norm; read together once per step.
  Tensor step_scalars_;
  double last_step_loss_sum_ = 0.0;
  bool last_step_skipped_ = false;
  std::vector<int64_t> overflow_steps_;
  std::function<void(Tensor&)> squared_norm_hook_;
  BatchRunner* runner_ = nullptr;
  std::optional<std::vector<std::pair<std::string, Shape>>> checkpoint_manifest_;
  // The pipeline writes one checkpoint across its stages (engine/pipeline_checkpoint.cpp).
  friend class PipelineEngine;
};

// The precision ZeRO stores model states in, resolved from the settings as DeepSpeed 0.19 does
// (see sharding/precision.h). Throws ConfigError for fp16 and bf16 both enabled.
sharding::Precision resolve_precision(const EngineSettings& settings);

}  // namespace zero::engine

#include "engine/pipeline_engine.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "core/check.h"
#include "core/error.h"
#include "engine/pipeline_stage_link.h"
#include "optim/optimizer.h"
#include "model/embedding_unit.h"
#include "model/tied_embedding_copy.h"
#include "model/transformer_builder.h"
#include "pipeline/pipeline_schedule.h"
#include "pipeline/schedule_executor.h"

namespace zero::engine {

namespace {
using Clock = std::chrono::steady_clock;

// Adds the seconds of its scope to StepTiming::compute_seconds.
class ComputeTimer {
 public:
  explicit ComputeTimer(PipelineEngine::StepTiming& timing)
      : timing_(timing), start_(Clock::now()) {}
  ~ComputeTimer() {
    timing_.compute_seconds += std::chrono::duration<double>(Clock::now() - start_).count();
  }
  ComputeTimer(const ComputeTimer&) = delete;
  ComputeTimer& operator=(const ComputeTimer&) = delete;

 private:
  PipelineEngine::StepTiming& timing_;
  Clock::time_point start_;
};

constexpr int kActivationTag = 71;
constexpr int kGradTag = 72;

void check_supported(const EngineSettings& settings, const comm::MeshShape& shape) {
  if (settings.zero.stage >= 2) {
    throw ConfigError("zero_optimization.stage " + std::to_string(settings.zero.stage) +
                      " with pipeline parallelism (" + std::to_string(shape.pp) +
                      " stages): DeepSpeed refuses ZeRO stages 2 and 3 with a pipeline; use "
                      "stage 0 or 1, or pipeline.stages 1");
  }
  // Tensor parallelism composes (each stage holds its tensor rank's parts); Ulysses does not yet.
  if (shape.sp != 1 || settings.sequence_parallel_size != 1) {
    throw UnsupportedError("sequence_parallel_size " +
                           std::to_string(std::max<int64_t>(shape.sp,
                                                            settings.sequence_parallel_size)) +
                           " with pipeline parallelism (" + std::to_string(shape.pp) +
                           " stages) is not built yet; use sequence_parallel_size 1 with a "
                           "pipeline, or pipeline.stages 1");
  }
  if (settings.curriculum_learning.enabled) {
    throw UnsupportedError("curriculum_learning with pipeline parallelism (" +
                           std::to_string(shape.pp) + " stages) is not built yet (every stage "
                           "would change its activation shapes together each step); remove the "
                           "curriculum_learning section, or use pipeline.stages 1");
  }
  if (optim::Optimizer::is_onebit_type(settings.optimizer_type) ||
      optim::Optimizer::is_muon_type(settings.optimizer_type)) {
    throw UnsupportedError("optimizer.type = \"" + settings.optimizer_type + "\" with pipeline "
                           "parallelism (" + std::to_string(shape.pp) + " stages) is not built "
                           "yet; use Adam with a pipeline, or pipeline.stages 1");
  }
}
}  // namespace

void check_pipeline_settings(const config::PipelineConfig& pipeline, const std::string& source) {
  if (pipeline.activation_checkpoint_interval < 0) {
    throw ConfigError(source + ": pipeline.activation_checkpoint_interval is " +
                      std::to_string(pipeline.activation_checkpoint_interval) +
                      "; use 0 (off) or N >= 1 (each stage checkpoints its transformer blocks "
                      "in groups of N)");
  }
  if (pipeline.seed_layers) {
    throw UnsupportedError(source +
                           ": pipeline.seed_layers (a seed per layer) is not built; "
                           "remove it: every parameter gets its value in the full model");
  }
}

std::vector<int64_t> plan_pipeline_stages(const model::TransformerConfig& config, int64_t stages,
                                          const pipeline::PartitionMethod& method) {
  std::vector<pipeline::LayerInfo> layers;
  for (const auto& unit : model::transformer_unit_infos(config)) {
    layers.push_back({unit.name, unit.kind, unit.parameters});
  }
  return pipeline::partition_layers(layers, stages, method);
}

// The StageWorker of one schedule run: pipeline buffers and the instruction implementations.
class PipelineEngine::Worker final : public pipeline::StageWorker {
 public:
  Worker(PipelineEngine& owner, const std::vector<model::Batch>& batches, bool training,
         int64_t buffers)
      : owner_(owner),
        batches_(batches),
        training_(training),
        slots_(static_cast<size_t>(buffers)) {}

  void load_micro_batch(int64_t buffer, int64_t micro_batch) override {
    record(pipeline::InstructionKind::kLoadMicroBatch, buffer, micro_batch);
    Slot& slot = slots_.at(static_cast<size_t>(buffer));
    slot.device_batch =
        model::upload_batch(model().backend(), batch(micro_batch), owner_.config_.vocab_size);
    slot.micro_batch = micro_batch;
  }

  void forward(int64_t buffer, int64_t micro_batch) override {
    record(pipeline::InstructionKind::kForwardPass, buffer, micro_batch);
    const ComputeTimer timer(owner_.timing_);
    if (micro_batch == owner_.fail_micro_batch_) {
      owner_.fail_micro_batch_ = -1;
      throw Error("pipeline stage " + std::to_string(owner_.stage_) +
                  ": injected failure in the forward pass of micro-batch " +
                  std::to_string(micro_batch) + " (test hook)");
    }
    Slot& slot = slots_.at(static_cast<size_t>(buffer));
    release_live();
    model::StepContext ctx = context(slot, micro_batch);
    ctx.training = training_;
    if (training_) owner_.engine_->zero_stage().begin_pass(true);
    Tensor y = model().forward_stage(ctx, slot.input);
    if (owner_.is_last_stage()) {
      if (training_) {
        Tensor sum = owner_.engine_->step_loss_accumulator();
        model().backend().add(sum, y, 1.0);
      } else {
        eval_loss_sum_ += model().backend().read_scalar(y);
      }
    } else {
      // A copy: the next unit call may reuse what the returned view points into.
      slot.output = model().backend().empty(y.shape(), y.dtype(), MemoryCategory::kActivations);
      model().backend().copy(slot.output, y);
    }
    if (training_) {
      live_micro_batch_ = micro_batch;
    } else {
      release_units();
    }
  }

  void backward(int64_t buffer, int64_t micro_batch) override {
    record(pipeline::InstructionKind::kBackwardPass, buffer, micro_batch);
    const ComputeTimer timer(owner_.timing_);
    Slot& slot = slots_.at(static_cast<size_t>(buffer));
    model::StepContext ctx = context(slot, micro_batch);
    if (live_micro_batch_ != micro_batch) {
      // The units hold another micro-batch's activations: recompute this one's from its input.
      ZERO_CHECK(!owner_.is_last_stage(),
                 "the last pipeline stage must backward right after its forward (1F1B); "
                 "recomputing would count the loss twice");
      release_live();
      owner_.engine_->zero_stage().begin_pass(true);
      model().forward_stage(ctx, slot.input);
    }
    Tensor dx = model().backward_stage(ctx, owner_.is_last_stage() ? Tensor() : slot.output_grad);
    live_micro_batch_ = -1;
    owner_.engine_->zero_stage().end_pass(true);
    owner_.engine_->count_external_micro_step();
    if (!owner_.is_first_stage()) {
      slot.input_grad =
          model().backend().empty(dx.shape(), dx.dtype(), MemoryCategory::kActivations);
      model().backend().copy(slot.input_grad, dx);
    }
    slot.input = Tensor();
    slot.output = Tensor();
    slot.output_grad = Tensor();
  }

  void send_activation(int64_t buffer, int64_t micro_batch) override {
    record(pipeline::InstructionKind::kSendActivation, buffer, micro_batch);
    Slot& slot = slots_.at(static_cast<size_t>(buffer));
    check_shape(slot.output, micro_batch, "activation");
    send(slot.output, owner_.stage_ + 1, kActivationTag, owner_.pipe_partitioned_);
    if (!training_) slot.output = Tensor();
  }

  void recv_activation(int64_t buffer, int64_t micro_batch) override {
    record(pipeline::InstructionKind::kRecvActivation, buffer, micro_batch);
    Slot& slot = slots_.at(static_cast<size_t>(buffer));
    slot.input = activation_tensor(micro_batch);
    owner_.link_->recv(slot.input, owner_.stage_ - 1, kActivationTag, owner_.pipe_partitioned_);
    slot.micro_batch = micro_batch;
  }

  void send_grad(int64_t buffer, int64_t micro_batch) override {
    record(pipeline::InstructionKind::kSendGrad, buffer, micro_batch);
    Slot& slot = slots_.at(static_cast<size_t>(buffer));
    check_shape(slot.input_grad, micro_batch, "activation gradient");
    send(slot.input_grad, owner_.stage_ - 1, kGradTag, owner_.grad_partitioned_);
    slot.input_grad = Tensor();
  }

  void recv_grad(int64_t buffer, int64_t micro_batch) override {
    record(pipeline::InstructionKind::kRecvGrad, buffer, micro_batch);
    Slot& slot = slots_.at(static_cast<size_t>(buffer));
    slot.output_grad = activation_tensor(micro_batch);
    owner_.link_->recv(slot.output_grad, owner_.stage_ + 1, kGradTag, owner_.grad_partitioned_);
  }

  void reduce_tied_grads() override {
    record(pipeline::InstructionKind::kReduceTiedGrads, -1, -1);
    if (owner_.tied_group_ && owner_.tied_ != nullptr) {
      Tensor grad = owner_.engine_->zero_stage().accumulated_gradient(*owner_.tied_);
      owner_.tied_group_->all_reduce(grad, comm::ReduceOp::kSum);
    }
  }

  void reduce_grads() override {
    // The Engine reduces over the data-parallel group inside its step (OptimizerStep follows).
    record(pipeline::InstructionKind::kReduceGrads, -1, -1);
  }

  void optimizer_step() override {
    record(pipeline::InstructionKind::kOptimizerStep, -1, -1);
    ZERO_CHECK(owner_.engine_->is_gradient_accumulation_boundary(),
               "pipeline OptimizerStep before gradient_accumulation_steps micro-batches");
    owner_.engine_->step();
  }

  double eval_loss_sum() const { return eval_loss_sum_; }

 private:
  struct Slot {
    int64_t micro_batch = -1;
    model::DeviceBatch device_batch;
    Tensor input;        // received activation (not on the first stage)
    Tensor output;       // activation to send (not on the last stage)
    Tensor output_grad;  // received gradient of the output
    Tensor input_grad;   // gradient of the input to send
  };

  model::Model& model() { return owner_.engine_->model(); }
  const model::Batch& batch(int64_t micro_batch) const {
    ZERO_CHECK(micro_batch >= 0 && micro_batch < static_cast<int64_t>(batches_.size()),
               "pipeline micro-batch " << micro_batch << " out of range");
    return batches_[static_cast<size_t>(micro_batch)];
  }
  model::StepContext context(Slot& slot, int64_t micro_batch) {
    model::StepContext ctx{model().backend(), batch(micro_batch)};
    ctx.device_batch = slot.device_batch;
    ctx.loss_grad = owner_.engine_->loss_scale();
    // Model::forward_stage sets it too; backward_stage runs on this context as given.
    ctx.tensor_group = model().tensor_group();
    return ctx;
  }
  // The residual stream of one micro-batch, as it travels between stages.
  Tensor activation_tensor(int64_t micro_batch) {
    const model::Batch& b = batch(micro_batch);
    const DType dtype = model().activation_dtype().value_or(model().param_dtype());
    return model().backend().empty({b.batch_size() * b.seq_len(), owner_.config_.hidden_size},
                                   dtype, MemoryCategory::kActivations);
  }
  void check_shape(const Tensor& t, int64_t micro_batch, const char* what) {
    const model::Batch& b = batch(micro_batch);
    ZERO_CHECK(
        t.defined() && t.numel() == b.batch_size() * b.seq_len() * owner_.config_.hidden_size,
        "pipeline " << what << " of micro-batch " << micro_batch
                    << " is missing or has an unexpected size");
  }
  // Whole, or this tensor rank's part (pipeline_stage_link.h).
  void send(const Tensor& t, int64_t stage, int tag, bool partitioned) {
    owner_.sent_bytes_ += owner_.link_->send(t, stage, tag, partitioned);
  }
  void release_units() {
    for (const auto& unit : model().units()) unit->release_activations();
    model().activation_checkpointer().clear();
  }
  void release_live() {
    if (live_micro_batch_ < 0) return;
    release_units();
    live_micro_batch_ = -1;
  }
  void record(pipeline::InstructionKind kind, int64_t buffer, int64_t micro_batch) {
    owner_.executed_.push_back({kind, buffer, micro_batch});
  }

  PipelineEngine& owner_;
  const std::vector<model::Batch>& batches_;
  bool training_;
  std::vector<Slot> slots_;
  int64_t live_micro_batch_ = -1;  // whose activations the units hold
  double eval_loss_sum_ = 0.0;
};

PipelineEngine::PipelineEngine(const model::TransformerConfig& config, backend::Backend& backend,
                               EngineSettings settings, comm::Mesh& mesh,
                               const pipeline::PartitionMethod& partition, uint64_t seed,
                               model::Model* weights, Checkpointing checkpointing)
    : config_(config), mesh_(mesh), pipe_(mesh.group(comm::MeshAxis::kPipeline)) {
  check_supported(settings, mesh.shape());
  stages_ = mesh.shape().pp;
  stage_ = mesh.coordinate(comm::MeshAxis::kPipeline);
  ZERO_CHECK(pipe_.rank() == stage_, "the pipeline group's rank must be the stage");
  parts_ = plan_pipeline_stages(config_, stages_, partition);
  // Pipeline x tensor parallelism: the stage's units are this tensor rank's parts.
  const model::TensorParallelLayout layout{mesh.coordinate(comm::MeshAxis::kTensor),
                                           mesh.shape().tp};
  auto stage_model = model::build_transformer_stage(
      config_, backend, DType::kF32, parts_[static_cast<size_t>(stage_)],
      parts_[static_cast<size_t>(stage_ + 1)], layout);
  comm::Comm* tensor_group = layout.enabled() ? &mesh.group(comm::MeshAxis::kTensor) : nullptr;
  stage_model->set_tensor_group(tensor_group);
  link_ = std::make_unique<PipelineStageLink>(pipe_, tensor_group, backend);
  if (weights != nullptr) {
    for (model::Parameter* p : stage_model->parameters()) {
      model::Parameter& source = weights->parameter(p->spec.name);
      ZERO_CHECK(source.spec.shape == p->spec.shape,
                 "pipeline weights: " << p->spec.name
                                      << " has another shape in the full model (with tensor "
                                         "parallelism, load it with this rank's layout)");
      backend.copy(p->value, source.value);
    }
  } else {
    model::init_parameters(*stage_model, seed);
  }
  if (config_.tie_word_embeddings) {
    for (const auto& unit : stage_model->units()) {
      if (auto* embedding = dynamic_cast<model::EmbeddingUnit*>(unit.get())) {
        tied_ = &embedding->token_embedding();
      } else if (auto* copy = dynamic_cast<model::TiedEmbeddingCopy*>(unit.get())) {
        tied_ = &copy->weight();
      }
    }
  }
  if (config_.tie_word_embeddings && stages_ > 1) {
    // Every rank of the pipeline group takes part in the split; only the ends use the group.
    const bool end = is_first_stage() || is_last_stage();
    tied_group_ = pipe_.split(end ? 0 : 1, static_cast<int>(stage_));
    if (!end) tied_group_.reset();
  }
  // Before the Engine exists: it configures the activation_checkpointing section for a model
  // that checkpoints (and warns for one that does not).
  stage_model->set_activation_checkpointing(checkpointing.blocks);
  set_checkpoint_interval(*stage_model, checkpointing.interval);
  engine_ = std::make_unique<Engine>(std::move(stage_model), std::move(settings),
                                     mesh.group(comm::MeshAxis::kData));
  engine_->set_batch_runner(this);
  // Checkpoints record and require the full model (each stage loads its parameters by name).
  std::vector<std::pair<std::string, Shape>> manifest;
  for (const model::ParamSpec& spec : model::transformer_parameter_specs(config_)) {
    manifest.emplace_back(spec.name, spec.shape);
  }
  engine_->set_checkpoint_manifest(std::move(manifest));
  if (stages_ > 1) {
    engine_->set_squared_norm_hook(
        [this](Tensor& squared) { add_squared_norm_of_other_stages(squared); });
  }
}

PipelineEngine::~PipelineEngine() {
  if (engine_) engine_->set_batch_runner(nullptr);
}

bool PipelineEngine::reporting_rank() const {
  return mesh_.coordinate(comm::MeshAxis::kPipeline) == 0 &&
         mesh_.coordinate(comm::MeshAxis::kData) == 0 &&
         mesh_.coordinate(comm::MeshAxis::kTensor) == 0;
}

void PipelineEngine::set_partitioned_transfers(bool activations, bool gradients) {
  pipe_partitioned_ = activations;
  grad_partitioned_ = gradients;
}

void PipelineEngine::set_activation_checkpoint_interval(int64_t interval) {
  set_checkpoint_interval(model(), interval);
}

void PipelineEngine::set_checkpoint_interval(model::Model& stage, int64_t interval) {
  if (interval < 0) {
    throw ConfigError("pipeline.activation_checkpoint_interval is " + std::to_string(interval) +
                      "; use 0 (off) or N >= 1 (each stage checkpoints its transformer blocks "
                      "in groups of N)");
  }
  if (interval == checkpoint_interval_) return;
  model::CheckpointingOptions options = stage.activation_checkpointer().options();
  options.segment_units = interval > 0 ? interval : 1;
  stage.set_checkpointing_options(options);
  // 0 hands checkpointing back to the model's own choice (--gradient-checkpointing), which an
  // earlier interval overrode.
  if (interval > 0 || checkpoint_interval_ > 0) stage.set_activation_checkpointing(interval > 0);
  checkpoint_interval_ = interval;
}

void PipelineEngine::add_squared_norm_of_other_stages(Tensor& squared_norm) {
  backend::Backend& be = engine_->model().backend();
  double local = be.read_scalar(squared_norm);
  if (tied_ != nullptr && tied_group_ && is_last_stage()) {
    // The copy's reduced gradient equals the first stage's: count it there only.
    sharding::ZeroStage& zero = engine_->zero_stage();
    double tied = 0.0;
    if (zero.stage() == 0) {
      tied = be.squared_norm(zero.reduced_gradient(tied_->flat_offset, tied_->numel()));
    } else {
      for (const sharding::ParamSlice& slice : zero.layout().slices()) {
        if (slice.param != tied_ || slice.count == 0) continue;
        tied += be.squared_norm(zero.reduced_gradient(slice.partition_offset, slice.count));
      }
      tied = engine_->comm().all_reduce_scalar(tied, comm::ReduceOp::kSum);
    }
    // Tensor parallelism: `local` is already the stage's norm over its tensor group (the Engine
    // reduces it before this hook), and each tensor rank holds its vocabulary rows of the copy.
    if (comm::Comm* tensor_group = engine_->model().tensor_group(); tensor_group != nullptr) {
      tied = tensor_group->all_reduce_scalar(tied, comm::ReduceOp::kSum);
    }
    local -= tied;
  }
  const double total = pipe_.all_reduce_scalar(local, comm::ReduceOp::kSum);
  be.copy_from_host(squared_norm, &total);
}

double PipelineEngine::train_batch(const std::function<model::Batch()>& next) {
  const int64_t gas = engine_->settings().gradient_accumulation_steps;
  std::vector<model::Batch> batches;
  for (int64_t i = 0; i < gas; ++i) {
    batches.push_back(next());
    if (batches.back().batch_size() != engine_->settings().micro_batch_size) {
      throw ShapeError("micro-batch of " + std::to_string(batches.back().batch_size()) +
                       " sequences, but train_micro_batch_size_per_gpu is " +
                       std::to_string(engine_->settings().micro_batch_size));
    }
  }
  pipeline::TrainSchedule schedule(gas, stages_, stage_);
  executed_.clear();
  timing_ = StepTiming{};
  const auto start = Clock::now();
  Worker worker(*this, batches, true, schedule.num_pipe_buffers());
  pipeline::execute_schedule(schedule.steps(), worker);
  timing_.total_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const double loss_sum = is_last_stage() ? engine_->last_step_loss_sum() : 0.0;
  const double total =
      stages_ > 1 ? pipe_.all_reduce_scalar(loss_sum, comm::ReduceOp::kSum) : loss_sum;
  return total / static_cast<double>(gas);
}

double PipelineEngine::eval_batches(const std::vector<model::Batch>& batches) {
  if (batches.empty()) throw Error("PipelineEngine::eval_batches needs at least one micro-batch");
  pipeline::InferenceSchedule schedule(static_cast<int64_t>(batches.size()), stages_, stage_);
  executed_.clear();
  const StepTiming kept = timing_;  // last_timing() describes training steps
  Worker worker(*this, batches, false, schedule.num_pipe_buffers());
  pipeline::execute_schedule(schedule.steps(), worker);
  timing_ = kept;
  const double loss_sum = is_last_stage() ? worker.eval_loss_sum() : 0.0;
  const double total =
      stages_ > 1 ? pipe_.all_reduce_scalar(loss_sum, comm::ReduceOp::kSum) : loss_sum;
  return total / static_cast<double>(batches.size());
}

}  // namespace zero::engine

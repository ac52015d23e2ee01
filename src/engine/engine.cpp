#include "engine/engine.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/check.h"
#include "core/error.h"
#include "engine/checkpointing_setup.h"
#include "engine/engine_state.h"
#include "engine/muon_units.h"
#include "engine/nvme_optimizer_state.h"
#include "engine/partial_offload.h"
#include "engine/sequence_shard.h"
#include "engine/tensor_parallel_norm.h"
#include "model/ulysses_attention.h"
#include "offload/cpu_optimizer.h"
#include "optim/dynamic_loss_scaler.h"
#include "optim/grad_clip.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"

namespace zero::engine {
namespace {

DType dtype_of(config::PrecisionType type) {
  switch (type) {
    case config::PrecisionType::kFp32: return DType::kF32;
    case config::PrecisionType::kFp16: return DType::kF16;
    case config::PrecisionType::kBf16: return DType::kBF16;
  }
  return DType::kF32;
}

}  // namespace

sharding::Precision resolve_precision(const EngineSettings& settings) {
  if (settings.fp16.enabled && settings.bf16.enabled) {
    throw ConfigError("fp16.enabled and bf16.enabled are both true; enable one of them");
  }
  sharding::Precision p;
  if (settings.fp16.enabled) p.param = DType::kF16;
  if (settings.bf16.enabled) p.param = DType::kBF16;
  // DeepSpeed's get_data_types(): bf16 without ZeRO accumulates in fp32 (its BF16_Optimizer),
  // everything else in the model's dtype, unless data_types.grad_accum_dtype says otherwise.
  if (settings.data_types.grad_accum_dtype) {
    p.accum = dtype_of(*settings.data_types.grad_accum_dtype);
  } else {
    p.accum = p.param == DType::kBF16 && settings.zero.stage == 0 ? DType::kF32 : p.param;
  }
  // DeepSpeed's communication_data_type: the model's dtype unless the config names one.
  p.comm = settings.communication_data_type ? dtype_of(*settings.communication_data_type) : p.param;
  // DeepSpeed's low-precision states; ZeroStage checks the combination is one it can run.
  if (settings.bf16.bf16_master_weights_and_grads) p.master = DType::kBF16;
  if (settings.bf16.bf16_optimizer_states) p.states = DType::kBF16;
  p.stochastic_rounding = settings.bf16.stochastic_rounding;
  return p;
}

Engine::Engine(std::unique_ptr<model::Model> model, EngineSettings settings, comm::Comm& comm,
               comm::Comm* sequence_group)
    : model_(std::move(model)), settings_(std::move(settings)), comm_(comm) {
  ZERO_CHECK(model_ && model_->finalized(), "Engine needs a finalized model");
  const int64_t sp = settings_.sequence_parallel_size;
  if (sp < 1 || comm_.world_size() % sp != 0) {
    throw ConfigError("sequence_parallel_size " + std::to_string(sp) +
                      " must be >= 1 and divide the number of ranks, " +
                      std::to_string(comm_.world_size()) + "; change the key or the rank count");
  }
  const int sequence_ranks = sequence_group != nullptr ? sequence_group->world_size() : 1;
  if (sequence_ranks != sp) {
    const std::string given = sequence_group != nullptr
                                  ? "a sequence group of " + std::to_string(sequence_ranks) + " ranks"
                                  : std::string("no sequence group");
    throw ConfigError("sequence_parallel_size " + std::to_string(sp) + " but the engine was given " +
                      given + "; build the groups with comm::Mesh (sequence axis) from the setting");
  }
  if (settings_.curriculum_learning.enabled) {
    config::validate_curriculum_config(settings_.curriculum_learning, "the engine settings");
    curriculum_.emplace(settings_.curriculum_learning);
    check_curriculum_lengths(settings_.curriculum_learning, sp);
  }
  if (sp > 1) {
    if (model_->config()) {
      model::ulysses_heads(model_->config()->num_heads, model_->config()->num_kv_heads, sp);
    }
    sequence_group_ = sequence_group;
    model_->set_sequence_group(sequence_group_);
  }
  if (model_->param_dtype() != DType::kF32) {
    throw UnsupportedError(std::string("the Engine computes on an f32 model (got ") +
                           dtype_name(model_->param_dtype()) +
                           "); build the model in f32 and enable bf16 or fp16 in the config: "
                           "parameters are then stored in 16 bits with f32 master weights");
  }
  if (settings_.gradient_accumulation_steps < 1 || settings_.micro_batch_size < 1) {
    throw ConfigError("gradient_accumulation_steps and train_micro_batch_size_per_gpu must be >= 1");
  }
  optimizer_ = optim::Optimizer::create({settings_.optimizer_type, settings_.optimizer_params},
                                        "optimizer");
  if (settings_.zero.stage >= 1 && optimizer_->type() == "Lamb") {
    throw UnsupportedError(
        "zero_optimization.stage " + std::to_string(settings_.zero.stage) +
        " with the Lamb optimizer: Lamb's trust ratio needs whole-parameter norms, which a ZeRO "
        "partition does not hold; use Adam/AdamW, or stage 0");
  }
  if (optimizer_->is_onebit()) configure_onebit();
  if (optimizer_->is_muon()) configure_muon();
  model_->zero_grad();
  // activation_checkpointing: how the model checkpoints (a warning when it does not).
  if (auto warning = configure_activation_checkpointing(*model_, settings_.activation_checkpointing);
      warning && comm_.rank() == 0) {
    std::fprintf(stderr, "zero: warning: %s\n", warning->c_str());
  }
  if (settings_.fp16.enabled) scaler_ = std::make_unique<optim::LossScaler>(settings_.fp16);
  // 16-bit training stores activations in 16 bits too (DeepSpeed runs the converted model).
  const sharding::Precision precision = resolve_precision(settings_);
  if (precision.mixed()) model_->set_activation_dtype(precision.param);
  if (!(settings_.gradient_predivide_factor > 0.0) ||
      !std::isfinite(settings_.gradient_predivide_factor)) {
    throw ConfigError("gradient_predivide_factor must be a finite number > 0, got " +
                      std::to_string(settings_.gradient_predivide_factor));
  }
  // DeepSpeed's gradient averaging split: prescale_gradients divides by the world size before
  // communicating; otherwise gradient_predivide_factor divides before and the rest follows.
  const double gradient_prescale = settings_.prescale_gradients
                                       ? 1.0 / static_cast<double>(data_parallel_size())
                                       : 1.0 / settings_.gradient_predivide_factor;
  zero_ = std::make_unique<sharding::ZeroStage>(*model_, comm_, settings_.zero,
                                                settings_.gradient_accumulation_steps,
                                                precision, gradient_prescale, settings_.aio);
  const config::ZeroConfig& z = settings_.zero;
  if (z.stage == 3 && comm_.world_size() == 1 && comm_.rank() == 0 &&
      (z.zero_quantized_weights || z.zero_quantized_gradients || z.zero_hpz_partition_size > 1)) {
    // ZeRO++ only changes what travels between ranks; say so rather than accept it silently.
    std::fprintf(stderr, "zero: note: zero_quantized_weights, zero_quantized_gradients and "
                         "zero_hpz_partition_size change nothing on one data-parallel rank "
                         "(nothing is communicated, so nothing is quantized)\n");
  }
  if (optimizer_->is_muon()) {
    // Stage 0 updates the model's flat buffers; stages 1-3 this rank's partition, whose
    // matrices' updates the ZeRO group gathers unit by unit.
    optimizer_->set_muon_units(settings_.zero.stage == 0
                                   ? muon_units(*model_)
                                   : muon_units(*model_, zero_->layout()),
                               &comm_);
  }
  if (settings_.zero.offload_optimizer.device == config::OffloadDevice::kNvme) {
    // ZeRO-Infinity: the state lives in files; only staging buffers are in host memory.
    nvme_state_ = std::make_unique<NvmeOptimizerState>(
        settings_.aio, settings_.zero.offload_optimizer, settings_.zero.sub_group_size, comm_.rank(),
        optimizer_->state_names(), zero_->update_numel(), model_->backend().pinned_host_allocator());
  } else {
    optimizer_->init_state(zero_->optimizer_backend(), zero_->update_numel(), zero_->precision().states);
  }
  if (zero_->offloads_optimizer()) {
    cpu_step_ = std::make_unique<offload::CpuOptimizerStep>(optimizer_->kind());
  }
  if (zero_->device_update_numel() > 0) {
    partial_ = std::make_unique<PartialOffload>(*zero_, *optimizer_, model_->backend());
  }
  step_scalars_ = model_->backend().zeros({2}, DType::kF64, MemoryCategory::kOther);
  schedule_ = optim::LrSchedule::create({settings_.scheduler_type, settings_.scheduler_params},
                                        optimizer_->base_lr(), "scheduler");
}

Engine::~Engine() = default;

void Engine::configure_onebit() {
  const std::string name = "optimizer.type = \"" + settings_.optimizer_type + "\"";
  if (settings_.zero.stage != 0) {
    throw ConfigError(name + " with zero_optimization.stage " +
                      std::to_string(settings_.zero.stage) +
                      ": 1-bit Adam averages whole momentum tensors across ranks, which ZeRO's "
                      "partitions do not hold (DeepSpeed does not combine them either); set "
                      "zero_optimization.stage to 0 or use Adam");
  }
  if (model_->tensor_group() != nullptr || sequence_group_ != nullptr) {
    throw UnsupportedError(name + " with tensor or sequence parallelism is not supported yet; "
                                  "use data parallelism only, or Adam");
  }
  optimizer_->set_compression_group(&comm_);
  if (comm_.rank() == 0) {
    for (const std::string& note : optimizer_->notes()) {
      std::fprintf(stderr, "zero: warning: %s\n", note.c_str());
    }
  }
}

void Engine::configure_muon() {
  const std::string name = "optimizer.type = \"" + settings_.optimizer_type + "\"";
  if (settings_.zero.offload_optimizer.device != config::OffloadDevice::kNone) {
    // settings_from_config refuses this too (config/feature_support.cpp); C++ callers get here.
    throw UnsupportedError(name + " with zero_optimization.offload_optimizer is not supported "
                                  "yet (the offloaded step is CPU Adam); remove the offload, or "
                                  "use AdamW");
  }
  if (model_->tensor_group() != nullptr) {
    throw UnsupportedError(name + " with tensor parallelism is not supported yet: each rank "
                                  "holds slices of the matrices Muon orthogonalizes whole; use "
                                  "data parallelism with any ZeRO stage, or AdamW");
  }
  if (comm_.rank() == 0) {
    for (const std::string& note : optimizer_->notes()) {
      std::fprintf(stderr, "zero: warning: %s\n", note.c_str());
    }
  }
}

double Engine::forward(const model::Batch& batch) {
  return full_sequence_loss(model_->backend().read_scalar(forward_on_device(batch)));
}

int Engine::data_parallel_size() const {
  return comm_.world_size() / static_cast<int>(settings_.sequence_parallel_size);
}

model::Batch Engine::local_batch(const model::Batch& batch) const {
  if (sequence_group_ == nullptr) return batch;
  return shard_sequence(batch, sequence_group_->rank(), sequence_group_->world_size());
}

double Engine::full_sequence_loss(double partial_loss) {
  if (sequence_group_ == nullptr) return partial_loss;
  return sequence_group_->all_reduce_scalar(partial_loss, comm::ReduceOp::kSum);
}

Tensor Engine::forward_on_device(const model::Batch& batch) {
  if (pending_) {
    throw Error("Engine::forward called twice without backward(); call backward() after each "
                "training forward, or use eval_batch() for evaluation");
  }
  if (batch.batch_size() != settings_.micro_batch_size) {
    throw ShapeError("micro-batch of " + std::to_string(batch.batch_size()) +
                     " sequences, but train_micro_batch_size_per_gpu is " +
                     std::to_string(settings_.micro_batch_size));
  }
  if (settings_.wall_clock_breakdown) timers_.start("forward");
  pending_batch_ = local_batch(
      curriculum_ ? truncate_sequences(batch, curriculum_->length_for_step(global_steps_ + 1))
                  : batch);
  pending_ = std::make_unique<model::StepContext>(
      model::StepContext{model_->backend(), pending_batch_});
  // backward() will pass the loss scale; units that do their backward inside the forward (the
  // tiled logits loss) scale by it there, so fp16 gradients are scaled before they are rounded.
  pending_->loss_grad = loss_scale();
  zero_->begin_pass(true);
  Tensor loss = model_->forward_loss(*pending_);
  // The step's loss sum stays on the device until apply_update() reads it with the norm.
  Tensor step_loss = step_scalars_.view(0, {1});
  model_->backend().add(step_loss, loss, 1.0);
  if (settings_.wall_clock_breakdown) timers_.stop("forward");
  return loss;
}

void Engine::backward() {
  if (!pending_) throw Error("Engine::backward called without a preceding forward()");
  if (settings_.wall_clock_breakdown) timers_.start("backward");
  model_->backward(*pending_, loss_scale());
  zero_->end_pass(true);
  pending_.reset();
  ++micro_steps_;
  if (settings_.wall_clock_breakdown) timers_.stop("backward");
}

bool Engine::is_gradient_accumulation_boundary() const {
  return micro_steps_ > 0 && micro_steps_ % settings_.gradient_accumulation_steps == 0;
}

bool Engine::step() {
  if (!is_gradient_accumulation_boundary()) return false;
  if (settings_.wall_clock_breakdown) timers_.start("step");
  apply_update();
  if (settings_.wall_clock_breakdown) timers_.stop("step");
  if (settings_.wall_clock_breakdown && comm_.rank() == 0 &&
      settings_.steps_per_print > 0 && global_steps_ % settings_.steps_per_print == 0) {
    std::printf("[step %lld] time (ms) | %s\n", static_cast<long long>(global_steps_),
                timers_.summary({"forward", "backward", "step"}).c_str());
    timers_.reset();
  }
  if (settings_.activation_checkpointing.profile) {
    report_checkpoint_profile(*model_, global_steps_, settings_.steps_per_print, comm_.rank() == 0);
  }
  return true;
}

void Engine::apply_update() {
  auto& be = model_->backend();
  // The counters a checkpoint stores stay within what engine_state.json accepts back (a C++
  // caller can step past what the trainer's up-front checks allow).
  if (global_steps_ >= kMaxTrainingCounter ||
      global_samples_ > kMaxTrainingCounter - settings_.train_batch_size) {
    throw ConfigError("the step or sample counter would pass 2^53 (global_steps " +
                      std::to_string(global_steps_) + ", global_samples " +
                      std::to_string(global_samples_) +
                      "); a run this long cannot be checkpointed: start a new run from a "
                      "converted checkpoint instead");
  }
  const int64_t step_number = global_steps_ + 1;
  if (comm_.rank() == 0 &&
      std::find(overflow_steps_.begin(), overflow_steps_.end(), step_number) != overflow_steps_.end()) {
    zero_->poison_next_reduction();
  }
  // The mean over every micro-batch of the global batch and the loss scale undone, applied
  // once (see backward()). Under sequence parallelism the ZeRO group's sum over a sequence
  // group's ranks adds the parts of one sequence's gradient: the mean is over dp replicas.
  // 1-bit Adam's compressed stage averages the momentum instead: each rank keeps its own mean.
  const bool local_gradients = optimizer_->next_step_compressed();
  zero_->set_local_gradients(local_gradients);
  const int averaged_ranks = local_gradients ? 1 : data_parallel_size();
  const double average = 1.0 / (static_cast<double>(settings_.gradient_accumulation_steps *
                                                    averaged_ranks) *
                                loss_scale());
  Tensor squared_norm = step_scalars_.view(1, {1});
  zero_->reduce_gradients(average, squared_norm);
  if (comm::Comm* tensor_group = model_->tensor_group(); tensor_group != nullptr) {
    // Tensor parallelism: each logical gradient element counted once (tensor_parallel_norm.h).
    reduce_tensor_parallel_squared_norm(*zero_, *model_, comm_, *tensor_group, squared_norm);
  }
  // After the tensor-parallel reduction: a pipeline stage adds the other stages' (whole) norms.
  if (squared_norm_hook_) squared_norm_hook_(squared_norm);
  // The step's one device-to-host read: the loss sum of its micro-batches and the squared
  // gradient norm, which decides overflow skipping, loss scaling and clipping on the host.
  if (sequence_group_ != nullptr) {
    // Each rank summed its part of every sequence's loss; the group's parts add up to it.
    Tensor loss_sum = step_scalars_.view(0, {1});
    sequence_group_->all_reduce(loss_sum, comm::ReduceOp::kSum);
  }
  double scalars[2] = {0.0, 0.0};
  be.copy_to_host(scalars, step_scalars_);
  be.fill(step_scalars_, 0.0);
  last_step_loss_sum_ = scalars[0];
  const double squared = scalars[1];
  last_grad_norm_ = std::sqrt(squared);
  // The norm went through an all-reduce: every rank sees the same overflow verdict.
  const bool overflow = !std::isfinite(squared);
  last_step_skipped_ = false;
  if (scaler_) {
    // The scale for the next step; at the minimum scale this stops training with a diagnosis.
    scaler_->update(overflow, step_number, [&] { return zero_->nonfinite_gradient_names(5); });
  }
  if (overflow && skip_on_overflow()) {
    last_step_skipped_ = true;
    ++skipped_steps_;
    ++global_steps_;
    global_samples_ += settings_.train_batch_size;
    zero_->zero_grad();
    return;
  }

  const double coefficient = settings_.gradient_clipping > 0.0
                                 ? optim::clip_coefficient(last_grad_norm_, settings_.gradient_clipping)
                                 : 1.0;
  if (auto betas = schedule_->betas_at(schedule_->last_batch_iteration())) {
    optimizer_->set_betas(betas->first, betas->second);
  }
  const double lr = schedule_->current_lr();
  if (cpu_step_) {
    // ZeRO-Offload: one fused host pass over the partition (clipping folded into its gradient
    // read) that also writes the 16-bit copy publish_parameters() uploads.
    const double clip = coefficient < 1.0 ? coefficient : 1.0;
    if (nvme_state_) {
      nvme_state_->step(*cpu_step_, zero_->update_params(), zero_->update_grads(),
                        zero_->offload_param_copy(), zero_->update_segments(),
                        optimizer_->next_hyper(lr), clip);
    } else if (partial_) {
      // Partial offload: the first units on the device, the rest on the host, one step.
      const int64_t split = zero_->device_update_numel();
      partial_->step(*optimizer_, optimizer_->next_hyper(lr), coefficient);
      std::vector<Tensor> state;
      for (Tensor& s : optimizer_->state_buffers()) state.push_back(s.view(split, {s.numel() - split}));
      Tensor& copy = zero_->offload_param_copy();
      offload::CpuStepBuffers buffers{zero_->host_master(), zero_->host_grads(), state,
                                      copy.defined() ? copy.view(split, {copy.numel() - split}) : Tensor()};
      cpu_step_->step(buffers, zero_->host_segments(), optimizer_->next_hyper(lr), 1.0, clip);
    } else {
      offload::CpuStepBuffers buffers{zero_->update_params(), zero_->update_grads(),
                                      optimizer_->state_buffers(), zero_->offload_param_copy()};
      cpu_step_->step(buffers, zero_->update_segments(), optimizer_->next_hyper(lr), 1.0, clip);
    }
    optimizer_->finish_external_step(lr);
    if (zero_->offload_param_copy().defined()) zero_->offloaded_step_done();
  } else {
    // Clipping rides in the update's gradient read (the bits of scale-then-update, one pass
    // over the gradients fewer); with 16-bit parameters the update also writes their 16-bit copy
    // (ZeroStage::fused_param_copy), and held unit gradients are updated unit by unit.
    Tensor* param_copy = zero_->fused_param_copy();
    optimizer_->step(be, zero_->update_params(), zero_->update_pieces(), lr,
                     coefficient < 1.0 ? coefficient : 1.0, param_copy);
    if (param_copy != nullptr) zero_->param_copy_written();
  }
  zero_->publish_parameters(step_number);
  schedule_->step();
  zero_->zero_grad();
  ++global_steps_;
  global_samples_ += settings_.train_batch_size;
}

double Engine::train_batch(const std::function<model::Batch()>& next) {
  if (runner_ != nullptr) return runner_->train_batch(next);
  if (micro_steps_ % settings_.gradient_accumulation_steps != 0) {
    throw Error("Engine::train_batch in the middle of a gradient-accumulation window (" +
                std::to_string(micro_steps_ % settings_.gradient_accumulation_steps) + " of " +
                std::to_string(settings_.gradient_accumulation_steps) +
                " micro-batches done); finish it with forward/backward/step first");
  }
  for (int64_t i = 0; i < settings_.gradient_accumulation_steps; ++i) {
    forward_on_device(next());
    backward();
  }
  step();
  return last_step_loss_sum_ / static_cast<double>(settings_.gradient_accumulation_steps);
}

double Engine::eval_batch(const model::Batch& batch) {
  if (runner_ != nullptr) return runner_->eval_batch(batch);
  if (pending_) throw Error("Engine::eval_batch between forward() and backward(); finish the step first");
  zero_->begin_pass(false);
  const double loss = model_->evaluate(local_batch(batch));
  zero_->end_pass(false);
  return full_sequence_loss(loss);
}

Tensor Engine::gather_parameters() {
  Tensor full = model_->backend().empty({model_->num_parameters()}, DType::kF32,
                                        MemoryCategory::kOther);
  zero_->gather_parameters(full);
  return full;
}

double Engine::loss_scale() const { return scaler_ ? scaler_->scale() : 1.0; }

bool Engine::skip_on_overflow() const {
  return scaler_ != nullptr || (settings_.bf16.enabled && settings_.bf16.check_grad_overflow);
}

std::vector<std::pair<std::string, Tensor>> Engine::optimizer_state_tensors() {
  if (nvme_state_) return nvme_state_->read_all();
  auto state = optimizer_->state_tensors();
  if (partial_) partial_->download_state(state);  // the device part, mirrored for checkpoints
  return state;
}

double Engine::get_lr() const { return schedule_->current_lr(); }

}  // namespace zero::engine

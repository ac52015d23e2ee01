// Model: the ordered list of units plus the two flat buffers (parameters, gradients) that every
// unit's parameters are views into. Unit i's parameters occupy one contiguous range, so later
// layers (ZeRO partitioning, offload, checkpoint slices) can work on ranges of one buffer.
//
// Ownership: the Model owns its units and buffers; the Backend must outlive the Model.
// Thread safety: one thread drives a Model.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/activation_checkpointer.h"
#include "model/kv_cache.h"
#include "model/router_balance.h"
#include "model/transformer_config.h"
#include "model/unit.h"
#include "model/unit_value_source.h"

namespace zero::model {

// Called around every unit's forward and backward (ZeRO-3 gathers and releases parameters
// there; ZeRO-2/3 reduce a unit's gradients once its backward is done). Indices are unit
// positions in the model.
class UnitObserver {
 public:
  virtual ~UnitObserver() = default;
  virtual void before_forward(size_t unit) = 0;
  virtual void after_forward(size_t unit) = 0;
  virtual void before_backward(size_t unit) = 0;
  virtual void after_backward(size_t unit) = 0;
};

class Model {
 public:
  // Parameters and gradients are stored in `param_dtype` (f32 or f64 on the CPU backend).
  Model(backend::Backend& backend, DType param_dtype);

  // Appends a unit (before finalize()). Units run forward in insertion order.
  Unit& add_unit(std::unique_ptr<Unit> unit);
  // Lays out and allocates the flat buffers and binds every parameter view. Parameters are
  // zero until initialised or loaded; gradients are zero.
  void finalize();
  // finalize() for inference (generation): the parameter buffer only; no gradient buffer is
  // allocated and every gradient view stays unbound (backward is an error).
  void finalize_for_inference();
  bool finalized() const { return finalized_; }
  // DeepSpeed's zero.Init: lays the parameters out as finalize() does but allocates neither flat
  // buffer; every view stays unbound and the initial values come from `values`, unit by unit,
  // when the sharding layer (ZeRO-3, sharding/zero_stage.h) builds its partitions. Such a model
  // only trains under ZeRO stage 3.
  void finalize_partitioned(std::unique_ptr<UnitValueSource> values);
  // The source of a model finalized partitioned, until the sharding layer took its values (null
  // otherwise); release_value_source() frees it.
  UnitValueSource* value_source() const { return value_source_.get(); }
  void release_value_source() { value_source_.reset(); }

  // Runs every unit forward on `ctx.batch` (uploaded to the device first unless
  // ctx.device_batch is already set); returns the loss (mean over non-ignored targets) as an
  // f64 [1] tensor on the device, without reading it on the host.
  Tensor forward_loss(StepContext& ctx);
  // forward_loss() and one counted device-to-host read of the loss.
  double forward(StepContext& ctx);
  // A pipeline stage's passes (engine/pipeline_engine.h): the units forward on `x`, the
  // previous stage's activation (undefined when the first unit is the embedding), returning the
  // last unit's output (the loss on the last stage); and backward from `dy` (undefined when
  // the last unit is the loss: ctx.loss_grad is read), returning d(objective)/d(x). Observers
  // and activation checkpointing act as in forward_loss()/backward(); ctx.device_batch must be
  // set (upload_batch) when a unit reads the batch.
  Tensor forward_stage(StepContext& ctx, const Tensor& x);
  Tensor backward_stage(StepContext& ctx, const Tensor& dy);
  // Runs every unit backward; `loss_grad` is d(objective)/d(loss) (1, or a loss scale, or
  // 1/gradient_accumulation_steps). Gradients accumulate into the flat gradient buffer.
  void backward(StepContext& ctx, double loss_grad = 1.0);
  // forward + backward of one micro-batch; returns the loss.
  double forward_backward(const Batch& batch, double loss_grad = 1.0);
  // Loss without keeping anything for backward.
  double evaluate(const Batch& batch);
  // Generation (model/kv_cache.h): runs every unit on `tokens` (host i32/i64 [B, T], ids checked
  // against the vocabulary) at positions cache.length() .. cache.length() + T - 1, appending
  // every block's keys and values to `cache`, and returns the logits [B, V] of each sequence's
  // last position (on the device, in the activation dtype). The caller advances the cache.
  // UnsupportedError on a model split over sequence or tensor groups; ShapeError when the cache
  // was made for another batch size or has no room for T more positions.
  Tensor next_token_logits(const Tensor& tokens, KvCache& cache);
  // Zeroes the flat gradient buffer (a no-op once it was released).
  void zero_grad();

  // ---- storage control for ZeRO (sharding/) ----------------------------------------------
  // Observer of unit boundaries (null: none): the sharding layer's slot. Not owned; must outlive
  // its use.
  void set_observer(UnitObserver* observer);
  // Further observers (the flops profiler): their before_* run after the sharding observer's and
  // their after_* before it (in reverse order of adding), so they bracket only the unit's own
  // work. Not owned; remove_observer() before it is destroyed.
  void add_observer(UnitObserver* observer);
  void remove_observer(UnitObserver* observer);
  // Points unit `u`'s parameter (gradient) views into `buffer`, a contiguous 1-D tensor whose
  // element 0 corresponds to flat offset unit.flat_begin() (it may be longer: padding). An
  // undefined tensor unbinds them (use before the next bind is an error).
  void bind_unit_params(size_t u, const Tensor& buffer);
  void bind_unit_grads(size_t u, const Tensor& buffer);
  // Frees the flat parameter (gradient) buffer after the sharding layer took over the storage;
  // every view is unbound until bound again per unit.
  void release_flat_params();
  void release_flat_grads();
  // The unit that owns parameter `p` (throws when `p` is not a parameter of this model).
  size_t unit_of(const Parameter* p) const;

  backend::Backend& backend() { return backend_; }
  DType param_dtype() const { return param_dtype_; }
  // The dtype activations are stored in; unset (the default) means param_dtype(). Mixed
  // precision sets bf16/fp16: the backend then computes each op in f32 and rounds what it
  // stores, as a GPU run does. forward()/backward() copy it into the StepContext.
  void set_activation_dtype(std::optional<DType> dtype) { activation_dtype_ = dtype; }
  std::optional<DType> activation_dtype() const { return activation_dtype_; }
  // Activation checkpointing (Hugging Face's gradient_checkpointing): a training forward keeps
  // only the input of each recomputable unit (the transformer blocks) and backward re-runs the
  // unit's forward just before its backward. Gradients are bit-identical; activation memory
  // drops from every block's intermediates to one hidden state per block (per segment of
  // CheckpointingOptions::segment_units blocks: the pipeline's activation_checkpoint_interval).
  void set_activation_checkpointing(bool enabled) { activation_checkpointing_ = enabled; }
  bool activation_checkpointing() const { return activation_checkpointing_; }
  // HOW checkpointing works (DeepSpeed's activation_checkpointing section, per-unit choice,
  // host copies, partitioning): model/activation_checkpointer.h. Options are validated against
  // this model's units (ConfigError). The partition group is not owned.
  void set_checkpointing_options(const CheckpointingOptions& options);
  void set_activation_partition_group(comm::Comm* group) {
    checkpointer_->set_partition_group(group);
  }
  ActivationCheckpointer& activation_checkpointer() { return *checkpointer_; }
  // Tiled compute (model/sequence_tiling.h): row shards of each block's MLP and of the LM head +
  // loss; default untiled. forward() copies it into the StepContext.
  void set_sequence_tiling(SequenceTiling tiling) { sequence_tiling_ = tiling; }
  const SequenceTiling& sequence_tiling() const { return sequence_tiling_; }
  // Ulysses sequence parallelism: `group` holds the ranks that each run a consecutive part of
  // every sequence (rank s has tokens [s * T_local, (s + 1) * T_local)); attention exchanges
  // heads for sequence over it (model/ulysses_attention.h). Null or size 1: whole sequences.
  // Not owned; must outlive its use.
  void set_sequence_group(comm::Comm* group) { sequence_group_ = group; }
  comm::Comm* sequence_group() const { return sequence_group_; }
  // Tensor parallelism (model/tensor_parallel.h): `group` holds the ranks that each hold a part
  // of every block (the model must have been built for that group's size and this rank). Not
  // owned; must outlive its use.
  void set_tensor_group(comm::Comm* group) { tensor_group_ = group; }
  comm::Comm* tensor_group() const { return tensor_group_; }
  const std::vector<std::unique_ptr<Unit>>& units() const { return units_; }
  // All parameters, in flat-buffer order.
  std::vector<Parameter*> parameters();
  Parameter* find_parameter(const std::string& name);  // nullptr when absent
  Parameter& parameter(const std::string& name);       // throws Error naming the parameter
  int64_t num_parameters() const { return num_elements_; }
  Tensor& flat_params() { return params_; }
  Tensor& flat_grads() { return grads_; }

  // The transformer shape this model was built from, when it was built from one.
  const std::optional<TransformerConfig>& config() const { return config_; }
  void set_config(TransformerConfig config) { config_ = std::move(config); }

 private:
  backend::Backend& backend_;
  DType param_dtype_;
  std::optional<DType> activation_dtype_;
  bool activation_checkpointing_ = false;
  SequenceTiling sequence_tiling_;
  comm::Comm* sequence_group_ = nullptr;
  comm::Comm* tensor_group_ = nullptr;
  std::unique_ptr<ActivationCheckpointer> checkpointer_;  // saved inputs of checkpointed units
  // The last forward_loss()'s load-balancing loss (Mixtral with output_router_logits), kept for
  // its backward.
  std::unique_ptr<RouterBalance> router_balance_;
  std::vector<std::unique_ptr<Unit>> units_;
  Tensor params_;
  Tensor grads_;
  std::unique_ptr<UnitValueSource> value_source_;  // finalize_partitioned() only
  int64_t num_elements_ = 0;
  std::optional<TransformerConfig> config_;
  // forward()/backward() call observer_: the sharding observer alone, or a chain of it and the
  // added observers (model_observers.cpp).
  UnitObserver* observer_ = nullptr;
  UnitObserver* sharding_observer_ = nullptr;
  std::vector<UnitObserver*> extra_observers_;
  std::shared_ptr<UnitObserver> observer_chain_;
  void rebuild_observer_chain();
  bool finalized_ = false;
  bool with_gradients_ = true;  // false: finalize_for_inference()
};

}  // namespace zero::model

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
#include "model/transformer_config.h"
#include "model/unit.h"

namespace zero::model {

class Model {
 public:
  // Parameters and gradients are stored in `param_dtype` (f32 or f64 on the CPU backend).
  Model(backend::Backend& backend, DType param_dtype);

  // Appends a unit (before finalize()). Units run forward in insertion order.
  Unit& add_unit(std::unique_ptr<Unit> unit);
  // Lays out and allocates the flat buffers and binds every parameter view. Parameters are
  // zero until initialised or loaded; gradients are zero.
  void finalize();
  bool finalized() const { return params_.defined(); }

  // Runs every unit forward on `ctx.batch`; returns the loss (mean over non-ignored targets).
  double forward(StepContext& ctx);
  // Runs every unit backward; `loss_grad` is d(objective)/d(loss) (1, or a loss scale, or
  // 1/gradient_accumulation_steps). Gradients accumulate into the flat gradient buffer.
  void backward(StepContext& ctx, double loss_grad = 1.0);
  // forward + backward of one micro-batch; returns the loss.
  double forward_backward(const Batch& batch, double loss_grad = 1.0);
  // Loss without keeping anything for backward.
  double evaluate(const Batch& batch);
  void zero_grad();

  backend::Backend& backend() { return backend_; }
  DType param_dtype() const { return param_dtype_; }
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
  std::vector<std::unique_ptr<Unit>> units_;
  Tensor params_;
  Tensor grads_;
  int64_t num_elements_ = 0;
  std::optional<TransformerConfig> config_;
  Tensor last_output_;
};

}  // namespace zero::model

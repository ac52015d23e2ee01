// Unit: one step of the model's ordered list (embedding, a transformer block, the head + loss,
// or a user's own type). A unit declares its parameters while it is constructed; the Model lays
// them out in one flat buffer and binds the views. forward() keeps what backward() needs inside
// the unit; backward() consumes it.
//
// Data flow: forward(x) gets the previous unit's output (an undefined Tensor for the first unit)
// and returns its own output; backward(dy) gets d(objective)/d(output) and returns
// d(objective)/d(input) (undefined for the first unit). The last unit returns the loss as an f64
// tensor [1] on the backend's device (nobody reads it on the host unless asked: Model::forward
// does, Model::forward_loss does not), and its backward gets an undefined dy and reads
// d(objective)/d(loss) from ctx.loss_grad, a host number.
// Parameter gradients accumulate (+=) into the bound gradient views.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "model/parameter.h"
#include "model/step_context.h"

namespace zero::model {

class Unit {
 public:
  explicit Unit(std::string name) : name_(std::move(name)) {}
  virtual ~Unit() = default;
  Unit(const Unit&) = delete;
  Unit& operator=(const Unit&) = delete;

  const std::string& name() const { return name_; }
  virtual std::string kind() const = 0;

  virtual Tensor forward(StepContext& ctx, const Tensor& x) = 0;
  virtual Tensor backward(StepContext& ctx, const Tensor& dy) = 0;
  // Frees everything forward() saved (called after backward and after evaluation).
  virtual void release_activations() = 0;
  // Whether forward() can be re-run in backward from its input alone, giving bit-identical
  // saved activations (no randomness, no state): activation checkpointing then keeps only the
  // input between forward and backward.
  virtual bool recomputable() const { return false; }

  std::vector<Parameter>& parameters() { return parameters_; }
  const std::vector<Parameter>& parameters() const { return parameters_; }
  // The [begin, end) element range of this unit's parameters in the flat buffers.
  int64_t flat_begin() const;
  int64_t flat_end() const;
  int64_t flat_numel() const { return flat_end() - flat_begin(); }
  // Parameters of other units this unit reads in forward and accumulates into in backward (a
  // tied LM head reads the token embedding). ZeRO-3 gathers their units too.
  virtual std::vector<const Parameter*> borrowed_parameters() const { return {}; }

 protected:
  // Declares a parameter (constructor only: the vector must not grow after layout). Returns its
  // index for param()/grad().
  size_t add_parameter(ParamSpec spec);
  Tensor& param(size_t index) { return parameters_[index].value; }
  Tensor& grad(size_t index) { return parameters_[index].grad; }
  // A view spanning parameters first..last (adjacent in the flat buffer), reshaped to `shape`:
  // how q/k/v projections become one fused matrix.
  Tensor fused_param(size_t first, size_t last, const Shape& shape);
  Tensor fused_grad(size_t first, size_t last, const Shape& shape);

 private:
  std::string name_;
  std::vector<Parameter> parameters_;
};

}  // namespace zero::model

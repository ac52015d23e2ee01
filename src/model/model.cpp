#include "model/model.h"

#include <set>

#include "comm/comm.h"
#include "core/check.h"
#include "core/checked_math.h"
#include "core/error.h"

namespace zero::model {

Model::Model(backend::Backend& backend, DType param_dtype)
    : backend_(backend),
      param_dtype_(param_dtype),
      checkpointer_(std::make_unique<ActivationCheckpointer>(backend)) {}

namespace {
std::vector<bool> recomputable_units(const std::vector<std::unique_ptr<Unit>>& units) {
  std::vector<bool> out;
  for (const auto& unit : units) out.push_back(unit->recomputable());
  return out;
}
}  // namespace

void Model::set_checkpointing_options(const CheckpointingOptions& options) {
  checkpointer_->set_options(options, recomputable_units(units_));
}

Unit& Model::add_unit(std::unique_ptr<Unit> unit) {
  ZERO_CHECK(!finalized(), "add_unit() after finalize()");
  units_.push_back(std::move(unit));
  return *units_.back();
}

void Model::finalize() {
  ZERO_CHECK(!finalized(), "finalize() called twice");
  if (units_.empty()) throw Error("a model needs at least one unit");
  // Unit ranges start on 16-element boundaries (64 bytes in f32) so per-unit work is aligned;
  // parameters inside a unit are packed so adjacent ones can be fused into one matrix.
  constexpr int64_t kUnitAlignment = 16;
  std::set<std::string> names;
  int64_t offset = 0;
  for (auto& unit : units_) {
    const std::string what = "the parameter count of the model (at unit " + unit->name() + ")";
    offset = checked_sum(offset, kUnitAlignment - 1, what) / kUnitAlignment * kUnitAlignment;
    for (auto& p : unit->parameters()) {
      if (!names.insert(p.spec.name).second) {
        throw Error("two parameters are named \"" + p.spec.name + "\"; names must be unique");
      }
      p.flat_offset = offset;
      offset = checked_sum(offset, p.numel(), what);
    }
  }
  num_elements_ = offset;
  finalized_ = true;
  if (value_source_) return;  // finalize_partitioned(): no flat buffers
  params_ = backend_.zeros({offset}, param_dtype_, MemoryCategory::kParams);
  if (with_gradients_) grads_ = backend_.zeros({offset}, param_dtype_, MemoryCategory::kGrads);
  for (auto& unit : units_) {
    for (auto& p : unit->parameters()) {
      p.value = params_.view(p.flat_offset, p.spec.shape);
      if (with_gradients_) p.grad = grads_.view(p.flat_offset, p.spec.shape);
    }
  }
}

void Model::finalize_for_inference() {
  with_gradients_ = false;
  finalize();
}

void Model::finalize_partitioned(std::unique_ptr<UnitValueSource> values) {
  ZERO_CHECK(values != nullptr, "finalize_partitioned() needs a value source");
  value_source_ = std::move(values);
  finalize();
}

Tensor Model::forward_loss(StepContext& ctx) {
  ZERO_CHECK(finalized(), "forward() before finalize()");
  ctx.activation_dtype = activation_dtype_;
  ctx.sequence_tiling = sequence_tiling_;
  ctx.sequence_group = sequence_group_;
  ctx.tensor_group = tensor_group_;
  ctx.sequence_offset = sequence_group_ != nullptr ? sequence_group_->rank() * ctx.batch.seq_len() : 0;
  if (!ctx.device_batch.defined()) {
    ctx.device_batch = upload_batch(
        backend_, ctx.batch,
        config_ ? std::optional<int64_t>(config_->vocab_size) : std::nullopt);
  }
  router_balance_.reset();
  if (config_ && config_->is_moe() && config_->router_aux_loss_coef > 0.0 &&
      ctx.kv_cache == nullptr) {
    if (sequence_group_ != nullptr && sequence_group_->world_size() > 1) {
      throw UnsupportedError(
          "the routers' load-balancing loss (output_router_logits: true in config.json) with "
          "sequence parallelism is not supported yet: it averages over whole sequences; set "
          "output_router_logits to false or sequence_parallel_size to 1");
    }
    router_balance_ = std::make_unique<RouterBalance>(backend_, config_->num_experts,
                                                      config_->router_aux_loss_coef);
    ctx.router_balance = router_balance_.get();
  }
  Tensor x = forward_stage(ctx, Tensor());
  if (!x.defined() || x.numel() != 1 || x.dtype() != DType::kF64 ||
      x.device() != backend_.device()) {
    throw Error("the last unit (" + units_.back()->name() + ") must return the loss as an f64 "
                "tensor [1] on the backend's device");
  }
  if (router_balance_) {
    // Hugging Face's loss: cross-entropy + router_aux_loss_coef * aux (model/router_balance.h).
    const double aux = router_balance_->finish();
    Tensor term = backend_.empty({1}, DType::kF64, MemoryCategory::kActivations);
    backend_.copy_from_host(term, &aux);
    backend_.add(x, term, 1.0);
  }
  return x;
}

Tensor Model::forward_stage(StepContext& ctx, const Tensor& input) {
  ZERO_CHECK(finalized(), "forward_stage() before finalize()");
  ctx.activation_dtype = activation_dtype_;
  ctx.sequence_tiling = sequence_tiling_;
  ctx.sequence_group = sequence_group_;
  ctx.tensor_group = tensor_group_;
  checkpointer_->begin_forward(recomputable_units(units_), ctx.training && activation_checkpointing_);
  Tensor x = input;
  for (size_t i = 0; i < units_.size(); ++i) {
    if (observer_ != nullptr) observer_->before_forward(i);
    const bool checkpointed = checkpointer_->checkpoints(i);
    if (checkpointed && checkpointer_->segment_of(i).first == i) checkpointer_->begin_segment(i, x);
    x = units_[i]->forward(ctx, x);
    if (checkpointed && checkpointer_->segment_of(i).last == i) {
      checkpointer_->end_segment(checkpointer_->segment_of(i), units_);
    }
    if (observer_ != nullptr) observer_->after_forward(i);
  }
  return x;
}

double Model::forward(StepContext& ctx) { return backend_.read_scalar(forward_loss(ctx)); }

void Model::backward(StepContext& ctx, double loss_grad) {
  ctx.loss_grad = loss_grad;
  backward_stage(ctx, Tensor());  // the loss unit reads ctx.loss_grad
}

Tensor Model::backward_stage(StepContext& ctx, const Tensor& output_grad) {
  Tensor dy = output_grad;
  for (size_t i = units_.size(); i-- > 0;) {
    if (observer_ != nullptr) observer_->before_backward(i);
    // Recompute a checkpointed segment's activations before its last unit's backward (that
    // unit's parameters are in place: ZeRO-3 gathered them in before_backward).
    if (checkpointer_->checkpoints(i)) {
      const CheckpointSegment& segment = checkpointer_->segment_of(i);
      if (segment.last == i && checkpointer_->holds(segment.first)) {
        checkpointer_->recompute(segment, units_, ctx);
      }
    }
    dy = units_[i]->backward(ctx, dy);
    units_[i]->release_activations();
    if (observer_ != nullptr) observer_->after_backward(i);
  }
  return dy;
}

double Model::forward_backward(const Batch& batch, double loss_grad) {
  StepContext ctx{backend_, batch};
  const double loss = forward(ctx);
  backward(ctx, loss_grad);
  return loss;
}

Tensor Model::next_token_logits(const Tensor& tokens, KvCache& cache) {
  ZERO_CHECK(finalized(), "next_token_logits() before finalize()");
  if ((sequence_group_ != nullptr && sequence_group_->world_size() > 1) ||
      (tensor_group_ != nullptr && tensor_group_->world_size() > 1)) {
    throw UnsupportedError("generation runs a whole model on one rank; this one is split over "
                           "sequence or tensor parallel ranks");
  }
  if (tokens.dim() != 2 || tokens.size(0) != cache.batch_size()) {
    throw ShapeError("next_token_logits: tokens " + tokens.describe() + " for a cache of " +
                     std::to_string(cache.batch_size()) + " sequences; pass [B, T] ids");
  }
  if (tokens.size(1) < 1 || tokens.size(1) > cache.capacity() - cache.length()) {
    throw ShapeError("next_token_logits: " + std::to_string(tokens.size(1)) + " new positions after " +
                     std::to_string(cache.length()) + " do not fit the cache's " +
                     std::to_string(cache.capacity()));
  }
  const DType activations = activation_dtype_.value_or(param_dtype_);
  if (cache.dtype() != activations) {
    throw ShapeError(std::string("next_token_logits: the cache holds ") +
                     dtype_name(cache.dtype()) + " but the model's activations are " +
                     dtype_name(activations) + "; make the cache in the activation dtype");
  }
  Batch batch{tokens, Tensor::zeros_host(tokens.shape(), DType::kI64)};
  for (int64_t i = 0; i < batch.targets.numel(); ++i) batch.targets.data<int64_t>()[i] = kIgnoreIndex;
  StepContext ctx{backend_, batch};
  ctx.training = false;
  ctx.kv_cache = &cache;
  ctx.sequence_offset = cache.length();
  // The head returns logits here and never reads targets: only the ids go to the device.
  ctx.device_batch = upload_tokens(
      backend_, tokens, config_ ? std::optional<int64_t>(config_->vocab_size) : std::nullopt);
  Tensor logits = forward_stage(ctx, Tensor());
  for (auto& unit : units_) unit->release_activations();
  return logits;
}

double Model::evaluate(const Batch& batch) {
  StepContext ctx{backend_, batch};
  ctx.training = false;
  const double loss = forward(ctx);
  for (auto& unit : units_) unit->release_activations();
  checkpointer_->clear();
  return loss;
}

void Model::zero_grad() {
  if (grads_.defined()) backend_.fill(grads_, 0.0);
}

namespace {
void bind_views(Unit& unit, const Tensor& buffer, bool gradient) {
  const int64_t begin = unit.flat_begin();
  if (buffer.defined()) {
    ZERO_CHECK(buffer.is_contiguous() && buffer.dim() == 1 && buffer.numel() >= unit.flat_numel(),
               "unit buffer " << buffer.describe() << " too small for unit " << unit.name() << " ("
                              << unit.flat_numel() << " elements)");
  }
  for (auto& p : unit.parameters()) {
    Tensor view = buffer.defined() ? buffer.view(p.flat_offset - begin, p.spec.shape) : Tensor();
    (gradient ? p.grad : p.value) = view;
  }
}
}  // namespace

void Model::bind_unit_params(size_t u, const Tensor& buffer) {
  ZERO_CHECK(u < units_.size(), "unit index " << u << " out of range");
  bind_views(*units_[u], buffer, false);
}

void Model::bind_unit_grads(size_t u, const Tensor& buffer) {
  ZERO_CHECK(u < units_.size(), "unit index " << u << " out of range");
  bind_views(*units_[u], buffer, true);
}

void Model::release_flat_params() {
  for (size_t u = 0; u < units_.size(); ++u) bind_unit_params(u, Tensor());
  params_ = Tensor();
}

void Model::release_flat_grads() {
  for (size_t u = 0; u < units_.size(); ++u) bind_unit_grads(u, Tensor());
  grads_ = Tensor();
}

size_t Model::unit_of(const Parameter* p) const {
  for (size_t u = 0; u < units_.size(); ++u) {
    for (const auto& q : units_[u]->parameters()) {
      if (&q == p) return u;
    }
  }
  throw Error("parameter is not part of this model");
}

std::vector<Parameter*> Model::parameters() {
  std::vector<Parameter*> out;
  for (auto& unit : units_) {
    for (auto& p : unit->parameters()) out.push_back(&p);
  }
  return out;
}

Parameter* Model::find_parameter(const std::string& name) {
  for (auto& unit : units_) {
    for (auto& p : unit->parameters()) {
      if (p.spec.name == name) return &p;
    }
  }
  return nullptr;
}

Parameter& Model::parameter(const std::string& name) {
  Parameter* p = find_parameter(name);
  if (p == nullptr) throw Error("the model has no parameter named \"" + name + "\"");
  return *p;
}

}  // namespace zero::model

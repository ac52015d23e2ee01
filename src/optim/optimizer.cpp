#include "optim/optimizer.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "core/error.h"
#include "optim/json_params.h"

namespace zero::optim {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

std::unique_ptr<Optimizer> Optimizer::create(const OptimizerSpec& spec, const std::string& source) {
  auto opt = std::make_unique<Optimizer>();
  const std::string type = lower(spec.type);
  JsonParams p(spec.params, source + ".params");
  backend::OptimizerHyper& h = opt->hyper_;
  if (type == "adam" || type == "adamw") {
    // DeepSpeed's FusedAdam: "Adam" means AdamW (decoupled decay) unless adam_w_mode is false.
    opt->kind_ = backend::OptimizerKind::kAdam;
    h.lr = p.number("lr", 1e-3, true);
    std::tie(h.beta1, h.beta2) = p.betas(0.9, 0.999);
    h.eps = p.number("eps", 1e-8, true);
    h.weight_decay = p.number("weight_decay", 0.0);
    h.bias_correction = p.boolean("bias_correction", true);
    h.adam_w_mode = type == "adamw" || p.boolean("adam_w_mode", true);
    p.accept("adam_w_mode");
    p.boolean("torch_adam", false);  // which kernel PyTorch would use; no effect here
    if (p.boolean("amsgrad", false)) {
      throw UnsupportedError(source + ".params.amsgrad = true is not supported yet by zero.cpp");
    }
    opt->state_names_ = {"exp_avg", "exp_avg_sq"};
  } else if (type == "lamb") {
    opt->kind_ = backend::OptimizerKind::kLamb;
    h.lr = p.number("lr", 1e-3, true);
    std::tie(h.beta1, h.beta2) = p.betas(0.9, 0.999);
    h.eps = p.number("eps", 1e-8, true);
    h.weight_decay = p.number("weight_decay", 0.0);
    h.bias_correction = p.boolean("bias_correction", true);
    h.lamb_max_coeff = p.number("max_coeff", 10.0, true);
    h.lamb_min_coeff = p.number("min_coeff", 0.01);
    if (p.number("max_grad_norm", 0.0) > 0.0) {
      throw UnsupportedError(source + ".params.max_grad_norm > 0 is not supported yet; use the "
                                      "top-level gradient_clipping instead");
    }
    opt->state_names_ = {"exp_avg", "exp_avg_sq"};
  } else if (type == "lion") {
    opt->kind_ = backend::OptimizerKind::kLion;
    h.lr = p.number("lr", 1e-4, true);
    std::tie(h.beta1, h.beta2) = p.betas(0.9, 0.99);
    h.weight_decay = p.number("weight_decay", 0.0);
    opt->state_names_ = {"exp_avg"};
  } else if (type == "adagrad") {
    opt->kind_ = backend::OptimizerKind::kAdagrad;
    h.lr = p.number("lr", 1e-2, true);
    h.eps = p.number("eps", 1e-10, true);
    h.weight_decay = p.number("weight_decay", 0.0);
    opt->state_names_ = {"sum_sq"};
  } else if (type == "onebitadam" || type == "zerooneadam" || type == "onebitlamb" ||
             type == "muadam" || type == "muadamw" || type == "musgd" || type == "muon") {
    throw UnsupportedError(source + ".type = \"" + spec.type + "\" is not supported yet by zero.cpp "
                                    "(supported: Adam, AdamW, Lamb, Lion, Adagrad)");
  } else {
    throw ConfigError(source + ".type = \"" + spec.type +
                      "\" is not a DeepSpeed optimizer; use Adam, AdamW, Lamb, Lion or Adagrad");
  }
  p.reject_unknown();
  opt->type_ = spec.type;
  return opt;
}

void Optimizer::init_state(backend::Backend& backend, int64_t numel, DType dtype) {
  if (dtype != DType::kF32 && dtype != DType::kBF16) {
    throw UnsupportedError(std::string("optimizer states in ") + dtype_name(dtype) +
                           " are not supported; use f32 or bf16");
  }
  state_.clear();
  for (size_t i = 0; i < state_names_.size(); ++i) {
    state_.push_back(backend.zeros({numel}, dtype, MemoryCategory::kOptimizer));
  }
}

void Optimizer::step(backend::Backend& backend, Tensor& params, const Tensor& grads,
                     std::span<const backend::ParamSegment> segments, double lr,
                     double grad_scale, Tensor* param_copy) {
  const backend::UpdatePiece whole{0, grads, {segments.begin(), segments.end()}};
  step(backend, params, std::span<const backend::UpdatePiece>(&whole, 1), lr, grad_scale,
       param_copy);
}

void Optimizer::step(backend::Backend& backend, Tensor& params,
                     std::span<const backend::UpdatePiece> pieces, double lr, double grad_scale,
                     Tensor* param_copy) {
  hyper_.lr = lr;
  backend::OptimizerHyper hyper = hyper_;
  hyper.grad_scale = grad_scale;
  const auto update = [&](std::span<Tensor> state) {
    for (const backend::UpdatePiece& piece : pieces) {
      const int64_t n = piece.grads.numel();
      // The whole buffer needs no views (and keeps one launch for the one-piece case).
      const bool whole = piece.offset == 0 && n == params.numel();
      Tensor piece_params = whole ? params : params.view(piece.offset, {n});
      std::vector<Tensor> piece_state;
      for (Tensor& s : state) piece_state.push_back(whole ? s : s.view(piece.offset, {n}));
      if (param_copy != nullptr) {
        Tensor copy = whole ? *param_copy : param_copy->view(piece.offset, {n});
        backend.optimizer_update_with_copy(kind_, piece_params, piece.grads, piece_state,
                                           piece.segments, hyper, copy);
      } else {
        backend.optimizer_update(kind_, piece_params, piece.grads, piece_state, piece.segments,
                                 hyper);
      }
    }
  };
  if (!state_.empty() && state_.front().dtype() != DType::kF32) {
    std::vector<Tensor> wide;
    for (const Tensor& s : state_) {
      wide.push_back(backend.empty({s.numel()}, DType::kF32, MemoryCategory::kWorkspace));
      backend.copy(wide.back(), s);
    }
    update(wide);
    for (size_t i = 0; i < state_.size(); ++i) backend.copy(state_[i], wide[i]);
  } else {
    update(state_);
  }
  ++hyper_.step;
}

std::vector<std::pair<std::string, Tensor>> Optimizer::state_tensors() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < state_.size(); ++i) out.emplace_back(state_names_[i], state_[i]);
  return out;
}

nlohmann::json Optimizer::hyper_json() const {
  return {{"lr", hyper_.lr},         {"beta1", hyper_.beta1},
          {"beta2", hyper_.beta2},   {"eps", hyper_.eps},
          {"weight_decay", hyper_.weight_decay}, {"bias_correction", hyper_.bias_correction},
          {"adam_w_mode", hyper_.adam_w_mode}};
}

}  // namespace zero::optim

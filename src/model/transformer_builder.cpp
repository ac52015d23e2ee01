#include "model/transformer_builder.h"

#include <cmath>
#include <random>

#include "core/checked_math.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "model/config_limits.h"
#include "model/embedding_unit.h"
#include "model/lm_head_unit.h"
#include "model/transformer_block.h"

namespace zero::model {

namespace {

// Refuses, before any unit is built or buffer allocated, a model whose parameters and gradients
// alone exceed this machine's memory (on the CPU backend they live in host memory). Linux
// overcommits, so allocating would "succeed" and the process be killed while zero-filling.
void check_model_fits_memory(const TransformerConfig& config, const backend::Backend& backend,
                             DType param_dtype, const std::string& source) {
  if (!backend.device().is_cpu()) return;
  const int64_t params = checked_parameter_count(config, source);
  const std::string what = source + ": the memory for the model's parameters and gradients";
  const int64_t bytes =
      checked_product({params, 2, static_cast<int64_t>(dtype_size(param_dtype))}, what);
  const HostMemory memory = host_memory();
  if (bytes <= memory.usable_bytes()) return;
  const ConfigKeys keys = config_keys(config.family);
  throw ConfigError(source + ": the model has " + std::to_string(params) +
                    " parameters; their values and gradients in " + dtype_name(param_dtype) +
                    " alone need " + format_gib(bytes) + ", more than this machine's " +
                    memory.describe() + ". Use a smaller model: lower " + keys.hidden_size +
                    ", " + keys.num_layers + ", " + keys.intermediate_size + " or " +
                    keys.vocab_size + " in config.json, or pick a smaller --model");
}

}  // namespace

std::unique_ptr<Model> build_transformer(const TransformerConfig& config,
                                         backend::Backend& backend, DType param_dtype,
                                         const std::string& source) {
  config.validate(source);
  check_model_fits_memory(config, backend, param_dtype, source);
  auto model = std::make_unique<Model>(backend, param_dtype);
  auto& embedding = static_cast<EmbeddingUnit&>(
      model->add_unit(std::make_unique<EmbeddingUnit>(config)));
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    model->add_unit(std::make_unique<TransformerBlock>(config, layer));
  }
  Parameter* tied = config.tie_word_embeddings ? &embedding.token_embedding() : nullptr;
  model->add_unit(std::make_unique<LmHeadUnit>(config, tied));
  model->set_config(config);
  model->finalize();
  return model;
}

namespace {
bool is_norm_weight(const std::string& name) {
  for (const char* marker : {"ln_", "layernorm", "norm.weight"}) {
    if (name.find(marker) != std::string::npos) return true;
  }
  return false;
}
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

void init_parameters(Model& model, uint64_t seed, double stddev) {
  const bool gpt2 = model.config() && model.config()->family == ModelFamily::kGpt2;
  const double residual_scale =
      gpt2 ? 1.0 / std::sqrt(2.0 * static_cast<double>(model.config()->num_layers)) : 1.0;
  Tensor host = Tensor::zeros_host({model.num_parameters()}, DType::kF64);
  std::mt19937_64 rng(seed);
  for (Parameter* p : model.parameters()) {
    double* out = host.data<double>() + p->flat_offset;
    const int64_t n = p->numel();
    const std::string& name = p->spec.name;
    if (ends_with(name, ".bias")) continue;  // zeros
    if (is_norm_weight(name) && p->spec.shape.size() == 1) {
      for (int64_t i = 0; i < n; ++i) out[i] = 1.0;
      continue;
    }
    const bool residual_out = ends_with(name, "attn.c_proj.weight") || ends_with(name, "mlp.c_proj.weight");
    std::normal_distribution<double> normal(0.0, stddev * (residual_out ? residual_scale : 1.0));
    for (int64_t i = 0; i < n; ++i) out[i] = normal(rng);
  }
  Tensor staged = Tensor::zeros_host({model.num_parameters()}, model.param_dtype());
  if (model.param_dtype() == DType::kF64) {
    staged = host;
  } else if (model.param_dtype() == DType::kF32) {
    for (int64_t i = 0; i < host.numel(); ++i) {
      staged.data<float>()[i] = static_cast<float>(host.data<double>()[i]);
    }
  } else {
    throw UnsupportedError(std::string("init_parameters: parameter dtype ") +
                           dtype_name(model.param_dtype()) + " is not supported yet");
  }
  model.backend().copy_from_host(model.flat_params(), staged.raw_data());
}

}  // namespace zero::model

#include "model/transformer_builder.h"

#include <cmath>
#include <random>
#include <unordered_map>

#include "comm/comm.h"
#include "core/checked_math.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "model/config_limits.h"
#include "model/embedding_unit.h"
#include "model/lm_head_unit.h"
#include "model/parameter_init.h"
#include "model/tied_embedding_copy.h"
#include "model/transformer_block.h"

namespace zero::model {

namespace {

// Refuses, before any unit is built or buffer allocated, a model whose parameters and gradients
// alone exceed this machine's memory (on the CPU backend they live in host memory). Linux
// overcommits, so allocating would "succeed" and the process be killed while zero-filling.
// `with_gradients`: the values and the gradients (training), else the values alone.
void check_model_fits_memory(const TransformerConfig& config, const backend::Backend& backend,
                             DType param_dtype, const std::string& source, bool with_gradients) {
  if (!backend.device().is_cpu()) return;
  const int64_t params = checked_parameter_count(config, source);
  const std::string what = source + ": the memory for the model's parameters and gradients";
  const int64_t bytes = checked_product(
      {params, with_gradients ? 2 : 1, static_cast<int64_t>(dtype_size(param_dtype))}, what);
  const HostMemory memory = host_memory();
  if (bytes <= memory.usable_bytes()) return;
  const ConfigKeys keys = config_keys(config.family);
  throw ConfigError(source + ": the model has " + std::to_string(params) + " parameters; " +
                    (with_gradients ? "their values and gradients in " : "their values in ") +
                    dtype_name(param_dtype) +
                    " alone need " + format_gib(bytes) + ", more than this machine's " +
                    memory.describe() + ". Use a smaller model: lower " + keys.hidden_size +
                    ", " + keys.num_layers + ", " + keys.intermediate_size + " or " +
                    keys.vocab_size + " in config.json, or pick a smaller --model");
}

}  // namespace

std::unique_ptr<Model> build_transformer(const TransformerConfig& config,
                                         backend::Backend& backend, DType param_dtype,
                                         const std::string& source) {
  return build_transformer(config, backend, param_dtype, TensorParallelLayout{}, source);
}

namespace {
// build_transformer's units added to a new model, not yet finalized.
std::unique_ptr<Model> assemble(const TransformerConfig& config, backend::Backend& backend,
                                DType param_dtype, const TensorParallelLayout& tensor_parallel,
                                const std::string& source, bool with_gradients) {
  config.validate(source);
  check_model_fits_memory(config, backend, param_dtype, source, with_gradients);
  auto model = std::make_unique<Model>(backend, param_dtype);
  auto& embedding = static_cast<EmbeddingUnit&>(
      model->add_unit(std::make_unique<EmbeddingUnit>(config, tensor_parallel)));
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    model->add_unit(std::make_unique<TransformerBlock>(config, layer, tensor_parallel));
  }
  Parameter* tied = config.tie_word_embeddings ? &embedding.token_embedding() : nullptr;
  model->add_unit(std::make_unique<LmHeadUnit>(config, tied, tensor_parallel));
  model->set_config(config);
  return model;
}
}  // namespace

std::unique_ptr<Model> build_transformer(const TransformerConfig& config,
                                         backend::Backend& backend, DType param_dtype,
                                         const TensorParallelLayout& tensor_parallel,
                                         const std::string& source) {
  auto model = assemble(config, backend, param_dtype, tensor_parallel, source, true);
  model->finalize();
  return model;
}

std::unique_ptr<Model> build_transformer_for_inference(const TransformerConfig& config,
                                                       backend::Backend& backend,
                                                       DType param_dtype,
                                                       const std::string& source) {
  auto model = assemble(config, backend, param_dtype, TensorParallelLayout{}, source, false);
  model->finalize_for_inference();
  return model;
}

namespace {
// The full model's units, unfinalized (no tensors): build_transformer's list.
std::vector<std::unique_ptr<Unit>> full_units(const TransformerConfig& config) {
  std::vector<std::unique_ptr<Unit>> units;
  auto embedding = std::make_unique<EmbeddingUnit>(config);
  Parameter* tied = config.tie_word_embeddings ? &embedding->token_embedding() : nullptr;
  units.push_back(std::move(embedding));
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    units.push_back(std::make_unique<TransformerBlock>(config, layer));
  }
  units.push_back(std::make_unique<LmHeadUnit>(config, tied));
  return units;
}
}  // namespace

std::unique_ptr<Model> build_transformer_stage(const TransformerConfig& config,
                                               backend::Backend& backend, DType param_dtype,
                                               int64_t begin, int64_t end,
                                               const std::string& source) {
  return build_transformer_stage(config, backend, param_dtype, begin, end, TensorParallelLayout{},
                                 source);
}

std::unique_ptr<Model> build_transformer_stage(const TransformerConfig& config,
                                               backend::Backend& backend, DType param_dtype,
                                               int64_t begin, int64_t end,
                                               const TensorParallelLayout& tensor_parallel,
                                               const std::string& source) {
  config.validate(source);
  const int64_t count = config.num_layers + 2;
  if (begin < 0 || end > count || begin >= end) {
    throw ConfigError(source + ": pipeline stage units [" + std::to_string(begin) + ", " +
                      std::to_string(end) + ") are not a non-empty range of the model's " +
                      std::to_string(count) + " units");
  }
  if (config.router_aux_loss_coef > 0.0 && (begin > 0 || end < count)) {
    throw UnsupportedError(source + ": the routers' load-balancing loss (output_router_logits: "
                           "true) over pipeline stages is not supported yet: it averages over "
                           "every stage's blocks; set output_router_logits to false or use one "
                           "pipeline stage");
  }
  auto model = std::make_unique<Model>(backend, param_dtype);
  EmbeddingUnit* embedding = nullptr;
  if (begin == 0) {
    embedding = static_cast<EmbeddingUnit*>(
        &model->add_unit(std::make_unique<EmbeddingUnit>(config, tensor_parallel)));
  }
  const bool has_head = end == count;
  Parameter* tied = nullptr;
  if (has_head && config.tie_word_embeddings) {
    if (embedding != nullptr) {
      tied = &embedding->token_embedding();
    } else {
      EmbeddingUnit probe(config, tensor_parallel);  // declares specs only: no tensors
      auto& copy = static_cast<TiedEmbeddingCopy&>(model->add_unit(
          std::make_unique<TiedEmbeddingCopy>(probe.token_embedding().spec)));
      tied = &copy.weight();
    }
  }
  for (int64_t layer = std::max<int64_t>(begin, 1) - 1; layer < std::min(end, count - 1) - 1;
       ++layer) {
    model->add_unit(std::make_unique<TransformerBlock>(config, layer, tensor_parallel));
  }
  if (has_head) model->add_unit(std::make_unique<LmHeadUnit>(config, tied, tensor_parallel));
  model->set_config(config);
  model->finalize();
  return model;
}

std::vector<TransformerUnitInfo> transformer_unit_infos(const TransformerConfig& config) {
  std::vector<TransformerUnitInfo> out;
  for (const auto& unit : full_units(config)) {
    int64_t params = 0;
    for (const auto& p : unit->parameters()) params += p.numel();
    out.push_back({unit->name(), unit->kind(), params});
  }
  return out;
}

std::vector<ParamSpec> transformer_parameter_specs(const TransformerConfig& config) {
  std::vector<ParamSpec> specs;
  for (const auto& unit : full_units(config)) {
    for (const auto& p : unit->parameters()) specs.push_back(p.spec);
  }
  return specs;
}

void init_parameters(Model& model, uint64_t seed, double stddev) {
  Tensor host = Tensor::zeros_host({model.num_parameters()}, DType::kF64);
  // The specs values are drawn for, in order: the full model's when this model is (a stage
  // of) a built transformer, so a stage draws exactly what the full model draws.
  std::unordered_map<std::string, Parameter*> own;
  for (Parameter* p : model.parameters()) own.emplace(p->spec.name, p);
  std::vector<ParamSpec> specs;
  if (model.config()) {
    specs = transformer_parameter_specs(*model.config());
    // Only when every parameter is found with its full shape (or is a declared tensor-parallel
    // slice of it): a model not built by build_transformer draws in its own order.
    size_t found = 0;
    for (const ParamSpec& spec : specs) {
      auto it = own.find(spec.name);
      if (it != own.end() && (it->second->spec.shape == spec.shape || it->second->spec.slice)) {
        ++found;
      }
    }
    if (found != own.size()) specs.clear();
  }
  if (specs.empty()) {
    for (Parameter* p : model.parameters()) specs.push_back(p->spec);
  }
  ParameterDraws draws(model.config() ? &*model.config() : nullptr, seed, stddev);
  std::vector<double> values;
  for (const ParamSpec& spec : specs) {
    draws.draw(spec, values);
    auto it = own.find(spec.name);
    if (it == own.end()) continue;
    double* own_values = host.data<double>() + it->second->flat_offset;
    if (it->second->spec.slice) {  // a tensor-parallel part: the full tensor's elements
      extract_tensor_slice(*it->second->spec.slice, values.data(), own_values);
    } else {
      std::copy(values.begin(), values.end(), own_values);
    }
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

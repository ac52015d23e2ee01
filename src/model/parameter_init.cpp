#include "model/parameter_init.h"

#include <cmath>
#include <string>

namespace zero::model {
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

ParameterDraws::ParameterDraws(const TransformerConfig* config, uint64_t seed, double stddev)
    : stddev_(stddev), rng_(seed) {
  if (config != nullptr && config->family == ModelFamily::kGpt2) {
    residual_scale_ = 1.0 / std::sqrt(2.0 * static_cast<double>(config->num_layers));
  }
}

void ParameterDraws::draw(const ParamSpec& spec, std::vector<double>& values) {
  const int64_t n = shape_numel(spec.shape);
  const std::string& name = spec.name;
  values.assign(static_cast<size_t>(n), 0.0);  // biases: zeros
  if (ends_with(name, ".bias")) return;
  if (is_norm_weight(name) && spec.shape.size() == 1) {
    values.assign(static_cast<size_t>(n), 1.0);
    return;
  }
  const bool residual_out = ends_with(name, "attn.c_proj.weight") || ends_with(name, "mlp.c_proj.weight");
  std::normal_distribution<double> normal(0.0, stddev_ * (residual_out ? residual_scale_ : 1.0));
  for (double& v : values) v = normal(rng_);
}

}  // namespace zero::model

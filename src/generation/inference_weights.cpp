#include "generation/inference_weights.h"

#include <string>

#include "core/error.h"

namespace zero::generation {

namespace {
bool is_16bit(DType dtype) { return dtype == DType::kBF16 || dtype == DType::kF16; }
}  // namespace

DType inference_storage_dtype(const backend::Backend& backend, DType dtype) {
  return is_16bit(dtype) && backend.device().is_cpu() ? DType::kF32 : dtype;
}

void prepare_inference_weights(model::Model& model, DType dtype) {
  model.release_flat_grads();
  if (!is_16bit(dtype)) {
    if (dtype != model.param_dtype()) {
      throw ConfigError(std::string("generation in ") + dtype_name(dtype) + " of a model loaded in " +
                        dtype_name(model.param_dtype()) + ": load it in that dtype");
    }
    return;
  }
  backend::Backend& backend = model.backend();
  model.set_activation_dtype(dtype);
  if (model.param_dtype() == dtype) return;  // loaded in 16 bits
  if (model.param_dtype() != DType::kF32) {
    throw ConfigError(std::string(dtype_name(dtype)) + " generation of a model loaded in " +
                      dtype_name(model.param_dtype()) + ": load it in f32 or " + dtype_name(dtype));
  }
  if (backend.device().is_cpu()) {
    backend.round_in_place(model.flat_params(), dtype);
    return;
  }
  Tensor weights = backend.empty({model.num_parameters()}, dtype, MemoryCategory::kParams);
  backend.copy(weights, model.flat_params());
  model.release_flat_params();
  const auto& units = model.units();
  for (size_t u = 0; u < units.size(); ++u) {
    model.bind_unit_params(
        u, weights.view(units[u]->flat_begin(), {units[u]->flat_numel()}));
  }
}

}  // namespace zero::generation

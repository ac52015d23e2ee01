#include "generation/inference_weights.h"

#include <string>

#include "core/error.h"

namespace zero::generation {

void prepare_inference_weights(model::Model& model, DType dtype) {
  model.release_flat_grads();
  const bool sixteen_bit = dtype == DType::kBF16 || dtype == DType::kF16;
  if (!sixteen_bit) {
    if (dtype != model.param_dtype()) {
      throw ConfigError(std::string("generation in ") + dtype_name(dtype) + " of a model loaded in " +
                        dtype_name(model.param_dtype()) + ": load it in that dtype");
    }
    return;
  }
  if (model.param_dtype() != DType::kF32) {
    throw ConfigError(std::string("16-bit generation starts from f32 weights, got ") +
                      dtype_name(model.param_dtype()));
  }
  backend::Backend& backend = model.backend();
  model.set_activation_dtype(dtype);
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

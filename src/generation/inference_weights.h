// Readying a loaded model for generation: its gradient buffer is freed (inference never writes
// it), and for a 16-bit run the weights take that dtype's values and the activations its
// storage - as transformers does with torch_dtype=bfloat16. A device backend then holds the
// weights in one 16-bit buffer (half the bytes of f32); the CPU backend keeps them in f32 with
// their 16-bit values (its kernels widen 16-bit operands to f32 anyway, so the results are the
// same bits without a widening copy of the weights in every op).
#pragma once
#include "core/dtype.h"
#include "model/model.h"

namespace zero::generation {

// The dtype to load weights in for a run in `dtype` on `backend`: the run's own, except 16-bit
// runs on the CPU backend, whose weights stay f32 (see above).
DType inference_storage_dtype(const backend::Backend& backend, DType dtype);

// `dtype`: f32 or f64 (the model must already be in it) or bf16/f16 (the model loaded in that
// dtype, or in f32: then converted as above). ConfigError for other combinations.
void prepare_inference_weights(model::Model& model, DType dtype);

}  // namespace zero::generation

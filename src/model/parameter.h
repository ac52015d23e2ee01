// Parameter: one named weight of a unit — a view into the model's flat parameter buffer, and
// its gradient, a view at the same offset into the flat gradient buffer.
#pragma once
#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace zero::model {

// How the tensor is laid out in Hugging Face files relative to zero.cpp's layout.
enum class HfLayout {
  kSame,        // identical
  kTransposed,  // 2-D, stored as [in, out] (GPT-2's Conv1D); zero keeps [out, in]
};

struct ParamSpec {
  std::string name;  // the Hugging Face parameter name, e.g. "transformer.h.0.ln_1.weight"
  Shape shape;       // zero.cpp's layout (linear weights [out, in])
  bool weight_decay = true;  // false for biases, norm weights (DeepSpeed/HF convention)
  HfLayout hf_layout = HfLayout::kSame;
};

struct Parameter {
  ParamSpec spec;
  int64_t flat_offset = -1;  // elements from the start of the model's flat buffers
  Tensor value;              // view into the flat parameter buffer (bound by Model::finalize)
  Tensor grad;               // view into the flat gradient buffer (same offset)

  int64_t numel() const { return shape_numel(spec.shape); }
};

}  // namespace zero::model

// Parameter: one named weight of a unit — a view into the model's flat parameter buffer, and
// its gradient, a view at the same offset into the flat gradient buffer.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/tensor.h"

namespace zero::model {

// How the tensor is laid out in Hugging Face files relative to zero.cpp's layout.
enum class HfLayout {
  kSame,        // identical
  kTransposed,  // 2-D, stored as [in, out] (GPT-2's Conv1D); zero keeps [out, in]
};

// Tensor parallelism (model/tensor_parallel.h): this rank holds one part of the logical tensor.
// Along `dim`, the logical tensor consists of `blocks` equal blocks (3 for GPT-2's fused c_attn:
// q | k | v), each of length L cut into `parts` balanced parts (part i is [i*L/parts,
// (i+1)*L/parts), integer division: equal when parts divides L, as for heads and the MLP width;
// a vocabulary of any size splits this way too); this rank holds part `index` of every block,
// concatenated in block order. `replicas` ranks hold the same part (key/value heads when a GQA
// model has fewer of them than tensor-parallel ranks); their gradient contributions are summed
// by the model. Parameters without a slice are replicated whole on every tensor-parallel rank.
struct TensorSlice {
  int dim = 0;
  int64_t parts = 1;
  int64_t index = 0;
  int64_t blocks = 1;
  int64_t replicas = 1;
  Shape full_shape;  // the logical (Hugging Face) tensor's shape, zero.cpp's layout
};

struct ParamSpec {
  std::string name;  // the Hugging Face parameter name, e.g. "transformer.h.0.ln_1.weight"
  Shape shape;       // zero.cpp's layout (linear weights [out, in])
  bool weight_decay = true;  // false for biases, norm weights (DeepSpeed/HF convention)
  HfLayout hf_layout = HfLayout::kSame;
  std::optional<TensorSlice> slice = std::nullopt;  // set: a tensor-parallel part of `name`
};

struct Parameter {
  ParamSpec spec;
  int64_t flat_offset = -1;  // elements from the start of the model's flat buffers
  Tensor value;              // view into the flat parameter buffer (bound by Model::finalize)
  Tensor grad;               // view into the flat gradient buffer (same offset)

  int64_t numel() const { return shape_numel(spec.shape); }
};

}  // namespace zero::model

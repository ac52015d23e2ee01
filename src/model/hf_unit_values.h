// zero.Init from a Hugging Face model folder: the model is built partitioned (model/
// partitioned_init.h) and each rank reads only its shards' elements from the safetensors files
// (memory-mapped: the pages of other ranks' elements are never touched). Names, shapes and
// dtypes of every tensor are checked against the model from the files' headers before any data
// is read, with the same errors as load_hf_weights (missing, unexpected or misshapen tensors,
// integer dtypes; Inf/NaN in the elements read). GPT-2's Conv1D weights are stored transposed,
// so a rank's rows are strided in the file: those tensors are read whole, one at a time.
// Tensor-parallel parts are not built partitioned (tensor parallelism runs with ZeRO 0-2).
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"
#include "model/model.h"
#include "model/unit_value_source.h"

namespace zero::model {

// The values of the weights in `dir` (DIR/model.safetensors or its sharded index).
std::unique_ptr<UnitValueSource> hf_unit_values(const std::string& dir);

// Reads DIR/config.json and builds the model partitioned, its values from DIR's weights.
std::unique_ptr<Model> load_hf_model_partitioned(const std::string& dir, backend::Backend& backend,
                                                 DType param_dtype);

}  // namespace zero::model

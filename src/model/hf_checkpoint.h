// Hugging Face model folders: config.json + model.safetensors (or a sharded
// model.safetensors.index.json). Parameters are matched by their Hugging Face names; GPT-2's
// Conv1D weights are transposed on the way in and out, so a folder zero.cpp writes loads in
// transformers unchanged.
#pragma once
#include <memory>
#include <string>

#include "model/model.h"
#include "model/tensor_parallel.h"

namespace zero::model {

// Reads DIR/config.json, builds the model in `param_dtype` and loads its weights.
std::unique_ptr<Model> load_hf_model(const std::string& dir, backend::Backend& backend,
                                     DType param_dtype);
// Tensor parallelism: builds this rank's part (model/tensor_parallel.h); each sliced parameter
// reads its whole tensor from the folder and keeps its slice.
std::unique_ptr<Model> load_hf_model(const std::string& dir, backend::Backend& backend,
                                     DType param_dtype, const TensorParallelLayout& tensor_parallel);

// For inference (generation): the model without a gradient buffer, its weights converted to
// `param_dtype` on the host before the upload (bf16/f16 halve the device memory of f32).
std::unique_ptr<Model> load_hf_model_for_inference(const std::string& dir,
                                                   backend::Backend& backend, DType param_dtype);

// Loads every parameter of `model` from the weights in `dir` (dtype converted, shapes checked;
// a tensor-parallel part takes its slice of the whole tensor).
// Throws FileError/ShapeError naming the file and tensor for missing, unexpected or misshapen
// tensors.
void load_hf_weights(Model& model, const std::string& dir);

// Writes DIR/config.json and DIR/model.safetensors (tensors in `save_dtype`, HF names and
// layouts; a tied LM head is not written, as transformers does). Creates DIR if needed; each file
// is replaced atomically. A tensor-parallel model: collective over Model::tensor_group (every
// rank of the group calls it); the parts are gathered bit for bit into whole tensors
// (model/tensor_slice_gather.h) and the group's rank 0 writes DIR, so the folder equals the one
// the same weights give without tensor parallelism. UnsupportedError when a part has no group of
// its size to gather over.
void save_hf_model(Model& model, const std::string& dir, DType save_dtype);

}  // namespace zero::model

// Turning a zero.cpp training checkpoint into a model: a Hugging Face folder (`zero convert`), or
// a Model on a backend (`zero generate --model CKPT_DIR`).
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"
#include "core/dtype.h"
#include "model/model.h"

namespace zero::engine {

// Whether DIR is a checkpoint folder (it holds a `latest` file naming its newest checkpoint).
bool is_checkpoint_dir(const std::string& dir);

// The model CKPT_DIR/<tag> (default: the one CKPT_DIR/latest names) holds, built for inference
// (no gradient buffer) from its model_config on `backend`, its f32 weights stored in `dtype`
// (rounded to nearest-even for 16 bits): whole tensors, or the pieces every rank of a ZeRO 1-3
// or tensor-parallel run wrote, consolidated. Throws FileError for a missing or damaged
// checkpoint or one without a model_config.
std::unique_ptr<model::Model> load_checkpoint_model(const std::string& checkpoint_dir,
                                                    const std::string& tag,
                                                    backend::Backend& backend,
                                                    DType dtype = DType::kF32);

// Reads CKPT_DIR/<tag> (default: CKPT_DIR/latest) and writes OUT_DIR/config.json and
// OUT_DIR/model.safetensors in `dtype`. Throws FileError for a missing or damaged checkpoint.
void convert_checkpoint_to_hf(const std::string& checkpoint_dir, const std::string& tag,
                              const std::string& out_dir, DType dtype);

}  // namespace zero::engine

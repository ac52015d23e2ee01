// Turning a zero.cpp training checkpoint into a Hugging Face model folder (`zero convert`).
#pragma once
#include <string>

#include "core/dtype.h"

namespace zero::engine {

// Reads CKPT_DIR/<tag> (default: CKPT_DIR/latest) and writes OUT_DIR/config.json and
// OUT_DIR/model.safetensors in `dtype`. Throws FileError for a missing or damaged checkpoint.
void convert_checkpoint_to_hf(const std::string& checkpoint_dir, const std::string& tag,
                              const std::string& out_dir, DType dtype);

}  // namespace zero::engine

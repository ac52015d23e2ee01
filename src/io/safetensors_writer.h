// Safetensors writer: host tensors in the given order, a compact JSON header padded with
// spaces so the data buffer starts 8-byte aligned, written atomically (see atomic_file.h).
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace zero::io {

// Tensors must be contiguous host tensors; names unique (zero::Error otherwise).
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace zero::io

// Finding Inf/NaN in weights as they are loaded, so a corrupt file is named at load (tensor and
// file) instead of surfacing later as "the training loss became nan".
#pragma once
#include <cstdint>
#include <optional>

#include "core/dtype.h"

namespace zero {

// Index of the first element of `data` (`count` elements of `dtype`, host memory) that is not
// finite, or nothing when all are (integer dtypes always are).
std::optional<int64_t> first_non_finite(const void* data, DType dtype, int64_t count);

}  // namespace zero

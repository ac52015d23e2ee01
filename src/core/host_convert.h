// Element conversion between floating dtypes on the host (f32, f64, f16, bf16), with
// round-to-nearest-even when narrowing. Used by file I/O (a bf16 checkpoint loaded into f32
// parameters, f32 parameters saved as bf16) and by the CPU backend's copy.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace zero {

// Converts `count` elements from `src` (dtype `from`) to `dst` (dtype `to`). Same dtype copies
// bytes (any dtype). Different dtypes must both be floating, else UnsupportedError.
void convert_elements(void* dst, DType to, const void* src, DType from, int64_t count);

// A new contiguous host tensor with `src`'s shape in `dtype` (src: contiguous host tensor).
Tensor converted_host(const Tensor& src, DType dtype,
                      MemoryCategory category = MemoryCategory::kOther);

}  // namespace zero

// CPU data-movement and elementwise kernels: fill, copy (with floating-point dtype conversion),
// host transfers, axpy-style add and in-place scale. Semantics are those of the Backend methods
// of the same name (backend/backend.h); CpuBackend forwards to these.
#pragma once
#include "core/tensor.h"

namespace zero::backend::cpu {

// dst[i] = value. Floating dtypes round `value` to nearest-even once; integer dtypes require an
// integral value that the dtype can represent (otherwise ShapeError).
void fill(Tensor& dst, double value);
// dst = src elementwise (same numel, both contiguous). Equal dtypes copy bytes (any dtype);
// f32/f64/f16/bf16 convert with a single round-to-nearest-even when narrowing.
void copy(Tensor& dst, const Tensor& src);
// Whole-tensor byte copies between host memory and a contiguous CPU tensor.
void copy_from_host(Tensor& dst, const void* src);
void copy_to_host(void* dst, const Tensor& src);
// y += alpha * x (same shape, contiguous, same dtype f32 or f64).
void add(Tensor& y, const Tensor& x, double alpha);
// y *= alpha (contiguous, f32 or f64).
void scale(Tensor& y, double alpha);
// x (f32, contiguous) *= float(1 / (sqrt(squared_norm[0]) + eps)); squared_norm f64 [1].
void scale_by_inverse_norm(Tensor& x, const Tensor& squared_norm, double eps);

}  // namespace zero::backend::cpu

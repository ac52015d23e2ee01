// Argument checks shared by the CPU kernels: clear ShapeErrors naming the op and the tensors.
#pragma once
#include <string>

#include "core/error.h"
#include "core/tensor.h"

namespace zero::backend::cpu {

inline void require_contiguous(const Tensor& t, const char* op, const char* name) {
  if (!t.defined() || !t.device().is_cpu() || !t.is_contiguous()) {
    throw ShapeError(std::string(op) + ": " + name + " must be a contiguous CPU tensor, got " +
                     (t.defined() ? t.describe() : std::string("an undefined tensor")));
  }
}

// For the ops that also take tensors a caller may hand over from a device (copy, fill, the
// classifier): a device tensor is an UnsupportedError that says to copy it to the host first.
inline void expect_host_contiguous(const Tensor& t, const char* op, const char* name) {
  if (!t.device().is_cpu()) {
    throw UnsupportedError(std::string(op) + ": " + name + " " + t.describe() +
                           " is not on the CPU; copy it to the host first");
  }
  if (!t.is_contiguous()) {
    throw ShapeError(std::string(op) + ": " + name + " " + t.describe() +
                     " must be contiguous; make a contiguous copy first");
  }
}

inline void require_same_shape(const Tensor& a, const Tensor& b, const char* op, const char* a_name,
                               const char* b_name) {
  if (a.shape() != b.shape()) {
    throw ShapeError(std::string(op) + ": " + a_name + " " + shape_to_string(a.shape()) + " and " +
                     b_name + " " + shape_to_string(b.shape()) + " must have the same shape");
  }
}

inline void require_dtype(const Tensor& t, DType dtype, const char* op, const char* name) {
  if (t.dtype() != dtype) {
    throw ShapeError(std::string(op) + ": " + name + " must be " + dtype_name(dtype) + ", got " +
                     dtype_name(t.dtype()));
  }
}

// Rows and channels of x[..., C] viewed as [N, C].
inline void rows_and_channels(const Tensor& x, int64_t* rows, int64_t* channels) {
  *channels = x.dim() == 0 ? 1 : x.size(-1);
  *rows = *channels == 0 ? 0 : x.numel() / *channels;
}

// Parameter gradients are summed over row blocks of this many rows: partial sums per block, then
// the blocks in order. The result is the same for any thread count (bitwise reproducible).
inline constexpr int64_t kRowBlock = 128;

}  // namespace zero::backend::cpu

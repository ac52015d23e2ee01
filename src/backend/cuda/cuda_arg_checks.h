// Argument checks and small tensor helpers shared by the CUDA backend's translation units
// (cuda_backend.cpp, cuda_backend_matmul.cpp): what a bad argument to an op throws, in the
// CPU backend's words. Internal to backend/cuda.
#pragma once
#include <cstdint>
#include <string>

#include "backend/cuda/cuda_kernels.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"

namespace zero::backend::cuda_internal {

inline std::string describe(const Tensor& t) {
  return t.defined() ? t.describe() : std::string("an undefined tensor");
}

// The product of every dimension but the last (the rows of a [.., C] activation).
inline int64_t leading_rows(const Tensor& t) {
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < t.dim(); ++d) rows *= t.size(d);
  return rows;
}

inline cuda::HeadLayout head_layout(const Tensor& t) {
  cuda::HeadLayout l;
  l.batch = t.size(0);
  l.seq = t.size(1);
  l.heads = t.size(2);
  l.head_dim = t.size(3);
  l.batch_stride = t.stride(0);
  l.seq_stride = t.stride(1);
  l.head_stride = t.stride(2);
  return l;
}

class Checks {
 public:
  Checks(Device device, const char* op) : device_(device), op_(op) {}

  // On this device (a host tensor handed to a kernel is a bug in the caller).
  const Checks& here(const Tensor& t, const char* name) const {
    if (!t.defined() || t.device() != device_) {
      throw ShapeError(std::string(op_) + ": " + name + " " + describe(t) + " is not on " +
                       device_.to_string() +
                       " (a kernel of a device backend cannot read host memory; upload it with "
                       "copy_from_host)");
    }
    return *this;
  }
  const Checks& contiguous(const Tensor& t, const char* name) const {
    here(t, name);
    if (!t.is_contiguous()) {
      throw ShapeError(std::string(op_) + ": " + name + " " + t.describe() +
                       " must be contiguous; make a contiguous copy first");
    }
    return *this;
  }
  const Checks& dtype(const Tensor& t, DType dtype, const char* name) const {
    if (t.dtype() != dtype) {
      throw ShapeError(std::string(op_) + ": " + name + " " + t.describe() + " must be " +
                       dtype_name(dtype));
    }
    return *this;
  }
  // A gradient accumulated from `inputs`-typed tensors: the same dtype, or f32 for 16-bit
  // inputs (the engine keeps f32 gradients of the 16-bit weights the layers read).
  const Checks& grad_dtype(const Tensor& t, DType inputs, const char* name) const {
    if (t.dtype() == inputs || (t.dtype() == DType::kF32 && dtype_size(inputs) == 2)) return *this;
    throw ShapeError(std::string(op_) + ": " + name + " " + t.describe() + " must be " +
                     dtype_name(inputs) +
                     (dtype_size(inputs) == 2 ? std::string(" or f32") : std::string()));
  }
  const Checks& same_shape(const Tensor& a, const Tensor& b, const char* a_name,
                           const char* b_name) const {
    if (a.shape() != b.shape()) {
      throw ShapeError(std::string(op_) + ": " + a_name + " " + shape_to_string(a.shape()) +
                       " and " + b_name + " " + shape_to_string(b.shape()) +
                       " must have the same shape");
    }
    return *this;
  }
  // The one-element f64 tensor a reduction (sum, sum of squares) writes or adds to.
  const Checks& f64_scalar(const Tensor& t, const char* name) const {
    contiguous(t, name).dtype(t, DType::kF64, name);
    if (t.numel() != 1) {
      throw ShapeError(std::string(op_) + ": " + name + " must be a one-element f64 tensor, got " +
                       t.describe());
    }
    return *this;
  }
  const Checks& ids(const Tensor& t, const char* name) const {
    contiguous(t, name);
    if (t.dtype() != DType::kI32 && t.dtype() != DType::kI64) {
      throw ShapeError(std::string(op_) + ": " + name + " " + t.describe() + " must be i32 or i64");
    }
    return *this;
  }
  [[noreturn]] void fail(const std::string& message) const {
    throw ShapeError(std::string(op_) + ": " + message);
  }

 private:
  Device device_;
  const char* op_;
};

}  // namespace zero::backend::cuda_internal

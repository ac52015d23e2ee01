// Dtype dispatch for CPU kernels: calls fn.template operator()<T>() with T = float or double
// according to `dtype`, or throws UnsupportedError naming the op.
#pragma once
#include <string>

#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"

namespace zero::backend {

template <typename Fn>
void dispatch_floating(DType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::kF32: fn.template operator()<float>(); return;
    case DType::kF64: fn.template operator()<double>(); return;
    default:
      throw UnsupportedError(std::string(op) + " on the CPU backend supports f32 and f64, not " +
                             dtype_name(dtype));
  }
}

// Reads token id i from an i32 or i64 host tensor.
inline int64_t token_at(const Tensor& ids, int64_t i) {
  return ids.dtype() == DType::kI64 ? ids.data<int64_t>()[i]
                                    : static_cast<int64_t>(ids.data<int32_t>()[i]);
}

}  // namespace zero::backend

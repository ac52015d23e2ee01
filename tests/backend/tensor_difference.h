// Shared by the CPU kernel tests (built as one unit): a - b, for gradients accumulated onto a
// known start.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "support/gradcheck.h"

namespace zero::backend::cpu {

// a - b element by element, as a new f64 host tensor of a's shape.
inline Tensor difference(const Tensor& a, const Tensor& b) {
  Tensor d = Tensor::zeros_host(a.shape(), DType::kF64);
  for (int64_t i = 0; i < a.numel(); ++i) {
    d.data<double>()[i] = testing::value_at(a, i) - testing::value_at(b, i);
  }
  return d;
}

}  // namespace zero::backend::cpu

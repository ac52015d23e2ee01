// CPU reductions used by the optimizer path (gradient norms, overflow checks).
#pragma once
#include "core/tensor.h"

namespace zero::backend::cpu {

// sum(x^2) in f64 with a fixed chunking, so the result is bitwise independent of thread count;
// any Inf/NaN element makes it non-finite.
double squared_norm(const Tensor& x);

}  // namespace zero::backend::cpu

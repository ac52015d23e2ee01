// Reductions of a whole tensor to one f64 value, with a fixed chunking so the result is bitwise
// independent of the thread count.
#pragma once
#include "core/tensor.h"

namespace zero::backend::cpu {

// sum(x^2) in f64; any Inf/NaN element makes it non-finite.
double squared_norm(const Tensor& x);
// sum(x) in f64.
double sum(const Tensor& x);
// out[0] = value (out[0] += value when accumulate); out must be a host f64 tensor of one element.
void store_scalar(Tensor& out, double value, bool accumulate, const char* op);

}  // namespace zero::backend::cpu

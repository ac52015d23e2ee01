// CPU causal self-attention, flash-style: forward keeps only the output and a per-row
// logsumexp (O(T) per head); backward recomputes score tiles. See Backend::attention_*.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace zero::backend::cpu {

// Semantics as Backend::attention_forward / attention_backward (f32 and f64). Shape, layout and
// dtype mismatches throw ShapeError; other dtypes throw UnsupportedError. Deterministic: the
// results are bitwise identical for any OpenMP thread count.
void attention_forward(Tensor& out, Tensor& lse, const Tensor& q, const Tensor& k,
                       const Tensor& v, double scale, int64_t window);
void attention_backward(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout, const Tensor& q,
                        const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                        double scale, int64_t window);

}  // namespace zero::backend::cpu

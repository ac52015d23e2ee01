// CPU matrix products on OpenBLAS: general matmul and the nn.Linear forward/backward built on it.
// Semantics are those of the Backend methods of the same name (backend/backend.h); CpuBackend
// forwards to these.
#pragma once
#include "core/tensor.h"

namespace zero::backend::cpu {

// c[M,N] = alpha * op(a) @ op(b) + beta * c; all 2-D, contiguous, one dtype (f32 or f64).
void matmul(Tensor& c, const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b,
            double alpha, double beta);
// y[..., out] = x[..., in] @ w[out, in]^T (+ bias[out]); leading dimensions are rows.
void linear_forward(Tensor& y, const Tensor& x, const Tensor& w, const Tensor* bias);
// dx = dy @ w (overwritten; skipped when dx is null); dw += dy^T @ x; dbias += column sums of dy.
void linear_backward(Tensor* dx, Tensor& dw, Tensor* dbias, const Tensor& dy, const Tensor& x,
                     const Tensor& w);

}  // namespace zero::backend::cpu

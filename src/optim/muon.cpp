#include "optim/muon.h"

#include <array>
#include <cmath>
#include <utility>

#include "core/check.h"

namespace zero::optim {

void newton_schulz_orthogonalize(backend::Backend& backend, Tensor& x, int steps) {
  ZERO_CHECK(x.dim() == 2 && x.dtype() == DType::kF32 && x.is_contiguous(),
             "Newton-Schulz needs a contiguous f32 matrix, got " << x.describe());
  const int64_t rows = x.size(0), cols = x.size(1);
  // The iteration multiplies by the smaller Gram matrix: for a tall x it runs on x^T, which
  // reads as multiplying from the right (X <- a X + X B; B is symmetric).
  const bool wide = rows <= cols;
  const int64_t side = wide ? rows : cols;
  Tensor squared_norm = backend.empty({1}, DType::kF64, MemoryCategory::kWorkspace);
  backend.sum_squares(squared_norm, x, false);
  backend.scale_by_inverse_norm(x, squared_norm, kNewtonSchulzEps);
  Tensor spare = backend.empty({rows, cols}, DType::kF32, MemoryCategory::kWorkspace);
  Tensor gram = backend.empty({side, side}, DType::kF32, MemoryCategory::kWorkspace);
  Tensor poly = backend.empty({side, side}, DType::kF32, MemoryCategory::kWorkspace);
  Tensor* current = &x;
  Tensor* next = &spare;
  for (int step = 0; step < steps; ++step) {
    backend.matmul(gram, *current, !wide, *current, wide, 1.0, 0.0);  // A
    backend.copy(poly, gram);
    backend.matmul(poly, gram, false, gram, false, kNewtonSchulzC, kNewtonSchulzB);  // b A + c A^2
    backend.copy(*next, *current);
    if (wide) {
      backend.matmul(*next, poly, false, *current, false, 1.0, kNewtonSchulzA);
    } else {
      backend.matmul(*next, *current, false, poly, false, 1.0, kNewtonSchulzA);
    }
    std::swap(current, next);
  }
  if (current != &x) backend.copy(x, *current);
}

void muon_update_matrix(backend::Backend& backend, const MuonMatrix& matrix, Tensor& params,
                        const Tensor& grads, Tensor& momentum, const MuonHyper& muon, double lr,
                        double weight_decay, bool decay, double grad_scale, Tensor* param_copy) {
  const int64_t n = matrix.rows * matrix.cols;
  ZERO_CHECK(params.numel() == n && grads.numel() == n && momentum.numel() == n,
             "Muon matrix of " << n << " elements given views of " << params.numel() << ", "
                               << grads.numel() << " and " << momentum.numel());
  // The momentum through the backend's own kernel: m = mu m + (1 - mu) g * grad_scale.
  backend::OptimizerHyper hyper;
  hyper.beta1 = muon.momentum;
  hyper.grad_scale = grad_scale;
  const std::array<backend::ParamSegment, 1> whole{backend::ParamSegment{0, n, false}};
  std::array<Tensor, 1> state{momentum};
  backend.optimizer_update(backend::OptimizerKind::kMomentum, params, grads, state, whole, hyper);

  Tensor update = backend.empty({matrix.rows, matrix.cols}, DType::kF32,
                                MemoryCategory::kWorkspace);
  Tensor flat_update = update.view(0, {n});
  if (muon.nesterov) {
    // (1 - mu) g + mu m: the gradient pulled towards the momentum it just moved.
    backend.copy(flat_update, grads);
    if (grad_scale != 1.0) backend.scale(flat_update, grad_scale);
    backend.scale(flat_update, 1.0 - muon.momentum);
    backend.add(flat_update, momentum, muon.momentum);
  } else {
    backend.copy(flat_update, momentum);
  }
  newton_schulz_orthogonalize(backend, update, muon.ns_steps);

  if (decay && weight_decay != 0.0) backend.scale(params, 1.0 - lr * weight_decay);
  backend.add(params, flat_update, -lr * matrix.update_scale);
  if (param_copy != nullptr) backend.copy(*param_copy, params);
}

}  // namespace zero::optim

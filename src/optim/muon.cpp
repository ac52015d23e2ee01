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

void muon_momentum(backend::Backend& backend, Tensor& params, const Tensor& grads,
                   Tensor& momentum, Tensor& update, const MuonHyper& muon, double grad_scale) {
  const int64_t n = momentum.numel();
  ZERO_CHECK(params.numel() == n && grads.numel() == n && update.numel() == n,
             "Muon momentum over " << n << " elements given views of " << params.numel() << ", "
                                   << grads.numel() << " and " << update.numel());
  backend::OptimizerHyper hyper;
  hyper.beta1 = muon.momentum;
  hyper.grad_scale = grad_scale;
  const std::array<backend::ParamSegment, 1> whole{backend::ParamSegment{0, n, false}};
  std::array<Tensor, 1> state{momentum};
  backend.optimizer_update(backend::OptimizerKind::kMomentum, params, grads, state, whole, hyper);
  if (muon.nesterov) {
    // (1 - mu) g + mu m: the gradient pulled towards the momentum it just moved.
    backend.copy(update, grads);
    if (grad_scale != 1.0) backend.scale(update, grad_scale);
    backend.scale(update, 1.0 - muon.momentum);
    backend.add(update, momentum, muon.momentum);
  } else {
    backend.copy(update, momentum);
  }
}

void muon_apply(backend::Backend& backend, Tensor& params, const Tensor& orthogonalized,
                double lr, double weight_decay, bool decay, double scale, Tensor* param_copy) {
  if (decay && weight_decay != 0.0) backend.scale(params, 1.0 - lr * weight_decay);
  backend.add(params, orthogonalized, -lr * scale);
  if (param_copy != nullptr) backend.copy(*param_copy, params);
}

void muon_update_matrix(backend::Backend& backend, const MuonMatrix& matrix, Tensor& params,
                        const Tensor& grads, Tensor& momentum, const MuonHyper& muon, double lr,
                        double weight_decay, bool decay, double grad_scale, Tensor* param_copy) {
  const int64_t n = matrix.rows * matrix.cols;
  Tensor update = backend.empty({matrix.rows, matrix.cols}, DType::kF32,
                                MemoryCategory::kWorkspace);
  Tensor flat_update = update.view(0, {n});
  muon_momentum(backend, params, grads, momentum, flat_update, muon, grad_scale);
  newton_schulz_orthogonalize(backend, update, muon.ns_steps);
  muon_apply(backend, params, flat_update, lr, weight_decay, decay, matrix.update_scale,
             param_copy);
}

}  // namespace zero::optim

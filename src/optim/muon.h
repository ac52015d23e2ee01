// Muon (MomentUm Orthogonalized by Newton-Schulz) for the hidden 2-D weights, as DeepSpeed's
// "Muon" optimizer runs it: SGD momentum whose update is replaced by an approximately orthogonal
// matrix of the same shape before it is applied. The rest of the parameters (embeddings, the
// head, norms, biases) take AdamW in optim/optimizer.cpp.
//
// Everything here goes through Backend ops (matmul, copy, add, scale, sum_squares,
// scale_by_inverse_norm, the kMomentum update), so it runs wherever the parameters live, with
// no host waits. Arithmetic is f32 (DeepSpeed iterates in bf16 where the device has it; the
// polynomial is the same, the rounding finer).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace zero::optim {

// One weight matrix Muon updates: where its elements start (counted from its unit's first
// element in a MuonUnit), its shape in zero.cpp's layout (row-major [rows, cols]) and the factor
// its orthogonalized update is multiplied by, sqrt(max(1, r / c)) for the [r, c] shape DeepSpeed
// sees (the Hugging Face tensor's, which is [cols, rows] for GPT-2's Conv1D weights).
struct MuonMatrix {
  int64_t offset = 0;  // elements
  int64_t rows = 0;
  int64_t cols = 0;
  double update_scale = 1.0;
};

// One unit's Muon matrices as this rank holds them. Under ZeRO stages 1-3 a rank holds one
// shard of each unit: it moves the momentum of its elements, the ranks all-gather the unit's
// proposed updates, and each rank orthogonalizes the matrices its shard overlaps and updates its
// part of them. Without ZeRO partitions a rank holds every unit whole and gathers nothing.
struct MuonUnit {
  int64_t update_offset = 0;  // where this rank's elements of the unit start in step()'s buffers
  int64_t local_begin = 0;    // the first of them, counted from the unit's first element
  int64_t local_count = 0;    // how many (0: a shard of padding only)
  // > 0: the elements each rank gives to the all-gather (ZeRO's shard; local_begin is then
  // rank * gather_numel); 0: this rank holds the whole unit and gathers nothing.
  int64_t gather_numel = 0;
  std::vector<MuonMatrix> matrices;  // offsets counted from the unit's first element
};

// The elements [begin, end) of `matrix` (counted from the unit's first element) that this rank
// holds of `unit`; begin >= end when it holds none.
struct HeldElements {
  int64_t begin = 0, end = 0;
  int64_t count() const { return end - begin; }
  bool empty() const { return end <= begin; }
};
inline HeldElements held_elements(const MuonUnit& unit, const MuonMatrix& matrix) {
  return {std::max(matrix.offset, unit.local_begin),
          std::min(matrix.offset + matrix.rows * matrix.cols,
                   unit.local_begin + unit.local_count)};
}

struct MuonHyper {
  double momentum = 0.95;  // m = momentum m + (1 - momentum) g
  bool nesterov = true;    // update from (1 - momentum) g + momentum m instead of m
  int ns_steps = 5;        // Newton-Schulz iterations
};

// The quintic Newton-Schulz iteration's coefficients (a, b, c) and the normalization's epsilon:
// X <- a X + (b A + c A^2) X with A = X X^T, after X <- X / (||X||_F + eps). They push every
// singular value of X towards an interval around 1 (not exactly to 1: the coefficients trade
// that for a steep slope at 0, so 5 steps suffice).
inline constexpr double kNewtonSchulzA = 3.4445;
inline constexpr double kNewtonSchulzB = -4.7750;
inline constexpr double kNewtonSchulzC = 2.0315;
inline constexpr double kNewtonSchulzEps = 1e-7;

// x (f32 [rows, cols], contiguous, on `backend`) is replaced by its orthogonalization after
// `steps` iterations. The Gram matrix is taken on the shorter side ([rows, rows] when rows <=
// cols, else [cols, cols]), so the result is the transpose of that of x^T, as the iteration
// defines. Workspace: one more x and two Gram-sized matrices (MemoryCategory::kWorkspace).
void newton_schulz_orthogonalize(backend::Backend& backend, Tensor& x, int steps);

// Muon's momentum step over some elements of a matrix (views of one length), and the update it
// proposes: momentum (f32) = mu m + (1 - mu) g * grad_scale (the kMomentum kernel); update (f32)
// = (1 - mu) g * grad_scale + mu m when nesterov, else m. `params` only gives the kernel its
// shape. grads may be f32, bf16 or f16.
void muon_momentum(backend::Backend& backend, Tensor& params, const Tensor& grads,
                   Tensor& momentum, Tensor& update, const MuonHyper& muon, double grad_scale);
// params (f32) -= lr * wd * params when `decay`, then params -= lr * scale * orthogonalized; with
// `param_copy`, the new params are stored there too (rounded to its dtype).
void muon_apply(backend::Backend& backend, Tensor& params, const Tensor& orthogonalized,
                double lr, double weight_decay, bool decay, double scale, Tensor* param_copy);

// One Muon update of one whole matrix held by one rank (all views of `matrix.rows *
// matrix.cols` elements, contiguous; matrix.offset is not read): muon_momentum, the update
// orthogonalized, then muon_apply with matrix.update_scale.
void muon_update_matrix(backend::Backend& backend, const MuonMatrix& matrix, Tensor& params,
                        const Tensor& grads, Tensor& momentum, const MuonHyper& muon, double lr,
                        double weight_decay, bool decay, double grad_scale, Tensor* param_copy);

}  // namespace zero::optim

#include "backend/qk_norm_shapes.h"

#include <string>

#include "backend/backend.h"
#include "core/error.h"

namespace zero::backend {
namespace {
// Names of their own: a unity build puts these beside moe_shapes.cpp's helpers.

std::string described_qk(const Tensor& t) {
  return t.defined() ? t.describe() : std::string("an undefined tensor");
}

[[noreturn]] void fail_qk(const char* op, const std::string& problem) {
  throw ShapeError(std::string(op) + ": " + problem);
}

// The fused [N, (H + 2 KVH) * D] rows that every other argument is measured against.
QkNormDims fused_dims(const char* op, const Tensor& qkv, const char* name, int64_t heads,
                      int64_t kv_heads) {
  if (heads < 1 || kv_heads < 1) {
    fail_qk(op, "heads (" + std::to_string(heads) + ") and kv_heads (" + std::to_string(kv_heads) +
                 ") must be at least 1");
  }
  if (!qkv.defined() || qkv.dim() != 2 || !qkv.is_contiguous() ||
      !dtype_is_floating(qkv.dtype())) {
    fail_qk(op, std::string(name) + " must be a contiguous floating 2-D tensor, got " +
                 described_qk(qkv));
  }
  QkNormDims d{qkv.size(0), heads, kv_heads, 0};
  // heads + 2 kv_heads cannot overflow: both are at most a row's element count.
  if (heads > qkv.size(1) || kv_heads > qkv.size(1) || qkv.size(1) == 0 ||
      qkv.size(1) % d.heads_per_row() != 0) {
    fail_qk(op, std::string(name) + " " + shape_to_string(qkv.shape()) +
                    " must have (H + 2 KVH) * D columns for H = " + std::to_string(heads) +
                    ", KVH = " + std::to_string(kv_heads));
  }
  d.head_dim = qkv.size(1) / d.heads_per_row();
  return d;
}

void require_like(const char* op, const Tensor& t, const char* name, const Tensor& like,
                  const char* like_name) {
  if (!t.defined() || !t.is_contiguous() || t.shape() != like.shape() ||
      t.dtype() != like.dtype()) {
    fail_qk(op, std::string(name) + " must be contiguous with " + like_name +
                    "'s shape and dtype (" + like.describe() + "), got " + described_qk(t));
  }
}

void require_distinct(const char* op, const Tensor& out, const char* name, const Tensor& in,
                      const char* in_name) {
  if (out.storage() == in.storage()) {
    fail_qk(op, std::string(name) + " shares " + in_name +
                    "'s storage; pass it a buffer of its own");
  }
}

void require_weight(const char* op, const Tensor& w, const char* name, const QkNormDims& d,
                    DType dtype, QkWeightDtypes allowed) {
  const bool also_f32 = allowed == QkWeightDtypes::kInputsOrF32 && dtype_size(dtype) == 2;
  const bool dtype_ok =
      w.defined() && (w.dtype() == dtype || (also_f32 && w.dtype() == DType::kF32));
  if (!dtype_ok || !w.is_contiguous() || w.numel() != d.head_dim) {
    fail_qk(op, std::string(name) + " must be a contiguous " + dtype_name(dtype) +
                    (also_f32 ? " or f32" : "") + " tensor of " + std::to_string(d.head_dim) +
                    " elements (head_dim), got " + described_qk(w));
  }
}

void require_rstd(const char* op, const Tensor& rstd, const QkNormDims& d, DType x_dtype) {
  const DType stats = stats_dtype(x_dtype);
  const Shape shape{d.rows, d.normalised_per_row()};
  if (!rstd.defined() || !rstd.is_contiguous() || rstd.dtype() != stats ||
      rstd.shape() != shape) {
    fail_qk(op, std::string("rstd must be a contiguous ") + dtype_name(stats) + " " +
                 shape_to_string(shape) + " tensor, got " + described_qk(rstd));
  }
}

// A weight gradient: the weight's shape, in x's dtype or f32 for 16-bit x.
void require_weight_grad(const char* op, const Tensor& g, const char* name, const Tensor& weight,
                         DType x_dtype) {
  const bool dtype_ok =
      g.defined() && (g.dtype() == x_dtype ||
                      (g.dtype() == DType::kF32 && dtype_size(x_dtype) == 2));
  if (!dtype_ok || !g.is_contiguous() || g.shape() != weight.shape()) {
    fail_qk(op, std::string(name) + " must be contiguous with the weight's shape " +
                 shape_to_string(weight.shape()) + " in " + dtype_name(x_dtype) +
                 (dtype_size(x_dtype) == 2 ? " or f32" : "") + ", got " + described_qk(g));
  }
}

}  // namespace

QkNormDims check_qk_rmsnorm_forward(const char* op, const Tensor& qkv_out, const Tensor& rstd,
                                    const Tensor& qkv_in, const Tensor& q_weight,
                                    const Tensor& k_weight, int64_t heads, int64_t kv_heads,
                                    QkWeightDtypes weights) {
  const QkNormDims d = fused_dims(op, qkv_in, "qkv_in", heads, kv_heads);
  require_like(op, qkv_out, "qkv_out", qkv_in, "qkv_in");
  require_distinct(op, qkv_out, "qkv_out", qkv_in, "qkv_in");
  require_weight(op, q_weight, "q_weight", d, qkv_in.dtype(), weights);
  require_weight(op, k_weight, "k_weight", d, qkv_in.dtype(), weights);
  require_rstd(op, rstd, d, qkv_in.dtype());
  return d;
}

QkNormDims check_qk_rmsnorm_backward(const char* op, const Tensor& d_qkv_in,
                                     const Tensor& dq_weight, const Tensor& dk_weight,
                                     const Tensor& d_qkv_out, const Tensor& qkv_in,
                                     const Tensor& q_weight, const Tensor& k_weight,
                                     const Tensor& rstd, int64_t heads, int64_t kv_heads,
                                     QkWeightDtypes weights) {
  const QkNormDims d = fused_dims(op, qkv_in, "qkv_in", heads, kv_heads);
  require_like(op, d_qkv_out, "d_qkv_out", qkv_in, "qkv_in");
  require_like(op, d_qkv_in, "d_qkv_in", qkv_in, "qkv_in");
  require_distinct(op, d_qkv_in, "d_qkv_in", d_qkv_out, "d_qkv_out");
  require_distinct(op, d_qkv_in, "d_qkv_in", qkv_in, "qkv_in");
  require_weight(op, q_weight, "q_weight", d, qkv_in.dtype(), weights);
  require_weight(op, k_weight, "k_weight", d, qkv_in.dtype(), weights);
  require_rstd(op, rstd, d, qkv_in.dtype());
  require_weight_grad(op, dq_weight, "dq_weight", q_weight, qkv_in.dtype());
  require_weight_grad(op, dk_weight, "dk_weight", k_weight, qkv_in.dtype());
  if (dq_weight.storage() == dk_weight.storage() &&
      dq_weight.offset() + dq_weight.numel() > dk_weight.offset() &&
      dk_weight.offset() + dk_weight.numel() > dq_weight.offset()) {
    fail_qk(op, "dq_weight and dk_weight overlap; they accumulate separately");
  }
  return d;
}

}  // namespace zero::backend

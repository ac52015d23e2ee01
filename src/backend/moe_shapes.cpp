#include "backend/moe_shapes.h"

#include <string>

#include "backend/backend.h"
#include "core/error.h"

namespace zero::backend {
namespace {

std::string described(const Tensor& t) {
  return t.defined() ? t.describe() : std::string("an undefined tensor");
}

[[noreturn]] void fail(const char* op, const std::string& problem) {
  throw ShapeError(std::string(op) + ": " + problem);
}

// A contiguous tensor of `dtype` and exactly `shape`.
void require(const char* op, const Tensor& t, const char* name, const Shape& shape, DType dtype) {
  if (!t.defined() || !t.is_contiguous() || t.shape() != shape || t.dtype() != dtype) {
    fail(op, std::string(name) + " must be a contiguous " + dtype_name(dtype) + " " +
                 shape_to_string(shape) + " tensor, got " + described(t));
  }
}

void require_matrix(const char* op, const Tensor& t, const char* name) {
  if (!t.defined() || t.dim() != 2 || !t.is_contiguous() || !dtype_is_floating(t.dtype())) {
    fail(op, std::string(name) + " must be a contiguous floating 2-D tensor, got " +
                 described(t));
  }
}

void require_choices(const char* op, const Tensor& expert_ids, const char* name) {
  if (!expert_ids.defined() || expert_ids.dim() != 2 || expert_ids.size(1) < 1) {
    fail(op, std::string(name) + " must be an [N, k] tensor with k >= 1, got " +
                 described(expert_ids));
  }
}

// The [N*k, C] rows and [N, k] slot indices of the combine ops.
MoeDims combine_dims(const char* op, const Tensor& rows, const Tensor& slot_of) {
  require_choices(op, slot_of, "slot_of");
  require_matrix(op, rows, "rows");
  MoeDims d{slot_of.size(0), 0, slot_of.size(1), rows.size(1)};
  require(op, slot_of, "slot_of", {d.tokens, d.choices}, DType::kI32);
  if (rows.size(0) != d.slots()) {
    fail(op, "rows " + shape_to_string(rows.shape()) + " must have N*k = " +
                 std::to_string(d.slots()) + " rows for slot_of " +
                 shape_to_string(slot_of.shape()));
  }
  return d;
}

}  // namespace

MoeDims check_moe_route(const char* op, const Tensor& expert_ids, const Tensor& weights,
                        const Tensor& logits) {
  require_matrix(op, logits, "logits");
  require_choices(op, expert_ids, "expert_ids");
  MoeDims d{logits.size(0), logits.size(1), expert_ids.size(1), 0};
  if (d.choices > d.experts) {
    fail(op, "k = " + std::to_string(d.choices) + " choices exceed the " +
                 std::to_string(d.experts) + " experts of logits " +
                 shape_to_string(logits.shape()));
  }
  require(op, expert_ids, "expert_ids", {d.tokens, d.choices}, DType::kI32);
  require(op, weights, "weights", {d.tokens, d.choices}, stats_dtype(logits.dtype()));
  return d;
}

MoeDims check_moe_dispatch(const char* op, const Tensor& counts, const Tensor& source_rows,
                           const Tensor& slot_of, const Tensor& expert_ids,
                           int64_t num_experts) {
  require_choices(op, expert_ids, "expert_ids");
  if (num_experts < 1) fail(op, "num_experts must be at least 1, got " +
                                    std::to_string(num_experts));
  MoeDims d{expert_ids.size(0), num_experts, expert_ids.size(1), 0};
  require(op, expert_ids, "expert_ids", {d.tokens, d.choices}, DType::kI32);
  require(op, counts, "counts", {d.experts}, DType::kI32);
  require(op, source_rows, "source_rows", {d.slots()}, DType::kI32);
  require(op, slot_of, "slot_of", {d.tokens, d.choices}, DType::kI32);
  return d;
}

MoeDims check_moe_combine(const char* op, const Tensor& out, const Tensor& rows,
                          const Tensor& slot_of, const Tensor* weights) {
  const MoeDims d = combine_dims(op, rows, slot_of);
  require(op, out, "out", {d.tokens, d.columns}, rows.dtype());
  if (weights != nullptr) {
    require(op, *weights, "weights", {d.tokens, d.choices}, stats_dtype(rows.dtype()));
  }
  return d;
}

MoeDims check_moe_combine_backward(const char* op, const Tensor& d_rows, const Tensor& d_weights,
                                   const Tensor& dout, const Tensor& rows, const Tensor& slot_of,
                                   const Tensor& weights) {
  const MoeDims d = combine_dims(op, rows, slot_of);
  require(op, d_rows, "d_rows", rows.shape(), rows.dtype());
  require(op, dout, "dout", {d.tokens, d.columns}, rows.dtype());
  require(op, weights, "weights", {d.tokens, d.choices}, stats_dtype(rows.dtype()));
  require(op, d_weights, "d_weights", {d.tokens, d.choices}, stats_dtype(rows.dtype()));
  return d;
}

MoeDims check_moe_router_prob_sums(const char* op, const Tensor& sums, const Tensor& logits) {
  require_matrix(op, logits, "logits");
  const MoeDims d{logits.size(0), logits.size(1), 0, 0};
  require(op, sums, "sums", {d.experts}, DType::kF64);
  return d;
}

MoeDims check_moe_router_balance_backward(const char* op, const Tensor& dlogits,
                                          const Tensor& logits, const Tensor& prob_grad) {
  require_matrix(op, logits, "logits");
  const MoeDims d{logits.size(0), logits.size(1), 0, 0};
  require(op, prob_grad, "prob_grad", {d.experts}, DType::kF64);
  require(op, dlogits, "dlogits", logits.shape(), logits.dtype());
  return d;
}

MoeDims check_moe_route_backward(const char* op, const Tensor& dlogits, const Tensor& d_weights,
                                 const Tensor& expert_ids, const Tensor& weights,
                                 const Tensor& logits) {
  const MoeDims d = check_moe_route(op, expert_ids, weights, logits);
  require(op, d_weights, "d_weights", {d.tokens, d.choices}, stats_dtype(logits.dtype()));
  require(op, dlogits, "dlogits", logits.shape(), logits.dtype());
  return d;
}

}  // namespace zero::backend

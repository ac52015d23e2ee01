// The mixture-of-experts ops on the CUDA backend: argument checks shared with the CPU
// (backend/moe_shapes.h), placement checks, then the kernels of cuda_moe.cu.
#include <cstdint>

#include "backend/cuda/cuda_arg_checks.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/moe_shapes.h"

namespace zero::backend {

using cuda_internal::Checks;

namespace {
// Device addresses for the kernels, never dereferenced here (data<T>() is for host tensors).
int32_t* i32(const Tensor& t) { return static_cast<int32_t*>(t.raw_data()); }
float* f32(const Tensor& t) { return static_cast<float*>(t.raw_data()); }
double* f64(const Tensor& t) { return static_cast<double*>(t.raw_data()); }
}  // namespace

void CudaBackend::moe_route(Tensor& expert_ids, Tensor& weights, const Tensor& logits,
                            bool normalize) {
  const char* op = "moe_route";
  const Checks check(device(), op);
  check.here(expert_ids, "expert_ids").here(weights, "weights").here(logits, "logits");
  const MoeDims d = check_moe_route(op, expert_ids, weights, logits);
  cuda::launch_moe_route(i32(expert_ids), f32(weights), logits.raw_data(), logits.dtype(),
                         d.tokens, d.experts, d.choices, normalize, current());
}

void CudaBackend::moe_dispatch(Tensor& counts, Tensor& source_rows, Tensor& slot_of,
                               const Tensor& expert_ids, int64_t num_experts) {
  const char* op = "moe_dispatch";
  const Checks check(device(), op);
  check.here(counts, "counts").here(source_rows, "source_rows").here(slot_of, "slot_of");
  check.here(expert_ids, "expert_ids");
  const MoeDims d =
      check_moe_dispatch(op, counts, source_rows, slot_of, expert_ids, num_experts);
  const size_t bytes = cuda::moe_dispatch_scratch_bytes(d.slots());
  Tensor work = scratch(bytes);
  cuda::launch_moe_dispatch(i32(counts), i32(source_rows), i32(slot_of), i32(expert_ids),
                            d.tokens, d.choices, d.experts, work.raw_data(), bytes,
                            error_device_, current());
}

void CudaBackend::moe_combine(Tensor& out, const Tensor& rows, const Tensor& slot_of,
                              const Tensor* weights) {
  const char* op = "moe_combine";
  const Checks check(device(), op);
  check.here(out, "out").here(rows, "rows").here(slot_of, "slot_of");
  if (weights != nullptr) check.here(*weights, "weights");
  const MoeDims d = check_moe_combine(op, out, rows, slot_of, weights);
  cuda::launch_moe_combine(out.raw_data(), rows.raw_data(), rows.dtype(), i32(slot_of),
                           weights != nullptr ? f32(*weights) : nullptr, d.tokens, d.choices,
                           d.columns, current());
}

void CudaBackend::moe_combine_backward(Tensor& d_rows, Tensor& d_weights, const Tensor& dout,
                                       const Tensor& rows, const Tensor& slot_of,
                                       const Tensor& weights) {
  const char* op = "moe_combine_backward";
  const Checks check(device(), op);
  check.here(d_rows, "d_rows").here(d_weights, "d_weights").here(dout, "dout");
  check.here(rows, "rows").here(slot_of, "slot_of").here(weights, "weights");
  const MoeDims d =
      check_moe_combine_backward(op, d_rows, d_weights, dout, rows, slot_of, weights);
  cuda::launch_moe_combine_backward(d_rows.raw_data(), f32(d_weights), dout.raw_data(),
                                    rows.raw_data(), rows.dtype(), i32(slot_of), f32(weights),
                                    d.tokens, d.choices, d.columns, current());
}

void CudaBackend::moe_route_backward(Tensor& dlogits, const Tensor& d_weights,
                                     const Tensor& expert_ids, const Tensor& weights,
                                     const Tensor& logits, bool normalize) {
  const char* op = "moe_route_backward";
  const Checks check(device(), op);
  check.here(dlogits, "dlogits").here(d_weights, "d_weights").here(expert_ids, "expert_ids");
  check.here(weights, "weights").here(logits, "logits");
  const MoeDims d =
      check_moe_route_backward(op, dlogits, d_weights, expert_ids, weights, logits);
  cuda::launch_moe_route_backward(dlogits.raw_data(), f32(d_weights), i32(expert_ids),
                                  f32(weights), logits.raw_data(), logits.dtype(), d.tokens,
                                  d.experts, d.choices, normalize, current());
}

void CudaBackend::moe_router_prob_sums(Tensor& sums, const Tensor& logits, bool accumulate) {
  const char* op = "moe_router_prob_sums";
  const Checks check(device(), op);
  check.here(sums, "sums").here(logits, "logits");
  const MoeDims d = check_moe_router_prob_sums(op, sums, logits);
  Tensor work = scratch(cuda::moe_router_prob_sums_scratch_bytes(d.tokens));
  cuda::launch_moe_router_prob_sums(f64(sums), logits.raw_data(), logits.dtype(), d.tokens,
                                    d.experts, accumulate, work.raw_data(), current());
}

void CudaBackend::moe_router_balance_backward(Tensor& dlogits, const Tensor& logits,
                                              const Tensor& prob_grad, double scale) {
  const char* op = "moe_router_balance_backward";
  const Checks check(device(), op);
  check.here(dlogits, "dlogits").here(logits, "logits").here(prob_grad, "prob_grad");
  const MoeDims d = check_moe_router_balance_backward(op, dlogits, logits, prob_grad);
  cuda::launch_moe_router_balance_backward(dlogits.raw_data(), logits.raw_data(), logits.dtype(),
                                           f64(prob_grad), scale, d.tokens, d.experts,
                                           current());
}

}  // namespace zero::backend

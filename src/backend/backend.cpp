#include "backend/backend.h"

#include <chrono>
#include <string>

#include "core/check.h"
#include "core/error.h"

namespace zero::backend {

const char* stream_kind_name(StreamKind kind) {
  switch (kind) {
    case StreamKind::kCompute: return "compute";
    case StreamKind::kComm: return "comm";
    case StreamKind::kTransfer: return "transfer";
  }
  return "unknown";
}

Tensor Backend::empty(const Shape& shape, DType dtype, MemoryCategory category) {
  return Tensor::empty(allocator(), shape, dtype, category);
}

Tensor Backend::zeros(const Shape& shape, DType dtype, MemoryCategory category) {
  Tensor t = empty(shape, dtype, category);
  fill(t, 0.0);
  return t;
}

void Backend::synchronize() {
  ++transfers_.synchronizations;
  do_synchronize();
}

void Backend::set_current_stream(StreamKind stream) {
  if (stream == current_stream_) return;
  current_stream_ = stream;
  on_stream_change(stream);
}

void Backend::copy_from_host(Tensor& dst, const void* src) {
  ZERO_CHECK(dst.device() == device(), "copy_from_host into " << dst.describe() << " on a "
                                                               << device().to_string() << " backend");
  ++transfers_.host_to_device_calls;
  transfers_.host_to_device_bytes += static_cast<int64_t>(dst.nbytes());
  do_copy_from_host(dst, src);
}

void Backend::copy_to_host(void* dst, const Tensor& src) {
  ZERO_CHECK(src.device() == device(), "copy_to_host from " << src.describe() << " on a "
                                                             << device().to_string() << " backend");
  ++transfers_.device_to_host_calls;
  transfers_.device_to_host_bytes += static_cast<int64_t>(src.nbytes());
  do_copy_to_host(dst, src);
}

void Backend::check_pinned_pair(const char* op, const char* host_side, const Tensor& pinned,
                                const Tensor& device_tensor) {
  ZERO_CHECK(device_tensor.defined() && device_tensor.device() == device(),
             "the " << device().to_string() << " backend's " << op << " got the device tensor "
                    << (device_tensor.defined() ? device_tensor.describe() : "undefined"));
  const bool from_pinned =
      pinned.defined() && pinned.storage()->allocator() == &pinned_host_allocator();
  if (!from_pinned || !pinned.is_contiguous() || !device_tensor.is_contiguous() ||
      pinned.nbytes() != device_tensor.nbytes()) {
    throw ShapeError(std::string(op) + ": " + host_side + " " +
                     (pinned.defined() ? pinned.describe() : std::string("undefined")) +
                     " must be a contiguous tensor from the backend's pinned host allocator "
                     "holding exactly the bytes of the device tensor " + device_tensor.describe());
  }
}

void Backend::copy_to_pinned_async(Tensor& pinned_dst, const Tensor& src) {
  check_pinned_pair("copy_to_pinned_async", "destination", pinned_dst, src);
  ++transfers_.device_to_host_calls;
  transfers_.device_to_host_bytes += static_cast<int64_t>(src.nbytes());
  do_copy_to_pinned_async(pinned_dst, src);
}

void Backend::copy_from_pinned_async(Tensor& dst, const Tensor& pinned_src) {
  check_pinned_pair("copy_from_pinned_async", "source", pinned_src, dst);
  ++transfers_.host_to_device_calls;
  transfers_.host_to_device_bytes += static_cast<int64_t>(dst.nbytes());
  do_copy_from_pinned_async(dst, pinned_src);
}

double Backend::read_scalar(const Tensor& x) {
  ZERO_CHECK(x.numel() == 1 && x.is_contiguous(), "read_scalar of " << x.describe());
  if (x.dtype() == DType::kF64) {
    double value = 0.0;
    copy_to_host(&value, x);
    return value;
  }
  ZERO_CHECK(x.dtype() == DType::kF32, "read_scalar of " << x.describe() << " (f32 or f64 only)");
  float value = 0.0f;
  copy_to_host(&value, x);
  return static_cast<double>(value);
}

namespace {
// What the default timing events carry: the host clock when they were recorded.
struct HostTimestamp {
  std::chrono::steady_clock::time_point at;
};
}  // namespace

Event Backend::record_timing_event(StreamKind stream) {
  // A synchronous backend has finished everything enqueued before this call.
  auto stamp = std::make_shared<HostTimestamp>(HostTimestamp{std::chrono::steady_clock::now()});
  return Event(stream, 0, std::static_pointer_cast<void>(std::move(stamp)));
}

double Backend::elapsed_seconds(const Event& start, const Event& end) {
  ZERO_CHECK(start.native() != nullptr && end.native() != nullptr,
             "elapsed_seconds of an event that record_timing_event did not make");
  const auto* from = static_cast<const HostTimestamp*>(start.native().get());
  const auto* to = static_cast<const HostTimestamp*>(end.native().get());
  return std::chrono::duration<double>(to->at - from->at).count();
}

namespace {
// sum = a + b through the unfused ops (sum may already be a).
void add_into(Backend& backend, Tensor& sum, const Tensor& a, const Tensor& b) {
  const bool in_place = sum.raw_data() == a.raw_data() && sum.shape() == a.shape() &&
                        sum.dtype() == a.dtype() && sum.strides() == a.strides();
  if (!in_place) backend.copy(sum, a);
  backend.add(sum, b, 1.0);
}
}  // namespace

void Backend::linear_gelu_forward(Tensor& act, Tensor& up, const Tensor& x, const Tensor& w,
                                  const Tensor* bias) {
  linear_forward(up, x, w, bias);
  gelu_forward(act, up);
}

Tensor Backend::linear_backward_gelu(Tensor& dw, Tensor* dbias, const Tensor& dy, Tensor act,
                                     const Tensor& w, const Tensor& up) {
  Tensor d_act = empty(act.shape(), act.dtype(), MemoryCategory::kActivations);
  linear_backward(&d_act, dw, dbias, dy, act, w);
  act = Tensor();
  Tensor d_up = empty(up.shape(), up.dtype(), MemoryCategory::kActivations);
  gelu_backward(d_up, d_act, up);
  return d_up;
}

void Backend::add_layernorm_forward(Tensor& sum, Tensor& y, Tensor& mean, Tensor& rstd,
                                    const Tensor& a, const Tensor& b, const Tensor& weight,
                                    const Tensor* bias, double eps) {
  add_into(*this, sum, a, b);
  layernorm_forward(y, mean, rstd, sum, weight, bias, eps);
}

void Backend::add_rmsnorm_forward(Tensor& sum, Tensor& y, Tensor& rstd, const Tensor& a,
                                  const Tensor& b, const Tensor& weight, double eps) {
  add_into(*this, sum, a, b);
  rmsnorm_forward(y, rstd, sum, weight, eps);
}

void check_norm_residual(const Tensor& dx, const Tensor& residual, const char* op) {
  if (residual.raw_data() == dx.raw_data()) {
    throw ShapeError(std::string(op) + ": the residual gradient " + residual.describe() +
                     " is dx's own buffer; pass dx a buffer of its own");
  }
  if (residual.shape() != dx.shape() || residual.dtype() != dx.dtype()) {
    throw ShapeError(std::string(op) + ": the residual gradient " + residual.describe() +
                     " must have dx's shape and dtype (" + dx.describe() + ")");
  }
}

void Backend::layernorm_backward_add(Tensor& dx, Tensor& dweight, Tensor* dbias, const Tensor& dy,
                                     const Tensor& x, const Tensor& weight, const Tensor& mean,
                                     const Tensor& rstd, const Tensor& residual) {
  check_norm_residual(dx, residual, "layernorm_backward_add");
  layernorm_backward(dx, dweight, dbias, dy, x, weight, mean, rstd);
  add(dx, residual, 1.0);
}

void Backend::rmsnorm_backward_add(Tensor& dx, Tensor& dweight, const Tensor& dy, const Tensor& x,
                                   const Tensor& weight, const Tensor& rstd,
                                   const Tensor& residual) {
  check_norm_residual(dx, residual, "rmsnorm_backward_add");
  rmsnorm_backward(dx, dweight, dy, x, weight, rstd);
  add(dx, residual, 1.0);
}

void Backend::optimizer_update_with_copy(OptimizerKind kind, Tensor& params, const Tensor& grads,
                                         std::span<Tensor> state,
                                         std::span<const ParamSegment> segments,
                                         const OptimizerHyper& hyper, Tensor& param_copy) {
  optimizer_update(kind, params, grads, state, segments, hyper);
  copy(param_copy, params);
}

void Backend::add_rounded(Tensor& acc, const Tensor& x, DType through) {
  ZERO_CHECK(acc.dtype() == DType::kF32 && x.dtype() == DType::kF32 && acc.numel() == x.numel(),
             "add_rounded: " << acc.describe() << " += " << x.describe());
  if (through == DType::kF32) {
    add(acc, x, 1.0);
    return;
  }
  Tensor stored = empty({x.numel()}, through, MemoryCategory::kWorkspace);
  copy(stored, x);
  Tensor wide = empty({x.numel()}, DType::kF32, MemoryCategory::kWorkspace);
  copy(wide, stored);
  add(acc, wide, 1.0);
}

void Backend::round_in_place_sum_squares(Tensor& values, DType through, Tensor& squared_sum) {
  round_in_place(values, through);
  sum_squares(squared_sum, values, false);
}

void Backend::copy_sum_squares(Tensor& dst, const Tensor& src, Tensor& squared_sum) {
  ZERO_CHECK(src.dtype() == DType::kF32, "copy_sum_squares needs f32 src, got " << src.describe());
  copy(dst, src);
  sum_squares(squared_sum, dst, false);
}

void Backend::round_in_place(Tensor& values, DType through) {
  ZERO_CHECK(values.dtype() == DType::kF32, "round_in_place needs f32 values, got " << values.describe());
  if (through == DType::kF32) return;
  Tensor stored = empty({values.numel()}, through, MemoryCategory::kWorkspace);
  copy(stored, values);
  copy(values, stored);
}

double Backend::squared_norm(const Tensor& x) {
  Tensor out = empty({1}, DType::kF64, MemoryCategory::kWorkspace);
  sum_squares(out, x, false);
  return read_scalar(out);
}

}  // namespace zero::backend

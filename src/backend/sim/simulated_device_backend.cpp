#include "backend/sim/simulated_device_backend.h"

#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/check.h"

namespace zero::backend {

void* SimulatedDeviceMemory::allocate(size_t bytes) {
  constexpr size_t kAlignment = 256;  // what cudaMalloc guarantees
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  return std::aligned_alloc(kAlignment, rounded);
}

void SimulatedDeviceMemory::free(void* ptr, size_t /*bytes*/) { std::free(ptr); }

SimulatedDeviceBackend::SimulatedDeviceBackend()
    : allocator_(std::make_unique<CachingAllocator>(memory_)) {}

// The allocator goes first: tensors still alive elsewhere would otherwise return blocks to a
// cache that no longer exists. Callers destroy their tensors before the backend (Backend rule).
SimulatedDeviceBackend::~SimulatedDeviceBackend() = default;

Tensor SimulatedDeviceBackend::host_alias(const Tensor& t, const char* op) const {
  if (!t.defined()) return t;
  ZERO_CHECK(t.device() == device(), "" << op << ": " << t.describe() << " is not on " << device().to_string()
                                        << " (a kernel of a device backend cannot read host memory)");
  return Tensor(storage_alias(t.storage()), t.dtype(), t.shape(), t.strides(), t.offset());
}

std::shared_ptr<Storage> SimulatedDeviceBackend::storage_alias(
    const std::shared_ptr<Storage>& storage) const {
  // One alias per device storage while it is in use, so views of one buffer passed to one op
  // (a flat gradient buffer's dweight and dbias) still share a storage: the CPU backend's
  // 16-bit emulation keys its f32 twins by storage. The alias keeps the device storage alive,
  // so a live entry's key cannot be reused by another storage.
  auto found = aliases_.find(storage.get());
  if (found != aliases_.end()) {
    if (std::shared_ptr<Storage> alias = found->second.lock()) return alias;
  }
  auto alias = std::make_shared<Storage>(storage->data(), storage->bytes(), Device::cpu(), storage);
  aliases_[storage.get()] = alias;
  if (aliases_.size() > 4096) std::erase_if(aliases_, [](const auto& e) { return e.second.expired(); });
  return alias;
}

Tensor* SimulatedDeviceBackend::host_alias(const Tensor* t, Tensor& slot, const char* op) const {
  if (t == nullptr) return nullptr;
  slot = host_alias(*t, op);
  return &slot;
}

Event SimulatedDeviceBackend::record_event(StreamKind stream) {
  return Event(stream, ++recorded_[static_cast<size_t>(stream)], nullptr);
}

void SimulatedDeviceBackend::wait_event(StreamKind waiter, const Event& event) {
  ZERO_CHECK(!event.recorded() ||
                 event.sequence() <= recorded_[static_cast<size_t>(event.stream())],
             "wait_event on an event of the " << stream_kind_name(event.stream())
                                              << " stream that was never recorded here");
  ++waits_[static_cast<size_t>(waiter)];
}

void SimulatedDeviceBackend::synchronize_event(const Event& event) {
  ZERO_CHECK(!event.recorded() ||
                 event.sequence() <= recorded_[static_cast<size_t>(event.stream())],
             "synchronize_event on an event that was never recorded here");
}

void SimulatedDeviceBackend::do_copy_from_host(Tensor& dst, const void* src) {
  ZERO_CHECK(dst.is_contiguous(), "copy_from_host into a non-contiguous " << dst.describe());
  ZERO_CHECK(src != nullptr || dst.nbytes() == 0, "copy_from_host: null source");
  if (dst.nbytes() > 0) std::memcpy(dst.raw_data(), src, dst.nbytes());
}

void SimulatedDeviceBackend::do_copy_to_host(void* dst, const Tensor& src) {
  ZERO_CHECK(src.is_contiguous(), "copy_to_host from a non-contiguous " << src.describe());
  ZERO_CHECK(dst != nullptr || src.nbytes() == 0, "copy_to_host: null destination");
  if (src.nbytes() > 0) std::memcpy(dst, src.raw_data(), src.nbytes());
}

// ---- ops: the CPU kernels on host aliases ------------------------------------------------------

void SimulatedDeviceBackend::fill(Tensor& dst, double value) {
  Tensor d = host_alias(dst, "fill");
  cpu_.fill(d, value);
}

void SimulatedDeviceBackend::copy(Tensor& dst, const Tensor& src) {
  Tensor d = host_alias(dst, "copy");
  cpu_.copy(d, host_alias(src, "copy"));
}

void SimulatedDeviceBackend::stochastic_round_to_bf16(Tensor& dst, const Tensor& src,
                                                      uint64_t seed, int64_t first_index) {
  Tensor d = host_alias(dst, "stochastic_round_to_bf16");
  cpu_.stochastic_round_to_bf16(d, host_alias(src, "stochastic_round_to_bf16"), seed, first_index);
}

void SimulatedDeviceBackend::add(Tensor& y, const Tensor& x, double alpha) {
  Tensor h = host_alias(y, "add");
  cpu_.add(h, host_alias(x, "add"), alpha);
}

void SimulatedDeviceBackend::scale(Tensor& y, double alpha) {
  Tensor h = host_alias(y, "scale");
  cpu_.scale(h, alpha);
}

void SimulatedDeviceBackend::scale_by_inverse_norm(Tensor& x, const Tensor& squared_norm,
                                                   double eps) {
  Tensor h = host_alias(x, "scale_by_inverse_norm");
  cpu_.scale_by_inverse_norm(h, host_alias(squared_norm, "scale_by_inverse_norm"), eps);
}

void SimulatedDeviceBackend::matmul(Tensor& c, const Tensor& a, bool transpose_a, const Tensor& b,
                                    bool transpose_b, double alpha, double beta) {
  Tensor h = host_alias(c, "matmul");
  cpu_.matmul(h, host_alias(a, "matmul"), transpose_a, host_alias(b, "matmul"), transpose_b,
              alpha, beta);
}

void SimulatedDeviceBackend::linear_forward(Tensor& y, const Tensor& x, const Tensor& w,
                                            const Tensor* bias) {
  Tensor h = host_alias(y, "linear_forward");
  Tensor bias_slot;
  cpu_.linear_forward(h, host_alias(x, "linear_forward"), host_alias(w, "linear_forward"),
                      host_alias(bias, bias_slot, "linear_forward"));
}

void SimulatedDeviceBackend::linear_backward(Tensor* dx, Tensor& dw, Tensor* dbias,
                                             const Tensor& dy, const Tensor& x, const Tensor& w) {
  Tensor dx_slot;
  Tensor dbias_slot;
  Tensor dw_h = host_alias(dw, "linear_backward");
  cpu_.linear_backward(host_alias(dx, dx_slot, "linear_backward"), dw_h,
                       host_alias(dbias, dbias_slot, "linear_backward"),
                       host_alias(dy, "linear_backward"), host_alias(x, "linear_backward"),
                       host_alias(w, "linear_backward"));
}

void SimulatedDeviceBackend::embedding_forward(Tensor& out, const Tensor& ids, const Tensor& table,
                                               bool accumulate) {
  Tensor h = host_alias(out, "embedding_forward");
  cpu_.embedding_forward(h, host_alias(ids, "embedding_forward"),
                         host_alias(table, "embedding_forward"), accumulate);
}

void SimulatedDeviceBackend::embedding_backward(Tensor& dtable, const Tensor& dout,
                                                const Tensor& ids) {
  Tensor h = host_alias(dtable, "embedding_backward");
  cpu_.embedding_backward(h, host_alias(dout, "embedding_backward"),
                          host_alias(ids, "embedding_backward"));
}

void SimulatedDeviceBackend::layernorm_forward(Tensor& y, Tensor& mean, Tensor& rstd,
                                               const Tensor& x, const Tensor& weight,
                                               const Tensor* bias, double eps) {
  const char* op = "layernorm_forward";
  Tensor y_h = host_alias(y, op);
  Tensor mean_h = host_alias(mean, op);
  Tensor rstd_h = host_alias(rstd, op);
  Tensor bias_slot;
  cpu_.layernorm_forward(y_h, mean_h, rstd_h, host_alias(x, op), host_alias(weight, op),
                         host_alias(bias, bias_slot, op), eps);
}

void SimulatedDeviceBackend::layernorm_backward(Tensor& dx, Tensor& dweight, Tensor* dbias,
                                                const Tensor& dy, const Tensor& x,
                                                const Tensor& weight, const Tensor& mean,
                                                const Tensor& rstd) {
  const char* op = "layernorm_backward";
  Tensor dx_h = host_alias(dx, op);
  Tensor dweight_h = host_alias(dweight, op);
  Tensor dbias_slot;
  cpu_.layernorm_backward(dx_h, dweight_h, host_alias(dbias, dbias_slot, op), host_alias(dy, op),
                          host_alias(x, op), host_alias(weight, op), host_alias(mean, op),
                          host_alias(rstd, op));
}

void SimulatedDeviceBackend::rmsnorm_forward(Tensor& y, Tensor& rstd, const Tensor& x,
                                             const Tensor& weight, double eps) {
  const char* op = "rmsnorm_forward";
  Tensor y_h = host_alias(y, op);
  Tensor rstd_h = host_alias(rstd, op);
  cpu_.rmsnorm_forward(y_h, rstd_h, host_alias(x, op), host_alias(weight, op), eps);
}

void SimulatedDeviceBackend::rmsnorm_backward(Tensor& dx, Tensor& dweight, const Tensor& dy,
                                              const Tensor& x, const Tensor& weight,
                                              const Tensor& rstd) {
  const char* op = "rmsnorm_backward";
  Tensor dx_h = host_alias(dx, op);
  Tensor dweight_h = host_alias(dweight, op);
  cpu_.rmsnorm_backward(dx_h, dweight_h, host_alias(dy, op), host_alias(x, op),
                        host_alias(weight, op), host_alias(rstd, op));
}

void SimulatedDeviceBackend::qk_rmsnorm_forward(Tensor& qkv_out, Tensor& rstd,
                                                const Tensor& qkv_in, const Tensor& q_weight,
                                                const Tensor& k_weight, int64_t heads,
                                                int64_t kv_heads, double eps) {
  const char* op = "qk_rmsnorm_forward";
  Tensor out_h = host_alias(qkv_out, op);
  Tensor rstd_h = host_alias(rstd, op);
  cpu_.qk_rmsnorm_forward(out_h, rstd_h, host_alias(qkv_in, op), host_alias(q_weight, op),
                          host_alias(k_weight, op), heads, kv_heads, eps);
}

void SimulatedDeviceBackend::qk_rmsnorm_backward(Tensor& d_qkv_in, Tensor& dq_weight,
                                                 Tensor& dk_weight, const Tensor& d_qkv_out,
                                                 const Tensor& qkv_in, const Tensor& q_weight,
                                                 const Tensor& k_weight, const Tensor& rstd,
                                                 int64_t heads, int64_t kv_heads) {
  const char* op = "qk_rmsnorm_backward";
  Tensor d_in_h = host_alias(d_qkv_in, op);
  Tensor dq_h = host_alias(dq_weight, op);
  Tensor dk_h = host_alias(dk_weight, op);
  cpu_.qk_rmsnorm_backward(d_in_h, dq_h, dk_h, host_alias(d_qkv_out, op), host_alias(qkv_in, op),
                           host_alias(q_weight, op), host_alias(k_weight, op),
                           host_alias(rstd, op), heads, kv_heads);
}

void SimulatedDeviceBackend::gelu_forward(Tensor& y, const Tensor& x) {
  Tensor h = host_alias(y, "gelu_forward");
  cpu_.gelu_forward(h, host_alias(x, "gelu_forward"));
}

void SimulatedDeviceBackend::gelu_backward(Tensor& dx, const Tensor& dy, const Tensor& x) {
  Tensor h = host_alias(dx, "gelu_backward");
  cpu_.gelu_backward(h, host_alias(dy, "gelu_backward"), host_alias(x, "gelu_backward"));
}

void SimulatedDeviceBackend::swiglu_forward(Tensor& y, const Tensor& gate_up) {
  Tensor h = host_alias(y, "swiglu_forward");
  cpu_.swiglu_forward(h, host_alias(gate_up, "swiglu_forward"));
}

void SimulatedDeviceBackend::swiglu_backward(Tensor& dgate_up, const Tensor& dy,
                                             const Tensor& gate_up) {
  Tensor h = host_alias(dgate_up, "swiglu_backward");
  cpu_.swiglu_backward(h, host_alias(dy, "swiglu_backward"),
                       host_alias(gate_up, "swiglu_backward"));
}

void SimulatedDeviceBackend::rope_apply(Tensor& x, const Tensor& cos, const Tensor& sin,
                                        bool inverse) {
  Tensor h = host_alias(x, "rope_apply");
  cpu_.rope_apply(h, host_alias(cos, "rope_apply"), host_alias(sin, "rope_apply"), inverse);
}

void SimulatedDeviceBackend::attention_forward(Tensor& out, Tensor& lse, const Tensor& q,
                                               const Tensor& k, const Tensor& v, double scale,
                                               int64_t window) {
  const char* op = "attention_forward";
  Tensor out_h = host_alias(out, op);
  Tensor lse_h = host_alias(lse, op);
  cpu_.attention_forward(out_h, lse_h, host_alias(q, op), host_alias(k, op), host_alias(v, op),
                         scale, window);
}

void SimulatedDeviceBackend::attention_backward(Tensor& dq, Tensor& dk, Tensor& dv,
                                                const Tensor& dout, const Tensor& q,
                                                const Tensor& k, const Tensor& v,
                                                const Tensor& out, const Tensor& lse,
                                                double scale, int64_t window) {
  const char* op = "attention_backward";
  Tensor dq_h = host_alias(dq, op);
  Tensor dk_h = host_alias(dk, op);
  Tensor dv_h = host_alias(dv, op);
  cpu_.attention_backward(dq_h, dk_h, dv_h, host_alias(dout, op), host_alias(q, op),
                          host_alias(k, op), host_alias(v, op), host_alias(out, op),
                          host_alias(lse, op), scale, window);
}

void SimulatedDeviceBackend::kv_cache_write(Tensor& cache, const Tensor& x, int64_t position) {
  const char* op = "kv_cache_write";
  Tensor cache_h = host_alias(cache, op);
  cpu_.kv_cache_write(cache_h, host_alias(x, op), position);
}

void SimulatedDeviceBackend::attention_forward_cached(Tensor& out, const Tensor& q,
                                                      const Tensor& k_cache,
                                                      const Tensor& v_cache, int64_t key_count,
                                                      double scale, int64_t window) {
  const char* op = "attention_forward_cached";
  Tensor out_h = host_alias(out, op);
  cpu_.attention_forward_cached(out_h, host_alias(q, op), host_alias(k_cache, op),
                                host_alias(v_cache, op), key_count, scale, window);
}

void SimulatedDeviceBackend::moe_route(Tensor& expert_ids, Tensor& weights,
                                       const Tensor& logits, bool normalize) {
  const char* op = "moe_route";
  Tensor ids_h = host_alias(expert_ids, op);
  Tensor weights_h = host_alias(weights, op);
  cpu_.moe_route(ids_h, weights_h, host_alias(logits, op), normalize);
}

void SimulatedDeviceBackend::moe_dispatch(Tensor& counts, Tensor& source_rows, Tensor& slot_of,
                                          const Tensor& expert_ids, int64_t num_experts) {
  const char* op = "moe_dispatch";
  Tensor counts_h = host_alias(counts, op);
  Tensor rows_h = host_alias(source_rows, op);
  Tensor slots_h = host_alias(slot_of, op);
  cpu_.moe_dispatch(counts_h, rows_h, slots_h, host_alias(expert_ids, op), num_experts);
}

void SimulatedDeviceBackend::moe_combine(Tensor& out, const Tensor& rows, const Tensor& slot_of,
                                         const Tensor* weights) {
  const char* op = "moe_combine";
  Tensor out_h = host_alias(out, op);
  Tensor weights_slot;
  cpu_.moe_combine(out_h, host_alias(rows, op), host_alias(slot_of, op),
                   host_alias(weights, weights_slot, op));
}

void SimulatedDeviceBackend::moe_combine_backward(Tensor& d_rows, Tensor& d_weights,
                                                  const Tensor& dout, const Tensor& rows,
                                                  const Tensor& slot_of, const Tensor& weights) {
  const char* op = "moe_combine_backward";
  Tensor d_rows_h = host_alias(d_rows, op);
  Tensor d_weights_h = host_alias(d_weights, op);
  cpu_.moe_combine_backward(d_rows_h, d_weights_h, host_alias(dout, op), host_alias(rows, op),
                            host_alias(slot_of, op), host_alias(weights, op));
}

void SimulatedDeviceBackend::moe_route_backward(Tensor& dlogits, const Tensor& d_weights,
                                                const Tensor& expert_ids, const Tensor& weights,
                                                const Tensor& logits, bool normalize) {
  const char* op = "moe_route_backward";
  Tensor dlogits_h = host_alias(dlogits, op);
  cpu_.moe_route_backward(dlogits_h, host_alias(d_weights, op), host_alias(expert_ids, op),
                          host_alias(weights, op), host_alias(logits, op), normalize);
}

void SimulatedDeviceBackend::moe_router_prob_sums(Tensor& sums, const Tensor& logits,
                                                  bool accumulate) {
  const char* op = "moe_router_prob_sums";
  Tensor sums_h = host_alias(sums, op);
  cpu_.moe_router_prob_sums(sums_h, host_alias(logits, op), accumulate);
}

void SimulatedDeviceBackend::moe_router_balance_backward(Tensor& dlogits, const Tensor& logits,
                                                         const Tensor& prob_grad, double scale) {
  const char* op = "moe_router_balance_backward";
  Tensor dlogits_h = host_alias(dlogits, op);
  cpu_.moe_router_balance_backward(dlogits_h, host_alias(logits, op), host_alias(prob_grad, op),
                                   scale);
}

void SimulatedDeviceBackend::softmax_cross_entropy(Tensor& losses, Tensor* dlogits,
                                                   const Tensor& logits, const Tensor& targets,
                                                   int64_t ignore_index, double grad_scale) {
  const char* op = "softmax_cross_entropy";
  Tensor losses_h = host_alias(losses, op);
  Tensor dlogits_slot;
  cpu_.softmax_cross_entropy(losses_h, host_alias(dlogits, dlogits_slot, op),
                             host_alias(logits, op), host_alias(targets, op), ignore_index,
                             grad_scale);
}

void SimulatedDeviceBackend::embedding_forward_slice(Tensor& out, const Tensor& ids,
                                                     const Tensor& table, int64_t first_id,
                                                     bool accumulate) {
  const char* op = "embedding_forward_slice";
  Tensor h = host_alias(out, op);
  cpu_.embedding_forward_slice(h, host_alias(ids, op), host_alias(table, op), first_id,
                               accumulate);
}

void SimulatedDeviceBackend::embedding_backward_slice(Tensor& dtable, const Tensor& dout,
                                                      const Tensor& ids, int64_t first_id) {
  const char* op = "embedding_backward_slice";
  Tensor h = host_alias(dtable, op);
  cpu_.embedding_backward_slice(h, host_alias(dout, op), host_alias(ids, op), first_id);
}

void SimulatedDeviceBackend::cross_entropy_slice_max(Tensor& row_max, const Tensor& logits) {
  const char* op = "cross_entropy_slice_max";
  Tensor h = host_alias(row_max, op);
  cpu_.cross_entropy_slice_max(h, host_alias(logits, op));
}

void SimulatedDeviceBackend::cross_entropy_slice_sums(Tensor& sum_exp, Tensor& target_logit,
                                                      const Tensor& logits,
                                                      const Tensor& row_max,
                                                      const Tensor& targets,
                                                      int64_t first_column) {
  const char* op = "cross_entropy_slice_sums";
  Tensor sum_h = host_alias(sum_exp, op);
  Tensor target_h = host_alias(target_logit, op);
  cpu_.cross_entropy_slice_sums(sum_h, target_h, host_alias(logits, op), host_alias(row_max, op),
                                host_alias(targets, op), first_column);
}

void SimulatedDeviceBackend::cross_entropy_slice_finish(
    Tensor& losses, Tensor* dlogits, const Tensor& logits, const Tensor& row_max,
    const Tensor& sum_exp, const Tensor& target_logit, const Tensor& targets,
    int64_t first_column, int64_t ignore_index, double grad_scale) {
  const char* op = "cross_entropy_slice_finish";
  Tensor losses_h = host_alias(losses, op);
  Tensor dlogits_slot;
  cpu_.cross_entropy_slice_finish(losses_h, host_alias(dlogits, dlogits_slot, op),
                                  host_alias(logits, op), host_alias(row_max, op),
                                  host_alias(sum_exp, op), host_alias(target_logit, op),
                                  host_alias(targets, op), first_column, ignore_index,
                                  grad_scale);
}

void SimulatedDeviceBackend::sum_squares(Tensor& out, const Tensor& x, bool accumulate) {
  Tensor h = host_alias(out, "sum_squares");
  cpu_.sum_squares(h, host_alias(x, "sum_squares"), accumulate);
}

void SimulatedDeviceBackend::sum(Tensor& out, const Tensor& x, double alpha, bool accumulate) {
  Tensor h = host_alias(out, "sum");
  cpu_.sum(h, host_alias(x, "sum"), alpha, accumulate);
}

void SimulatedDeviceBackend::optimizer_update(OptimizerKind kind, Tensor& params,
                                              const Tensor& grads, std::span<Tensor> state,
                                              std::span<const ParamSegment> segments,
                                              const OptimizerHyper& hyper) {
  const char* op = "optimizer_update";
  Tensor params_h = host_alias(params, op);
  std::vector<Tensor> state_h;
  state_h.reserve(state.size());
  for (const Tensor& s : state) state_h.push_back(host_alias(s, op));
  cpu_.optimizer_update(kind, params_h, host_alias(grads, op), state_h, segments, hyper);
}

void SimulatedDeviceBackend::onebit_worker_compress(Tensor& bits, Tensor& scales,
                                                    Tensor& worker_error, const Tensor& values,
                                                    const OneBitLayout& layout) {
  const char* op = "onebit_worker_compress";
  Tensor bits_h = host_alias(bits, op), scales_h = host_alias(scales, op);
  Tensor error_h = host_alias(worker_error, op);
  cpu_.onebit_worker_compress(bits_h, scales_h, error_h, host_alias(values, op), layout);
}

void SimulatedDeviceBackend::onebit_server_compress(Tensor& bits_out, Tensor& scales_out,
                                                    Tensor& server_error, const Tensor& bits_in,
                                                    const Tensor& scales_in,
                                                    const OneBitLayout& layout) {
  const char* op = "onebit_server_compress";
  Tensor bits_h = host_alias(bits_out, op), scales_h = host_alias(scales_out, op);
  Tensor error_h = host_alias(server_error, op);
  cpu_.onebit_server_compress(bits_h, scales_h, error_h, host_alias(bits_in, op),
                              host_alias(scales_in, op), layout);
}

void SimulatedDeviceBackend::onebit_decompress(Tensor& values, const Tensor& bits,
                                               const Tensor& scales, const OneBitLayout& layout) {
  const char* op = "onebit_decompress";
  Tensor values_h = host_alias(values, op);
  cpu_.onebit_decompress(values_h, host_alias(bits, op), host_alias(scales, op), layout);
}

void SimulatedDeviceBackend::quantize_int8_groups(Tensor& packed, const Tensor& values,
                                                  int64_t group) {
  const char* op = "quantize_int8_groups";
  Tensor packed_h = host_alias(packed, op);
  cpu_.quantize_int8_groups(packed_h, host_alias(values, op), group);
}

void SimulatedDeviceBackend::dequantize_int8_groups(Tensor& values, const Tensor& packed,
                                                    int64_t group, bool accumulate) {
  const char* op = "dequantize_int8_groups";
  Tensor values_h = host_alias(values, op);
  cpu_.dequantize_int8_groups(values_h, host_alias(packed, op), group, accumulate);
}

}  // namespace zero::backend

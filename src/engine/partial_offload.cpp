#include "engine/partial_offload.h"

#include "core/check.h"

namespace zero::engine {

PartialOffload::PartialOffload(sharding::ZeroStage& zero, const optim::Optimizer& optimizer,
                               backend::Backend& device)
    : zero_(zero), device_(device) {
  const int64_t split = zero.device_update_numel();
  ZERO_CHECK(split > 0, "partial offload without a device part");
  for (size_t i = 0; i < optimizer.state_names().size(); ++i) {
    state_.push_back(device.zeros({split}, DType::kF32, MemoryCategory::kOptimizer));
  }
}

void PartialOffload::step(const optim::Optimizer& optimizer, const backend::OptimizerHyper& hyper,
                          double clip_coefficient) {
  Tensor& grads = zero_.device_grads();
  backend::OptimizerHyper clipped = hyper;  // clipping folded into the update's gradient read
  clipped.grad_scale = clip_coefficient < 1.0 ? clip_coefficient : 1.0;
  device_.optimizer_update(optimizer.kind(), zero_.device_master(), grads, state_,
                           zero_.device_segments(), clipped);
  zero_.device_part_updated();
}

void PartialOffload::download_state(const std::vector<std::pair<std::string, Tensor>>& host_state) {
  ZERO_CHECK(host_state.size() == state_.size(), "partial offload: " << host_state.size() << " host states");
  for (size_t i = 0; i < state_.size(); ++i) {
    ZERO_CHECK(host_state[i].second.dtype() == DType::kF32, "partial offload: host state dtype");
    device_.copy_to_host(host_state[i].second.raw_data(), state_[i]);
  }
}

void PartialOffload::upload_state(const std::vector<std::pair<std::string, Tensor>>& host_state) {
  ZERO_CHECK(host_state.size() == state_.size(), "partial offload: " << host_state.size() << " host states");
  for (size_t i = 0; i < state_.size(); ++i) device_.copy_from_host(state_[i], host_state[i].second.raw_data());
}

}  // namespace zero::engine
